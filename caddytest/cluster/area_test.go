package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// A polygon task and a tile list task in a three-node cluster: the nodes
// share their work units (each node reads the polygon or the list from
// the shared storage, written once beside the task), every metatile of
// the area is fetched exactly once across the nodes, the task's total is
// the area's exact count on every node, and the bucket holds exactly the
// area's metatiles.
func TestClusterPolygonAndTileListTasks(t *testing.T) {
	f := newFakeWMS(t)
	f.setDelay(30 * time.Millisecond)
	c := newCluster(t, options{upstream: f.url})
	a, b, cc := c.node("a"), c.node("b"), c.node("c")

	const poly = `{"type":"Polygon","coordinates":[[[-170,-80],[170,-10],[-20,85],[-170,-80]],[[-40,-20],[0,-20],[0,10],[-40,10],[-40,-20]]]}`
	geom, err := area.ParseGeoJSON([]byte(poly), area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cover := area.NewCover(epsg4326, geom, 0)
	var total int64
	metas := map[gridset.Index]bool{}
	stored := map[gridset.Index]bool{}
	const z1 = 5
	for z := 0; z <= z1; z++ {
		r := epsg4326.GridRange(z)
		for y := r.MinY; y <= r.MaxY; y++ {
			for x := r.MinX; x <= r.MaxX; x++ {
				if cover.Contains(gridset.Index{X: x, Y: y, Z: z}) {
					total++
					m := gridset.Index{X: x / 4, Y: y / 4, Z: z}
					if !metas[m] {
						metas[m] = true
						for yy := m.Y * 4; yy < m.Y*4+4 && yy <= r.MaxY; yy++ {
							for xx := m.X * 4; xx < m.X*4+4 && xx <= r.MaxX; xx++ {
								stored[gridset.Index{X: xx, Y: yy, Z: z}] = true
							}
						}
					}
				}
			}
		}
	}
	id := b.submit("test:a", seedReq("seed", 0, z1, `,"geometry":`+poly))
	ti := a.waitTask(id, 120*time.Second)
	t.Logf("polygon seed: %d tiles in %d metatiles; GetMaps per node %v", total, len(metas), f.byNode())
	if ti.State != "DONE" || ti.Total != total || ti.Processed != total || ti.FailedTiles != 0 {
		t.Fatalf("polygon task on a: %+v, want DONE %d/%d", ti, total, total)
	}
	for _, nd := range c.nodes {
		if o := nd.mustTask(id); o.State != "DONE" || o.Total != total || o.Processed != total {
			t.Errorf("the polygon task on node %s: %+v", nd.name, o)
		}
	}
	if per := f.perBBox(); len(per) != len(metas) || f.getMaps.Load() != int64(len(metas)) {
		t.Fatalf("%d GetMaps of %d distinct BBOXes for %d metatiles; more than once: %v", f.getMaps.Load(), len(per), len(metas), f.repeated())
	}
	for _, name := range []string{"a", "b", "c"} {
		if f.byNode()[name] == 0 {
			t.Errorf("node %s fetched nothing for the polygon (per node %v)", name, f.byNode())
		}
	}
	if n := len(c.tileKeys("test:a")); n != len(stored) {
		t.Errorf("%d tile objects in S3, want the polygon's %d metatiles' %d tiles", n, len(metas), len(stored))
	}

	// A tile list submitted on c, reseeded: its metatiles, each once.
	var lines strings.Builder
	listMetas := map[gridset.Index]bool{}
	for x := int64(0); x < 64; x += 3 {
		for y := int64(0); y < 32; y += 5 {
			fmt.Fprintf(&lines, "5/%d/%d\n", x, y) // XYZ rows: from the top
			listMetas[gridset.Index{X: x / 4, Y: (31 - y) / 4, Z: 5}] = true
		}
	}
	before := f.getMaps.Load()
	ans := cc.rest("POST", "/rest/seed/test:a/tiles?type=reseed&gridSetId=EPSG:4326&threadCount=2", "text/plain", lines.String())
	if ans.status != 200 {
		t.Fatalf("tile list POST on c: %v", ans)
	}
	m := taskIDRE.FindStringSubmatch(ans.header.Get("Location"))
	if m == nil {
		t.Fatalf("tile list Location %q", ans.header.Get("Location"))
	}
	var listID int64
	fmt.Sscan(m[1], &listID)
	lt := a.waitTask(listID, 120*time.Second)
	if lt.State != "DONE" || lt.FailedTiles != 0 || lt.Processed != lt.Total {
		t.Fatalf("tile list task on a: %+v", lt)
	}
	if got := f.getMaps.Load() - before; got != int64(len(listMetas)) {
		t.Fatalf("the list's reseed made %d GetMaps for %d metatiles (per node %v)", got, len(listMetas), f.byNode())
	}
}
