// Package gen writes synthetic expire lists for tests and benchmarks.
package gen

import (
	"bufio"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

// Random writes n lines of uniformly random z/x/y tiles at level z of a
// 2^z x 2^z grid: the worst case for the parser (at z18 almost every line
// is a distinct tile in its own metatile).
func Random(w io.Writer, n int64, z int, seed uint64) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	r := rand.New(rand.NewPCG(seed, 1))
	side := uint64(1) << z
	var b []byte
	for range n {
		b = appendTile(b[:0], z, r.Uint64N(side), r.Uint64N(side))
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Realistic writes n lines shaped like what osm2pgsql's tile expiry writes
// for a run of minutely or daily diffs, concatenated: edits fall in a few
// thousand places (popular ones far more often, a power law), each edit
// touches a short random walk of neighbouring z18 tiles, and each touched
// tile is listed at levels minZ..18 (osm2pgsql's -e minZ-18), so parents
// repeat many times. Lists are written in the order edits happened, which
// is not sorted.
func Realistic(w io.Writer, n int64, minZ int, seed uint64) error {
	const maxZ = 18
	bw := bufio.NewWriterSize(w, 1<<16)
	r := rand.New(rand.NewPCG(seed, 2))
	const places = 3000
	type pt struct{ x, y float64 }
	centres := make([]pt, places)
	side := float64(uint64(1) << maxZ)
	for i := range centres {
		// Keep away from the poles, where nobody edits much.
		centres[i] = pt{r.Float64() * side, side * (0.2 + 0.45*r.Float64())}
	}
	var b []byte
	var written int64
	for written < n {
		// Power law over places: index = places * u^3.
		c := centres[int(places*math.Pow(r.Float64(), 3))]
		// An edit spans a neighbourhood a few hundred metres to km wide.
		x := int64(c.x + r.NormFloat64()*200)
		y := int64(c.y + r.NormFloat64()*200)
		steps := 1 + r.IntN(8)
		for s := 0; s < steps && written < n; s++ {
			x += int64(r.IntN(3) - 1)
			y += int64(r.IntN(3) - 1)
			x = min(max(x, 0), int64(side)-1)
			y = min(max(y, 0), int64(side)-1)
			for z := maxZ; z >= minZ && written < n; z-- {
				k := maxZ - z
				b = appendTile(b[:0], z, uint64(x)>>k, uint64(y)>>k)
				if _, err := bw.Write(b); err != nil {
					return err
				}
				written++
			}
		}
	}
	return bw.Flush()
}

func appendTile(b []byte, z int, x, y uint64) []byte {
	b = strconv.AppendInt(b, int64(z), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, x, 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, y, 10)
	return append(b, '\n')
}
