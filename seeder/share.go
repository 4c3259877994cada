package seeder

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// share is this node's part in a clustered task: the work units it has
// claimed, the metatiles of the one it is handing out to its workers,
// and the finished units it has still to report. It takes the place of
// the iterator and the checkpoint of a task that runs on one node only:
// the ledger in the registry is the checkpoint.
type share struct {
	reg       *registry
	e         *Engine
	t         *Task
	perUnit   int64
	metatiles int64

	claiming sync.Mutex // one claim (a locked read-modify-write) at a time

	mu        sync.Mutex
	queue     []int64 // claimed units not started
	from, end int64   // metatiles of the current unit still to hand out
	open      map[int64]*unitProgress
	done      []doneUnit // finished, not yet reported
	failures  int64      // failed attempts reported so far
	exhausted bool       // the ledger had nothing left to hand this node
	// began is when this node first handed out a metatile of the task, and
	// finished how many units it has done since: its pace, which sizes
	// its claims.
	began    time.Time
	finished int64
	// reported is when the last report went to the ledger.
	reported time.Time
}

// reportEvery is how often finished units are reported when no claim
// carries them: the listing's counts trail the workers by about this.
// Each report takes the task's lock, which the other nodes' claims wait for.
const reportEvery = time.Second

// claimAhead is how much work (at the node's own pace) a claim takes:
// enough that a claim that waits for the storage's lock (certmagic's
// file_system storage polls a held lock once a second) leaves no worker
// idle, and rare enough that claims seldom meet at the lock.
const claimAhead = 3 * time.Second

// pace is the units per second this node finishes, 0 before it knows.
// s.mu is held.
func (s *share) pace() float64 {
	if s.finished < 2 || s.began.IsZero() {
		return 0
	}
	return float64(s.finished) / time.Since(s.began).Seconds()
}

// unitProgress counts a started unit's metatiles.
type unitProgress struct {
	left, processed, failed int64
	stopped                 bool // a metatile was not finished: the unit is not done
}

func newShare(e *Engine, reg *registry, t *Task, rec *record) *share {
	// The task's failures so far are the record's: only new ones are reported.
	return &share{reg: reg, e: e, t: t, perUnit: rec.PerUnit, metatiles: rec.Metatiles,
		open: map[int64]*unitProgress{}, failures: t.failures.Load()}
}

// want is how many units the node keeps claimed ahead: claimAhead of work
// at its pace, and at least two per worker the task may have here. The
// registry hands out fewer near the end, so that the last units spread
// over the nodes. s.mu is held.
func (s *share) want() int {
	return max(2*s.t.Spec.Threads, int(math.Ceil(s.pace()*claimAhead.Seconds())))
}

// next hands a worker its next metatile, claiming units as needed. It
// returns false when the ledger has nothing left for this node, or the
// task ended. While the storage is unavailable it waits and tries again:
// an outage must not end the task.
func (s *share) next() (unit, bool) {
	for s.t.ctx.Err() == nil {
		s.mu.Lock()
		if s.from < s.end {
			seq := s.from
			s.from++
			if s.began.IsZero() {
				s.began = time.Now()
			}
			s.mu.Unlock()
			u, _ := s.t.iter.at(seq)
			u.seq = seq
			return u, true
		}
		if len(s.queue) > 0 {
			k := s.queue[0]
			s.queue = s.queue[1:]
			s.from, s.end = k*s.perUnit, min((k+1)*s.perUnit, s.metatiles)
			s.open[k] = &unitProgress{left: s.end - s.from}
			// Claim the next units while half of claimAhead is still queued.
			ahead := float64(len(s.queue)) < max(float64(s.t.Spec.Threads), s.pace()*claimAhead.Seconds()/2)
			s.mu.Unlock()
			if ahead {
				go s.sync(true, false) // claim ahead while this unit runs
			}
			continue
		}
		s.mu.Unlock()
		n, err := s.sync(true, true)
		if errors.Is(err, errGone) {
			return unit{}, false
		}
		if err != nil {
			s.e.setLastErr(s.t, err.Error())
			_, poll := s.reg.n.Settings()
			if !sleep(s.t.ctx, poll) {
				break
			}
			continue
		}
		if n == 0 {
			return unit{}, false
		}
	}
	return unit{}, false
}

// finish records a metatile's outcome; a unit's last one makes the unit
// done: its counts go to a done record at once (for whoever takes over
// if this node dies before reporting it) and to the next report.
func (s *share) finish(seq int64, o outcome) {
	k := seq / s.perUnit
	s.mu.Lock()
	p := s.open[k]
	if p == nil {
		s.mu.Unlock()
		return
	}
	p.left--
	if o.stopped {
		p.stopped = true
	}
	p.processed += o.processed
	p.failed += o.failed
	if p.left > 0 || p.stopped {
		s.mu.Unlock()
		return
	}
	delete(s.open, k)
	s.finished++
	d := doneUnit{Unit: k, Processed: p.processed, Failed: p.failed, Node: s.reg.n.ID}
	s.mu.Unlock()
	b, _ := json.Marshal(d)
	if err := s.reg.n.Store(doneKey(s.t.ID, k), b); err != nil {
		// Still reported with the next claim; only a takeover after this
		// node's death would do the unit again.
		s.reg.log.Warn("writing a done work unit failed", zap.Int64("task", s.t.ID), zap.Int64("unit", k), zap.Error(err))
	}
	s.mu.Lock()
	s.done = append(s.done, d)
	s.mu.Unlock()
}

// sync reports finished units and failures, and with claim tops up the
// queue of claimed units. wait says whether to wait for a claim already
// under way (a worker with nothing to do) or give up (claiming ahead).
// It returns how many units are queued.
func (s *share) sync(claim, wait bool) (int, error) {
	if wait {
		s.claiming.Lock()
	} else if !s.claiming.TryLock() {
		return 0, nil
	}
	defer s.claiming.Unlock()
	s.mu.Lock()
	want := 0
	if claim {
		want = max(0, s.want()-len(s.queue))
		if len(s.queue) > 0 && wait {
			want = 0 // another worker claimed meanwhile
		}
	}
	rep := report{done: s.done, failures: s.t.failures.Load() - s.failures}
	s.done = nil
	s.mu.Unlock()
	if want == 0 && len(rep.done) == 0 && rep.failures == 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue), nil
	}
	rep.lastErr = s.e.lastErr(s.t)
	got, rec, err := s.reg.claim(s.t.ID, want, rep)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reported = time.Now()
	if err != nil && !errors.Is(err, errGone) {
		s.done = append(rep.done, s.done...) // reported next time
		return len(s.queue), err
	}
	s.failures += rep.failures
	if err != nil {
		return 0, err
	}
	s.queue = append(s.queue, got...)
	if claim && len(got) == 0 && len(s.queue) == 0 {
		s.exhausted = true
	}
	if !rec.active() {
		return 0, errGone
	}
	return len(s.queue), nil
}

// pending reports whether finished units have waited reportEvery to be reported.
func (s *share) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return (len(s.done) > 0 || s.t.failures.Load() != s.failures) && time.Since(s.reported) >= reportEvery
}

// idle reports whether the ledger had nothing left for this node.
func (s *share) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exhausted && len(s.queue) == 0 && s.from >= s.end
}

// revive lets the node's workers back at the task when the ledger has
// units to give again: given back by a stopping node, or held by one
// that went silent.
func (s *share) revive(rec *record) {
	avail := rec.Next < rec.Units || len(rec.Free) > 0
	for _, node := range rec.Held {
		avail = avail || !s.reg.n.Alive(node)
	}
	if avail {
		s.mu.Lock()
		s.exhausted = false
		s.mu.Unlock()
	}
}

// giveBack reports what is done and frees every unit this node holds
// and has not finished, as it stops.
func (s *share) giveBack() {
	s.claiming.Lock()
	defer s.claiming.Unlock()
	s.mu.Lock()
	units := append([]int64(nil), s.queue...)
	for k := range s.open {
		units = append(units, k)
	}
	slices.Sort(units)
	rep := report{done: s.done, failures: s.t.failures.Load() - s.failures}
	s.queue, s.open, s.done, s.from, s.end = nil, map[int64]*unitProgress{}, nil, 0, 0
	s.mu.Unlock()
	if len(units) == 0 && len(rep.done) == 0 {
		return
	}
	if err := s.reg.giveBack(s.t.ID, units, rep); err != nil {
		s.reg.log.Warn("giving back work units failed: others take them over after the lease",
			zap.Int64("task", s.t.ID), zap.Int("units", len(units)), zap.Error(err))
	}
}
