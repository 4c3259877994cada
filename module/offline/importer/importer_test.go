package importer

import (
	"bytes"
	"context"
	"errors"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
	"github.com/tilecache/caddy-tilecache/module/offline/internal/offlinetest"
	"github.com/tilecache/caddy-tilecache/module/offline/mbtiles"
	"github.com/tilecache/caddy-tilecache/module/offline/tiledir"
	"github.com/tilecache/caddy-tilecache/module/store"
)

var set = store.Set{Layer: "roads", Gridset: "EPSG:900913", Format: "image/png"}

func openStore(t *testing.T) *store.Badger {
	st, err := store.Open(t.TempDir(), store.Options{Usage: true, MinFreeSpace: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Release() })
	return st
}

// world is levels 0..3 of the web mercator grid, every tile distinct but
// the left half of level 3, which is all one sea tile.
func world(g *gridset.Gridset) map[gridset.Index][]byte {
	sea := offlinetest.Solid(256, 256, color.NRGBA{20, 60, 200, 255}, false)
	tiles := map[gridset.Index][]byte{}
	for z := 0; z <= 3; z++ {
		r := g.GridRange(z)
		for x := r.MinX; x <= r.MaxX; x++ {
			for y := r.MinY; y <= r.MaxY; y++ {
				idx := gridset.Index{Z: z, X: x, Y: y}
				if z == 3 && x < 4 {
					tiles[idx] = sea
				} else {
					tiles[idx] = offlinetest.Tile(256, 256, idx)
				}
			}
		}
	}
	return tiles
}

func writeMBTiles(t *testing.T, g *gridset.Gridset, tiles map[gridset.Index][]byte) string {
	path := filepath.Join(t.TempDir(), "world.mbtiles")
	w, err := mbtiles.Create(path, g, mbtiles.Metadata{Name: "world", Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	for idx, data := range tiles {
		if err := w.Put(idx, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func whole(g *gridset.Gridset) []gridset.Range {
	cov := make([]gridset.Range, len(g.Levels))
	for z := range cov {
		cov[z] = g.GridRange(z)
	}
	return cov
}

// usage sums the store's usage of set.
func usage(t *testing.T, st *store.Badger) (tiles, size int64) {
	levels, _, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range levels {
		if l.Set == set {
			tiles, size = tiles+l.Tiles, size+l.Bytes
		}
	}
	return tiles, size
}

func TestImportStoresEveryTileOnceAndCountsUsage(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	tiles := world(g)
	path := writeMBTiles(t, g, tiles)
	st := openStore(t)
	tgt := Target{Store: st, Set: set, Gridset: g, Coverage: whole(g), Kinds: KindsOf("image/png")}
	var calls int
	res, err := Import(context.Background(), Source{Path: path}, tgt, func(int64) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, d := range tiles {
		want += int64(len(d))
	}
	if res.Kind != MBTiles || res.Tiles != int64(len(tiles)) || res.Bytes != want || res.MinZoom != 0 || res.MaxZoom != 3 {
		t.Fatalf("result %+v, want %d tiles of %d bytes, levels 0..3, from mbtiles", res, len(tiles), want)
	}
	if calls == 0 {
		t.Error("progress was never reported")
	}
	for idx, data := range tiles {
		got, err := st.Get(context.Background(), store.Key{Set: set, Z: idx.Z, X: idx.X, Y: idx.Y}, nil)
		if err != nil {
			t.Fatalf("tile %v: %v", idx, err)
		}
		if !bytes.Equal(got.Data, data) {
			t.Fatalf("tile %v: %d bytes stored, %d in the file", idx, len(got.Data), len(data))
		}
	}
	n1, b1 := usage(t, st)
	// Imported again (an interrupted import completed): the same usage.
	if _, err := Import(context.Background(), Source{Path: path}, tgt, nil); err != nil {
		t.Fatal(err)
	}
	n2, b2 := usage(t, st)
	if n1 != int64(len(tiles)) || n2 != n1 || b2 != b1 || b1 < want {
		t.Errorf("usage %d tiles %d bytes after one import, %d/%d after two; want %d tiles of at least %d bytes both times",
			n1, b1, n2, b2, len(tiles), want)
	}
}

func TestImportLeavesOutTilesOutsideTheLayer(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	tiles := world(g)
	path := writeMBTiles(t, g, tiles)
	st := openStore(t)
	cov := whole(g)
	cov[3] = gridset.Range{MinX: 0, MinY: 0, MaxX: 1, MaxY: 1} // 4 tiles of level 3
	cov[2] = gridset.Range{MinX: 1, MinY: 1, MaxX: 0, MaxY: 0} // none of level 2
	res, err := Import(context.Background(), Source{Path: path}, Target{Store: st, Set: set, Gridset: g, Coverage: cov, Kinds: KindsOf("image/png")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tiles != 1+4+4 || res.Outside != int64(len(tiles))-9 {
		t.Fatalf("result %+v: want 9 tiles stored (levels 0, 1 and four of 3), %d outside", res, len(tiles)-9)
	}
	if _, err := st.Get(context.Background(), store.Key{Set: set, Z: 2, X: 0, Y: 0}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a level-2 tile outside the layer was stored (err %v)", err)
	}
}

// A source with one tile the set cannot hold is refused whole: nothing
// is stored, and the message names the tile.
func TestImportRefusesABadSourceWhole(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	tiles := world(g)
	path := writeMBTiles(t, g, tiles)
	st := openStore(t)
	jpegSet := set
	jpegSet.Format = "image/jpeg"
	tgt := Target{Store: st, Set: jpegSet, Gridset: g, Coverage: whole(g), Kinds: KindsOf("image/jpeg")}
	_, err := Import(context.Background(), Source{Path: path}, tgt, nil)
	var bs *BadSource
	if !errors.As(err, &bs) || !strings.Contains(err.Error(), "is a PNG image; tile set image/jpeg holds JPEG") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a PNG file into a JPEG set: %v, want a one-line BadSource naming the tile", err)
	}
	if levels, _, _ := st.Usage(); len(levels) != 0 {
		t.Errorf("tiles stored from a refused file: %+v", levels)
	}

	// Not SQLite, cut short, and a GeoPackage of another gridset.
	junk := filepath.Join(t.TempDir(), "junk.mbtiles")
	os.WriteFile(junk, []byte("<html>not found</html>"), 0o644)
	data, _ := os.ReadFile(path)
	cut := filepath.Join(t.TempDir(), "cut.mbtiles")
	os.WriteFile(cut, data[:len(data)/2], 0o644)
	g4326, _ := gridset.Builtin("EPSG:4326")
	gpkg := filepath.Join(t.TempDir(), "geo.gpkg")
	w, err := geopackage.Create(gpkg, g4326, geopackage.Options{Table: "geo"})
	if err != nil {
		t.Fatal(err)
	}
	w.Put(gridset.Index{Z: 0, X: 0, Y: 0}, offlinetest.Tile(256, 256, gridset.Index{}))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{junk, "not an SQLite file"},
		{cut, "truncated"},
		{gpkg, "EPSG:4326"},
		{filepath.Join(t.TempDir(), "none.mbtiles"), "no such file"},
	} {
		_, err := Import(context.Background(), Source{Path: c.path}, Target{Store: st, Set: set, Gridset: g, Coverage: whole(g), Kinds: KindsOf("image/png")}, nil)
		if !errors.As(err, &bs) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line BadSource saying %q", filepath.Base(c.path), err, c.want)
		}
	}
	if n, _ := usage(t, st); n != 0 {
		t.Errorf("%d tiles stored from refused files", n)
	}
}

// A tree is walked twice (checked, then stored): its stray files count once.
func TestImportOfATreeCountsStrayFilesOnce(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	root := t.TempDir()
	for _, idx := range []gridset.Index{{Z: 1, X: 0, Y: 0}, {Z: 1, X: 1, Y: 1}} {
		p := filepath.Join(root, "1", strconv.FormatInt(idx.X, 10), strconv.FormatInt(idx.Y, 10)+".png")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, offlinetest.Tile(256, 256, idx), 0o644)
	}
	os.WriteFile(filepath.Join(root, "tilemapresource.xml"), []byte("<TileMap/>"), 0o644)
	st := openStore(t)
	res, err := Import(context.Background(), Source{Path: root, Dir: tiledir.Options{Layout: "tms"}},
		Target{Store: st, Set: set, Gridset: g, Coverage: whole(g), Kinds: KindsOf("image/png")}, nil)
	if err != nil || res.Kind != Directory || res.Tiles != 2 || res.Skipped != 1 {
		t.Fatalf("a tms tree of 2 tiles and one XML file: %+v, %v", res, err)
	}
}

// failingStore fails its failAt-th Put, as a full disk would.
type failingStore struct {
	store.Store
	puts, failAt int
}

func (f *failingStore) Put(e []store.Entry, at time.Time) error {
	f.puts++
	if f.puts == f.failAt {
		return errors.New("no space left on device")
	}
	return f.Store.Put(e, at)
}

// A store that fails mid-import (the batches are stored while the next is
// read): the import ends with a StoreError, every batch before the failed
// one is stored and counted, none after it is, and importing again
// completes the set with the usage exact.
func TestImportStoreFailureMidway(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	tiles := map[gridset.Index][]byte{}
	for z := 0; z <= 5; z++ {
		r := g.GridRange(z)
		for x := r.MinX; x <= r.MaxX; x++ {
			for y := r.MinY; y <= r.MaxY; y++ {
				idx := gridset.Index{Z: z, X: x, Y: y}
				tiles[idx] = offlinetest.Tile(256, 256, idx)
			}
		}
	}
	path := writeMBTiles(t, g, tiles) // 1,365 tiles: six batches
	st := openStore(t)
	fs := &failingStore{Store: st, failAt: 3}
	tgt := Target{Store: fs, Set: set, Gridset: g, Coverage: whole(g), Kinds: KindsOf("image/png")}
	var last int64
	_, err := Import(context.Background(), Source{Path: path}, tgt, func(n int64) { last = n })
	var se *StoreError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("import onto a failing store: %v, want a StoreError", err)
	}
	if n, _ := usage(t, st); n != 2*batch || last != 2*batch || fs.puts != 3 {
		t.Fatalf("after the third batch failed: %d tiles stored, progress %d, %d Puts; want %d, %d, 3", n, last, fs.puts, 2*batch, 2*batch)
	}
	tgt.Store = st
	res, err := Import(context.Background(), Source{Path: path}, tgt, nil)
	if err != nil || res.Tiles != int64(len(tiles)) {
		t.Fatalf("import again: %+v, %v", res, err)
	}
	// The usage of one clean import into a fresh store.
	clean := openStore(t)
	tgt.Store = clean
	if _, err := Import(context.Background(), Source{Path: path}, tgt, nil); err != nil {
		t.Fatal(err)
	}
	wantN, wantSize := usage(t, clean)
	if n, size := usage(t, st); n != int64(len(tiles)) || n != wantN || size != wantSize {
		t.Fatalf("usage after the second import: %d tiles, %d bytes; a clean import's %d, %d", n, size, wantN, wantSize)
	}
}
