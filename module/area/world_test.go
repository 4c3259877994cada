package area

import (
	"math"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// worldWithHoles is the whole EPSG:4326 extent less two rectangular holes:
// one on level-14 tile boundaries, one off them by fractions of a tile.
func worldWithHoles() Geometry {
	const w = 180.0 / 16384 // one level-14 tile, in degrees (exact)
	x := func(c float64) float64 { return -180 + c*w }
	y := func(r float64) float64 { return -90 + r*w }
	rect := func(x0, y0, x1, y1 float64) Ring {
		return Ring{{x0, y0}, {x0, y1}, {x1, y1}, {x1, y0}, {x0, y0}}
	}
	return Geometry{{
		rect(-180, -90, 180, 90),
		rect(x(1000), y(3000), x(2000), y(3500)),
		rect(x(5000.5), y(7000.25), x(6000.5), y(7100.75)),
	}}
}

func TestCountWorldLevel14(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:4326")
	all := g.GridRange(14).Count()
	if all != 32768*16384 {
		t.Fatalf("level 14 has %d tiles", all)
	}
	for _, c := range []struct {
		buffer float64
		want   int64
	}{
		// Tiles wholly inside a hole are left out; those it only touches
		// along an edge are left out too.
		{0, all - 1000*500 - 999*99},
		// A one-tile buffer keeps every tile within a tile of the land.
		{256, all - 998*498 - 997*97},
	} {
		cv := NewCover(g, worldWithHoles(), c.buffer)
		start := time.Now()
		got := cv.Count(14, g.GridRange(14))
		took := time.Since(start)
		if got != c.want {
			t.Errorf("buffer %g: Count = %d, want %d", c.buffer, got, c.want)
		}
		if took > 5*time.Second {
			t.Errorf("buffer %g: Count took %v", c.buffer, took)
		}
		t.Logf("buffer %g: %d tiles counted in %v", c.buffer, got, took)
	}
}

// The lon/lat world, projected, covers the whole Mercator gridset: the
// clamp lands it just outside the gridset's ±20037508.34.
func TestCountWorldMercator(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	world := Geometry{{{{-180, -90}, {180, -90}, {180, 90}, {-180, 90}, {-180, -90}}}}
	m, err := world.Transform(4326, g.SRS)
	if err != nil {
		t.Fatal(err)
	}
	cv := NewCover(g, m, 0)
	for z := 0; z <= 12; z++ {
		if got, want := cv.Count(z, g.GridRange(z)), g.GridRange(z).Count(); got != want {
			t.Errorf("level %d: Count = %d, want %d", z, got, want)
		}
	}
}

// wavy is a star-shaped polygon of n vertices around (cx, cy): simple, and
// with edges in every direction.
func wavy(n int, cx, cy, r float64) Geometry {
	ring := make(Ring, 0, n+1)
	for i := 0; i < n; i++ {
		a := 2 * math.Pi * float64(i) / float64(n)
		rr := r * (1 + 0.3*math.Sin(37*a) + 0.1*math.Sin(431*a))
		ring = append(ring, Point{cx + rr*math.Cos(a), cy + rr*math.Sin(a)})
	}
	return Geometry{{append(ring, ring[0])}}
}

func BenchmarkCountWorldLevel14(b *testing.B) {
	g, _ := gridset.Builtin("EPSG:4326")
	cv := NewCover(g, worldWithHoles(), 0)
	b.ReportAllocs()
	for b.Loop() {
		cv.Count(14, g.GridRange(14))
	}
}

// Row throughput on a 10,000-vertex polygon about 40° across, at level 12
// of EPSG:4326 (about 2,800 rows cross it; ns/op is per row).
func BenchmarkRow10kVertices(b *testing.B) {
	g, _ := gridset.Builtin("EPSG:4326")
	cv := NewCover(g, wavy(10000, 10, 50, 20), 0)
	const z = 12
	lo, hi, _ := cv.Rows(z)
	var row []Span
	var tiles int64
	y := lo
	b.ReportAllocs()
	for b.Loop() {
		row = cv.Row(z, y, row)
		for _, s := range row {
			tiles += s.MaxX - s.MinX + 1
		}
		if y++; y > hi {
			y = lo
		}
	}
	b.ReportMetric(float64(tiles)/b.Elapsed().Seconds(), "tiles/s")
}

func BenchmarkNewCover100kVertices(b *testing.B) {
	g, _ := gridset.Builtin("EPSG:4326")
	geom := wavy(100000, 10, 50, 20)
	b.ReportAllocs()
	for b.Loop() {
		NewCover(g, geom, 0)
	}
}

// Cover is shared by the goroutines of a seed task: its pooled scratch
// must not leak state between them (run with -race).
func TestCoverConcurrent(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:4326")
	cv := NewCover(g, append(wavy(500, 10, 50, 20), worldWithHoles()[0][1:2]), 1)
	want := cv.Count(8, g.GridRange(8))
	done := make(chan int64)
	for i := 0; i < 4; i++ {
		go func() {
			var n int64
			for y := int64(0); y < g.Levels[8].TilesHigh; y++ {
				for x := int64(0); x < g.Levels[8].TilesWide; x++ {
					if cv.Contains(gridset.Index{X: x, Y: y, Z: 8}) {
						n++
					}
				}
			}
			done <- n
		}()
	}
	for i := 0; i < 4; i++ {
		if n := <-done; n != want {
			t.Errorf("goroutine counted %d with Contains, Count says %d", n, want)
		}
	}
}

// A polygon reaching past the web-mercator limit (85.0511°) selects, in
// the edge row, every tile it reaches there, as if clipped at the grid's
// edge: its edges keep their course beyond it. Clamping the apex to
// 85.0511° first, as this package once did, bends them inward and
// selects fewer tiles.
func TestPolygonBeyondTheMercatorEdge(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	tri, err := (Geometry{{{{0, 60}, {10, 60}, {5, 88}, {0, 60}}}}).Transform(4326, g.SRS)
	if err != nil {
		t.Fatal(err)
	}
	// The same triangle clipped at the grid's top by hand: its edges from
	// (x0, y60) and (x10, y60) to the apex cross the edge at xl and xr.
	top := g.Extent.MaxY
	a, b, apex := tri[0][0][0], tri[0][0][1], tri[0][0][2]
	at := func(p Point) float64 { return p.X + (top-p.Y)/(apex.Y-p.Y)*(apex.X-p.X) }
	clipped := Geometry{{{a, b, {at(b), top}, {at(a), top}, a}}}
	clamped, _ := (Geometry{{{{0, 60}, {10, 60}, {5, 85.0511287798066}, {0, 60}}}}).Transform(4326, g.SRS)
	var got, want, old int64
	for z := 0; z <= 12; z++ {
		n, m := NewCover(g, tri, 0).Count(z, g.GridRange(z)), NewCover(g, clipped, 0).Count(z, g.GridRange(z))
		if n != m {
			t.Errorf("level %d: %d tiles, clipped at the edge %d", z, n, m)
		}
		got, want, old = got+n, want+m, old+NewCover(g, clamped, 0).Count(z, g.GridRange(z))
	}
	if got != 122713 || old >= got {
		t.Errorf("levels 0-12: %d tiles (clipped at the edge %d, apex clamped %d)", got, want, old)
	}
	t.Logf("levels 0-12: %d tiles; with the apex clamped to 85.0511°: %d", got, old)

	// To the pole: its edges run along the meridians of their other ends,
	// so the triangle selects what the box 0..10° from 60° up does.
	toPole, err := (Geometry{{{{0, 60}, {10, 60}, {5, 90}, {0, 60}}}}).Transform(4326, g.SRS)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := (Geometry{{{{0, 60}, {10, 60}, {10, 89}, {0, 89}, {0, 60}}}}).Transform(4326, g.SRS)
	for z := 0; z <= 12; z++ {
		if n, m := NewCover(g, toPole, 0).Count(z, g.GridRange(z)), NewCover(g, box, 0).Count(z, g.GridRange(z)); n != m {
			t.Errorf("level %d: to the pole %d tiles, the box %d", z, n, m)
		}
	}
}

// The buffer reaches no further than the grid either: a polygon wholly
// beyond the edge selects nothing, however close it comes.
func TestBufferStopsAtTheGridEdge(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	top := g.Extent.MaxY
	above := Geometry{{{{0, top + 1}, {1e6, top + 1}, {1e6, top + 1e6}, {0, top + 1e6}, {0, top + 1}}}}
	cv := NewCover(g, above, 256)
	for z := 0; z <= 8; z++ {
		if n := cv.Count(z, g.GridRange(z)); n != 0 {
			t.Errorf("level %d: %d tiles selected through the buffer", z, n)
		}
		if cv.Contains(gridset.Index{X: g.Levels[z].TilesWide / 2, Y: g.Levels[z].TilesHigh - 1, Z: z}) {
			t.Errorf("level %d: the top row's tile under the polygon is selected", z)
		}
	}
}
