package tilecache

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/ogc"
	"github.com/tilecache/caddy-tilecache/module/params"
)

// TMS 1.0.0 (OSGeo Tile Map Service). A tile map is a layer in one gridset
// and one format, named <layer>@<gridset>@<ext> as GeoWebCache names them;
// y counts from the bottom, as GeoWebCache's index does.
//
//	<tms>/                                     the service versions
//	<tms>/1.0.0/                               TileMapService: every tile map
//	<tms>/1.0.0/<layer>@<gridset>@<ext>        TileMap
//	<tms>/1.0.0/<layer>@<gridset>@<ext>/<z>/<x>/<y>.<ext>

const tmsVersion = "1.0.0"

// tmsAnswer is what a TMS request asks for: a tile or one of the documents.
type tmsAnswer struct {
	tile tileRequest
	doc  func(base string) any // nil for a tile
}

func (s *services) serveTMS(w http.ResponseWriter, r *http.Request, segs []string) error {
	if !methodAllowed(w, r) {
		return nil
	}
	a, e := s.routeTMS(r, segs)
	switch {
	case e != nil:
		writeText(w, e)
		return nil
	case a.doc != nil:
		return writeXML(w, r, http.StatusOK, a.doc(serviceURL(r, s.tms)))
	}
	return s.cache.serveTile(w, r, &a.tile)
}

func (s *services) routeTMS(r *http.Request, segs []string) (a tmsAnswer, e *svcError) {
	// A trailing slash names the same document.
	if n := len(segs); n > 0 && segs[n-1] == "" {
		segs = segs[:n-1]
	}
	notFound := func(format string, args ...any) (tmsAnswer, *svcError) {
		return a, errorf(http.StatusNotFound, "", "", format, args...)
	}
	switch {
	case len(segs) == 0:
		a.doc = func(base string) any { return s.tmsRoot(base) }
		return a, nil
	case segs[0] != tmsVersion:
		return notFound("no such TMS resource: the service is at %s/", tmsVersion)
	case len(segs) == 1:
		a.doc = func(base string) any { return s.tileMapService(base) }
		return a, nil
	}
	l, g, f, ok := s.tileMap(segs[1])
	if !ok {
		return notFound("no tile map %q: tile maps are <layer>@<gridset>@<ext>, listed at %s/", segs[1], tmsVersion)
	}
	switch len(segs) {
	case 2:
		a.doc = func(base string) any { return s.tmsTileMap(base, l, g, f) }
		return a, nil
	case 5:
	default:
		return notFound("no such TMS resource: a tile is %s/<z>/<x>/<y>.%s", segs[1], f.Extension())
	}
	ys, ext, ok := splitExt(segs[4])
	if !ok || l.formatByExt(ext) != f {
		return notFound("no such TMS resource: a tile of %s is <z>/<x>/<y>.%s", segs[1], f.Extension())
	}
	z, okZ := parseIndex(segs[2])
	x, okX := parseIndex(segs[3])
	y, okY := parseIndex(ys)
	if !okZ || !okX || !okY {
		return a, errorf(http.StatusBadRequest, "", "", "tile coordinates must be whole numbers: %s/%s/%s", segs[2], segs[3], ys)
	}
	if z >= int64(len(g.Levels)) {
		return notFound("tile map %s has no level %d", segs[1], z)
	}
	idx := gridset.Index{X: x, Y: y, Z: int(z)}
	if e := notCached(l, g, idx, idx.Y); e != nil {
		return a, e
	}
	v, e := s.tileParams(r, l)
	if e != nil {
		return a, e
	}
	a.tile = tileRequest{layer: l, grid: g, format: f, index: idx, params: v}
	return a, nil
}

// notCached is the 404 of a TMS or XYZ tile the layer does not cache; y is
// the row as the client counts it, for the message.
func notCached(l *Layer, g *Grid, idx gridset.Index, y int64) *svcError {
	switch checkTile(g, idx) {
	case zoomOut:
		return errorf(http.StatusNotFound, "", "", "layer %s is not cached at level %d of %s (cached: %d to %d)",
			l.Name, idx.Z, g.Name, g.MinZoom, g.MaxZoom)
	case colOut, rowOut:
		return errorf(http.StatusNotFound, "", "", "tile %d/%d/%d is outside layer %s in %s",
			idx.Z, idx.X, y, l.Name, g.Name)
	}
	return nil
}

// tileMapID names a tile map: <layer>@<gridset>@<ext>.
func tileMapID(l *Layer, g *Grid, f *Format) string {
	return l.Name + "@" + g.Name + "@" + f.Extension()
}

// tileMap finds the tile map named id. Layer and gridset names may hold
// "@": every split is tried.
func (s *services) tileMap(id string) (*Layer, *Grid, *Format, bool) {
	i := strings.LastIndexByte(id, '@')
	if i < 0 {
		return nil, nil, nil, false
	}
	rest, ext := id[:i], id[i+1:]
	for j := 0; j < len(rest); j++ {
		if rest[j] != '@' {
			continue
		}
		l := s.cache.layers[rest[:j]]
		if l == nil {
			continue
		}
		g, ok := l.Grid(rest[j+1:])
		f := l.formatByExt(ext)
		// Only the canonical extension names the tile map, so that one
		// tile map has one name (and one set of URLs).
		if ok && f != nil && f.Extension() == ext {
			return l, g, f, true
		}
	}
	return nil, nil, nil, false
}

// tmsProfile is the TMS profile of a gridset: the two global ones are
// GeoWebCache's built-ins, anything else is local.
func tmsProfile(g *gridset.Gridset) string {
	if b, ok := gridset.Builtin(g.Name); ok && b == g {
		switch g.Name {
		case "EPSG:4326":
			return "global-geodetic"
		case "EPSG:900913":
			return "global-mercator"
		}
	}
	return "local"
}

// hasTiles reports whether the layer caches any tile of g.
func (g *Grid) hasTiles() bool {
	for z := g.MinZoom; z <= g.MaxZoom; z++ {
		if !g.Coverage[z].Empty() {
			return true
		}
	}
	return false
}

func (s *services) tmsRoot(base string) *ogc.TMSRoot {
	return &ogc.TMSRoot{Services: []ogc.TMSServiceEntry{{
		Title: "tile_cache TMS", Version: tmsVersion, Href: base + "/" + tmsVersion + "/",
	}}}
}

func (s *services) tileMapService(base string) *ogc.TileMapService {
	doc := &ogc.TileMapService{Version: tmsVersion, Services: base + "/", Title: "tile_cache TMS",
		Abstract: "Every cached layer, in each of its gridsets and formats."}
	for _, l := range s.cache.order {
		for _, g := range l.Grids {
			if !g.hasTiles() {
				continue
			}
			for _, f := range l.extFormats() {
				doc.TileMaps = append(doc.TileMaps, ogc.TileMapEntry{
					Title:   l.Name,
					SRS:     fmt.Sprintf("EPSG:%d", g.SRS),
					Profile: tmsProfile(g.Gridset),
					Href:    base + "/" + tmsVersion + "/" + escapePath(tileMapID(l, g, f)),
				})
			}
		}
	}
	return doc
}

// tmsTileMap describes one tile map. Origin is the bottom-left corner of
// the gridset's extent: where tile 0,0 starts for bottom-aligned gridsets
// (and top-aligned ones whose extent is a whole number of tiles).
func (s *services) tmsTileMap(base string, l *Layer, g *Grid, f *Format) *ogc.TileMap {
	href := base + "/" + tmsVersion + "/" + escapePath(tileMapID(l, g, f))
	doc := &ogc.TileMap{
		Version:        tmsVersion,
		TileMapService: base + "/" + tmsVersion + "/",
		Title:          l.Name,
		SRS:            fmt.Sprintf("EPSG:%d", g.SRS),
		BoundingBox: ogc.TMSBoundingBox{MinX: ogc.Num(g.Area.MinX), MinY: ogc.Num(g.Area.MinY),
			MaxX: ogc.Num(g.Area.MaxX), MaxY: ogc.Num(g.Area.MaxY)},
		Origin:     ogc.TMSOrigin{X: ogc.Num(g.Gridset.Extent.MinX), Y: ogc.Num(g.Gridset.Extent.MinY)},
		TileFormat: ogc.TMSTileFormat{Width: g.TileWidth, Height: g.TileHeight, MIMEType: f.MIME, Extension: f.Extension()},
		TileSets:   ogc.TMSTileSets{Profile: tmsProfile(g.Gridset)},
	}
	for z := g.MinZoom; z <= g.MaxZoom; z++ {
		doc.TileSets.TileSets = append(doc.TileSets.TileSets, ogc.TMSTileSet{
			Href: fmt.Sprintf("%s/%d", href, z), UnitsPerPixel: ogc.Num(g.Levels[z].Resolution), Order: z,
		})
	}
	return doc
}

// tileParams runs a TMS or XYZ tile's query (STYLES and other parameter
// filters) through the layer's filters.
func (s *services) tileParams(r *http.Request, l *Layer) (params.Values, *svcError) {
	var q query
	if e := s.scanQuery(r.URL.RawQuery, stylesName, &q); e != nil {
		return params.Values{}, e
	}
	v, pe := l.filter(q.fields[0], q.extras())
	if pe != nil {
		return params.Values{}, filterError(l, pe)
	}
	return v, nil
}

// stylesName: TMS and XYZ have no parameters of their own but STYLES,
// which the layer's filters read like WMS-C's.
var stylesName = []string{"STYLES"}
