package imaging

import (
	"bytes"
	stdzlib "compress/zlib"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Benchmarks of the PNG encoder on real and synthetic tiles. Each reports
// ns/tile and B/tile (the mean encoded size), so one run gives the table
// of time and size per setting, against "main": the encoder this package
// had before (tiles of ≤ 256 colours palettized, then image/png at
// DefaultCompression, whose adaptive filters and compress/flate were 77 %
// of Caddy's CPU in a seed).
//
//	go test ./module/imaging/ -run '^$' -bench 'BenchmarkPNG$'
//	go test ./module/imaging/ -run '^$' -bench 'BenchmarkPNGCandidates'

// benchSet is a named set of 256 px tiles cut from 1024 px metatiles.
type benchSet struct {
	name  string
	tiles []image.Image
}

// benchSets: MapServer 8 metatiles of this project's upstream (upstream/,
// EPSG:4326, 1024×1024, as fetched by GetMap; see testdata/mapserver/
// README), and synthetic ones with far more than 256 colours per tile.
var benchSets = sync.OnceValue(func() []benchSet {
	var sets []benchSet
	add := func(name string, metas ...image.Image) {
		s := benchSet{name: name}
		for _, m := range metas {
			tiles, err := Slice(m, 4, 4, 256, 256, Gutter{})
			if err != nil {
				panic(err)
			}
			s.tiles = append(s.tiles, tiles...)
		}
		sets = append(sets, s)
	}
	add("mapserver-polygons", testMetatiles("polygons-z3-0-0.png", "polygons-z4-m45-0.png", "polygons-z5-0-22.5.png")...)
	add("mapserver-population", testMetatiles("population-z4-m45-0.png")...)
	add("mapserver-all-layers", testMetatiles("all-layers-z5-0-22.5.png")...)
	add("mapserver-mosaic", testMetatiles("mosaic-z4-m45-0.png")...)
	add("synthetic-aa-polygons", renderMap(1024, 1024, 16, 7))
	add("synthetic-topo", topoMap(1024, 1024, 3))
	add("synthetic-hillshade", hillshade(1024, 1024, 3))
	add("synthetic-relief-zoomed", relief(1024, 1024, 3, 16))
	// Open sea on the left, nothing (transparent) on the right: every
	// tile is one colour.
	sea := image.NewNRGBA(image.Rect(0, 0, 1024, 1024))
	draw.Draw(sea, image.Rect(0, 0, 512, 1024), image.NewUniform(color.NRGBA{170, 211, 223, 255}), image.Point{}, draw.Src)
	add("synthetic-uniform", sea)
	return sets
})

func testMetatiles(names ...string) []image.Image {
	var out []image.Image
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "mapserver", n))
		if err != nil {
			panic(err)
		}
		m, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			panic(fmt.Sprintf("%s: %v", n, err))
		}
		out = append(out, m)
	}
	return out
}

// mainEncoder and mainPNG reproduce the PNG path this package had before
// its own writer: palettize tiles of ≤ 256 colours exactly, hand the rest
// to image/png.
var mainEncoder = png.Encoder{CompressionLevel: png.DefaultCompression, BufferPool: &pngBufferPool{}}

func mainPNG(buf *bytes.Buffer, tile image.Image) error {
	var pix []byte
	var stride int
	var premul bool
	switch t := tile.(type) {
	case *image.NRGBA:
		pix, stride = t.Pix[t.PixOffset(t.Rect.Min.X, t.Rect.Min.Y):], t.Stride
	case *image.RGBA:
		pix, stride, premul = t.Pix[t.PixOffset(t.Rect.Min.X, t.Rect.Min.Y):], t.Stride, true
	default:
		return mainEncoder.Encode(buf, tile)
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	b := tile.Bounds()
	n := s.palettize(pix, stride, b.Dx(), b.Dy())
	if n == 0 {
		return mainEncoder.Encode(buf, tile)
	}
	pal := make(color.Palette, n)
	for i, k := range s.pal.colors[:n] {
		c := [4]uint8{uint8(k), uint8(k >> 8), uint8(k >> 16), uint8(k >> 24)}
		if premul {
			pal[i] = color.RGBA{c[0], c[1], c[2], c[3]}
		} else {
			pal[i] = color.NRGBA{c[0], c[1], c[2], c[3]}
		}
	}
	p := &image.Paletted{Pix: s.idx, Stride: b.Dx(), Rect: b, Palette: pal}
	return mainEncoder.Encode(buf, p)
}

// benchEncode encodes every tile of set per iteration.
func benchEncode(b *testing.B, set benchSet, enc func(*bytes.Buffer, image.Image) error) {
	b.ReportAllocs()
	var buf bytes.Buffer
	total := 0
	for b.Loop() {
		total = 0
		for _, tile := range set.tiles {
			buf.Reset()
			if err := enc(&buf, tile); err != nil {
				b.Fatal(err)
			}
			total += buf.Len()
		}
	}
	n := float64(len(set.tiles))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/tile")
	b.ReportMetric(float64(total)/n, "B/tile")
}

// BenchmarkPNG compares main's encoder with each PNGCompression.
func BenchmarkPNG(b *testing.B) {
	for _, set := range benchSets() {
		b.Run(set.name+"/main", func(b *testing.B) { benchEncode(b, set, mainPNG) })
		for _, c := range []PNGCompression{PNGFast, PNGDefault, PNGBest} {
			e := Encoder{PNG: c}
			b.Run(set.name+"/"+c.String(), func(b *testing.B) {
				benchEncode(b, set, func(buf *bytes.Buffer, tile image.Image) error {
					return e.Encode(buf, tile, pngFormat)
				})
			})
		}
	}
}

// BenchmarkPNGCandidates measures the settings the PNGCompression values
// were chosen from: every deflate level with the estimated filter, and at
// the default's levels every filter strategy. Names are
// L<flat level>.<tone level>-<filter>.
func BenchmarkPNGCandidates(b *testing.B) {
	def := mustSettings(PNGDefault)
	names := map[filterStrategy]string{filterNone: "none", filterUp: "up", filterAdaptive: "adaptive",
		filterEstimate: "estimate", filterTrial: "trial"}
	var cands []pngSettings
	for level := 1; level <= 9; level++ {
		cands = append(cands, pngSettings{flatLevel: level, toneLevel: level, filter: filterEstimate})
	}
	for _, f := range []filterStrategy{filterNone, filterUp, filterAdaptive, filterTrial} {
		cands = append(cands, pngSettings{flatLevel: def.flatLevel, toneLevel: def.toneLevel, filter: f})
	}
	for _, set := range benchSets() {
		for _, c := range cands {
			b.Run(fmt.Sprintf("%s/L%d.%d-%s", set.name, c.flatLevel, c.toneLevel, names[c.filter]), func(b *testing.B) {
				benchEncode(b, set, func(buf *bytes.Buffer, tile image.Image) error {
					return encodePNG(buf, tile, c)
				})
			})
		}
	}
}

// BenchmarkMetatile is a miss's local work on one real MapServer
// metatile: decode the 1024² PNG, slice it 4×4 and encode the 16 tiles
// (on one core; the cache spreads tiles over cores), with main's encoder
// and each PNGCompression.
func BenchmarkMetatile(b *testing.B) {
	for _, n := range []string{"polygons-z4-m45-0.png", "population-z4-m45-0.png", "all-layers-z5-0-22.5.png"} {
		body, err := os.ReadFile(filepath.Join("testdata", "mapserver", n))
		if err != nil {
			b.Fatal(err)
		}
		encoders := map[string]func(*bytes.Buffer, image.Image) error{"main": mainPNG}
		for _, c := range []PNGCompression{PNGFast, PNGDefault, PNGBest} {
			e := Encoder{PNG: c}
			encoders[c.String()] = func(buf *bytes.Buffer, tile image.Image) error { return e.Encode(buf, tile, pngFormat) }
		}
		for _, name := range []string{"main", "fast", "default", "best"} {
			enc := encoders[name]
			b.Run(n+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				benchMetatile(b, body, enc)
			})
		}
	}
}

// benchMetatile decodes the 1024² metatile body, slices it 4×4 and
// encodes every tile with enc, b.N times.
func benchMetatile(b *testing.B, body []byte, enc func(*bytes.Buffer, image.Image) error) {
	var buf bytes.Buffer
	for b.Loop() {
		img, err := Decode("image/png", body, 1024, 1024)
		if err != nil {
			b.Fatal(err)
		}
		tiles, err := Slice(img, 4, 4, 256, 256, Gutter{})
		if err != nil {
			b.Fatal(err)
		}
		for _, tile := range tiles {
			buf.Reset()
			if err := enc(&buf, tile); err != nil {
				b.Fatal(err)
			}
		}
		// As the cache will: every tile is encoded.
		Recycle(img)
	}
}

// BenchmarkMetatileFormats is a miss's local work per tile format on a
// real MapServer metatile: decode the 1024² PNG, slice it 4×4 and encode
// the 16 tiles on one core, png against png8 (the quantizer's cost shows
// as the difference). Metatiles beyond testdata's (a shaded relief is 1.4
// MB and more, too big to keep) are named in BENCH_METATILES, separated
// by colons:
//
//	go test ./module/imaging/ -run '^$' -bench 'BenchmarkMetatileFormats'
func BenchmarkMetatileFormats(b *testing.B) {
	paths := []string{
		filepath.Join("testdata", "mapserver", "mosaic-z4-m45-0.png"),
		filepath.Join("testdata", "mapserver", "all-layers-z5-0-22.5.png"),
	}
	if extra := os.Getenv("BENCH_METATILES"); extra != "" {
		paths = append(paths, filepath.SplitList(extra)...)
	}
	for _, path := range paths {
		body, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, mime := range []string{mimePNG, mimePNG8} {
			f := Format{MIME: mime}
			var e Encoder
			b.Run(filepath.Base(path)+"/"+mime, func(b *testing.B) {
				benchMetatile(b, body, func(buf *bytes.Buffer, tile image.Image) error { return e.Encode(buf, tile, f) })
			})
		}
	}
}

// BenchmarkPNGAgainstZlib6 sets the default encoder against zlib level 6
// (Go's compress/zlib) on the very same filtered rows, tile by tile: the
// bar of issue 22, which asks that no tile be larger. "ours" reports the
// mean PNG and IDAT sizes, the IDATs' ratio to zlib 6's and how many tiles
// came out larger; "zlib6" the time zlib 6 alone takes to compress the
// rows, and its mean IDAT.
func BenchmarkPNGAgainstZlib6(b *testing.B) {
	for _, set := range benchSets() {
		var ours, zlib6, larger int
		var rows [][]byte
		for _, tile := range set.tiles {
			var buf bytes.Buffer
			if err := (&Encoder{}).Encode(&buf, tile, pngFormat); err != nil {
				b.Fatal(err)
			}
			idat, raw := idatRows(b, buf.Bytes())
			z := zlib6Size(raw)
			ours, zlib6 = ours+len(idat), zlib6+z
			if len(idat) > z {
				larger++
			}
			rows = append(rows, raw)
		}
		n := float64(len(set.tiles))
		b.Run(set.name+"/ours", func(b *testing.B) {
			e := Encoder{}
			benchEncode(b, set, func(buf *bytes.Buffer, tile image.Image) error { return e.Encode(buf, tile, pngFormat) })
			b.ReportMetric(float64(ours)/n, "idat_B/tile")
			b.ReportMetric(float64(ours)/float64(zlib6), "x_zlib6")
			b.ReportMetric(float64(larger), "larger_tiles")
			b.ReportMetric(n, "tiles")
		})
		b.Run(set.name+"/zlib6", func(b *testing.B) {
			for b.Loop() {
				for _, r := range rows {
					zlib6Size(r)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/tile")
			b.ReportMetric(float64(zlib6)/n, "idat_B/tile")
		})
	}
}

// idatRows returns a PNG's IDAT data and the filtered rows it inflates to.
func idatRows(tb testing.TB, p []byte) (idat, rows []byte) {
	tb.Helper()
	for b := p[8:]; len(b) >= 12; {
		n := binary.BigEndian.Uint32(b)
		if string(b[4:8]) == "IDAT" {
			idat = append(idat, b[8:8+n]...)
		}
		b = b[12+n:]
	}
	zr, err := stdzlib.NewReader(bytes.NewReader(idat))
	if err != nil {
		tb.Fatal(err)
	}
	rows, err = io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	return idat, rows
}

// zlib6Size is what Go's zlib makes of rows at level 6.
func zlib6Size(rows []byte) int {
	var buf bytes.Buffer
	w, _ := stdzlib.NewWriterLevel(&buf, 6)
	w.Write(rows)
	w.Close()
	return buf.Len()
}
