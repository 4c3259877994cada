package caddytest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// faultWMS is a WMS that answers GetMaps with one injected fault at a time
// (or correctly when none is set), and notes when each GetMap arrived.
type faultWMS struct {
	*httptest.Server
	getMaps atomic.Int64

	mu       sync.Mutex
	fault    string
	arrivals []time.Time
}

// The faults faultWMS can inject. The first group says the upstream is
// unavailable (the circuit breaker counts those), the second that it
// answered, wrongly.
var (
	unavailableFaults = []string{"500", "503", "timeout", "reset", "trickle"}
	contentFaults     = []string{"exception", "exception-as-png", "wrong-type", "empty", "truncated",
		"truncated-iend", "corrupt", "garbage", "gif", "wrong-size"}
	allFaults = append(append([]string(nil), unavailableFaults...), contentFaults...)
)

// faultTimeout is the upstream timeout of a faultEnv's cache. It ends the
// "timeout" and "trickle" faults, and it is what a good answer of the
// fault WMS must arrive within: beside CPU hogs (load 14 on 2 cores) a
// good 1024×1024 metatile took more than the 500 ms this once was, and a
// good request failed as a timeout. So it is far above any answer's time,
// at the price of 3 s a timeout fault.
const faultTimeout = 3 * time.Second

// faultStall bounds how long a "timeout" or "trickle" answer goes on: far
// beyond faultTimeout, so that only the cache's timeout ends one (the
// 502 says so), and short enough for Close.
const faultStall = 15 * time.Second

func newFaultWMS(t *testing.T) *faultWMS {
	f := &faultWMS{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *faultWMS) set(fault string) {
	f.mu.Lock()
	f.fault = fault
	f.mu.Unlock()
}

// since returns the arrival times of the GetMaps after the first n.
func (f *faultWMS) since(n int) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.arrivals[min(n, len(f.arrivals)):]...)
}

func (f *faultWMS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.arrivals)
}

func (f *faultWMS) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !strings.EqualFold(q.Get("REQUEST"), "GetMap") {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "fault WMS passthrough")
		return
	}
	f.getMaps.Add(1)
	f.mu.Lock()
	fault := f.fault
	f.arrivals = append(f.arrivals, time.Now())
	f.mu.Unlock()
	wd, _ := strconv.Atoi(q.Get("WIDTH"))
	ht, _ := strconv.Atoi(q.Get("HEIGHT"))
	if wd <= 0 || ht <= 0 || wd > 4096 || ht > 4096 {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	format := q.Get("FORMAT")
	good := faultImage(wd, ht, format)
	ct := format
	switch fault {
	case "":
	case "500", "503":
		code, _ := strconv.Atoi(fault)
		http.Error(w, "injected "+fault, code)
		return
	case "timeout": // no answer at all
		select {
		case <-r.Context().Done():
		case <-time.After(faultStall):
		}
		return
	case "reset": // the connection dies halfway through the body
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", ct, len(good))
		buf.Write(good[:len(good)/2])
		buf.Flush()
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST, not FIN
		}
		conn.Close()
		return
	case "trickle": // a good image, far slower than the timeout
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Length", strconv.Itoa(len(good)))
		w.WriteHeader(http.StatusOK)
		deadline := time.After(faultStall)
		for i := 0; i < len(good); i += 16 {
			w.Write(good[i:min(i+16, len(good))])
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-deadline:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		return
	case "exception":
		ct, good = "application/vnd.ogc.se_xml", []byte(serviceException)
	case "exception-as-png":
		good = []byte(serviceException)
	case "wrong-type":
		ct = "text/html; charset=utf-8"
	case "empty":
		good = nil
	case "truncated":
		good = good[:len(good)*6/10]
	case "truncated-iend": // all but the last 12 bytes: PNG's IEND chunk, the end of a JPEG
		good = good[:len(good)-12]
	case "corrupt": // the compressed data damaged in the middle
		good = bytes.Clone(good)
		for i := len(good) / 2; i < len(good)/2+64; i++ {
			good[i] ^= 0x5a
		}
	case "garbage":
		good = append(append([]byte(nil), good[:8]...), bytes.Repeat([]byte{0xde, 0xad}, 500)...)
	case "gif":
		var b bytes.Buffer
		gif.Encode(&b, image.NewPaletted(image.Rect(0, 0, wd, ht), color.Palette{color.White, color.Black}), nil)
		ct, good = "image/gif", b.Bytes()
	case "wrong-size":
		good = faultImage(wd/2, ht/2, format)
	default:
		panic("unknown fault " + fault)
	}
	w.Header().Set("Content-Type", ct)
	w.Write(good)
}

const serviceException = `<?xml version="1.0" encoding="UTF-8"?>
<ServiceExceptionReport version="1.1.1"><ServiceException code="LayerNotDefined">
  msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter.
</ServiceException></ServiceExceptionReport>`

// faultImages caches faultImage: the fault server must answer at once
// even on a loaded machine, or a fault meant as a bad image turns into a
// timeout.
var faultImages sync.Map

// faultImage is a good answer: an opaque gradient in the format asked.
func faultImage(w, h int, format string) []byte {
	key := fmt.Sprint(w, h, format)
	if b, ok := faultImages.Load(key); ok {
		return b.([]byte)
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{byte(x), byte(y), byte(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if format == "image/jpeg" {
		jpeg.Encode(&b, img, nil)
	} else {
		png.Encode(&b, img)
	}
	faultImages.Store(key, b.Bytes())
	return b.Bytes()
}

var faultSeq atomic.Int64

// faultEnv is one test's Caddy config in front of a faultWMS: a
// tile_cache of its own (its own seeding engine) with faultTimeout, and
// the REST interface under /geowebcache.
type faultEnv struct {
	t    *testing.T
	f    *faultWMS
	name string

	mu    sync.Mutex
	tasks []string
}

// newFaultEnv loads the config; tileOpts and adminOpts go into the
// tile_cache and tile_cache_admin blocks.
func newFaultEnv(t *testing.T, tileOpts, adminOpts string) *faultEnv {
	t.Helper()
	f := newFaultWMS(t)
	e := &faultEnv{t: t, f: f, name: fmt.Sprintf("fault%d", faultSeq.Add(1))}
	load(t, siteConfig{admin: ptr("cache " + e.name + "\nworkers 2\n" + adminOpts), upstream: f.URL, tiles: `
			name ` + e.name + `
			# the map file's path must not reach users in error messages
			upstream ` + f.URL + `/wms?map=/srv/secret/world.map
			storage ` + storeLines(storageDir(t)) + `
			timeout ` + faultTimeout.String() + `
			` + tileOpts + `
			layer test:f {
				gridsets EPSG:4326
			}
			layer test:j {
				gridsets EPSG:4326
				formats image/jpeg
			}`}.String())
	t.Cleanup(e.cleanup)
	return e
}

func (e *faultEnv) cleanup() {
	e.f.set("")
	a := rest(e.t, "POST", "/rest/seed", "application/x-www-form-urlencoded", "kill_all=all")
	if a.status != 200 {
		e.t.Errorf("cleanup: kill_all=all answered %d %q", a.status, a.body)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.tasks {
		waitTask(e.t, p)
	}
}

func (e *faultEnv) submit(body string) string {
	e.t.Helper()
	p := submit(e.t, "test:f", "json", body)
	e.mu.Lock()
	e.tasks = append(e.tasks, p)
	e.mu.Unlock()
	return p
}

// tile GETs one tile of a layer in EPSG:4326.
func (e *faultEnv) tile(layer string, idx gridset.Index) answer {
	e.t.Helper()
	extra := []string{}
	if layer == "test:j" {
		extra = []string{"FORMAT", "image/jpeg"}
	}
	return get(e.t, siteURL(tileQuery(layer, "EPSG:4326", idx, extra...)))
}

// must502 asserts a failed tile: 502, one line of text/plain, not
// giving the upstream's address or map file away.
func must502(t *testing.T, what string, a answer) {
	t.Helper()
	mustPlain(t, what, a, http.StatusBadGateway)
	body := string(a.body)
	if strings.Contains(body, "127.0.0.1") || strings.Contains(body, "secret") || strings.Contains(body, "map=") {
		t.Errorf("%s: the 502 gives the upstream away: %q", what, body)
	}
	if got := a.header.Get("Geowebcache-Cache-Result"); got == "HIT" {
		t.Errorf("%s: 502 marked HIT", what)
	}
}

// Every fault: the user gets a 502 with a one-line text/plain message,
// nothing is stored (the next good request is a MISS that reaches the
// upstream, the one after a HIT).
func TestFaultsAnswer502AndCacheNothing(t *testing.T) {
	e := newFaultEnv(t, "breaker off", "")
	for i, fault := range allFaults {
		for _, layer := range []string{"test:f", "test:j"} {
			if layer == "test:j" && (fault == "corrupt" || fault == "truncated-iend") {
				continue // PNG-specific damage
			}
			t.Run(fault+"/"+layer, func(t *testing.T) {
				idx := gridset.Index{X: int64(4 * i), Y: 4, Z: 5}
				e.f.set(fault)
				before := e.f.getMaps.Load()
				a := e.tile(layer, idx)
				must502(t, fault, a)
				if e.f.getMaps.Load() != before+1 {
					t.Errorf("the failed miss made %d GetMaps", e.f.getMaps.Load()-before)
				}
				// A stalled upstream is ended by the cache's timeout, not
				// by the fault WMS giving up (faultStall) first.
				if (fault == "timeout" || fault == "trickle") && !strings.Contains(string(a.body), "within the timeout of "+faultTimeout.String()) {
					t.Errorf("%s: the 502 does not say the cache's timeout ended it: %q", fault, a.body)
				}
				t.Logf("%s: %s", fault, bytes.TrimSpace(a.body))
				e.f.set("")
				mustTile(t, e.tile(layer, idx), "MISS")
				if e.f.getMaps.Load() != before+2 {
					t.Errorf("the good request after the fault made %d GetMaps, want 1", e.f.getMaps.Load()-before-1)
				}
				mustTile(t, e.tile(layer, idx), "HIT")
			})
		}
	}
}

// metaBounds is the bounds of metatile (mx, my) of EPSG:4326 level 4
// (4×4 tiles of 11.25°: 45° squares), a little inside: its 16 tiles.
func metaBounds(mx, my int) string {
	x0, y0 := -180+45*float64(mx), -90+45*float64(my)
	return fmt.Sprintf("[%g,%g,%g,%g]", x0+1, y0+1, x0+44, y0+44)
}

// Every fault, seeding: a failed metatile is retried with doubling waits,
// given up after tileFailureRetryCount retries (its tiles counted in
// failedTiles), the task aborted past totalFailuresBeforeAborting, and
// the task's resource tells failures, failedTiles and lastError.
func TestFaultsSeedingRetriesBacksOffAndGivesUp(t *testing.T) {
	e := newFaultEnv(t, "breaker off", "")
	for i, fault := range allFaults {
		t.Run(fault, func(t *testing.T) {
			e.f.set(fault)
			// Two retries, 100ms then 200ms apart: DONE with the metatile failed.
			n0 := e.f.count()
			ti := waitTask(t, e.submit(fmt.Sprintf(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":4,"zoomStop":4,"type":"reseed",`+
				`"bounds":{"coords":{"double":%s}},"tileFailureRetryCount":2,"tileFailureRetryWaitTime":100,"totalFailuresBeforeAborting":100}}`,
				metaBounds(i%8, i/8))))
			if ti.State != "DONE" || ti.Total != 16 || ti.Processed != 0 || ti.FailedTiles != 16 || ti.Failures != 3 || ti.LastError == "" {
				t.Errorf("task %+v", ti)
			}
			t.Logf("lastError: %s", ti.LastError)
			at := e.f.since(n0)
			if len(at) != 3 {
				t.Fatalf("%d GetMaps, want 3 (1 + 2 retries)", len(at))
			}
			if g1, g2 := at[1].Sub(at[0]), at[2].Sub(at[1]); g1 < 100*time.Millisecond || g2 < 200*time.Millisecond {
				t.Errorf("attempts %v then %v apart, want ≥ 100ms then ≥ 200ms (doubling)", g1, g2)
			}
			// At most 1 failure: aborted at the second, whatever retries remain.
			n0 = e.f.count()
			ti = waitTask(t, e.submit(fmt.Sprintf(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":4,"zoomStop":4,"type":"reseed",`+
				`"bounds":{"coords":{"double":%s}},"tileFailureRetryCount":5,"tileFailureRetryWaitTime":10,"totalFailuresBeforeAborting":1}}`,
				metaBounds(i%8, 2+i/8))))
			if ti.State != "ABORTED" || ti.Status != -1 || ti.Failures != 2 || ti.Processed != 0 || ti.LastError == "" {
				t.Errorf("task %+v", ti)
			}
			if n := e.f.count() - n0; n != 2 {
				t.Errorf("aborted task made %d GetMaps, want 2", n)
			}
			// Nothing of either was stored.
			e.f.set("")
			for _, my := range []int{i / 8, 2 + i/8} {
				idx := gridset.Index{X: int64(4 * (i % 8)), Y: int64(4 * my), Z: 4}
				before := e.f.getMaps.Load()
				mustTile(t, e.tile("test:f", idx), "MISS")
				if e.f.getMaps.Load() != before+1 {
					t.Errorf("tile %v after the failed seed: %d GetMaps", idx, e.f.getMaps.Load()-before)
				}
			}
		})
	}
}

// The breaker counts only faults that say the upstream is unavailable: an
// upstream that answers, even wrongly, keeps being asked.
func TestFaultsOnlyUnavailabilityOpensTheBreaker(t *testing.T) {
	e := newFaultEnv(t, "breaker 3 1m", "")
	for i, fault := range contentFaults {
		e.f.set(fault)
		before := e.f.getMaps.Load()
		for j := 0; j < 6; j++ {
			a := e.tile("test:f", gridset.Index{X: int64(4 * j), Y: int64(4 * i), Z: 6})
			must502(t, fault, a)
			if strings.Contains(string(a.body), "unavailable") || a.header.Get("Retry-After") != "" {
				t.Errorf("%s: the breaker opened: %q", fault, a.body)
			}
		}
		if n := e.f.getMaps.Load() - before; n != 6 {
			t.Errorf("%s: 6 misses made %d GetMaps", fault, n)
		}
	}
	// Two unavailabilities and an answer: the count starts again.
	for _, fault := range []string{"503", "reset", "exception", "timeout", "503", "wrong-size", "trickle", "500"} {
		e.f.set(fault)
		before := e.f.getMaps.Load()
		a := e.tile("test:f", gridset.Index{X: 0, Y: 0, Z: 7})
		must502(t, fault, a)
		if e.f.getMaps.Load() != before+1 || strings.Contains(string(a.body), "retrying in") {
			t.Errorf("%s: %q", fault, a.body)
		}
	}
	// Then the third in a row opens it.
	e.f.set("503")
	before := e.f.getMaps.Load()
	must502(t, "third 503", e.tile("test:f", gridset.Index{X: 4, Y: 0, Z: 7}))
	a := e.tile("test:f", gridset.Index{X: 8, Y: 0, Z: 7})
	must502(t, "refused", a)
	if e.f.getMaps.Load() != before+1 || !strings.Contains(string(a.body), "upstream unavailable, retrying in") {
		t.Errorf("after three unavailabilities in a row: %d GetMaps, %q", e.f.getMaps.Load()-before, a.body)
	}
}

// breakerCooldown is TestBreakerSparesADownUpstream's cooldown: its 37
// refused misses must all fall within it (else one is a probe), so it is
// long beside the milliseconds a refusal takes, also on a loaded machine.
const breakerCooldown = 8 * time.Second

// With the upstream down, K misses make only `threshold` upstream
// requests; the rest are refused without one (502 with Retry-After).
// After the cooldown one probe goes; success closes the breaker. The
// opening is counted in caddy_tile_cache_breaker_opens_total.
func TestBreakerSparesADownUpstream(t *testing.T) {
	for _, fault := range []string{"503", "reset", "timeout"} {
		t.Run(fault, func(t *testing.T) {
			e := newFaultEnv(t, "breaker 3 "+breakerCooldown.String(), "")
			opens := metric(t, "caddy_tile_cache_breaker_opens_total", `cache="`+e.name+`"`)
			e.f.set(fault)
			const k = 40
			var opened time.Time
			for i := 0; i < k; i++ {
				a := e.tile("test:f", gridset.Index{X: int64(4 * (i % 16)), Y: int64(4 * (i / 16)), Z: 6})
				must502(t, fmt.Sprintf("miss %d", i), a)
				if i < 3 {
					opened = time.Now()
					continue
				}
				if !strings.Contains(string(a.body), "upstream unavailable, retrying in") || a.header.Get("Retry-After") == "" {
					if time.Since(opened) >= breakerCooldown {
						t.Fatalf("the %d refused misses took longer than the %v cooldown: a probe went", k-3, breakerCooldown)
					}
					t.Fatalf("miss %d while open: %q, Retry-After %q", i, a.body, a.header.Get("Retry-After"))
				}
			}
			// (How fast a refusal is, is for a benchmark; here: none
			// reached the upstream.)
			if n := e.f.getMaps.Load(); n != 3 {
				t.Fatalf("%d misses with the upstream down made %d GetMaps, want 3", k, n)
			}
			if got := metric(t, "caddy_tile_cache_breaker_opens_total", `cache="`+e.name+`"`) - opens; got != 1 {
				t.Errorf("breaker opens %v, want 1", got)
			}
			if got := metric(t, "caddy_tile_cache_breaker_rejected_total", `cache="`+e.name+`"`); got < k-3 {
				t.Errorf("breaker rejections %v, want ≥ %d", got, k-3)
			}
			// The upstream comes back; after the cooldown a probe closes
			// it. Until then each miss is refused without a GetMap.
			e.f.set("")
			waitFor(t, "the probe after the cooldown", func() bool {
				a := e.tile("test:f", gridset.Index{X: 0, Y: 0, Z: 6})
				if a.status == http.StatusOK {
					mustTile(t, a, "MISS")
					return true
				}
				if !strings.Contains(string(a.body), "retrying in") {
					t.Fatalf("a miss while the breaker waits: %d %q", a.status, a.body)
				}
				time.Sleep(200 * time.Millisecond)
				return false
			})
			for i := 1; i < 5; i++ {
				mustTile(t, e.tile("test:f", gridset.Index{X: int64(4 * i), Y: 0, Z: 6}), "MISS")
			}
			if n := e.f.getMaps.Load(); n != 3+5 {
				t.Errorf("after recovery %d GetMaps, want 8", n)
			}
		})
	}
}

// A seed during an outage waits while the breaker is open, without using
// up its retries or its failure budget, and completes when the upstream
// is back; a seed killed during the outage stops.
func TestBreakerSeedWaitsOutAnOutage(t *testing.T) {
	e := newFaultEnv(t, "breaker 2 300ms", "retry_wait 50ms")
	opens := metric(t, "caddy_tile_cache_breaker_opens_total", `cache="`+e.name+`"`)
	e.f.set("503")
	// z0..2: 1 + 1 + 2 metatiles, 2 + 8 + 32 tiles. Without the breaker a
	// second failure would abort it.
	path := e.submit(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2,"type":"seed",` +
		`"tileFailureRetryCount":1,"totalFailuresBeforeAborting":1}}`)
	outage := time.Now()
	// Two failures open it, and a probe follows the cooldown: the seed
	// stays RUNNING through them and at least 2 s more, its failure
	// budget untouched.
	waitFor(t, "two failed GetMaps and a probe", func() bool { return e.f.getMaps.Load() >= 3 })
	probed := time.Now()
	for time.Since(probed) < 2*time.Second {
		ti := task(t, path)
		if ti.Status != 1 || ti.Failures > 1 || ti.FailedTiles != 0 {
			t.Fatalf("during the outage: %+v", ti)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ti := task(t, path)
	if !strings.Contains(ti.LastError, "upstream unavailable") {
		t.Errorf("during the outage lastError is %q", ti.LastError)
	}
	// 2 to open it, then at most one probe per 300ms (fewer on a loaded
	// machine, never more).
	if n, most := e.f.getMaps.Load(), 2+int64(time.Since(outage)/(300*time.Millisecond))+1; n > most {
		t.Errorf("%v of outage with seeding: %d GetMaps, more than one probe per 300ms cooldown (%d)", time.Since(outage).Round(time.Millisecond), n, most)
	}
	killed := e.submit(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":3,"zoomStop":3,"type":"seed"}}`)
	waitFor(t, "the second task running", func() bool { return task(t, killed).Status == 1 })
	a := rest(t, "POST", "/rest/seed/test:f", "application/x-www-form-urlencoded", "kill_all=all")
	if a.status != 200 {
		t.Fatalf("kill: %d", a.status)
	}
	// (kill_all took the first task too: submit it again.)
	waitTask(t, path)
	if ti := waitTask(t, killed); ti.State != "ABORTED" {
		t.Errorf("killed during the outage: %+v", ti)
	}
	path = e.submit(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2,"type":"seed",` +
		`"tileFailureRetryCount":1,"totalFailuresBeforeAborting":1}}`)
	waitFor(t, "the second seed running", func() bool { return task(t, path).Status == 1 })
	before := e.f.getMaps.Load()
	waitFor(t, "the second seed meeting the outage", func() bool { return e.f.getMaps.Load() > before })
	time.Sleep(700 * time.Millisecond)
	if ti := task(t, path); ti.Status != 1 || ti.Failures > 1 {
		t.Fatalf("second seed during the outage: %+v", ti)
	}
	e.f.set("")
	ti = waitTask(t, path)
	if ti.State != "DONE" || ti.Processed != 42 || ti.Total != 42 || ti.FailedTiles != 0 || ti.Failures > 1 {
		t.Errorf("after the outage: %+v", ti)
	}
	for _, idx := range []gridset.Index{{X: 0, Y: 0, Z: 0}, {X: 3, Y: 1, Z: 1}, {X: 7, Y: 3, Z: 2}} {
		mustTile(t, e.tile("test:f", idx), "HIT")
	}
	if got := metric(t, "caddy_tile_cache_breaker_opens_total", `cache="`+e.name+`"`) - opens; got < 1 {
		t.Errorf("breaker opens %v", got)
	}
}
