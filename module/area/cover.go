package area

import (
	"cmp"
	"math"
	"math/big"
	"slices"
	"sync"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// Span is an inclusive run of columns MinX..MaxX of one row.
type Span struct{ MinX, MaxX int64 }

// Cover is the tile selection of a geometry on a gridset (see the package
// doc for the definition). It is immutable and safe for concurrent use.
//
// How it decides, per row: an open rectangle R meets the interior of a
// valid polygon iff (a) an edge of the polygon passes through R's interior,
// or (b) no edge does and R's centre is inside the polygon (R's interior
// is then wholly inside or wholly outside). For the union of polygons, (a)
// is taken over all edges, and (b) asks whether the centre is inside any
// polygon. (a) is decided exactly; (b) needs no exactness, because a
// boundary crossing near the centre of R would be an edge through R, which
// (a) already selected.
type Cover struct {
	g        *gridset.Gridset
	bufferPx float64
	bounds   gridset.BBox
	npoly    int
	// edges are sorted by their lower y; maxY is an implicit search tree
	// over them (the node of the range [lo,hi) is its middle index, holding
	// the highest y of the range), so a row visits only the edges that reach
	// it, in O(log n + k), whatever order rows are asked in.
	edges   []edge
	maxY    []float64
	scratch sync.Pool
}

// edge is a polygon edge with y0 <= y1, tagged with its polygon so that
// rings combine even-odd within a polygon and by union across polygons.
type edge struct {
	x0, y0, x1, y1 float64
	poly           int
}

type crossing struct {
	x    float64
	poly int
}

type scratch struct {
	active []int
	cross  []crossing
	parity []bool
}

// NewCover prepares the selection of geom (already in g's CRS) with a buffer
// of bufferPx pixels around it; a negative or NaN buffer counts as 0. The
// geometry is copied into an edge table, so it may be changed afterwards.
func NewCover(g *gridset.Gridset, geom Geometry, bufferPx float64) *Cover {
	if !(bufferPx > 0) {
		bufferPx = 0
	}
	c := &Cover{g: g, bufferPx: bufferPx, bounds: geom.Bounds(), npoly: len(geom)}
	for pi, p := range geom {
		for _, r := range p {
			// Rings are closed, but an unclosed one is closed here rather
			// than leaving a gap; zero-length edges are dropped.
			for k := range r {
				a, b := r[k], r[(k+1)%len(r)]
				if a == b {
					continue
				}
				if a.Y > b.Y {
					a, b = b, a
				}
				c.edges = append(c.edges, edge{a.X, a.Y, b.X, b.Y, pi})
			}
		}
	}
	slices.SortFunc(c.edges, func(a, b edge) int { return cmp.Compare(a.y0, b.y0) })
	c.maxY = make([]float64, len(c.edges))
	c.build(0, len(c.edges))
	c.scratch.New = func() any { return &scratch{parity: make([]bool, c.npoly)} }
	return c
}

func (c *Cover) build(lo, hi int) float64 {
	if lo >= hi {
		return math.Inf(-1)
	}
	m := (lo + hi) / 2
	v := max(c.edges[m].y1, c.build(lo, m), c.build(m+1, hi))
	c.maxY[m] = v
	return v
}

// query appends the edges that reach the open strip b1 < y < b2: those
// with y0 < b2 and y1 > b1 (a horizontal edge must lie strictly inside).
func (c *Cover) query(lo, hi int, b1, b2 float64, out []int) []int {
	for lo < hi {
		m := (lo + hi) / 2
		if c.maxY[m] <= b1 {
			return out
		}
		out = c.query(lo, m, b1, b2, out)
		e := &c.edges[m]
		if e.y0 >= b2 {
			return out // so do all edges after m
		}
		if e.y1 > b1 {
			out = append(out, m)
		}
		lo = m + 1
	}
	return out
}

// level holds what a row needs of one gridset level. ox and tw only seed
// searches; every decision uses the tile boundaries TileBBox computes.
type level struct {
	g      *gridset.Gridset
	z      int
	w, h   int64
	ox, tw float64
	oy, th float64
	buf    float64
	grid   gridset.BBox // the edges of the level's tiles
}

func (c *Cover) level(z int) (level, bool) {
	if z < 0 || z >= len(c.g.Levels) {
		return level{}, false
	}
	l := c.g.Levels[z]
	b := c.g.TileBBox(gridset.Index{Z: z})
	last := c.g.TileBBox(gridset.Index{X: l.TilesWide - 1, Y: l.TilesHigh - 1, Z: z})
	return level{g: c.g, z: z, w: l.TilesWide, h: l.TilesHigh,
		ox: b.MinX, tw: b.MaxX - b.MinX, oy: b.MinY, th: b.MaxY - b.MinY,
		buf:  c.bufferPx * l.Resolution,
		grid: gridset.BBox{MinX: b.MinX, MinY: b.MinY, MaxX: last.MaxX, MaxY: last.MaxY}}, true
}

// a1 and a2 are the left and right sides of column i's grown rectangle.
// Like every side of it they stop at the grid's edge: what lies beyond
// is no map (the world beyond 85.0511° in web mercator), so a polygon's
// part there selects no tile through the buffer.
func (l *level) a1(i int64) float64 {
	return max(l.g.TileBBox(gridset.Index{X: i, Z: l.z}).MinX-l.buf, l.grid.MinX)
}
func (l *level) a2(i int64) float64 {
	return min(l.g.TileBBox(gridset.Index{X: i, Z: l.z}).MaxX+l.buf, l.grid.MaxX)
}

// strip is row y's grown open strip b1 < y < b2, cut at the grid's edge,
// and its centre line.
func (l *level) strip(y int64) (b1, b2, yc float64) {
	b := l.g.TileBBox(gridset.Index{Y: y, Z: l.z})
	return max(b.MinY-l.buf, l.grid.MinY), min(b.MaxY+l.buf, l.grid.MaxY), b.MinY + (b.MaxY-b.MinY)/2
}

// guess is an index estimate from a coordinate, clamped to [lo, hi] before
// the conversion so huge or far-off coordinates cannot overflow.
func guess(v float64, lo, hi int64) int64 {
	v = math.Floor(v)
	if !(v > float64(lo)) {
		return lo
	}
	if v > float64(hi) {
		return hi
	}
	return int64(v)
}

// end is one x end of an edge's piece inside a strip: a vertex (exact) or
// the edge's crossing of a strip side at height y (x is then approximate
// and comparisons near ties are settled exactly).
type end struct {
	x     float64
	exact bool
	e     *edge
	y     float64
}

// cmpX is the exact sign of (the end's x - a).
func (en end) cmpX(a float64) int {
	if en.exact || en.x != en.x {
		return cmp.Compare(en.x, a)
	}
	e := en.e
	// x = x0 + t·(x1-x0) with 0 ≤ t ≤ 1 has a rounding error below
	// 8·2⁻⁵³·(|x0|+|x1|); the margin is ample, and 1e-300 covers underflow.
	tol := 1e-14*(math.Abs(e.x0)+math.Abs(e.x1)) + 1e-300
	if d := en.x - a; d > tol {
		return 1
	} else if d < -tol {
		return -1
	}
	// sign(x0 + (y-y0)(x1-x0)/(y1-y0) - a), times y1-y0 > 0.
	r := func(v float64) *big.Rat { return new(big.Rat).SetFloat64(v) }
	t1 := new(big.Rat).Mul(new(big.Rat).Sub(r(e.x0), r(a)), new(big.Rat).Sub(r(e.y1), r(e.y0)))
	t2 := new(big.Rat).Mul(new(big.Rat).Sub(r(en.y), r(e.y0)), new(big.Rat).Sub(r(e.x1), r(e.x0)))
	return t1.Add(t1, t2).Sign()
}

func interpX(e *edge, y float64) float64 {
	return e.x0 + (y-e.y0)/(e.y1-e.y0)*(e.x1-e.x0)
}

// ends returns the smallest and largest x of the part of e inside the open
// strip b1 < y < b2 (e must reach the strip). The part is an interval of the
// segment, open where it meets a strip side, so it passes through a column's
// open interval (a1, a2) iff lo < a2 and hi > a1, whichever its ends are.
func ends(e *edge, b1, b2 float64) (lo, hi end) {
	if e.y0 == e.y1 || e.x0 == e.x1 {
		// Horizontal: both ends are vertices. Vertical: every point has
		// x = x0 exactly; common (boxes, tile-aligned shapes), and it spares
		// the rational tie-break when x0 is a column boundary.
		return end{x: min(e.x0, e.x1), exact: true}, end{x: max(e.x0, e.x1), exact: true}
	}
	bot := end{x: e.x0, exact: true}
	if e.y0 < b1 {
		bot = end{x: interpX(e, b1), e: e, y: b1}
	}
	top := end{x: e.x1, exact: true}
	if e.y1 > b2 {
		top = end{x: interpX(e, b2), e: e, y: b2}
	}
	if e.x1 >= e.x0 {
		return bot, top
	}
	return top, bot
}

// columns is the inclusive range of columns whose grown open interval
// (a1, a2) meets [lo, hi]: the first with lo < a2 to the last with hi > a1.
func (l *level) columns(lo, hi end) (first, last int64) {
	first = guess((lo.x-l.buf-l.ox)/l.tw, 0, l.w-1)
	for first > 0 && lo.cmpX(l.a2(first-1)) < 0 {
		first--
	}
	for first < l.w && lo.cmpX(l.a2(first)) >= 0 {
		first++
	}
	last = guess((hi.x+l.buf-l.ox)/l.tw, 0, l.w-1)
	for last < l.w-1 && hi.cmpX(l.a1(last+1)) > 0 {
		last++
	}
	for last >= 0 && hi.cmpX(l.a1(last)) <= 0 {
		last--
	}
	return first, last
}

// Rows is the range of rows at level z whose grown strip overlaps the
// geometry's bounds; no row outside it holds a selected tile. ok is false
// when there is none (or z is not a level).
func (c *Cover) Rows(z int) (minY, maxY int64, ok bool) {
	l, ok := c.level(z)
	if !ok || len(c.edges) == 0 {
		return 0, -1, false
	}
	b1 := func(j int64) float64 { lo, _, _ := l.strip(j); return lo }
	b2 := func(j int64) float64 { _, hi, _ := l.strip(j); return hi }
	bMin, bMax := c.bounds.MinY, c.bounds.MaxY
	// Estimates assume rows grow upward from TileBBox(0,0,z); the loops
	// then settle on the exact boundaries.
	minY = guess((bMin-l.buf-l.oy)/l.th, 0, l.h-1)
	for minY > 0 && b2(minY-1) > bMin {
		minY--
	}
	for minY < l.h && b2(minY) <= bMin {
		minY++
	}
	maxY = guess((bMax+l.buf-l.oy)/l.th, 0, l.h-1)
	for maxY < l.h-1 && b1(maxY+1) < bMax {
		maxY++
	}
	for maxY >= 0 && b1(maxY) >= bMax {
		maxY--
	}
	return minY, maxY, minY <= maxY
}

// Row appends to dst[:0] the selected columns of row y at level z, as
// sorted, disjoint, non-adjacent spans within the level's grid.
func (c *Cover) Row(z int, y int64, dst []Span) []Span {
	dst = dst[:0]
	l, ok := c.level(z)
	if !ok || y < 0 || y >= l.h || len(c.edges) == 0 {
		return dst
	}
	b1, b2, yc := l.strip(y)
	if c.bounds.MaxY <= b1 || c.bounds.MinY >= b2 {
		return dst
	}
	s := c.scratch.Get().(*scratch)
	defer c.scratch.Put(s)
	s.active = c.query(0, len(c.edges), b1, b2, s.active[:0])
	s.cross = s.cross[:0]
	for _, k := range s.active {
		e := &c.edges[k]
		// (a): the columns this edge passes through.
		if first, last := l.columns(ends(e, b1, b2)); first <= last {
			dst = append(dst, Span{first, last})
		}
		// Crossings of the centre line, half-open in y so a vertex on the
		// line counts once (or twice, harmlessly, at a peak).
		if e.y0 <= yc && yc < e.y1 {
			s.cross = append(s.cross, crossing{interpX(e, yc), e.poly})
		}
	}
	// (b): columns whose centre is inside some polygon. The centre of
	// column i is about ox + tw·(i+½); ties only happen where a crossing is
	// at a centre, i.e. where (a) already selected the column.
	slices.SortFunc(s.cross, func(a, b crossing) int { return cmp.Compare(a.x, b.x) })
	inside, start := 0, 0.0
	for _, cr := range s.cross {
		if s.parity[cr.poly] = !s.parity[cr.poly]; s.parity[cr.poly] {
			if inside == 0 {
				start = cr.x
			}
			inside++
			continue
		}
		inside--
		if inside == 0 {
			first := guess((start-l.ox)/l.tw-0.5, -1, l.w) + 1
			last := -guess(-((cr.x-l.ox)/l.tw-0.5), -l.w, 1) - 1
			first, last = max(first, 0), min(last, l.w-1)
			if first <= last {
				dst = append(dst, Span{first, last})
			}
		}
	}
	for _, cr := range s.cross { // only if the rings were not closed
		s.parity[cr.poly] = false
	}
	return mergeSpans(dst)
}

// mergeSpans sorts spans and merges overlapping or adjacent ones, in place.
func mergeSpans(sp []Span) []Span {
	if len(sp) < 2 {
		return sp
	}
	slices.SortFunc(sp, func(a, b Span) int { return cmp.Compare(a.MinX, b.MinX) })
	out := sp[:1]
	for _, s := range sp[1:] {
		if t := &out[len(out)-1]; s.MinX <= t.MaxX+1 {
			t.MaxX = max(t.MaxX, s.MaxX)
		} else {
			out = append(out, s)
		}
	}
	return out
}

// Count is the number of selected tiles of level z inside r.
func (c *Cover) Count(z int, r gridset.Range) int64 {
	minY, maxY, ok := c.Rows(z)
	if !ok {
		return 0
	}
	r = r.Intersect(c.g.GridRange(z)).Intersect(gridset.Range{MinX: r.MinX, MinY: minY, MaxX: r.MaxX, MaxY: maxY})
	if r.Empty() {
		return 0
	}
	var n int64
	var row []Span
	for y := r.MinY; y <= r.MaxY; y++ {
		row = c.Row(z, y, row)
		for _, s := range row {
			if lo, hi := max(s.MinX, r.MinX), min(s.MaxX, r.MaxX); lo <= hi {
				n += hi - lo + 1
			}
		}
	}
	return n
}

// Contains reports whether one tile is selected, deciding it on its own
// (without building the row), by the same two criteria.
func (c *Cover) Contains(idx gridset.Index) bool {
	l, ok := c.level(idx.Z)
	if !ok || len(c.edges) == 0 || !c.g.GridRange(idx.Z).Contains(idx.X, idx.Y) {
		return false
	}
	b1, b2, yc := l.strip(idx.Y)
	a1, a2 := l.a1(idx.X), l.a2(idx.X)
	s := c.scratch.Get().(*scratch)
	defer c.scratch.Put(s)
	s.active = c.query(0, len(c.edges), b1, b2, s.active[:0])
	for _, k := range s.active {
		if lo, hi := ends(&c.edges[k], b1, b2); lo.cmpX(a2) < 0 && hi.cmpX(a1) > 0 {
			return true
		}
	}
	xc := a1 + (a2-a1)/2
	for _, k := range s.active {
		if e := &c.edges[k]; e.y0 <= yc && yc < e.y1 && interpX(e, yc) < xc {
			s.parity[e.poly] = !s.parity[e.poly]
		}
	}
	in := false
	for _, k := range s.active { // leave the pooled parity all false
		p := c.edges[k].poly
		in = in || s.parity[p]
		s.parity[p] = false
	}
	return in
}
