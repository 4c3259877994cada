package tilecache

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
)

// tileRequest is a GetMap that hits exactly one cached tile.
type tileRequest struct {
	layer  *Layer
	grid   *Grid
	format *Format
	index  gridset.Index
	params params.Values
}

// Why a request is not answered from the cache. The values are short, stable
// codes: they go into a response header and a metric label.
const (
	passNotGetMap    = "not-getmap"
	passLayer        = "unknown-layer"
	passFormat       = "format"
	passSRS          = "srs"
	passSize         = "size"
	passBBox         = "bbox"
	passParam        = "parameter"
	passDuplicate    = "duplicate-parameter"
	passZoom         = "zoom-not-cached"
	passCoverage     = "outside-extent"
	passMalformed    = "malformed"
	passVersion      = "version"
	passMethod       = "method"
	passUnknownParam = "unknown-parameter"
)

// the parameters every GetMap has, by position in query.fields
const (
	fService = iota
	fVersion
	fRequest
	fLayers
	fStyles
	fSRS
	fCRS
	fBBox
	fWidth
	fHeight
	fFormat
)

var wmsNames = []string{"SERVICE", "VERSION", "REQUEST", "LAYERS", "STYLES", "SRS", "CRS", "BBOX", "WIDTH", "HEIGHT", "FORMAT"}

// scanWMS reads a GetMap's query; it decides nothing about layers, only
// reports malformed or duplicated input.
func (c *Cache) scanWMS(raw string, q *query) string {
	switch fault, _ := q.scan(raw, wmsNames, c.neutral, c.cfg.MaxParamLength); fault {
	case queryMalformed:
		return passMalformed
	case queryDuplicate:
		return passDuplicate
	case queryTooMany:
		return passUnknownParam
	}
	return ""
}

// matchTile decides whether a GetMap is a tile request, and which tile.
// It returns the reason when it is not.
func (c *Cache) matchTile(req *query, tr *tileRequest) string {
	f := &req.fields
	if !strings.EqualFold(f[fRequest], "GetMap") {
		return passNotGetMap
	}
	if req.seen[fService] && !strings.EqualFold(f[fService], "WMS") {
		return passNotGetMap
	}
	// WMS 1.3.0 says CRS, earlier versions SRS; a request with the wrong
	// one for its version is not one we can be sure to read right.
	var srsValue string
	var v130 bool
	switch f[fVersion] {
	case "1.3.0":
		v130, srsValue = true, f[fCRS]
		if req.seen[fSRS] {
			return passVersion
		}
	case "1.1.1", "1.1.0", "1.0.0", "":
		srsValue = f[fSRS]
		if req.seen[fCRS] {
			return passVersion
		}
	default:
		return passVersion
	}
	layer := c.layers[f[fLayers]]
	if layer == nil {
		return passLayer
	}
	tr.layer = layer
	format, ok := layer.Format(f[fFormat])
	if !ok {
		return passFormat
	}
	tr.format = format
	// Styles and the other extra parameters go through the layer's filters.
	v, perr := layer.filter(f[fStyles], req.extras())
	switch {
	case perr == nil:
		tr.params = v
	case perr.unknown:
		return passUnknownParam
	default:
		return passParam
	}
	code, forceXY, err := gridset.ParseSRS(srsValue)
	if err != nil {
		return passSRS
	}
	width, err1 := strconv.Atoi(f[fWidth])
	height, err2 := strconv.Atoi(f[fHeight])
	if err1 != nil || err2 != nil {
		return passSize
	}
	bbox, ok := parseBBox(f[fBBox])
	if !ok {
		return passBBox
	}
	reason := passSRS
	for _, g := range layer.Grids {
		if !gridset.SameSRS(g.SRS, code) {
			continue
		}
		b := bbox
		if v130 && g.YFirst && !forceXY {
			b = gridset.BBox{MinX: bbox.MinY, MinY: bbox.MinX, MaxX: bbox.MaxY, MaxY: bbox.MaxX}
		}
		idx, err := g.Match(b, width, height)
		if err != nil {
			if errors.Is(err, gridset.ErrTileSize) {
				reason = passSize
			} else {
				reason = passBBox
			}
			continue
		}
		switch checkTile(g, idx) {
		case zoomOut:
			return passZoom
		case colOut, rowOut:
			return passCoverage
		}
		tr.grid, tr.index = g, idx
		return ""
	}
	return reason
}

// parseBBox reads "minx,miny,maxx,maxy" without allocating.
func parseBBox(s string) (gridset.BBox, bool) {
	var v [4]float64
	for i := range v {
		var part string
		if i < 3 {
			var ok bool
			part, s, ok = strings.Cut(s, ",")
			if !ok {
				return gridset.BBox{}, false
			}
		} else {
			part = s
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return gridset.BBox{}, false
		}
		v[i] = f
	}
	return gridset.BBox{MinX: v[0], MinY: v[1], MaxX: v[2], MaxY: v[3]}, true
}
