package caddytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/mbtiles"
)

// Imports through a real Caddy (rest/import, an extension): an MBTiles
// file GDAL made, uploaded; a MapProxy-style directory tree on the server
// under import_root; and sources refused whole. Every imported tile must
// then be a HIT whose bytes are the source's, without one GetMap.

type importDoc struct {
	Layer   string `json:"layer"`
	Gridset string `json:"gridSetId"`
	Format  string `json:"format"`
	Source  string `json:"source"`
	Tiles   int64  `json:"tiles"`
	Bytes   int64  `json:"bytes"`
	Outside int64  `json:"outside"`
	Skipped int64  `json:"skipped"`
	MinZoom int    `json:"minZoom"`
	MaxZoom int    `json:"maxZoom"`
}

// noisyPNG is a w×h opaque image of smooth gradients under per-pixel
// noise: far more than 256 colours, as an aerial photo or a hillshade.
func noisyPNG(t *testing.T, w, h int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			n := uint8(rng.IntN(24))
			img.SetNRGBA(x, y, color.NRGBA{uint8(x*255/w) ^ n, uint8(y*255/h) + n, uint8((x+y)*127/(w+h)) + n, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func importAnswerOf(t *testing.T, what string, a answer) importDoc {
	t.Helper()
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: %d %s %q", what, a.status, a.header.Get("Content-Type"), truncate(a.body))
	}
	var d importDoc
	if err := json.Unmarshal(a.body, &d); err != nil {
		t.Fatalf("%s: %v: %s", what, err, a.body)
	}
	return d
}

func TestImportThroughREST(t *testing.T) {
	for _, p := range []string{"gdal_translate", "gdaladdo"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is needed (Debian's gdal-bin; test.sh installs it): %v", p, err)
		}
	}
	f := newFakeWMS(t)
	root := t.TempDir()
	e := &restEnv{t: t, f: f, name: fmt.Sprintf("rest%d", restSeq.Add(1)), dir: storageDir(t)}
	// The Badger store in every pass, with usage: the import's tiles must
	// be counted exactly.
	load(t, siteConfig{admin: ptr("cache " + e.name + "\n\t\t\tworkers 2\n\t\t\timport_root " + root +
		"\n\t\t\toffline_dir " + filepath.Join(t.TempDir(), "offline")), upstream: f.URL, tiles: `
		upstream ` + f.URL + `/wms
		storage ` + e.dir + `
		usage
		timeout 30s
		name ` + e.name + "\n" + restLayers}.String())
	t.Cleanup(e.cleanup)
	g, _ := gridset.Builtin("EPSG:900913")

	// GDAL's MBTiles of the north-west quarter of the world at level 3
	// (1024 pixels of 19,567.88 m), with levels 2 and 1 as overviews.
	work := t.TempDir()
	src := filepath.Join(work, "nw.png")
	os.WriteFile(src, noisyPNG(t, 1024, 1024, 7), 0o644)
	mbt := filepath.Join(work, "nw.mbtiles")
	e2 := fmtF(gridset.WebMercatorExtent)
	mustRun(t, "gdal_translate", "-q", "-of", "MBTILES", "-a_srs", "EPSG:3857", "-a_ullr", "-"+e2, e2, "0", "0", src, mbt)
	mustRun(t, "gdaladdo", "-q", "-r", "average", mbt, "2", "4")
	file, _ := os.ReadFile(mbt)

	before := f.getMaps.Load()
	a0 := rest(t, "POST", "/rest/import/test:a?gridSetId=EPSG:900913", "application/vnd.sqlite3", string(file))
	d := importAnswerOf(t, "import of GDAL's MBTiles", a0)
	if d.Source != "mbtiles" || d.Tiles != 16+4+1 || d.Outside != 0 || d.MinZoom != 1 || d.MaxZoom != 3 || d.Gridset != "EPSG:900913" || d.Format != "image/png" {
		t.Fatalf("import of GDAL's MBTiles: %+v, want 21 tiles of levels 1-3", d)
	}
	t.Logf("import of GDAL's MBTiles (%d bytes): %s", len(file), a0.body)
	// Every tile of the file is now a HIT with the file's bytes.
	r, err := mbtiles.Open(mbt, g)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	err = r.Each(func(idx gridset.Index, data []byte) error {
		a := get(t, siteURL(tileQuery("test:a", "EPSG:900913", idx)))
		if res := a.header.Get("Geowebcache-Cache-Result"); a.status != 200 || res != "HIT" || !bytes.Equal(a.body, data) {
			return fmt.Errorf("tile %v: %d %s, %d bytes; the file's has %d", idx, a.status, res, len(a.body), len(data))
		}
		n++
		return nil
	})
	r.Close()
	if err != nil || n != d.Tiles {
		t.Fatalf("reading the imported tiles back: %v (%d of %d)", err, n, d.Tiles)
	}
	if got := f.getMaps.Load() - before; got != 0 {
		t.Fatalf("the import and the reads asked the upstream %d times", got)
	}
	u := getUsage(t)
	if u.Tiles != d.Tiles || u.Bytes < d.Bytes {
		t.Fatalf("usage after importing %d tiles of %d bytes: %d tiles, %d bytes", d.Tiles, d.Bytes, u.Tiles, u.Bytes)
	}

	// The same file again: stored over itself, usage unchanged.
	again := importAnswerOf(t, "the same import again", rest(t, "POST", "/rest/import/test:a?gridSetId=EPSG:900913", "", string(file)))
	if u2 := getUsage(t); again.Tiles != d.Tiles || u2.Tiles != u.Tiles || u2.Bytes != u.Bytes {
		t.Fatalf("importing the same file twice: %+v, usage %d/%d then %d/%d", again, u.Tiles, u.Bytes, u2.Tiles, u2.Bytes)
	}

	// A MapProxy directory cache (tc layout, rows from the bottom) on the
	// server: four tiles of level 4, and a stray file that is no tile.
	tree := filepath.Join(root, "mapproxy", "test_EPSG900913")
	treeTiles := map[gridset.Index][]byte{}
	for i, idx := range []gridset.Index{{Z: 4, X: 8, Y: 8}, {Z: 4, X: 9, Y: 8}, {Z: 4, X: 8, Y: 9}, {Z: 4, X: 9, Y: 9}} {
		data := noisyPNG(t, 256, 256, uint64(100+i))
		p := filepath.Join(tree, fmt.Sprintf("%02d/000/000/%03d/000/000/%03d.png", idx.Z, idx.X, idx.Y))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, data, 0o644)
		treeTiles[idx] = data
	}
	os.WriteFile(filepath.Join(tree, "README.txt"), []byte("seeded by mapproxy-seed"), 0o644)
	d = importAnswerOf(t, "import of a MapProxy tree", rest(t, "POST",
		"/rest/import/test:a?gridSetId=EPSG:900913&from=mapproxy/test_EPSG900913&layout=tc", "", ""))
	if d.Source != "dir" || d.Tiles != 4 || d.Skipped != 1 || d.MinZoom != 4 || d.MaxZoom != 4 {
		t.Fatalf("import of a MapProxy tree: %+v, want 4 tiles of level 4 and 1 file skipped", d)
	}
	for idx, data := range treeTiles {
		a := get(t, siteURL(tileQuery("test:a", "EPSG:900913", idx)))
		if res := a.header.Get("Geowebcache-Cache-Result"); res != "HIT" || !bytes.Equal(a.body, data) {
			t.Fatalf("tree tile %v: %d %s, %d bytes of %d", idx, a.status, res, len(a.body), len(data))
		}
	}
	if got := f.getMaps.Load() - before; got != 0 {
		t.Fatalf("the imports asked the upstream %d times", got)
	}

	// Refused whole, in one line, changing nothing.
	u = getUsage(t)
	var jpg bytes.Buffer
	jpeg.Encode(&jpg, image.NewRGBA(image.Rect(0, 0, 256, 256)), nil)
	bad := filepath.Join(root, "mixed")
	os.MkdirAll(filepath.Join(bad, "5", "1"), 0o755)
	os.WriteFile(filepath.Join(bad, "5", "1", "1.png"), noisyPNG(t, 256, 256, 9), 0o644)
	os.WriteFile(filepath.Join(bad, "5", "1", "2.png"), jpg.Bytes(), 0o644)
	small := filepath.Join(root, "small")
	os.MkdirAll(filepath.Join(small, "5", "1"), 0o755)
	os.WriteFile(filepath.Join(small, "5", "1", "1.png"), noisyPNG(t, 128, 128, 9), 0o644)
	os.Symlink("/etc", filepath.Join(root, "out"))
	for _, c := range []struct {
		what, query, body string
		status            int
		want              string
	}{
		{"not SQLite", "", "<html>502 Bad Gateway</html>", 400, "not an SQLite file"},
		{"half a file", "", string(file[:len(file)/2]), 400, "truncated"},
		{"nothing", "", "", 400, "empty request body"},
		{"a JPEG among PNG tiles", "&from=mixed&layout=tms", "", 400, "is a JPEG image; tile set image/png holds PNG"},
		{"tiles of another size", "&from=small&layout=tms", "", 400, "128×128"},
		{"a way out of import_root", "&from=../etc", "", 400, "relative path inside import_root"},
		{"a link out of import_root", "&from=out", "", 400, "leads outside import_root"},
		{"a gridset twice", "&gridSetId=EPSG:2154", "x", 400, "import parameter gridSetId is given 2 times"},
		{"an unknown option", "&zoom=3", "x", 400, "unknown import parameter"},
	} {
		a := rest(t, "POST", "/rest/import/test:a?gridSetId=EPSG:900913"+c.query, "", c.body)
		mustPlain(t, c.what, a, c.status)
		if !strings.Contains(string(a.body), c.want) || strings.Contains(string(a.body), root) {
			t.Errorf("%s: %q, want it to say %q and not name the server's directories", c.what, a.body, c.want)
		}
	}
	a := rest(t, "POST", "/rest/import/test:a?gridSetId=EPSG:2154", "", "x")
	if mustPlain(t, "an unknown gridset", a, 400); !strings.Contains(string(a.body), "has no gridset") {
		t.Errorf("an unknown gridset: %q", a.body)
	}
	mustPlain(t, "an unknown layer", rest(t, "POST", "/rest/import/nope", "", "x"), 404)
	mustPlain(t, "GET", rest(t, "GET", "/rest/import/test:a", "", ""), 405)
	if u2 := getUsage(t); u2.Tiles != u.Tiles || u2.Bytes != u.Bytes {
		t.Fatalf("refused imports changed the usage from %d/%d to %d/%d", u.Tiles, u.Bytes, u2.Tiles, u2.Bytes)
	}
}

// mustRun runs a program, failing the test with its output if it fails.
func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
