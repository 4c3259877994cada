package caddytest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
	"github.com/tilecache/caddy-tilecache/module/offline/mbtiles"
)

// Exports through a real Caddy: a seed request of type export seeds what
// is missing, then writes the area into an MBTiles or GeoPackage file,
// downloaded (with Range) from rest/exports/. GDAL reads the file, and
// every tile in it is the cache's.

// exportEnv is a REST test's cache with its offline directory known.
func exportEnv(t *testing.T) (*restEnv, string) {
	t.Helper()
	f := newFakeWMS(t)
	offline := filepath.Join(t.TempDir(), "offline")
	e := &restEnv{t: t, f: f, name: fmt.Sprintf("rest%d", restSeq.Add(1)), dir: storageDir(t)}
	load(t, adminConfig(t, f, e.dir, "cache "+e.name+"\n\t\t\tworkers 2\n\t\t\toffline_dir "+offline, "name "+e.name+"\n"+restLayers))
	t.Cleanup(e.cleanup)
	return e, offline
}

// download fetches a finished export's file.
func download(t *testing.T, ti taskInfo) answer {
	t.Helper()
	if ti.Export == nil || ti.Export.File == "" {
		t.Fatalf("task %d names no file: %+v", ti.ID, ti.Export)
	}
	return rest(t, "GET", "/rest/exports/"+ti.Export.File, "", "")
}

func TestExportThroughREST(t *testing.T) {
	e, offline := exportEnv(t)
	// Levels 0..3 of the web mercator grid, nothing cached: the export
	// seeds them (one GetMap per metatile), then writes 85 tiles.
	ti := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":3,`+
		`"type":"export","exportFormat":"mbtiles","threadCount":2}}`))
	if ti.State != "DONE" || ti.Type != "EXPORT" || ti.Export == nil || ti.Export.Phase != "done" || ti.Export.Tiles != 85 ||
		ti.Export.Missing != 0 || ti.Export.File != fmt.Sprintf("task-%d.mbtiles", ti.ID) {
		t.Fatalf("export of levels 0-3: %+v %+v", ti, ti.Export)
	}
	if e.f.getMaps.Load() == 0 {
		t.Fatal("the export did not seed the missing tiles")
	}
	a := download(t, ti)
	if a.status != 200 || a.header.Get("Content-Type") != "application/vnd.sqlite3" ||
		!strings.Contains(a.header.Get("Content-Disposition"), ti.Export.File) {
		t.Fatalf("download: %d %v", a.status, a.header)
	}
	file := filepath.Join(t.TempDir(), "world.mbtiles")
	os.WriteFile(file, a.body, 0o644)
	// Every tile in the file is the cache's tile, served as a HIT.
	g, _ := gridset.Builtin("EPSG:900913")
	r, err := mbtiles.Open(file, g)
	if err != nil {
		t.Fatalf("the downloaded file: %v", err)
	}
	before := e.f.getMaps.Load()
	n := 0
	err = r.Each(func(idx gridset.Index, data []byte) error {
		got := get(t, siteURL(tileQuery("test:a", "EPSG:900913", idx)))
		if res := got.header.Get("Geowebcache-Cache-Result"); res != "HIT" || !bytes.Equal(got.body, data) {
			return fmt.Errorf("tile %v: the cache answers %s with %d bytes, the file has %d", idx, res, len(got.body), len(data))
		}
		n++
		return nil
	})
	r.Close()
	if err != nil || n != 85 || e.f.getMaps.Load() != before {
		t.Fatalf("the file's tiles against the cache: %v (%d tiles)", err, n)
	}
	// The round trip: the layer truncated, the file imported, and every
	// tile is again a HIT with the file's bytes, without a GetMap.
	if a := rest(t, "POST", "/rest/masstruncate", "text/xml", "<truncateLayer><layerName>test:a</layerName></truncateLayer>"); a.status != 200 {
		t.Fatalf("masstruncate: %d %q", a.status, a.body)
	}
	if res := get(t, siteURL(tileQuery("test:a", "EPSG:900913", gridset.Index{Z: 3, X: 7, Y: 7}))).header.Get("Geowebcache-Cache-Result"); res == "HIT" {
		t.Fatal("a tile is still a HIT after truncateLayer")
	}
	imp := importAnswerOf(t, "import of the export", rest(t, "POST", "/rest/import/test:a?gridSetId=EPSG:900913", "", string(a.body)))
	if imp.Tiles != 85 {
		t.Fatalf("import of the exported file: %+v", imp)
	}
	before = e.f.getMaps.Load()
	r, _ = mbtiles.Open(file, g)
	n = 0
	err = r.Each(func(idx gridset.Index, data []byte) error {
		got := get(t, siteURL(tileQuery("test:a", "EPSG:900913", idx)))
		if res := got.header.Get("Geowebcache-Cache-Result"); res != "HIT" || !bytes.Equal(got.body, data) {
			return fmt.Errorf("tile %v after the round trip: %s, %d bytes, the file has %d", idx, res, len(got.body), len(data))
		}
		n++
		return nil
	})
	r.Close()
	if err != nil || n != 85 || e.f.getMaps.Load() != before {
		t.Fatalf("round trip: %v (%d tiles, %d GetMaps)", err, n, e.f.getMaps.Load()-before)
	}

	// GDAL reads it: four levels, the world.
	out, err := exec.Command("gdalinfo", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Driver: MBTiles") || !strings.Contains(string(out), "Size is 2048, 2048") {
		t.Fatalf("gdalinfo: %v\n%s", err, out)
	}
	// A download resumes with Range.
	part := rest(t, "GET", "/rest/exports/"+ti.Export.File, "", "")
	ranged := rawREST(t, "GET", "/rest/exports/"+ti.Export.File, "",
		"Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass)), "Range", "bytes=100-1123")
	if ranged.status != 206 || !bytes.Equal(ranged.body, part.body[100:1124]) {
		t.Fatalf("Range bytes=100-1123: %d, %d bytes", ranged.status, len(ranged.body))
	}
	if left, _ := filepath.Glob(filepath.Join(offline, "exports", "*.partial")); len(left) != 0 {
		t.Errorf("partial files left: %v", left)
	}

	// A GeoPackage of what is cached only: level 0 of EPSG:4326 seeded,
	// levels 0..1 exported without asking the upstream.
	if s := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0,"type":"seed"}}`)); s.State != "DONE" {
		t.Fatalf("seed of level 0: %+v", s)
	}
	before = e.f.getMaps.Load()
	ti = waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,`+
		`"type":"export","exportFormat":"gpkg","cachedOnly":true}}`))
	if ti.State != "DONE" || ti.Export == nil || ti.Export.Tiles != 2 || ti.Export.Missing != 8 || e.f.getMaps.Load() != before {
		t.Fatalf("cached-only GeoPackage of levels 0-1 with level 0 cached: %+v %+v, %d GetMaps", ti, ti.Export, e.f.getMaps.Load()-before)
	}
	a = download(t, ti)
	if a.status != 200 || a.header.Get("Content-Type") != "application/geopackage+sqlite3" {
		t.Fatalf("GeoPackage download: %d %v", a.status, a.header)
	}
	gpkg := filepath.Join(t.TempDir(), "world.gpkg")
	os.WriteFile(gpkg, a.body, 0o644)
	g4326, _ := gridset.Builtin("EPSG:4326")
	gr, err := geopackage.Open(gpkg, g4326, "")
	if err != nil {
		t.Fatalf("the downloaded GeoPackage: %v", err)
	}
	n = 0
	gr.Each(func(idx gridset.Index, data []byte) error {
		if got := get(t, siteURL(tileQuery("test:a", "EPSG:4326", idx))); !bytes.Equal(got.body, data) || idx.Z != 0 {
			t.Errorf("GeoPackage tile %v differs from the cache's", idx)
		}
		n++
		return nil
	})
	gr.Close()
	if n != 2 {
		t.Fatalf("the GeoPackage holds %d tiles, want 2", n)
	}
	if out, err := exec.Command("gdalinfo", gpkg).CombinedOutput(); err != nil || !strings.Contains(string(out), "Driver: GPKG") {
		t.Fatalf("gdalinfo of the GeoPackage: %v\n%s", err, out)
	}

	// Refused, changing nothing.
	for _, c := range []struct{ what, body, want string }{
		{"MBTiles of EPSG:4326", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"type":"export","exportFormat":"mbtiles"}}`, "web mercator"},
		{"no exportFormat", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"type":"export"}}`, "exportFormat is required"},
		{"exportFormat on a seed", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"type":"seed","exportFormat":"gpkg"}}`, "are for type export"},
		{"a zip", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"type":"export","exportFormat":"zip"}}`, "not mbtiles or gpkg"},
	} {
		a := rest(t, "POST", "/rest/seed/test:a.json", "application/json", c.body)
		if mustPlain(t, c.what, a, 400); !strings.Contains(string(a.body), c.want) {
			t.Errorf("%s: %q, want it to say %q", c.what, a.body, c.want)
		}
	}
	mustPlain(t, "a file of no task", rest(t, "GET", "/rest/exports/task-9999.mbtiles", "", ""), 404)
	mustPlain(t, "a seed task's file", rest(t, "GET", fmt.Sprintf("/rest/exports/task-%d.gpkg", ti.ID-1), "", ""), 404)
	mustPlain(t, "the wrong extension", rest(t, "GET", fmt.Sprintf("/rest/exports/task-%d.mbtiles", ti.ID), "", ""), 404)
	mustPlain(t, "a path outside", rest(t, "GET", "/rest/exports/..%2Fetc", "", ""), 404)
}

// An export killed in its seed phase ends ABORTED and leaves no file.
func TestKilledExportLeavesNoFile(t *testing.T) {
	e, offline := exportEnv(t)
	e.f.set("slow", 200*time.Millisecond)
	path := e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":5,"type":"export","exportFormat":"gpkg"}}`)
	waitFor(t, "the export running", func() bool { return task(t, path).Processed > 0 })
	a := rest(t, "DELETE", path, "", "")
	if a.status != 204 {
		t.Fatalf("kill: %d %q", a.status, a.body)
	}
	ti := waitTask(t, path)
	if ti.State != "ABORTED" || ti.Export == nil || ti.Export.File != "" {
		t.Fatalf("killed export: %+v %+v", ti, ti.Export)
	}
	entries, _ := os.ReadDir(filepath.Join(offline, "exports"))
	if len(entries) != 0 {
		t.Fatalf("a killed export left %d files", len(entries))
	}
	mustPlain(t, "the killed export's file", rest(t, "GET", fmt.Sprintf("/rest/exports/task-%d.gpkg", ti.ID), "", ""), 404)
}

// QGIS (Debian's, through its GDAL provider) opens both kinds of export
// and draws them as the cache's own tiles: an MBTiles of levels 0-1 of
// the web mercator grid drawn at level 1, a GeoPackage of level 0 of
// EPSG:4326.
func TestExportedFilesOpenInQGIS(t *testing.T) {
	clientsOnce(t)
	if out, err := exec.Command(debianPython, "-c", "import qgis.core, numpy, osgeo.gdal").CombinedOutput(); err != nil {
		t.Fatalf("Debian's python3-qgis, numpy and GDAL are needed (test.sh installs them): %v\n%s", err, out)
	}
	e, _ := exportEnv(t)
	dir := t.TempDir()
	for _, c := range []struct {
		kind, gs, crs string
		z             int
		extent        [4]float64
		cols, rows    int64
	}{
		{"mbtiles", "EPSG:900913", "EPSG:3857", 1, [4]float64{-gridset.WebMercatorExtent, -gridset.WebMercatorExtent, gridset.WebMercatorExtent, gridset.WebMercatorExtent}, 2, 2},
		{"gpkg", "EPSG:4326", "EPSG:4326", 0, [4]float64{-180, -90, 180, 90}, 2, 1},
	} {
		ti := waitTask(t, e.submit("test:a", "json", fmt.Sprintf(`{"seedRequest":{"gridSetId":"%s","zoomStart":0,"zoomStop":%d,"type":"export","exportFormat":"%s"}}`, c.gs, c.z, c.kind)))
		if ti.State != "DONE" {
			t.Fatalf("%s export: %+v", c.kind, ti)
		}
		file := filepath.Join(dir, "export."+c.kind)
		os.WriteFile(file, download(t, ti).body, 0o644)
		// What the cache's tiles of level z make, rows from the top.
		img := image.NewNRGBA(image.Rect(0, 0, int(c.cols)*256, int(c.rows)*256))
		for y := range c.rows {
			for x := range c.cols {
				a := get(t, siteURL(tileQuery("test:a", c.gs, gridset.Index{Z: c.z, X: x, Y: y})))
				tile, err := png.Decode(bytes.NewReader(a.body))
				if err != nil {
					t.Fatalf("tile %d/%d/%d: %v", c.z, x, y, err)
				}
				top := int(c.rows-1-y) * 256
				draw.Draw(img, image.Rect(int(x)*256, top, int(x)*256+256, top+256), tile, image.Point{}, draw.Src)
			}
		}
		want := filepath.Join(dir, c.kind+"-tiles.png")
		var b bytes.Buffer
		png.Encode(&b, img)
		os.WriteFile(want, b.Bytes(), 0o644)
		ext, _ := json.Marshal(c.extent)
		cmd := exec.Command(debianPython, "testdata/clients/offline_qgis.py", file, c.crs, string(ext),
			fmt.Sprintf("[%d, %d]", c.cols*256, c.rows*256), want)
		cmd.Env = append(os.Environ(), "QT_QPA_PLATFORM=offscreen", "CPL_DEBUG=OFF",
			fmt.Sprintf("TILECACHE_CLIENT_DRAW_TIMEOUT=%d", int(drawPatience.Seconds())))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "FAIL ") || !strings.Contains(string(out), "ok   QGIS's drawing is the cache's tiles") {
			t.Fatalf("QGIS and the %s export: %v\n%s", c.kind, err, out)
		}
		t.Logf("QGIS and the %s export:\n%s", c.kind, out)
	}
}
