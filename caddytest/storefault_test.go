package caddytest

import (
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// A store that fails (here: closed underneath the cache) must not take the
// map down: tiles are still answered from the upstream and the errors are
// logged and counted.
func TestStoreFailureStillAnswersFromTheUpstream(t *testing.T) {
	ownStore(t) // on Badger; S3 down: TestS3DownVisitorsGetTilesFromTheUpstream
	f := newFakeWMS(t)
	load(t, adminConfig(t, f, storageDir(t), "retry_wait 1ms", ""))
	before := metric(t, "caddy_tile_cache_store_errors_total", "")
	if err := cacheStore(t).Destruct(); err != nil {
		t.Fatal(err)
	}
	a := get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 0})))
	mustTile(t, a, "MISS")
	if cs := a.header.Get("Cache-Status"); !strings.Contains(cs, "store-failed") {
		t.Errorf("Cache-Status %q does not say the store failed", cs)
	}
	if after := metric(t, "caddy_tile_cache_store_errors_total", ""); after < before+2 {
		t.Errorf("store errors %v -> %v: the failed read and write were not both counted", before, after)
	}
	// The failed write stored nothing, yet the next request is answered too.
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 0, Y: 0, Z: 0}))), "MISS")
}
