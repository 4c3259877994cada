package area

import (
	"fmt"
	"math"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The sphere and latitude limit of gridset.FromLonLat/ToLonLat, so that a
// polygon and a box given in lon/lat land on the same Mercator coordinates.
const (
	earthRadius = 6378137.0
	maxMercLat  = 85.0511287798066
)

// Transform converts the geometry from one CRS to another, vertex by vertex:
// edges stay straight lines in the target CRS, as PostGIS ST_Transform does.
// Only EPSG:4326 and spherical Mercator (3857, 900913, 102100, 102113) are
// known; the same CRS (gridset.SameSRS) returns g unchanged. Latitudes beyond
// ±85.0511287798° are clamped when projecting to Mercator; a ring that
// collapses to zero area that way is an error.
func (g Geometry) Transform(fromSRS, toSRS int) (Geometry, error) {
	if gridset.SameSRS(fromSRS, toSRS) {
		return g, nil
	}
	var f func(Point) Point
	switch from, to := gridset.CanonicalSRS(fromSRS), gridset.CanonicalSRS(toSRS); {
	case from == 4326 && to == 900913:
		f = toMercator
	case from == 900913 && to == 4326:
		f = toLonLat
	default:
		return nil, fmt.Errorf("cannot convert EPSG:%d to EPSG:%d", fromSRS, toSRS)
	}
	out := make(Geometry, len(g))
	for i, p := range g {
		out[i] = make(Polygon, len(p))
		for j, r := range p {
			nr := make(Ring, len(r))
			for k, pt := range r {
				nr[k] = f(pt)
			}
			if len(nr) >= 4 && ringArea2(nr) == 0 {
				return nil, fmt.Errorf("polygon %d ring %d has zero area in EPSG:%d (beyond the ±%.4f° latitude Mercator can show?)", i, j, toSRS, maxMercLat)
			}
			out[i][j] = nr
		}
	}
	return out, nil
}

func toMercator(p Point) Point {
	lat := math.Max(-maxMercLat, math.Min(maxMercLat, p.Y))
	return Point{
		X: earthRadius * p.X * math.Pi / 180,
		Y: earthRadius * math.Log(math.Tan(math.Pi/4+lat*math.Pi/360)),
	}
}

func toLonLat(p Point) Point {
	return Point{
		X: p.X / earthRadius * 180 / math.Pi,
		Y: (2*math.Atan(math.Exp(p.Y/earthRadius)) - math.Pi/2) * 180 / math.Pi,
	}
}
