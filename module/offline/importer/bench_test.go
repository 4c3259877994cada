package importer

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/internal/offlinetest"
	"github.com/tilecache/caddy-tilecache/module/offline/mbtiles"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// BenchmarkImportIntoBadger: an MBTiles file of OFFLINE_BENCH_TILES tiles
// of 5 KB (20,000 by default) into a fresh Badger that counts usage, both
// passes (check, store); tiles/s is over the whole import. Each round
// checks that the usage is exact afterwards.
func BenchmarkImportIntoBadger(b *testing.B) { benchImport(b, 5000) }

// BenchmarkImportIntoBadgerMixed is the same with a rendered map's mix of
// sizes (a fifth of 100 bytes, the rest 5–30 KB).
func BenchmarkImportIntoBadgerMixed(b *testing.B) { benchImport(b, 0) }

func benchImport(b *testing.B, tileSize int) {
	g, _ := gridset.Builtin("EPSG:900913")
	n := offlinetest.BenchCount()
	bt := offlinetest.NewBenchTiles(tileSize)
	path := filepath.Join(b.TempDir(), "bench.mbtiles")
	w, err := mbtiles.Create(path, g, mbtiles.Metadata{Format: "png"})
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
	cov := make([]gridset.Range, len(g.Levels))
	for z := range cov {
		cov[z] = g.GridRange(z)
	}
	m := offlinetest.StartMeter()
	for b.Loop() {
		b.StopTimer()
		st, err := store.Open(b.TempDir(), store.Options{Usage: true, MinFreeSpace: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := Import(context.Background(), Source{Path: path},
			Target{Store: st, Set: set, Gridset: g, Coverage: cov, Kinds: KindsOf("image/png")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		levels, _, err := st.Usage()
		if err != nil || len(levels) != 1 || levels[0].Tiles != int64(n) || res.Tiles != int64(n) {
			b.Fatalf("after importing %d tiles: %+v, usage %+v, %v", n, res, levels, err)
		}
		st.Release()
		b.StartTimer()
	}
	m.Report(b, n*b.N)
}
