package seeder

// Random access to a task's metatiles, in the iterator's order: a
// clustered task hands out work units as ranges of that order
// (cluster.go), and a node must find the metatiles of any unit it claims
// without walking the ones before it.

// levelGrid is one level's metatile cells in the iterator's order: rows
// bottom to top, columns left to right.
type levelGrid struct {
	x0, y0     int64 // the first cell's corner
	cols, rows int64
}

func (it *iterator) grid(i int) levelGrid {
	r := it.spec.Ranges[i]
	if r.Empty() {
		return levelGrid{}
	}
	g := levelGrid{x0: alignDown(r.MinX, it.metaW), y0: alignDown(r.MinY, it.metaH)}
	g.cols = (r.MaxX-g.x0)/it.metaW + 1
	g.rows = (r.MaxY-g.y0)/it.metaH + 1
	return g
}

// count is the number of units (metatiles) the iterator hands out.
func (it *iterator) count() int64 {
	var n int64
	for i := range it.spec.Ranges {
		g := it.grid(i)
		n += g.cols * g.rows
	}
	return n
}

// at returns the unit the iterator hands out as its seq'th (from 0).
func (it *iterator) at(seq int64) (unit, bool) {
	if seq < 0 {
		return unit{}, false
	}
	for i, r := range it.spec.Ranges {
		g := it.grid(i)
		n := g.cols * g.rows
		if seq >= n {
			seq -= n
			continue
		}
		x := g.x0 + (seq%g.cols)*it.metaW
		y := g.y0 + (seq/g.cols)*it.metaH
		cell := r
		cell.MinX, cell.MinY, cell.MaxX, cell.MaxY = x, y, x+it.metaW-1, y+it.metaH-1
		return unit{z: it.spec.ZoomStart + i, tiles: cell.Intersect(r)}, true
	}
	return unit{}, false
}
