package tilecache

import (
	"errors"
	"net/url"
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

// the parameters every tile request has, by position in wmsRequest.fields
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
	nFields
)

var fieldNames = [nFields]string{"SERVICE", "VERSION", "REQUEST", "LAYERS", "STYLES", "SRS", "CRS", "BBOX", "WIDTH", "HEIGHT", "FORMAT"}

// wmsRequest holds a GetMap's parameters. Keys are matched
// case-insensitively without allocating; values are unescaped only when
// they need it.
type wmsRequest struct {
	fields [nFields]string
	seen   [nFields]bool
	// extra holds parameters that are neither the standard ones nor
	// neutral; only a layer's parameter filters can accept them. A fixed
	// array keeps the request on the stack; more than fit is not a tile
	// request any layer here is configured for.
	extra  [maxExtra]param
	nExtra int
}

const maxExtra = 8

type param struct{ key, value string }

// parseWMS splits a raw query string. It does not decide anything about
// layers; it only reports malformed or duplicated input.
func (h *Handler) parseWMS(raw string, req *wmsRequest) string {
	limit := h.MaxParamLength
	if limit == 0 {
		limit = DefaultMaxParamLength
	}
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, ok1 := unescape(k)
		v, ok2 := unescape(v)
		if !ok1 || !ok2 || len(k) > limit || len(v) > limit {
			return passMalformed
		}
		i := fieldIndex(k)
		if i >= 0 {
			if req.seen[i] {
				return passDuplicate
			}
			req.fields[i], req.seen[i] = v, true
			continue
		}
		if h.isNeutral(k) {
			continue
		}
		for _, p := range req.extra[:req.nExtra] {
			if strings.EqualFold(p.key, k) {
				return passDuplicate
			}
		}
		if req.nExtra == maxExtra {
			return passUnknownParam
		}
		req.extra[req.nExtra] = param{k, v}
		req.nExtra++
	}
	return ""
}

// DefaultMaxParamLength bounds a tile request's parameter names and values
// (unescaped, in bytes) unless max_param_length says otherwise: no WMS-C
// client sends more, and a filter's regular expression need not see more.
const DefaultMaxParamLength = 1024

func unescape(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

func fieldIndex(k string) int {
	for i, n := range fieldNames {
		if len(n) == len(k) && strings.EqualFold(n, k) {
			return i
		}
	}
	return -1
}

// neutral parameters change nothing about the image a tile request gets,
// or are set by the layer's configuration instead of the client.
var defaultNeutral = []string{"TILED", "TRANSPARENT", "EXCEPTIONS", "TILESORIGIN"}

func (h *Handler) isNeutral(k string) bool {
	for _, n := range h.neutral {
		if strings.EqualFold(n, k) {
			return true
		}
	}
	return false
}

// matchTile decides whether a GetMap is a tile request, and which tile.
// It returns the reason when it is not.
func (h *Handler) matchTile(req *wmsRequest, tr *tileRequest) string {
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
	layer := h.layers[f[fLayers]]
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
	if reason := normalizeParams(layer, req, &tr.params); reason != "" {
		return reason
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
		if idx.Z < g.MinZoom || idx.Z > g.MaxZoom {
			return passZoom
		}
		if !g.Coverage[idx.Z].Contains(idx.X, idx.Y) {
			return passCoverage
		}
		tr.grid, tr.index = g, idx
		return ""
	}
	return reason
}

// normalizeParams runs STYLES and the extra parameters through the layer's
// filters. A request sending none of them (the common case) costs nothing.
func normalizeParams(layer *Layer, req *wmsRequest, out *params.Values) string {
	styles := req.fields[fStyles]
	extra := req.extra[:req.nExtra]
	if len(extra) == 0 && styles == "" {
		*out = layer.Params.Defaults()
		return ""
	}
	raw := make(map[string]string, len(extra)+1)
	if styles != "" {
		if !layer.Params.Has("STYLES") {
			return passParam
		}
		raw["STYLES"] = styles
	}
	for _, p := range extra {
		if !layer.Params.Has(p.key) {
			return passUnknownParam
		}
		raw[p.key] = p.value
	}
	v, err := layer.Params.Normalize(raw)
	if err != nil {
		return passParam
	}
	*out = v
	return ""
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
