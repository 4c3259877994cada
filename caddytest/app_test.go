package caddytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The tile_cache app owns the caches: two handlers naming one cache share
// it, two different caches under one name are refused, caches defined in
// the global options are served by name, and what must survive a reload
// (the upstream's slots, its breaker) does.

// loadRefused posts a Caddyfile to the admin API and returns its error; the
// config must be refused, and the one running before must stay.
func loadRefused(t *testing.T, caddyfile string) string {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+adminAddr+"/load", strings.NewReader(globalOptions()+caddyfile))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Error string `json:"error"`
	}
	if resp.StatusCode == 200 || json.NewDecoder(resp.Body).Decode(&answer) != nil || answer.Error == "" {
		t.Fatalf("config accepted (%d), or refused without an error:\n%s", resp.StatusCode, caddyfile)
	}
	return answer.Error
}

// twoSites is a config of two sites on two ports, each with a tile_cache
// block of its own.
func twoSites(f *fakeWMS, a, b string) string {
	return siteConfig{upstream: f.URL, tiles: a}.String() + siteConfig{port: httpPort + 1, upstream: f.URL, tiles: b}.String()
}

func TestTwoCachesWithOneNameAreRefused(t *testing.T) {
	f := newFakeWMS(t)
	up := "upstream " + f.URL + "/wms\n\t\tlayer test:a"
	// Unnamed: both would be "default".
	msg := loadRefused(t, twoSites(f, up+"\n\t\tstorage "+storeLines(storageDir(t)), up+"\n\t\tstorage "+storeLines(storageDir(t))))
	for _, want := range []string{`two caches are named "default" with different settings`, "give each its own name"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// Named alike, set differently.
	msg = loadRefused(t, twoSites(f, "name world\n\t\t"+up+"\n\t\ttimeout 5s", "name world\n\t\t"+up+"\n\t\ttimeout 9s"))
	if !strings.Contains(msg, `two caches are named "world" with different settings`) {
		t.Errorf("error %q", msg)
	}
}

// The same settings under one name in two sites are one cache: a tile
// fetched through one site is a HIT through the other.
func TestOneCacheInTwoSites(t *testing.T) {
	f := newFakeWMS(t)
	cfg := "name shared\n\t\tupstream " + f.URL + "/wms\n\t\tstorage " + storageDir(t) + "\n\t\tlayer test:a"
	load(t, twoSites(f, cfg, "name shared"))
	q := tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 1})
	mustTile(t, get(t, siteURL(q)), "MISS")
	other := fmt.Sprintf("http://localhost:%d/wms?%s", httpPort+1, q.Encode())
	mustTile(t, get(t, other), "HIT")
	if n := f.getMaps.Load(); n != 1 {
		t.Fatalf("%d GetMaps, want 1", n)
	}
}

// Caches in the global options, served by name in a site and seeded by
// name through tile_cache_admin.
func TestCachesInTheGlobalOptions(t *testing.T) {
	f := newFakeWMS(t)
	global := fmt.Sprintf(`tile_cache {
		cache world {
			upstream %s/wms
			storage %s
			layer test:a {
				gridsets EPSG:4326
			}
		}
	}`, f.URL, storeLines(storageDir(t)))
	loadWhole(t, globalOptions(global)+siteConfig{admin: ptr("cache world"), upstream: f.URL, tiles: "name world"}.String())
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"type":"seed"}}`)
	if ti := waitTask(t, path); ti.Status != 2 || ti.Processed != 10 {
		t.Fatalf("seed: %+v", ti)
	}
	before := f.getMaps.Load()
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 3, Y: 1, Z: 1}))), "HIT")
	if f.getMaps.Load() != before {
		t.Fatal("a seeded tile went upstream")
	}
	// A handler naming a cache that nobody defines is refused at load.
	msg := loadRefused(t, fmt.Sprintf("http://localhost:%d {\n\ttile_cache {\n\t\tname nowhere\n\t}\n}\n", httpPort))
	if !strings.Contains(msg, `no tile_cache named "nowhere"`) {
		t.Errorf("error %q", msg)
	}
}

// Config reloads while a seed runs and visitors miss: the old and the new
// config share the upstream's slots, so the upstream never sees more than
// upstream_concurrency GetMaps at once, and the seed finishes with exact
// counts.
func TestReloadKeepsTheUpstreamLimit(t *testing.T) {
	f := newFakeWMS(t)
	f.set("", 60*time.Millisecond)
	dir := storageDir(t)
	name := fmt.Sprintf("reload%d", time.Now().UnixNano())
	cfg := func(timeout string) string {
		return adminConfig(t, f, dir, "cache "+name+"\n\t\t\tworkers 4",
			"name "+name+"\n\t\t\tupstream_concurrency 2\n\t\t\ttimeout "+timeout+"\n"+restLayers)
	}
	load(t, cfg("20s"))
	// z0..4 of EPSG:4326: 1+1+2+8+32 metatiles of 4x4 (682 tiles).
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":4,"type":"seed","threadCount":4}}`)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// However the test ends (a t.Fatal included), the visitors stop with
	// it: left running, they went on missing into the next tests' configs
	// and their fake WMSes, and one failure here failed 42 tests after it.
	var stopOnce sync.Once
	stopVisitors := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(stopVisitors)
	// The visitors have connections of their own. On the shared client a
	// visitor's connection to the config being replaced went back to the
	// idle pool after load closed the idle ones, the old server closed it
	// as its request ended, and the next task GET, sent on it, read EOF.
	visitors := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer visitors.CloseIdleConnections()
	wg.Add(1)
	go func() { // visitors missing at z6, far from the seed's levels
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := visitors.Get(siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 4 * (i % 32), Y: 4 * (i / 32 % 16), Z: 6})))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	for i, timeout := range []string{"21s", "22s", "23s"} {
		time.Sleep(300 * time.Millisecond)
		load(t, cfg(timeout)) // a different config: Caddy reloads
		if ti := task(t, path); ti.Status == 2 && i < 2 {
			t.Logf("seed finished after %d reloads", i+1)
		}
	}
	ti := waitTask(t, path)
	stopVisitors()
	if ti.Status != 2 || ti.Processed != 682 || ti.Total != 682 || ti.FailedTiles != 0 {
		t.Fatalf("seed across reloads: %+v", ti)
	}
	if m := f.maxInFlight.Load(); m > 2 {
		t.Fatalf("the upstream saw %d GetMaps at once across reloads, upstream_concurrency is 2", m)
	}
	if f.maxInFlight.Load() < 2 {
		t.Fatalf("never 2 GetMaps at once: the test did not load the upstream")
	}
}

// A reload while the breaker is open keeps it open: misses still get 502
// at once without asking the upstream, and a seed running across the
// reload waits instead of failing, then finishes when the upstream is back.
func TestReloadKeepsTheBreakerOpen(t *testing.T) {
	f := newFakeWMS(t)
	dir := storageDir(t)
	name := fmt.Sprintf("breakreload%d", time.Now().UnixNano())
	cfg := func(timeout string) string {
		return adminConfig(t, f, dir, "cache "+name+"\n\t\t\tretry_wait 20ms",
			"name "+name+"\n\t\t\tbreaker 2 2s\n\t\t\ttimeout "+timeout+"\n"+restLayers)
	}
	load(t, cfg("5s"))
	f.set("500", 0)
	for i := int64(0); i < 2; i++ {
		if a := get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 4 * i, Y: 0, Z: 3}))); a.status != 502 {
			t.Fatalf("failing upstream: %d %q", a.status, a.body)
		}
	}
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2,"type":"seed"}}`)
	load(t, cfg("6s"))
	asked := f.getMaps.Load()
	a := get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 8, Y: 4, Z: 3})))
	if a.status != 502 || !strings.Contains(string(a.body), "upstream unavailable, retrying in") || a.header.Get("Retry-After") == "" {
		t.Fatalf("after the reload: %d %q: the breaker was closed by the reload", a.status, a.body)
	}
	if n := f.getMaps.Load(); n != asked {
		t.Fatalf("after the reload the upstream was asked %d more times while the breaker is open", n-asked)
	}
	f.set("", 0)
	ti := waitTask(t, path)
	if ti.Status != 2 || ti.Processed != ti.Total || ti.FailedTiles != 0 {
		t.Fatalf("seed across an outage and a reload: %+v", ti)
	}
}
