package tilecache

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// fakeClock is a settable time for the breaker.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func testBreaker(n int, cool time.Duration) (*breaker, *fakeClock, prometheus.Counter, prometheus.Counter) {
	opened := prometheus.NewCounter(prometheus.CounterOpts{Name: "o"})
	rejected := prometheus.NewCounter(prometheus.CounterOpts{Name: "r"})
	b := newBreaker(n, cool, opened, rejected)
	c := &fakeClock{t: time.Unix(1e9, 0)}
	b.now = c.now
	return b, c, opened, rejected
}

var errDown = errors.New("down")

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// try is one fetch through the breaker with the given outcome; it returns
// whether the upstream was asked, and the error the fetch ends with.
func try(b *breaker, down bool, err error) (asked bool, out error) {
	if err := b.check(); err != nil {
		return false, err
	}
	probe, err2 := b.allow()
	if err2 != nil {
		return false, err2
	}
	return true, b.record(probe, down, err)
}

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	b, clock, opened, rejected := testBreaker(3, 10*time.Second)
	for i := 0; i < 2; i++ {
		if asked, err := try(b, true, errDown); !asked || err != errDown {
			t.Fatalf("failure %d: asked %v, err %v", i+1, asked, err)
		}
	}
	// The third opens it: the error says so, and still carries the cause.
	asked, err := try(b, true, errDown)
	var bo *BreakerOpenError
	if !asked || !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, errDown) || !errors.As(err, &bo) || bo.RetrySeconds() != 10 {
		t.Fatalf("third failure: asked %v, err %v", asked, err)
	}
	if got := counterValue(opened); got != 1 {
		t.Fatalf("opens %v", got)
	}
	// Open: refused without asking, at once, with the time left.
	clock.add(3500 * time.Millisecond)
	for i := 0; i < 10; i++ {
		asked, err := try(b, false, nil)
		bo, refused := refusal(err)
		if asked || !refused || !errors.Is(err, ErrBreakerOpen) || bo.RetrySeconds() != 7 {
			t.Fatalf("while open: asked %v, err %v", asked, err)
		}
		if msg := err.Error(); msg != "upstream unavailable, retrying in 7s" {
			t.Fatalf("message %q", msg)
		}
	}
	if got := counterValue(rejected); got != 10 {
		t.Fatalf("rejected %v", got)
	}
}

func TestBreakerAnswersResetTheCount(t *testing.T) {
	b, _, opened, _ := testBreaker(3, time.Second)
	// Failures interleaved with answers (even wrong ones: a 404, a
	// ServiceException) never add up to 3 in a row.
	for i := 0; i < 20; i++ {
		try(b, true, errDown)
		try(b, true, errDown)
		if i%2 == 0 {
			try(b, false, nil)
		} else {
			try(b, false, errors.New("GetMap answered HTTP 404"))
		}
	}
	if asked, _ := try(b, false, nil); !asked || counterValue(opened) != 0 {
		t.Fatalf("breaker opened without 3 failures in a row")
	}
}

func TestBreakerHalfOpenProbe(t *testing.T) {
	b, clock, opened, _ := testBreaker(2, 5*time.Second)
	try(b, true, errDown)
	try(b, true, errDown)
	clock.add(5 * time.Second)
	// One probe goes; while it is out, everyone else is refused.
	if err := b.check(); err != nil {
		t.Fatalf("probe due, check refused: %v", err)
	}
	probe, err := b.allow()
	if !probe || err != nil {
		t.Fatalf("no probe: %v %v", probe, err)
	}
	for i := 0; i < 5; i++ {
		if asked, err := try(b, false, nil); asked || !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("second request during the probe: asked %v, %v", asked, err)
		}
	}
	// The probe fails: open for another cooldown (not a new opening).
	if err := b.record(true, true, errDown); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("failed probe: %v", err)
	}
	if asked, _ := try(b, false, nil); asked {
		t.Fatal("asked right after a failed probe")
	}
	clock.add(4 * time.Second)
	if asked, _ := try(b, false, nil); asked {
		t.Fatal("asked before the second cooldown ended")
	}
	clock.add(time.Second)
	// This probe succeeds: closed, everyone goes.
	if asked, err := try(b, false, nil); !asked || err != nil {
		t.Fatalf("second probe: %v %v", asked, err)
	}
	for i := 0; i < 5; i++ {
		if asked, err := try(b, false, nil); !asked || err != nil {
			t.Fatalf("after recovery: %v %v", asked, err)
		}
	}
	if got := counterValue(opened); got != 1 {
		t.Fatalf("opens %v, want 1 (a failed probe is not a new opening)", got)
	}
	// Closed again, it needs the full threshold anew.
	try(b, true, errDown)
	if asked, _ := try(b, false, nil); !asked {
		t.Fatal("one failure reopened it")
	}
}

// Fetches let through before the breaker opened end after it: their
// outcomes change nothing, but an unavailability still says "open".
func TestBreakerLateOutcomes(t *testing.T) {
	b, clock, _, _ := testBreaker(2, time.Second)
	p1, _ := b.allow()
	p2, _ := b.allow()
	p3, _ := b.allow()
	b.record(p1, true, errDown)
	b.record(p2, true, errDown) // opens
	if err := b.record(p3, false, nil); err != nil {
		t.Fatalf("late success: %v", err)
	}
	if asked, _ := try(b, false, nil); asked {
		t.Fatal("a late success closed the breaker")
	}
	p4 := false
	if err := b.record(p4, true, errDown); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("late failure: %v", err)
	}
	clock.add(time.Second)
	if asked, err := try(b, false, nil); !asked || err != nil {
		t.Fatalf("probe: %v %v", asked, err)
	}
}

func TestBreakerReadyWaits(t *testing.T) {
	b := newBreaker(1, 150*time.Millisecond, nil, nil)
	if err := b.ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	try(b, true, errDown)
	start := time.Now()
	if err := b.ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 100*time.Millisecond || el > 2*time.Second {
		t.Fatalf("ready after %v, want about the 150ms cooldown", el)
	}
	// A probe is out: ready waits for its outcome, not the clock.
	probe, err := b.allow()
	if !probe || err != nil {
		t.Fatalf("probe %v %v", probe, err)
	}
	done := make(chan error, 1)
	go func() { done <- b.ready(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("ready during the probe: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	b.record(true, false, nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ready did not return when the probe succeeded")
	}
	// ctx bounds the wait.
	try(b, true, errDown)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.ready(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ready with an expiring ctx: %v", err)
	}
}

func TestBreakerOff(t *testing.T) {
	b := newBreaker(0, time.Second, nil, nil)
	for i := 0; i < 100; i++ {
		if asked, err := try(b, true, errDown); !asked || err != errDown {
			t.Fatalf("off breaker: %v %v", asked, err)
		}
	}
	if err := b.ready(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A reload's settings apply to the shared breaker: its state is kept,
// unless it is turned off or its upstream changes; then it closes.
func TestBreakerConfigure(t *testing.T) {
	b, _, _, _ := testBreaker(2, time.Hour)
	try(b, true, errDown)
	try(b, true, errDown)
	if asked, _ := try(b, false, nil); asked {
		t.Fatal("not open after 2 failures")
	}
	b.configure(3, time.Hour, false) // a reload with another threshold
	if asked, _ := try(b, false, nil); asked {
		t.Fatal("a reload closed the open breaker")
	}
	b.configure(3, time.Hour, true) // pointed at another upstream
	if asked, err := try(b, false, nil); !asked || err != nil {
		t.Fatalf("another upstream: %v %v", asked, err)
	}
	try(b, true, errDown)
	try(b, true, errDown)
	try(b, true, errDown)
	if asked, _ := try(b, false, nil); asked {
		t.Fatal("not open after 3 failures")
	}
	b.configure(0, 0, false) // turned off
	for i := 0; i < 10; i++ {
		if asked, err := try(b, true, errDown); !asked || err != errDown {
			t.Fatalf("off: %v %v", asked, err)
		}
	}
}

func TestBreakerConcurrent(t *testing.T) {
	b, clock, _, _ := testBreaker(5, time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				try(b, (i+g)%3 != 0, errDown)
				if i%100 == 0 {
					clock.add(300 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	// Whatever happened, a good probe after the cooldown closes it.
	clock.add(2 * time.Second)
	for i := 0; ; i++ {
		if asked, err := try(b, false, nil); asked && err == nil {
			break
		} else if i > 10 {
			t.Fatalf("never recovers: %v", err)
		}
		clock.add(2 * time.Second)
		b.mu.Lock()
		if b.state == breakerHalfOpen { // a probe abandoned by a test goroutine: none here
			b.mu.Unlock()
			t.Fatal("probe left out")
		}
		b.mu.Unlock()
	}
}

// breakerUpstream is a WMS that is down (503) or up (a PNG of the size asked).
type breakerUpstream struct {
	*httptest.Server
	down     atomic.Bool
	delay    atomic.Int64 // ns each GetMap takes
	requests atomic.Int64
}

func newBreakerUpstream(t *testing.T) *breakerUpstream {
	u := &breakerUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		if d := time.Duration(u.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		if u.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		wd, _ := strconv.Atoi(r.URL.Query().Get("WIDTH"))
		ht, _ := strconv.Atoi(r.URL.Query().Get("HEIGHT"))
		var b bytes.Buffer
		png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, wd, ht)))
		w.Header().Set("Content-Type", "image/png")
		w.Write(b.Bytes())
	}))
	t.Cleanup(u.Close)
	return u
}

// breakerHandler serves testConfig's layers from a store in a temp dir,
// fetching from up with 2 upstream slots and a breaker of n failures and
// the given cooldown.
func breakerHandler(t *testing.T, up *breakerUpstream, n int, cool time.Duration) *Handler {
	t.Helper()
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	cfg.UpstreamConcurrency = 2
	cfg.Timeout = caddy.Duration(5 * time.Second)
	cfg.Breaker = &BreakerConfig{Failures: n, Cooldown: caddy.Duration(cool)}
	return handlerOf(t, openTest(t, compileTest(t, cfg), nil), nil)
}

// serveTile asks h for tile idx of test:a in EPSG:4326.
func serveTestTile(t *testing.T, h *Handler, idx gridset.Index) *httptest.ResponseRecorder {
	t.Helper()
	return getTile(t, h, "test:a", "image/png", idx)
}

// With the upstream down, K misses on K different metatiles make only
// threshold upstream requests; the rest get 502 at once. After the
// cooldown one probe goes; when the upstream is back it closes the breaker.
func TestBreakerSparesADownUpstream(t *testing.T) {
	up := newBreakerUpstream(t)
	up.down.Store(true)
	const n, k = 4, 40
	h := breakerHandler(t, up, n, 400*time.Millisecond)
	opensBefore := counterValue(metrics().breakerOpens.WithLabelValues(h.Name))
	var took []time.Duration
	for i := 0; i < k; i++ {
		start := time.Now()
		// z5 of EPSG:4326 is 64×32 tiles: 4×4 metatiles, all different.
		w := serveTestTile(t, h, gridset.Index{X: int64(4 * (i % 16)), Y: int64(4 * (i / 16)), Z: 5})
		body := w.Body.String()
		if w.Code != 502 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") ||
			strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
			t.Fatalf("request %d: %d %q %q", i, w.Code, w.Header().Get("Content-Type"), body)
		}
		if i >= n {
			if !strings.Contains(body, "upstream unavailable, retrying in 1s") || w.Header().Get("Retry-After") != "1" {
				t.Fatalf("request %d while open: %q, Retry-After %q", i, body, w.Header().Get("Retry-After"))
			}
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	if med := took[len(took)/2]; med > 100*time.Millisecond {
		t.Fatalf("requests while open took %v (median)", med)
	}
	if got := up.requests.Load(); got != n {
		t.Fatalf("%d misses with the upstream down made %d upstream requests, want %d", k, got, n)
	}
	if got := counterValue(metrics().breakerOpens.WithLabelValues(h.Name)) - opensBefore; got != 1 {
		t.Fatalf("breaker opens %v, want 1", got)
	}
	// After the cooldown: one probe, still down → open again.
	time.Sleep(450 * time.Millisecond)
	for i := 0; i < 5; i++ {
		if w := serveTestTile(t, h, gridset.Index{X: 0, Y: 0, Z: 6}); w.Code != 502 {
			t.Fatalf("probe: %d", w.Code)
		}
	}
	if got := up.requests.Load(); got != n+1 {
		t.Fatalf("after one cooldown: %d upstream requests, want %d", got, n+1)
	}
	// Back up: the next probe closes it and everyone is served.
	up.down.Store(false)
	if err := h.bound.v.Load().cache.UpstreamReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if w := serveTestTile(t, h, gridset.Index{X: int64(4 * i), Y: 0, Z: 6}); w.Code != 200 || w.Header().Get("Geowebcache-Cache-Result") != "MISS" {
			t.Fatalf("after recovery, request %d: %d %q", i, w.Code, w.Body.String())
		}
	}
	if got := up.requests.Load(); got != n+1+5 {
		t.Fatalf("after recovery: %d upstream requests, want %d", got, n+1+5)
	}
}

// Concurrent misses while the upstream goes down: at most threshold plus
// the slots already taken go upstream before the breaker refuses.
func TestBreakerBoundUnderConcurrency(t *testing.T) {
	up := newBreakerUpstream(t)
	up.down.Store(true)
	const n, k = 5, 200
	h := breakerHandler(t, up, n, time.Minute)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := serveTestTile(t, h, gridset.Index{X: int64(4 * (i % 64)), Y: int64(4 * (i / 64)), Z: 7})
			// 502 from the breaker or the failing upstream, or 503 when the
			// line of waiting misses is full.
			if w.Code != 502 && (w.Code != 503 || w.Header().Get("Retry-After") == "") {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	// Limiter of 2 slots: a request already let through when the
	// threshold is reached may still finish.
	if got := up.requests.Load(); got > n+1 || bad.Load() != 0 {
		t.Fatalf("%d concurrent misses made %d upstream requests (want ≤ %d), %d neither 502 nor 503", k, got, n+1, bad.Load())
	}
}
