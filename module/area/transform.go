package area

import (
	"fmt"
	"math"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The sphere of gridset.FromLonLat/ToLonLat, so that a polygon and a box
// given in lon/lat land on the same Mercator coordinates.
const earthRadius = 6378137.0

// poleY stands for the y of a pole in spherical Mercator, which is
// infinite: it lies beyond any grid's edge (and Cover counts only what is
// inside the grid), yet it is finite, so that areas and the GeoJSON of a
// task's geometry stay numbers.
const poleY = 1e100

// Transform converts the geometry from one CRS to another, vertex by vertex
// (a pole's position excepted, below): edges stay straight lines in the
// target CRS, as PostGIS ST_Transform does. Only EPSG:4326 and spherical
// Mercator (3857, 900913, 102100, 102113) are known; the same CRS
// (gridset.SameSRS) returns g unchanged.
//
// Latitudes are not clamped to the ±85.0511° of the Mercator grid: a
// vertex at 88° lands at its own y, beyond the grid's edge, so the edges
// from it cross the edge where they would on a web map, and the polygon
// selects the tiles it reaches as if clipped there. A vertex at a pole
// (|lat| ≥ 90°) is infinitely far; see ringToMercator.
func (g Geometry) Transform(fromSRS, toSRS int) (Geometry, error) {
	if gridset.SameSRS(fromSRS, toSRS) {
		return g, nil
	}
	var f func(Ring) Ring
	switch from, to := gridset.CanonicalSRS(fromSRS), gridset.CanonicalSRS(toSRS); {
	case from == 4326 && to == 900913:
		f = ringToMercator
	case from == 900913 && to == 4326:
		f = ringToLonLat
	default:
		return nil, fmt.Errorf("cannot convert EPSG:%d to EPSG:%d", fromSRS, toSRS)
	}
	out := make(Geometry, len(g))
	for i, p := range g {
		out[i] = make(Polygon, len(p))
		for j, r := range p {
			nr := f(r)
			if len(r) >= 4 && (len(nr) < 4 || ringArea2(nr) == 0) {
				return nil, fmt.Errorf("polygon %d ring %d has zero area in EPSG:%d (its positions at a pole are one point)", i, j, toSRS)
			}
			out[i][j] = nr
		}
	}
	return out, nil
}

func ringToLonLat(r Ring) Ring {
	out := make(Ring, len(r))
	for k, p := range r {
		out[k] = toLonLat(p)
	}
	return out
}

// ringToMercator projects a ring. A position at a pole has no finite y,
// and an edge to a vertex nearing the pole turns, in the limit, into the
// meridian of its other end (as the great circle to the pole runs): so a
// pole position becomes two, at ±poleY, one on each neighbour's meridian,
// and its edges run straight north or south.
func ringToMercator(r Ring) Ring {
	open, closed := r, len(r) > 1 && r[0] == r[len(r)-1]
	if closed {
		open = r[:len(r)-1]
	}
	n := len(open)
	out := make(Ring, 0, len(r)+2)
	for k, p := range open {
		if s := pole(p); s != 0 {
			out = appendNew(out, poleEnd(p, open[(k+n-1)%n], s))
			out = appendNew(out, poleEnd(p, open[(k+1)%n], s))
			continue
		}
		out = appendNew(out, toMercator(p))
	}
	if closed && len(out) > 0 && out[len(out)-1] != out[0] {
		out = append(out, out[0])
	}
	return out
}

// appendNew appends p unless it repeats the last position (two pole ends
// on one meridian): the task's geometry, shown back, has no doubled vertex.
func appendNew(r Ring, p Point) Ring {
	if len(r) > 0 && r[len(r)-1] == p {
		return r
	}
	return append(r, p)
}

// pole is +1 at or beyond the north pole, -1 at or beyond the south pole,
// else 0.
func pole(p Point) float64 {
	switch {
	case p.Y >= 90:
		return 1
	case p.Y <= -90:
		return -1
	}
	return 0
}

// poleEnd is where pole position p (at pole s) meets its edge to q: at
// s·poleY on q's meridian, or on p's own when q is at a pole too (the
// edge between them then lies beyond the grid, or between opposite poles
// runs straight from one to the other).
func poleEnd(p, q Point, s float64) Point {
	lon := q.X
	if pole(q) != 0 {
		lon = p.X
	}
	return Point{X: mercX(lon), Y: s * poleY}
}

func toMercator(p Point) Point {
	return Point{X: mercX(p.X), Y: earthRadius * math.Log(math.Tan(math.Pi/4+p.Y*math.Pi/360))}
}

func mercX(lon float64) float64 { return earthRadius * lon * math.Pi / 180 }

func toLonLat(p Point) Point {
	return Point{
		X: p.X / earthRadius * 180 / math.Pi,
		Y: (2*math.Atan(math.Exp(p.Y/earthRadius)) - math.Pi/2) * 180 / math.Pi,
	}
}
