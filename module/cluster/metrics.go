package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// opSeconds times what coordination costs, by operation: the heartbeat,
// waiting for a cluster lock, claiming work units, reading the task
// registry, and a render marker's check and write. Process-wide, like the
// other tile_cache metrics, so counts run on across config reloads.
var opSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "caddy", Subsystem: "tile_cache", Name: "cluster_op_seconds",
	Help:    "Time spent coordinating with the other nodes through Caddy's storage, by operation.",
	Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
}, []string{"op"})

// listRaces counts listings of the storage that failed because a key went
// while it was listed (another node's write or deletion), and were done
// again: a storage that shows many is a busy shared directory.
var listRaces = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "tile_cache", Name: "cluster_list_races_total",
	Help: "Listings of Caddy's storage that raced another node's write and were done again.",
})

// Collectors are the package's metrics, for the tile_cache app to register.
func Collectors() []prometheus.Collector { return []prometheus.Collector{opSeconds, listRaces} }

func observeRace() { listRaces.Inc() }

// observe records the time since start under op.
func observe(op string, start time.Time) {
	opSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Observe is observe for the packages that coordinate through a Node.
func Observe(op string, start time.Time) { observe(op, start) }
