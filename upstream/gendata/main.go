// Command gendata writes the synthetic "world" that the real upstream WMS
// (MapServer, see upstream/README.md) renders: CSV files with WKT geometry,
// which upstream/generate.sh turns into ESRI Shapefiles with ogr2ogr.
//
// Usage:
//
//	go run ./upstream/gendata [-seed N] OUTDIR
//
// It writes OUTDIR/polygons.csv, OUTDIR/roads.csv, OUTDIR/places.csv and
// OUTDIR/mosaic.csv,
// each with a .csvt sidecar giving the column types, and the raster
// OUTDIR/relief.bil with its header relief.hdr (see relief.go). The output
// depends only on the seed: the same seed gives byte-identical files.
//
//   - polygons: a jittered grid of regions (50 x 30 = 1500) covering
//     lon -180..180, lat -85..85 without gaps or overlaps. Neighbouring regions
//     share their boundaries, which are fractal (midpoint displacement), so
//     every region has about 130 vertices. Attributes: id, name, population.
//   - roads: random walks with heading persistence, 60..250 vertices each.
//     Attributes: id, kind (motorway, primary, secondary, track), name.
//   - places: points with id, name and population (log-uniform).
//   - relief: a shaded, tinted elevation raster, 7200 x 3600 RGB pixels of
//     0.05°, with thousands of colours per tile (relief.go).
//   - mosaic: 50,000 small overlapping blobs, a colour each (mosaic.go):
//     drawn antialiased, thousands of colours per tile.
//
// Only the standard library is used.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	minLon, maxLon = -180.0, 180.0
	minLat, maxLat = -85.0, 85.0

	gridCols = 50 // regions across
	gridRows = 30 // regions down: 50*30 = 1500 polygons
	edgeLvl  = 5  // midpoint-displacement depth: 2^5 = 32 segments per edge

	numRoads  = 3000
	numPlaces = 2000
)

type pt struct{ x, y float64 }

func main() {
	seed := flag.Uint64("seed", 20240601, "random seed (same seed, same output)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./upstream/gendata [-seed N] OUTDIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	out := flag.Arg(0)
	if err := os.MkdirAll(out, 0o755); err != nil {
		fatal(err)
	}
	// One independent stream per layer, so that changing one layer's
	// generator leaves the others as they were.
	if err := writePolygons(out, rand.New(rand.NewPCG(*seed, 1))); err != nil {
		fatal(err)
	}
	if err := writeRoads(out, rand.New(rand.NewPCG(*seed, 2))); err != nil {
		fatal(err)
	}
	if err := writePlaces(out, rand.New(rand.NewPCG(*seed, 3))); err != nil {
		fatal(err)
	}
	if err := writeRelief(out, rand.New(rand.NewPCG(*seed, 4))); err != nil {
		fatal(err)
	}
	if err := writeMosaic(out, rand.New(rand.NewPCG(*seed, 5))); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "gendata:", err)
	os.Exit(1)
}

// csvFile writes one CSV with a header line and its .csvt type sidecar.
type csvFile struct {
	f *os.File
	w *bufio.Writer
}

func createCSV(dir, name string, header, types []string) (*csvFile, error) {
	if err := os.WriteFile(filepath.Join(dir, name+".csvt"),
		[]byte(strings.Join(types, ",")+"\n"), 0o644); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".csv"))
	if err != nil {
		return nil, err
	}
	c := &csvFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	c.w.WriteString(strings.Join(header, ",") + "\n")
	return c, nil
}

// row writes one record; every field is quoted (values never contain quotes).
func (c *csvFile) row(fields ...string) {
	for i, s := range fields {
		if i > 0 {
			c.w.WriteByte(',')
		}
		c.w.WriteByte('"')
		c.w.WriteString(s)
		c.w.WriteByte('"')
	}
	c.w.WriteByte('\n')
}

func (c *csvFile) close() error {
	if err := c.w.Flush(); err != nil {
		c.f.Close()
		return err
	}
	return c.f.Close()
}

// coord formats one coordinate with 5 decimals (about 1 m).
func coord(b *strings.Builder, p pt) {
	b.WriteString(strconv.FormatFloat(p.x, 'f', 5, 64))
	b.WriteByte(' ')
	b.WriteString(strconv.FormatFloat(p.y, 'f', 5, 64))
}

// ---------------------------------------------------------------- names

var syllables = []string{
	"ka", "lo", "mi", "ra", "ten", "vo", "sa", "bel", "dor", "an", "is", "ur",
	"zen", "pa", "qui", "mar", "nor", "eth", "ga", "lin", "ro", "shi", "tu", "wen",
	"ya", "hol", "fir", "dan", "ce", "ox", "bra", "mun", "tor", "el", "vi", "ska",
}

// name returns a capitalised pseudo-word of 2..4 syllables.
func name(r *rand.Rand) string {
	n := 2 + r.IntN(3)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(syllables[r.IntN(len(syllables))])
	}
	s := b.String()
	return strings.ToUpper(s[:1]) + s[1:]
}

// logUniform returns an integer between lo and hi, log-uniformly distributed.
func logUniform(r *rand.Rand, lo, hi float64) int64 {
	return int64(math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))))
}

// ---------------------------------------------------------------- polygons

// The regions are the cells of a grid whose inner nodes are jittered. Each
// cell edge between two nodes becomes a fractal line; the same line (seeded
// by the edge's identity) is used by both cells that share it, so the
// regions tile the world exactly.

func writePolygons(dir string, r *rand.Rand) error {
	cw := (maxLon - minLon) / gridCols
	ch := (maxLat - minLat) / gridRows

	// Grid nodes, (gridCols+1) x (gridRows+1). Border nodes move only
	// along the border so that the union stays the full rectangle.
	nodes := make([][]pt, gridRows+1)
	for j := 0; j <= gridRows; j++ {
		nodes[j] = make([]pt, gridCols+1)
		for i := 0; i <= gridCols; i++ {
			p := pt{minLon + float64(i)*cw, minLat + float64(j)*ch}
			jx := (r.Float64() - 0.5) * 0.5 * cw
			jy := (r.Float64() - 0.5) * 0.5 * ch
			if i > 0 && i < gridCols {
				p.x += jx
			}
			if j > 0 && j < gridRows {
				p.y += jy
			}
			nodes[j][i] = p
		}
	}

	// Fractal edges: horizontal h[j][i] from node (i,j) to (i+1,j), vertical
	// v[j][i] from node (i,j) to (i,j+1). Border edges stay straight (but are
	// subdivided, so that they reproject smoothly to EPSG:3857).
	h := make([][][]pt, gridRows+1)
	for j := 0; j <= gridRows; j++ {
		h[j] = make([][]pt, gridCols)
		for i := 0; i < gridCols; i++ {
			amp := 0.22
			if j == 0 || j == gridRows {
				amp = 0
			}
			h[j][i] = fractalEdge(r, nodes[j][i], nodes[j][i+1], amp)
		}
	}
	v := make([][][]pt, gridRows)
	for j := 0; j < gridRows; j++ {
		v[j] = make([][]pt, gridCols+1)
		for i := 0; i <= gridCols; i++ {
			amp := 0.22
			if i == 0 || i == gridCols {
				amp = 0
			}
			v[j][i] = fractalEdge(r, nodes[j][i], nodes[j+1][i], amp)
		}
	}

	c, err := createCSV(dir, "polygons",
		[]string{"WKT", "id", "name", "population"},
		[]string{"WKT", "Integer", "String(40)", "Integer(10)"})
	if err != nil {
		return err
	}
	id := 0
	var b strings.Builder
	for j := 0; j < gridRows; j++ {
		for i := 0; i < gridCols; i++ {
			id++
			// Ring, counter-clockwise: bottom edge west->east, right edge
			// south->north, top edge east->west, left edge north->south.
			var ring []pt
			ring = append(ring, h[j][i]...)
			ring = append(ring, v[j][i+1][1:]...)
			ring = append(ring, reversed(h[j+1][i])[1:]...)
			ring = append(ring, reversed(v[j][i])[1:]...)
			b.Reset()
			b.WriteString("POLYGON ((")
			for k, p := range ring {
				if k > 0 {
					b.WriteByte(',')
				}
				coord(&b, p)
			}
			b.WriteString("))")
			// Population: log-uniform 10 thousand .. 500 million, so that
			// the "population" style has every class well represented.
			pop := logUniform(r, 1e4, 5e8)
			c.row(b.String(), strconv.Itoa(id), name(r), strconv.FormatInt(pop, 10))
		}
	}
	return c.close()
}

// fractalEdge returns the points from a to b (both included) of a line
// made by midpoint displacement: at each level every segment's midpoint is
// moved perpendicular by up to amp times the segment length.
func fractalEdge(r *rand.Rand, a, b pt, amp float64) []pt {
	line := []pt{a, b}
	for lvl := 0; lvl < edgeLvl; lvl++ {
		next := make([]pt, 0, 2*len(line)-1)
		for k := 0; k+1 < len(line); k++ {
			p, q := line[k], line[k+1]
			dx, dy := q.x-p.x, q.y-p.y
			d := (r.Float64()*2 - 1) * amp
			m := pt{(p.x+q.x)/2 - dy*d, (p.y+q.y)/2 + dx*d}
			// Lines next to the border must not stick out of the world.
			m.x = math.Max(minLon, math.Min(maxLon, m.x))
			m.y = math.Max(minLat, math.Min(maxLat, m.y))
			next = append(next, p, m)
		}
		next = append(next, line[len(line)-1])
		line = next
	}
	return line
}

func reversed(s []pt) []pt {
	out := make([]pt, len(s))
	for i, p := range s {
		out[len(s)-1-i] = p
	}
	return out
}

// ---------------------------------------------------------------- roads

var roadKinds = []struct {
	kind   string
	weight float64 // share of roads
	step   float64 // degrees per vertex
	wiggle float64 // heading change per vertex, radians
}{
	{"motorway", 0.10, 0.35, 0.10},
	{"primary", 0.25, 0.25, 0.20},
	{"secondary", 0.35, 0.15, 0.35},
	{"track", 0.30, 0.08, 0.60},
}

func writeRoads(dir string, r *rand.Rand) error {
	c, err := createCSV(dir, "roads",
		[]string{"WKT", "id", "kind", "name"},
		[]string{"WKT", "Integer", "String(12)", "String(40)"})
	if err != nil {
		return err
	}
	var b strings.Builder
	for id := 1; id <= numRoads; id++ {
		// Pick the kind by weight.
		x, k := r.Float64(), 0
		for ; k < len(roadKinds)-1; k++ {
			if x < roadKinds[k].weight {
				break
			}
			x -= roadKinds[k].weight
		}
		rk := roadKinds[k]
		n := 60 + r.IntN(191)
		p := pt{minLon + r.Float64()*(maxLon-minLon), -75 + r.Float64()*150}
		heading := r.Float64() * 2 * math.Pi
		b.Reset()
		b.WriteString("LINESTRING (")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			coord(&b, p)
			heading += (r.Float64()*2 - 1) * rk.wiggle
			step := rk.step * (0.5 + r.Float64())
			p.x += math.Cos(heading) * step
			p.y += math.Sin(heading) * step
			// Bounce off the edges of the world instead of wrapping.
			if p.x < minLon || p.x > maxLon {
				p.x = math.Max(minLon, math.Min(maxLon, p.x))
				heading = math.Pi - heading
			}
			if p.y < minLat || p.y > maxLat {
				p.y = math.Max(minLat, math.Min(maxLat, p.y))
				heading = -heading
			}
		}
		b.WriteString(")")
		c.row(b.String(), strconv.Itoa(id), rk.kind, name(r)+" Road")
	}
	return c.close()
}

// ---------------------------------------------------------------- places

func writePlaces(dir string, r *rand.Rand) error {
	c, err := createCSV(dir, "places",
		[]string{"WKT", "id", "name", "population"},
		[]string{"WKT", "Integer", "String(40)", "Integer(10)"})
	if err != nil {
		return err
	}
	var b strings.Builder
	for id := 1; id <= numPlaces; id++ {
		// More places towards the mid latitudes, as on the real globe.
		lat := math.Asin(r.Float64()*2-1) * 180 / math.Pi * 0.85
		lat = math.Max(minLat+1, math.Min(maxLat-1, lat))
		p := pt{minLon + 1 + r.Float64()*(maxLon-minLon-2), lat}
		b.Reset()
		b.WriteString("POINT (")
		coord(&b, p)
		b.WriteString(")")
		pop := logUniform(r, 500, 2e7)
		c.row(b.String(), strconv.Itoa(id), name(r), strconv.FormatInt(pop, 10))
	}
	return c.close()
}
