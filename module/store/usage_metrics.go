package store

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// UsageCollector reports, at each scrape, the tiles and bytes of every
// layer of every open store that counts usage (Options.Usage), read from
// its usage records like rest/usage.json, and of every UsageSource. It is
// process-wide, like the stores it reads.
func UsageCollector() prometheus.Collector { return usageCollector() }

// A UsageSource is usage kept outside a Badger store (a quota's estimate
// of an S3 bucket), reported with the stores' under its Name as dir: one
// collector, since a registry refuses two that describe the same metric.
type UsageSource interface {
	Name() string
	// LayerUsage is [tiles, bytes] per layer; recounting is true while
	// the figures are incomplete.
	LayerUsage() (byLayer map[string][2]int64, recounting bool)
}

var usageSources sync.Map // UsageSource → struct{}

// AddUsageSource makes the collector report s until RemoveUsageSource.
func AddUsageSource(s UsageSource) { usageSources.Store(s, struct{}{}) }

// RemoveUsageSource stops reporting s.
func RemoveUsageSource(s UsageSource) { usageSources.Delete(s) }

var usageCollector = sync.OnceValue(func() *usageMetrics {
	const ns, sub = "caddy", "tile_cache"
	return &usageMetrics{
		tiles: prometheus.NewDesc(prometheus.BuildFQName(ns, sub, "usage_tiles"),
			"Tiles a layer holds in the store, from the store's usage accounting (tile_cache's usage option).",
			[]string{"dir", "layer"}, nil),
		bytes: prometheus.NewDesc(prometheus.BuildFQName(ns, sub, "usage_bytes"),
			"Bytes of tile values (image and header) a layer holds in the store, from the usage accounting.",
			[]string{"dir", "layer"}, nil),
		recounting: prometheus.NewDesc(prometheus.BuildFQName(ns, sub, "usage_recounting"),
			"1 while a store recounts its usage after accounting was turned on: the usage figures are incomplete.",
			[]string{"dir"}, nil),
	}
})

type usageMetrics struct{ tiles, bytes, recounting *prometheus.Desc }

func (m *usageMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.tiles
	ch <- m.bytes
	ch <- m.recounting
}

func (m *usageMetrics) Collect(ch chan<- prometheus.Metric) {
	pool.Range(func(_, v any) bool {
		s, ok := v.(*Badger)
		if !ok || !s.usage.Load() {
			return true
		}
		levels, recounting, err := s.Usage()
		if err != nil {
			return true // closing, or off meanwhile: nothing to report
		}
		type sum struct{ tiles, bytes int64 }
		byLayer := map[string]*sum{}
		for _, lv := range levels {
			l := byLayer[lv.Set.Layer]
			if l == nil {
				l = &sum{}
				byLayer[lv.Set.Layer] = l
			}
			l.tiles += lv.Tiles
			l.bytes += lv.Bytes
		}
		for layer, l := range byLayer {
			ch <- prometheus.MustNewConstMetric(m.tiles, prometheus.GaugeValue, float64(l.tiles), s.dir, layer)
			ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(l.bytes), s.dir, layer)
		}
		r := 0.0
		if recounting {
			r = 1
		}
		ch <- prometheus.MustNewConstMetric(m.recounting, prometheus.GaugeValue, r, s.dir)
		return true
	})
	usageSources.Range(func(k, _ any) bool {
		src := k.(UsageSource)
		byLayer, recounting := src.LayerUsage()
		for layer, v := range byLayer {
			ch <- prometheus.MustNewConstMetric(m.tiles, prometheus.GaugeValue, float64(v[0]), src.Name(), layer)
			ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(v[1]), src.Name(), layer)
		}
		r := 0.0
		if recounting {
			r = 1
		}
		ch <- prometheus.MustNewConstMetric(m.recounting, prometheus.GaugeValue, r, src.Name())
		return true
	})
}
