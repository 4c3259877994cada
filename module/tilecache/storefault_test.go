package tilecache

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// faultStore is a real store whose reads and writes can be made to fail:
// the cache talks to store.Store only, so a fault is a wrapper, not a
// destroyed database.
type faultStore struct {
	store.Store
	failGet, failPut atomic.Bool
	puts             atomic.Int64
}

var errInjected = errors.New("injected store fault")

func (s *faultStore) Get(ctx context.Context, k store.Key, dst []byte) (store.Tile, error) {
	if s.failGet.Load() {
		return store.Tile{}, errInjected
	}
	return s.Store.Get(ctx, k, dst)
}

func (s *faultStore) Put(entries []store.Entry, at time.Time) error {
	s.puts.Add(1)
	if s.failPut.Load() {
		return errInjected
	}
	return s.Store.Put(entries, at)
}

// A store that cannot be written still lets tiles through (marked as not
// stored, never as hits), and one that cannot be read is bypassed for the
// upstream; once it heals, tiles are stored and hit again.
func TestStoreFaultsLetTilesThrough(t *testing.T) {
	up := newBreakerUpstream(t)
	b, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultStore{Store: b}
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	h := handlerOf(t, openTest(t, compileTest(t, cfg), fs), nil)
	idx := gridset.Index{X: 1, Y: 1, Z: 2}

	fs.failPut.Store(true)
	for i := 0; i < 2; i++ {
		w := serveTestTile(t, h, idx)
		if w.Code != http.StatusOK || w.Header().Get("Cache-Status") != "tile_cache; fwd=miss; detail=store-failed" {
			t.Fatalf("write fault, request %d: %d %q", i, w.Code, w.Header().Get("Cache-Status"))
		}
	}
	if n := up.requests.Load(); n != 2 {
		t.Fatalf("with writes failing, %d upstream requests for 2 misses, want 2", n)
	}
	fs.failPut.Store(false)
	if w := serveTestTile(t, h, idx); w.Code != 200 || w.Header().Get("Geowebcache-Cache-Result") != "MISS" {
		t.Fatalf("healed: %d %q", w.Code, w.Header().Get("Geowebcache-Cache-Result"))
	}
	if w := serveTestTile(t, h, idx); w.Header().Get("Geowebcache-Cache-Result") != "HIT" {
		t.Fatalf("after a good write: %q", w.Header().Get("Geowebcache-Cache-Result"))
	}
	fs.failGet.Store(true)
	before := up.requests.Load()
	if w := serveTestTile(t, h, idx); w.Code != 200 || w.Header().Get("Geowebcache-Cache-Result") != "MISS" {
		t.Fatalf("read fault: %d %q", w.Code, w.Header().Get("Geowebcache-Cache-Result"))
	}
	if up.requests.Load() != before+1 {
		t.Fatal("a read fault did not fetch from the upstream")
	}
}
