package seeder

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/tilelist"
)

// checkPlan hands out every unit of p, sequentially and by number, and
// checks that the units partition want (the task's tiles): each tile
// exactly once, each unit inside one metatile and in number order, at()
// equal to next(), count() the number of units and the sizes summing to
// the task's total.
func checkPlan(t *testing.T, p plan, metaW, metaH int64, want map[gridset.Index]bool, total int64) {
	t.Helper()
	seen := map[gridset.Index]bool{}
	var n, sum int64
	for {
		u, ok := p.next()
		if !ok {
			break
		}
		if u.seq != n {
			t.Fatalf("unit %d handed out as number %d", n, u.seq)
		}
		v, ok := p.at(n)
		if !ok || v.z != u.z || v.tiles != u.tiles || fmt.Sprint(v.only) != fmt.Sprint(u.only) {
			t.Fatalf("at(%d) = %+v, next gave %+v", n, v, u)
		}
		n++
		sum += u.size()
		if u.size() == 0 {
			t.Fatalf("unit %+v has no tile", u)
		}
		mx, my := u.tiles.MinX/metaW, u.tiles.MinY/metaH
		u.runs(func(y, x0, x1 int64) bool {
			for x := x0; x <= x1; x++ {
				idx := gridset.Index{X: x, Y: y, Z: u.z}
				if x/metaW != mx || y/metaH != my {
					t.Fatalf("unit %+v: tile %v outside its metatile", u, idx)
				}
				if !u.tiles.Contains(x, y) {
					t.Fatalf("unit %+v: tile %v outside its bounds", u, idx)
				}
				if seen[idx] {
					t.Fatalf("tile %v handed out twice", idx)
				}
				if !want[idx] {
					t.Fatalf("tile %v is not the task's", idx)
				}
				seen[idx] = true
			}
			return true
		})
	}
	if n != p.count() {
		t.Fatalf("%d units handed out, count() says %d", n, p.count())
	}
	if !p.done() {
		t.Fatal("not done after its last unit")
	}
	if int64(len(seen)) != int64(len(want)) || sum != total {
		t.Fatalf("%d tiles handed out (sizes sum to %d), the task has %d (total %d)", len(seen), sum, len(want), total)
	}
}

// A polygon task hands out exactly the metatiles that hold a tile the
// polygon selects, each with exactly those tiles; its total is the
// polygon's count. Random polygons with holes, in both built-in
// gridsets, with random metatile sizes, buffers and bounds.
func TestPolygonPlanPartitionsThePolygon(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 150 {
		name := gridset.BuiltinNames()[trial%2]
		g, _ := gridset.Builtin(name)
		ext := g.Extent
		w, h := ext.MaxX-ext.MinX, ext.MaxY-ext.MinY
		pt := func() area.Point {
			return area.Point{X: ext.MinX + w*rng.Float64(), Y: ext.MinY + h*rng.Float64()}
		}
		// A random triangle or quadrilateral (kept simple), maybe with a
		// small square hole around its first vertex's centroid.
		var shell area.Ring
		for range 3 + rng.IntN(2) {
			shell = append(shell, pt())
		}
		shell = append(shell, shell[0])
		poly := area.Polygon{shell}
		if rng.IntN(2) == 0 {
			c := area.Point{X: (shell[0].X + shell[1].X + shell[2].X) / 3, Y: (shell[0].Y + shell[1].Y + shell[2].Y) / 3}
			d := w / 200
			poly = append(poly, area.Ring{{X: c.X - d, Y: c.Y - d}, {X: c.X + d, Y: c.Y - d}, {X: c.X + d, Y: c.Y + d}, {X: c.X - d, Y: c.Y + d}, {X: c.X - d, Y: c.Y - d}})
		}
		geom := area.Geometry{poly}
		buffer := []float64{0, 0, 3.5, 40}[rng.IntN(4)]
		metaW, metaH := int64(1+rng.IntN(4)), int64(1+rng.IntN(4))
		zs := rng.IntN(3)
		ze := zs + rng.IntN(3)
		spec := Spec{ZoomStart: zs, ZoomStop: ze, Buffer: buffer}
		cov := g.Cover(ext)
		for z := zs; z <= ze; z++ {
			r := cov[z]
			if rng.IntN(3) == 0 { // bounds cutting the level
				r.MaxX = r.MinX + (r.MaxX-r.MinX)/2
			}
			spec.Ranges = append(spec.Ranges, r)
		}
		spec.cover = area.NewCover(g, geom, buffer)
		want := map[gridset.Index]bool{}
		for i, r := range spec.Ranges {
			for y := r.MinY; y <= r.MaxY; y++ {
				for x := r.MinX; x <= r.MaxX; x++ {
					idx := gridset.Index{X: x, Y: y, Z: zs + i}
					if spec.cover.Contains(idx) {
						want[idx] = true
					}
				}
			}
		}
		p := newPolyPlan(&spec, metaW, metaH)
		checkPlan(t, p, metaW, metaH, want, spec.Tiles())
		// Resuming: after seek(k) the units handed out are those from k.
		if c := p.count(); c > 1 {
			k := c / 2
			p.seek(k)
			u, _ := p.next()
			v, _ := p.at(k)
			if u.seq != k || fmt.Sprint(u.only) != fmt.Sprint(v.only) {
				t.Fatalf("after seek(%d) the next unit is number %d", k, u.seq)
			}
		}
	}
}

// A tile list task hands out the list's metatiles with exactly the
// listed tiles; duplicates and tiles of one metatile make one unit.
func TestListPlanPartitionsTheList(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		metaW, metaH := int64(1+rng.IntN(4)), int64(1+rng.IntN(4))
		var lines strings.Builder
		want := map[gridset.Index]bool{}
		metas := map[[3]int64]bool{}
		for range 1 + rng.IntN(300) {
			z := 3 + rng.IntN(4)
			n := int64(1) << z
			x, yTop := rng.Int64N(n), rng.Int64N(n)
			fmt.Fprintf(&lines, "%d/%d/%d\n", z, x, yTop)
			if rng.IntN(4) == 0 {
				fmt.Fprintf(&lines, "%d %d %d\n", z, x, yTop) // a duplicate
			}
			idx := gridset.Index{X: x, Y: n - 1 - yTop, Z: z}
			want[idx] = true
			metas[[3]int64{int64(z), idx.X / metaW, idx.Y / metaH}] = true
		}
		list, err := tilelist.Parse(strings.NewReader(lines.String()), tilelist.Options{
			Gridset: g, MetaW: int(metaW), MetaH: int(metaH), Parents: tilelist.None, Children: tilelist.None})
		if err != nil {
			t.Fatal(err)
		}
		spec := Spec{List: list}
		p := newPlan(&spec, metaW, metaH)
		if p.count() != int64(len(metas)) {
			t.Fatalf("trial %d: %d units for %d distinct metatiles", trial, p.count(), len(metas))
		}
		checkPlan(t, p, metaW, metaH, want, spec.Tiles())
	}
}
