package cluster

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
)

// Exports on three nodes. The first seeds levels 0-3 through its seed
// phase (each metatile fetched once, shared as any seed) and writes them;
// any node serves its file. The second, cached only, over levels 0-6
// (10,922 tiles, 170 cached), loses its writer to kill -9 in its write
// phase: a surviving node takes the write over once the writer's lease
// has run out, writes the file again, and the task ends DONE on every
// node; the file every node serves (whole, or resumed with Range) holds
// the cache's 170 tiles, and the storage keeps one copy of it.
func TestClusterExportSurvivesItsWriter(t *testing.T) {
	f := newFakeWMS(t)
	c := newCluster(t, options{upstream: f.url})
	a := c.node("a")
	const seeded = 170 // tiles(0, 3)
	if tiles(0, 3) != seeded {
		t.Fatalf("levels 0-3 hold %d tiles", tiles(0, 3))
	}

	id := a.submit("test:a", seedReq("export", 0, 3, `,"exportFormat":"gpkg"`))
	ti := a.waitTask(id, 120*time.Second)
	if ti.State != "DONE" || ti.Export == nil || ti.Export.Phase != "done" || ti.Export.Tiles != seeded || ti.Export.Missing != 0 {
		t.Fatalf("the export of levels 0-3: %+v %+v", ti, ti.Export)
	}
	if n := f.getMaps.Load(); n != int64(metatiles(0, 3)) || len(f.perBBox()) != metatiles(0, 3) {
		t.Fatalf("%d GetMaps for %d metatiles, fetched again: %v", n, metatiles(0, 3), f.repeated())
	}
	first := map[string][]byte{}
	for _, nd := range c.nodes {
		first[nd.name] = c.exportFile(nd, ti.Export.File)
	}
	if !bytes.Equal(first["a"], first["b"]) || !bytes.Equal(first["a"], first["c"]) {
		t.Fatalf("the nodes serve different files for %s: %d, %d, %d bytes", ti.Export.File, len(first["a"]), len(first["b"]), len(first["c"]))
	}
	c.checkExportedTiles(first["b"], c.node("c"), seeded)

	// The cached-only export, and its writer killed mid-write.
	before := f.getMaps.Load()
	id = c.node("b").submit("test:a", seedReq("export", 0, 6, `,"exportFormat":"gpkg","cachedOnly":true`))
	var writer *node
	eventually(t, 120*time.Second, "a node writing the export", func() bool {
		for _, nd := range c.nodes {
			for _, l := range nd.log.Grep("writing a cluster export's file") {
				if strings.Contains(l, fmt.Sprintf(`"id":%d,`, id)) {
					writer = nd
					return true
				}
			}
		}
		return false
	})
	writerID := writer.id()
	writer.kill()
	killed := time.Now()
	for _, l := range writer.log.Grep("cluster export written") {
		if strings.Contains(l, fmt.Sprintf(`"id":%d,`, id)) {
			t.Fatalf("node %s finished writing before it was killed (the write of 10,922 lookups took less than the test's poll): %s", writer.name, l)
		}
	}
	var survivors []*node
	for _, nd := range c.nodes {
		if nd != writer {
			survivors = append(survivors, nd)
		}
	}
	ti = survivors[0].waitTask(id, 300*time.Second)
	t.Logf("writer %s killed; the export DONE %v later, written by %s", writer.name, time.Since(killed).Round(time.Millisecond), ti.Export.Node)
	all := tiles(0, 6)
	if ti.State != "DONE" || ti.Export == nil || ti.Export.Phase != "done" || ti.Export.Tiles != seeded || ti.Export.Missing != all-seeded {
		t.Fatalf("the cached-only export after its writer's kill: %+v %+v", ti, ti.Export)
	}
	if ti.Export.Node == writerID || ti.Export.Node == "" {
		t.Errorf("the file is credited to node %q (the killed writer is %s)", ti.Export.Node, writerID)
	}
	if o := survivors[1].mustTask(id); o.State != "DONE" || o.Export == nil || o.Export.File != ti.Export.File {
		t.Errorf("the task on node %s: %+v", survivors[1].name, o)
	}
	took := 0
	for _, nd := range survivors {
		for _, l := range nd.log.Grep("taking over an export's write") {
			if !strings.Contains(l, writerID) {
				t.Errorf("node %s took the write from a live node: %s", nd.name, l)
			}
			took++
		}
	}
	if took != 1 {
		t.Errorf("the write was taken over %d times, want once", took)
	}
	if n := f.getMaps.Load() - before; n != 0 {
		t.Errorf("the cached-only export made %d GetMaps", n)
	}
	whole := c.exportFile(survivors[0], ti.Export.File)
	part := c.exportRange(survivors[1], ti.Export.File, 1000)
	if !bytes.Equal(part, whole[1000:]) {
		t.Fatalf("node %s's bytes 1000- differ from node %s's file", survivors[1].name, survivors[0].name)
	}
	c.checkExportedTiles(whole, survivors[1], seeded)
	if gens := gensOf(t, c, id); len(gens) != 1 {
		t.Errorf("the storage keeps the pieces of %d claims (%v), want the one that wrote the file", len(gens), gens)
	}
}

// gensOf lists the claim generations whose pieces of export id are stored.
func gensOf(t *testing.T, c *cluster, id int64) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(c.storage, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(filepath.ToSlash(filepath.Dir(p)), fmt.Sprintf("/exports/%d", id)) {
			out = append(out, d.Name())
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no pieces of export %d in the shared storage", id)
	}
	return out
}

// exportFile downloads an export's file from node nd.
func (c *cluster) exportFile(nd *node, name string) []byte {
	c.t.Helper()
	a := nd.rest("GET", "/rest/exports/"+name, "", "")
	if a.status != 200 || a.header.Get("Content-Type") != "application/geopackage+sqlite3" || a.header.Get("Content-Length") != fmt.Sprint(len(a.body)) {
		c.t.Fatalf("node %s: GET %s: %v %v", nd.name, name, a, a.header)
	}
	return a.body
}

// exportRange downloads an export's file from byte from on.
func (c *cluster) exportRange(nd *node, name string, from int) []byte {
	c.t.Helper()
	req, _ := http.NewRequest("GET", nd.url("/geowebcache/rest/exports/"+name), nil)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusPartialContent {
		c.t.Fatalf("node %s: Range GET %s: %d %q", nd.name, name, resp.StatusCode, b.String())
	}
	return b.Bytes()
}

// checkExportedTiles opens a downloaded GeoPackage and compares each of
// its tiles (want of them) with the tile node nd serves.
func (c *cluster) checkExportedTiles(file []byte, nd *node, want int64) {
	t := c.t
	t.Helper()
	p := filepath.Join(t.TempDir(), "export.gpkg")
	if err := os.WriteFile(p, file, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := geopackage.Open(p, epsg4326, "")
	if err != nil {
		t.Fatalf("the exported GeoPackage: %v", err)
	}
	defer r.Close()
	var n int64
	err = r.Each(func(idx gridset.Index, data []byte) error {
		if got := nd.mustTile(idx.X, idx.Y, idx.Z, "HIT"); !bytes.Equal(got.body, data) {
			t.Errorf("tile %v of the file differs from node %s's", idx, nd.name)
		}
		n++
		return nil
	})
	if err != nil || n != want {
		t.Fatalf("the GeoPackage holds %d tiles (%v), want %d", n, err, want)
	}
}
