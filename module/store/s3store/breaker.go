package s3store

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// breaker spares S3 and the visitors when S3 is down: after `failures`
// failed requests in a row, calls are refused at once (ErrUnavailable) for
// `cooldown`, then one probe goes through. Without it every hit would wait
// for a timeout before the tile came from the upstream. It is the store's
// own, apart from the upstream's breaker: either may be down alone.
type breaker struct {
	mu        sync.Mutex
	failures  int
	cooldown  time.Duration
	inRow     int
	openUntil time.Time
	probing   bool
	gauge     prometheus.Gauge
}

func (b *breaker) init(failures int, cooldown time.Duration, gauge prometheus.Gauge) {
	b.failures, b.cooldown, b.gauge = failures, cooldown, gauge
	gauge.Set(1)
}

func (b *breaker) allow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inRow < b.failures {
		return nil
	}
	if now := time.Now(); now.Before(b.openUntil) || b.probing {
		return fmt.Errorf("%w: %d failed requests in a row; next try in %s", ErrUnavailable, b.inRow,
			max(time.Until(b.openUntil), 0).Round(time.Second))
	}
	b.probing = true // this call is the probe
	return nil
}

// failure counts a failed request; it reports whether this one opened the
// breaker.
func (b *breaker) failure() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inRow++
	b.probing = false
	if b.inRow >= b.failures {
		b.openUntil = time.Now().Add(b.cooldown)
		b.gauge.Set(0)
		return b.inRow == b.failures
	}
	return false
}

func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inRow, b.probing = 0, false
	b.gauge.Set(1)
}

// trip opens the breaker at once (S3 did not answer at startup).
func (b *breaker) trip() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inRow = b.failures
	b.openUntil = time.Now().Add(b.cooldown)
	b.gauge.Set(0)
}

// Ready reports whether the store would try S3 now.
func (s *Store) Ready() bool {
	s.br.mu.Lock()
	defer s.br.mu.Unlock()
	return s.br.inRow < s.br.failures || !time.Now().Before(s.br.openUntil)
}

var (
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "tile_cache", Name: "s3_errors_total",
		Help: "Failed S3 requests of the tile store, by operation (get, put, head, list, delete, generation, truncate).",
	}, []string{"op"})
	available = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "caddy", Subsystem: "tile_cache", Name: "s3_available",
		Help: "1 while the S3 tile store is used, 0 while its breaker refuses calls after failures.",
	}, []string{"store"})
)

// Collectors are the store's metrics, for the cache's registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{errorsTotal, available} }
