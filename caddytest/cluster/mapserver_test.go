package cluster

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/upstream/upstreamtest"
)

// The project's MapServer (Debian's, started by upstream/start.sh with the
// data it generates), once per test binary, stopped at its end.
var (
	mapserverOnce sync.Once
	mapserverURL  string
	mapserverErr  error
)

func mapServer(t *testing.T) string {
	t.Helper()
	mapserverOnce.Do(func() {
		var stop func()
		mapserverURL, stop, mapserverErr = upstreamtest.MapServer(filepath.Join(tmpRoot, "mapserver"))
		if mapserverErr == nil {
			atExit = append(atExit, stop)
		}
	})
	if mapserverErr != nil {
		t.Fatal(mapserverErr)
	}
	return mapserverURL
}

// A three-node seed of levels 0–4 of test:polygons against MapServer: the
// task ends with exact counts, the nodes' upstream requests add up to one
// per metatile, and every object in S3 is a whole 256×256 PNG.
func TestClusterSeedAgainstMapServer(t *testing.T) {
	up := mapServer(t)
	c := newCluster(t, options{
		upstream: func(string) string { return up },
		tiles:    "timeout 60s",
		layers: `layer test:polygons {
				gridsets EPSG:4326
			}`,
	})
	const z1 = 4
	id := c.node("b").submit("test:polygons", seedReq("seed", 0, z1, ""))
	start := time.Now()
	ti := c.node("c").waitTask(id, 150*time.Second)
	total := tiles(0, z1)
	if ti.State != "DONE" || ti.Processed != total || ti.Total != total || ti.FailedTiles != 0 {
		t.Fatalf("seed against MapServer: %+v, want DONE %d/%d", ti, total, total)
	}
	var sum float64
	per := map[string]float64{}
	for _, nd := range c.nodes {
		v := nd.metric("caddy_tile_cache_upstream_duration_seconds_count", `layer="test:polygons"`)
		per[nd.name] = v
		sum += v
	}
	t.Logf("%d tiles in %v; MapServer GetMaps per node %v", total, time.Since(start).Round(time.Millisecond), per)
	if int(sum) != metatiles(0, z1) {
		t.Errorf("%v GetMaps to MapServer for %d metatiles (per node %v)", sum, metatiles(0, z1), per)
	}
	c.checkObjects("test:polygons", int(total))
	for _, nd := range c.nodes {
		nd.mustTileOf("test:polygons", 5, 2, 2, "HIT")
	}
}
