package tiered

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
	"github.com/tilecache/caddy-tilecache/module/store/storetest"
)

// open joins a bucket of m and a fresh Badger: one node.
func open(t *testing.T, m *s3test.Server, bucket string, o Options) *Store {
	t.Helper()
	remote, err := s3store.Open(s3store.Config{Bucket: bucket, Prefix: "tiles", Endpoint: m.Addr,
		Region: "us-east-1", PathStyle: true, Insecure: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	local, err := store.Open(t.TempDir(), store.Options{TileTTL: time.Hour})
	if err != nil {
		remote.Close()
		t.Fatal(err)
	}
	s := New(remote, local, o, zap.NewNop())
	t.Cleanup(func() { s.Release() })
	return s
}

// TestTilesContract: S3 with and without a local tier keeps the contract
// of every store. With the tier, every Get after the first is answered
// locally, so the contract checks that truncation and range deletion
// reach the local copies too.
func TestTilesContract(t *testing.T) {
	m := s3test.Start(t)
	for _, c := range []struct {
		name string
		o    Options
	}{{"remote only", Options{}}, {"local tier", Options{Hot: true}}} {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			storetest.Tiles(t, func(t *testing.T) store.Tiles {
				n++
				return open(t, m, m.Bucket(fmt.Sprintf("contract-%t-%d", c.o.Hot, n)), c.o)
			})
		})
	}
}

// TestLocalTiersFollowOtherNodesTruncations: two nodes on one bucket, each
// with a local tier. When one truncates the layer, or deletes a range of
// it, the other stops serving its local copies of those tiles within the
// refresh (2 s), long before their ttl (an hour here), and keeps serving
// the rest.
func TestLocalTiersFollowOtherNodesTruncations(t *testing.T) {
	m := s3test.Start(t)
	bucket := m.Bucket("nodes")
	a, b := open(t, m, bucket, Options{Hot: true}), open(t, m, bucket, Options{Hot: true})
	set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: "e3b0c44298fc1c14"}
	key := func(x, y int64) store.Key { return store.Key{Set: set, Z: 3, X: x, Y: y} }
	fill := func() {
		var es []store.Entry
		for x := int64(0); x < 4; x++ {
			for y := int64(0); y < 4; y++ {
				es = append(es, store.Entry{Key: key(x, y), Data: fmt.Appendf(nil, "%d/%d", x, y)})
			}
		}
		if err := a.Put(es, time.Now()); err != nil {
			t.Fatal(err)
		}
		// b reads them all once: now it has local copies.
		for _, e := range es {
			if _, err := b.Get(t.Context(), e.Key, nil); err != nil {
				t.Fatal(err)
			}
		}
		lk, _ := b.localKey(key(0, 0))
		if _, err := b.local.Get(t.Context(), lk, nil); err != nil {
			t.Fatalf("b kept no local copy: %v", err)
		}
	}
	// gone polls b until k is no longer served, and reports how long that took.
	gone := func(k store.Key) time.Duration {
		start := time.Now()
		for time.Since(start) < 4*time.Second {
			if _, err := b.Get(t.Context(), k, nil); errors.Is(err, store.ErrNotFound) {
				return time.Since(start)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("b still serves %v 4 s after another node deleted it", k)
		return 0
	}

	fill()
	if err := a.TruncateLayer("test:a"); err != nil {
		t.Fatal(err)
	}
	took := gone(key(1, 1))
	if took > 3*time.Second {
		t.Errorf("a truncation took %v to reach the other node's local tier; the documented bound is 2 s", took)
	}
	t.Logf("truncateLayer on node a: node b stopped serving after %v", took.Round(time.Millisecond))

	fill()
	if _, err := a.DeleteRange(set, 3, gridset.Range{MinX: 0, MinY: 0, MaxX: 1, MaxY: 3}, nil); err != nil {
		t.Fatal(err)
	}
	took = gone(key(1, 2))
	if took > 3*time.Second {
		t.Errorf("a range deletion took %v to reach the other node's local tier", took)
	}
	t.Logf("range truncate on node a: node b stopped serving after %v", took.Round(time.Millisecond))
	for x := int64(0); x < 4; x++ {
		for y := int64(0); y < 4; y++ {
			_, err := b.Get(t.Context(), key(x, y), nil)
			if inRange := x <= 1; inRange != errors.Is(err, store.ErrNotFound) || (!inRange && err != nil) {
				t.Errorf("after the range deletion b answers tile %d/%d with %v", x, y, err)
			}
		}
	}
}
