package tiered

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
	"github.com/tilecache/caddy-tilecache/module/store/storetest"
)

// open joins a fresh bucket of m and a fresh Badger.
func open(t *testing.T, m *s3test.Server, bucket string, o Options) *Store {
	t.Helper()
	remote, err := s3store.Open(s3store.Config{Bucket: m.Bucket(bucket), Prefix: "tiles", Endpoint: m.Addr,
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
				return open(t, m, fmt.Sprintf("contract-%t-%d", c.o.Hot, n), c.o)
			})
		})
	}
}
