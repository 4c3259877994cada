package caddytest

import (
	"github.com/caddyserver/caddy/v2"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
)

// Levels 0..3 of EPSG:4326 with 4×4 metatiles: level z has 2^(z+1)×2^z
// tiles, so 2+8+32+128 = 170 tiles in 1+1+2+8 = 12 metatiles.
func TestSeedFetchesEachMetatileOnceThenServesHits(t *testing.T) {
	f := newFakeWMS(t)
	load(t, adminConfig(t, f, storageDir(t), "workers 2", ""))
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"format":"image/png","type":"seed","threadCount":2}}`)
	ti := waitTask(t, path)
	if ti.State != "DONE" || ti.Processed != 170 || ti.Total != 170 || ti.Remaining != 0 || ti.FailedTiles != 0 {
		t.Fatalf("task %+v", ti)
	}
	if n := f.getMaps.Load(); n != 12 {
		t.Fatalf("seeding made %d GetMaps, want 12", n)
	}
	for z := 0; z <= 3; z++ {
		g, _ := gridset.Builtin("EPSG:4326")
		l := g.Levels[z]
		for x := int64(0); x < l.TilesWide; x++ {
			for y := int64(0); y < l.TilesHigh; y++ {
				mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: x, Y: y, Z: z}))), "HIT")
			}
		}
	}
	if n := f.getMaps.Load(); n != 12 {
		t.Fatalf("serving the seeded tiles made %d more GetMaps", n-12)
	}
	// Seeding again skips every metatile; reseeding fetches them all again.
	ti = waitTask(t, submit(t, "test:a", "xml", `<seedRequest><name>test:a</name><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>3</zoomStop><type>seed</type></seedRequest>`))
	if ti.Processed != 170 || f.getMaps.Load() != 12 {
		t.Fatalf("re-seed: %+v, GetMaps %d", ti, f.getMaps.Load())
	}
	ti = waitTask(t, submit(t, "test:a", "xml", `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>3</zoomStop><type>reseed</type></seedRequest>`))
	if ti.Processed != 170 || f.getMaps.Load() != 24 {
		t.Fatalf("reseed: %+v, GetMaps %d", ti, f.getMaps.Load())
	}
}

func TestTruncateRemovesExactlyTheRange(t *testing.T) {
	f := newFakeWMS(t)
	dir := storageDir(t)
	load(t, adminConfig(t, f, dir, "", ""))
	waitTask(t, submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3}}`))
	set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: defaultParamsHash(t, "test:a")}
	g, _ := gridset.Builtin("EPSG:4326")
	count := func(z int) int64 { return countTiles(t, dir, set, z, g.GridRange(z)) }
	if count(2) != 32 || count(3) != 128 {
		t.Fatalf("seeded %d, %d tiles at z2, z3", count(2), count(3))
	}
	// lon 0..90, lat 0..90: at z2 (45° tiles) 2×2 tiles, at z3 4×4.
	ti := waitTask(t, submit(t, "test:a", "xml", `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>2</zoomStart><zoomStop>3</zoomStop><type>truncate</type><threadCount>4</threadCount><bounds><coords><double>0</double><double>0</double><double>90</double><double>90</double></coords></bounds></seedRequest>`))
	if ti.State != "DONE" || ti.Total != 20 || ti.Processed != 20 || ti.Threads != 1 || ti.Type != "TRUNCATE" {
		t.Fatalf("truncate task %+v", ti)
	}
	if count(0) != 2 || count(1) != 8 || count(2) != 28 || count(3) != 112 {
		t.Fatalf("after truncate: %d %d %d %d tiles at z0..3", count(0), count(1), count(2), count(3))
	}
	inside := gridset.Range{MinX: 4, MinY: 2, MaxX: 5, MaxY: 3}
	if n := countTiles(t, dir, set, 2, inside); n != 0 {
		t.Fatalf("%d tiles left inside the truncated range", n)
	}
	before := f.getMaps.Load()
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 4, Y: 2, Z: 2}))), "MISS")
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 3, Y: 2, Z: 2}))), "HIT")
	if f.getMaps.Load() != before+1 {
		t.Fatalf("GetMaps %d", f.getMaps.Load()-before)
	}
}

func TestSeedRetriesThenSucceeds(t *testing.T) {
	f := newFakeWMS(t)
	load(t, adminConfig(t, f, storageDir(t), "retry_wait 10ms", ""))
	f.failNext.Store(2)
	ti := waitTask(t, submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0}}`))
	if ti.State != "DONE" || ti.Processed != 2 || ti.Failures != 2 || ti.FailedTiles != 0 {
		t.Fatalf("task %+v", ti)
	}
	if f.getMaps.Load() != 3 {
		t.Fatalf("GetMaps %d, want 3 (2 failures + 1 success)", f.getMaps.Load())
	}
}

func TestSeedCountsFailedTilesAndAbortsPastTheLimit(t *testing.T) {
	f := newFakeWMS(t)
	// The breaker off: with it, an upstream down for good makes seeding
	// wait instead (TestBreakerSeedWaitsOutAnOutage).
	load(t, adminConfig(t, f, storageDir(t), "retry_wait 5ms", "breaker off\n"+restLayers))
	f.set("500", 0)
	// Retries exhausted but under the failure limit: the metatile's tiles
	// are counted as failed, the task goes on and ends DONE.
	ti := waitTask(t, submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0,"tileFailureRetryCount":1,"totalFailuresBeforeAborting":100}}`))
	if ti.State != "DONE" || ti.Processed != 0 || ti.FailedTiles != 2 || ti.Failures != 2 || ti.Remaining != 2 || ti.LastError == "" {
		t.Fatalf("task %+v", ti)
	}
	// Past the limit: ABORTED.
	before := f.getMaps.Load()
	ti = waitTask(t, submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":2,"zoomStop":3,"tileFailureRetryCount":"2","tileFailureRetryWaitTime":"1","totalFailuresBeforeAborting":"4"}}`))
	if ti.State != "ABORTED" || ti.Status != -1 || ti.Failures != 5 || ti.Processed != 0 {
		t.Fatalf("task %+v", ti)
	}
	if n := f.getMaps.Load() - before; n != 5 {
		t.Fatalf("aborted task made %d GetMaps, want 5", n)
	}
	if len(listing(t, "/rest/seed.json")) != 0 {
		t.Fatal("finished tasks still listed")
	}
}

// Users' misses get the upstream before seeding: with one upstream slot and
// a seeder waiting for it, a user's miss is the very next GetMap.
func TestSeedingYieldsTheUpstreamToUsers(t *testing.T) {
	f := newFakeWMS(t)
	layers := `
		upstream_concurrency 1
		layer test:a {
			gridsets EPSG:4326
		}`
	load(t, adminConfig(t, f, storageDir(t), "workers 2", layers))
	f.set("", 150*time.Millisecond)
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":4,"zoomStop":4,"threadCount":2}}`)
	deadline := time.Now().Add(10 * time.Second)
	for len(f.arrivals()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// One seeder's fetch is in flight; give the other, done with its
	// metatile, time to queue for the slot again.
	time.Sleep(60 * time.Millisecond)
	before := len(f.arrivals())
	userIdx := gridset.Index{X: 100, Y: 50, Z: 7}
	g, _ := gridset.Builtin("EPSG:4326")
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", userIdx))), "MISS")
	meta, _ := g.MetaTile(userIdx, 4, 4, 0, g.GridRange(7))
	want := fmtF(meta.BBox.MinX) + "," + fmtF(meta.BBox.MinY) + "," + fmtF(meta.BBox.MaxX) + "," + fmtF(meta.BBox.MaxY)
	got := f.arrivals()
	pos := -1
	for i, b := range got {
		if b == want {
			pos = i
		}
	}
	if pos != before {
		t.Fatalf("user's GetMap was number %d; %d GetMaps had arrived before it was sent (seeding kept the slot)", pos, before)
	}
	rest(t, "POST", "/rest/seed", "application/x-www-form-urlencoded", "kill_all=all")
	if ti := waitTask(t, path); ti.State != "ABORTED" {
		t.Fatalf("killed task %+v", ti)
	}
}

// A user's miss and a seeding worker on the same metatile share one fetch.
func TestUserMissJoinsTheSeedersFetch(t *testing.T) {
	f := newFakeWMS(t)
	load(t, adminConfig(t, f, storageDir(t), "", ""))
	f.set("", 300*time.Millisecond)
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0}}`)
	deadline := time.Now().Add(10 * time.Second)
	for f.getMaps.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 0}))), "MISS")
	waitTask(t, path)
	if n := f.getMaps.Load(); n != 1 {
		t.Fatalf("seeder and user made %d GetMaps for one metatile, want 1", n)
	}
}

// currentCache is the running config's cache named name.
func currentCache(t *testing.T, name string) *tilecache.Cache {
	t.Helper()
	app, err := tilecache.AppOf(caddy.ActiveContext())
	if err != nil {
		t.Fatal(err)
	}
	c, err := app.Cache(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cacheStore is the default cache's Badger store.
func cacheStore(t *testing.T) *store.Badger {
	t.Helper()
	b, ok := currentCache(t, tilecache.DefaultName).Store().(*store.Badger)
	if !ok {
		t.Fatal("the default cache's store is not a Badger")
	}
	return b
}

func defaultParamsHash(t *testing.T, layer string) string {
	t.Helper()
	l, ok := currentCache(t, tilecache.DefaultName).Layer(layer)
	if !ok {
		t.Fatalf("no layer %s", layer)
	}
	return l.Params.Defaults().Hash()
}

// A config reload in the middle of a seed neither loses nor duplicates the
// task: the engine outlives the config, and the task goes on to DONE.
func TestReloadKeepsRunningTasks(t *testing.T) {
	f := newFakeWMS(t)
	dir := storageDir(t)
	load(t, adminConfig(t, f, dir, "workers 1", ""))
	f.set("", 40*time.Millisecond)
	// z3: 16×8 tiles = 8 metatiles, one at a time: ≥ 320 ms of work.
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":3,"zoomStop":3}}`)
	deadline := time.Now().Add(10 * time.Second)
	for f.getMaps.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	load(t, adminConfig(t, f, dir, "workers 2", "")) // a different config
	recs := listing(t, "/rest/seed.json")
	if len(recs) != 1 || recs[0][4] != 1 {
		t.Fatalf("after reload the listing is %v, want the one running task", recs)
	}
	ti := waitTask(t, path)
	if ti.State != "DONE" || ti.Processed != 128 || ti.Total != 128 {
		t.Fatalf("task after reload %+v", ti)
	}
	if n := f.getMaps.Load(); n != 8 {
		t.Fatalf("%d GetMaps for 8 metatiles: work was lost or repeated", n)
	}
}
