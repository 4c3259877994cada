// Package seeder runs seed, reseed and truncate tasks over a tile_cache's
// layers on a global pool of workers, the way GeoWebCache's TileBreeder
// does, with the counting and states of the REST contract.
package seeder

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Type is what a task does.
type Type int

const (
	Seed Type = iota
	Reseed
	Truncate
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
	}
	return 0, fmt.Errorf("unknown type %q: one of seed, reseed, truncate is expected", s)
}

func (t Type) String() string {
	return [...]string{"SEED", "RESEED", "TRUNCATE"}[t]
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
	// by Gridset, Format and Params, or, for a mass truncateExtent, every
	// set the layer has stored in the gridset.
	Sets []store.Set
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

	// Guarded by the engine's mutex.
	state    State
	workers  int
	created  time.Time
	started  time.Time
	finished time.Time
	lastErr  string
	reason   string // why it was aborted

	iter *iterator
	cp   checkpoint
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
// inside one metatile.
type unit struct {
	seq   int64 // position in the task's order of units
	z     int
	tiles gridset.Range
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
