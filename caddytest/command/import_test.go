package command

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
)

// `caddy tile-cache import` uploads a GeoPackage GDAL made and the tile
// is then served from the cache; bad sources and flags end with one line
// and the documented exit status.
func TestImportCommand(t *testing.T) {
	if _, err := exec.LookPath("gdal_translate"); err != nil {
		t.Fatalf("gdal_translate is needed (Debian's gdal-bin; test.sh installs it): %v", err)
	}
	// The west half of the world at level 0 of EPSG:4326 (0.703125° a
	// pixel): one tile, as GDAL tiles it in InspireCRS84Quad, which is
	// GeoWebCache's EPSG:4326 grid.
	img := image.NewNRGBA(image.Rect(0, 0, 256, 256))
	for y := range 256 {
		for x := range 256 {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	dir := t.TempDir()
	src, gpkg := filepath.Join(dir, "west.png"), filepath.Join(dir, "west.gpkg")
	os.WriteFile(src, b.Bytes(), 0o644)
	if out, err := exec.Command("gdal_translate", "-q", "-of", "GPKG", "-co", "TILING_SCHEME=InspireCRS84Quad",
		"-co", "TILE_FORMAT=PNG", "-a_srs", "EPSG:4326", "-a_ullr", "-180", "90", "0", "-90", src, gpkg).CombinedOutput(); err != nil {
		t.Fatalf("gdal_translate: %v\n%s", err, out)
	}

	// GDAL writes the east tile too (black: an RGB raster has no
	// transparency to leave it out with); the count is the file's.
	g, _ := gridset.Builtin("EPSG:4326")
	gr, err := geopackage.Open(gpkg, g, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	gr.Each(func(gridset.Index, []byte) error { n++; return nil })
	gr.Close()
	noun := "tiles"
	if n == 1 {
		noun = "tile"
	}
	r := cli(t, cliEnv(t), "import", "--layer", "test:a", "--from", gpkg)
	want := regexp.MustCompile(fmt.Sprintf(`^imported %d %s \(\d+(\.\d)? KiB\) from gpkg into layer test:a, EPSG:4326, image/png, levels 0-0\n$`, n, noun))
	if r.code != 0 || n == 0 || !want.MatchString(r.stdout) {
		t.Fatalf("import of GDAL's GeoPackage of %d tiles:\n%s", n, r)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=test:a&STYLES=&SRS=EPSG:4326&BBOX=-180,-90,0,90&WIDTH=256&HEIGHT=256&FORMAT=image/png", srv.httpPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if res := resp.Header.Get("Geowebcache-Cache-Result"); resp.StatusCode != 200 || res != "HIT" {
		t.Fatalf("the imported tile: %d %s, want a HIT", resp.StatusCode, res)
	}

	junk := writeFile(t, "junk.mbtiles", "<html>404</html>")
	oneErrorLine(t, cli(t, cliEnv(t), "import", "--layer", "test:a", "--from", junk), 5, "400 Bad Request: the uploaded file: neither MBTiles nor GeoPackage")
	oneErrorLine(t, cli(t, cliEnv(t), "import", "--layer", "nope", "--from", gpkg), 5, "404 Not Found")
	oneErrorLine(t, cli(t, cliEnv(t), "import", "--layer", "test:a", "--from-server", "tiles"), 5, "400 Bad Request: server-side imports are off")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"import", "--from", gpkg}, "--layer is required"},
		{[]string{"import", "--layer", "test:a"}, "--from <file>"},
		{[]string{"import", "--layer", "test:a", "--from", dir}, "--from " + dir + " is a directory"},
		{[]string{"import", "--layer", "test:a", "--from", gpkg, "--from-server", "x"}, "--from and --from-server exclude each other"},
		{[]string{"import", "--layer", "test:a", "--from", filepath.Join(dir, "none.gpkg")}, "--from: stat "},
	} {
		r := cli(t, cliEnv(t, "TILECACHE_PASSWORD="), c.args...) // usage errors come before any password
		oneErrorLine(t, r, 1, c.want)
		if strings.Contains(r.stderr, "Password") {
			t.Errorf("%v asked for a password before checking its flags", c.args)
		}
	}
}
