package geopackage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/internal/offlinetest"
)

// BenchmarkExport writes OFFLINE_BENCH_TILES distinct 5 KB tiles and
// reports the rate and the file's size over the tiles' bytes.
func BenchmarkExport(b *testing.B) { benchExport(b, 5000) }

// BenchmarkExportMixed is the same with a rendered map's mix of sizes.
func BenchmarkExportMixed(b *testing.B) { benchExport(b, 0) }

// BenchmarkExportRendered is the same with the sizes of the cache's
// tiles of what a WMS rendered (offlinetest.RenderedBenchTiles), in
// image/png and in image/png8.
func BenchmarkExportRendered(b *testing.B) {
	for _, f := range []string{"image/png", "image/png8"} {
		b.Run(f[len("image/"):], func(b *testing.B) { benchExportTiles(b, offlinetest.RenderedBenchTiles(b, f)) })
	}
}

func benchExport(b *testing.B, tileSize int) {
	benchExportTiles(b, offlinetest.NewBenchTiles(tileSize))
}

func benchExportTiles(b *testing.B, bt *offlinetest.BenchTiles) {
	g := builtin("EPSG:4326")
	n := offlinetest.BenchCount()
	var size, data int64
	m := offlinetest.StartMeter()
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "bench.gpkg")
		w, err := Create(path, g, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			idx, tile := bt.Tile(i)
			if err := w.Put(idx, tile); err != nil {
				b.Fatal(err)
			}
		}
		data = w.Bytes()
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()
		os.Remove(path)
	}
	m.Report(b, b.N*n)
	b.ReportMetric(100*float64(size-data)/float64(data), "%-over-tile-bytes")
	b.ReportMetric(float64(data)/float64(n), "B/tile")
}

// BenchmarkImport reads such a file back through the reader's checks.
func BenchmarkImport(b *testing.B) {
	g := builtin("EPSG:4326")
	n := offlinetest.BenchCount()
	bt := offlinetest.NewBenchTiles(5000)
	path := filepath.Join(b.TempDir(), "bench.gpkg")
	w, err := Create(path, g, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		idx, tile := bt.Tile(i)
		if err := w.Put(idx, tile); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	m := offlinetest.StartMeter()
	for b.Loop() {
		r, err := Open(path, g, "")
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		if err := r.Each(func(gridset.Index, []byte) error { got++; return nil }); err != nil {
			b.Fatal(err)
		}
		r.Close()
		if got != n {
			b.Fatalf("read %d tiles of %d", got, n)
		}
	}
	m.Report(b, b.N*n)
}
