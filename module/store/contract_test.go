package store_test

import (
	"testing"

	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/storetest"
)

// TestTilesContract: the Badger store keeps the contract the S3 store and
// the tiered store are held to as well.
func TestTilesContract(t *testing.T) {
	storetest.Tiles(t, func(t *testing.T) store.Tiles {
		s, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Release() })
		return s
	})
}
