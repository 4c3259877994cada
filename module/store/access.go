package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Access tracking: when each page of tiles was last used and how often,
// so that a quota can evict the coldest tiles first (package quota).
//
// A page is PageSize × PageSize tiles of one level of one tile set, aligned
// on multiples of PageSize: the unit of eviction, the size of a few
// metatiles, never one tile at a time. Each page that holds tiles has one
// record,
//
//	'a' layer 0 gen(8) gridset 0 format 0 params 0 z(1) px(4) py(4) → last, hits, created (varints)
//
// written in the same transaction as every Put into the page (a store
// counts as a use), so a page's tiles never exist without a record, also
// after kill -9. Hits are counted in memory (accessTracker) and added to
// the records every accessFlushEvery: after kill -9 the hits of the last
// few seconds are lost, which only makes those pages look a little colder.
// Like the usage records the key carries the layer's generation, so a
// truncated layer's records go with its tiles.
//
// Tiles stored while tracking was off have no record. Turning tracking on
// finds them in the background (indexPages) and gives their pages a record
// with no use at all, so they are the first to go.

const (
	tagAccess = 'a'
	// PageShift: a page is 1<<PageShift tiles on a side.
	PageShift = 4
	// PageSize is the side of a page in tiles.
	PageSize = 1 << PageShift
	// accessVersion changes when the records' meaning changes.
	accessVersion = 1
)

var accessMarkerKey = []byte{tagMeta, 'a', 'c', 'c', 'e', 's', 's'}

// accessFlushEvery is how often hits counted in memory reach the records.
var accessFlushEvery = 5 * time.Second

// Page names one page of tiles: X and Y are the page's column and row
// (a tile's column and row shifted right by PageShift).
type Page struct {
	Set
	Z    int
	X, Y int64
}

// PageStat is what the records say of a page.
type PageStat struct {
	Page
	// Last use (a hit, or a store) and first store, in Unix seconds; 0
	// when unknown (tiles stored before tracking was on).
	Last, Created int64
	// Hits since the page was first stored.
	Hits uint64
}

func accessKey(dst []byte, p *Page, gen uint64) []byte {
	dst = zoomPrefix(dst, p.Set, gen, p.Z)
	dst[0] = tagAccess
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.X))
	return binary.BigEndian.AppendUint32(dst, uint32(p.Y))
}

func encodeAccess(last int64, hits uint64, created int64) []byte {
	b := binary.AppendVarint(nil, last)
	b = binary.AppendUvarint(b, hits)
	return binary.AppendVarint(b, created)
}

func decodeAccess(v []byte) (last int64, hits uint64, created int64, err error) {
	var n, m, o int
	last, n = binary.Varint(v)
	if n > 0 {
		hits, m = binary.Uvarint(v[n:])
	}
	if n > 0 && m > 0 {
		created, o = binary.Varint(v[n+m:])
	}
	if n <= 0 || m <= 0 || o <= 0 || n+m+o != len(v) {
		return 0, 0, 0, errors.New("store: bad access record")
	}
	return last, hits, created, nil
}

// pageKey is a page as a map key of the in-memory tracker.
type pageKey struct {
	set  Set
	z    int
	x, y int64
}

type pageHits struct {
	hits atomic.Uint64
	last atomic.Int64
}

// accessTracker counts hits per page in memory between flushes. The hit
// path finds a page's counters under a shard's read lock and bumps them
// with atomics: no allocation, no write to the database; only the first
// hit on a page in a flush period allocates its counters.
type accessTracker struct {
	now    atomic.Int64 // Unix seconds, kept by the flush loop: no clock read per hit
	shards [16]struct {
		mu sync.RWMutex
		m  map[pageKey]*pageHits
	}
}

func newAccessTracker() *accessTracker {
	t := &accessTracker{}
	t.now.Store(time.Now().Unix())
	for i := range t.shards {
		t.shards[i].m = map[pageKey]*pageHits{}
	}
	return t
}

// touch counts one hit on the page of k.
func (t *accessTracker) touch(k Key) { // by value: a pointer would move the caller's key to the heap
	pk := pageKey{set: k.Set, z: k.Z, x: k.X >> PageShift, y: k.Y >> PageShift}
	sh := &t.shards[(pk.x^pk.y^int64(pk.z))&15]
	sh.mu.RLock()
	h := sh.m[pk]
	sh.mu.RUnlock()
	if h == nil {
		sh.mu.Lock()
		if h = sh.m[pk]; h == nil {
			h = &pageHits{}
			sh.m[pk] = h
		}
		sh.mu.Unlock()
	}
	h.hits.Add(1)
	h.last.Store(t.now.Load())
}

// take removes and returns every page hit since the last take.
func (t *accessTracker) take() map[pageKey]*pageHits {
	out := map[pageKey]*pageHits{}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, h := range sh.m {
			out[k] = h
		}
		clear(sh.m)
		sh.mu.Unlock()
	}
	return out
}

// pending returns the hits on p counted since the last flush.
func (t *accessTracker) pending(p *Page) (hits uint64, last int64) {
	pk := pageKey{set: p.Set, z: p.Z, x: p.X, y: p.Y}
	sh := &t.shards[(pk.x^pk.y^int64(pk.z))&15]
	sh.mu.RLock()
	h := sh.m[pk]
	sh.mu.RUnlock()
	if h == nil {
		return 0, 0
	}
	return h.hits.Load(), h.last.Load()
}

// Tracking reports whether access tracking is on.
func (s *Badger) Tracking() bool { return s.access.Load() != nil }

// SetTracking turns access tracking on or off (a quota needs it; usage
// accounting must be on too). Turning it on in a store whose records
// cannot be trusted indexes the pages of untracked tiles in the
// background.
func (s *Badger) SetTracking(on bool) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Tracking() == on {
		return nil
	}
	if !on {
		s.access.Store(nil)
		return s.db.Update(func(txn *badger.Txn) error {
			if _, err := txn.Get(accessMarkerKey); errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			return txn.Delete(accessMarkerKey)
		})
	}
	s.access.Store(newAccessTracker())
	var version []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(accessMarkerKey)
		if err != nil {
			return err
		}
		version, err = item.ValueCopy(nil)
		return err
	})
	if err == nil && len(version) == 1 && version[0] == accessVersion {
		return nil
	}
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		return err
	}
	s.indexing.Store(true)
	select {
	case s.indexCh <- struct{}{}:
	default:
	}
	return nil
}

// Indexing reports whether the pages of tiles stored before tracking was
// on are still being found (they are not evictable until then).
func (s *Badger) Indexing() bool { return s.indexing.Load() }

// accessLoop flushes counted hits and indexes untracked pages when asked,
// until the store closes.
func (s *Badger) accessLoop() {
	defer s.done.Done()
	// The hits counted since the last flush are saved on every way out
	// (Destruct waits for this before it closes the database): when the
	// store closes, select may take a pending index request rather than
	// the stop, and that path returns too.
	defer func() {
		if err := s.flushAccess(); err != nil {
			s.log.Warn("saving tile access at close", zap.Error(err))
		}
	}()
	// The hit clock ticks ten times a second: a hit stamped up to a second
	// late would make a hot page look older than a page a seed wrote
	// into in the same second, and go first.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	lastFlush := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-s.indexCh:
			start := time.Now()
			n, err := s.indexPages()
			switch {
			case errors.Is(err, errStopped):
				return
			case err != nil:
				s.log.Error("indexing tile pages for the quota failed", zap.Error(err))
			default:
				s.log.Info("tile pages indexed for the quota", zap.Int("pages_added", n), zap.Duration("took", time.Since(start)))
			}
		case now := <-t.C:
			if a := s.access.Load(); a != nil {
				a.now.Store(now.Unix())
			}
			if now.Sub(lastFlush) >= accessFlushEvery {
				lastFlush = now
				if err := s.flushAccess(); err != nil {
					s.log.Warn("saving tile access", zap.Error(err))
				}
			}
		}
	}
}

// FlushAccess writes the hits counted in memory to the records now.
func (s *Badger) FlushAccess() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	return s.flushAccess()
}

func (s *Badger) flushAccess() error {
	a := s.access.Load()
	if a == nil {
		return nil
	}
	hits := a.take()
	if len(hits) == 0 {
		return nil
	}
	type upd struct {
		p    Page
		hits uint64
		last int64
	}
	var batch []upd
	for k, h := range hits {
		batch = append(batch, upd{Page{k.set, k.z, k.x, k.y}, h.hits.Load(), h.last.Load()})
	}
	const chunk = 500
	for len(batch) > 0 {
		n := min(chunk, len(batch))
		part := batch[:n]
		batch = batch[n:]
		err := s.writeRetrying(func(txn *badger.Txn) error {
			for _, u := range part {
				key := accessKey(nil, &u.p, s.Generation(u.p.Layer))
				last, old, created, err := readAccess(txn, key)
				if errors.Is(err, badger.ErrKeyNotFound) {
					// The page's tiles went (evicted or truncated)
					// since the hits: no record for tiles not there.
					continue
				}
				if err != nil {
					return err
				}
				if err := txn.Set(key, encodeAccess(max(last, u.last), old+u.hits, created)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// writeRetrying is write with retries on conflicts.
func (s *Badger) writeRetrying(fn func(txn *badger.Txn) error) error {
	return retryConflicts(func() error { return s.write(fn) })
}

func readAccess(txn *badger.Txn, key []byte) (last int64, hits uint64, created int64, err error) {
	item, err := txn.Get(key)
	if err != nil {
		return 0, 0, 0, err
	}
	err = item.Value(func(v []byte) error {
		last, hits, created, err = decodeAccess(v)
		return err
	})
	return last, hits, created, err
}

// touchPages records, in a Put's transaction, that the pages of entries
// were used at at.
func touchPages(txn *badger.Txn, entries []Entry, gen uint64, at int64) error {
	var done [4]Page // a metatile spans one to four pages, usually
	seen := done[:0]
next:
	for i := range entries {
		k := &entries[i].Key
		p := Page{k.Set, k.Z, k.X >> PageShift, k.Y >> PageShift}
		for j := range seen {
			if seen[j] == p {
				continue next
			}
		}
		seen = append(seen, p)
		key := accessKey(nil, &p, gen)
		_, hits, created, err := readAccess(txn, key)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			created = at
		case err != nil:
			return err
		case created == 0:
			created = at
		}
		if err := txn.Set(key, encodeAccess(at, hits, created)); err != nil {
			return err
		}
	}
	return nil
}

// Pages calls fn with every page record of the layers' current
// generations (of one layer, when layer is not empty), with the hits
// counted in memory since the last flush added. fn must not call the
// store.
func (s *Badger) Pages(layer string, fn func(PageStat) error) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	a := s.access.Load()
	prefix := []byte{tagAccess}
	if layer != "" {
		prefix = append(prefix, layer...)
		prefix = append(prefix, 0)
	}
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if len(k) < 8 {
				return fmt.Errorf("%w: %q", errCorruptKey, k)
			}
			set, gen, z, ok := parseLevel(k[:len(k)-8])
			if !ok {
				return fmt.Errorf("%w: %q", errCorruptKey, k)
			}
			if gen != s.Generation(set.Layer) {
				continue
			}
			ps := PageStat{Page: Page{set, z, int64(binary.BigEndian.Uint32(k[len(k)-8:])), int64(binary.BigEndian.Uint32(k[len(k)-4:]))}}
			err := item.Value(func(v []byte) error {
				var err error
				ps.Last, ps.Hits, ps.Created, err = decodeAccess(v)
				return err
			})
			if err != nil {
				return fmt.Errorf("%w: %q", err, k)
			}
			if a != nil {
				if h, last := a.pending(&ps.Page); h > 0 {
					ps.Hits += h
					ps.Last = max(ps.Last, last)
				}
			}
			if err := fn(ps); err != nil {
				return err
			}
		}
		return nil
	})
}

// Eviction is what evicting a page took away.
type Eviction struct {
	Tiles, Bytes int64
	// Skipped: the page was used after it was chosen (its record's last
	// use is later than the one given), so it stayed.
	Skipped bool
}

// EvictPage deletes every tile of page p and its record in one
// transaction, counted in the usage records and in the layer's evicted
// totals, unless the page was used after lastSeen (Unix seconds, the
// Last that Pages reported): a hit or a store since it was chosen means
// it is no longer among the coldest. (Hits are stamped to the second, so
// one in the same second as the choice does not save the page.) A
// Put into the page at the same moment makes the transaction conflict,
// and it is tried again, so a metatile being stored is never half gone.
func (s *Badger) EvictPage(p Page, lastSeen int64) (Eviction, error) {
	if !s.enter() {
		return Eviction{}, ErrClosed
	}
	defer s.leave()
	if !s.usage.Load() {
		return Eviction{}, ErrUsageOff
	}
	var ev Eviction
	err := s.writeRetrying(func(txn *badger.Txn) error {
		ev = Eviction{}
		gen := s.Generation(p.Layer)
		akey := accessKey(nil, &p, gen)
		last, _, _, err := readAccess(txn, akey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return nil // gone already
		case err != nil:
			return err
		case last > lastSeen:
			ev.Skipped = true
			return nil
		}
		if a := s.access.Load(); a != nil {
			if _, plast := a.pending(&p); plast > lastSeen {
				ev.Skipped = true
				return nil
			}
		}
		zp := zoomPrefix(nil, p.Set, gen, p.Z)
		seek := make([]byte, len(zp)+8)
		copy(seek, zp)
		delta := levelDelta{}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: zp, PrefetchValues: false})
		var keys [][]byte
		for x := p.X << PageShift; x < (p.X+1)<<PageShift && x <= MaxIndex; x++ {
			putCell(seek, len(zp), x, p.Y<<PageShift)
			for it.Seek(seek); it.Valid(); it.Next() {
				item := it.Item()
				kx, ky, ok := cellOf(item.Key(), len(zp))
				if !ok || kx != x || ky >= (p.Y+1)<<PageShift {
					break
				}
				keys = append(keys, item.KeyCopy(nil))
				size := item.ValueSize()
				delta.add(zp, -1, -size)
				ev.Tiles++
				ev.Bytes += size
			}
		}
		it.Close()
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		if err := txn.Delete(akey); err != nil {
			return err
		}
		if err := delta.write(txn, &s.useq); err != nil {
			return err
		}
		return addEvicted(txn, p.Layer, ev.Tiles, ev.Bytes)
	})
	return ev, err
}

func evictedKey(layer string) []byte {
	return append([]byte{tagMeta, 'e', 'v', 'i', 'c', 't', 'e', 'd', '/'}, layer...)
}

func addEvicted(txn *badger.Txn, layer string, tiles, bytes int64) error {
	if tiles == 0 {
		return nil
	}
	key := evictedKey(layer)
	var t, b int64
	item, err := txn.Get(key)
	switch {
	case err == nil:
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if t, b, err = decodeUsage(v); err != nil {
			return err
		}
	case !errors.Is(err, badger.ErrKeyNotFound):
		return err
	}
	return txn.Set(key, encodeUsage(t+tiles, b+bytes))
}

// Evicted returns the tiles and bytes evicted from each layer so far
// (kept across restarts).
func (s *Badger) Evicted() (map[string][2]int64, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	out := map[string][2]int64{}
	prefix := evictedKey("")
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			t, b, err := decodeUsage(v)
			if err != nil {
				return err
			}
			out[string(it.Item().Key()[len(prefix):])] = [2]int64{t, b}
		}
		return nil
	})
	return out, err
}

// indexPages gives every page of the current generations that holds
// tiles but has no record a record with no use, and then writes the
// marker that vouches for the records; it returns the records added.
func (s *Badger) indexPages() (int, error) {
	type found struct {
		p   Page
		gen uint64
	}
	var pages []found
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tagTile}, PrefetchValues: false})
		defer it.Close()
		var last Page
		have := false
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			level := usageLevelOf(k)
			if level == nil {
				return fmt.Errorf("%w: %q", errCorruptKey, k)
			}
			set, gen, z, ok := parseLevel(level)
			if !ok {
				return fmt.Errorf("%w: %q", errCorruptKey, k)
			}
			if gen != s.Generation(set.Layer) {
				continue
			}
			x, y, _ := cellOf(k, len(level))
			p := Page{set, z, x >> PageShift, y >> PageShift}
			if have && p == last {
				continue
			}
			last, have = p, true
			if len(pages) > 0 && pages[len(pages)-1].p == p {
				continue
			}
			pages = append(pages, found{p, gen})
			if len(pages)%4096 == 0 && s.stopping() {
				return errStopped
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Columns come before rows in the key, so a page shows up once per
	// column it spans: set aside the repeats.
	seen := make(map[Page]bool, len(pages))
	added := 0
	const chunk = 1000
	for i := 0; i < len(pages); i += chunk {
		if s.stopping() {
			return added, errStopped
		}
		part := pages[i:min(i+chunk, len(pages))]
		n := 0
		err := s.writeRetrying(func(txn *badger.Txn) error {
			n = 0
			for _, f := range part {
				if seen[f.p] || f.gen != s.Generation(f.p.Layer) {
					continue
				}
				key := accessKey(nil, &f.p, f.gen)
				if _, err := txn.Get(key); err == nil {
					continue
				} else if !errors.Is(err, badger.ErrKeyNotFound) {
					return err
				}
				if err := txn.Set(key, encodeAccess(0, 0, 0)); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return added, err
		}
		added += n
		for _, f := range part {
			seen[f.p] = true
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.Tracking() || len(s.indexCh) > 0 {
		return added, nil
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(accessMarkerKey, []byte{accessVersion})
	})
	if err == nil {
		s.indexing.Store(false)
	}
	return added, err
}

// ReclaimEvicted gives the disk back after deletions made one key at a
// time (eviction). Badger frees value-log space only for values that a
// compaction found overwritten or deleted, and deletions wait in the
// memtable (8 MiB of keys, tens of thousands of deletions) until it
// fills; so the memtables are flushed and level 0 compacted at once
// (DropPrefix of a record kept for this, which does both), and then the
// value log collected: the files at least half garbage first, and, while
// the directory is still larger than diskTarget (0: no target), files
// with less garbage, down to a tenth, up to maxGCRounds files in all.
// Evictions that follow no order of writing (LFU) leave garbage spread
// over every file, which the first rule alone would leave in place.
// Writes wait meanwhile (the write lock of s.mu, as for a truncation's
// drop), and so do reads for the flush: Badger holds its memtable lock
// through it. It returns how many value-log files were rewritten.
func (s *Badger) ReclaimEvicted(diskTarget int64) (int, error) {
	if !s.enter() {
		return 0, ErrClosed
	}
	defer s.leave()
	if err := s.write(func(txn *badger.Txn) error { return txn.Set(flushKey, nil) }); err != nil {
		return 0, err
	}
	s.mu.Lock()
	err := s.db.DropPrefix(flushKey)
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n := s.collectGarbage()
	if diskTarget <= 0 {
		return n, nil
	}
	for _, ratio := range []float64{0.4, 0.3, 0.2, 0.1} {
		for n < maxGCRounds && !s.stopping() && dirSize(s.dir) > diskTarget && s.db.RunValueLogGC(ratio) == nil {
			n++
		}
	}
	return n, nil
}

// DiskSize is the space the store's files take on disk (what du reports).
func (s *Badger) DiskSize() int64 { return dirSize(s.dir) }

// dirSize is the space the files of dir take on disk (what du reports).
func dirSize(dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
	}
	return n
}

// flushKey exists only to be dropped by ReclaimEvicted.
var flushKey = []byte{tagMeta, 'f', 'l', 'u', 's', 'h'}
