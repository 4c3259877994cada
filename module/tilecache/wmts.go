package tilecache

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/ogc"
)

// WMTS 1.0.0. Tile matrix sets are the gridsets (identifier = gridset
// name), tile matrices their levels (identifier = GeoWebCache's level name,
// "EPSG:4326:3"), rows count from the top: row = TilesHigh-1-y.
//
//	KVP:  <wmts>?SERVICE=WMTS&REQUEST=GetCapabilities
//	      <wmts>?SERVICE=WMTS&REQUEST=GetTile&LAYER=&STYLE=&TILEMATRIXSET=&TILEMATRIX=&TILEROW=&TILECOL=&FORMAT=
//	REST: <wmts>/1.0.0/WMTSCapabilities.xml
//	      <wmts>/1.0.0/<layer>/<style>/<TileMatrixSet>/<TileMatrix>/<TileRow>/<TileCol>.<ext>
//
// Other parameter filters than STYLES are query parameters on either form.

const wmtsCapabilitiesPath = "1.0.0/WMTSCapabilities.xml"

// the KVP parameters of WMTS requests, by position in query.fields (the
// rest are parameter filters). STYLES is here to be refused: WMTS names
// the style in STYLE.
const (
	wService = iota
	wRequest
	wVersion
	wLayer
	wStyle
	wTileMatrixSet
	wTileMatrix
	wTileRow
	wTileCol
	wFormat
	wStyles
)

var wmtsNames = []string{"SERVICE", "REQUEST", "VERSION", "LAYER", "STYLE", "TILEMATRIXSET", "TILEMATRIX",
	"TILEROW", "TILECOL", "FORMAT", "STYLES", "ACCEPTVERSIONS", "SECTIONS", "UPDATESEQUENCE", "ACCEPTFORMATS", "ACCEPTLANGUAGES"}

// wmtsTile is a GetTile's tile coordinates as sent, before any checking.
type wmtsTile struct {
	layer, style      string
	matrixSet, matrix string
	row, col          string
	// format is KVP's FORMAT (a MIME type), ext REST's file extension.
	format, ext string
}

func (s *services) serveWMTS(w http.ResponseWriter, r *http.Request, segs []string) error {
	if !methodAllowed(w, r) {
		return nil
	}
	tr, caps, e := s.routeWMTS(r, segs)
	switch {
	case e != nil:
		return writeXML(w, r, e.status, ogc.NewExceptionReport(e.code, e.locator, e.msg))
	case caps:
		return writeXML(w, r, http.StatusOK, s.wmtsCapabilities(serviceURL(r, s.wmts)))
	}
	return s.cache.serveTile(w, r, &tr)
}

// routeWMTS decides what a WMTS request is: a tile, the capabilities
// (caps), or an error.
func (s *services) routeWMTS(r *http.Request, segs []string) (tr tileRequest, caps bool, e *svcError) {
	var q query
	if e := s.scanQuery(r.URL.RawQuery, wmtsNames, &q); e != nil {
		return tr, false, e
	}
	switch {
	case len(segs) == 0 || len(segs) == 1 && segs[0] == "":
		return s.routeWMTSKVP(&q)
	case len(segs) >= 1 && segs[0] == "1.0.0" && strings.Join(segs, "/") == wmtsCapabilitiesPath:
		return tr, true, nil
	case len(segs) == 7 && segs[0] == "1.0.0":
		col, ext, ok := splitExt(segs[6])
		if !ok {
			return tr, false, errorf(http.StatusNotFound, ogc.CodeNoApplicableCode, "",
				"no such WMTS resource: a tile is <layer>/<style>/<TileMatrixSet>/<TileMatrix>/<TileRow>/<TileCol>.<ext>")
		}
		tr, e = s.wmtsTile(&wmtsTile{layer: segs[1], style: segs[2], matrixSet: segs[3], matrix: segs[4],
			row: segs[5], col: col, ext: ext}, &q)
		return tr, false, e
	}
	return tr, false, errorf(http.StatusNotFound, ogc.CodeNoApplicableCode, "",
		"no such WMTS resource: use ?SERVICE=WMTS&REQUEST=GetCapabilities or %s", wmtsCapabilitiesPath)
}

func (s *services) routeWMTSKVP(q *query) (tr tileRequest, caps bool, e *svcError) {
	f := &q.fields
	req := f[wRequest]
	service := f[wService]
	// QGIS, given the plain WMTS URL, first asks it for WMS capabilities;
	// GeoWebCache answers the WMTS ones (outside its CITE mode), so do we.
	if strings.EqualFold(req, "GetCapabilities") && (strings.EqualFold(service, "WMS") || strings.EqualFold(service, "WMTS") || !q.seen[wService]) {
		return tr, true, nil
	}
	if q.seen[wService] && !strings.EqualFold(service, "WMTS") {
		return tr, false, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Service", "SERVICE must be WMTS, not %q", service)
	}
	switch {
	case req == "":
		return tr, false, errorf(http.StatusBadRequest, ogc.CodeMissingParameterValue, "Request", "REQUEST is missing (GetCapabilities or GetTile)")
	case !strings.EqualFold(req, "GetTile"):
		return tr, false, errorf(http.StatusNotImplemented, ogc.CodeOperationNotSupported, "Request",
			"request %q is not supported: GetCapabilities or GetTile", req)
	}
	if q.seen[wVersion] && f[wVersion] != "1.0.0" {
		return tr, false, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Version", "VERSION must be 1.0.0, not %q", f[wVersion])
	}
	for _, k := range []struct {
		field   int
		locator string
	}{
		{wLayer, "Layer"}, {wTileMatrixSet, "TileMatrixSet"}, {wTileMatrix, "TileMatrix"},
		{wTileRow, "TileRow"}, {wTileCol, "TileCol"}, {wFormat, "Format"},
	} {
		if f[k.field] == "" {
			return tr, false, errorf(http.StatusBadRequest, ogc.CodeMissingParameterValue, k.locator, "%s is missing", wmtsNames[k.field])
		}
	}
	tr, e = s.wmtsTile(&wmtsTile{layer: f[wLayer], style: f[wStyle], matrixSet: f[wTileMatrixSet],
		matrix: f[wTileMatrix], row: f[wTileRow], col: f[wTileCol], format: f[wFormat]}, q)
	return tr, false, e
}

// wmtsTile checks a GetTile (KVP or REST) and finds its tile; q holds the
// request's other parameters, for the layer's filters.
func (s *services) wmtsTile(t *wmtsTile, q *query) (tileRequest, *svcError) {
	var tr tileRequest
	l := s.cache.layers[t.layer]
	if l == nil {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Layer", "unknown layer %q", t.layer)
	}
	if q.seen[wStyles] {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "STYLES",
			"WMTS names the style in STYLE (or the path), not STYLES")
	}
	styles, e := l.styleValue(t.style)
	if e != nil {
		return tr, e
	}
	var f *Format
	if t.ext != "" {
		f = l.formatByExt(t.ext)
		if f == nil {
			return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Format",
				"layer %s is not cached as .%s", l.Name, t.ext)
		}
	} else if f, _ = l.Format(t.format); f == nil {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Format",
			"layer %s is not cached in format %q", l.Name, t.format)
	}
	v, pe := l.filter(styles, q.extras())
	if pe != nil {
		return tr, filterError(l, pe)
	}
	ms := s.matrixSet(t.matrixSet)
	var g *Grid
	if ms != nil {
		g, _ = l.Grid(ms.grid.Name)
	}
	if g == nil {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "TileMatrixSet",
			"layer %s has no TileMatrixSet %q", l.Name, t.matrixSet)
	}
	z := slices.Index(ms.matrices, t.matrix)
	if z < 0 {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "TileMatrix",
			"TileMatrixSet %s has no TileMatrix %q", ms.id, t.matrix)
	}
	row, ok1 := parseIndex(t.row)
	if !ok1 {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "TileRow", "TileRow %q is not a whole number", t.row)
	}
	col, ok2 := parseIndex(t.col)
	if !ok2 {
		return tr, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "TileCol", "TileCol %q is not a whole number", t.col)
	}
	lv := g.Levels[z]
	idx := gridset.Index{X: col, Y: -1, Z: z}
	if row < lv.TilesHigh {
		idx.Y = flipY(lv, row)
	}
	switch checkTile(g, idx) {
	case zoomOut:
		return tr, errorf(http.StatusBadRequest, ogc.CodeTileOutOfRange, "TileMatrix",
			"layer %s is not cached at TileMatrix %s (cached: %s to %s)", l.Name, t.matrix,
			ms.matrices[g.MinZoom], ms.matrices[g.MaxZoom])
	case rowOut:
		lim := ms.limits(g, z)
		return tr, errorf(http.StatusBadRequest, ogc.CodeTileOutOfRange, "TileRow",
			"TileRow %d is outside %d..%d for layer %s at TileMatrix %s", row, lim.MinTileRow, lim.MaxTileRow, l.Name, t.matrix)
	case colOut:
		lim := ms.limits(g, z)
		return tr, errorf(http.StatusBadRequest, ogc.CodeTileOutOfRange, "TileCol",
			"TileCol %d is outside %d..%d for layer %s at TileMatrix %s", col, lim.MinTileCol, lim.MaxTileCol, l.Name, t.matrix)
	}
	return tileRequest{layer: l, grid: g, format: f, index: idx, params: v}, nil
}

// limits is the layer's coverage at level z in WMTS rows and columns.
func (ms *matrixSet) limits(g *Grid, z int) ogc.TileMatrixLimits {
	c := g.Coverage[z]
	lv := g.Levels[z]
	return ogc.TileMatrixLimits{
		TileMatrix: ms.matrices[z],
		MinTileRow: flipY(lv, c.MaxY), MaxTileRow: flipY(lv, c.MinY),
		MinTileCol: c.MinX, MaxTileCol: c.MaxX,
	}
}

// topLeftCorner is the top-left corner of level z's tile matrix, x/y
// order. A bottom-aligned gridset's grid tops out where its whole tiles
// end, which may be above the extent; it is snapped to the extent's top
// when it is that within rounding.
func topLeftCorner(g *gridset.Gridset, z int) (x, y float64) {
	if g.TopLeft {
		return g.Extent.MinX, g.Extent.MaxY
	}
	lv := g.Levels[z]
	h := lv.Resolution * float64(g.TileHeight)
	top := g.Extent.MinY + h*float64(lv.TilesHigh)
	if math.Abs(top-g.Extent.MaxY) < h*1e-9 {
		top = g.Extent.MaxY
	}
	return g.Extent.MinX, top
}

// wmtsCapabilities is the capabilities document; base is the absolute URL
// of the WMTS prefix.
func (s *services) wmtsCapabilities(base string) *ogc.Capabilities {
	c := ogc.NewCapabilities()
	c.ServiceIdentification = ogc.ServiceIdentification{
		Title:              "tile_cache WMTS",
		ServiceType:        "OGC WMTS",
		ServiceTypeVersion: "1.0.0",
	}
	kvp := ogc.Get{Href: base + "?", Constraint: ogc.Constraint{Name: "GetEncoding", Values: []string{"KVP"}}}
	c.OperationsMetadata.Operations = []ogc.Operation{
		{Name: "GetCapabilities", Gets: []ogc.Get{kvp}},
		{Name: "GetTile", Gets: []ogc.Get{kvp}},
	}
	c.ServiceMetadataURL = &ogc.Href{Href: base + "/" + wmtsCapabilitiesPath}
	for _, l := range s.cache.order {
		wl := ogc.Layer{
			Title:      l.Name,
			Identifier: l.Name,
			WGS84BoundingBox: ogc.BoundingBox{
				LowerCorner: ogc.Pair{l.WGS84.MinX, l.WGS84.MinY},
				UpperCorner: ogc.Pair{l.WGS84.MaxX, l.WGS84.MaxY},
			},
		}
		for _, st := range l.styles.list {
			wl.Styles = append(wl.Styles, ogc.Style{IsDefault: st.isDefault, Title: st.id, Identifier: st.id})
		}
		for _, f := range l.Formats {
			wl.Formats = append(wl.Formats, f.Name)
		}
		for _, ms := range s.matrixSets {
			g, ok := l.Grid(ms.grid.Name)
			if !ok {
				continue
			}
			var lim ogc.TileMatrixSetLimits
			for z := g.MinZoom; z <= g.MaxZoom; z++ {
				if !g.Coverage[z].Empty() {
					lim.Limits = append(lim.Limits, ms.limits(g, z))
				}
			}
			if len(lim.Limits) == 0 {
				continue // the layer has no tile in this gridset
			}
			wl.TileMatrixSetLink = append(wl.TileMatrixSetLink, ogc.TileMatrixSetLink{TileMatrixSet: ms.id, TileMatrixSetLimits: &lim})
			// The area in the matrix set's own CRS: clients that only had
			// the lon/lat box projected it (GDAL made a web-mercator
			// dataset 242,528 km tall and lost levels to it).
			if !slices.ContainsFunc(wl.BoundingBoxes, func(b ogc.BoundingBox) bool { return b.CRS == ms.crs }) {
				wl.BoundingBoxes = append(wl.BoundingBoxes, ogc.BoundingBox{
					CRS:         ms.crs,
					LowerCorner: axisOrder(g.Gridset, g.Area.MinX, g.Area.MinY),
					UpperCorner: axisOrder(g.Gridset, g.Area.MaxX, g.Area.MaxY),
				})
			}
		}
		if len(wl.TileMatrixSetLink) == 0 {
			continue
		}
		for _, f := range l.extFormats() {
			wl.ResourceURLs = append(wl.ResourceURLs, ogc.ResourceURL{
				Format:       f.Name,
				ResourceType: "tile",
				Template: base + "/1.0.0/" + escapePath(l.Name) +
					"/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}." + f.Extension(),
			})
		}
		c.Contents.Layers = append(c.Contents.Layers, wl)
	}
	for _, ms := range s.matrixSets {
		g := ms.grid
		set := ogc.TileMatrixSet{Identifier: ms.id, SupportedCRS: ms.crs}
		for z, lv := range g.Levels {
			x, y := topLeftCorner(g, z)
			set.TileMatrices = append(set.TileMatrices, ogc.TileMatrix{
				Identifier:       ms.matrices[z],
				ScaleDenominator: ogc.Num(lv.ScaleDenominator),
				TopLeftCorner:    axisOrder(g, x, y),
				TileWidth:        g.TileWidth,
				TileHeight:       g.TileHeight,
				MatrixWidth:      lv.TilesWide,
				MatrixHeight:     lv.TilesHigh,
			})
		}
		c.Contents.TileMatrixSets = append(c.Contents.TileMatrixSets, set)
	}
	return c
}

// axisOrder writes a point in the axis order of the gridset's CRS, as
// OWS corners are (latitude first for EPSG:4326).
func axisOrder(g *gridset.Gridset, x, y float64) ogc.Pair {
	if g.YFirst {
		return ogc.Pair{y, x}
	}
	return ogc.Pair{x, y}
}

// matrixSet is a WMTS TileMatrixSet: a gridset under an identifier, with
// the identifiers of its levels.
type matrixSet struct {
	id       string
	grid     *gridset.Gridset
	crs      string   // SupportedCRS, a URN
	matrices []string // TileMatrix identifiers by level
}

// webMercatorAlias is the name under which the spherical-Mercator gridset
// is offered a second time. GeoWebCache calls it EPSG:900913, which QGIS
// takes for another CRS than its EPSG:3857 project and reprojects (a 1-px
// seam at tile edges); under its own code the same tiles need no warping.
const webMercatorAlias = "EPSG:3857"

// compileMatrixSets lists the cache's gridsets as matrix sets, each under
// its name, and the built-in EPSG:900913 also as EPSG:3857 (the same
// tiles and cache entries) unless a gridset of that name exists.
func compileMatrixSets(c *Cache) []*matrixSet {
	var out []*matrixSet
	hasAliasName := slices.ContainsFunc(c.grids, func(g *gridset.Gridset) bool { return g.Name == webMercatorAlias })
	for _, g := range c.grids {
		ms := &matrixSet{id: g.Name, grid: g, crs: fmt.Sprintf("urn:ogc:def:crs:EPSG::%d", g.SRS)}
		for _, lv := range g.Levels {
			ms.matrices = append(ms.matrices, lv.Name)
		}
		out = append(out, ms)
		if g.Name == "EPSG:900913" && !hasAliasName {
			alias := &matrixSet{id: webMercatorAlias, grid: g, crs: "urn:ogc:def:crs:EPSG::3857"}
			for z := range g.Levels {
				alias.matrices = append(alias.matrices, fmt.Sprintf("%s:%d", webMercatorAlias, z))
			}
			out = append(out, alias)
		}
	}
	return out
}

// matrixSet finds a matrix set by identifier; nil if there is none.
func (s *services) matrixSet(id string) *matrixSet {
	for _, ms := range s.matrixSets {
		if ms.id == id {
			return ms
		}
	}
	return nil
}
