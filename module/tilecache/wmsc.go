package tilecache

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/ogc"
)

// WMS-C's tiled capabilities: GetCapabilities with the vendor parameter
// TILED=true, as GeoWebCache serves it. The handler answers it itself for
// its cache's layers (the upstream knows nothing of tile sets); every
// other GetCapabilities goes to the upstream as before. QGIS's and GDAL's
// tiled-WMS modes read the TileSets and then send GetMaps that each hit
// exactly one cached tile.

// isTiledCapabilities reports whether a WMS request asks for the WMS-C
// capabilities. TILED is neutral to the scanner (GetMaps carry it), so
// a GetCapabilities, never on the tile path, reads the query again for it.
func isTiledCapabilities(q *query, raw string) bool {
	f := &q.fields
	if !strings.EqualFold(f[fRequest], "GetCapabilities") || q.seen[fService] && !strings.EqualFold(f[fService], "WMS") {
		return false
	}
	v, _ := url.ParseQuery(raw)
	for k, vs := range v {
		if strings.EqualFold(k, "TILED") && len(vs) == 1 && strings.EqualFold(vs[0], "true") {
			return true
		}
	}
	return false
}

// wmscMIME is WMS 1.1.1's capabilities type.
const wmscMIME = "application/vnd.ogc.wms_xml"

func (c *Cache) serveTiledCapabilities(w http.ResponseWriter, r *http.Request) error {
	// The GetMap address is the one this request came to, as the client
	// addressed it (before any handle_path).
	b, err := ogc.MarshalWMS(c.tiledCapabilities(httpx.Origin(r) + httpx.OriginalPath(r) + "?"))
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	hd := w.Header()
	hd.Set("Content-Type", wmscMIME)
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return nil
}

// srsNames are the SRS values under which clients may ask for a gridset's
// tiles: its own, and for the spherical Mercator also EPSG:3857, which
// QGIS and GDAL tell apart from EPSG:900913.
func srsNames(g *gridset.Gridset) []string {
	own := fmt.Sprintf("EPSG:%d", g.SRS)
	if gridset.CanonicalSRS(g.SRS) == 900913 && own != webMercatorAlias {
		return []string{own, webMercatorAlias}
	}
	return []string{own}
}

// tiledCapabilities is the WMS-C document for the cache's layers; url is
// the GetMap address, ending in "?".
func (c *Cache) tiledCapabilities(url string) *ogc.WMSCapabilities {
	doc := &ogc.WMSCapabilities{
		Version: "1.1.1",
		Service: ogc.WMSService{Name: "OGC:WMS", Title: "tile_cache WMS-C", OnlineResource: ogc.Link(url)},
	}
	cp := &doc.Capability
	cp.Request.GetCapabilities = ogc.WMSOperation{Formats: []string{wmscMIME}, Get: ogc.Link(url)}
	cp.Request.GetMap.Get = ogc.Link(url)
	cp.Exception = []string{"application/vnd.ogc.se_xml"}
	cp.Layer = ogc.WMSLayer{Title: "tile_cache WMS-C",
		LatLonBoundingBox: &ogc.WMSBoundingBox{MinX: -180, MinY: -90, MaxX: 180, MaxY: 90}}
	for _, l := range c.order {
		wl := ogc.WMSLayer{Opaque: boolInt(!l.transparent), Name: l.Name, Title: l.Name,
			LatLonBoundingBox: &ogc.WMSBoundingBox{MinX: ogc.Num(l.WGS84.MinX), MinY: ogc.Num(l.WGS84.MinY),
				MaxX: ogc.Num(l.WGS84.MaxX), MaxY: ogc.Num(l.WGS84.MaxY)}}
		for _, st := range l.styles.list {
			wl.Styles = append(wl.Styles, ogc.WMSStyle{Name: st.value, Title: st.id})
		}
		for _, f := range l.Formats {
			if !slices.Contains(cp.Request.GetMap.Formats, f.Name) {
				cp.Request.GetMap.Formats = append(cp.Request.GetMap.Formats, f.Name)
			}
		}
		for _, g := range l.Grids {
			if g.Coverage[g.MinZoom].Empty() && g.Coverage[g.MaxZoom].Empty() {
				continue // no tile of the layer in this gridset
			}
			res := make([]string, 0, g.MaxZoom-g.MinZoom+1)
			for z := g.MinZoom; z <= g.MaxZoom; z++ {
				res = append(res, strconv.FormatFloat(g.Levels[z].Resolution, 'f', -1, 64))
			}
			for _, srs := range srsNames(g.Gridset) {
				wl.SRS = append(wl.SRS, srs)
				wl.BoundingBoxes = append(wl.BoundingBoxes, ogc.WMSBoundingBox{SRS: srs,
					MinX: ogc.Num(g.Area.MinX), MinY: ogc.Num(g.Area.MinY), MaxX: ogc.Num(g.Area.MaxX), MaxY: ogc.Num(g.Area.MaxY)})
				if !slices.Contains(cp.Layer.SRS, srs) {
					cp.Layer.SRS = append(cp.Layer.SRS, srs)
				}
				// The tile sets' box is the gridset's extent, whose corners
				// are on tile boundaries: clients count tiles from it.
				e := g.Extent
				box := ogc.WMSBoundingBox{SRS: srs, MinX: ogc.Num(e.MinX), MinY: ogc.Num(e.MinY), MaxX: ogc.Num(e.MaxX), MaxY: ogc.Num(e.MaxY)}
				for _, f := range l.Formats {
					for _, style := range wmscStyles(l) {
						cp.VendorSpecificCapabilities = append(cp.VendorSpecificCapabilities, ogc.WMSCTileSet{
							SRS: srs, BoundingBox: box, Resolutions: strings.Join(res, " "),
							Width: g.TileWidth, Height: g.TileHeight, Format: f.Name, Layers: l.Name, Styles: style,
						})
					}
				}
			}
		}
		cp.Layer.Layers = append(cp.Layer.Layers, wl)
	}
	return doc
}

// wmscStyles are the STYLES values of a layer's tile sets: the empty one
// (the default) first, as clients that keep one tile set per layer and SRS
// take the first, then the other values its STYLES filter allows.
func wmscStyles(l *Layer) []string {
	out := []string{""}
	for _, st := range l.styles.list {
		if !st.isDefault && st.value != "" {
			out = append(out, st.value)
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
