package mbtiles

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/internal/offlinetest"
	"github.com/tilecache/caddy-tilecache/module/offline/sqlitefile"
)

func mercator(t testing.TB) *gridset.Gridset {
	g, _ := gridset.Builtin("EPSG:900913")
	return g
}

// topLeftMercator is the same world grid with its origin at the top-left,
// as WMTS's GoogleMapsCompatible is usually configured.
func topLeftMercator(t testing.TB) *gridset.Gridset {
	res := make([]float64, 8)
	for i := range res {
		res[i] = 156543.03390625 / math.Exp2(float64(i))
	}
	e := gridset.WebMercatorExtent
	g, err := gridset.New(gridset.Config{Name: "GoogleMapsCompatible", SRS: "EPSG:3857",
		Extent: [4]float64{-e, -e, e, e}, Resolutions: res, Origin: "top_left"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// pyramid is every tile of levels 0..maxZ, the left half of the top level
// all one "sea" tile, so that deduplication has something to do.
func pyramid(g *gridset.Gridset, maxZ int) (map[gridset.Index][]byte, int) {
	sea := offlinetest.Solid(g.TileWidth, g.TileHeight, color.NRGBA{20, 60, 200, 255}, false)
	tiles := map[gridset.Index][]byte{}
	unique := 1
	for z := 0; z <= maxZ; z++ {
		r := g.GridRange(z)
		for x := r.MinX; x <= r.MaxX; x++ {
			for y := r.MinY; y <= r.MaxY; y++ {
				idx := gridset.Index{Z: z, X: x, Y: y}
				if z == maxZ && x < (r.MaxX+1)/2 {
					tiles[idx] = sea
					continue
				}
				tiles[idx] = offlinetest.Tile(g.TileWidth, g.TileHeight, idx)
				unique++
			}
		}
	}
	return tiles, unique
}

func write(t testing.TB, path string, g *gridset.Gridset, tiles map[gridset.Index][]byte) Stats {
	t.Helper()
	w, err := Create(path, g, Metadata{Name: "test", Format: "png", Description: "round trip"})
	if err != nil {
		t.Fatal(err)
	}
	for idx, data := range tiles {
		if err := w.Put(idx, data); err != nil {
			t.Fatal(err)
		}
	}
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return st
}

func count(t testing.TB, path, sql string) int64 {
	t.Helper()
	c, err := sqlitefile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.Prepare(sql)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Step() {
		t.Fatal(st.Err())
	}
	return st.ColumnInt64(0)
}

func TestRoundTrip(t *testing.T) {
	for _, g := range []*gridset.Gridset{mercator(t), topLeftMercator(t)} {
		t.Run(g.Name, func(t *testing.T) {
			path := offlinetest.TempFile(t, "rt.mbtiles")
			tiles, unique := pyramid(g, 3)
			st := write(t, path, g, tiles)
			if st.Tiles != int64(len(tiles)) || st.Images != int64(unique) {
				t.Errorf("stats %+v, want %d tiles, %d images", st, len(tiles), unique)
			}
			if n := count(t, path, "SELECT count(*) FROM images"); n != int64(unique) {
				t.Errorf("images holds %d rows, want %d distinct images of %d tiles", n, unique, len(tiles))
			}
			if n := count(t, path, "SELECT count(*) FROM tiles"); n != int64(len(tiles)) {
				t.Errorf("tiles view has %d rows, want %d", n, len(tiles))
			}
			// TMS rows: the top-left tile of level 3 is row 7.
			if n := count(t, path, "SELECT count(*) FROM map WHERE zoom_level = 3 AND tile_column = 7 AND tile_row = 7"); n != 1 {
				t.Errorf("no tile at TMS 3/7/7")
			}
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
				t.Errorf("left beside the file: %v", ents)
			}

			r, err := Open(path, g)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			md := r.Metadata()
			for k, v := range map[string]string{"name": "test", "format": "png", "type": "baselayer", "minzoom": "0", "maxzoom": "3",
				"description": "round trip", "bounds": "-180,-85.0511288,180,85.0511288", "center": "0,0,0"} {
				if md[k] != v {
					t.Errorf("metadata %s = %q, want %q", k, md[k], v)
				}
			}
			if r.Format() != "png" {
				t.Errorf("format %q", r.Format())
			}
			seen := 0
			err = r.Each(func(idx gridset.Index, data []byte) error {
				want, ok := tiles[idx]
				if !ok {
					return fmt.Errorf("unexpected tile %v", idx)
				}
				if !bytes.Equal(data, want) {
					return fmt.Errorf("tile %v differs", idx)
				}
				seen++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if seen != len(tiles) {
				t.Errorf("read %d tiles, wrote %d", seen, len(tiles))
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	wgs84, _ := gridset.Builtin("EPSG:4326")
	if _, err := Create(offlinetest.TempFile(t, "x.mbtiles"), wgs84, Metadata{Format: "png"}); err == nil || !strings.Contains(err.Error(), "web mercator") {
		t.Errorf("EPSG:4326 gridset: %v", err)
	}
	if _, err := Create(offlinetest.TempFile(t, "x.mbtiles"), mercator(t), Metadata{Format: "gif"}); err == nil {
		t.Error("gif accepted")
	}
	path := offlinetest.TempFile(t, "dup.mbtiles")
	w, err := Create(path, mercator(t), Metadata{Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	tile := offlinetest.Tile(256, 256, gridset.Index{})
	if err := w.Put(gridset.Index{}, tile); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(gridset.Index{Z: 1, X: 2}, tile); err == nil {
		t.Error("a tile outside the grid was accepted")
	}
	// Rows wait in a window: a tile written twice is refused by Put or,
	// at the latest, by Close, and then nothing is left.
	err = w.Put(gridset.Index{}, tile)
	if err == nil {
		err = w.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "tile 0/0/0") {
		t.Errorf("a tile written twice: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the refusal %s: %v", path, err)
	}
}

// TestAbandoned: a writer given up before Close, in this process or by a
// kill -9 of the process, leaves nothing under the final name.
func TestAbandoned(t *testing.T) {
	g := mercator(t)
	path := offlinetest.TempFile(t, "gone.mbtiles")
	w, err := Create(path, g, Metadata{Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	tiles, _ := pyramid(g, 2)
	for idx, data := range tiles {
		if err := w.Put(idx, data); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("final name exists before Close: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
		t.Errorf("Abort left %v", ents)
	}
}

// TestKilled runs a writer in a child process, kills it with SIGKILL once
// it has committed tiles, and checks that only the .partial is left, and
// that a new writer of the same name replaces it.
func TestKilled(t *testing.T) {
	if path := os.Getenv("MBTILES_TEST_WRITER"); path != "" {
		writeForever(path)
		return
	}
	path := offlinetest.TempFile(t, "killed.mbtiles")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilled$")
	cmd.Env = append(os.Environ(), "MBTILES_TEST_WRITER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child says "committed" once a batch is in the file.
	buf := make([]byte, 64)
	var said []byte
	for !bytes.Contains(said, []byte("committed")) {
		n, err := out.Read(buf)
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("child: %v (%s)", err, said)
		}
		said = append(said, buf[:n]...)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("final name exists after kill -9: %v", err)
	}
	if st, err := os.Stat(path + sqlitefile.PartialSuffix); err != nil || st.Size() == 0 {
		t.Fatalf("no partial file after kill -9: %v", err)
	}
	if _, err := Open(path, mercator(t)); err == nil {
		t.Fatal("opened a file that was never finished")
	}
	write(t, path, mercator(t), map[gridset.Index][]byte{{}: offlinetest.Tile(256, 256, gridset.Index{})})
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("stale partial files not replaced: %v", ents)
	}
}

func writeForever(path string) {
	g, _ := gridset.Builtin("EPSG:900913")
	w, err := Create(path, g, Metadata{Format: "png"})
	if err != nil {
		panic(err)
	}
	tile := offlinetest.Tile(256, 256, gridset.Index{})
	for i := int64(0); ; i++ {
		idx := gridset.Index{Z: 12, X: i % 4096, Y: i / 4096 % 4096}
		if err := w.Put(idx, append(tile, byte(i), byte(i>>8), byte(i>>16))); err != nil {
			panic(err)
		}
		if i == 5000 { // past the first commit (batches of 4096)
			fmt.Println("committed")
		}
		if i > 5000 {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	g := mercator(t)
	good := filepath.Join(dir, "good.mbtiles")
	write(t, good, g, func() map[gridset.Index][]byte { m, _ := pyramid(g, 3); return m }())
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"empty.mbtiles":     {},
		"text.mbtiles":      []byte("this is not a database\n"),
		"truncated.mbtiles": data[:len(data)/2],
		"header.mbtiles":    data[:50],
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An SQLite file without the MBTiles tables.
	other := filepath.Join(dir, "other.mbtiles")
	b, err := sqlitefile.Create(other, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Exec("CREATE TABLE things (a, b)"); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"empty.mbtiles":     "empty file",
		"text.mbtiles":      "not an SQLite file",
		"header.mbtiles":    "not an SQLite file",
		"truncated.mbtiles": "truncated SQLite file",
		"other.mbtiles":     "no tiles table",
		"missing.mbtiles":   "no such file",
		".":                 "is a directory",
	} {
		_, err := Open(filepath.Join(dir, name), g)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line with %q", name, err, want)
		}
	}
}

func TestGDALReads(t *testing.T) {
	offlinetest.Need(t, "gdalinfo")
	g := mercator(t)
	path := offlinetest.TempFile(t, "gdal.mbtiles")
	tiles, _ := pyramid(g, 3)
	// A mixed tile set (image/vnd.jpeg-png): one tile is JPEG, the
	// metadata says png, and GDAL decodes the tile by its bytes.
	jpegIdx := gridset.Index{Z: 3, X: 7, Y: 2}
	img, _, err := image.Decode(bytes.NewReader(tiles[jpegIdx]))
	if err != nil {
		t.Fatal(err)
	}
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	tiles[jpegIdx] = jb.Bytes()
	write(t, path, g, tiles)
	info := offlinetest.Run(t, "gdalinfo", path)
	for _, want := range []string{"Driver: MBTiles/MBTiles", "Size is 2048, 2048", "Overviews: 1024x1024, 512x512, 256x256",
		"ZOOM_LEVEL=3", "Upper Left  (-20037508.34", "Lower Right (20037508.34"} {
		if !strings.Contains(info, want) {
			t.Errorf("gdalinfo lacks %q:\n%s", want, info)
		}
	}
	// Tiles read back through GDAL equal the tiles written: full
	// resolution and overviews, rows of either half.
	for _, c := range []struct {
		idx      gridset.Index
		overview int
	}{
		{gridset.Index{Z: 3, X: 6, Y: 1}, -1},
		{gridset.Index{Z: 3, X: 5, Y: 7}, -1},
		{gridset.Index{Z: 3, X: 0, Y: 3}, -1}, // a "sea" tile
		{gridset.Index{Z: 2, X: 1, Y: 3}, 0},
		{gridset.Index{Z: 1, X: 1, Y: 0}, 1},
	} {
		b := g.TileBBox(c.idx)
		got := offlinetest.GDALPixels(t, path, b.MinX, b.MaxY, 256, 256, c.overview)
		if want := offlinetest.RGBA(t, tiles[c.idx]); !bytes.Equal(got, want) {
			t.Errorf("tile %v read through GDAL differs from the tile written", c.idx)
		}
	}
	// libjpeg and Go's decoder upsample a JPEG's colour differently,
	// which at the marker's sharp edge is tens of levels on a few pixels;
	// on average they agree within a level or two, where a misplaced tile
	// (another colour everywhere) differs by tens.
	b := g.TileBBox(jpegIdx)
	got := offlinetest.GDALPixels(t, path, b.MinX, b.MaxY, 256, 256, -1)
	want := offlinetest.RGBA(t, tiles[jpegIdx])
	sum := 0
	for i := range want {
		d := int(got[i]) - int(want[i])
		sum += max(d, -d)
	}
	if mean := float64(sum) / float64(len(want)); mean > 2 {
		t.Errorf("JPEG tile %v read through GDAL differs by %.1f levels on average", jpegIdx, mean)
	}
}

// TestEmpty: an export of nothing is a valid file that reads as nothing.
func TestEmpty(t *testing.T) {
	path := offlinetest.TempFile(t, "empty.mbtiles")
	write(t, path, mercator(t), nil)
	r, err := Open(path, mercator(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	if err := r.Each(func(gridset.Index, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("%d tiles, %v", n, err)
	}
	if r.Metadata()["format"] != "png" || r.Format() != "" {
		t.Errorf("metadata %v, format %q", r.Metadata(), r.Format())
	}
}

// TestImportGDAL imports files GDAL made from a raster of the world in
// web mercator, and refuses one made with another tile size.
func TestImportGDAL(t *testing.T) {
	offlinetest.Need(t, "gdal_translate")
	dir := t.TempDir()
	src := filepath.Join(dir, "world.png")
	img := image.NewNRGBA(image.Rect(0, 0, 512, 512))
	for y := 0; y < 512; y++ {
		for x := 0; x < 512; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x / 2), uint8(y / 2), uint8((x / 64) * 30), 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	if err := os.WriteFile(src, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	e := strconv.FormatFloat(gridset.WebMercatorExtent, 'f', -1, 64)
	georef := []string{"-a_srs", "EPSG:3857", "-a_ullr", "-" + e, e, e, "-" + e}
	ok := filepath.Join(dir, "ok.mbtiles")
	offlinetest.Run(t, "gdal_translate", append(append([]string{"-q", "-of", "MBTILES"}, georef...), src, ok)...)
	g := mercator(t)
	r, err := Open(ok, g)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[gridset.Index][]byte{}
	if err := r.Each(func(idx gridset.Index, data []byte) error {
		got[idx] = bytes.Clone(data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("imported %d tiles, want the 4 of level 1: %v", len(got), got)
	}
	// Tile 1/0/1 (bottom-counted) is the top-left quarter of the source.
	tile, ok1 := got[gridset.Index{Z: 1, X: 0, Y: 1}]
	if !ok1 {
		t.Fatalf("no tile 1/0/1 in %v", got)
	}
	want := offlinetest.RGBA(t, buf.Bytes())
	have := offlinetest.RGBA(t, tile)
	for y := 0; y < 256; y++ {
		if !bytes.Equal(have[y*256*4:(y+1)*256*4], want[y*512*4:y*512*4+256*4]) {
			t.Fatalf("tile 1/0/1 row %d is not the source's top-left quarter", y)
		}
	}

	big := filepath.Join(dir, "512.mbtiles")
	offlinetest.Run(t, "gdal_translate", append(append([]string{"-q", "-of", "MBTILES", "-co", "BLOCKSIZE=512"}, georef...), src, big)...)
	if _, err := Open(big, g); err == nil || !strings.Contains(err.Error(), "tile size 512×512 is not gridset EPSG:900913's 256×256") {
		t.Errorf("512-pixel tiles: %v", err)
	}
	wgs84, _ := gridset.Builtin("EPSG:4326")
	if _, err := Open(ok, wgs84); err == nil || !strings.Contains(err.Error(), "MBTiles holds web mercator") {
		t.Errorf("EPSG:4326 gridset: %v", err)
	}
}

// TestFileSizeNearTileBytes: a rendered map's mix of tile sizes, packed
// into the images table's leaf pages (sqlitefile.Window), makes a file
// within 2 % of its tiles' bytes; in the order they come it was 4.3 %.
// A third of the tiles repeat an earlier one, in and across windows.
func TestFileSizeNearTileBytes(t *testing.T) {
	path := offlinetest.TempFile(t, "mixed.mbtiles")
	w, err := Create(path, mercator(t), Metadata{Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	bt := offlinetest.NewBenchTiles(0)
	tileOf := func(i int) (gridset.Index, []byte) {
		idx, _ := bt.Tile(i)
		_, tile := bt.Tile(i - i%3) // tiles 3k+1 and 3k+2 repeat 3k
		return idx, tile
	}
	for i := range 3000 {
		idx, tile := tileOf(i)
		if err := w.Put(idx, tile); err != nil {
			t.Fatal(err)
		}
	}
	s := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Images != 1000 {
		t.Errorf("%d images for 1000 distinct tiles", s.Images)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	over := float64(st.Size()-s.ImageBytes) / float64(s.ImageBytes)
	t.Logf("%d bytes for %d bytes of distinct tiles: %.2f %% over", st.Size(), s.ImageBytes, 100*over)
	if over > 0.02 {
		t.Errorf("the file is %.2f %% over its distinct tiles' bytes", 100*over)
	}
	r, err := Open(path, mercator(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	offlinetest.ReadsBack(t, r.Each, 3000, func(idx gridset.Index) []byte {
		_, tile := tileOf(int(idx.X*4096 + idx.Y))
		return tile
	})
}

// TestRepeatsDoNotPileUp: tiles that repeat one image add nothing to the
// window of images, and their map rows are still written in bounded
// batches: memory stays bounded on a map of open sea.
func TestRepeatsDoNotPileUp(t *testing.T) {
	path := offlinetest.TempFile(t, "sea.mbtiles")
	w, err := Create(path, mercator(t), Metadata{Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	sea := offlinetest.Tile(256, 256, gridset.Index{})
	const n = 3*maxPendingTiles + 5
	for i := range n {
		if err := w.Put(gridset.Index{Z: 8, X: int64(i / 256), Y: int64(i % 256)}, sea); err != nil {
			t.Fatal(err)
		}
		if len(w.tiles) > maxPendingTiles {
			t.Fatalf("%d map rows held after %d tiles", len(w.tiles), i+1)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, mercator(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	offlinetest.ReadsBack(t, r.Each, n, func(gridset.Index) []byte { return sea })
}
