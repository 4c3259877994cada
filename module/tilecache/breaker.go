package tilecache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
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
// A breaker whose threshold is 0 is off: it refuses nothing. One breaker
// serves a cache name across config reloads (upstream.go).
type breaker struct {
	now      func() time.Time
	opened   prometheus.Counter // closed → open transitions
	rejected prometheus.Counter // fetches refused
	log      *zap.Logger

	mu        sync.Mutex
	threshold int
	cooldown  time.Duration
	state     breakerState
	failures  int       // consecutive, while closed
	until     time.Time // while open: when a probe may go
	// changed is closed (and replaced) at every state change, waking
	// UpstreamReady's waiters.
	changed chan struct{}
}

func newBreaker(threshold int, cooldown time.Duration, opened, rejected prometheus.Counter) *breaker {
	return &breaker{threshold: max(threshold, 0), cooldown: cooldown, now: time.Now,
		opened: opened, rejected: rejected, log: zap.NewNop(), changed: make(chan struct{})}
}

// newCacheBreaker is the breaker of the named cache, counted under its name.
func newCacheBreaker(name string, log *zap.Logger) *breaker {
	m := metrics()
	b := newBreaker(0, 0, m.breakerOpens.WithLabelValues(name), m.breakerRejected.WithLabelValues(name))
	b.log = log
	return b
}

// configure applies a config's settings. A breaker turned off, or reset
// (its upstream changed), closes: its state was about another upstream or
// another rule.
func (b *breaker) configure(threshold int, cooldown time.Duration, reset bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.threshold, b.cooldown = max(threshold, 0), cooldown
	if (reset || b.threshold == 0) && b.state != breakerClosed {
		b.failures = 0
		b.setLocked(breakerClosed)
	}
}

// check refuses at once while the breaker is open and no probe is due, or
// while the probe is on its way; it changes nothing (allow takes the probe).
func (b *breaker) check() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuseLocked()
}

// allow decides whether a fetch may go to the upstream now; probe says it
// is the half-open probe, whose outcome record must be told.
func (b *breaker) allow() (probe bool, err error) {
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
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.threshold == 0:
		return err
	case probe && down:
		b.openLocked()
		b.log.Warn("upstream circuit breaker probe failed: open again", zap.Duration("cooldown", b.cooldown), zap.Error(err))
	case probe:
		b.failures = 0
		b.setLocked(breakerClosed)
		b.log.Info("upstream circuit breaker closed: the probe succeeded")
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
			b.log.Warn("upstream circuit breaker opened", zap.Int("failures", b.threshold),
				zap.Duration("cooldown", b.cooldown), zap.Error(err))
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
