package seeder

import (
	"cmp"
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
)

// An engine whose cache is clustered keeps no tasks of its own: they are
// in the registry (registry.go), and the engine's active list holds this
// node's shares of them (share.go), which its workers run like any task.
// A poll loop keeps the shares in step with the registry: it joins tasks
// submitted on other nodes, stops those finished or killed elsewhere,
// reports finished units, and sends the workers back to a task whose
// ledger has units again.

// clusterNode is the node the engine is bound to, or nil; e.mu is held.
func (e *Engine) clusterNode() *cluster.Node {
	if e.cl == nil {
		return nil
	}
	return e.cl.n
}

// joinLocked binds the engine to the registry of node's cluster; e.mu is held.
func (e *Engine) joinLocked(node *cluster.Node) {
	e.cl = &registry{n: node, log: e.log.With(zap.String("node", node.ID)), history: func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.cfg.History
	}}
	ctx, stop := context.WithCancel(e.ctx)
	e.clStop = stop
	reg := e.cl
	e.loops.Add(1)
	go func() {
		defer e.loops.Done()
		e.pollLoop(ctx, reg)
	}()
}

func (e *Engine) pollLoop(ctx context.Context, reg *registry) {
	for {
		_, poll := reg.n.Settings()
		if !sleep(ctx, poll) {
			return
		}
		e.poll(reg)
	}
}

// poll brings this node's shares in step with the registry.
func (e *Engine) poll(reg *registry) {
	recs, err := reg.active()
	e.mu.Lock()
	if e.cl != reg {
		e.mu.Unlock()
		return // the engine has moved on to another store
	}
	if err != nil {
		if e.clErr == nil {
			e.log.Warn("cluster task registry unreadable: tasks wait for it", zap.Error(err))
		}
		e.clErr = err
		e.mu.Unlock()
		return
	}
	if e.clErr != nil {
		e.log.Info("cluster task registry readable again")
		e.clErr = nil
	}
	e.mu.Unlock()
	c, err := e.current()
	if err != nil {
		return
	}
	byID := make(map[int64]*record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	var flush []*share
	e.mu.Lock()
	for _, t := range append([]*Task(nil), e.active...) {
		if t.cl == nil {
			continue
		}
		if _, ok := byID[t.ID]; !ok {
			// Finished or killed, here or elsewhere: stop at the next
			// metatile (a killed task's metatile in hand is not counted).
			t.halt(false)
			e.removeActiveLocked(t)
			delete(e.byID, t.ID)
			continue
		}
		if t.cl.pending() {
			flush = append(flush, t.cl)
		}
	}
	for _, r := range recs {
		if t, ok := e.byID[r.ID]; ok {
			if t.cl != nil {
				t.cl.revive(r)
			}
			continue
		}
		e.adoptLocked(c, reg, r)
	}
	e.scheduleLocked()
	e.mu.Unlock()
	for _, s := range flush {
		if _, err := s.sync(false, false); err != nil && !errors.Is(err, errGone) {
			e.log.Warn("reporting finished work units failed", zap.Int64("task", s.t.ID), zap.Error(err))
		}
	}
	e.startSharedWrites(reg, recs)
}

// adoptLocked starts this node's share of a task of the registry; e.mu is held.
func (e *Engine) adoptLocked(c *tilecache.Cache, reg *registry, r *record) {
	e.maxID = max(e.maxID, r.ID)
	t, err := restore(e.ctx, c, r.ID, r.saved, func() ([]byte, error) { return reg.n.Load(dataKey(r.ID)) })
	if err != nil {
		// Its layer is not configured here (yet): the others work on it.
		if e.byID[r.ID] == nil {
			e.log.Warn("not working on a cluster task", zap.Int64("id", r.ID), zap.Error(err))
		}
		return
	}
	t.cl = newShare(e, reg, t, r)
	t.state = Pending
	e.active = append(e.active, t)
	e.byID[t.ID] = t
}

// submitShared puts a new task in the registry and starts this node's share.
func (e *Engine) submitShared(reg *registry, t *Task) error {
	n := t.iter.count()
	per := max(1, (n+maxUnits-1)/maxUnits)
	r := &record{ID: t.ID, Node: reg.n.ID, Metatiles: n, PerUnit: per, Units: (n + per - 1) / per}
	e.mu.Lock()
	r.saved = t.savedLocked()
	e.mu.Unlock()
	r.Checkpoint, r.Processed, r.FailedTiles = 0, 0, 0
	if t.Spec.dataKind() != "" {
		// Stored before the record that names it: a node that sees the
		// task can always read its geometry or list.
		b, err := t.Spec.encodeData()
		if err == nil {
			err = reg.n.Store(dataKey(t.ID), b)
		}
		if err != nil {
			return err
		}
	}
	if err := reg.submit(r); err != nil {
		return err
	}
	e.mu.Lock()
	t.cl = newShare(e, reg, t, r)
	e.active = append(e.active, t)
	e.byID[t.ID] = t
	e.scheduleLocked()
	e.mu.Unlock()
	e.log.Info("task submitted to the cluster", zap.Int64("id", t.ID), zap.String("layer", t.Spec.Layer),
		zap.Stringer("type", t.Spec.Type), zap.Int64("tiles", t.Total), zap.Int64("work_units", r.Units),
		zap.Int64("metatiles_per_unit", per))
	return nil
}

// finishShareLocked: this node's workers have left a task. The task is
// the registry's: only a kill or its end there removes the share (poll),
// and what the workers finished is reported now.
func (e *Engine) finishShareLocked(t *Task) {
	if t.killed.Load() {
		e.removeActiveLocked(t)
		delete(e.byID, t.ID)
		return
	}
	go func() {
		if _, err := t.cl.sync(false, true); err != nil && !errors.Is(err, errGone) {
			e.log.Warn("reporting finished work units failed", zap.Int64("task", t.ID), zap.Error(err))
		}
	}()
}

// setLastErr notes a task's last error.
func (e *Engine) setLastErr(t *Task, msg string) {
	e.mu.Lock()
	t.lastErr = msg
	e.mu.Unlock()
}

func (e *Engine) lastErr(t *Task) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return t.lastErr
}

// shared returns the registry when the cache is clustered.
func (e *Engine) shared() *registry {
	e.current()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cl
}

// stopShare halts this node's share of a task that ended in the registry.
func (e *Engine) stopShare(id int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.byID[id]; ok && t.cl != nil {
		t.halt(false)
		e.removeActiveLocked(t)
		delete(e.byID, id)
	}
}

// listShared is List for a clustered cache.
func (e *Engine) listShared(reg *registry, layer string) ([][5]int64, error) {
	recs, err := reg.active()
	if err != nil {
		return nil, err
	}
	out := make([][5]int64, 0, len(recs))
	for _, r := range recs {
		if layer == "" || r.Layer == layer {
			out = append(out, r.row())
		}
	}
	return out, nil
}

// killShared is Kill for a clustered cache.
func (e *Engine) killShared(reg *registry, layer string, which Which) (killed, finished []Summary, err error) {
	recs, err := reg.active()
	if err != nil {
		return nil, nil, err
	}
	var failed error
	for _, r := range recs {
		if layer != "" && r.Layer != layer {
			continue
		}
		if which == KillAll || (which == KillPending) == (r.State == Pending) {
			sum, err := reg.end(r.ID, "killed")
			if errors.Is(err, ErrFinished) {
				continue // it finished meanwhile
			}
			if err != nil {
				failed = cmp.Or(failed, err) // the others are still killed
				continue
			}
			e.stopShare(r.ID)
			killed = append(killed, sum)
		}
	}
	if failed != nil {
		return killed, nil, failed
	}
	done, err := reg.finished()
	if err != nil {
		return killed, nil, err
	}
	for _, r := range done {
		if (layer == "" || r.Layer == layer) && !containsID(killed, r.ID) {
			finished = append(finished, r.summary())
		}
	}
	if len(killed) > 0 {
		e.log.Info("cluster tasks killed", zap.Int("count", len(killed)), zap.String("layer", layer))
	}
	return killed, finished, nil
}

// killTaskShared is KillTask for a clustered cache.
func (e *Engine) killTaskShared(reg *registry, id int64) (Summary, error) {
	sum, err := reg.end(id, "killed")
	if err == nil {
		e.stopShare(id)
		e.log.Info("cluster task killed", zap.Int64("id", id), zap.String("layer", sum.Layer))
	}
	return sum, err
}

// infoShared is Info for a clustered cache.
func (e *Engine) infoShared(reg *registry, id int64) (Info, bool, error) {
	r, err := reg.lookup(id)
	if errors.Is(err, ErrNoTask) {
		return Info{}, false, nil
	}
	if err != nil {
		return Info{}, false, err
	}
	in := r.info()
	in.Export = r.exportInfo()
	e.mu.Lock()
	if t, ok := e.byID[id]; ok {
		t.Spec.extensions(&in) // this node's share has the polygon at hand
		if t.exp.writing && in.Export != nil && in.Export.Phase == "write" {
			// This node writes the file: its counts so far.
			in.Export.Tiles, in.Export.Bytes, in.Export.Missing = t.exp.tiles, t.exp.bytes, t.exp.missing
		}
	}
	e.mu.Unlock()
	in.Buffer, in.AllParameters = r.Buffer, r.AllParams
	if r.AllParams {
		in.ParameterSets = len(r.Sets)
	}
	return in, true, nil
}
