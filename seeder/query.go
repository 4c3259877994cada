package seeder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// List returns the records of the pending and running tasks, by id; of one
// layer, or of all when layer is "". Killed tasks have left the list. A
// clustered cache lists every node's tasks; its error is the shared
// storage's.
func (e *Engine) List(layer string) ([][5]int64, error) {
	if reg := e.shared(); reg != nil {
		return e.listShared(reg, layer)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([][5]int64, 0, len(e.active))
	for _, t := range e.active {
		if (layer == "" || t.Spec.Layer == layer) && !t.killed.Load() {
			out = append(out, t.row(t.state))
		}
	}
	return out, nil
}

// Which tasks a kill terminates.
type Which int

const (
	KillRunning Which = iota
	KillPending
	KillAll
)

// ParseWhich reads kill_all: running (or 1), pending, all; any case.
func ParseWhich(s string) (Which, error) {
	switch strings.ToLower(s) {
	case "running", "1":
		return KillRunning, nil
	case "pending":
		return KillPending, nil
	case "all":
		return KillAll, nil
	}
	return 0, fmt.Errorf("Unknown kill_all code: '%s'. One of all|running|pending is expected.", s)
}

// Summary names a task in a kill answer.
type Summary struct {
	ID    int64
	Layer string
	Type  Type
	State State
}

// Kill terminates the matching tasks of layer (all layers for ""). Pending
// ones end ABORTED at once; running ones leave the listing at once and end
// ABORTED when their workers reach the next metatile boundary. It returns
// what it terminated and the layer's tasks that had already finished.
func (e *Engine) Kill(layer string, which Which) (killed, finished []Summary, err error) {
	if reg := e.shared(); reg != nil {
		return e.killShared(reg, layer, which)
	}
	var halted []*Task
	// The answer means the tasks will not run again: their records say so
	// before it is given, whatever comes next (a crash, a stop) while
	// their workers finish the metatiles in hand.
	defer func() { e.persist(halted...) }()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range append([]*Task(nil), e.active...) {
		if layer != "" && t.Spec.Layer != layer || t.killed.Load() {
			continue
		}
		pending := t.state == Pending
		if which == KillAll || (which == KillPending) == pending {
			t.halt(false)
			t.reason = "killed"
			e.removeActiveLocked(t)
			if pending {
				e.finishLocked(t)
			}
			halted = append(halted, t)
			// Reported as ABORTED: that is where a terminated task ends,
			// even while its workers finish the metatile in hand.
			killed = append(killed, Summary{t.ID, t.Spec.Layer, t.Spec.Type, Aborted})
		}
	}
	for _, t := range e.history {
		if layer == "" || t.Spec.Layer == layer {
			if !containsID(killed, t.ID) {
				finished = append(finished, Summary{t.ID, t.Spec.Layer, t.Spec.Type, t.state})
			}
		}
	}
	if len(killed) > 0 {
		e.log.Info("tasks killed", zap.Int("count", len(killed)), zap.String("layer", layer))
	}
	return killed, finished, nil
}

// Errors of KillTask.
var (
	ErrNoTask   = errors.New("no such task")
	ErrFinished = errors.New("the task has already finished")
)

// KillTask terminates one task, pending or running, as Kill does for a
// layer's: it leaves the listing at once and ends ABORTED. A task the
// engine does not know (never, or no longer, in its history) is ErrNoTask;
// one that has finished, or was killed already, is ErrFinished with its
// summary.
func (e *Engine) KillTask(id int64) (Summary, error) {
	if reg := e.shared(); reg != nil {
		return e.killTaskShared(reg, id)
	}
	var halted *Task
	defer func() { // as Kill: saved ABORTED before the answer, once e.mu is let go
		if halted != nil {
			e.persist(halted)
		}
	}()
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.byID[id]
	if !ok {
		return Summary{}, ErrNoTask
	}
	sum := Summary{t.ID, t.Spec.Layer, t.Spec.Type, t.state}
	if t.state == Done || t.state == Aborted || t.killed.Load() {
		if t.killed.Load() {
			sum.State = Aborted
		}
		return sum, ErrFinished
	}
	pending := t.state == Pending
	t.halt(false)
	t.reason = "killed"
	e.removeActiveLocked(t)
	if pending {
		e.finishLocked(t)
	}
	halted = t
	sum.State = Aborted
	e.log.Info("task killed", zap.Int64("id", id), zap.String("layer", t.Spec.Layer))
	return sum, nil
}

func containsID(s []Summary, id int64) bool {
	for _, x := range s {
		if x.ID == id {
			return true
		}
	}
	return false
}

// Info returns a task's full state, while it is active or in the history.
func (e *Engine) Info(id int64) (Info, bool, error) {
	if reg := e.shared(); reg != nil {
		return e.infoShared(reg, id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.byID[id]
	if !ok {
		return Info{}, false, nil
	}
	state := t.state
	if t.killed.Load() && state != Aborted && t.workers == 0 {
		state = Aborted
	}
	rec := t.row(state)
	in := Info{
		ID: t.ID, Layer: t.Spec.Layer, Type: t.Spec.Type.String(), State: state.String(), Status: int64(state),
		Gridset: t.Spec.Gridset, Format: t.Spec.Format, Parameters: t.Spec.Params.Pairs(),
		ZoomStart: t.Spec.ZoomStart, ZoomStop: t.Spec.ZoomStop,
		Bounds:  [4]float64{t.Spec.Bounds.MinX, t.Spec.Bounds.MinY, t.Spec.Bounds.MaxX, t.Spec.Bounds.MaxY},
		Threads: t.Spec.Threads, Processed: rec[0], Total: rec[1], Remaining: rec[2],
		FailedTiles: t.failedTiles.Load(), Failures: t.failures.Load(),
		LastError: t.lastErr, Reason: t.reason, Created: t.created,
	}
	t.Spec.extensions(&in)
	in.Export = t.exportInfo(state)
	if !t.started.IsZero() {
		s := t.started
		in.Started = &s
		end := time.Now()
		if !t.finished.IsZero() {
			end = t.finished
		}
		if el := end.Sub(s).Seconds(); el > 0 {
			in.TilesPerSec = float64(rec[0]) / el
		}
	}
	if !t.finished.IsZero() {
		f := t.finished
		in.Finished = &f
	}
	return in, true, nil
}
