package tilecache

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/demo"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/ogc"
	"github.com/tilecache/caddy-tilecache/module/params"
)

// ServicesConfig turns on the other tile protocols and the demo page. Each
// field is a path prefix (matched against the request path as this handler
// sees it, i.e. after any handle_path stripped its own prefix); "" leaves
// the service off. Every request under a prefix is answered here and never
// reaches the next handler or the upstream.
type ServicesConfig struct {
	// WMTS 1.0.0, KVP at the prefix itself and REST below <prefix>/1.0.0/.
	WMTS string `json:"wmts,omitempty"`
	// TMS 1.0.0 at <prefix>/1.0.0/.
	TMS string `json:"tms,omitempty"`
	// XYZ (slippy map) tiles at <prefix>/<layer>/<gridset>/<z>/<x>/<y>.<ext>.
	XYZ string `json:"xyz,omitempty"`
	// Demo serves the demo page (package demo).
	Demo string `json:"demo,omitempty"`

	once sync.Once
	svc  *services
	err  error
}

// services is the compiled ServicesConfig of one handler. Immutable but
// for the demo handler, built on first use.
type services struct {
	wmts, tms, xyz, demo string // normalized prefixes, "" = off
	routes               []route
	layers               []*svcLayer // configuration order
	byName               map[string]*svcLayer
	gridsets             []*gridset.Gridset // every gridset a layer uses, first use first
	demoInfo             demo.Info

	demoOnce    sync.Once
	demoHandler http.Handler
}

type route struct {
	prefix string
	serve  func(h *Handler, w http.ResponseWriter, r *http.Request, segs []string) error
}

// svcLayer is a layer with what the services need beyond WMS-C.
type svcLayer struct {
	*Layer
	grids  []*svcGrid // parallel to Layer.Grids
	styles []wmtsStyle
	// stylesFilter is the layer's STYLES filter as configured, nil if none.
	stylesFilter *params.FilterConfig
	// defaultIsValue: the STYLES filter accepts "default" as a value of its
	// own, so the WMTS style "default" is that value and not the default.
	defaultIsValue bool
	wgs84          gridset.BBox
}

// svcGrid is a layer's gridset with its cached area in the gridset's units.
type svcGrid struct {
	*Grid
	extent gridset.BBox // within the gridset's extent
}

// wmtsStyle is one WMTS style: its identifier and the STYLES value it means.
type wmtsStyle struct {
	id, value string
	isDefault bool
}

// defaultStyle is the WMTS identifier of the empty STYLES value.
const defaultStyle = "default"

// provisionServices compiles the services configuration. It runs once; a
// later call returns the first result. serveServices calls it on the first
// request; calling it from Provision as well turns a bad configuration into
// a load error.
func (h *Handler) provisionServices() error {
	s := h.Services
	if s == nil {
		return nil
	}
	s.once.Do(func() { s.svc, s.err = h.compileServices() })
	return s.err
}

// normalizePrefix checks a configured prefix and drops a trailing slash.
func normalizePrefix(service, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("services: %s prefix %q must start with /", service, p)
	}
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "", fmt.Errorf("services: %s prefix / would take every request: give a path such as /%s", service, service)
	}
	if strings.ContainsAny(p, "?#") {
		return "", fmt.Errorf("services: %s prefix %q must be a plain path", service, p)
	}
	return p, nil
}

func (h *Handler) compileServices() (*services, error) {
	c := h.Services
	s := &services{byName: make(map[string]*svcLayer, len(h.Layers))}
	var err error
	for _, p := range []struct {
		name  string
		in    string
		out   *string
		serve func(h *Handler, w http.ResponseWriter, r *http.Request, segs []string) error
	}{
		{"wmts", c.WMTS, &s.wmts, (*Handler).serveWMTS},
		{"tms", c.TMS, &s.tms, (*Handler).serveTMS},
		{"xyz", c.XYZ, &s.xyz, (*Handler).serveXYZ},
		{"demo", c.Demo, &s.demo, (*Handler).serveDemo},
	} {
		if *p.out, err = normalizePrefix(p.name, p.in); err != nil {
			return nil, err
		}
		if *p.out == "" {
			continue
		}
		for _, rt := range s.routes {
			if rt.prefix == *p.out {
				return nil, fmt.Errorf("services: %s and another service share the prefix %s", p.name, *p.out)
			}
		}
		s.routes = append(s.routes, route{*p.out, p.serve})
	}
	// A longer prefix nested in a shorter one wins.
	sort.SliceStable(s.routes, func(i, j int) bool { return len(s.routes[i].prefix) > len(s.routes[j].prefix) })

	for i := range h.Layers {
		lc := &h.Layers[i]
		l := h.layers[lc.Name]
		if l == nil {
			return nil, fmt.Errorf("services: layer %q is not compiled", lc.Name)
		}
		sl, err := newSvcLayer(l, lc)
		if err != nil {
			return nil, err
		}
		s.layers = append(s.layers, sl)
		s.byName[l.Name] = sl
		for _, g := range l.Grids {
			if !slices.Contains(s.gridsets, g.Gridset) {
				s.gridsets = append(s.gridsets, g.Gridset)
			}
		}
	}
	s.demoInfo = s.buildDemoInfo(h.Upstream)
	return s, nil
}

func newSvcLayer(l *Layer, lc *LayerConfig) (*svcLayer, error) {
	sl := &svcLayer{Layer: l}
	for i := range lc.Parameters {
		if strings.EqualFold(lc.Parameters[i].Key, "STYLES") {
			sl.stylesFilter = &lc.Parameters[i]
		}
	}
	for _, g := range l.Grids {
		ext := g.Extent
		if e, ok := lc.GridsetExtents[g.Name]; ok {
			ext = gridset.BBox{MinX: e[0], MinY: e[1], MaxX: e[2], MaxY: e[3]}
		} else if lc.Extent != nil {
			ll := gridset.BBox{MinX: lc.Extent[0], MinY: lc.Extent[1], MaxX: lc.Extent[2], MaxY: lc.Extent[3]}
			ext, _ = g.FromLonLat(ll) // compileLayer checked it projects
		}
		sl.grids = append(sl.grids, &svcGrid{Grid: g, extent: intersect(ext, g.Extent)})
	}
	sl.wgs84 = layerWGS84(sl, lc)

	// WMTS styles: the STYLES filter's values, the default first; the
	// empty value is called "default" (unless that is a value itself).
	def := l.Params.Defaults().Get("STYLES")
	if f := sl.stylesFilter; f == nil {
		sl.styles = []wmtsStyle{{id: defaultStyle, value: "", isDefault: true}}
	} else {
		_, err := l.Params.Normalize(map[string]string{"STYLES": defaultStyle})
		sl.defaultIsValue = err == nil
		add := func(v string) {
			id := v
			if v == "" {
				if sl.defaultIsValue {
					return // "default" names the value "default"; "" is only the KVP empty STYLE
				}
				id = defaultStyle
			}
			for _, st := range sl.styles {
				if st.id == id {
					return
				}
			}
			sl.styles = append(sl.styles, wmtsStyle{id: id, value: v, isDefault: v == def})
		}
		add(def)
		for _, v := range f.Values {
			// The normalized spelling (ignore_case filters map to it).
			n, err := l.Params.Normalize(map[string]string{"STYLES": v})
			if err != nil {
				return nil, fmt.Errorf("services: layer %q: STYLES value %q: %v", l.Name, v, err)
			}
			add(n.Get("STYLES"))
		}
	}
	return sl, nil
}

func intersect(a, b gridset.BBox) gridset.BBox {
	return gridset.BBox{MinX: math.Max(a.MinX, b.MinX), MinY: math.Max(a.MinY, b.MinY),
		MaxX: math.Min(a.MaxX, b.MaxX), MaxY: math.Min(a.MaxY, b.MaxY)}
}

// layerWGS84 is the layer's area in lon/lat: the configured extent, or the
// union of its gridset extents that can be unprojected, or the world.
func layerWGS84(sl *svcLayer, lc *LayerConfig) gridset.BBox {
	world := gridset.BBox{MinX: -180, MinY: -90, MaxX: 180, MaxY: 90}
	if lc.Extent != nil {
		return intersect(gridset.BBox{MinX: lc.Extent[0], MinY: lc.Extent[1], MaxX: lc.Extent[2], MaxY: lc.Extent[3]}, world)
	}
	var u gridset.BBox
	found := false
	for _, g := range sl.grids {
		b, ok := toLonLat(g.Gridset, g.extent)
		if !ok {
			continue
		}
		if !found {
			u, found = b, true
			continue
		}
		u = gridset.BBox{MinX: math.Min(u.MinX, b.MinX), MinY: math.Min(u.MinY, b.MinY),
			MaxX: math.Max(u.MaxX, b.MaxX), MaxY: math.Max(u.MaxY, b.MaxY)}
	}
	if !found {
		return world
	}
	return intersect(u, world)
}

// toLonLat unprojects a box of a geographic or spherical Mercator gridset.
func toLonLat(g *gridset.Gridset, b gridset.BBox) (gridset.BBox, bool) {
	switch gridset.CanonicalSRS(g.SRS) {
	case 4326:
		return b, true
	case 900913:
		const r = 6378137.0
		lon := func(x float64) float64 { return x / r * 180 / math.Pi }
		lat := func(y float64) float64 { return (2*math.Atan(math.Exp(y/r)) - math.Pi/2) * 180 / math.Pi }
		return gridset.BBox{MinX: lon(b.MinX), MinY: lat(b.MinY), MaxX: lon(b.MaxX), MaxY: lat(b.MaxY)}, true
	}
	return gridset.BBox{}, false
}

// serveServices answers WMTS, TMS, XYZ and demo-page requests; handled is
// false for anything else, which then goes on as a WMS request.
func (h *Handler) serveServices(w http.ResponseWriter, r *http.Request) (handled bool, err error) {
	if err := h.provisionServices(); err != nil {
		// Without a usable configuration no prefix is known: everything
		// stays WMS. Provision should have refused the config already.
		h.log.Error("services configuration", zap.Error(err))
		return false, nil
	}
	s := h.Services.svc
	p := r.URL.Path
	for _, rt := range s.routes {
		if p == rt.prefix || strings.HasPrefix(p, rt.prefix) && p[len(rt.prefix)] == '/' {
			return true, rt.serve(h, w, r, pathSegments(r, rt.prefix))
		}
	}
	return false, nil
}

// pathSegments splits the path below prefix into unescaped segments: nil
// for the prefix itself, [""] for prefix + "/". It splits the escaped path,
// so a segment may hold an escaped slash (a gridset name with a "/").
func pathSegments(r *http.Request, prefix string) []string {
	n := strings.Count(prefix, "/") + 1 // segments of the prefix, the empty one before its "/" included
	esc := strings.Split(r.URL.EscapedPath(), "/")
	if len(esc) >= n {
		ok := true
		for i, p := range strings.Split(prefix, "/") {
			if u, err := url.PathUnescape(esc[i]); err != nil || u != p {
				ok = false
				break
			}
		}
		if ok {
			out := make([]string, 0, len(esc)-n)
			for _, e := range esc[n:] {
				u, err := url.PathUnescape(e)
				if err != nil {
					u = e
				}
				out = append(out, u)
			}
			if len(out) == 0 {
				return nil
			}
			return out
		}
	}
	rest := strings.TrimPrefix(r.URL.Path, prefix)
	if rest == "" {
		return nil
	}
	return strings.Split(rest[1:], "/")
}

// externalBase is scheme://host followed by the path this handler's paths
// hang from, as the client addressed it: what handle_path stripped, taken
// from Caddy's copy of the original request.
func externalBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	cur := r.URL.EscapedPath()
	mount := ""
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		if orig := or.URL.EscapedPath(); strings.HasSuffix(orig, cur) {
			mount = strings.TrimSuffix(orig, cur)
		}
	}
	return scheme + "://" + r.Host + strings.TrimRight(mount, "/")
}

// escapePath escapes each segment of a path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// serviceURL is the absolute URL of a service prefix for this request.
func serviceURL(r *http.Request, prefix string) string {
	return externalBase(r) + escapePath(prefix)
}

// svcError is a request the services cannot answer with a tile or a
// document: the status, and for WMTS the OWS exception code and locator.
type svcError struct {
	status  int
	code    string
	locator string
	msg     string
}

func (e *svcError) Error() string { return e.msg }

func errorf(status int, code, locator, format string, a ...any) *svcError {
	return &svcError{status: status, code: code, locator: locator, msg: fmt.Sprintf(format, a...)}
}

// writeText answers a TMS or XYZ error: one line of text/plain.
func writeText(w http.ResponseWriter, e *svcError) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	fmt.Fprintf(w, "tile_cache: %s\n", oneLine(e.msg))
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// writeXML answers with a document.
func writeXML(w http.ResponseWriter, r *http.Request, status int, doc any) error {
	b, err := ogc.Marshal(doc)
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/xml; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return nil
}

// methodAllowed answers 405 to anything but GET and HEAD.
func methodAllowed(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeText(w, errorf(http.StatusMethodNotAllowed, "", "", "method %s not allowed: GET or HEAD", r.Method))
	return false
}

// parseQuery splits a raw query into parameters, names compared
// case-insensitively; a name given twice is an error, and so is a name or
// value longer than WMS-C accepts (max_param_length).
func (h *Handler) parseQuery(raw string) ([]param, *svcError) {
	limit := h.MaxParamLength
	if limit == 0 {
		limit = DefaultMaxParamLength
	}
	var out []param
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, ok1 := unescape(k)
		v, ok2 := unescape(v)
		if !ok1 || !ok2 {
			return nil, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "", "malformed query string")
		}
		if len(k) > limit || len(v) > limit {
			return nil, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "", "a parameter name or value is longer than %d bytes", limit)
		}
		for _, p := range out {
			if strings.EqualFold(p.key, k) {
				return nil, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, k, "parameter %s given more than once", k)
			}
		}
		out = append(out, param{k, v})
	}
	return out, nil
}

// filterValues runs a request's extra query parameters, and for WMTS the
// STYLES value its style stands for, through the layer's parameter filters
// exactly as a WMS-C request's: the same values give the same tile set.
// Neutral parameters are ignored; any other parameter must be filtered.
func (h *Handler) filterValues(l *svcLayer, extra []param, wmtsStyle *string) (params.Values, *svcError) {
	raw := make(map[string]string, len(extra)+1)
	for _, p := range extra {
		if h.isNeutral(p.key) {
			continue
		}
		if strings.EqualFold(p.key, "STYLES") {
			if wmtsStyle != nil {
				return params.Values{}, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, p.key,
					"WMTS names the style in STYLE (or the path), not STYLES")
			}
			if p.value == "" && !l.Params.Has("STYLES") {
				continue // as WMS-C: an empty STYLES without a filter is no style
			}
		}
		if !l.Params.Has(p.key) {
			return params.Values{}, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, p.key,
				"layer %s has no parameter filter for %s", l.Name, p.key)
		}
		raw[p.key] = p.value
	}
	if wmtsStyle != nil {
		v, err := l.styleValue(*wmtsStyle)
		if err != nil {
			return params.Values{}, err
		}
		if l.stylesFilter != nil {
			raw["STYLES"] = v
		}
	}
	if len(raw) == 0 {
		return l.Params.Defaults(), nil
	}
	v, err := l.Params.Normalize(raw)
	if err != nil {
		return params.Values{}, errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "", "%v", err)
	}
	return v, nil
}

// styleValue maps a WMTS style to the STYLES value it stands for: "" and
// "default" are the filter's default (unless "default" is one of its
// values); anything else must be a value the STYLES filter accepts.
func (l *svcLayer) styleValue(style string) (string, *svcError) {
	if l.stylesFilter == nil {
		if style == "" || strings.EqualFold(style, defaultStyle) {
			return "", nil
		}
		return "", errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Style",
			"layer %s has no style %q (only %q)", l.Name, style, defaultStyle)
	}
	if style == defaultStyle && !l.defaultIsValue {
		style = ""
	}
	if _, err := l.Params.Normalize(map[string]string{"STYLES": style}); err != nil {
		ids := make([]string, len(l.styles))
		for i, s := range l.styles {
			ids[i] = s.id
		}
		return "", errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Style",
			"layer %s has no style %q (styles: %s)", l.Name, style, strings.Join(ids, ", "))
	}
	return style, nil
}

// grid is the layer's gridset named name.
func (l *svcLayer) grid(name string) *svcGrid {
	for _, g := range l.grids {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// formatByExt is the layer's first format with that file extension
// ("jpg" is "jpeg").
func (l *svcLayer) formatByExt(ext string) *Format {
	ext = strings.ToLower(ext)
	if ext == "jpg" {
		ext = "jpeg"
	}
	for i := range l.Formats {
		if l.Formats[i].Extension() == ext {
			return &l.Formats[i]
		}
	}
	return nil
}

// extFormats are the layer's formats reachable by extension: the first of
// each extension.
func (l *svcLayer) extFormats() []*Format {
	var out []*Format
	for i := range l.Formats {
		if l.formatByExt(l.Formats[i].Extension()) == &l.Formats[i] {
			out = append(out, &l.Formats[i])
		}
	}
	return out
}

// splitExt splits "12.png" into "12" and "png".
func splitExt(s string) (base, ext string, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// parseIndex reads a tile column, row or level: decimal digits only.
func parseIndex(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Where a tile falls outside what a layer caches.
type outOfRange int

const (
	inRange outOfRange = iota
	zoomOut            // level outside the gridset or the layer's cached levels
	colOut             // column outside the gridset or the layer's coverage
	rowOut             // row likewise
)

// checkTile says whether a tile (y from the bottom) is one the layer
// caches, and if not which coordinate is out.
func checkTile(g *Grid, idx gridset.Index) outOfRange {
	if idx.Z < g.MinZoom || idx.Z > g.MaxZoom || idx.Z >= len(g.Levels) {
		return zoomOut
	}
	c := g.Coverage[idx.Z]
	if idx.X < c.MinX || idx.X > c.MaxX {
		return colOut
	}
	if idx.Y < c.MinY || idx.Y > c.MaxY {
		return rowOut
	}
	return inRange
}

// flipY turns a row counted from the top into GeoWebCache's y counted from
// the bottom, and back: the same operation. WMTS and XYZ count rows from
// the top, whatever corner the gridset is aligned to; GeoWebCache's index
// always counts from the bottom.
func flipY(l gridset.Level, row int64) int64 { return l.TilesHigh - 1 - row }

// serveDemo hands the request to the demo page.
func (h *Handler) serveDemo(w http.ResponseWriter, r *http.Request, _ []string) error {
	s := h.Services.svc
	s.demoOnce.Do(func() {
		s.demoHandler = demo.Handler(s.demo, func() demo.Info { return s.demoInfo })
	})
	if s.demoHandler == nil {
		return caddyhttp.Error(http.StatusInternalServerError, errors.New("tile_cache: the demo page is not available"))
	}
	s.demoHandler.ServeHTTP(w, r)
	return nil
}

// buildDemoInfo describes the layers to the demo page. Service URLs are
// relative to the page's directory (<demo>/), so they hold however the
// site mounts this handler. The WMS URL is the upstream's path: the one
// the site passes through to the upstream, which tile_cache answers tiles on.
func (s *services) buildDemoInfo(upstream string) demo.Info {
	dir := s.demo + "/"
	rel := func(target string) string {
		if target == "" || s.demo == "" {
			return ""
		}
		return relativePath(dir, target)
	}
	wms := "/"
	if u, err := url.Parse(upstream); err == nil && u.Path != "" {
		wms = u.Path
	}
	info := demo.Info{WMSURL: rel(wms), WMTSURL: rel(s.wmts), TMSURL: rel(s.tms), XYZURL: rel(s.xyz)}
	for _, l := range s.layers {
		dl := demo.Layer{Name: l.Name}
		for _, f := range l.Formats {
			dl.Formats = append(dl.Formats, f.Name)
		}
		if l.stylesFilter != nil && len(l.stylesFilter.Values) > 0 {
			dl.Styles = append([]string(nil), l.stylesFilter.Values...)
		}
		for _, g := range l.grids {
			dg := demo.Gridset{
				Name:       g.Name,
				SRS:        fmt.Sprintf("EPSG:%d", g.SRS),
				Extent:     [4]float64{g.Gridset.Extent.MinX, g.Gridset.Extent.MinY, g.Gridset.Extent.MaxX, g.Gridset.Extent.MaxY},
				Coverage:   [4]float64{g.extent.MinX, g.extent.MinY, g.extent.MaxX, g.extent.MaxY},
				TileWidth:  g.TileWidth,
				TileHeight: g.TileHeight,
				TopLeft:    g.TopLeft,
				MinZoom:    g.MinZoom,
				MaxZoom:    g.MaxZoom,
			}
			for _, lv := range g.Levels {
				dg.Resolutions = append(dg.Resolutions, lv.Resolution)
			}
			dl.Gridsets = append(dl.Gridsets, dg)
		}
		info.Layers = append(info.Layers, dl)
	}
	return info
}

// relativePath is the relative reference from the directory dir (ending in
// "/") to the absolute path target, escaped.
func relativePath(dir, target string) string {
	from := strings.Split(strings.Trim(dir, "/"), "/")
	if from[0] == "" {
		from = nil
	}
	to := strings.Split(strings.TrimPrefix(target, "/"), "/")
	i := 0
	for i < len(from) && i < len(to)-1 && from[i] == to[i] {
		i++
	}
	var b strings.Builder
	for range from[i:] {
		b.WriteString("../")
	}
	b.WriteString(escapePath(strings.Join(to[i:], "/")))
	out := b.String()
	if out == "" {
		return "./"
	}
	// A first segment with a colon would read as a URL scheme.
	if first, _, _ := strings.Cut(out, "/"); strings.Contains(first, ":") {
		out = "./" + out
	}
	return out
}
