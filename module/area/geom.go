// Package area describes the region of a seed, reseed or truncate task as a
// polygon or multipolygon, and selects exactly the tiles of a gridset level
// that the region covers.
//
// # Geometry
//
// A Geometry is a multipolygon: a list of Polygons whose union is the area.
// Polygons may overlap. Each Polygon is a shell Ring followed by hole Rings;
// inside one Polygon the rings combine by the even-odd rule. Rings are
// closed (first position equals last). Parsing (ParseGeoJSON, ParseWKT)
// checks closure, ring length, finite coordinates, non-zero ring area and a
// total vertex limit. It does not check for self-intersection, holes outside
// their shell, or touching rings: such input is accepted and gives the
// selection described below applied literally to its edges, which errs on
// the side of selecting too many tiles (every tile an edge passes through is
// selected).
//
// # Tile selection
//
// A Cover selects, at level z of a gridset, the tile (x, y) when the tile's
// rectangle (Gridset.TileBBox) grown by bufferPx × Levels[z].Resolution on
// each of its four sides, and cut at the edge of the level's grid, has an
// open intersection of positive area with the interior of the geometry. So
// the buffer is square: a tile is selected when it lies within bufferPx
// pixels of the area in x and in y. Only the geometry's part inside the
// grid counts, as if it were clipped at the grid's edge: a polygon reaching
// beyond it (past 85.0511° in web mercator) selects the tiles of the edge
// row it reaches, and nothing more through the buffer. A tile that touches
// the area only along an edge or at a corner is not selected, so a polygon
// drawn exactly on tile boundaries selects exactly the tiles inside it.
// The grown rectangle is computed in float64 as TileBBox ± buffer (then
// cut), and the decision is exact for those float64 values and the
// geometry's float64 vertices (near-ties are settled in rational
// arithmetic).
//
// Cover answers per row (Row), per range (Count) and per tile (Contains), in
// memory proportional to the geometry's edges plus one row's spans, so a
// task can count its tiles before seeding and enumerate them row by row.
package area

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// Point is a position in a CRS's x/y (easting/northing, lon/lat) order.
type Point struct{ X, Y float64 }

// Ring is a closed line string: its first and last points are equal.
type Ring []Point

// Polygon is a shell ring followed by zero or more hole rings.
type Polygon []Ring

// Geometry is a multipolygon: the union of its polygons.
type Geometry []Polygon

// DefaultMaxVertices is the vertex limit when Limits.MaxVertices is zero.
// It bounds the memory and CPU a single REST request can claim; real
// country outlines simplified for tiling fit well within it.
const DefaultMaxVertices = 100000

// Limits bounds what a parser accepts.
type Limits struct {
	// MaxVertices is the most vertices the whole geometry may have; a
	// ring's closing position repeats its first vertex and is not one.
	// 0 means DefaultMaxVertices.
	MaxVertices int
}

func (l Limits) max() int {
	if l.MaxVertices <= 0 {
		return DefaultMaxVertices
	}
	return l.MaxVertices
}

// Vertices is the number of vertices in the geometry: its positions less
// each ring's closing one (which GeoJSON and WKT write out again).
func (g Geometry) Vertices() int {
	n := 0
	for _, p := range g {
		for _, r := range p {
			n += ringVertices(len(r))
		}
	}
	return n
}

// ringVertices is the vertices of a ring of n positions: the last one
// closes the ring. A ring too short to be one (validate refuses it) still
// counts one, so that a body of empty rings is bounded by the limit too.
func ringVertices(n int) int { return max(n-1, 1) }

// Bounds is the smallest box holding every vertex; the zero BBox when the
// geometry has none.
func (g Geometry) Bounds() gridset.BBox {
	b := gridset.BBox{MinX: math.Inf(1), MinY: math.Inf(1), MaxX: math.Inf(-1), MaxY: math.Inf(-1)}
	for _, p := range g {
		for _, r := range p {
			for _, pt := range r {
				b.MinX, b.MaxX = math.Min(b.MinX, pt.X), math.Max(b.MaxX, pt.X)
				b.MinY, b.MaxY = math.Min(b.MinY, pt.Y), math.Max(b.MaxY, pt.Y)
			}
		}
	}
	if b.MinX > b.MaxX {
		return gridset.BBox{}
	}
	return b
}

// GeoJSON is the geometry as a GeoJSON MultiPolygon geometry object, to show
// a task's area to the operator (it is in the geometry's own CRS).
func (g Geometry) GeoJSON() []byte {
	coords := make([][][][2]float64, len(g))
	for i, p := range g {
		coords[i] = make([][][2]float64, len(p))
		for j, r := range p {
			ring := make([][2]float64, len(r))
			for k, pt := range r {
				ring[k] = [2]float64{pt.X, pt.Y}
			}
			coords[i][j] = ring
		}
	}
	out, err := json.Marshal(struct {
		Type        string           `json:"type"`
		Coordinates [][][][2]float64 `json:"coordinates"`
	}{"MultiPolygon", coords})
	if err != nil {
		// Only non-finite coordinates fail, and validated geometries have none.
		return nil
	}
	return out
}

// validate checks what the package doc promises; every message is one line
// a REST client can act on.
func (g Geometry) validate(lim Limits) error {
	if len(g) == 0 {
		return fmt.Errorf("empty geometry")
	}
	if n, max := g.Vertices(), lim.max(); n > max {
		return fmt.Errorf("geometry has %d vertices, more than the limit of %d", n, max)
	}
	for i, p := range g {
		if len(p) == 0 {
			return fmt.Errorf("polygon %d has no rings", i)
		}
		for j, r := range p {
			if len(r) < 4 {
				return fmt.Errorf("polygon %d ring %d has %d positions; a ring needs at least 4 (the last repeating the first)", i, j, len(r))
			}
			for k, pt := range r {
				if math.IsNaN(pt.X) || math.IsNaN(pt.Y) || math.IsInf(pt.X, 0) || math.IsInf(pt.Y, 0) {
					return fmt.Errorf("polygon %d ring %d position %d has a NaN or infinite coordinate", i, j, k)
				}
			}
			if r[0] != r[len(r)-1] {
				return fmt.Errorf("polygon %d ring %d is not closed: its last position must repeat its first", i, j)
			}
			if ringArea2(r) == 0 {
				return fmt.Errorf("polygon %d ring %d has zero area", i, j)
			}
		}
	}
	return nil
}

// ringArea2 is twice the signed area of a closed ring (shoelace formula),
// with positions taken relative to the first so large coordinates do not
// cancel a small area away.
func ringArea2(r Ring) float64 {
	var s float64
	o := r[0]
	for k := 1; k+1 < len(r); k++ {
		ax, ay := r[k].X-o.X, r[k].Y-o.Y
		bx, by := r[k+1].X-o.X, r[k+1].Y-o.Y
		s += ax*by - bx*ay
	}
	return s
}
