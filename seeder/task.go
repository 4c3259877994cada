// Package seeder runs seed, reseed and truncate tasks over a tile_cache's
// layers on a global pool of workers, the way GeoWebCache's TileBreeder
// does, with the counting and states of the REST contract.
package seeder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
	"github.com/tilecache/caddy-tilecache/module/tilelist"
)

// Type is what a task does.
type Type int

const (
	Seed Type = iota
	Reseed
	Truncate
	// Export seeds an area, then writes its tiles into a file (export.go).
	Export
)

// ParseType reads the seed request's type field.
func ParseType(s string) (Type, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "seed":
		return Seed, nil
	case "reseed":
		return Reseed, nil
	case "truncate":
		return Truncate, nil
	case "export":
		return Export, nil
	}
	return 0, fmt.Errorf("unknown type %q: one of seed, reseed, truncate, export is expected", s)
}

func (t Type) String() string {
	return [...]string{"SEED", "RESEED", "TRUNCATE", "EXPORT"}[t]
}

// State is a task's status code in the REST contract.
type State int64

const (
	Aborted State = -1
	Pending State = 0
	Running State = 1
	Done    State = 2
)

func (s State) String() string {
	switch s {
	case Aborted:
		return "ABORTED"
	case Pending:
		return "PENDING"
	case Running:
		return "RUNNING"
	case Done:
		return "DONE"
	}
	return "UNKNOWN"
}

// Spec is a validated task: everything it will do, resolved against the
// layer's configuration at submission.
type Spec struct {
	Layer     string
	Gridset   string
	Format    string
	Params    params.Values
	Type      Type
	ZoomStart int
	ZoomStop  int
	// Ranges holds, per level from ZoomStart, the tiles of the task: the
	// requested bounds clipped to the layer's coverage.
	Ranges  []gridset.Range
	Bounds  gridset.BBox
	Threads int
	Retry   RetryPolicy
	// Sets are the tile sets a truncate task deletes from: the one named
	// by Gridset, Format and Params, or, for a mass truncateExtent and for
	// AllParams, every set the layer has stored in the gridset.
	Sets []store.Set
	// AllParams: the task works on every parameter set stored when it was
	// submitted (Sets), not on Params alone.
	AllParams bool
	// setParams are the values of each of Sets, for a reseed of AllParams.
	setParams []params.Values

	// A polygon task's tiles are those of Ranges whose rectangle, grown
	// by Buffer pixels, overlaps Geometry (in the gridset's CRS), as
	// cover selects them; GeometrySRS is the CRS it was given in.
	Geometry    *area.Geometry
	GeometrySRS int
	Buffer      float64
	cover       *area.Cover
	gridSRS     int
	// A tile list task's tiles are List's (Ranges is then unused).
	List *tilelist.List
	// Export is set for an export task: the file it writes.
	Export *ExportSpec
}

// setGeometry makes geom (in g's CRS) the task's polygon.
func (s *Spec) setGeometry(geom area.Geometry, g *tilecache.Grid) {
	s.Geometry, s.gridSRS = &geom, g.SRS
	s.cover = area.NewCover(g.Gridset, geom, s.Buffer)
}

// Tiles is the exact number of tiles of the task's area, in one tile set.
func (s *Spec) Tiles() int64 {
	var n int64
	switch {
	case s.List != nil:
		return s.List.Tiles()
	case s.cover != nil:
		for i, r := range s.Ranges {
			if !r.Empty() {
				n += s.cover.Count(s.ZoomStart+i, r)
			}
		}
	default:
		for _, r := range s.Ranges {
			n += r.Count()
		}
	}
	return n
}

// RetryPolicy says what a task does with a metatile that fails.
type RetryPolicy struct {
	// Retries is how often a failed metatile is tried again.
	Retries int
	// Wait before the first retry; it doubles for each next one (up to 1 minute).
	Wait time.Duration
	// MaxFailures: once more failed attempts than this happen, the task is ABORTED.
	MaxFailures int64
}

// Task is one accepted request.
type Task struct {
	ID   int64
	Spec Spec
	// Total is the exact number of tiles in the task's range.
	Total int64

	processed   atomic.Int64
	failedTiles atomic.Int64
	failures    atomic.Int64
	killed      atomic.Bool
	stopped     atomic.Bool // its store is no longer the cache's: stop, unfinished
	store       string      // the name of the store it belongs to
	// ctx ends when the task is killed or stopped, or the engine stops:
	// every wait of its workers (the upstream, a retry's pause) ends with it.
	ctx    context.Context
	cancel context.CancelFunc

	// saveMu orders the writes of the task's record (persistOne).
	saveMu sync.Mutex

	// Guarded by the engine's mutex.
	state    State
	workers  int
	created  time.Time
	started  time.Time
	finished time.Time
	lastErr  string
	reason   string // why it was aborted

	iter plan
	cp   checkpoint
	exp  exportState // an export's write phase (export.go), under the engine's mutex
	// cl is this node's share of a clustered task (share.go), which hands
	// out and counts its metatiles instead of iter and cp; nil otherwise.
	cl *share
}

// nextUnit returns the next metatile for one of the task's workers.
func (t *Task) nextUnit() (unit, bool) {
	if t.cl != nil {
		return t.cl.next()
	}
	return t.iter.next()
}

// finishUnit records what became of a metatile.
func (t *Task) finishUnit(seq int64, o outcome) {
	if t.cl != nil {
		t.cl.finish(seq, o)
		return
	}
	t.cp.finish(seq, o)
}

// exhausted reports whether the task has no metatile left for this
// node's workers.
func (t *Task) exhausted() bool {
	if t.cl != nil {
		return t.cl.idle()
	}
	return t.iter.done()
}

func newTask(engine context.Context, id int64, st store.Store) *Task {
	t := &Task{ID: id, store: st.Name()}
	t.ctx, t.cancel = context.WithCancel(engine)
	return t
}

// halt stops the task's workers at their next metatile boundary: killed
// (it ends ABORTED), or stopped (its store went away; it stays unfinished).
func (t *Task) halt(stopped bool) {
	if stopped {
		t.stopped.Store(true)
	} else {
		t.killed.Store(true)
	}
	t.cancel()
}

// row is the task's [processed, total, remaining, id, status] row of a
// task listing.
func (t *Task) row(state State) [5]int64 {
	p := min(t.processed.Load(), t.Total)
	return [5]int64{p, t.Total, t.Total - p, t.ID, int64(state)}
}

// Info is a task's full state, for its own resource.
type Info struct {
	ID          int64       `json:"id"`
	Layer       string      `json:"layer"`
	Type        string      `json:"type"`
	State       string      `json:"state"`
	Status      int64       `json:"status"`
	Gridset     string      `json:"gridSetId"`
	Format      string      `json:"format"`
	Parameters  [][2]string `json:"parameters"`
	ZoomStart   int         `json:"zoomStart"`
	ZoomStop    int         `json:"zoomStop"`
	Bounds      [4]float64  `json:"bounds"`
	Threads     int         `json:"threadCount"`
	Processed   int64       `json:"processed"`
	Total       int64       `json:"total"`
	Remaining   int64       `json:"remaining"`
	FailedTiles int64       `json:"failedTiles"`
	Failures    int64       `json:"failures"`
	LastError   string      `json:"lastError,omitempty"`
	Reason      string      `json:"abortReason,omitempty"`
	Created     time.Time   `json:"created"`
	Started     *time.Time  `json:"started,omitempty"`
	Finished    *time.Time  `json:"finished,omitempty"`
	TilesPerSec float64     `json:"tilesPerSecond"`
	// Extensions: a polygon task's area (GeoJSON in EPSG:4326, where the
	// node answering has it) and buffer, the parameter sets of an
	// allParameters task, a tile list task's distinct tiles.
	Geometry      json.RawMessage `json:"geometry,omitempty"`
	Buffer        float64         `json:"buffer,omitempty"`
	AllParameters bool            `json:"allParameters,omitempty"`
	ParameterSets int             `json:"parameterSets,omitempty"`
	ListTiles     int64           `json:"listTiles,omitempty"`
	// An export task's phase, counts and file (export.go).
	Export *ExportInfo `json:"export,omitempty"`
}

// extensions fills in Info's extensions from the spec.
func (s *Spec) extensions(in *Info) {
	in.Buffer, in.AllParameters = s.Buffer, s.AllParams
	if s.AllParams {
		in.ParameterSets = len(s.Sets)
	}
	if s.List != nil {
		in.ListTiles = s.List.Tiles()
	}
	if s.Geometry != nil {
		if geom, err := s.Geometry.Transform(s.gridSRS, 4326); err == nil {
			in.Geometry = geom.GeoJSON()
		}
	}
}

// iterator hands out the task's metatiles, level by level, to all of the
// task's workers: each metatile to exactly one of them.
type iterator struct {
	mu        sync.Mutex
	spec      *Spec
	metaW     int64
	metaH     int64
	z         int // index into spec.Ranges
	x, y      int64
	started   bool
	exhausted bool
	handed    int64 // units handed out so far
}

// unit is one metatile's share of a task: the tiles of the task's range
// inside one metatile (for a truncation of a box or polygon, one level).
type unit struct {
	seq   int64 // position in the task's order of units
	z     int
	tiles gridset.Range
	// only, when not nil, are the unit's tiles (a polygon's or a list's),
	// row by row, bottom to top; tiles is then their bounding range.
	only []gridset.Index
}

func newIterator(s *Spec, metaW, metaH int64) *iterator {
	return &iterator{spec: s, metaW: metaW, metaH: metaH}
}

func alignDown(v, step int64) int64 { return v - v%step }

// wholeLevel as a metatile size makes every unit a whole level's range.
const wholeLevel = int64(1) << 40

// next returns the next metatile, rows bottom to top, columns left to right.
func (it *iterator) next() (unit, bool) {
	it.mu.Lock()
	defer it.mu.Unlock()
	for !it.exhausted {
		if it.z >= len(it.spec.Ranges) {
			it.exhausted = true
			break
		}
		r := it.spec.Ranges[it.z]
		if r.Empty() {
			it.z++
			it.started = false
			continue
		}
		if !it.started {
			it.x, it.y, it.started = alignDown(r.MinX, it.metaW), alignDown(r.MinY, it.metaH), true
		}
		if it.y > r.MaxY {
			it.z++
			it.started = false
			continue
		}
		cell := gridset.Range{MinX: it.x, MinY: it.y, MaxX: it.x + it.metaW - 1, MaxY: it.y + it.metaH - 1}
		u := unit{seq: it.handed, z: it.spec.ZoomStart + it.z, tiles: cell.Intersect(r)}
		it.handed++
		it.x += it.metaW
		if it.x > r.MaxX {
			it.x = alignDown(r.MinX, it.metaW)
			it.y += it.metaH
		}
		return u, true
	}
	return unit{}, false
}
