package seeder

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
	"github.com/tilecache/caddy-tilecache/module/tilelist"
)

// checkpoint is how far a task has certainly got. Its workers finish
// units out of order, so the checkpoint is the first unit not yet
// finished: every unit before it is done, and after a restart the task
// goes on from there. Units after it that were also done are done again:
// at most the units in hand, plus those finished since the last write.
type checkpoint struct {
	mu        sync.Mutex
	next      int64             // units before this one are all finished
	processed int64             // tiles processed in units before next
	failed    int64             // tiles failed in units before next
	ahead     map[int64]outcome // finished units at or after next
}

func (c *checkpoint) finish(seq int64, o outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ahead == nil {
		c.ahead = map[int64]outcome{}
	}
	c.ahead[seq] = o
	for {
		o, ok := c.ahead[c.next]
		if !ok {
			return
		}
		delete(c.ahead, c.next)
		c.next++
		c.processed += o.processed
		c.failed += o.failed
	}
}

func (c *checkpoint) snapshot() (next, processed, failed int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next, c.processed, c.failed
}

// saved is a task as the store keeps it.
type saved struct {
	Layer       string
	Gridset     string
	Format      string
	Params      [][2]string
	Type        Type
	ZoomStart   int
	ZoomStop    int
	Ranges      []gridset.Range
	Bounds      gridset.BBox
	Threads     int
	Retry       RetryPolicy
	Sets        []store.Set `json:",omitempty"`
	AllParams   bool        `json:",omitempty"`
	GeometrySRS int         `json:",omitempty"`
	Buffer      float64     `json:",omitempty"`
	// Data says what the task keeps beside its record: "polygon" (its
	// geometry) or "list" (its tile list), saved once (Tasks.PutTaskData,
	// or the registry's tasks/<id>/data), since the record is rewritten
	// at every checkpoint and a geometry or a list never changes.
	Data string `json:",omitempty"`
	// Export is an export task's file.
	Export *ExportSpec `json:",omitempty"`

	Total       int64
	State       State
	Processed   int64 // at the checkpoint, or final
	FailedTiles int64 // at the checkpoint, or final
	Failures    int64
	Checkpoint  int64 // units finished in order
	Created     time.Time
	Started     time.Time `json:",omitempty"`
	Finished    time.Time `json:",omitempty"`
	LastError   string    `json:",omitempty"`
	Reason      string    `json:",omitempty"`
}

// savedLocked captures t for storage; e.mu is held.
func (t *Task) savedLocked() saved {
	r := saved{
		Layer: t.Spec.Layer, Gridset: t.Spec.Gridset, Format: t.Spec.Format, Params: t.Spec.Params.Pairs(),
		Type: t.Spec.Type, ZoomStart: t.Spec.ZoomStart, ZoomStop: t.Spec.ZoomStop, Ranges: t.Spec.Ranges,
		Bounds: t.Spec.Bounds, Threads: t.Spec.Threads, Retry: t.Spec.Retry, Sets: t.Spec.Sets,
		AllParams: t.Spec.AllParams, GeometrySRS: t.Spec.GeometrySRS, Buffer: t.Spec.Buffer, Data: t.Spec.dataKind(),
		Export: t.Spec.Export,
		Total:  t.Total, State: t.state, Failures: t.failures.Load(),
		Created: t.created, Started: t.started, Finished: t.finished, LastError: t.lastErr, Reason: t.reason,
	}
	if t.killed.Load() && t.state != Done && t.state != Aborted {
		// Killed (or aborted), its workers still finishing the metatiles
		// in hand: it ends ABORTED whatever happens next, so that is what
		// the store keeps. Saved as running, a crash or a stop before the
		// workers were done brought a killed task back after the restart.
		r.State = Aborted
		if r.Finished.IsZero() {
			r.Finished = time.Now()
		}
	}
	if r.State == Done || r.State == Aborted {
		r.Processed, r.FailedTiles = t.processed.Load(), t.failedTiles.Load()
	} else {
		r.Checkpoint, r.Processed, r.FailedTiles = t.cp.snapshot()
	}
	return r
}

// persist saves the given tasks in the cache's store. A task's record is
// taken and written under its saveMu, so that of two writers (the
// checkpoint loop, a kill, the task's end) the one that writes last also
// took the newer record: a checkpoint taken before a kill never lands
// after it.
func (e *Engine) persist(tasks ...*Task) {
	for _, t := range tasks {
		e.persistOne(t)
	}
}

func (e *Engine) persistOne(t *Task) {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	e.mu.Lock()
	st := e.st
	if st == nil || t.store != st.Name() || t.cl != nil {
		e.mu.Unlock()
		return // the cache has moved on (this task is the old store's), or the task is the cluster's
	}
	rec := t.savedLocked()
	e.mu.Unlock()
	b, err := json.Marshal(rec)
	if err == nil {
		err = st.PutTask(t.ID, b)
	}
	if err != nil {
		e.log.Warn("saving a task's checkpoint failed", zap.Int64("task", t.ID), zap.Error(err))
	}
}

// checkpointLoop writes the active tasks' checkpoints at a steady pace, so
// that a crash repeats at most that much work.
func (e *Engine) checkpointLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			// Binding to the cache's store is also what brings back the
			// tasks saved there: after a restart they resume without
			// waiting for a REST request.
			e.current()
			e.mu.Lock()
			active := append([]*Task(nil), e.active...)
			e.mu.Unlock()
			e.persist(active...)
		}
	}
}

// loadLocked brings back the tasks saved in the cache's store: finished
// ones into the history, the others pending again, resuming from their
// checkpoints. e.mu is held.
func (e *Engine) loadLocked(c *tilecache.Cache) {
	st := e.st
	var finished []*Task
	var stale []int64
	err := st.Tasks(func(id int64, b []byte) error {
		e.maxID = max(e.maxID, id)
		var r saved
		if err := json.Unmarshal(b, &r); err != nil {
			e.log.Warn("unreadable task record dropped", zap.Int64("task", id), zap.Error(err))
			stale = append(stale, id)
			return nil
		}
		t, err := restore(e.ctx, c, id, r, func() ([]byte, error) { return st.TaskData(id) })
		if err != nil {
			e.log.Warn("task cannot resume", zap.Int64("task", id), zap.Error(err))
			t.state, t.reason, t.finished = Aborted, err.Error(), time.Now()
		}
		if t.state == Done || t.state == Aborted {
			finished = append(finished, t)
			return nil
		}
		t.state = Pending // resumed tasks queue again in id order
		e.active = append(e.active, t)
		e.byID[t.ID] = t
		e.log.Info("task resumed from its checkpoint", zap.Int64("id", t.ID), zap.String("layer", t.Spec.Layer),
			zap.Int64("processed", t.processed.Load()), zap.Int64("total", t.Total))
		return nil
	})
	if err != nil {
		e.log.Error("reading saved tasks failed", zap.Error(err))
	}
	if extra := len(finished) - e.cfg.History; extra > 0 {
		for _, t := range finished[:extra] {
			stale = append(stale, t.ID)
		}
		finished = finished[extra:]
	}
	for _, t := range finished {
		e.history = append(e.history, t)
		e.byID[t.ID] = t
	}
	for _, id := range stale {
		st.DeleteTask(id)
	}
}

// restore rebuilds a saved task, against the layer's current
// configuration (parameter values are normalised again); data reads
// what the task keeps beside its record.
func restore(engine context.Context, c *tilecache.Cache, id int64, r saved, data func() ([]byte, error)) (*Task, error) {
	t := newTask(engine, id, c.Store())
	t.Total, t.state, t.created, t.started = r.Total, r.State, r.Created, r.Started
	t.finished, t.lastErr, t.reason = r.Finished, r.LastError, r.Reason
	t.Spec = Spec{
		Layer: r.Layer, Gridset: r.Gridset, Format: r.Format, Type: r.Type,
		ZoomStart: r.ZoomStart, ZoomStop: r.ZoomStop, Ranges: r.Ranges, Bounds: r.Bounds,
		Threads: r.Threads, Retry: r.Retry, Sets: r.Sets, AllParams: r.AllParams,
		GeometrySRS: r.GeometrySRS, Buffer: r.Buffer, Export: r.Export,
	}
	if r.Export != nil && r.State == Done {
		t.exp.written = true // its file was written before the restart
	}
	t.processed.Store(r.Processed)
	t.failedTiles.Store(r.FailedTiles)
	t.failures.Store(r.Failures)
	t.cp = checkpoint{next: r.Checkpoint, processed: r.Processed, failed: r.FailedTiles}
	l, ok := c.Layer(r.Layer)
	if !ok {
		return t, fmt.Errorf("layer %q is no longer configured", r.Layer)
	}
	raw := make(map[string]string, len(r.Params))
	for _, kv := range r.Params {
		raw[kv[0]] = kv[1]
	}
	p, err := l.Params.Normalize(raw)
	if err != nil {
		return t, fmt.Errorf("parameters no longer accepted: %v", err)
	}
	t.Spec.Params = p
	if r.AllParams && r.Type == Reseed {
		for _, set := range r.Sets {
			v, ok, err := setValues(c, l, set)
			if err == nil && !ok {
				err = fmt.Errorf("the values of parameter set %s are no longer known", set.Params)
			}
			if err != nil {
				return t, err
			}
			t.Spec.setParams = append(t.Spec.setParams, v)
		}
	}
	if r.Data != "" {
		g, ok := l.Grid(r.Gridset)
		if !ok {
			return t, fmt.Errorf("layer %q no longer has gridset %s", r.Layer, r.Gridset)
		}
		b, err := data()
		if err == nil {
			err = t.Spec.decodeData(r.Data, b, g)
		}
		if err != nil {
			return t, fmt.Errorf("reading its %s: %v", r.Data, err)
		}
	}
	t.iter = newPlan(&t.Spec, int64(l.MetaWidth), int64(l.MetaHeight))
	t.iter.seek(r.Checkpoint) // skip what is certainly done
	return t, nil
}

// dataKind is what the task keeps beside its record ("" for a box).
func (s *Spec) dataKind() string {
	switch {
	case s.List != nil:
		return "list"
	case s.Geometry != nil:
		return "polygon"
	}
	return ""
}

// encodeData is the task's geometry (GeoJSON in the gridset's CRS) or
// tile list (tilelist's encoding).
func (s *Spec) encodeData() ([]byte, error) {
	switch {
	case s.List != nil:
		return s.List.MarshalBinary()
	case s.Geometry != nil:
		return s.Geometry.GeoJSON(), nil
	}
	return nil, nil
}

func (s *Spec) decodeData(kind string, b []byte, g *tilecache.Grid) error {
	switch kind {
	case "list":
		s.List = new(tilelist.List)
		return s.List.UnmarshalBinary(b)
	case "polygon":
		geom, err := area.ParseGeoJSON(b, area.Limits{MaxVertices: math.MaxInt})
		if err != nil {
			return err
		}
		s.setGeometry(geom, g)
		return nil
	}
	return fmt.Errorf("unknown kind of task data %q", kind)
}
