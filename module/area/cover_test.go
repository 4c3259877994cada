package area

import (
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"slices"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// ---- the independent brute force ----
//
// A tile is selected when area(grown tile ∩ geometry) > 0. The area is
// computed exactly: each ring is clipped to the grown rectangle
// (Sutherland–Hodgman) in rational arithmetic from the exact float64 values,
// and a polygon's area is |shell| minus its |holes| (valid polygons only).

type rpt struct{ x, y *big.Rat }

func rat(v float64) *big.Rat { return new(big.Rat).SetFloat64(v) }

// clipHalf keeps the part of poly with coordinate axis (0 x, 1 y) >= bound
// (greater) or <= bound (!greater).
func clipHalf(poly []rpt, axis int, bound *big.Rat, greater bool) []rpt {
	coord := func(p rpt) *big.Rat {
		if axis == 0 {
			return p.x
		}
		return p.y
	}
	in := func(p rpt) bool {
		c := coord(p).Cmp(bound)
		return c == 0 || (c > 0) == greater
	}
	cut := func(p, q rpt) rpt {
		t := new(big.Rat).Sub(bound, coord(p))
		t.Quo(t, new(big.Rat).Sub(coord(q), coord(p)))
		x := new(big.Rat).Mul(t, new(big.Rat).Sub(q.x, p.x))
		y := new(big.Rat).Mul(t, new(big.Rat).Sub(q.y, p.y))
		return rpt{x.Add(x, p.x), y.Add(y, p.y)}
	}
	var out []rpt
	for i := range poly {
		p, q := poly[i], poly[(i+1)%len(poly)]
		switch pin, qin := in(p), in(q); {
		case pin && qin:
			out = append(out, q)
		case pin:
			out = append(out, cut(p, q))
		case qin:
			out = append(out, cut(p, q), q)
		}
	}
	return out
}

func clippedArea(r Ring, rect gridset.BBox) *big.Rat {
	b := Geometry{{r}}.Bounds()
	if b.MaxX <= rect.MinX || b.MinX >= rect.MaxX || b.MaxY <= rect.MinY || b.MinY >= rect.MaxY {
		return new(big.Rat)
	}
	poly := make([]rpt, 0, len(r))
	for _, p := range r[:len(r)-1] {
		poly = append(poly, rpt{rat(p.X), rat(p.Y)})
	}
	poly = clipHalf(poly, 0, rat(rect.MinX), true)
	poly = clipHalf(poly, 0, rat(rect.MaxX), false)
	poly = clipHalf(poly, 1, rat(rect.MinY), true)
	poly = clipHalf(poly, 1, rat(rect.MaxY), false)
	a := new(big.Rat)
	for i := range poly {
		p, q := poly[i], poly[(i+1)%len(poly)]
		a.Add(a, new(big.Rat).Sub(new(big.Rat).Mul(p.x, q.y), new(big.Rat).Mul(q.x, p.y)))
	}
	return a.Abs(a)
}

func bruteSelected(g *gridset.Gridset, geom Geometry, bufferPx float64, idx gridset.Index) bool {
	buf := bufferPx * g.Levels[idx.Z].Resolution
	t := g.TileBBox(idx)
	// Cut at the edges of the level's tiles: the geometry beyond them counts for nothing.
	l := g.Levels[idx.Z]
	first, last := g.TileBBox(gridset.Index{Z: idx.Z}), g.TileBBox(gridset.Index{X: l.TilesWide - 1, Y: l.TilesHigh - 1, Z: idx.Z})
	rect := gridset.BBox{MinX: max(t.MinX-buf, first.MinX), MinY: max(t.MinY-buf, first.MinY),
		MaxX: min(t.MaxX+buf, last.MaxX), MaxY: min(t.MaxY+buf, last.MaxY)}
	for _, p := range geom {
		a := clippedArea(p[0], rect)
		for _, h := range p[1:] {
			a.Sub(a, clippedArea(h, rect))
		}
		if a.Sign() > 0 {
			return true
		}
	}
	return false
}

// ---- random valid geometries on a lattice of 1/16 tile ----

type lpt struct{ u, v int64 }

func orient(a, b, c lpt) int64 {
	d := (b.u-a.u)*(c.v-a.v) - (b.v-a.v)*(c.u-a.u)
	switch {
	case d > 0:
		return 1
	case d < 0:
		return -1
	}
	return 0
}

func onSeg(a, b, p lpt) bool {
	return orient(a, b, p) == 0 && min(a.u, b.u) <= p.u && p.u <= max(a.u, b.u) && min(a.v, b.v) <= p.v && p.v <= max(a.v, b.v)
}

func segsMeet(a, b, c, d lpt) bool {
	o1, o2, o3, o4 := orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
	if o1*o2 < 0 && o3*o4 < 0 {
		return true
	}
	return onSeg(a, b, c) || onSeg(a, b, d) || onSeg(c, d, a) || onSeg(c, d, b)
}

// simple reports whether the open ring pts (no repeated closing point) is a
// simple polygon of non-zero area: non-adjacent edges do not meet, and
// adjacent edges do not fold back on each other.
func simple(pts []lpt) bool {
	n := len(pts)
	if n < 3 {
		return false
	}
	var area int64
	for i := range pts {
		a, b := pts[i], pts[(i+1)%n]
		area += a.u*b.v - b.u*a.v
		if a == b {
			return false
		}
	}
	if area == 0 {
		return false
	}
	for i := 0; i < n; i++ {
		a, b := pts[i], pts[(i+1)%n]
		c := pts[(i+2)%n]
		if orient(a, b, c) == 0 && (c.u-b.u)*(a.u-b.u)+(c.v-b.v)*(a.v-b.v) > 0 {
			return false
		}
		for j := i + 2; j < n; j++ {
			if i == 0 && j == n-1 {
				continue
			}
			if segsMeet(a, b, pts[j], pts[(j+1)%n]) {
				return false
			}
		}
	}
	return true
}

type gen struct {
	r *rand.Rand
}

// coord picks a lattice coordinate in [lo, hi], often on a tile boundary
// (a multiple of 16) or a half tile, so that edges and corners coincide.
func (gn gen) coord(lo, hi int64) int64 {
	v := lo + gn.r.Int63n(hi-lo+1)
	switch gn.r.Intn(3) {
	case 0:
		if s := (v + 8) / 16 * 16; s >= lo && s <= hi {
			return s
		}
	case 1:
		if s := (v + 4) / 8 * 8; s >= lo && s <= hi {
			return s
		}
	}
	return v
}

// star is a random simple polygon with vertices in the box, or nil.
func (gn gen) star(u0, v0, u1, v1 int64) []lpt {
	for try := 0; try < 20; try++ {
		n := 3 + gn.r.Intn(6)
		pts := make([]lpt, n)
		var cu, cv float64
		for i := range pts {
			pts[i] = lpt{gn.coord(u0, u1), gn.coord(v0, v1)}
			cu += float64(pts[i].u)
			cv += float64(pts[i].v)
		}
		cu, cv = cu/float64(n), cv/float64(n)
		slices.SortFunc(pts, func(a, b lpt) int {
			return cmpFloat(math.Atan2(float64(a.v)-cv, float64(a.u)-cu), math.Atan2(float64(b.v)-cv, float64(b.u)-cu))
		})
		if simple(pts) {
			return pts
		}
	}
	return nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// polygon is a random lattice polygon: a rectangle (maybe with one or two
// holes), a star polygon, or a thin sliver.
func (gn gen) polygon(W, H int64) [][]lpt {
	U, V := 16*W, 16*H
	m := int64(24) // let shapes stick out of the grid a little
	for {
		switch gn.r.Intn(4) {
		case 0, 1:
			u0, u1 := gn.coord(-m, U+m), gn.coord(-m, U+m)
			v0, v1 := gn.coord(-m, V+m), gn.coord(-m, V+m)
			if u1 < u0 {
				u0, u1 = u1, u0
			}
			if v1 < v0 {
				v0, v1 = v1, v0
			}
			if u1-u0 < 1 || v1-v0 < 1 {
				continue
			}
			out := [][]lpt{{{u0, v0}, {u1, v0}, {u1, v1}, {u0, v1}}}
			if gn.r.Intn(2) == 0 {
				shuffleRing(gn.r, out[0])
			}
			switch {
			case gn.r.Intn(2) == 0 && u1-u0 >= 3 && v1-v0 >= 3:
				if h := gn.star(u0+1, v0+1, u1-1, v1-1); h != nil {
					out = append(out, h)
				}
			case u1-u0 >= 6 && v1-v0 >= 3:
				um := (u0 + u1) / 2
				for _, box := range [][2]int64{{u0 + 1, um - 1}, {um + 1, u1 - 1}} {
					if box[1] > box[0] {
						if h := gn.star(box[0], v0+1, box[1], v1-1); h != nil {
							out = append(out, h)
						}
					}
				}
			}
			return out
		case 2:
			if s := gn.star(-m, -m, U+m, V+m); s != nil {
				return [][]lpt{s}
			}
		case 3: // a sliver: a long triangle one lattice step thick
			a := lpt{gn.coord(-m, U+m), gn.coord(-m, V+m)}
			b := lpt{gn.coord(-m, U+m), gn.coord(-m, V+m)}
			c := lpt{b.u + int64(gn.r.Intn(3)-1), b.v + int64(gn.r.Intn(3)-1)}
			if s := []lpt{a, b, c}; simple(s) {
				return [][]lpt{s}
			}
		}
	}
}

func shuffleRing(r *rand.Rand, pts []lpt) {
	k := r.Intn(len(pts))
	tmp := append(append([]lpt{}, pts[k:]...), pts[:k]...)
	copy(pts, tmp)
	if r.Intn(2) == 0 {
		slices.Reverse(pts)
	}
}

// toGeometry maps lattice points to CRS coordinates so that multiples of 16
// land exactly on TileBBox's tile boundaries.
func toGeometry(g *gridset.Gridset, z int, polys [][][]lpt) Geometry {
	fx := func(u int64) float64 {
		i := floorDiv(u, 16)
		b := g.TileBBox(gridset.Index{X: i, Z: z})
		if u%16 == 0 {
			return b.MinX
		}
		return b.MinX + float64(u-16*i)/16*(b.MaxX-b.MinX)
	}
	fy := func(v int64) float64 {
		j := floorDiv(v, 16)
		b := g.TileBBox(gridset.Index{Y: j, Z: z})
		if v%16 == 0 {
			return b.MinY
		}
		return b.MinY + float64(v-16*j)/16*(b.MaxY-b.MinY)
	}
	var geom Geometry
	for _, p := range polys {
		var poly Polygon
		for _, r := range p {
			ring := make(Ring, 0, len(r)+1)
			for _, q := range r {
				ring = append(ring, Point{fx(q.u), fy(q.v)})
			}
			poly = append(poly, append(ring, ring[0]))
		}
		geom = append(geom, poly)
	}
	return geom
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func testGridsets(t testing.TB) []*gridset.Gridset {
	wgs, _ := gridset.Builtin("EPSG:4326")
	merc, _ := gridset.Builtin("EPSG:900913")
	// A top-left aligned grid whose extent is not a whole number of tiles,
	// so that row 0's bottom is not Extent.MinY.
	tl, err := gridset.New(gridset.Config{
		Name: "swiss", SRS: "EPSG:2056", Extent: [4]float64{2420000, 1030000, 2900000, 1350000},
		Resolutions: []float64{1000, 500, 250, 125}, Origin: "top_left",
	})
	if err != nil {
		t.Fatal(err)
	}
	return []*gridset.Gridset{wgs, merc, tl}
}

func TestCoverAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(20261125))
	gn := gen{r}
	buffers := []float64{0, 0, 0, 0.5, 1, 2.25, 3, 16, 256}
	cases := 3000
	if testing.Short() {
		cases = 300
	}
	var selected, total int
	for n := 0; n < cases; n++ {
		gs := testGridsets(t)
		g := gs[r.Intn(len(gs))]
		z := r.Intn(4)
		W, H := g.Levels[z].TilesWide, g.Levels[z].TilesHigh
		var polys [][][]lpt
		for k := 1 + r.Intn(3); k > 0; k-- {
			polys = append(polys, gn.polygon(W, H))
		}
		geom := toGeometry(g, z, polys)
		buf := buffers[r.Intn(len(buffers))]
		c := NewCover(g, geom, buf)
		name := fmt.Sprintf("case %d: %s z%d buffer %g polygons %v", n, g.Name, z, buf, polys)

		want := make(map[gridset.Index]bool)
		var wantCount int64
		minRow, maxRow := int64(math.MaxInt64), int64(-1)
		var row []Span
		for y := int64(0); y < H; y++ {
			row = c.Row(z, y, row)
			for i, s := range row {
				if s.MinX > s.MaxX || s.MinX < 0 || s.MaxX >= W || (i > 0 && s.MinX <= row[i-1].MaxX+1) {
					t.Fatalf("%s: row %d spans not sorted, merged and clipped: %v", name, y, row)
				}
			}
			for x := int64(0); x < W; x++ {
				idx := gridset.Index{X: x, Y: y, Z: z}
				b := bruteSelected(g, geom, buf, idx)
				total++
				if b {
					selected++
					want[idx] = true
					wantCount++
					minRow, maxRow = min(minRow, y), max(maxRow, y)
				}
				if got := c.Contains(idx); got != b {
					t.Fatalf("%s: Contains(%d,%d) = %v, brute force %v", name, x, y, got, b)
				}
				inRow := false
				for _, s := range row {
					inRow = inRow || (s.MinX <= x && x <= s.MaxX)
				}
				if inRow != b {
					t.Fatalf("%s: Row(%d) %v has x=%d: %v, brute force %v", name, y, row, x, inRow, b)
				}
			}
		}
		if got := c.Count(z, g.GridRange(z)); got != wantCount {
			t.Fatalf("%s: Count = %d, brute force %d", name, got, wantCount)
		}
		sub := gridset.Range{MinX: r.Int63n(W), MinY: r.Int63n(H)}
		sub.MaxX, sub.MaxY = sub.MinX+r.Int63n(W), sub.MinY+r.Int63n(H)
		var wantSub int64
		for idx := range want {
			if sub.Contains(idx.X, idx.Y) {
				wantSub++
			}
		}
		if got := c.Count(z, sub); got != wantSub {
			t.Fatalf("%s: Count(%+v) = %d, brute force %d", name, sub, got, wantSub)
		}
		if lo, hi, ok := c.Rows(z); wantCount > 0 && (!ok || lo > minRow || hi < maxRow) {
			t.Fatalf("%s: Rows = %d..%d %v, selected rows %d..%d", name, lo, hi, ok, minRow, maxRow)
		}
	}
	t.Logf("%d cases, %d of %d tiles selected", cases, selected, total)
}
