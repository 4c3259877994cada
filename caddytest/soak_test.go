package caddytest

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The soak runs in every test run for a few seconds; -soak sets a longer
// duration (e.g. go test ./caddytest -run TestSoak -soak 10m).
var soakDuration = flag.Duration("soak", 8*time.Second, "how long TestSoak runs its load")

// TestSoak: concurrent hits and misses on several layers, while a seed, a
// kill and a mass truncate run, against an upstream that answers one layer
// with ServiceExceptions 30% of the time. At the end: no 5xx but those
// injected faults, every stored tile decodes, the cache's counters agree
// with what the clients saw, and resident memory stayed bounded.
func TestSoak(t *testing.T) {
	fake := newFakeWMS(t)
	var injected atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.URL.Query().Get("LAYERS"), "test:faulty") && rand.IntN(10) < 3 {
			injected.Add(1)
			w.Header().Set("Content-Type", "application/vnd.ogc.se_xml")
			fmt.Fprint(w, `<ServiceExceptionReport><ServiceException code="InjectedFault">soak</ServiceException></ServiceExceptionReport>`)
			return
		}
		fake.serve(w, r)
	}))
	t.Cleanup(up.Close)
	fake.set("", 5*time.Millisecond)
	layers := `
		layer test:a {
			gridsets EPSG:4326 EPSG:900913
		}
		layer test:b {
			gridsets EPSG:4326
		}
		layer test:c {
			gridsets EPSG:900913
		}
		layer test:faulty {
			gridsets EPSG:4326
			metatile 2 2
		}`
	dir := storageDir(t)
	cfg := adminConfig(t, &fakeWMS{Server: up}, dir, "workers 2\n\t\t\tretry_wait 10ms", layers)
	load(t, cfg)
	// Hits to come: test:a levels 0..3.
	waitTask(t, submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"threadCount":2}}`))

	base := map[string][2]float64{}
	for _, l := range []string{"test:a", "test:b", "test:c", "test:faulty"} {
		lbl := `layer="` + l + `"`
		base[l] = [2]float64{metric(t, "caddy_tile_cache_hits_total", lbl), metric(t, "caddy_tile_cache_misses_total", lbl)}
	}
	type counts struct{ hit, miss, bad, other int64 }
	var mu sync.Mutex
	seen := map[string]*counts{}
	var requests atomic.Int64
	stop := time.Now().Add(*soakDuration)
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(stop) {
				var layer, gs string
				var z int
				switch rng.IntN(4) {
				case 0:
					layer, gs, z = "test:a", "EPSG:4326", rng.IntN(4)
				case 1:
					layer, gs, z = "test:b", "EPSG:4326", 5+rng.IntN(3)
				case 2:
					layer, gs, z = "test:c", "EPSG:900913", 2+rng.IntN(5)
				default:
					layer, gs, z = "test:faulty", "EPSG:4326", 3+rng.IntN(3)
				}
				g, _ := gridset.Builtin(gs)
				l := g.Levels[z]
				idx := gridset.Index{X: rng.Int64N(l.TilesWide), Y: rng.Int64N(l.TilesHigh), Z: z}
				a := get(t, siteURL(tileQuery(layer, gs, idx)))
				requests.Add(1)
				mu.Lock()
				c := seen[layer]
				if c == nil {
					c = &counts{}
					seen[layer] = c
				}
				switch {
				case a.status == 200 && a.header.Get("Geowebcache-Cache-Result") == "HIT":
					c.hit++
				case a.status == 200 && a.header.Get("Geowebcache-Cache-Result") == "MISS":
					c.miss++
				case a.status >= 500:
					c.bad++
					if layer != "test:faulty" || a.status != 502 {
						t.Errorf("%s %v: %d %q", layer, idx, a.status, truncate(a.body))
					}
				default:
					c.other++
					t.Errorf("%s %v: %d %q", layer, idx, a.status, truncate(a.body))
				}
				mu.Unlock()
			}
		}(w)
	}
	// Operations while the load runs, spread over its first half.
	var rss []int64
	step := *soakDuration / 8
	time.Sleep(step)
	seedB := submit(t, "test:b", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":6,"threadCount":2}}`)
	rss = append(rss, residentKB(t))
	time.Sleep(step)
	if a := rest(t, "POST", "/rest/seed/test:b", "application/x-www-form-urlencoded", "kill_all=all"); a.status != 200 {
		t.Errorf("kill: %d %s", a.status, a.body)
	}
	time.Sleep(step)
	if a := rest(t, "POST", "/rest/masstruncate", "text/xml", "<truncateLayer><layerName>test:c</layerName></truncateLayer>"); a.status != 200 {
		t.Errorf("mass truncate: %d %s", a.status, a.body)
	}
	reseed := submit(t, "test:a", "xml", `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>2</zoomStop><type>reseed</type></seedRequest>`)
	for time.Now().Before(stop) {
		rss = append(rss, residentKB(t))
		time.Sleep(min(500*time.Millisecond, time.Until(stop)+time.Millisecond))
	}
	wg.Wait()
	if ti := waitTask(t, seedB); ti.State != "ABORTED" {
		t.Errorf("killed seed ended %s", ti.State)
	}
	if ti := waitTask(t, reseed); ti.State != "DONE" || ti.Processed != ti.Total {
		t.Errorf("reseed during the soak: %+v", ti)
	}
	rss = append(rss, residentKB(t))

	// The cache's counters agree with what the clients saw: every MISS
	// answer and every 502 was a miss, every HIT a hit.
	for l, c := range seen {
		lbl := `layer="` + l + `"`
		hits := metric(t, "caddy_tile_cache_hits_total", lbl) - base[l][0]
		misses := metric(t, "caddy_tile_cache_misses_total", lbl) - base[l][1]
		if int64(hits) != c.hit || int64(misses) != c.miss+c.bad {
			t.Errorf("%s: clients saw %d HIT, %d MISS, %d 502; metrics say %v hits, %v misses", l, c.hit, c.miss, c.bad, hits, misses)
		}
	}
	// Every stored tile decodes.
	n := 0
	err := eachTile(t, dir, func(data []byte) error {
		n++
		_, _, err := image.Decode(bytes.NewReader(data))
		return err
	})
	if err != nil || n == 0 {
		t.Errorf("stored tiles: %d read, error %v", n, err)
	}
	minRSS, maxRSS := rss[0], rss[0]
	for _, v := range rss {
		minRSS, maxRSS = min(minRSS, v), max(maxRSS, v)
	}
	// Bounded: the load adds tiles to the store, not to the heap.
	if maxRSS-rss[0] > 512<<10 {
		t.Errorf("resident memory grew from %d MiB to %d MiB", rss[0]>>10, maxRSS>>10)
	}
	total := requests.Load()
	t.Logf("soak %v: %d tile requests (%.0f/s, 12 clients); per layer %s; %d faults injected; %d tiles stored and decoded; RSS %d..%d MiB (first %d, last %d)",
		*soakDuration, total, float64(total)/soakDuration.Seconds(), fmtCounts(seen), injected.Load(), n,
		minRSS>>10, maxRSS>>10, rss[0]>>10, rss[len(rss)-1]>>10)
}

func fmtCounts[T any](m map[string]*T) string {
	var b strings.Builder
	for k, v := range m {
		fmt.Fprintf(&b, "%s %+v; ", k, *v)
	}
	return b.String()
}

// residentKB is this process's resident set: the in-process Caddy's.
func residentKB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
