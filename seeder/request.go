package seeder

import (
	"go.uber.org/zap"

	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
	"github.com/tilecache/caddy-tilecache/module/tilelist"
)

// Request is a seed request as a client sent it (XML or JSON), before
// validation. Pointers are nil for fields the client left out.
type Request struct {
	GridsetID   string
	SRS         *int
	ZoomStart   *int
	ZoomStop    *int
	Format      string
	Type        string
	ThreadCount *int
	Bounds      []float64
	// Params are the raw filter values, by parameter name.
	Params map[string]string
	// GeoWebCache's failure handling fields.
	RetryCount  *int
	RetryWaitMS *int64
	MaxFailures *int64

	// Extensions GeoWebCache clients never send (rest.md of the docs).
	// Geometry is a polygon area: GeoJSON (an object) or WKT (text).
	Geometry []byte
	// GeometrySRS is the CRS of Geometry: "EPSG:4326" when empty (or a
	// WKT's own SRID=), or the gridset's.
	GeometrySRS string
	// Buffer grows the polygon by this many pixels of each level.
	Buffer *float64
	// AllParams: a truncate or reseed of every parameter set stored.
	AllParams bool
	// ExportFormat is the file of type export: mbtiles or gpkg;
	// CachedOnly writes what is cached without seeding first.
	ExportFormat string
	CachedOnly   bool
}

// MaxBuffer bounds a polygon's buffer, in pixels: a label is rarely
// wider, and a larger one is a box anyway.
const MaxBuffer = 4096

// BadRequest is a request the client must fix: the REST answer is 400
// with its message.
type BadRequest struct{ Msg string }

func (e *BadRequest) Error() string { return e.Msg }

func bad(format string, a ...any) error { return &BadRequest{fmt.Sprintf(format, a...)} }

// ErrUnknownLayer is a layer the cache does not have: the answer is 404.
var ErrUnknownLayer = errors.New("unknown layer")

// Resolve validates a request for layer against the cache's configuration
// and fills in the defaults of decisions.md.
func (e *Engine) Resolve(layer string, r Request) (Spec, error) {
	c, err := e.current()
	if err != nil {
		return Spec{}, err
	}
	l, ok := c.Layer(layer)
	if !ok {
		return Spec{}, fmt.Errorf("%w %q", ErrUnknownLayer, layer)
	}
	if r.ZoomStart == nil || r.ZoomStop == nil {
		return Spec{}, bad("zoomStart and zoomStop are required")
	}
	zs, ze := *r.ZoomStart, *r.ZoomStop
	if zs > ze {
		return Spec{}, bad("zoomStart %d is greater than zoomStop %d", zs, ze)
	}
	s := Spec{Layer: layer, ZoomStart: zs, ZoomStop: ze, Threads: 1, Retry: e.DefaultRetry()}
	if r.Type != "" {
		if s.Type, err = ParseType(r.Type); err != nil {
			return Spec{}, bad("%v", err)
		}
	}
	f := &l.Formats[0]
	if r.Format != "" {
		if f, ok = l.Format(r.Format); !ok {
			return Spec{}, bad("layer %s is not cached in format %q", layer, r.Format)
		}
	}
	s.Format = f.Name
	g := l.Grids[0]
	switch {
	case r.GridsetID != "":
		if g, ok = l.Grid(r.GridsetID); !ok {
			return Spec{}, bad("layer %s has no gridset %q", layer, r.GridsetID)
		}
	case r.SRS != nil:
		var found []*tilecache.Grid
		for _, cand := range l.Grids {
			if gridset.SameSRS(cand.SRS, *r.SRS) {
				found = append(found, cand)
			}
		}
		switch len(found) {
		case 0:
			return Spec{}, bad("layer %s has no gridset in EPSG:%d", layer, *r.SRS)
		case 1:
			g = found[0]
		default:
			return Spec{}, bad("layer %s has %d gridsets in EPSG:%d: name one with gridSetId", layer, len(found), *r.SRS)
		}
	}
	s.Gridset = g.Name
	if zs < 0 || ze >= len(g.Levels) {
		return Spec{}, bad("zoom levels %d..%d are outside gridset %s (0..%d)", zs, ze, g.Name, len(g.Levels)-1)
	}
	bounds := g.Extent
	if r.Bounds != nil {
		if len(r.Bounds) != 4 {
			return Spec{}, bad("bounds need 4 numbers: minx, miny, maxx, maxy")
		}
		b := gridset.BBox{MinX: r.Bounds[0], MinY: r.Bounds[1], MaxX: r.Bounds[2], MaxY: r.Bounds[3]}
		for _, v := range r.Bounds {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return Spec{}, bad("bounds must be finite numbers")
			}
		}
		if !(b.MinX < b.MaxX && b.MinY < b.MaxY) {
			return Spec{}, bad("bounds must be minx, miny, maxx, maxy with min < max")
		}
		bounds = b
	}
	s.Bounds = bounds
	s.Ranges = ranges(g, bounds, zs, ze)
	if r.Geometry != nil {
		if err := resolveGeometry(&s, g, r); err != nil {
			return Spec{}, err
		}
	}
	if r.AllParams {
		if s.Type == Seed {
			return Spec{}, bad("allParameters is for truncate and reseed: a seed fills the tiles of one parameter set")
		}
		if len(r.Params) > 0 {
			return Spec{}, bad("allParameters and parameters exclude each other: name one parameter set, or ask for all of them")
		}
	}
	if s.Params, err = l.Params.Normalize(r.Params); err != nil {
		return Spec{}, bad("%v", err)
	}
	if err := resolveExportRequest(&s, r, g, f); err != nil {
		return Spec{}, err
	}
	if r.ThreadCount != nil {
		s.Threads = *r.ThreadCount
	}
	s.Threads = max(1, min(s.Threads, e.Workers()))
	if s.Type == Truncate {
		s.Threads = 1
		s.Sets = []store.Set{{Layer: layer, Gridset: g.Name, Format: f.Name, Params: s.Params.Hash()}}
	}
	if r.AllParams {
		var skipped int
		if s.Sets, s.setParams, skipped, err = storedSets(c, l, g, f.Name, s.Type); err != nil {
			return Spec{}, err
		}
		s.AllParams = true
		if skipped > 0 {
			e.log.Info("reseeding every stored parameter set: some sets' values are unknown, they are skipped",
				zap.String("layer", layer), zap.Int("sets", len(s.Sets)), zap.Int("skipped", skipped))
		}
	}
	if r.RetryCount != nil {
		s.Retry.Retries = max(0, *r.RetryCount)
	}
	if r.RetryWaitMS != nil {
		if *r.RetryWaitMS > maxRetryWait.Milliseconds() {
			return Spec{}, bad("tileFailureRetryWaitTime %d ms is above the maximum of %d ms (one hour)", *r.RetryWaitMS, maxRetryWait.Milliseconds())
		}
		s.Retry.Wait = time.Duration(max(0, *r.RetryWaitMS)) * time.Millisecond
	}
	if r.MaxFailures != nil {
		s.Retry.MaxFailures = max(0, *r.MaxFailures)
	}
	return s, nil
}

// resolveExportRequest sets up an export's file, and refuses its fields
// on any other type.
func resolveExportRequest(s *Spec, r Request, g *tilecache.Grid, f *tilecache.Format) error {
	if s.Type != Export {
		if r.ExportFormat != "" || r.CachedOnly {
			return bad("exportFormat and cachedOnly are for type export")
		}
		return nil
	}
	if r.AllParams {
		return bad("allParameters is for truncate and reseed: an export writes the tiles of one parameter set")
	}
	if r.ExportFormat == "" {
		return bad("exportFormat is required for type export: mbtiles or gpkg")
	}
	s.Export = &ExportSpec{Kind: strings.ToLower(r.ExportFormat), CachedOnly: r.CachedOnly}
	return resolveExport(s.Export, g, f)
}

// maxRetryWait bounds a seed request's tileFailureRetryWaitTime: a longer
// first wait would stall a task for longer than any outage it waits out,
// and near int64's limit the milliseconds overflow into a negative wait.
const maxRetryWait = time.Hour

// ranges is, per level zs..ze, the tiles of g inside bounds that the
// layer caches (inside its extent and its cached zoom levels).
func ranges(g *tilecache.Grid, bounds gridset.BBox, zs, ze int) []gridset.Range {
	cover := g.Cover(bounds)
	out := make([]gridset.Range, 0, ze-zs+1)
	for z := zs; z <= ze; z++ {
		r := cover[z].Intersect(g.Coverage[z])
		if z < g.MinZoom || z > g.MaxZoom {
			r = gridset.Range{MaxX: -1, MaxY: -1} // not cached there: nothing to do
		}
		out = append(out, r)
	}
	return out
}

// ResolveTruncateExtent builds the truncate task of a mass truncateExtent
// request: the tiles inside bounds, at every cached level of the gridset,
// in every format and parameter set the layer has stored there.
func (e *Engine) ResolveTruncateExtent(layer, gs string, bounds []float64) (Spec, error) {
	c, err := e.current()
	if err != nil {
		return Spec{}, err
	}
	l, ok := c.Layer(layer)
	if !ok {
		return Spec{}, bad("Could not find layer %s", layer)
	}
	g, ok := l.Grid(gs)
	if !ok {
		return Spec{}, bad("layer %s has no gridset %q", layer, gs)
	}
	b := g.Extent
	if bounds != nil {
		if len(bounds) != 4 {
			return Spec{}, bad("bounds need 4 numbers: minx, miny, maxx, maxy")
		}
		b = gridset.BBox{MinX: bounds[0], MinY: bounds[1], MaxX: bounds[2], MaxY: bounds[3]}
		for _, v := range bounds {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return Spec{}, bad("bounds must be finite numbers")
			}
		}
		if !(b.MinX < b.MaxX && b.MinY < b.MaxY) {
			return Spec{}, bad("bounds must be minx, miny, maxx, maxy with min < max")
		}
	}
	sets, err := c.Store().SetsOf(layer, g.Name)
	if err != nil {
		return Spec{}, err
	}
	return Spec{
		Layer: layer, Gridset: g.Name, Format: "*", Type: Truncate,
		ZoomStart: g.MinZoom, ZoomStop: g.MaxZoom, Bounds: b,
		Ranges: ranges(g, b, g.MinZoom, g.MaxZoom), Threads: 1,
		Retry: e.DefaultRetry(), Sets: sets,
	}, nil
}

// resolveGeometry reads a request's polygon into s: parsed, converted to
// the gridset's CRS, checked to meet the gridset, and the task's ranges
// narrowed to its bounds (grown by the buffer) so that counting visits
// only the rows it can reach.
func resolveGeometry(s *Spec, g *tilecache.Grid, r Request) error {
	var geom area.Geometry
	var err error
	srid := 0
	if text := bytes.TrimSpace(r.Geometry); len(text) > 0 && text[0] == '{' {
		geom, err = area.ParseGeoJSON(text, area.Limits{})
	} else {
		geom, srid, err = area.ParseWKT(string(text), area.Limits{})
	}
	if err != nil {
		return bad("geometry: %v", err)
	}
	from := 4326
	switch {
	case r.GeometrySRS != "":
		if from, _, err = gridset.ParseSRS(r.GeometrySRS); err != nil {
			return bad("geometrySrs: %v", err)
		}
	case srid != 0:
		from = srid
	}
	if geom, err = geom.Transform(from, g.SRS); err != nil {
		return bad("geometry: %v", err)
	}
	if r.Buffer != nil {
		b := *r.Buffer
		if math.IsNaN(b) || b < 0 || b > MaxBuffer {
			return bad("buffer must be a number of pixels from 0 to %d", MaxBuffer)
		}
		s.Buffer = b
	}
	gb := geom.Bounds()
	if in := gb.Intersect(g.Extent); !(in.MinX < in.MaxX && in.MinY < in.MaxY) {
		return bad("the geometry lies outside gridset %s (extent %g,%g,%g,%g in EPSG:%d)", g.Name,
			g.Extent.MinX, g.Extent.MinY, g.Extent.MaxX, g.Extent.MaxY, g.SRS)
	}
	s.GeometrySRS = from
	s.setGeometry(geom, g)
	// The task's bounds, as its resource shows them: the polygon's box
	// inside the requested bounds (or the gridset's extent).
	if in := s.Bounds.Intersect(gb); in.MinX < in.MaxX && in.MinY < in.MaxY {
		s.Bounds = in
	}
	for i := range s.Ranges {
		z := s.ZoomStart + i
		// A tile is in when its rectangle grown by the buffer overlaps
		// the polygon; a twentieth of a tile more keeps the tiles that
		// Cover leaves out as rounding (a millionth of a tile), and the
		// polygon's count is exact within whatever range it is given.
		// (A pole's ±1e100 in web mercator just clips to the grid.)
		pad := (s.Buffer + 0.05*float64(max(g.TileWidth, g.TileHeight))) * g.Levels[z].Resolution
		grown := gridset.BBox{MinX: gb.MinX - pad, MinY: gb.MinY - pad, MaxX: gb.MaxX + pad, MaxY: gb.MaxY + pad}
		s.Ranges[i] = s.Ranges[i].Intersect(g.Cover(grown)[z])
	}
	return nil
}

// storedSets are the tile sets of the layer stored in g and format: the
// parameter sets a truncate or reseed of allParameters works on, whatever
// their values (a filter that lists none, values no longer accepted). A
// reseed must request each set again: it gets the sets whose values were
// recorded when they were stored (store.ParamsRecorder) and are still
// accepted, with those values; the others are skipped (counted).
func storedSets(c *tilecache.Cache, l *tilecache.Layer, g *tilecache.Grid, format string, typ Type) (sets []store.Set, vals []params.Values, skipped int, err error) {
	all, err := c.Store().SetsOf(l.Name, g.Name)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, set := range all {
		if set.Format != format {
			continue
		}
		if typ == Truncate {
			sets = append(sets, set)
			continue
		}
		v, ok, err := setValues(c, l, set)
		if err != nil {
			return nil, nil, 0, err
		}
		if !ok {
			skipped++
			continue
		}
		sets, vals = append(sets, set), append(vals, v)
	}
	return sets, vals, skipped, nil
}

// setValues finds the parameter values of a stored set: the layer's
// defaults, or what the store recorded, normalised again.
func setValues(c *tilecache.Cache, l *tilecache.Layer, set store.Set) (params.Values, bool, error) {
	if def := l.Params.Defaults(); def.Hash() == set.Params {
		return def, true, nil
	}
	rec, ok := c.Store().(store.ParamsRecorder)
	if !ok {
		return params.Values{}, false, nil
	}
	canonical, ok, err := rec.RecordedParams(set)
	if err != nil || !ok {
		return params.Values{}, false, err
	}
	q, err := url.ParseQuery(canonical)
	if err != nil {
		return params.Values{}, false, nil
	}
	raw := make(map[string]string, len(q))
	for k, v := range q {
		raw[k] = v[0]
	}
	v, err := l.Params.Normalize(raw)
	if err != nil || v.Hash() != set.Params {
		return params.Values{}, false, nil // no longer accepted as they were
	}
	return v, true, nil
}

// ListRequest is what a tile list request adds to a seed request's
// fields (which it takes from the query string).
type ListRequest struct {
	// Scheme is how the list counts rows: "xyz" (from the top, as
	// osm2pgsql, imposm and mod_tile write them; the default) or "tms"
	// (from the bottom, the gridset's own rows).
	Scheme string
	// Parents derives every level from a listed tile's up to this one,
	// Children down to this one; nil for none.
	Parents, Children *int
	// MaxLines bounds the list (0: tilelist's default).
	MaxLines int64
}

// ResolveList validates a tile list request for layer: r's layer,
// gridset, format, type, parameters and retries as for a seed request
// (its levels and bounds are the list's), and the list itself, read from
// body as it streams in.
func (e *Engine) ResolveList(layer string, r Request, lr ListRequest, body io.Reader) (Spec, error) {
	if r.ZoomStart != nil || r.ZoomStop != nil || r.Bounds != nil || r.Geometry != nil {
		return Spec{}, bad("a tile list names its tiles: zoomStart, zoomStop, bounds and geometry do not apply (use parents and children for more levels)")
	}
	zero := 0
	r.ZoomStart, r.ZoomStop = &zero, &zero
	s, err := e.Resolve(layer, r)
	if err != nil {
		return Spec{}, err
	}
	c, err := e.current()
	if err != nil {
		return Spec{}, err
	}
	l, _ := c.Layer(layer)
	g, _ := l.Grid(s.Gridset)
	opt := tilelist.Options{
		Gridset: g.Gridset, MetaW: l.MetaWidth, MetaH: l.MetaHeight,
		Parents: tilelist.None, Children: tilelist.None, MaxLines: lr.MaxLines,
		Coverage: func(z int) (gridset.Range, bool) {
			if z < g.MinZoom || z > g.MaxZoom {
				return gridset.Range{}, false
			}
			return g.Coverage[z], true
		},
	}
	switch strings.ToLower(lr.Scheme) {
	case "", "xyz":
		opt.Scheme = tilelist.XYZ
	case "tms":
		opt.Scheme = tilelist.Native
	default:
		return Spec{}, bad("scheme %q is not one of xyz (rows from the top, as osm2pgsql writes them) or tms (rows from the bottom)", lr.Scheme)
	}
	last := len(g.Levels) - 1
	for _, d := range []struct {
		name string
		v    *int
		dst  *int
	}{{"parents", lr.Parents, &opt.Parents}, {"children", lr.Children, &opt.Children}} {
		if d.v == nil {
			continue
		}
		if *d.v < 0 || *d.v > last {
			return Spec{}, bad("%s must be a level of gridset %s (0..%d)", d.name, g.Name, last)
		}
		*d.dst = *d.v
	}
	list, err := tilelist.Parse(body, opt)
	if err != nil {
		return Spec{}, bad("tile list: %v", err)
	}
	if list.Tiles()+list.Dropped() == 0 {
		return Spec{}, bad("empty tile list: one tile per line is expected, as z/x/y or z x y")
	}
	s.List = list
	s.ZoomStart, s.ZoomStop = list.Levels()
	s.Ranges, s.Bounds = nil, g.Extent
	return s, nil
}
