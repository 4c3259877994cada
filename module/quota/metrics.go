package quota

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are the quota's metrics, process-wide like the stores.
func Collectors() []prometheus.Collector {
	m := metrics()
	return []prometheus.Collector{m.tiles, m.bytes, m.passes, m.duration, quotaGauge()}
}

type evictionMetrics struct {
	tiles, bytes *prometheus.CounterVec
	passes       *prometheus.CounterVec
	duration     *prometheus.HistogramVec
}

var metrics = sync.OnceValue(func() *evictionMetrics {
	const ns, sub = "caddy", "tile_cache"
	return &evictionMetrics{
		tiles: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "evicted_tiles_total",
			Help: "Tiles evicted to keep a store within its quota."}, []string{"dir", "layer"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "evicted_bytes_total",
			Help: "Bytes of tiles evicted to keep a store within its quota."}, []string{"dir", "layer"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "eviction_passes_total",
			Help: "Eviction passes that evicted something, by the bound crossed first (layer or global)."}, []string{"dir", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "eviction_pass_seconds",
			Help:    "Time an eviction pass took, from reading usage to the disk given back.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"dir"}),
	}
})

func passMetrics(dir string, p Pass) {
	m := metrics()
	for layer, t := range p.Evicted {
		m.tiles.WithLabelValues(dir, layer).Add(float64(t[0]))
		m.bytes.WithLabelValues(dir, layer).Add(float64(t[1]))
	}
	m.passes.WithLabelValues(dir, p.Reason).Inc()
	m.duration.WithLabelValues(dir).Observe(p.Took.Seconds())
}

// quotaGauge reports each running evictor's quotas at scrape time:
// layer "" is the global quota.
var quotaGauge = sync.OnceValue(func() *quotaCollector {
	return &quotaCollector{desc: prometheus.NewDesc("caddy_tile_cache_quota_bytes",
		"A store's quota in bytes: per layer, and for the whole store under layer=\"\".", []string{"dir", "layer"}, nil)}
})

type quotaCollector struct{ desc *prometheus.Desc }

func (q *quotaCollector) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	evictors.Range(func(_, v any) bool {
		e := v.(*Evictor)
		cfg := e.Config()
		dir := e.st.Name()
		if cfg.MaxSize > 0 {
			ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(cfg.MaxSize), dir, "")
		}
		for name, l := range cfg.Layers {
			if l.MaxSize > 0 {
				ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(l.MaxSize), dir, name)
			}
		}
		return true
	})
}
