package seeder

import (
	"sort"
	"sync"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/tilelist"
)

// plan hands out a task's metatiles (units) in a fixed order, to all of
// its workers, each to exactly one; and, for a clustered task whose
// nodes claim ranges of that order, finds any unit by its number without
// walking the ones before it. A box is the iterator (task.go), a polygon
// a polyPlan, a tile list a listPlan.
type plan interface {
	next() (unit, bool)
	at(seq int64) (unit, bool)
	count() int64
	done() bool
	// seek makes the next unit handed out the seq'th: a task resumes
	// after the units its checkpoint says are done.
	seek(seq int64)
}

var (
	_ plan = (*iterator)(nil)
	_ plan = (*polyPlan)(nil)
	_ plan = (*listPlan)(nil)
)

func (it *iterator) seek(seq int64) {
	for range seq {
		if _, ok := it.next(); !ok {
			return
		}
	}
}

// newPlan is the order in which the task's units are handed out. A
// truncation of a box or a polygon deletes level by level (its cost
// follows what is stored, not the area: level 21 of EPSG:4326 has 2^43
// tiles); everything else goes metatile by metatile.
func newPlan(s *Spec, metaW, metaH int64) plan {
	switch {
	case s.List != nil:
		return &listPlan{list: s.List}
	case s.Type == Truncate:
		return newIterator(s, wholeLevel, wholeLevel)
	case s.cover != nil:
		return newPolyPlan(s, metaW, metaH)
	}
	return newIterator(s, metaW, metaH)
}

// size is the number of the task's tiles in the unit.
func (u unit) size() int64 {
	if u.only != nil {
		return int64(len(u.only))
	}
	return u.tiles.Count()
}

// each calls fn with the unit's tiles' rows: the runs of consecutive
// columns [x0, x1] of row y, bottom to top, left to right.
func (u unit) runs(fn func(y, x0, x1 int64) bool) {
	if u.only == nil {
		for y := u.tiles.MinY; y <= u.tiles.MaxY; y++ {
			if !fn(y, u.tiles.MinX, u.tiles.MaxX) {
				return
			}
		}
		return
	}
	for i := 0; i < len(u.only); {
		j := i + 1
		for j < len(u.only) && u.only[j].Y == u.only[i].Y && u.only[j].X == u.only[j-1].X+1 {
			j++
		}
		if !fn(u.only[i].Y, u.only[i].X, u.only[j-1].X) {
			return
		}
		i = j
	}
}

// polyPlan hands out the metatiles holding at least one tile of a
// polygon task, in the box iterator's order (levels, rows of metatiles
// bottom to top, columns left to right), each with exactly the polygon's
// tiles in it. It keeps, per level, a running count of units per row of
// metatiles (a few thousand numbers, not one per tile), so a unit is
// found by its number with one binary search and the expansion of one
// row of metatiles.
type polyPlan struct {
	cover        *area.Cover
	metaW, metaH int64
	levels       []polyLevel
	units        int64

	mu     sync.Mutex
	handed int64
	// The row of metatiles last expanded: its rows' spans and its cells.
	cached   bool
	cacheL   int
	cacheRow int64
	spans    [][]area.Span // per tile row of the band, clipped to the level's range
	cells    []area.Span   // metatile columns holding a tile, merged
}

type polyLevel struct {
	z    int
	r    gridset.Range
	row0 int64   // the first row of metatiles
	cum  []int64 // cum[i]: units in the rows of metatiles before row0+i
	base int64   // units of the levels before
}

func newPolyPlan(s *Spec, metaW, metaH int64) *polyPlan {
	p := &polyPlan{cover: s.cover, metaW: metaW, metaH: metaH}
	for i, r := range s.Ranges {
		lv := polyLevel{z: s.ZoomStart + i, r: r, cum: []int64{0}, base: p.units}
		if !r.Empty() {
			lv.row0 = r.MinY / metaH
			var spans [][]area.Span
			var cells []area.Span
			for m := lv.row0; m <= r.MaxY/metaH; m++ {
				spans, cells = p.expand(lv, m, spans, cells)
				var n int64
				for _, c := range cells {
					n += c.MaxX - c.MinX + 1
				}
				lv.cum = append(lv.cum, lv.cum[len(lv.cum)-1]+n)
			}
		}
		p.units += lv.cum[len(lv.cum)-1]
		p.levels = append(p.levels, lv)
	}
	return p
}

// expand computes row m of metatiles of a level: the polygon's spans of
// each of its tile rows (inside the level's range) and the metatile
// columns they fall in, reusing the given slices.
func (p *polyPlan) expand(lv polyLevel, m int64, spans [][]area.Span, cells []area.Span) ([][]area.Span, []area.Span) {
	spans, cells = spans[:0], cells[:0]
	for y := m * p.metaH; y < (m+1)*p.metaH; y++ {
		i := len(spans)
		if i < cap(spans) {
			spans = spans[:i+1]
		} else {
			spans = append(spans, nil)
		}
		row := spans[i][:0]
		if y >= lv.r.MinY && y <= lv.r.MaxY {
			for _, s := range p.cover.Row(lv.z, y, nil) {
				s.MinX, s.MaxX = max(s.MinX, lv.r.MinX), min(s.MaxX, lv.r.MaxX)
				if s.MinX <= s.MaxX {
					row = append(row, s)
					cells = append(cells, area.Span{MinX: s.MinX / p.metaW, MaxX: s.MaxX / p.metaW})
				}
			}
		}
		spans[i] = row
	}
	sort.Slice(cells, func(a, b int) bool { return cells[a].MinX < cells[b].MinX })
	merged := cells[:0]
	for _, c := range cells {
		if n := len(merged); n > 0 && c.MinX <= merged[n-1].MaxX+1 {
			merged[n-1].MaxX = max(merged[n-1].MaxX, c.MaxX)
			continue
		}
		merged = append(merged, c)
	}
	return spans, merged
}

func (p *polyPlan) count() int64 { return p.units }

func (p *polyPlan) done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handed >= p.units
}

func (p *polyPlan) seek(seq int64) {
	p.mu.Lock()
	p.handed = seq
	p.mu.Unlock()
}

func (p *polyPlan) next() (unit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, ok := p.atLocked(p.handed)
	if ok {
		u.seq = p.handed
		p.handed++
	}
	return u, ok
}

func (p *polyPlan) at(seq int64) (unit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.atLocked(seq)
}

func (p *polyPlan) atLocked(seq int64) (unit, bool) {
	if seq < 0 || seq >= p.units {
		return unit{}, false
	}
	li := sort.Search(len(p.levels), func(i int) bool {
		lv := p.levels[i]
		return lv.base+lv.cum[len(lv.cum)-1] > seq
	})
	lv := p.levels[li]
	k := seq - lv.base
	row := sort.Search(len(lv.cum)-1, func(i int) bool { return lv.cum[i+1] > k })
	k -= lv.cum[row]
	m := lv.row0 + int64(row)
	if !p.cached || p.cacheL != li || p.cacheRow != m {
		p.spans, p.cells = p.expand(lv, m, p.spans, p.cells)
		p.cached, p.cacheL, p.cacheRow = true, li, m
	}
	var cx int64 = -1
	for _, c := range p.cells {
		if n := c.MaxX - c.MinX + 1; k < n {
			cx = c.MinX + k
			break
		} else {
			k -= n
		}
	}
	x0, x1 := cx*p.metaW, cx*p.metaW+p.metaW-1
	u := unit{z: lv.z, tiles: gridset.Range{MinX: x1, MinY: (m + 1) * p.metaH, MaxX: x0, MaxY: m*p.metaH - 1}}
	for i, row := range p.spans {
		y := m*p.metaH + int64(i)
		for _, s := range row {
			a, b := max(s.MinX, x0), min(s.MaxX, x1)
			for x := a; x <= b; x++ {
				u.only = append(u.only, gridset.Index{X: x, Y: y, Z: lv.z})
			}
			if a <= b {
				u.tiles.MinX, u.tiles.MaxX = min(u.tiles.MinX, a), max(u.tiles.MaxX, b)
				u.tiles.MinY, u.tiles.MaxY = min(u.tiles.MinY, y), max(u.tiles.MaxY, y)
			}
		}
	}
	return u, true
}

// listPlan hands out the metatiles of a tile list, in the list's order.
type listPlan struct {
	list   *tilelist.List
	mu     sync.Mutex
	handed int64
}

func (p *listPlan) count() int64 { return p.list.Units() }

func (p *listPlan) done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handed >= p.list.Units()
}

func (p *listPlan) seek(seq int64) {
	p.mu.Lock()
	p.handed = seq
	p.mu.Unlock()
}

func (p *listPlan) next() (unit, bool) {
	p.mu.Lock()
	seq := p.handed
	if seq < p.list.Units() {
		p.handed++
	}
	p.mu.Unlock()
	u, ok := p.at(seq)
	u.seq = seq
	return u, ok
}

func (p *listPlan) at(seq int64) (unit, bool) {
	if seq < 0 || seq >= p.list.Units() {
		return unit{}, false
	}
	lu := p.list.Unit(seq)
	u := unit{z: lu.Z, tiles: gridset.Range{MinX: 1 << 62, MinY: 1 << 62, MaxX: -1, MaxY: -1}}
	u.only = make([]gridset.Index, 0, lu.Count())
	for idx := range lu.All() {
		u.only = append(u.only, idx)
		u.tiles.MinX, u.tiles.MaxX = min(u.tiles.MinX, idx.X), max(u.tiles.MaxX, idx.X)
		u.tiles.MinY, u.tiles.MaxY = min(u.tiles.MinY, idx.Y), max(u.tiles.MaxY, idx.Y)
	}
	return u, true
}
