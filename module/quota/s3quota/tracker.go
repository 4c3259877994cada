package s3quota

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// pageHits are one page's uses seen by this node.
type pageHits struct {
	hits atomic.Uint64
	last atomic.Int64 // Unix seconds
}

// tracker counts uses per page in memory, as the Badger store's
// accessTracker does: the hit path finds a page's counters under a
// shard's read lock and bumps them with atomics, no allocation once the
// page is known, no clock read (now is kept by the adapter's loop).
type tracker struct {
	now    atomic.Int64
	shards [16]struct {
		mu sync.RWMutex
		m  map[store.Page]*pageHits
	}
}

func newTracker(now int64) *tracker {
	t := &tracker{}
	t.now.Store(now)
	for i := range t.shards {
		t.shards[i].m = map[store.Page]*pageHits{}
	}
	return t
}

func pageOf(k store.Key) store.Page {
	return store.Page{Set: k.Set, Z: k.Z, X: k.X >> store.PageShift, Y: k.Y >> store.PageShift}
}

func (t *tracker) shard(p *store.Page) int { return int((p.X ^ p.Y ^ int64(p.Z)) & 15) }

// touch counts one use of the page of k.
func (t *tracker) touch(k store.Key) {
	p := pageOf(k)
	sh := &t.shards[t.shard(&p)]
	sh.mu.RLock()
	h := sh.m[p]
	sh.mu.RUnlock()
	if h == nil {
		sh.mu.Lock()
		if h = sh.m[p]; h == nil {
			h = &pageHits{}
			sh.m[p] = h
		}
		sh.mu.Unlock()
	}
	h.hits.Add(1)
	if now := t.now.Load(); h.last.Load() != now {
		h.last.Store(now)
	}
}

// get is what this node saw of page p.
func (t *tracker) get(p store.Page) (hits uint64, last int64) {
	sh := &t.shards[t.shard(&p)]
	sh.mu.RLock()
	h := sh.m[p]
	sh.mu.RUnlock()
	if h == nil {
		return 0, 0
	}
	return h.hits.Load(), h.last.Load()
}

func (t *tracker) forget(p store.Page) {
	sh := &t.shards[t.shard(&p)]
	sh.mu.Lock()
	delete(sh.m, p)
	sh.mu.Unlock()
}

type hitEntry struct {
	page store.Page
	hits uint64
	last int64
}

// entries returns the pages used, the most recently used first.
func (t *tracker) entries() []hitEntry {
	var out []hitEntry
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		for p, h := range sh.m {
			out = append(out, hitEntry{p, h.hits.Load(), h.last.Load()})
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b hitEntry) int {
		switch {
		case a.last > b.last:
			return -1
		case a.last < b.last:
			return 1
		}
		return 0
	})
	return out
}

// prune keeps the max most recently used pages.
func (t *tracker) prune(max int) {
	es := t.entries()
	if len(es) <= max {
		return
	}
	for _, e := range es[max:] {
		t.forget(e.page)
	}
}
