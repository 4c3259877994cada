package quota

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// Store is what eviction needs of a tile store (the Badger store with
// usage accounting and access tracking on).
type Store interface {
	Name() string
	Usage() ([]store.LevelUsage, bool, error)
	Pages(layer string, fn func(store.PageStat) error) error
	EvictPage(p store.Page, lastSeen int64) (store.Eviction, error)
	ReclaimEvicted(diskTarget int64) (int, error)
	Evicted() (map[string][2]int64, error)
	// DiskSize is the space the store's files take on disk (what du
	// reports), 0 where the evictor does not own the disk (S3).
	DiskSize() int64
}

// CheckEvery is how often an evictor compares usage with the quota.
var CheckEvery = 500 * time.Millisecond

// Evictor enforces one store's quota. One runs per store directory,
// shared by every configuration that names it across reloads (a
// caddy.UsagePool); the last configuration provisioned sets the quota.
type Evictor struct {
	st   Store
	log  *zap.Logger
	mu   sync.Mutex // guards cfg
	cfg  *Config
	stop chan struct{}
	done chan struct{}
	kick chan struct{}
	now  func() time.Time

	statsMu sync.Mutex
	last    Pass

	// The disk is given back after evictions, at most every ReclaimEvery
	// (reads wait while Badger flushes its memtables for it), and when the
	// directory is over the quota with nothing evicted (see Enforce), at
	// most every diskWait.
	unreclaimed bool
	lastReclaim time.Time
	diskWait    time.Duration

	paused atomic.Bool // PUT rest/diskquota with enabled false
}

// SetEnabled pauses (false) or resumes eviction; usage and access are
// still kept while paused. A config reload resumes it.
func (e *Evictor) SetEnabled(on bool) {
	e.paused.Store(!on)
	if on {
		e.Kick()
	}
}

// Enabled reports whether eviction runs.
func (e *Evictor) Enabled() bool { return !e.paused.Load() }

// EvictionDuty is the share of a pass's time spent evicting, the rest
// paused between pages (a variable for benchmarks).
var EvictionDuty = 0.5

// ReclaimEvery spaces the reclaims of evicted tiles' disk space: each
// makes reads wait for a memtable flush (10–40 ms measured), so a store
// evicting every second pays it once every few seconds, not every pass.
var ReclaimEvery = 5 * time.Second

// DiskWaitMax bounds how far apart reclaims the directory's size asks for
// are spaced when they give nothing back: the directory may be over the
// quota with no garbage to collect (kept levels over it, or the fixed part
// on a small quota), and each reclaim stalls reads for a flush.
var DiskWaitMax = 5 * time.Minute

// Pass is what one eviction pass did.
type Pass struct {
	At       time.Time
	Tiles    int64
	Bytes    int64
	Pages    int
	Before   int64 // the store's bytes when the pass began
	After    int64 // and when it ended
	Files    int   // value-log files given back
	Took     time.Duration
	Reclaim  time.Duration // of Took, giving the disk back
	Short    bool          // candidates ran out before the watermark was reached
	Evicted  map[string][2]int64
	Reason   string // "layer" or "global" (the first bound crossed)
	Skipped  int    // pages used after they were chosen
	Recounts bool   // usage was being recounted: no pass
}

var evictors = caddy.NewUsagePool()

// Acquire returns the evictor of st, started with cfg on first use and
// given cfg otherwise (a reload). Each Acquire is paired with Release.
func Acquire(st Store, cfg *Config, log *zap.Logger) (*Evictor, error) {
	v, loaded, err := evictors.LoadOrNew(st.Name(), func() (caddy.Destructor, error) {
		e := &Evictor{st: st, log: log, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}),
			kick: make(chan struct{}, 1), now: time.Now, lastReclaim: time.Now(), diskWait: ReclaimEvery}
		go e.run()
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	e := v.(*Evictor)
	if loaded {
		// A config load is the source of truth: its quota, running.
		e.SetConfig(cfg)
		e.SetEnabled(true)
	}
	return e, nil
}

// Release gives back one use; the last stops the evictor.
func (e *Evictor) Release() error {
	_, err := evictors.Delete(e.st.Name())
	return err
}

// Destruct stops the evictor (the pool calls it after the last Release).
func (e *Evictor) Destruct() error {
	close(e.stop)
	<-e.done
	return nil
}

// Config is the quota being enforced.
func (e *Evictor) Config() *Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg
}

// SetConfig replaces the quota (a reload, or PUT rest/diskquota; cfg is
// validated) and checks usage against it at once, unless eviction is
// paused (SetEnabled), which it leaves as it is.
func (e *Evictor) SetConfig(cfg *Config) {
	e.mu.Lock()
	e.cfg = cfg
	e.mu.Unlock()
	e.Kick()
	e.log.Info("tile quota set", zap.String("quota", cfg.String()))
}

// Kick asks for a check now rather than at the next tick.
func (e *Evictor) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// LastPass is the last pass that evicted something.
func (e *Evictor) LastPass() Pass {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	return e.last
}

func (e *Evictor) run() {
	defer close(e.done)
	t := time.NewTicker(CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		case <-e.kick:
		}
		if e.paused.Load() {
			continue
		}
		p, err := e.Enforce()
		switch {
		case errors.Is(err, store.ErrClosed):
			return
		case err != nil:
			e.log.Error("tile quota: eviction pass failed", zap.Error(err))
		case p.Pages > 0:
			passMetrics(e.st.Name(), p)
			fields := []zap.Field{zap.String("reason", p.Reason), zap.Int64("tiles", p.Tiles), zap.Int64("bytes", p.Bytes),
				zap.Int("pages", p.Pages), zap.Int64("usage_before", p.Before), zap.Int64("usage_after", p.After),
				zap.Int("value_log_files_freed", p.Files), zap.Int("pages_in_use_kept", p.Skipped), zap.Duration("took", p.Took)}
			if p.Short {
				e.log.Warn("tile quota: evicted every page it may and is still over the watermark (kept levels hold the rest)", fields...)
			} else {
				e.log.Info("tile quota: evicted", fields...)
			}
		}
	}
}

// Enforce runs one pass now (one goroutine at a time: the evictor's own,
// or a benchmark's that stopped it): each layer over its own quota loses its
// coldest pages down to its low watermark, then, if the whole store is
// over the global quota, the coldest pages of every layer go down to the
// global watermark. It returns what it did (Pages 0: nothing was over).
func (e *Evictor) Enforce() (Pass, error) {
	cfg := e.Config()
	start := e.now()
	p := Pass{At: start, Evicted: map[string][2]int64{}}
	levels, recounting, err := e.st.Usage()
	if err != nil {
		return p, err
	}
	if recounting {
		// Incomplete figures would evict too little, or nothing; wait.
		p.Recounts = true
		return p, nil
	}
	byLayer := map[string]int64{}
	var total int64
	for _, lv := range levels {
		byLayer[lv.Set.Layer] += lv.Bytes
		total += lv.Bytes
	}
	p.Before = total
	for _, name := range cfg.layerNames() {
		lq := cfg.Layers[name]
		if lq.MaxSize <= 0 || byLayer[name] <= lq.MaxSize {
			continue
		}
		if p.Reason == "" {
			p.Reason = "layer"
		}
		need := byLayer[name] - int64(float64(lq.MaxSize)*cfg.LowWatermark)
		freed, err := e.evict(cfg, name, need, &p)
		total -= freed
		if err != nil {
			return p, err
		}
	}
	if cfg.MaxSize > 0 && total > cfg.MaxSize {
		if p.Reason == "" {
			p.Reason = "global"
		}
		freed, err := e.evict(cfg, "", total-int64(float64(cfg.MaxSize)*cfg.LowWatermark), &p)
		total -= freed
		if err != nil {
			return p, err
		}
	}
	p.After = total
	if p.Pages > 0 {
		e.unreclaimed, e.diskWait = true, ReclaimEvery
	}
	// The directory itself is compared with the quota too. A store that
	// was killed lost the reclaim it owed: the deletions waiting in its
	// memtable, which Badger replays into the memtable on the next start,
	// and the value-log files not rewritten yet. Nothing is evicted after
	// such a start while usage is under the quota, so without this the
	// garbage would stay for good (ten kills left 15× the quota on disk).
	// The first check comes ReclaimEvery after the start, not at once: a
	// reclaim holds writes through a memtable flush, and a store just
	// opened has its first misses and resumed seeds to store.
	byDisk := false
	if !e.unreclaimed && cfg.MaxSize > 0 && e.now().Sub(e.lastReclaim) >= e.diskWait && e.st.DiskSize() > cfg.MaxSize {
		e.unreclaimed, byDisk = true, true
	}
	if e.unreclaimed && e.now().Sub(e.lastReclaim) >= ReclaimEvery {
		rs := e.now()
		files, err := e.st.ReclaimEvicted(cfg.MaxSize)
		if err != nil {
			return p, err
		}
		e.unreclaimed, e.lastReclaim = false, e.now()
		p.Files = files
		p.Reclaim = e.lastReclaim.Sub(rs)
		switch {
		case byDisk && files == 0:
			// Nothing to give back: ask again later, then less often.
			e.diskWait = min(2*e.diskWait, DiskWaitMax)
		case byDisk:
			e.log.Info("tile quota: disk given back", zap.Int("value_log_files_freed", files),
				zap.Int64("disk_bytes", e.st.DiskSize()), zap.Duration("took", p.Reclaim))
			e.diskWait = ReclaimEvery
		}
	}
	p.Took = e.now().Sub(start)
	if p.Pages > 0 {
		e.statsMu.Lock()
		e.last = p
		e.statsMu.Unlock()
	}
	return p, nil
}

// candidate is a page that may go, with its coldness.
type candidate struct {
	stat  store.PageStat
	score float64 // lower goes first
}

// evict removes the coldest pages of layer (of every layer when empty)
// until need bytes are gone or no candidate is left.
func (e *Evictor) evict(cfg *Config, layer string, need int64, p *Pass) (int64, error) {
	now := e.now().Unix()
	var cands []candidate
	err := e.st.Pages(layer, func(ps store.PageStat) error {
		if cfg.kept(ps.Layer, ps.Z) {
			return nil
		}
		cands = append(cands, candidate{ps, score(cfg.policyOf(ps.Layer), ps, now)})
		return nil
	})
	if err != nil {
		return 0, err
	}
	order(cands)
	var freed int64
	for _, c := range cands {
		if freed >= need {
			return freed, nil
		}
		t0 := time.Now()
		ev, err := e.st.EvictPage(c.stat.Page, c.stat.Last)
		if err != nil {
			return freed, err
		}
		// Leave the cores to visitors between pages: a pass evicting
		// flat out holds a core and Badger's writer another, and on a
		// small machine hits queue behind them. Pausing as long as each
		// page took halves eviction's speed (still far above what any
		// upstream can fill) and its share of the CPU.
		if d := time.Since(t0); d > 0 && EvictionDuty < 1 {
			time.Sleep(time.Duration(float64(d) * (1 - EvictionDuty) / EvictionDuty))
		} else {
			runtime.Gosched()
		}
		if ev.Skipped {
			p.Skipped++
			continue
		}
		if ev.Tiles == 0 {
			continue // an empty page's record (its tiles truncated)
		}
		freed += ev.Bytes
		p.Pages++
		p.Tiles += ev.Tiles
		p.Bytes += ev.Bytes
		t := p.Evicted[c.stat.Layer]
		p.Evicted[c.stat.Layer] = [2]int64{t[0] + ev.Tiles, t[1] + ev.Bytes}
	}
	if freed < need {
		p.Short = true
	}
	return freed, nil
}

// order sorts candidates coldest first.
func order(cands []candidate) {
	slices.SortFunc(cands, func(a, b candidate) int {
		switch {
		case a.score < b.score:
			return -1
		case a.score > b.score:
			return 1
		}
		// Among equals (uses are stamped to the second), the page hit
		// less first: a page a seed is writing into right now is as
		// recent as one visitors keep hitting. Then the higher level:
		// its tiles are the cheapest to render again and the least
		// likely to be seen.
		if a.stat.Hits != b.stat.Hits {
			if a.stat.Hits < b.stat.Hits {
				return -1
			}
			return 1
		}
		return b.stat.Z - a.stat.Z
	})
}

// score orders pages coldest first under a policy.
func score(pol Policy, ps store.PageStat, now int64) float64 {
	if pol == LFU {
		age := float64(now-ps.Created) / 3600
		if ps.Created == 0 || age < 1 {
			age = 1
		}
		// Hits per hour of life; the fraction of the last use breaks
		// ties between pages of equal frequency, oldest first.
		return float64(ps.Hits)/age + float64(ps.Last)/math.Pow(2, 40)
	}
	return float64(ps.Last)
}
