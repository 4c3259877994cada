package geopackage

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/internal/offlinetest"
	"github.com/tilecache/caddy-tilecache/module/offline/sqlitefile"
)

func builtin(name string) *gridset.Gridset {
	g, _ := gridset.Builtin(name)
	return g
}

// topLeft4326 is EPSG:4326 with its origin at the top-left and an extent
// that is not a whole number of tiles high, so that where row 0 lies
// depends on the origin: the levels cover 90°N to 90°S from the top.
func topLeft4326(t testing.TB) *gridset.Gridset {
	g, err := gridset.New(gridset.Config{Name: "TopLeft4326", SRS: "EPSG:4326", Origin: "top_left",
		Extent: [4]float64{-180, -60, 180, 90}, Resolutions: []float64{180.0 / 256, 90.0 / 256, 45.0 / 256}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// pyramid is every tile of levels 0..maxZ, the left half of the top level
// one repeated tile.
func pyramid(g *gridset.Gridset, maxZ int) map[gridset.Index][]byte {
	sea := offlinetest.Solid(g.TileWidth, g.TileHeight, color.NRGBA{20, 60, 200, 255}, false)
	tiles := map[gridset.Index][]byte{}
	for z := 0; z <= maxZ; z++ {
		r := g.GridRange(z)
		for x := r.MinX; x <= r.MaxX; x++ {
			for y := r.MinY; y <= r.MaxY; y++ {
				idx := gridset.Index{Z: z, X: x, Y: y}
				tiles[idx] = offlinetest.Tile(g.TileWidth, g.TileHeight, idx)
				if z == maxZ && x < (r.MaxX+1)/2 {
					tiles[idx] = sea
				}
			}
		}
	}
	return tiles
}

func write(t testing.TB, path string, g *gridset.Gridset, tiles map[gridset.Index][]byte) {
	t.Helper()
	w, err := Create(path, g, Options{Table: "world", Description: "round trip"})
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
}

func query(t testing.TB, path, sql string) string {
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
	var rows []string
	for st.Step() {
		var cols []string
		for i := 0; i < st.ColumnCount(); i++ {
			cols = append(cols, st.ColumnText(i))
		}
		rows = append(rows, strings.Join(cols, "|"))
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(rows, "\n")
}

func readAll(t testing.TB, path string, g *gridset.Gridset) map[gridset.Index][]byte {
	t.Helper()
	r, err := Open(path, g, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[gridset.Index][]byte{}
	if err := r.Each(func(idx gridset.Index, data []byte) error {
		if _, dup := got[idx]; dup {
			return fmt.Errorf("tile %v twice", idx)
		}
		got[idx] = bytes.Clone(data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	for _, g := range []*gridset.Gridset{builtin("EPSG:4326"), builtin("EPSG:900913"), topLeft4326(t)} {
		t.Run(g.Name, func(t *testing.T) {
			path := offlinetest.TempFile(t, "rt.gpkg")
			tiles := pyramid(g, 2)
			write(t, path, g, tiles)
			got := readAll(t, path, g)
			if len(got) != len(tiles) {
				t.Errorf("read %d tiles, wrote %d", len(got), len(tiles))
			}
			for idx, want := range tiles {
				if !bytes.Equal(got[idx], want) {
					t.Errorf("tile %v differs", idx)
				}
			}
			if v := query(t, path, "PRAGMA application_id"); v != strconv.Itoa(0x47504B47) {
				t.Errorf("application_id %s", v)
			}
			if v := query(t, path, "PRAGMA user_version"); v != "10300" {
				t.Errorf("user_version %s", v)
			}
			epsg := 4326
			if gridset.CanonicalSRS(g.SRS) == 900913 {
				epsg = 3857
			}
			if v := query(t, path, "SELECT data_type, identifier, srs_id FROM gpkg_contents"); v != "tiles|world|"+strconv.Itoa(epsg) {
				t.Errorf("gpkg_contents %s", v)
			}
			if v := query(t, path, "SELECT srs_id FROM gpkg_spatial_ref_sys ORDER BY srs_id"); v != "-1\n0\n3857\n4326" {
				t.Errorf("gpkg_spatial_ref_sys %q", v)
			}
			// Row 0 is the top row: the top-left tile of level 1.
			top := g.Levels[1].TilesHigh - 1
			want := offlinetest.Tile(256, 256, gridset.Index{Z: 1, X: 0, Y: top})
			if v := query(t, path, "SELECT hex(tile_data) FROM world WHERE zoom_level = 1 AND tile_column = 0 AND tile_row = 0"); v != fmt.Sprintf("%X", want) {
				t.Errorf("tile_row 0 of level 1 is not the top-left tile")
			}
			var wantMatrix []string
			for z := 0; z <= 2; z++ {
				l := g.Levels[z]
				wantMatrix = append(wantMatrix, fmt.Sprintf("%d|%d|%d|256|256", z, l.TilesWide, l.TilesHigh))
			}
			if v := query(t, path, "SELECT zoom_level, matrix_width, matrix_height, tile_width, tile_height FROM gpkg_tile_matrix ORDER BY zoom_level"); v != strings.Join(wantMatrix, "\n") {
				t.Errorf("gpkg_tile_matrix\n%s\nwant\n%s", v, strings.Join(wantMatrix, "\n"))
			}
			if v := query(t, path, "SELECT count(*) FROM gpkg_extensions"); v != "0" {
				t.Errorf("extensions registered for PNG tiles: %s", v)
			}
		})
	}
}

// TestEmpty: an export of nothing is a valid file that reads as nothing.
func TestEmpty(t *testing.T) {
	g := builtin("EPSG:4326")
	path := offlinetest.TempFile(t, "empty.gpkg")
	write(t, path, g, nil)
	if got := readAll(t, path, g); len(got) != 0 {
		t.Errorf("%d tiles", len(got))
	}
}

func TestRefusals(t *testing.T) {
	swiss, err := gridset.New(gridset.Config{Name: "CH", SRS: "EPSG:2056", Extent: [4]float64{2420000, 1030000, 2932000, 1286000}, Resolutions: []float64{1000, 500}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(offlinetest.TempFile(t, "x.gpkg"), swiss, Options{}); err == nil || !strings.Contains(err.Error(), "EPSG:4326 and web mercator") {
		t.Errorf("EPSG:2056: %v", err)
	}
	path := offlinetest.TempFile(t, "x.gpkg")
	w, err := Create(path, builtin("EPSG:4326"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Put(gridset.Index{}, []byte("GIF89a")); err == nil {
		t.Error("a GIF was accepted")
	}
	if err := w.Put(gridset.Index{X: 2}, offlinetest.Tile(256, 256, gridset.Index{})); err == nil {
		t.Error("a tile outside the grid was accepted")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the final name exists before Close")
	}
}

// gdalWebP makes a lossless WebP tile with GDAL (gdal-bin's WEBP driver).
func gdalWebP(t *testing.T, png []byte) []byte {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "t.png"), filepath.Join(dir, "t.webp")
	if err := os.WriteFile(src, png, 0o644); err != nil {
		t.Fatal(err)
	}
	offlinetest.Run(t, "gdal_translate", "-q", "-of", "WEBP", "-co", "LOSSLESS=True", src, dst)
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGDAL: GDAL's validator passes the files, gdalinfo lists the levels
// and extent, and tiles read through GDAL equal the tiles written, WebP
// ones included.
func TestGDAL(t *testing.T) {
	offlinetest.Need(t, "gdalinfo", "gdal_translate")
	validator := "/usr/lib/python3/dist-packages/osgeo_utils/samples/validate_gpkg.py"
	if _, err := os.Stat(validator); err != nil {
		t.Fatalf("%v: ./test.sh installs python3-gdal, which ships it", err)
	}
	for _, c := range []struct {
		g        *gridset.Gridset
		size     string
		overview string
		corner   string
	}{
		{builtin("EPSG:4326"), "Size is 2048, 1024", "Overviews: 1024x512, 512x256", "Upper Left  (-180.0000000,  90.0000000)"},
		{builtin("EPSG:900913"), "Size is 1024, 1024", "Overviews: 512x512, 256x256", "Upper Left  (-20037508.340,20037508.340)"},
	} {
		t.Run(c.g.Name, func(t *testing.T) {
			g := c.g
			tiles := pyramid(g, 2)
			webpIdx := gridset.Index{Z: 2, X: g.Levels[2].TilesWide - 1, Y: 0}
			tiles[webpIdx] = gdalWebP(t, tiles[webpIdx])
			path := offlinetest.TempFile(t, "gdal.gpkg")
			write(t, path, g, tiles)
			if v := query(t, path, "SELECT table_name, column_name, extension_name, scope FROM gpkg_extensions"); v != "world|tile_data|gpkg_webp|read-write" {
				t.Errorf("gpkg_extensions %q", v)
			}
			offlinetest.Run(t, offlinetest.Python, validator, path)
			info := offlinetest.Run(t, "gdalinfo", path)
			for _, want := range []string{"Driver: GPKG/GeoPackage", c.size, c.overview, c.corner} {
				if !strings.Contains(info, want) {
					t.Errorf("gdalinfo lacks %q:\n%s", want, info)
				}
			}
			for _, idx := range []gridset.Index{{Z: 2, X: 1, Y: 0}, {Z: 2, X: 0, Y: 1}, webpIdx, {Z: 1, X: 1, Y: 1}, {Z: 0, X: 0, Y: 0}} {
				b := g.TileBBox(idx)
				got := offlinetest.GDALPixels(t, path, b.MinX, b.MaxY, 256, 256, 1-idx.Z)
				if want := offlinetest.RGBA(t, tiles[idx]); !bytes.Equal(got, want) {
					t.Errorf("tile %v read through GDAL differs from the tile written", idx)
				}
			}
		})
	}
}

func worldPNG(t *testing.T, path string, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x / 64) * 30), 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestImportGDAL imports GeoPackages GDAL made with the tiling schemes
// that are the cache's gridsets, and refuses those that are not.
func TestImportGDAL(t *testing.T) {
	offlinetest.Need(t, "gdal_translate")
	dir := t.TempDir()
	src := filepath.Join(dir, "world.png")
	srcPNG := worldPNG(t, src, 512, 256)
	geo := []string{"-a_srs", "EPSG:4326", "-a_ullr", "-180", "90", "180", "-90"}
	translate := func(name string, args ...string) string {
		out := filepath.Join(dir, name)
		offlinetest.Run(t, "gdal_translate", append(append(append([]string{"-q", "-of", "GPKG"}, geo...), args...), src, out)...)
		return out
	}
	wgs84 := builtin("EPSG:4326")

	// PNG tiles: GDAL's AUTO writes an opaque raster's tiles as JPEG,
	// which would not compare pixel for pixel.
	ok := translate("inspire.gpkg", "-co", "TILING_SCHEME=InspireCRS84Quad", "-co", "TILE_FORMAT=PNG")
	got := readAll(t, ok, wgs84)
	if len(got) != 2 {
		t.Fatalf("imported %d tiles, want the 2 of level 0", len(got))
	}
	want := offlinetest.RGBA(t, srcPNG)
	have := offlinetest.RGBA(t, got[gridset.Index{Z: 0, X: 1, Y: 0}])
	for y := 0; y < 256; y++ {
		if !bytes.Equal(have[y*256*4:(y+1)*256*4], want[y*512*4+256*4:(y+1)*512*4]) {
			t.Fatalf("tile 0/1/0 row %d is not the source's right half", y)
		}
	}
	r, err := Open(ok, wgs84, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Format() != "png" || r.Table() != "inspire" {
		t.Errorf("format %q table %q", r.Format(), r.Table())
	}
	r.Close()

	big := translate("512.gpkg", "-co", "BLOCKSIZE=512")
	for _, c := range []struct {
		path, want string
		g          *gridset.Gridset
	}{
		{big, "tile size 512×512 is not gridset EPSG:4326's 256×256", wgs84},
		{ok, "SRS EPSG:4326 is not gridset EPSG:900913's EPSG:3857", builtin("EPSG:900913")},
		// GDAL's own tiling of the raster: its origin is the raster's corner
		// and its resolution the raster's, neither the gridset's.
		{translate("custom.gpkg", "-a_ullr", "-170", "80", "170", "-90"), "is not gridset EPSG:4326's top-left corner", wgs84},
	} {
		_, err := Open(c.path, c.g, "")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", filepath.Base(c.path), err, c.want)
		}
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	g := builtin("EPSG:4326")
	good := filepath.Join(dir, "good.gpkg")
	write(t, good, g, pyramid(g, 3))
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty.gpkg":     {},
		"text.gpkg":      []byte("PK\x03\x04 a zip, not a database"),
		"truncated.gpkg": data[:len(data)*2/3],
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sqlite := func(name string, sql string) {
		b, err := sqlitefile.Create(filepath.Join(dir, name), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Exec(sql); err != nil {
			t.Fatal(err)
		}
		if err := b.Finish(nil); err != nil {
			t.Fatal(err)
		}
	}
	sqlite("plain.gpkg", "CREATE TABLE things (a, b)")
	// A GeoPackage of features only.
	sqlite("features.gpkg", schema+"INSERT INTO gpkg_contents (table_name, data_type) VALUES ('roads', 'features')")
	for name, want := range map[string]string{
		"empty.gpkg":     "empty file",
		"text.gpkg":      "not an SQLite file",
		"truncated.gpkg": "truncated SQLite file",
		"plain.gpkg":     "not a GeoPackage: no gpkg_contents table",
		"features.gpkg":  "GeoPackage without tiles: gpkg_contents lists no tiles table",
	} {
		_, err := Open(filepath.Join(dir, name), g, "")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line with %q", name, err, want)
		}
	}
	if _, err := Open(good, g, "other"); err == nil || !strings.Contains(err.Error(), `no tiles table "other"`) {
		t.Errorf("unknown table: %v", err)
	}
}

// TestFileSizeNearTileBytes: a rendered map's mix of tile sizes, packed
// into the tile table's leaf pages (sqlitefile.Window), makes a file
// within 2 % of its tiles' bytes; in the order they come it was 4.4 %.
func TestFileSizeNearTileBytes(t *testing.T) {
	path := offlinetest.TempFile(t, "mixed.gpkg")
	w, err := Create(path, builtin("EPSG:4326"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	bt := offlinetest.NewBenchTiles(0)
	for i := range 3000 {
		idx, tile := bt.Tile(i)
		if err := w.Put(idx, tile); err != nil {
			t.Fatal(err)
		}
	}
	data := w.Bytes()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	over := float64(st.Size()-data) / float64(data)
	t.Logf("%d bytes for %d bytes of tiles: %.2f %% over", st.Size(), data, 100*over)
	if over > 0.02 {
		t.Errorf("the file is %.2f %% over its tiles' bytes", 100*over)
	}
	// Every tile reads back, wherever the packing put its row.
	r, err := Open(path, builtin("EPSG:4326"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	offlinetest.ReadsBack(t, r.Each, 3000, func(idx gridset.Index) []byte {
		_, tile := bt.Tile(int(idx.X*4096 + idx.Y))
		return tile
	})
}
