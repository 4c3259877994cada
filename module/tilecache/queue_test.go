package tilecache

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// queueHandler serves testConfig's layers from up with one upstream slot,
// the given timeout and a breaker of 2 failures.
func queueHandler(t *testing.T, up *breakerUpstream, timeout time.Duration, queue int) *Handler {
	t.Helper()
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	cfg.UpstreamConcurrency = 1
	cfg.UpstreamQueue = queue
	cfg.Timeout = caddy.Duration(timeout)
	cfg.Breaker = &BreakerConfig{Failures: 2, Cooldown: caddy.Duration(time.Minute)}
	return handlerOf(t, openTest(t, compileTest(t, cfg), nil), nil)
}

// serveCtx is serveTestTile with the visitor's own context.
func serveCtx(ctx context.Context, h *Handler, idx gridset.Index) *httptest.ResponseRecorder {
	b, _ := gridset.Builtin("EPSG:4326")
	q := q111("test:a", "EPSG:4326", bboxStr(b.TileBBox(idx), false))
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	h.ServeHTTP(w, httptest.NewRequest("GET", "/wms?"+q, nil).WithContext(ctx), next)
	return w
}

// Misses on different metatiles whose visitors hang up while they wait in
// line are dropped before they reach the upstream.
func TestAbandonedMissesNeverReachTheUpstream(t *testing.T) {
	up := newBreakerUpstream(t)
	up.delay.Store(int64(400 * time.Millisecond))
	h := queueHandler(t, up, 5*time.Second, 100)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // holds the one slot for 400ms
		defer wg.Done()
		if w := serveCtx(context.Background(), h, gridset.Index{X: 0, Y: 0, Z: 5}); w.Code != 200 {
			t.Errorf("first miss: %d", w.Code)
		}
	}()
	waitFor(t, func() bool { return up.requests.Load() == 1 })
	for i := int64(1); i <= 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			serveCtx(ctx, h, gridset.Index{X: 4 * i, Y: 0, Z: 5})
		}()
	}
	wg.Wait()
	time.Sleep(600 * time.Millisecond) // long enough for queued fetches to have gone upstream
	if n := up.requests.Load(); n != 1 {
		t.Fatalf("%d upstream requests; the 8 misses whose visitors left must not reach the upstream", n)
	}
}

// Time in line is not the upstream's: misses that wait longer than the
// timeout for the one slot, behind an upstream that answers each in time,
// all succeed, and the breaker stays closed.
func TestQueueTimeIsNoUpstreamFailure(t *testing.T) {
	up := newBreakerUpstream(t)
	up.delay.Store(int64(200 * time.Millisecond))
	h := queueHandler(t, up, 1500*time.Millisecond, 100)
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = serveCtx(context.Background(), h, gridset.Index{X: 4 * int64(i%16), Y: 4 + 4*int64(i/16), Z: 5}).Code
		}()
	}
	wg.Wait() // 10 × 200ms in line for one slot: 2s, past the 1.5s timeout
	for i, c := range codes {
		if c != 200 {
			t.Errorf("miss %d: %d", i, c)
		}
	}
	if w := serveCtx(context.Background(), h, gridset.Index{X: 40, Y: 4, Z: 5}); w.Code != 200 {
		t.Fatalf("after the queue: %d %q (the breaker opened?)", w.Code, w.Body)
	}
}

// With the line full, a miss gets 503 with Retry-After at once; the
// upstream is not asked and the breaker does not count it.
func TestFullLineAnswers503(t *testing.T) {
	up := newBreakerUpstream(t)
	up.delay.Store(int64(300 * time.Millisecond))
	h := queueHandler(t, up, 5*time.Second, 2)
	var wg sync.WaitGroup
	for i := int64(0); i < 3; i++ { // one on the wire, two in line
		wg.Add(1)
		go func() { defer wg.Done(); serveCtx(context.Background(), h, gridset.Index{X: 4 * i, Y: 8, Z: 5}) }()
	}
	waitFor(t, func() bool {
		l := h.bound.v.Load().cache.fetch.shared.limit
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiting[PriorityUser]) == 2
	})
	start := time.Now()
	w := serveCtx(context.Background(), h, gridset.Index{X: 40, Y: 8, Z: 5})
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || time.Since(start) > time.Second {
		t.Fatalf("full line: %d %q Retry-After %q after %v", w.Code, w.Body, w.Header().Get("Retry-After"), time.Since(start))
	}
	wg.Wait()
	if n := up.requests.Load(); n != 3 {
		t.Fatalf("%d upstream requests, want the 3 that got in line", n)
	}
}
