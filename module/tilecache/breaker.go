package tilecache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Circuit breaker defaults: this many upstream failures in a row open it,
// and it stays open this long before one probe request may go through.
const (
	defaultBreakerFailures = 5
	defaultBreakerCooldown = 30 * time.Second
)

// ErrBreakerOpen is what errors.Is finds in a fetch error while the
// upstream is considered down: the request was refused without asking the
// upstream, or it failed and the breaker is open now. A seeder waits for
// UpstreamReady instead of counting such an error against a task.
var ErrBreakerOpen = errors.New("upstream unavailable")

// BreakerOpenError is a fetch error while the circuit breaker is open.
type BreakerOpenError struct {
	// RetryIn is how long until the breaker lets a probe request through.
	RetryIn time.Duration
	// Err is the upstream failure that found (or made) the breaker open;
	// nil when the request was refused without asking the upstream.
	Err error
}

func (e *BreakerOpenError) Error() string {
	msg := fmt.Sprintf("upstream unavailable, retrying in %ds", e.RetrySeconds())
	if e.Err != nil {
		return e.Err.Error() + " (" + msg + ")"
	}
	return msg
}

func (e *BreakerOpenError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrBreakerOpen) hold.
func (e *BreakerOpenError) Is(target error) bool { return target == ErrBreakerOpen }

// RetrySeconds is RetryIn in whole seconds, rounded up, at least 1: the
// value of a Retry-After header.
func (e *BreakerOpenError) RetrySeconds() int {
	return max(1, int(math.Ceil(e.RetryIn.Seconds())))
}

// refusal returns the breaker error of a request that was refused without
// asking the upstream.
func refusal(err error) (*BreakerOpenError, bool) {
	var bo *BreakerOpenError
	if errors.As(err, &bo) && bo.Err == nil {
		return bo, true
	}
	return nil, false
}

type breakerState int

const (
	breakerClosed   breakerState = iota
	breakerOpen                  // refusing until `until`, then one probe
	breakerHalfOpen              // the probe is on its way
)

// breaker is a circuit breaker in front of the upstream. Closed, it counts
// consecutive failures that say the upstream is unavailable (no answer,
// a broken answer, a timeout, HTTP 5xx or 429); at threshold it opens and
// every fetch is refused at once. After cooldown one fetch goes through
// as a probe (half-open): success closes the breaker, failure opens it for
// another cooldown. An upstream that answers, even wrongly (a
// ServiceException, a 404, a bad image), is up: that resets the count.
//
// A nil *breaker is a disabled one: it refuses nothing.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	opened    prometheus.Counter // closed → open transitions
	rejected  prometheus.Counter // fetches refused

	mu       sync.Mutex
	state    breakerState
	failures int       // consecutive, while closed
	until    time.Time // while open: when a probe may go
	// changed is closed (and replaced) at every state change, waking
	// UpstreamReady's waiters.
	changed chan struct{}
}

func newBreaker(threshold int, cooldown time.Duration, opened, rejected prometheus.Counter) *breaker {
	if threshold <= 0 {
		return nil
	}
	return &breaker{threshold: threshold, cooldown: cooldown, now: time.Now,
		opened: opened, rejected: rejected, changed: make(chan struct{})}
}

// check refuses at once while the breaker is open and no probe is due, or
// while the probe is on its way; it changes nothing (allow takes the probe).
func (b *breaker) check() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuseLocked()
}

// allow decides whether a fetch may go to the upstream now; probe says it
// is the half-open probe, whose outcome record must be told.
func (b *breaker) allow() (probe bool, err error) {
	if b == nil {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refuseLocked(); err != nil {
		return false, err
	}
	if b.state == breakerOpen {
		b.setLocked(breakerHalfOpen)
		return true, nil
	}
	return false, nil
}

// refuseLocked is the refusal of a fetch in the current state, or nil.
func (b *breaker) refuseLocked() error {
	var retryIn time.Duration
	switch b.state {
	case breakerClosed:
		return nil
	case breakerOpen:
		retryIn = b.until.Sub(b.now())
		if retryIn <= 0 {
			return nil
		}
	case breakerHalfOpen:
		retryIn = b.cooldown // if the probe fails, at least this long
	}
	if b.rejected != nil {
		b.rejected.Inc()
	}
	return &BreakerOpenError{RetryIn: max(retryIn, 0)}
}

// record takes the outcome of a fetch that allow let through. down says
// err means the upstream is unavailable; any other outcome, error or not,
// says it answered. It returns err, wrapped in a *BreakerOpenError when
// it is an unavailability and the breaker is open after it.
func (b *breaker) record(probe, down bool, err error) error {
	if b == nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case probe && down:
		b.openLocked()
	case probe:
		b.failures = 0
		b.setLocked(breakerClosed)
	case b.state != breakerClosed:
		// Let through before the breaker opened: it changes nothing now.
	case down:
		b.failures++
		if b.failures >= b.threshold {
			b.failures = 0
			b.openLocked()
			if b.opened != nil {
				b.opened.Inc()
			}
		}
	default:
		b.failures = 0
	}
	if down && b.state != breakerClosed {
		return &BreakerOpenError{RetryIn: max(b.until.Sub(b.now()), 0), Err: err}
	}
	return err
}

func (b *breaker) openLocked() {
	b.until = b.now().Add(b.cooldown)
	b.setLocked(breakerOpen)
}

func (b *breaker) setLocked(s breakerState) {
	b.state = s
	close(b.changed)
	b.changed = make(chan struct{})
}

// ready waits until a fetch would be let through: the breaker is closed,
// or open with its probe due. It returns ctx's error if ctx ends first.
func (b *breaker) ready(ctx context.Context) error {
	if b == nil {
		return nil
	}
	for {
		b.mu.Lock()
		var d time.Duration // 0: wait for the probe's outcome
		switch b.state {
		case breakerClosed:
			b.mu.Unlock()
			return nil
		case breakerOpen:
			if d = b.until.Sub(b.now()); d <= 0 {
				b.mu.Unlock()
				return nil
			}
		}
		changed := b.changed
		b.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time // nil while half-open: only the probe's outcome ends the wait
		if d > 0 {
			timer = time.NewTimer(d)
			fire = timer.C
		}
		select {
		case <-changed:
		case <-fire:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// UpstreamReady waits while the upstream is considered down (the circuit
// breaker is open and no probe is due, or the probe is on its way), and
// returns nil as soon as a fetch would be let through, or ctx's error. A
// seeder that got an ErrBreakerOpen waits here before trying again.
func (h *Handler) UpstreamReady(ctx context.Context) error {
	if h.fetcher == nil {
		return nil
	}
	return h.fetcher.breaker.ready(ctx)
}

// breakerMetrics are process-wide like the others, by tile_cache name.
type breakerMetrics struct {
	opens, rejected *prometheus.CounterVec
}

var bMetrics = sync.OnceValue(func() *breakerMetrics {
	const ns, sub = "caddy", "tile_cache"
	return &breakerMetrics{
		opens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "breaker_opens_total", Help: "Times the upstream circuit breaker opened after consecutive failures."}, []string{"cache"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "breaker_rejected_total", Help: "Metatile fetches refused without asking the upstream while the circuit breaker was open."}, []string{"cache"}),
	}
})

func (m *breakerMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.opens, m.rejected} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// buildBreaker builds the handler's breaker from its configuration
// and registers the breaker metrics.
func (h *Handler) buildBreaker(reg prometheus.Registerer) (*breaker, error) {
	m := bMetrics()
	if err := m.register(reg); err != nil {
		return nil, err
	}
	n := defaultBreakerFailures
	if h.BreakerFailures != nil {
		n = *h.BreakerFailures
	}
	cool := time.Duration(h.BreakerCooldown)
	if cool == 0 {
		cool = defaultBreakerCooldown
	}
	return newBreaker(n, cool, m.opens.WithLabelValues(h.Name), m.rejected.WithLabelValues(h.Name)), nil
}
