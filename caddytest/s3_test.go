package caddytest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"image/png"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
)

var s3Seq atomic.Int64

// s3Env is a cache whose tiles are in a real MinIO bucket, with the REST
// interface, in front of the fake WMS (which counts GetMaps).
type s3Env struct {
	t              *testing.T
	m              *s3test.Server
	f              *fakeWMS
	bucket, prefix string
	dir            string // the node's Badger: tasks, and the local tier
}

func newS3Env(t *testing.T, local string) *s3Env {
	t.Helper()
	return newS3EnvWith(t, local, "")
}

// newS3EnvWith is newS3Env with more lines for tile_cache (after s3).
func newS3EnvWith(t *testing.T, local, more string) *s3Env {
	t.Helper()
	ownStore(t) // its own MinIO, bucket and prefix, in every pass
	e := &s3Env{t: t, m: s3test.Start(t), f: newFakeWMS(t), prefix: fmt.Sprintf("node%d", s3Seq.Add(1))}
	e.bucket = e.m.Bucket("tiles")
	t.Setenv("TC_S3_KEY", s3test.AccessKey)
	t.Setenv("TC_S3_SECRET", s3test.SecretKey)
	e.dir = storageDir(t)
	storage := e.dir + `
		s3 {
			bucket ` + e.bucket + `
			prefix ` + e.prefix + `
			endpoint ` + e.m.Addr + `
			region us-east-1
			path_style
			insecure
			timeout 30s
			access_key {env.TC_S3_KEY}
			secret_key {env.TC_S3_SECRET}
			` + local + `
		}
		` + more
	load(t, adminConfig(t, e.f, storage, "retry_wait 100ms", `
		layer test:a {
			gridsets EPSG:4326
		}`))
	t.Cleanup(func() { rest(t, "POST", "/rest/seed", "application/x-www-form-urlencoded", "kill_all=all") })
	return e
}

func (e *s3Env) tiles() []string {
	return e.m.Keys(e.bucket, e.prefix+"/test:a/1/")
}

func (e *s3Env) tile(idx gridset.Index) answer {
	e.t.Helper()
	return get(e.t, siteURL(tileQuery("test:a", "EPSG:4326", idx)))
}

// checkObjects asserts want tile objects, each a whole 256×256 PNG.
func (e *s3Env) checkObjects(want int) {
	e.t.Helper()
	keys := e.tiles()
	if len(keys) != want {
		e.t.Fatalf("%d tile objects in the bucket, want %d", len(keys), want)
	}
	for _, k := range keys {
		obj, err := e.m.Client.GetObject(context.Background(), e.bucket, k, minio.GetObjectOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			e.t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != 256 || img.Bounds().Dy() != 256 {
			e.t.Fatalf("object %s is not a whole 256×256 PNG: %v", k, err)
		}
	}
}

// A seed through the REST interface puts one object per tile under the
// documented keys, each metatile fetched once, and the tiles are then hits
// carrying the object's stamp.
func TestS3SeedStoresEveryTileUnderItsKey(t *testing.T) {
	e := newS3Env(t, "")
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2,"type":"seed","format":"image/png"}}`)
	ti := waitTask(t, path)
	// z0..2 of EPSG:4326: 2 + 8 + 32 tiles in 1 + 1 + 2 metatiles of 4×4.
	if ti.State != "DONE" || ti.Processed != 42 || ti.Total != 42 || ti.FailedTiles != 0 {
		t.Fatalf("seed: %+v", ti)
	}
	if n := e.f.getMaps.Load(); n != 4 {
		t.Errorf("%d GetMaps for 4 metatiles", n)
	}
	e.checkObjects(42)
	want := e.prefix + "/test:a/1/EPSG:4326/png/e3b0c44298fc1c14/2/5/2.png"
	if keys := e.tiles(); !contains(keys, want) {
		t.Fatalf("no object %s among %v", want, keys[:5])
	}
	a := e.tile(gridset.Index{X: 5, Y: 2, Z: 2})
	mustTile(t, a, "HIT")
	info, err := e.m.Client.StatObject(context.Background(), e.bucket, want, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := e.m.Client.GetObject(context.Background(), e.bucket, want, minio.GetObjectOptions{})
	body, _ := io.ReadAll(obj)
	obj.Close()
	if !bytes.Equal(a.body, body) || info.ContentType != "image/png" {
		t.Errorf("the hit is not the object (%d vs %d bytes, %s)", len(a.body), len(body), info.ContentType)
	}
	if lm := a.header.Get("Last-Modified"); lm == "" || a.header.Get("Etag") == "" {
		t.Errorf("hit without Last-Modified/ETag: %v", a.header)
	}
	if n := e.f.getMaps.Load(); n != 4 {
		t.Errorf("the hit asked the upstream: %d GetMaps", n)
	}

	// A range truncation deletes exactly the tiles in range.
	a2 := rest(t, "POST", "/rest/seed/test:a.json", "application/json",
		`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":2,"zoomStop":2,"type":"truncate","format":"image/png",`+
			`"bounds":{"coords":{"double":[0,0,90,90]}}}}`)
	if a2.status != 200 {
		t.Fatalf("truncate: %d %q", a2.status, a2.body)
	}
	waitFor(t, "the range truncated", func() bool { return len(e.tiles()) == 42-4 })
	for _, k := range e.tiles() {
		if strings.Contains(k, "/png/e3b0c44298fc1c14/2/") {
			var x, y int
			fmt.Sscanf(k[strings.LastIndex(k, "/2/")+3:], "%d/%d.png", &x, &y)
			if x >= 4 && x <= 5 && y >= 2 && y <= 3 {
				t.Errorf("tile %s in the truncated range is still stored", k)
			}
		}
	}
}

func contains(keys []string, k string) bool {
	for _, v := range keys {
		if v == k {
			return true
		}
	}
	return false
}

// With S3 down visitors still get their tiles from the upstream (200,
// marked as not stored), never a 5xx; when it is back they are stored.
func TestS3DownVisitorsGetTilesFromTheUpstream(t *testing.T) {
	e := newS3Env(t, "")
	available := `store="s3:http://` + e.m.Addr + "/" + e.bucket + "/" + e.prefix + `/"`
	if v := metric(t, "caddy_tile_cache_s3_available", available); v != 1 {
		t.Fatalf("s3_available{%s} = %v with S3 up", available, v)
	}
	e.m.Stop()
	for i, idx := range []gridset.Index{{X: 0, Y: 0, Z: 1}, {X: 1, Y: 0, Z: 1}, {X: 5, Y: 2, Z: 3}, {X: 9, Y: 3, Z: 4},
		{X: 20, Y: 7, Z: 5}, {X: 40, Y: 10, Z: 6}, {X: 60, Y: 20, Z: 7}} {
		a := e.tile(idx)
		if a.status != 200 {
			t.Fatalf("tile %d with S3 down: %d %q", i, a.status, a.body)
		}
		if _, err := png.Decode(bytes.NewReader(a.body)); err != nil {
			t.Fatalf("tile %d with S3 down is not a PNG: %v", i, err)
		}
		if cs := a.header.Get("Cache-Status"); cs != "tile_cache; fwd=miss; detail=store-failed" {
			t.Errorf("tile %d: Cache-Status %q, want it marked as not stored", i, cs)
		}
	}
	if v := metric(t, "caddy_tile_cache_s3_available", available); v != 0 {
		t.Errorf("s3_available = %v with S3 down", v)
	}
	e.m.Start()
	waitFor(t, "a tile stored once S3 is back", func() bool {
		a := e.tile(gridset.Index{X: 3, Y: 1, Z: 2})
		return a.status == 200 && a.header.Get("Cache-Status") == "tile_cache; fwd=miss; stored"
	})
	mustTile(t, e.tile(gridset.Index{X: 3, Y: 1, Z: 2}), "HIT")
}

// S3 stopped mid-seed: the seed waits for it without failing and finishes
// when it is back, counts exact, every object a whole tile.
func TestS3StoppedMidSeedFinishesExactly(t *testing.T) {
	e := newS3Env(t, "")
	e.f.set("", 50*time.Millisecond)
	// z0..4: 2+8+32+128+512 = 682 tiles in 1+1+2+8+32 = 44 metatiles.
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":4,"type":"seed",`+
		`"format":"image/png","threadCount":2,"tileFailureRetryCount":1,"totalFailuresBeforeAborting":3}}`)
	waitFor(t, "the seed under way", func() bool { return task(t, path).Processed >= 40 })
	e.m.Stop()
	time.Sleep(3 * time.Second)
	ti := task(t, path)
	if ti.Status != 1 || ti.FailedTiles != 0 {
		t.Fatalf("during the S3 outage: %+v", ti)
	}
	e.m.Start()
	ti = waitTask(t, path)
	if ti.State != "DONE" || ti.Processed != 682 || ti.Total != 682 || ti.FailedTiles != 0 {
		t.Fatalf("after the outage: %+v", ti)
	}
	e.checkObjects(682)
}

// A local tier answers hot tiles itself: with S3 down they are still hits.
func TestS3LocalTierServesHotTilesWithS3Down(t *testing.T) {
	e := newS3Env(t, `local {
				max_size 64MiB
				ttl 10m
			}`)
	idx := gridset.Index{X: 5, Y: 2, Z: 2}
	mustTile(t, e.tile(idx), "MISS")
	mustTile(t, e.tile(idx), "HIT")
	e.m.Stop()
	for i := 0; i < 5; i++ {
		mustTile(t, e.tile(idx), "HIT")
	}
	// A neighbour from the same metatile was kept locally by the miss too.
	mustTile(t, e.tile(gridset.Index{X: 4, Y: 3, Z: 2}), "HIT")
}

// A local tier past its max_size evicts its coldest tiles, not all of
// them: a seed of several times the bound leaves the tier under it, with
// the most recent tiles still local (served with S3 down), and every tile
// still served (the evicted ones from S3, as hits).
func TestS3LocalTierEvictsColdestTiles(t *testing.T) {
	e := newS3Env(t, `local {
				max_size 1MiB
				ttl 10m
			}`)
	// The western half of z0..6: 5,461 tiles of about 1.4 KB, some seven
	// times the bound; a page (16×16 tiles) is about a third of it.
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":6,"type":"seed",`+
		`"bounds":{"coords":{"double":[-180,-90,0,90]}},"format":"image/png","threadCount":4}}`)
	if ti := waitTask(t, path); ti.State != "DONE" || ti.FailedTiles != 0 {
		t.Fatalf("seed: %+v", ti)
	}
	local := openBadger(t, e.dir)
	var used int64
	var ev map[string][2]int64
	dir := `dir="` + e.dir + `"`
	// Under the bound, and the pass that got it there counted in the
	// metrics (they are added when a pass ends).
	waitFor(t, "the local tier under its max_size, its evictions counted", func() bool {
		levels, _, err := local.Usage()
		if err != nil {
			t.Fatal(err)
		}
		used = 0
		for _, lv := range levels {
			used += lv.Bytes
		}
		if ev, err = local.Evicted(); err != nil {
			t.Fatal(err)
		}
		return used <= 1<<20 && metric(t, "caddy_tile_cache_evicted_tiles_total", dir+`,layer="test:a"`) == float64(ev["test:a"][0])
	})
	if ev["test:a"][0] == 0 {
		t.Fatalf("the local tier holds %d bytes, yet nothing was evicted: %v", used, ev)
	}
	if used < 1<<19 {
		t.Fatalf("the local tier holds %d bytes (evicted %v): it dropped far more than its coldest tiles", used, ev)
	}
	if v := metric(t, "caddy_tile_cache_quota_bytes", dir+`,layer=""`); v != 1<<20 {
		t.Errorf("quota_bytes{%s} = %v, want the local max_size", dir, v)
	}
	// What stayed is the last seeded level's.
	var kept []store.Page
	if err := local.Pages("test:a", func(ps store.PageStat) error { kept = append(kept, ps.Page); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range kept {
		if p.Z != 6 {
			t.Fatalf("a page of level %d stayed in the local tier while level 6 was seeded last: %v", p.Z, kept)
		}
	}
	// A tile that stayed is a HIT with S3 down; the evicted level 0 is
	// still a HIT, from S3. An eviction pass may still be running (its
	// count is added when it ends, and on a busy machine it pauses
	// between pages) or run again, and take the tile between the listing
	// and the request: an answer that is not a HIT fails the test unless
	// the tier's copy went meanwhile, which shows as a copy with a new
	// stamp (the miss stored the tile again) or none; then another tile
	// is asked for, five times at most.
	e.m.Stop()
	for attempt := 1; ; attempt++ {
		stayed := tileInTier(t, local, "test:a")
		held, err := local.Get(context.Background(), stayed, nil)
		if err != nil {
			t.Fatalf("tile %v, just listed in the local tier: %v", stayed, err)
		}
		a := e.tile(gridset.Index{X: stayed.X, Y: stayed.Y, Z: stayed.Z})
		if a.status == 200 && a.header.Get("Geowebcache-Cache-Result") == "HIT" {
			break
		}
		now, err := local.Get(context.Background(), stayed, nil)
		if (err == nil && now.StoredAt.Equal(held.StoredAt)) || attempt == 5 {
			mustTile(t, a, "HIT")
		}
		t.Logf("the local tier's copy of tile %v went while it was asked for (%s); another", stayed, a.header.Get("Cache-Status"))
	}
	// S3 is back: the store's breaker, opened by the outage, lets calls
	// through again after a probe (the generations' refresh makes one
	// after its cooldown); a request before that is a MISS by design.
	e.m.Start()
	available := `store="s3:http://` + e.m.Addr + "/" + e.bucket + "/" + e.prefix + `/"`
	waitFor(t, "the S3 store in use again", func() bool {
		return metric(t, "caddy_tile_cache_s3_available", available) == 1
	})
	mustTile(t, e.tile(gridset.Index{X: 0, Y: 0, Z: 0}), "HIT")
	n := len(e.tiles())
	if n < 5461 {
		t.Fatalf("%d tile objects in the bucket, want the 5,461 seeded and more: eviction must not reach S3", n)
	}
}

// tileInTier is a tile the local tier holds now, from its most recently
// used page (the last an eviction pass would take).
func tileInTier(t *testing.T, local *store.Badger, layer string) store.Key {
	t.Helper()
	var pages []store.PageStat
	if err := local.Pages(layer, func(ps store.PageStat) error { pages = append(pages, ps); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(pages, func(a, b store.PageStat) int { return cmp.Compare(b.Last, a.Last) })
	for _, p := range pages {
		for x := p.X * store.PageSize; x < (p.X+1)*store.PageSize; x++ {
			for y := p.Y * store.PageSize; y < (p.Y+1)*store.PageSize; y++ {
				k := store.Key{Set: p.Set, Z: p.Z, X: x, Y: y}
				if _, err := local.Get(context.Background(), k, nil); err == nil {
					return k
				}
			}
		}
	}
	t.Fatalf("the local tier holds no tile of %s (%d pages listed)", layer, len(pages))
	return store.Key{}
}
