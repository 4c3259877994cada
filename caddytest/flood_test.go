package caddytest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// A flood of distinct misses from one client that hangs up at once,
// against an upstream of known speed, must not take the cache down: with
// max_misses_per_client below the line's length the flooder can never fill
// the line, so a normal visitor's misses are all answered promptly during
// and right after the flood; the breaker stays closed while the upstream
// is healthy, goroutines and memory stay bounded, and a running seed keeps
// making progress. (Without a per-client cap, a flood can fill the line,
// and a visitor arriving then is refused with 503: CI saw that once.)
// Loopback only, the flood from 127.0.0.2, at most floodRequests requests.
// Nothing here is a speed: the flood lasts floodFor and then until the
// seed has stored a metatile since it began (at most floodMax), so that on
// a machine whose cores are all busy the seed's share is still seen, and
// only a seed starved for the whole of floodMax fails.
func TestMissFloodLeavesTheCacheUp(t *testing.T) {
	const (
		floodFor      = 6 * time.Second
		floodMax      = 90 * time.Second
		floodRequests = 200000
		floodConns    = 96
		render        = 40 * time.Millisecond // the fake WMS's time per metatile
	)
	f := newFakeWMS(t)
	f.set("", render)
	name := fmt.Sprintf("flood%d", time.Now().UnixNano())
	load(t, adminConfig(t, f, storageDir(t), "cache "+name+"\nworkers 2",
		"name "+name+"\nupstream_concurrency 4\nmax_misses_per_client 32\nbreaker 5 1m\n"+restLayers))
	opens := metric(t, "caddy_tile_cache_breaker_opens_total", `cache="`+name+`"`)

	// A seed of z0..6 of test:a (~700 metatiles of 4x4): the flood must not
	// stop it.
	seed := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":6,"type":"seed","threadCount":2}}`)
	// The seed is under way before the flood: a busy machine may take
	// seconds to start it.
	waitFor(t, "seeding", func() bool { return task(t, seed).Processed > 0 })

	baseGoroutines := runtime.NumGoroutine()
	baseRSS := rssMiB(t)
	var sent atomic.Int64
	stop := make(chan struct{})
	var flood sync.WaitGroup
	g, _ := gridset.Builtin("EPSG:4326")
	// The flooder is one client of its own: loopback accepts any 127/8
	// source address.
	flooder := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for c := 0; c < floodConns; c++ {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for sent.Add(1) <= floodRequests {
				select {
				case <-stop:
					return
				default:
				}
				// A random metatile of z10 of EPSG:4326 (131,072 of them):
				// distinct misses, hung up on before their answer (a
				// metatile takes the fake WMS render, 40 ms, and more in
				// the line). Held up to 50 ms, so that more than
				// max_misses_per_client of them wait at once: hung up on at
				// once, each waits only until the server sees the close,
				// and whether 32 ever overlap was up to the machine's load
				// (CI once saw none capped).
				idx := gridset.Index{X: rand.Int64N(512) * 4, Y: rand.Int64N(256) * 4, Z: 10}
				b := g.TileBBox(idx)
				q := "SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=test:a&STYLES=&SRS=EPSG:4326&WIDTH=256&HEIGHT=256&FORMAT=image/png&BBOX=" +
					fmtF(b.MinX) + "," + fmtF(b.MinY) + "," + fmtF(b.MaxX) + "," + fmtF(b.MaxY)
				conn, err := flooder.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", httpPort))
				if err != nil {
					continue
				}
				fmt.Fprintf(conn, "GET /wms?%s HTTP/1.1\r\nHost: localhost\r\n\r\n", q)
				time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
				conn.Close()
			}
		}()
	}

	// A normal visitor: one miss every 250ms on tiles nobody else asks for.
	type visit struct {
		status int
		took   time.Duration
		during bool
	}
	var visits []visit
	var maxGoroutines, maxFetches, maxRSS int
	var seedAtStart, seedAtEnd int64
	seedAtStart = task(t, seed).Processed
	floodStart := time.Now()
	var floodEnd time.Time
	for i := int64(0); floodEnd.IsZero() || time.Since(floodEnd) < 2*time.Second; i++ {
		during := floodEnd.IsZero()
		if during && time.Since(floodStart) >= floodFor {
			// The flood ends once the seed has been seen to move during
			// it (a metatile is 16 tiles at most) and the cap has held the
			// flooder at least once (a flood that ended after 6 s on a
			// machine just freed of load had not yet been capped), or at
			// floodMax.
			seedAtEnd = task(t, seed).Processed
			capped := metric(t, "caddy_tile_cache_misses_refused_total", `cache="`+name+`",reason="client-limit"`) > 0
			if seedAtEnd > seedAtStart && capped || time.Since(floodStart) >= floodMax {
				close(stop)
				floodEnd = time.Now()
				during = false
			}
		}
		start := time.Now()
		a := get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 4 * (i % 128), Y: 4*(i/128) + 32, Z: 7})))
		visits = append(visits, visit{a.status, time.Since(start), during})
		maxGoroutines = max(maxGoroutines, runtime.NumGoroutine())
		maxFetches = max(maxFetches, goroutinesIn("tilecache.(*fetcher).run"))
		maxRSS = max(maxRSS, rssMiB(t))
		time.Sleep(250 * time.Millisecond)
	}
	flood.Wait()

	var slow []string
	var worst time.Duration
	for i, v := range visits {
		worst = max(worst, v.took)
		// Answered, and not after the flood's whole backlog: a visitor
		// behind the flooder's line would wait for it or be refused. Not a
		// speed: 30 s is far beyond what a miss takes even beside CPU hogs.
		if v.status != 200 || v.took > 30*time.Second {
			slow = append(slow, fmt.Sprintf("#%d (during flood %v): %d in %v", i, v.during, v.status, v.took.Round(time.Millisecond)))
		}
	}
	if len(slow) > 0 {
		t.Errorf("visitor misses not answered promptly (%d of %d):\n%s", len(slow), len(visits), strings.Join(slow, "\n"))
	}
	// The cap held the flooder, and the line never filled.
	if n := metric(t, "caddy_tile_cache_misses_refused_total", `cache="`+name+`",reason="client-limit"`); n == 0 {
		t.Errorf("the flooder's misses were never capped (no client-limit refusal)")
	}
	if n := metric(t, "caddy_tile_cache_misses_refused_total", `cache="`+name+`",reason="busy"`); n != 0 {
		t.Errorf("%v misses refused because the line was full: one client filled it despite max_misses_per_client", n)
	}
	if got := metric(t, "caddy_tile_cache_breaker_opens_total", `cache="`+name+`"`) - opens; got != 0 {
		t.Errorf("the breaker opened %v times while the upstream was healthy", got)
	}
	// The cache's own goroutines: one per metatile fetch, and fetches are
	// bounded by upstream_queue (16 × 4) waiting plus upstream_concurrency
	// on the wire plus three in hand per seed thread, and a few refused ones on
	// their way out. The HTTP server's goroutine per
	// open connection is Caddy's, bounded by the connections the kernel
	// lets it accept; on a loaded machine the flood's hung-up connections
	// pile up there (CI saw 783 more goroutines than at the start), so the
	// total is checked for a leak once the flood is over, not for a peak.
	if allowed := 16*4 + 4 + 3*2 + 24; maxFetches > allowed {
		t.Errorf("%d metatile fetches at once during the flood; the queue bounds them to %d", maxFetches, allowed)
	}
	settled := runtime.NumGoroutine()
	for deadline := time.Now().Add(eventPatience); settled > baseGoroutines+100 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		settled = runtime.NumGoroutine()
	}
	if settled > baseGoroutines+100 {
		t.Errorf("goroutines did not come back after the flood: %d before, %d %v after", baseGoroutines, settled, eventPatience)
	}
	if maxRSS > baseRSS+300 {
		t.Errorf("RSS rose from %d MiB to %d MiB during the flood", baseRSS, maxRSS)
	}
	if seedAtEnd <= seedAtStart {
		t.Errorf("the seed made no progress during the flood: %d tiles before, %d after", seedAtStart, seedAtEnd)
	}
	t.Logf("flood: %d requests in %v; visitor: %d misses, slowest %v; goroutines %d → max %d → %d after (fetches max %d); RSS %d → max %d MiB; seed %d → %d tiles; upstream GetMaps %d, max %d at once; flooder capped %v times",
		min(sent.Load(), floodRequests), floodEnd.Sub(floodStart).Round(time.Millisecond), len(visits), worst.Round(time.Millisecond), baseGoroutines, maxGoroutines, settled, maxFetches, baseRSS, maxRSS,
		seedAtStart, seedAtEnd, f.getMaps.Load(), f.maxInFlight.Load(),
		metric(t, "caddy_tile_cache_misses_refused_total", `cache="`+name+`",reason="client-limit"`))
	if m := f.maxInFlight.Load(); m > 4 {
		t.Errorf("the upstream saw %d GetMaps at once; upstream_concurrency is 4", m)
	}
	rest(t, "POST", "/rest/seed", "application/x-www-form-urlencoded", "kill_all=all")
}

// rssMiB is this process's resident memory: Caddy runs in it.
// goroutinesIn counts the goroutines whose stack holds fn (a function
// name as the goroutine profile prints it).
func goroutinesIn(fn string) int {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	n := 0
	for _, block := range strings.Split(b.String(), "\n\n") {
		head, _, _ := strings.Cut(block, " @ ")
		if c, err := strconv.Atoi(head); err == nil && strings.Contains(block, fn) {
			n += c
		}
	}
	return n
}

func rssMiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
