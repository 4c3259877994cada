package tilecache

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
)

// tileMetrics are process-wide, like reverse_proxy's: created once and
// registered into each config's registry, so counts run on across config
// reloads instead of restarting at zero.
type tileMetrics struct {
	hits, misses, stale, upstreamErrors *prometheus.CounterVec
	passthrough                         *prometheus.CounterVec
	storeErrors                         prometheus.Counter
	storeOpens                          prometheus.CounterFunc
	upstreamLatency                     *prometheus.HistogramVec
	breakerOpens, breakerRejected       *prometheus.CounterVec
	refused                             *prometheus.CounterVec
	renderedElsewhere                   prometheus.Counter
}

var metrics = sync.OnceValue(func() *tileMetrics {
	const ns, sub = "caddy", "tile_cache"
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	return &tileMetrics{
		hits:           counter("hits_total", "Tile requests answered from the cache.", "layer"),
		misses:         counter("misses_total", "Tile requests that had to fetch their metatile from the upstream.", "layer"),
		stale:          counter("stale_served_total", "Expired tiles served because refreshing them failed.", "layer"),
		upstreamErrors: counter("upstream_errors_total", "Metatile fetches that failed (HTTP error, timeout, not an image).", "layer"),
		passthrough:    counter("passthrough_total", "Requests passed to the next handler, by reason.", "reason"),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "store_errors_total", Help: "Failed tile store reads and writes."}),
		storeOpens: prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "store_opens_total", Help: "Tile store directories opened; config reloads share the open store."},
			func() float64 { return float64(store.Opens()) }),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "upstream_duration_seconds", Help: "Time the upstream took to answer a metatile GetMap.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"layer"}),
		breakerOpens:    counter("breaker_opens_total", "Times the upstream circuit breaker opened after consecutive failures.", "cache"),
		breakerRejected: counter("breaker_rejected_total", "Metatile fetches refused without asking the upstream while the circuit breaker was open.", "cache"),
		renderedElsewhere: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "rendered_elsewhere_total", Help: "Metatiles this node did not render because another node of its cluster was rendering them; their tiles came from the shared store."}),
		refused: counter("misses_refused_total", "Misses answered 503 (the upstream is busy: its line of waiting misses is full) or 429 (one client has max_misses_per_client waiting).", "cache", "reason"),
	}
})

func (m *tileMetrics) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{m.hits, m.misses, m.stale, m.upstreamErrors, m.passthrough,
		m.storeErrors, m.storeOpens, m.upstreamLatency, m.breakerOpens, m.breakerRejected, m.refused, m.renderedElsewhere}
	cs = append(cs, store.UsageCollector())
	cs = append(cs, quota.Collectors()...)
	cs = append(cs, s3store.Collectors()...)
	cs = append(cs, cluster.Collectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}
