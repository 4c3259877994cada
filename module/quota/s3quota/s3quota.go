// Package s3quota puts a quota (package quota) on tiles in an S3 bucket,
// also when several Caddy nodes share the bucket as a cluster. It is a
// quota.Store over s3store: the same Evictor runs on it.
//
// Usage is an estimate: the figures of the last listing of the bucket
// (ListObjectsV2: sizes come with the keys, one request per 1,000 tiles,
// never a request per tile) plus the bytes PUT since by every node. Each
// node counts its own PUTs in memory (s3store.PutCounts) and, in a
// cluster, writes only its own record of them (nodes/<id>) to Caddy's
// storage every SyncEvery; every node sums the records of the listing's
// epoch. A PUT that replaces a tile counts again, so the estimate runs
// high; when it crosses a quota, the node takes the evict lock, lists the
// bucket afresh (exact sizes), and only if the listing confirms it does a
// pass evict, from that listing: pages of 16×16 tiles, coldest first by
// Last-Modified and the uses every node records (hits/<id>). The listing
// is the new base (listing, a new epoch); nodes reset their counts when
// they see it. One node evicts at a time: the pass holds the storage's
// lock quota/evict, and the others skip their passes meanwhile.
package s3quota

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
	"github.com/tilecache/caddy-tilecache/module/store/tiered"
)

// Timings (variables for tests).
var (
	// SyncEvery: a node writes its PUT counts and reads the others'.
	SyncEvery = 2 * time.Second
	// HitsEvery: a node writes the pages it saw used.
	HitsEvery = 10 * time.Second
	// MinListEvery spaces listings that did not find the bucket over its
	// quota (the estimate runs high with overwrites).
	MinListEvery = 5 * time.Second
	// ClockMargin is how far another node's clock may be ahead of this
	// node's (NTP keeps them far closer): a node that sees a new listing
	// counts its PUTs from its counts of this long (and up to a second
	// more) before the listing began by the lister's clock, since the
	// listing may have passed the keys of PUTs made while it ran.
	ClockMargin = time.Second
	// RefreshEvery: a bucket written since its last listing is listed
	// again after this long (or ten times as long as that listing took,
	// if longer), quota crossed or not: the estimate drifts high with
	// overwrites, and rest/usage.json's figures per tile set and level
	// come only from listings.
	RefreshEvery = 10 * time.Minute
	// BreakAfter: a node that has not seen the evict lock's holder beat
	// for this long (by its own clock) breaks the lock.
	BreakAfter = time.Minute
	// ListTimeout bounds one listing of the bucket.
	ListTimeout = 10 * time.Minute
)

// listedHook, when set (tests), runs as a listing has passed every key.
var listedHook func()

// MaxHitPages bounds the pages whose uses a node keeps and records.
var MaxHitPages = 10000

type levelKey struct {
	store.Set
	Z int
}

type tileRef struct {
	x, y uint32
}

// pageObjs is what a listing found of a page.
type pageObjs struct {
	tiles         []tileRef
	bytes         int64
	last, created int64 // Last-Modified, newest and oldest, Unix seconds
}

// Adapter is the quota.Store of one bucket and prefix, one per process
// (Acquire), shared across config reloads.
type Adapter struct {
	name   string
	log    *zap.Logger
	shared *Shared // nil: a single node, everything in memory
	puts   *s3store.PutCounts
	hits   *tracker
	cfg    atomic.Pointer[func() *quota.Config]

	remote atomic.Pointer[s3store.Store]

	stop chan struct{}
	done chan struct{}

	syncMu sync.Mutex // one sync at a time

	mu       sync.Mutex
	epoch    string
	rev      int64
	levels   map[levelKey][2]int64
	newest   map[levelKey]int64             // newest Last-Modified listed per level, Unix seconds
	baseAt   time.Time                      // when the last listing ended, by the lister's clock
	baseTook time.Duration                  // how long it took
	removals int64                          // the store's truncations and range deletions when this node last listed
	baseline map[string][2]int64            // own cumulative PUTs the epoch's counts start from
	history  []countsAt                     // own cumulative PUTs, one a second (the loop), oldest first
	others   map[string]map[string][2]int64 // other nodes' PUTs since the epoch
	listedAt time.Time                      // by this node's clock
	synced   bool
	seq      int64
	lastRec  string
	evicted  map[string][2]int64

	// A pass: from the listing that confirmed a quota crossed to the next
	// Usage call.
	holding    bool
	locked     bool
	passStart  time.Time
	pages      map[store.Page]*pageObjs
	otherHits  map[store.Page]hitEntry
	pass       passStats
	holderBeat int64
	// the holder as this node last saw it, and when that changed
	seenHolder  holderRecord
	seenChanged time.Time
	lastHitsRec time.Time
}

// countsAt is a node's cumulative PUT counts at a time by its clock.
type countsAt struct {
	at     time.Time
	counts map[string][2]int64
}

// countsBefore is the newest of a node's past counts taken at or before t
// (nil: none, count every PUT since the process started). a.mu held.
func (a *Adapter) countsBefore(t time.Time) map[string][2]int64 {
	var c map[string][2]int64
	for _, h := range a.history {
		if h.at.After(t) {
			break
		}
		c = h.counts
	}
	return c
}

// remember adds counts to the history, which keeps what a listing that
// began up to ListTimeout + ClockMargin ago needs (a.mu held).
func (a *Adapter) remember(at time.Time, counts map[string][2]int64) {
	a.history = append(a.history, countsAt{at, counts})
	cut := at.Add(-(ListTimeout + 2*ClockMargin))
	i := 0
	for i+1 < len(a.history) && !a.history[i+1].at.After(cut) {
		i++
	}
	a.history = a.history[i:]
}

type passStats struct {
	tiles, bytes, pages int64
	listed, listedBytes int64
	listTook            time.Duration
	requests            int64
}

// Records in the shared storage.
type nodeRecord struct {
	ID     string              `json:"id"`
	Epoch  string              `json:"epoch"`
	Seq    int64               `json:"seq"`
	Layers map[string][2]int64 `json:"layers"` // [tiles, bytes] PUT since the epoch
}

type levelRecord struct {
	Layer   string `json:"layer"`
	Gridset string `json:"gridset"`
	Format  string `json:"format"`
	Params  string `json:"params"`
	Z       int    `json:"z"`
	Tiles   int64  `json:"tiles"`
	Bytes   int64  `json:"bytes"`
	Newest  int64  `json:"newest,omitempty"` // newest Last-Modified, Unix seconds
}

type listingRecord struct {
	Epoch   string        `json:"epoch"`
	Rev     int64         `json:"rev"` // changes as evictions lower the figures
	Node    string        `json:"node"`
	Started time.Time     `json:"started"` // when the listing began, by the lister's clock
	At      time.Time     `json:"at"`
	Took    string        `json:"took"`
	Objects int64         `json:"objects"`
	Bytes   int64         `json:"bytes"`
	Levels  []levelRecord `json:"levels"`
}

type hitsSet struct {
	Layer   string     `json:"layer"`
	Gridset string     `json:"gridset"`
	Format  string     `json:"format"`
	Params  string     `json:"params"`
	Pages   [][5]int64 `json:"pages"` // z, x, y, last, hits
}

type hitsRecord struct {
	ID   string    `json:"id"`
	Sets []hitsSet `json:"sets"`
}

type holderRecord struct {
	ID   string `json:"id"`
	Beat int64  `json:"beat"`
}

var adapters = caddy.NewUsagePool()

// Acquire returns the process's adapter of remote's bucket and prefix
// (and cluster area, when shared is not nil), attached to remote and
// tiers: remote counts its PUTs into it, tiers tells it of every use of a
// tile. A reload's new stores are attached the same way. Pair with
// Release.
func Acquire(remote *s3store.Store, tiers *tiered.Store, shared *Shared, log *zap.Logger) (*Adapter, error) {
	name := "s3quota:" + remote.Name()
	if shared != nil {
		name += "#" + shared.Prefix
	}
	v, _, err := adapters.LoadOrNew(name, func() (caddy.Destructor, error) {
		return newAdapter(name, shared, log), nil
	})
	if err != nil {
		return nil, err
	}
	a := v.(*Adapter)
	a.attach(remote, tiers)
	return a, nil
}

func newAdapter(name string, shared *Shared, log *zap.Logger) *Adapter {
	a := &Adapter{
		name: name, log: log, shared: shared, puts: s3store.NewPutCounts(),
		hits: newTracker(time.Now().Unix()), stop: make(chan struct{}), done: make(chan struct{}),
		levels: map[levelKey][2]int64{}, others: map[string]map[string][2]int64{}, evicted: map[string][2]int64{},
	}
	if shared != nil {
		a.log = log.With(zap.String("node", shared.ID))
	}
	go a.loop()
	store.AddUsageSource(a)
	return a
}

func (a *Adapter) attach(remote *s3store.Store, tiers *tiered.Store) {
	remote.SetPutCounts(a.puts)
	a.remote.Store(remote)
	if tiers != nil {
		tiers.SetTouch(a.hits.touch)
	}
}

// SetConfig gives the adapter the quota in force (the evictor's): it
// lists the bucket when the estimate crosses it.
func (a *Adapter) SetConfig(fn func() *quota.Config) { a.cfg.Store(&fn) }

// Release gives back one use; the last stops the adapter.
func (a *Adapter) Release() error {
	_, err := adapters.Delete(a.name)
	return err
}

// Destruct stops the adapter: an evict lock held is given back, and the
// node's counts are written a last time.
func (a *Adapter) Destruct() error {
	store.RemoveUsageSource(a)
	close(a.stop)
	<-a.done
	a.mu.Lock()
	a.endPass()
	a.mu.Unlock()
	if a.shared != nil {
		a.syncOnce()
	}
	return nil
}

// Name implements quota.Store.
func (a *Adapter) Name() string { return a.name }

func (a *Adapter) loop() {
	defer close(a.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lastSync := time.Time{}
	for {
		select {
		case <-a.stop:
			return
		case now := <-t.C:
			a.hits.now.Store(now.Unix())
			if a.shared != nil {
				snap := a.puts.Snapshot()
				a.mu.Lock()
				a.remember(now, snap)
				a.mu.Unlock()
			}
			if a.shared != nil && now.Sub(lastSync) >= SyncEvery {
				lastSync = now
				if err := a.syncOnce(); err != nil {
					a.log.Warn("s3 quota: sharing usage through the storage failed", zap.Error(err))
				}
			}
		}
	}
}

// syncOnce writes this node's record (and its hits every HitsEvery, and
// the holder's beat while it holds the evict lock), and reads the
// listing and the other nodes' records.
func (a *Adapter) syncOnce() error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	sh := a.shared
	// The listing first: a new epoch resets this node's counts.
	if b, err := sh.load("listing"); err == nil {
		var lr listingRecord
		if json.Unmarshal(b, &lr) == nil {
			a.mu.Lock()
			a.adoptListing(&lr)
			a.mu.Unlock()
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	snap := a.puts.Snapshot()
	a.mu.Lock()
	rec := nodeRecord{ID: sh.ID, Epoch: a.epoch, Layers: since(snap, a.baseline)}
	holding, beat := a.locked, a.holderBeat
	if holding {
		a.holderBeat++
		beat = a.holderBeat
	}
	a.mu.Unlock()
	if holding {
		b, _ := json.Marshal(holderRecord{ID: sh.ID, Beat: beat})
		if err := sh.store("holder", b); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(rec)
	a.mu.Lock()
	changed := string(b) != a.lastRec
	a.mu.Unlock()
	if changed {
		a.mu.Lock()
		a.seq++
		rec.Seq = a.seq
		a.mu.Unlock()
		b, _ = json.Marshal(rec)
		if err := sh.store("nodes/"+sh.ID, b); err != nil {
			return err
		}
		rec.Seq = 0
		b0, _ := json.Marshal(rec)
		a.mu.Lock()
		a.lastRec = string(b0)
		a.mu.Unlock()
	}
	ids, err := sh.list("nodes")
	if err != nil {
		return err
	}
	others := map[string]map[string][2]int64{}
	a.mu.Lock()
	epoch := a.epoch
	a.mu.Unlock()
	for _, id := range ids {
		if id == sh.ID {
			continue
		}
		b, err := sh.load("nodes/" + id)
		if err != nil {
			continue // renamed meanwhile, or a temporary file
		}
		var nr nodeRecord
		if json.Unmarshal(b, &nr) != nil || nr.ID != id || nr.Epoch != epoch || epoch == "" {
			continue // another epoch's counts: that node has not seen the listing yet
		}
		others[id] = nr.Layers
	}
	if b, err := sh.load("evicted"); err == nil {
		var ev map[string][2]int64
		if json.Unmarshal(b, &ev) == nil {
			a.mu.Lock()
			if !a.holding {
				a.evicted = ev
			}
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	if a.epoch == epoch {
		a.others = others
	}
	a.synced = true
	dueHits := time.Since(a.lastHitsRec) >= HitsEvery
	if dueHits {
		a.lastHitsRec = time.Now()
	}
	a.mu.Unlock()
	if dueHits {
		a.hits.prune(MaxHitPages)
		if err := sh.store("hits/"+sh.ID, a.hitsRecord()); err != nil {
			return err
		}
	}
	return nil
}

func (a *Adapter) hitsRecord() []byte {
	bySet := map[store.Set]*hitsSet{}
	rec := hitsRecord{ID: a.shared.ID}
	for _, e := range a.hits.entries() {
		hs := bySet[e.page.Set]
		if hs == nil {
			hs = &hitsSet{Layer: e.page.Layer, Gridset: e.page.Gridset, Format: e.page.Format, Params: e.page.Params}
			bySet[e.page.Set] = hs
		}
		hs.Pages = append(hs.Pages, [5]int64{int64(e.page.Z), e.page.X, e.page.Y, e.last, int64(e.hits)})
	}
	for _, hs := range bySet {
		rec.Sets = append(rec.Sets, *hs)
	}
	b, _ := json.Marshal(rec)
	return b
}

// adoptListing makes another node's listing the base (a.mu held).
func (a *Adapter) adoptListing(lr *listingRecord) {
	if lr.Epoch == a.epoch && lr.Rev <= a.rev {
		return
	}
	if lr.Epoch != a.epoch {
		// The listing may have passed the keys of PUTs made while it
		// ran: this node counts from its counts of before the listing
		// began (less the margin for clocks), so a PUT the listing
		// holds may count twice (high, until the next listing), and
		// none it missed is lost. A node with no counts that old
		// counts all it PUT since it started.
		a.baseline = a.countsBefore(lr.Started.Add(-ClockMargin))
		a.others = map[string]map[string][2]int64{}
		a.listedAt = time.Now()
	}
	a.epoch, a.rev = lr.Epoch, lr.Rev
	a.baseAt = lr.At
	a.baseTook, _ = time.ParseDuration(lr.Took)
	a.levels = map[levelKey][2]int64{}
	a.newest = map[levelKey]int64{}
	for _, l := range lr.Levels {
		k := levelKey{store.Set{Layer: l.Layer, Gridset: l.Gridset, Format: l.Format, Params: l.Params}, l.Z}
		a.levels[k] = [2]int64{l.Tiles, l.Bytes}
		a.newest[k] = l.Newest
	}
}

func since(now, base map[string][2]int64) map[string][2]int64 {
	out := map[string][2]int64{}
	for l, v := range now {
		b := base[l]
		if d := [2]int64{v[0] - b[0], v[1] - b[1]}; d[0] != 0 || d[1] != 0 {
			out[l] = d
		}
	}
	return out
}

// estimate is the last listing's figures, lowered by evictions since,
// plus every node's PUTs since it (a.mu held). PUTs come as one level
// per layer with Z -1.
func (a *Adapter) estimate() []store.LevelUsage {
	out := make([]store.LevelUsage, 0, len(a.levels)+4)
	for k, v := range a.levels {
		if v[0] > 0 || v[1] > 0 {
			out = append(out, store.LevelUsage{Set: k.Set, Z: k.Z, Tiles: v[0], Bytes: v[1]})
		}
	}
	added := since(a.puts.Snapshot(), a.baseline)
	for _, o := range a.others {
		for l, v := range o {
			t := added[l]
			added[l] = [2]int64{t[0] + v[0], t[1] + v[1]}
		}
	}
	for l, v := range added {
		out = append(out, store.LevelUsage{Set: store.Set{Layer: l}, Z: -1, Tiles: v[0], Bytes: v[1]})
	}
	return out
}

func over(cfg *quota.Config, levels []store.LevelUsage) bool {
	if cfg == nil {
		return false
	}
	byLayer := map[string]int64{}
	var total int64
	for _, lv := range levels {
		byLayer[lv.Set.Layer] += lv.Bytes
		total += lv.Bytes
	}
	for name, lq := range cfg.Layers {
		if lq != nil && lq.MaxSize > 0 && byLayer[name] > lq.MaxSize {
			return true
		}
	}
	return cfg.MaxSize > 0 && total > cfg.MaxSize
}

func (a *Adapter) config() *quota.Config {
	if fn := a.cfg.Load(); fn != nil {
		return (*fn)()
	}
	return nil
}

// Usage implements quota.Store. It is the start of the evictor's pass:
// the pass before ends here (its lock given back). When the estimate is
// over a quota (or there is no listing yet), it takes the evict lock and
// lists the bucket; the pass goes on only if the listing confirms it.
// While another node holds the lock, or a listing is too recent to
// repeat, it answers "recounting": the evictor skips the pass.
func (a *Adapter) Usage() ([]store.LevelUsage, bool, error) {
	if a.shared != nil {
		a.mu.Lock()
		synced := a.synced
		a.mu.Unlock()
		if !synced {
			if err := a.syncOnce(); err != nil {
				return nil, false, err
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.endPass()
	cfg := a.config()
	est := a.estimate()
	switch {
	case a.epoch == "":
	case !over(cfg, est) && !a.stale(est):
		return est, false, nil
	case time.Since(a.listedAt) < MinListEvery:
		return est, true, nil
	}
	if a.shared != nil {
		ok, err := a.acquire()
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return est, true, nil
		}
		// Another node may have listed and evicted just before.
		a.mu.Unlock()
		err = a.syncOnce()
		a.mu.Lock()
		if err != nil {
			a.unlockEvict()
			return nil, false, err
		}
		if est = a.estimate(); a.epoch != "" && !over(cfg, est) && !a.stale(est) {
			a.unlockEvict()
			return est, false, nil
		}
	}
	if err := a.list(); err != nil {
		a.unlockEvict()
		return nil, false, err
	}
	est = a.estimate()
	if !over(cfg, est) {
		a.pages, a.otherHits = nil, nil
		a.unlockEvict()
		return est, false, nil
	}
	a.holding = true
	return est, false, nil
}

// stale reports whether the bucket is due to be listed again for its
// figures' sake (a.mu held): this node truncated or deleted a range since
// it last listed (the figures hold what is gone: listed again as soon as
// listings may follow each other), or the bucket was written since the
// last listing, which is RefreshEvery old.
func (a *Adapter) stale(est []store.LevelUsage) bool {
	since := time.Since(a.listedAt)
	if a.puts.Removals() != a.removals && since >= max(MinListEvery, 10*a.baseTook) {
		return true
	}
	if since < max(RefreshEvery, 10*a.baseTook) {
		return false
	}
	for _, lv := range est {
		if lv.Z < 0 && lv.Tiles > 0 {
			return true
		}
	}
	return false
}

// acquire tries the evict lock (a.mu held). A lock whose holder has not
// beaten for BreakAfter by this node's clock is broken.
func (a *Adapter) acquire() (bool, error) {
	sh := a.shared
	ok, err := sh.tryLock("evict")
	if err != nil {
		return false, err
	}
	if ok {
		a.locked = true
		a.holderBeat++
		b, _ := json.Marshal(holderRecord{ID: sh.ID, Beat: a.holderBeat})
		if err := sh.store("holder", b); err != nil {
			a.unlockEvict()
			return false, err
		}
		a.seenChanged = time.Time{}
		return true, nil
	}
	var h holderRecord
	if b, err := sh.load("holder"); err == nil {
		json.Unmarshal(b, &h)
	}
	now := time.Now()
	if h != a.seenHolder || a.seenChanged.IsZero() {
		a.seenHolder, a.seenChanged = h, now
		return false, nil
	}
	if now.Sub(a.seenChanged) >= BreakAfter {
		err := sh.unlock("evict")
		a.log.Warn("s3 quota: broke the evict lock: its holder has not beaten for long", zap.String("holder", h.ID),
			zap.Duration("silent", now.Sub(a.seenChanged)), zap.Error(err))
		a.seenChanged = time.Time{}
	}
	return false, nil
}

func (a *Adapter) unlockEvict() {
	if !a.locked {
		return
	}
	a.locked = false
	if err := a.shared.unlock("evict"); err != nil {
		a.log.Warn("s3 quota: giving back the evict lock failed (it goes stale)", zap.Error(err))
	}
}

// list lists the bucket and makes it the base: a new epoch (a.mu held;
// the evict lock held in a cluster).
func (a *Adapter) list() error {
	remote := a.remote.Load()
	if remote == nil {
		return errors.New("s3 quota: no store")
	}
	snap, removals := a.puts.Snapshot(), a.puts.Removals()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), ListTimeout)
	defer cancel()
	levels := map[levelKey][2]int64{}
	newest := map[levelKey]int64{}
	pages := map[store.Page]*pageObjs{}
	perLayer := map[string]int64{}
	var objects, bytes int64
	err := remote.ListTiles(ctx, "", func(k store.Key, size int64, mod time.Time) error {
		lk := levelKey{k.Set, k.Z}
		v := levels[lk]
		levels[lk] = [2]int64{v[0] + 1, v[1] + size}
		newest[lk] = max(newest[lk], mod.Unix())
		p := pageOf(k)
		po := pages[p]
		if po == nil {
			po = &pageObjs{created: mod.Unix()}
			pages[p] = po
		}
		po.tiles = append(po.tiles, tileRef{uint32(k.X), uint32(k.Y)})
		po.bytes += size
		po.last = max(po.last, mod.Unix())
		po.created = min(po.created, mod.Unix())
		objects++
		bytes += size
		perLayer[k.Layer]++
		return nil
	})
	if err != nil {
		return fmt.Errorf("s3 quota: listing the bucket: %w", err)
	}
	if listedHook != nil {
		listedHook()
	}
	took := time.Since(start)
	// Requests: the listing of the layers, then per layer one per 1,000.
	requests := int64(1)
	for _, n := range perLayer {
		requests += n/1000 + 1
	}
	a.pass = passStats{listed: objects, listedBytes: bytes, listTook: took, requests: requests}
	a.epoch = newEpoch()
	a.rev = 0
	a.levels, a.newest = levels, newest
	a.removals = removals
	a.baseAt, a.baseTook = time.Now(), took
	a.baseline = snap
	a.others = map[string]map[string][2]int64{}
	a.listedAt = time.Now()
	a.pages = pages
	a.otherHits = nil
	a.passStart = start
	a.log.Debug("s3 quota: bucket listed", zap.Int64("objects", objects), zap.Int64("bytes", bytes),
		zap.Duration("took", took), zap.Int64("requests", requests))
	if a.shared == nil {
		return nil
	}
	a.otherHits = a.loadOtherHits()
	if b, err := sh(a).load("evicted"); err == nil {
		var ev map[string][2]int64
		if json.Unmarshal(b, &ev) == nil && ev != nil {
			a.evicted = ev
		}
	}
	return a.storeListing(took, objects, bytes)
}

func sh(a *Adapter) *Shared { return a.shared }

func newEpoch() string {
	b := make([]byte, 6)
	crand.Read(b)
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

func (a *Adapter) storeListing(took time.Duration, objects, bytes int64) error {
	lr := listingRecord{Epoch: a.epoch, Rev: a.rev, Node: a.shared.ID, Started: a.passStart.UTC(), At: a.baseAt.UTC(), Took: took.String(),
		Objects: objects, Bytes: bytes}
	for k, v := range a.levels {
		if v[0] > 0 {
			lr.Levels = append(lr.Levels, levelRecord{k.Layer, k.Gridset, k.Format, k.Params, k.Z, v[0], v[1], a.newest[k]})
		}
	}
	b, _ := json.Marshal(lr)
	return a.shared.store("listing", b)
}

// loadOtherHits reads the uses the other nodes recorded.
func (a *Adapter) loadOtherHits() map[store.Page]hitEntry {
	out := map[store.Page]hitEntry{}
	ids, err := a.shared.list("hits")
	if err != nil {
		a.log.Warn("s3 quota: reading the nodes' hits failed: eviction goes by this node's and the tiles' times", zap.Error(err))
		return out
	}
	for _, id := range ids {
		if id == a.shared.ID {
			continue
		}
		b, err := a.shared.load("hits/" + id)
		if err != nil {
			continue
		}
		var hr hitsRecord
		if json.Unmarshal(b, &hr) != nil || hr.ID != id {
			continue
		}
		for _, s := range hr.Sets {
			set := store.Set{Layer: s.Layer, Gridset: s.Gridset, Format: s.Format, Params: s.Params}
			for _, p := range s.Pages {
				pg := store.Page{Set: set, Z: int(p[0]), X: p[1], Y: p[2]}
				e := out[pg]
				e.page, e.last, e.hits = pg, max(e.last, p[3]), e.hits+uint64(p[4])
				out[pg] = e
			}
		}
	}
	return out
}

// endPass ends a pass (a.mu held): the lowered figures and the evicted
// totals are written for the others, the pass is logged, and the lock
// given back.
func (a *Adapter) endPass() {
	if !a.holding {
		return
	}
	a.holding = false
	end := time.Now()
	if a.shared != nil && a.pass.pages > 0 {
		a.rev++
		if err := a.storeListing(a.pass.listTook, a.pass.listed, a.pass.listedBytes); err != nil {
			a.log.Warn("s3 quota: writing the listing failed", zap.Error(err))
		}
		b, _ := json.Marshal(a.evicted)
		if err := a.shared.store("evicted", b); err != nil {
			a.log.Warn("s3 quota: writing the evicted totals failed", zap.Error(err))
		}
	}
	a.log.Info("s3 quota: eviction pass",
		zap.Time("started", a.passStart), zap.Time("ended", end),
		zap.Int64("start_ns", a.passStart.UnixNano()), zap.Int64("end_ns", end.UnixNano()),
		zap.Int64("listed_objects", a.pass.listed), zap.Int64("listed_bytes", a.pass.listedBytes),
		zap.Duration("listing_took", a.pass.listTook), zap.Int64("list_requests", a.pass.requests),
		zap.Int64("pages", a.pass.pages), zap.Int64("tiles", a.pass.tiles), zap.Int64("bytes", a.pass.bytes),
		zap.Int64("delete_requests", a.pass.pages))
	a.pages, a.otherHits = nil, nil
	a.unlockEvict()
}

// Pages implements quota.Store from the pass's listing: each page with
// its newest Last-Modified or last use seen by any node, whichever is
// later, and the uses recorded.
func (a *Adapter) Pages(layer string, fn func(store.PageStat) error) error {
	a.mu.Lock()
	stats := make([]store.PageStat, 0, len(a.pages))
	for p, po := range a.pages {
		if layer != "" && p.Layer != layer {
			continue
		}
		hits, last := a.hits.get(p)
		if o, ok := a.otherHits[p]; ok {
			hits += o.hits
			last = max(last, o.last)
		}
		stats = append(stats, store.PageStat{Page: p, Last: max(po.last, last), Created: po.created, Hits: hits})
	}
	a.mu.Unlock()
	for _, s := range stats {
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// EvictPage implements quota.Store: the page's listed objects go in one
// multi-object delete. A page this node used after lastSeen stays.
func (a *Adapter) EvictPage(p store.Page, lastSeen int64) (store.Eviction, error) {
	a.mu.Lock()
	po := a.pages[p]
	a.mu.Unlock()
	if po == nil {
		return store.Eviction{}, nil
	}
	if _, last := a.hits.get(p); last > lastSeen {
		return store.Eviction{Skipped: true}, nil
	}
	remote := a.remote.Load()
	keys := make([]store.Key, len(po.tiles))
	for i, t := range po.tiles {
		keys[i] = store.Key{Set: p.Set, Z: p.Z, X: int64(t.x), Y: int64(t.y)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := remote.DeleteTiles(ctx, keys); err != nil {
		return store.Eviction{}, err
	}
	a.hits.forget(p)
	n := int64(len(po.tiles))
	a.mu.Lock()
	delete(a.pages, p)
	lk := levelKey{p.Set, p.Z}
	v := a.levels[lk]
	a.levels[lk] = [2]int64{max(v[0]-n, 0), max(v[1]-po.bytes, 0)}
	e := a.evicted[p.Layer]
	if a.evicted == nil {
		a.evicted = map[string][2]int64{}
	}
	a.evicted[p.Layer] = [2]int64{e[0] + n, e[1] + po.bytes}
	a.pass.pages++
	a.pass.tiles += n
	a.pass.bytes += po.bytes
	a.mu.Unlock()
	return store.Eviction{Tiles: n, Bytes: po.bytes}, nil
}

// ReclaimEvicted implements quota.Store: S3 frees what it deleted.
func (a *Adapter) ReclaimEvicted(int64) (int, error) { return 0, nil }

// DiskSize implements quota.Store: the bucket's disk is not the evictor's
// to give back.
func (a *Adapter) DiskSize() int64 { return 0 }

// Evicted implements quota.Store: per layer, [tiles, bytes] evicted (by
// every node of a cluster, as last written).
func (a *Adapter) Evicted() (map[string][2]int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.evicted), nil
}

var _ quota.Store = (*Adapter)(nil)

// LayerUsage implements store.UsageSource (the usage gauges): per layer,
// the estimate's [tiles, bytes]; recounting until the first listing.
func (a *Adapter) LayerUsage() (map[string][2]int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][2]int64{}
	for _, lv := range a.estimate() {
		v := out[lv.Set.Layer]
		out[lv.Set.Layer] = [2]int64{v[0] + lv.Tiles, v[1] + lv.Bytes}
	}
	return out, a.epoch == ""
}

// Report is the bucket's usage as this node knows it, for
// rest/usage.json.
type Report struct {
	// Listed is false until the first listing: Levels is empty and
	// Unlisted holds every PUT.
	Listed bool
	// ListedAt is when the last listing ended, by the clock of the node
	// that made it.
	ListedAt time.Time
	// Levels are that listing's figures per tile set and level, less
	// the evictions since, sorted by set and level.
	Levels []store.LevelUsage
	// Unlisted is, per layer, [tiles, bytes] PUT since that listing by
	// every node (an overwrite counts again: high until the next listing).
	Unlisted map[string][2]int64
	// LastAccess is, per tile set, the latest use seen by any node or
	// the newest object listed, whichever is later (Unix seconds).
	LastAccess map[store.Set]int64
	// Evicted is, per layer, [tiles, bytes] evicted so far.
	Evicted map[string][2]int64
}

// Report returns the bucket's usage as this node knows it: no request to
// the bucket; in a cluster, the other nodes' recorded uses are read from
// the storage.
func (a *Adapter) Report() Report {
	var others map[store.Page]hitEntry
	if a.shared != nil {
		others = a.loadOtherHits()
	}
	last := map[store.Set]int64{}
	for _, e := range a.hits.entries() {
		last[e.page.Set] = max(last[e.page.Set], e.last)
	}
	for p, e := range others {
		last[p.Set] = max(last[p.Set], e.last)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := Report{Listed: a.epoch != "", ListedAt: a.baseAt, Unlisted: map[string][2]int64{},
		LastAccess: last, Evicted: maps.Clone(a.evicted)}
	for _, lv := range a.estimate() {
		if lv.Z < 0 {
			r.Unlisted[lv.Set.Layer] = [2]int64{lv.Tiles, lv.Bytes}
			continue
		}
		r.Levels = append(r.Levels, lv)
	}
	for k, t := range a.newest {
		if a.levels[k][0] > 0 {
			last[k.Set] = max(last[k.Set], t)
		}
	}
	slices.SortFunc(r.Levels, func(x, y store.LevelUsage) int {
		return cmp.Or(cmp.Compare(x.Set.Layer, y.Set.Layer), cmp.Compare(x.Set.Gridset, y.Set.Gridset),
			cmp.Compare(x.Set.Format, y.Set.Format), cmp.Compare(x.Set.Params, y.Set.Params), cmp.Compare(x.Z, y.Z))
	})
	return r
}
