package tilecache

import (
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// upstreams holds, per cache name, what must outlive a config reload:
// during a reload the old and the new config serve side by side, and each
// with its own limiter would send up to twice upstream_concurrency
// requests, each with its own fetches in flight would render a metatile
// twice, and a new breaker would forget that the upstream is down. The
// newest config's settings apply to the shared state.
var upstreams = caddy.NewUsagePool()

// upstream is the shared state of one cache name.
type upstream struct {
	limit   *limiter
	breaker *breaker

	mu      sync.Mutex
	url     string // the upstream the breaker's state is about
	flights map[flightKey]*flight
	misses  map[string]int // per client, misses waiting now
}

// upstreamSettings are what a config decides about its shared state.
type upstreamSettings struct {
	url             string
	concurrency     int
	seedSlots       int
	queue           int
	breakerFailures int // 0: off
	breakerCooldown time.Duration
}

// Destruct implements caddy.Destructor: nothing to free but memory.
func (*upstream) Destruct() error { return nil }

// acquireUpstream returns the shared state of the named cache, creating it
// on first use, with the settings applied. Pair with releaseUpstream.
func acquireUpstream(name string, s upstreamSettings, log *zap.Logger) (*upstream, error) {
	v, _, err := upstreams.LoadOrNew(name, func() (caddy.Destructor, error) {
		return &upstream{
			limit:   newLimiter(s.concurrency),
			breaker: newCacheBreaker(name, log),
			url:     s.url,
			flights: make(map[flightKey]*flight),
			misses:  make(map[string]int),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	u := v.(*upstream)
	u.limit.configure(s.concurrency, s.seedSlots, s.queue)
	u.mu.Lock()
	moved := u.url != s.url
	u.url = s.url
	u.mu.Unlock()
	// A breaker's state is about one upstream: pointed elsewhere, it
	// starts closed.
	u.breaker.configure(s.breakerFailures, s.breakerCooldown, moved)
	return u, nil
}

func releaseUpstream(name string) { upstreams.Delete(name) }

// enter counts a client's miss in, unless it already has max waiting
// (max 0: no cap); every true is paired with one exit.
func (u *upstream) enter(client string, max int) bool {
	if max <= 0 {
		return true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.misses[client] >= max {
		return false
	}
	u.misses[client]++
	return true
}

func (u *upstream) exit(client string, max int) {
	if max <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.misses[client]--; u.misses[client] <= 0 {
		delete(u.misses, client)
	}
}
