package seeder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
)

// Config tunes an engine.
type Config struct {
	// Workers is the size of the global worker pool.
	Workers int
	// Retry is the default policy; a request may override each part.
	Retry RetryPolicy
	// History is how many finished tasks stay reachable.
	History int
	// CheckpointInterval is how often running tasks' progress is saved.
	CheckpointInterval time.Duration
	// ExportDir is where export tasks write their files.
	ExportDir string
}

// Engine runs the tasks of one named cache. It outlives config reloads (it
// is shared through a caddy.UsagePool keyed by the cache's name), so a
// reload neither loses nor duplicates running tasks.
type Engine struct {
	cacheName string
	log       *zap.Logger
	ctx       context.Context
	cancel    context.CancelFunc
	running   sync.WaitGroup // workers and their units
	loops     sync.WaitGroup // the checkpoint loop
	saving    sync.WaitGroup // finished tasks' final records being written

	mu sync.Mutex
	// attached are the caches of the configs that drive the engine, oldest
	// first; the newest is the one it works with. During a reload the new
	// config attaches before the old one detaches, and a failed reload
	// detaches the new one again. Each is retained, so its store stays
	// open while the engine may write a checkpoint to it.
	attached []*tilecache.Cache
	st       store.Store // the store the active tasks belong to
	maxID    int64       // the highest task id handed out
	cfg      Config
	busy     int
	active   []*Task // pending and running, by id
	history  []*Task // finished, oldest first
	byID     map[int64]*Task
	// cl is the shared task registry when the cache is clustered (its
	// tasks then live there; active holds this node's shares of them),
	// clStop ends its poll loop, and clErr is the poll's last failure.
	cl     *registry
	clStop context.CancelFunc
	clErr  error
}

var engines = caddy.NewUsagePool()

// Acquire returns the engine of the named tile_cache, creating it on first
// use, and applies cfg (the newest configuration wins). Pair with Release.
func Acquire(cacheName string, cfg Config, log *zap.Logger) (*Engine, error) {
	v, _, err := engines.LoadOrNew(cacheName, func() (caddy.Destructor, error) {
		ctx, cancel := context.WithCancel(context.Background())
		e := &Engine{cacheName: cacheName, log: log, ctx: ctx, cancel: cancel, byID: map[int64]*Task{}}
		every := cfg.CheckpointInterval
		if every <= 0 {
			every = 2 * time.Second
		}
		e.loops.Add(1)
		go func() {
			defer e.loops.Done()
			e.checkpointLoop(every)
		}()
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	e := v.(*Engine)
	e.Configure(cfg)
	return e, nil
}

// Release gives back one use of the engine; the last stops it.
func (e *Engine) Release() error {
	_, err := engines.Delete(e.cacheName)
	return err
}

// Configure applies a new configuration; a larger pool starts waiting work at once.
func (e *Engine) Configure(cfg Config) {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.History < 1 {
		cfg.History = 1
	}
	e.mu.Lock()
	e.cfg = cfg
	e.scheduleLocked()
	e.mu.Unlock()
}

// Workers is the pool size.
func (e *Engine) Workers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg.Workers
}

// DefaultRetry is the configured default retry policy.
func (e *Engine) DefaultRetry() RetryPolicy {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg.Retry
}

// Destruct stops the workers at their next metatile boundary, waits for
// them and saves every unfinished task's checkpoint: the tasks are not
// aborted, they resume when a cache on the same store starts again.
func (e *Engine) Destruct() error {
	e.cancel()
	e.running.Wait()
	e.loops.Wait()
	// The tasks that ended as the workers stopped (killed ones finishing
	// their metatiles, above all) have their final records written before
	// the store can close: left to race the close, a killed task was
	// saved as running and came back after the restart.
	e.saving.Wait()
	e.mu.Lock()
	active := append([]*Task(nil), e.active...)
	e.mu.Unlock()
	e.persist(active...)
	for _, t := range active {
		if t.cl != nil {
			t.cl.giveBack() // the other nodes go on with them at once
		}
	}
	e.mu.Lock()
	attached := e.attached
	e.attached = nil
	e.mu.Unlock()
	var errs []error
	for _, c := range attached {
		errs = append(errs, c.Release())
	}
	return errors.Join(errs...)
}

// Attach makes c the cache the engine works with, until a newer one is
// attached or c is detached. Tasks saved in its store resume at once.
func (e *Engine) Attach(c *tilecache.Cache) {
	c.Retain()
	e.mu.Lock()
	e.attached = append(e.attached, c)
	e.mu.Unlock()
	e.current()
}

// Detach forgets c; the engine goes back to the newest cache still
// attached. A cache it does not know (already let go) is ignored.
func (e *Engine) Detach(c *tilecache.Cache) {
	e.mu.Lock()
	i := slices.Index(e.attached, c)
	if i >= 0 {
		e.attached = slices.Delete(e.attached, i, i+1)
	}
	e.mu.Unlock()
	if i >= 0 {
		c.Release()
	}
}

// errNoCache: the engine is not attached to any cache (its config is
// gone, or not started yet).
var errNoCache = errors.New("the tile cache is not available")

// current returns the cache, first making sure the engine's tasks belong to
// its store. Task ids come from the store, so when a reload points the
// cache at another store, the tasks of the old one (whose ids the new
// store knows nothing of) are stopped and forgotten.
func (e *Engine) current() (*tilecache.Cache, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.attached) == 0 {
		return nil, errNoCache
	}
	c := e.attached[len(e.attached)-1]
	if st := c.Store(); e.st == nil || e.st.Name() != st.Name() || e.clusterNode() != c.Cluster() {
		if e.st != nil {
			e.log.Info("tile store changed: stopping the old store's tasks",
				zap.String("old", e.st.Name()), zap.String("new", st.Name()))
		}
		// The old store's tasks stop (their checkpoints stay in the old
		// store, where they resume if the cache ever returns to it).
		for _, t := range e.active {
			t.halt(true)
		}
		e.active, e.history, e.byID = nil, nil, map[int64]*Task{}
		e.st = st
		if e.clStop != nil {
			e.clStop()
			e.cl, e.clStop, e.clErr = nil, nil, nil
		}
		if node := c.Cluster(); node != nil {
			e.joinLocked(node) // the tasks come from the shared registry
		} else {
			e.loadLocked(c)
		}
		e.scheduleLocked()
	}
	return c, nil
}

// nextID draws the next task id from the store, skipping any the engine
// has already handed out: after a reload onto another store, that
// store's sequence starts again at 1, yet an id must never be reused.
func (e *Engine) nextID(c *tilecache.Cache) (int64, error) {
	for {
		id, err := c.Store().NextID("task")
		if err != nil {
			return 0, err
		}
		e.mu.Lock()
		fresh := int64(id) > e.maxID
		if fresh {
			e.maxID = int64(id)
		}
		e.mu.Unlock()
		if fresh {
			return int64(id), nil
		}
	}
}

// Submit accepts a validated task and schedules it.
func (e *Engine) Submit(spec Spec) (*Task, error) {
	c, err := e.current()
	if err != nil {
		return nil, err
	}
	l, ok := c.Layer(spec.Layer)
	if !ok {
		return nil, fmt.Errorf("unknown layer %q", spec.Layer)
	}
	e.mu.Lock()
	reg, floor := e.cl, e.maxID
	e.mu.Unlock()
	var id int64
	if reg != nil {
		id, err = reg.nextID(floor) // unique across the nodes
	} else {
		id, err = e.nextID(c)
	}
	if err != nil {
		return nil, fmt.Errorf("allocating a task id: %w", err)
	}
	t := newTask(e.ctx, id, c.Store())
	t.Spec, t.created = spec, time.Now()
	t.Total = spec.Tiles()
	if spec.Type == Truncate {
		t.Spec.Threads = 1
	}
	if spec.Type == Truncate || spec.AllParams {
		t.Total *= int64(len(spec.Sets)) // the area, once per tile set
	}
	t.iter = newPlan(&t.Spec, int64(l.MetaWidth), int64(l.MetaHeight))
	if reg != nil {
		if err := e.submitShared(reg, t); err != nil {
			return nil, err
		}
		return t, nil
	}
	if spec.dataKind() != "" {
		// Saved once, before the record that names it.
		b, err := spec.encodeData()
		if err == nil {
			err = c.Store().PutTaskData(t.ID, b)
		}
		if err != nil {
			return nil, fmt.Errorf("saving the task's %s: %w", spec.dataKind(), err)
		}
	}
	e.mu.Lock()
	e.active = append(e.active, t)
	e.byID[t.ID] = t
	e.mu.Unlock()
	e.persist(t) // saved before it can start: a crash now loses no accepted task
	e.mu.Lock()
	e.scheduleLocked()
	e.mu.Unlock()
	e.log.Info("task submitted", zap.Int64("id", t.ID), zap.String("layer", spec.Layer),
		zap.Stringer("type", spec.Type), zap.Int64("tiles", t.Total), zap.Int("threads", t.Spec.Threads))
	return t, nil
}

// scheduleLocked hands free workers to tasks in submission order: the
// oldest task that may use another worker and still has metatiles to give
// gets it. A task with no worker yet is PENDING.
func (e *Engine) scheduleLocked() {
	for e.busy < e.cfg.Workers && e.ctx.Err() == nil {
		var next *Task
		for _, t := range e.active {
			if !t.killed.Load() && t.workers < t.Spec.Threads && !t.exhausted() {
				next = t
				break
			}
			if t.cl == nil && t.workers == 0 && t.iter.done() && !t.killed.Load() && !t.exp.writing {
				// Nothing left and nobody at work: done (a task of no tiles).
				next = t
				break
			}
		}
		if next == nil {
			return
		}
		next.workers++
		e.busy++
		if next.state == Pending {
			next.state = Running
			next.started = time.Now()
		}
		e.running.Add(1)
		go e.work(next)
	}
}

func (it *iterator) done() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.exhausted
}

// work is one worker on one task: metatile after metatile until the task
// has none left, is killed, or the engine stops.
func (e *Engine) work(t *Task) {
	defer e.running.Done()
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("seeding worker panicked", zap.Int64("task", t.ID), zap.Any("panic", r), zap.Stack("stack"))
			e.abort(t, fmt.Sprintf("internal error: %v", r))
		}
		e.mu.Lock()
		t.workers--
		e.busy--
		if t.workers == 0 && !t.stopped.Load() && (t.killed.Load() || t.exhausted()) {
			e.finishLocked(t)
		}
		e.scheduleLocked()
		e.mu.Unlock()
	}()
	// A worker overlaps its metatiles: once the upstream has answered for
	// one, it puts the next request on the wire while the first is decoded,
	// sliced, encoded and stored. The upstream's render time, the real
	// limit, then hides the local work. Still one request on the wire per
	// worker, but up to three metatiles in hand: when storing is slow (16
	// PUTs to S3, a busy disk) one metatile's local work can outlast the
	// next render, and with only two in hand the worker's upstream request
	// then waited for it (S3 at 20 ms per metatile: 642 instead of 399
	// tiles/s; three nodes on one MinIO: 2.89 instead of 2.5 x one node).
	inHand := make(chan struct{}, 3)
	var failed atomic.Pointer[string]
	for !t.killed.Load() && !t.stopped.Load() && e.ctx.Err() == nil && failed.Load() == nil {
		u, ok := t.nextUnit()
		if !ok {
			break
		}
		inHand <- struct{}{}
		fetched := make(chan struct{})
		var once sync.Once
		signal := func() { once.Do(func() { close(fetched) }) }
		e.running.Add(1)
		go func() {
			defer e.running.Done()
			defer func() { <-inHand }()
			defer signal()
			defer func() {
				if r := recover(); r != nil {
					e.log.Error("seeding panicked", zap.Int64("task", t.ID), zap.Any("panic", r), zap.Stack("stack"))
					msg := fmt.Sprintf("internal error: %v", r)
					failed.CompareAndSwap(nil, &msg)
				}
			}()
			o, err := e.runUnit(t, u, signal)
			if !o.stopped || t.cl != nil { // a share must know of a stopped metatile
				t.finishUnit(u.seq, o)
			}
			if err != nil {
				msg := err.Error()
				failed.CompareAndSwap(nil, &msg)
			}
		}()
		<-fetched
	}
	for range cap(inHand) {
		inHand <- struct{}{} // wait for the metatiles still in hand
	}
	if msg := failed.Load(); msg != nil {
		e.abort(t, *msg)
	}
}

// abort ends a task as ABORTED once its workers stop.
func (e *Engine) abort(t *Task, reason string) {
	e.mu.Lock()
	if t.reason == "" {
		t.reason = reason
	}
	e.removeActiveLocked(t)
	t.halt(false)
	reg := e.cl
	e.mu.Unlock()
	e.log.Warn("task aborted", zap.Int64("id", t.ID), zap.String("reason", reason))
	if t.cl != nil && reg != nil {
		// The task ends for every node, as it would on one.
		if _, err := reg.end(t.ID, reason); err != nil && !errors.Is(err, ErrFinished) {
			e.log.Error("aborting a shared task failed", zap.Int64("id", t.ID), zap.Error(err))
		}
	}
}

func (e *Engine) removeActiveLocked(t *Task) {
	if i := slices.Index(e.active, t); i >= 0 {
		e.active = slices.Delete(e.active, i, i+1)
	}
}

func (e *Engine) finishLocked(t *Task) {
	if t.state == Done || t.state == Aborted {
		return
	}
	if t.cl != nil {
		e.finishShareLocked(t)
		return
	}
	if t.Spec.Export != nil && !t.killed.Load() && !t.exp.written {
		if !t.exp.writing {
			e.startWriteLocked(t) // it finishes the task when the file is written
		}
		return
	}
	e.removeActiveLocked(t)
	t.finished = time.Now()
	t.cancel() // frees the task's context; it is done
	if t.killed.Load() {
		t.state = Aborted
	} else {
		t.state = Done
	}
	e.history = append(e.history, t)
	var evicted []int64
	var files []string
	for len(e.history) > e.cfg.History {
		old := e.history[0]
		evicted = append(evicted, old.ID)
		if old.Spec.Export != nil && e.cfg.ExportDir != "" {
			// An export's file goes with its task: the history bounds the directory.
			files = append(files, filepath.Join(e.cfg.ExportDir, exportName(old.ID, old.Spec.Export)))
		}
		delete(e.byID, old.ID)
		e.history = e.history[1:]
	}
	e.saving.Add(1)
	go func() { // outside e.mu: it writes to disk
		defer e.saving.Done()
		e.saveFinal(t, evicted)
		for _, f := range files {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				e.log.Warn("removing an export file failed", zap.String("file", f), zap.Error(err))
			}
		}
	}()
	e.log.Info("task finished", zap.Int64("id", t.ID), zap.Stringer("state", t.state),
		zap.Int64("processed", t.processed.Load()), zap.Int64("total", t.Total),
		zap.Int64("failed_tiles", t.failedTiles.Load()))
}

// saveFinal stores a finished task's final state and forgets the records
// that fell out of the history.
func (e *Engine) saveFinal(t *Task, evicted []int64) {
	e.persist(t)
	e.mu.Lock()
	st := e.st
	e.mu.Unlock()
	for _, id := range evicted {
		if st != nil {
			st.DeleteTask(id)
		}
	}
}

// errTooManyFailures ends a task whose failures passed its limit.
var errTooManyFailures = errors.New("too many failures")

// outcome is what became of a unit: its tiles processed, its tiles failed,
// or nothing (the task or the engine stopped first; it is not done).
type outcome struct {
	processed, failed int64
	stopped           bool
}

var stopped = outcome{stopped: true}

// runUnit does one metatile's share of the task, retrying failures.
// fetched is called once the unit no longer needs the upstream.
func (e *Engine) runUnit(t *Task, u unit, fetched func()) (outcome, error) {
	c, err := e.current()
	if err != nil {
		return stopped, err
	}
	if t.Spec.Type == Truncate {
		return e.truncateUnit(t, c, u)
	}
	if t.Spec.Export != nil && t.Spec.Export.CachedOnly {
		// Nothing to fetch: the write phase takes what is stored.
		fetched()
		t.processed.Add(u.size())
		return outcome{processed: u.size()}, nil
	}
	if !t.Spec.AllParams {
		return e.seedUnit(t, c, u, t.Spec.Params, fetched)
	}
	// Every stored parameter set, one after the other: the metatile is
	// requested once per set.
	var sum outcome
	for _, p := range t.Spec.setParams {
		o, err := e.seedUnit(t, c, u, p, fetched)
		sum.processed, sum.failed = sum.processed+o.processed, sum.failed+o.failed
		if o.stopped || err != nil {
			return outcome{processed: sum.processed, failed: sum.failed, stopped: o.stopped}, err
		}
	}
	return sum, nil
}

// seedUnit seeds or reseeds a unit's metatile in one parameter set.
func (e *Engine) seedUnit(t *Task, c *tilecache.Cache, u unit, p params.Values, fetched func()) (outcome, error) {
	n := u.size()
	l, ok := c.Layer(t.Spec.Layer)
	if !ok {
		return stopped, fmt.Errorf("layer %q is no longer configured", t.Spec.Layer)
	}
	g, ok1 := l.Grid(t.Spec.Gridset)
	f, ok2 := l.Format(t.Spec.Format)
	if !ok1 || !ok2 {
		return stopped, fmt.Errorf("layer %q no longer has gridset %s and format %s", l.Name, t.Spec.Gridset, t.Spec.Format)
	}
	set := store.Set{Layer: l.Name, Gridset: g.Name, Format: f.Name, Params: p.Hash()}
	first := gridset.Index{X: u.tiles.MinX, Y: u.tiles.MinY, Z: u.z}
	if (t.Spec.Type == Seed || t.Spec.Type == Export) && e.allFresh(c, l, set, u) {
		t.processed.Add(n)
		return outcome{processed: n}, nil
	}
	m, err := l.NewMetaRequest(g, f, p, first)
	if err != nil {
		return stopped, err
	}
	wait := t.Spec.Retry.Wait
	for attempt := 0; ; attempt++ {
		res, err := c.Fetch(t.ctx, m, tilecache.PrioritySeed, fetched)
		if err == nil && res.StoreErr != nil {
			// The upstream rendered it; only storing failed. Store the
			// same tiles again rather than render them again.
			err = e.storeAgain(t, c, res)
		}
		if err == nil {
			t.processed.Add(n)
			return outcome{processed: n}, nil
		}
		if t.ctx.Err() != nil {
			return stopped, nil // killed or stopping: the metatile is simply not done
		}
		if errors.Is(err, tilecache.ErrBreakerOpen) {
			// The upstream is down (the cache's circuit breaker is open):
			// wait until it lets requests through again, then retry. Not
			// a failure of this metatile: a long outage must neither use
			// up its retries nor abort the task.
			e.mu.Lock()
			t.lastErr = err.Error()
			e.mu.Unlock()
			if c.UpstreamReady(t.ctx) != nil {
				return stopped, nil
			}
			attempt--
			continue
		}
		if errors.Is(err, tilecache.ErrUpstreamBusy) {
			// A visitor's fetch this unit joined gave up its place in
			// line: waiting is no failure of the metatile. Go again.
			attempt--
			continue
		}
		abort := e.failure(t, err)
		if abort != nil || attempt >= t.Spec.Retry.Retries {
			t.failedTiles.Add(n)
			if abort == nil {
				e.log.Warn("metatile failed", zap.Int64("task", t.ID), zap.Int("z", u.z),
					zap.Int64("x", u.tiles.MinX), zap.Int64("y", u.tiles.MinY), zap.Error(err))
			}
			return outcome{failed: n}, abort
		}
		if !sleep(t.ctx, wait) {
			return stopped, nil
		}
		wait = min(wait*2, time.Minute)
	}
}

// truncateUnit deletes a unit's tiles from every tile set of the task.
// Deleting is local and cheap; a failure here is a store fault.
func (e *Engine) truncateUnit(t *Task, c *tilecache.Cache, u unit) (outcome, error) {
	n := u.size()
	if t.Spec.cover != nil && u.only == nil {
		n = t.Spec.cover.Count(u.z, u.tiles) // a whole level of a polygon
	}
	var o outcome
	for _, set := range t.Spec.Sets {
		if err := e.deleteUnit(c.Store(), set, t, u); err != nil {
			o.failed += n
			t.failedTiles.Add(n)
			if err := e.failure(t, err); err != nil {
				return o, err
			}
			continue
		}
		if t.killed.Load() || e.ctx.Err() != nil {
			return stopped, nil // stopped part-way: not counted as done
		}
		t.processed.Add(n)
		o.processed += n
	}
	return o, nil
}

// deleteUnit deletes the unit's tiles of one set: a box at once, a
// polygon's level row by row (its spans), a list's tiles run by run.
func (e *Engine) deleteUnit(st store.Store, set store.Set, t *Task, u unit) error {
	stop := func() bool { return t.killed.Load() || e.ctx.Err() != nil }
	if t.Spec.cover == nil || u.only != nil {
		if u.only == nil {
			_, err := st.DeleteRange(set, u.z, u.tiles, stop)
			return err
		}
		var err error
		u.runs(func(y, x0, x1 int64) bool {
			_, err = st.DeleteRange(set, u.z, gridset.Range{MinX: x0, MinY: y, MaxX: x1, MaxY: y}, stop)
			return err == nil && !stop()
		})
		return err
	}
	var spans []area.Span
	for y := u.tiles.MinY; y <= u.tiles.MaxY && !stop(); y++ {
		spans = t.Spec.cover.Row(u.z, y, spans[:0])
		for _, s := range spans {
			s.MinX, s.MaxX = max(s.MinX, u.tiles.MinX), min(s.MaxX, u.tiles.MaxX)
			if s.MinX > s.MaxX {
				continue
			}
			if _, err := st.DeleteRange(set, u.z, gridset.Range{MinX: s.MinX, MinY: y, MaxX: s.MaxX, MaxY: y}, stop); err != nil {
				return err
			}
		}
	}
	return nil
}

// storeAgain stores a rendered metatile again while the store says it is
// unavailable (shared storage down, its breaker open), waiting between
// tries for as long as the task runs and counting no failure: an outage of
// S3 must not fail a seed, nor make the upstream render it again. Any
// other store error is returned to the metatile's own retries.
func (e *Engine) storeAgain(t *Task, c *tilecache.Cache, res *tilecache.MetaResult) error {
	err := res.StoreErr
	for wait := max(t.Spec.Retry.Wait, 100*time.Millisecond); errors.Is(err, store.ErrUnavailable); wait = min(wait*2, 30*time.Second) {
		e.mu.Lock()
		t.lastErr = "storing: " + err.Error()
		e.mu.Unlock()
		if !sleep(t.ctx, wait) {
			return t.ctx.Err()
		}
		err = c.Store().Put(res.Tiles, res.StoredAt)
	}
	if err != nil {
		return fmt.Errorf("storing: %w", err)
	}
	return nil
}

// failure counts one failed attempt of a task; past the task's limit it
// returns the error that aborts it.
func (e *Engine) failure(t *Task, err error) error {
	total := t.failures.Add(1)
	e.mu.Lock()
	t.lastErr = err.Error()
	e.mu.Unlock()
	if total > t.Spec.Retry.MaxFailures {
		return fmt.Errorf("%w: %d failed attempts, last: %v", errTooManyFailures, total, err)
	}
	return nil
}

// sleep waits d unless ctx ends first; it reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// allFresh reports whether every tile of the unit is stored and within
// the layer's server expiry: only then may `seed` skip the metatile.
func (e *Engine) allFresh(c *tilecache.Cache, l *tilecache.Layer, set store.Set, u unit) bool {
	keys := make([]store.Key, 0, u.size())
	u.runs(func(y, x0, x1 int64) bool {
		for x := x0; x <= x1; x++ {
			keys = append(keys, store.Key{Set: set, Z: u.z, X: x, Y: y})
		}
		return true
	})
	var notBefore time.Time
	if l.ServerExpiry > 0 {
		notBefore = time.Now().Add(-l.ServerExpiry)
	}
	have, err := c.Store().Has(keys, notBefore)
	if err != nil {
		return false
	}
	for _, h := range have {
		if !h {
			return false
		}
	}
	return true
}
