package seeder

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
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
}

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
	if s.Params, err = l.Params.Normalize(r.Params); err != nil {
		return Spec{}, bad("%v", err)
	}
	if r.ThreadCount != nil {
		s.Threads = *r.ThreadCount
	}
	s.Threads = max(1, min(s.Threads, e.Workers()))
	if s.Type == Truncate {
		s.Threads = 1
		s.Sets = []store.Set{{Layer: layer, Gridset: g.Name, Format: f.Name, Params: s.Params.Hash()}}
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
