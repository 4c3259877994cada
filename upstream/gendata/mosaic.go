package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// numMosaic is how many blobs the mosaic layer has: together they cover
// the world about twice over, so that a 256-pixel tile at levels 3-6 of
// EPSG:4326 is filled with dozens to hundreds of overlapping edges.
const numMosaic = 50000

// writeMosaic writes the mosaic layer: many small, overlapping, irregular
// blobs (12-28 vertices around a centre, radius 0.3-3.6°, smaller ones more
// common), each with a colour of its own ("#rrggbb" in the colour column,
// which the mapfile binds to its fill). Drawn opaque and antialiased, their
// edges blend into thousands of colours per tile: a dense thematic map that
// no palette holds, the case the project's other layers do not cover.
func writeMosaic(dir string, r *rand.Rand) error {
	c, err := createCSV(dir, "mosaic",
		[]string{"WKT", "id", "colour"},
		[]string{"WKT", "Integer", "String(7)"})
	if err != nil {
		return err
	}
	var b strings.Builder
	for id := 1; id <= numMosaic; id++ {
		rad := 0.3 * math.Pow(12, r.Float64()) // 0.3..3.6°, smaller ones more common
		cx := minLon + rad + r.Float64()*(maxLon-minLon-2*rad)
		cy := minLat + rad + r.Float64()*(maxLat-minLat-2*rad)
		n := 12 + r.IntN(17)
		phase := r.Float64() * 2 * math.Pi
		b.Reset()
		b.WriteString("POLYGON ((")
		var first pt
		for i := 0; i < n; i++ {
			a := phase + 2*math.Pi*float64(i)/float64(n)
			rr := rad * (0.55 + 0.45*r.Float64())
			p := pt{cx + rr*math.Cos(a), cy + rr*math.Sin(a)*0.8}
			if i == 0 {
				first = p
			} else {
				b.WriteString(", ")
			}
			coord(&b, p)
		}
		b.WriteString(", ")
		coord(&b, first)
		b.WriteString("))")
		colour := fmt.Sprintf("#%02x%02x%02x", 30+r.IntN(210), 30+r.IntN(210), 30+r.IntN(210))
		c.row(b.String(), strconv.Itoa(id), colour)
	}
	return c.close()
}
