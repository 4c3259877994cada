package tiledir

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
)

func put(t *testing.T, root, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, root string, g *gridset.Gridset, o Options) (map[gridset.Index][]byte, *Reader) {
	t.Helper()
	r, err := Open(root, g, o)
	if err != nil {
		t.Fatal(err)
	}
	got := map[gridset.Index][]byte{}
	if err := r.Each(func(idx gridset.Index, data []byte) error {
		got[idx] = bytes.Clone(data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got, r
}

// TestLayouts lays the same tiles out in every layout, by the paths
// MapProxy's own examples give (mapproxy/cache/path.py) for tile x=3,
// y=4 of level 2 and for x=1234567, y=87654321 of level 9, and reads them
// back.
func TestLayouts(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	a := gridset.Index{Z: 2, X: 3, Y: 1}
	b := gridset.Index{Z: 30, X: 1234567, Y: 87654321}
	ta, tb := offlinetest.Tile(256, 256, a), offlinetest.Tile(256, 256, b)
	// rows counted from the top for the xyz and arcgis layouts
	topA, topB := g.Levels[2].TilesHigh-1-a.Y, g.Levels[30].TilesHigh-1-b.Y
	for _, c := range []struct {
		layout string
		a, b   string
	}{
		{"tms", "2/3/1.png", "30/1234567/87654321.png"},
		{"xyz", "2/3/" + strconv.FormatInt(topA, 10) + ".png", "30/1234567/" + strconv.FormatInt(topB, 10) + ".png"},
		{"tc", "02/000/000/003/000/000/001.png", "30/001/234/567/087/654/321.png"},
		{"mp", "02/0000/0003/0000/0001.png", "30/0123/4567/8765/4321.png"},
		{"arcgis", fmt.Sprintf("L02/R%08x/C%08x.png", topA, 3), fmt.Sprintf("L30/R%08x/C%08x.png", topB, 1234567)},
	} {
		t.Run(c.layout, func(t *testing.T) {
			root := t.TempDir()
			put(t, root, c.a, ta)
			put(t, root, c.b, tb)
			put(t, root, "tilemapresource.xml", []byte("<TileMap/>"))
			put(t, root, "02/lock", nil)
			got, r := readAll(t, root, g, Options{Layout: c.layout})
			if len(got) != 2 || !bytes.Equal(got[a], ta) || !bytes.Equal(got[b], tb) {
				t.Errorf("read %d tiles; %v: %v, %v: %v", len(got), a, got[a] != nil, b, got[b] != nil)
			}
			if r.Skipped() != 2 {
				t.Errorf("skipped %d files, want 2", r.Skipped())
			}
		})
	}
}

// TestMapProxyExamples parses the paths MapProxy's documentation gives
// for its layouts.
func TestMapProxyExamples(t *testing.T) {
	for _, c := range []struct {
		parse func([]string) (int, int64, int64, bool)
		path  string
		z     int
		x, y  int64
	}{
		{parseTC, "02/000/000/003/000/000/004", 2, 3, 4},
		{parseMP, "02/0000/0003/0000/0004", 2, 3, 4},
		{parseMP, "22/1234/5678/9876/5432", 22, 12345678, 98765432},
		{parseZXY, "2/3/4", 2, 3, 4},
		{parseArcGIS, "L09/R05397fb1/C0012d687", 9, 1234567, 87654321},
	} {
		z, x, y, ok := c.parse(strings.Split(c.path, "/"))
		if !ok || z != c.z || x != c.x || y != c.y {
			t.Errorf("%s: %d/%d/%d %v, want %d/%d/%d", c.path, z, x, y, ok, c.z, c.x, c.y)
		}
	}
	for _, bad := range []string{"02/000/000/03/000/000/004", "2/3", "2/-3/4", "L09/R05397fb1/X0012d687", "02/000/000/003/000/000/0x4"} {
		for _, parse := range []func([]string) (int, int64, int64, bool){parseTC, parseMP, parseZXY, parseArcGIS} {
			if _, _, _, ok := parse(strings.Split(bad, "/")); ok {
				t.Errorf("%s parsed", bad)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:900913")
	cases := map[string]struct {
		rel  string
		data []byte
		want string
	}{
		"outside":  {"2/4/0.png", offlinetest.Tile(256, 256, gridset.Index{}), "tile 2/4/0 is outside gridset EPSG:900913"},
		"level":    {"40/0/0.png", offlinetest.Tile(256, 256, gridset.Index{}), "level 40 is not a level of gridset EPSG:900913"},
		"size":     {"1/0/0.png", offlinetest.Tile(512, 512, gridset.Index{}), "a 512×512 image, the gridset's tiles are 256×256"},
		"notimage": {"1/0/0.png", []byte("<html>not found</html>"), "not a PNG, JPEG or WebP image"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			put(t, root, c.rel, c.data)
			r, err := Open(root, g, Options{Layout: "tms"})
			if err != nil {
				t.Fatal(err)
			}
			err = r.Each(func(gridset.Index, []byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line with %q", err, c.want)
			}
		})
	}
	if _, err := Open(t.TempDir(), g, Options{Layout: "quadkey"}); err == nil {
		t.Error("unknown layout accepted")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none"), g, Options{Layout: "tms"}); err == nil {
		t.Error("missing directory accepted")
	}
}

// TestGDAL2Tiles imports the TMS tree gdal2tiles makes of a raster of the
// web mercator world.
func TestGDAL2Tiles(t *testing.T) {
	offlinetest.Need(t, "gdal2tiles.py", "gdal_translate")
	dir := t.TempDir()
	img := image.NewNRGBA(image.Rect(0, 0, 512, 512))
	for y := 0; y < 512; y++ {
		for x := 0; x < 512; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x / 2), uint8(y / 2), 100, 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	src := filepath.Join(dir, "world.png")
	if err := os.WriteFile(src, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	e := strconv.FormatFloat(gridset.WebMercatorExtent, 'f', -1, 64)
	tif := filepath.Join(dir, "world.tif")
	offlinetest.Run(t, "gdal_translate", "-q", "-a_srs", "EPSG:3857", "-a_ullr", "-"+e, e, e, "-"+e, src, tif)
	out := filepath.Join(dir, "tiles")
	offlinetest.Run(t, offlinetest.Python, "/usr/bin/gdal2tiles.py", "-q", "-z", "0-1", "-w", "none", "-r", "near", tif, out)
	g, _ := gridset.Builtin("EPSG:900913")
	got, r := readAll(t, out, g, Options{Layout: "tms"})
	if len(got) != 5 {
		t.Fatalf("imported %d tiles, want 1 + 4", len(got))
	}
	if r.Skipped() == 0 {
		t.Error("tilemapresource.xml was not skipped")
	}
	// Level 1, column 0, TMS row 1 is the top-left quarter.
	want := offlinetest.RGBA(t, buf.Bytes())
	have := offlinetest.RGBA(t, got[gridset.Index{Z: 1, X: 0, Y: 1}])
	for y := 0; y < 256; y++ {
		for x := 0; x < 256; x++ {
			// gdal2tiles writes RGBA; compare colour, not alpha handling
			if !bytes.Equal(have[(y*256+x)*4:(y*256+x)*4+3], want[(y*512+x)*4:(y*512+x)*4+3]) {
				t.Fatalf("tile 1/0/1 pixel %d,%d is not the source's", x, y)
			}
		}
	}
}
