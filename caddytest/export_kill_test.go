package caddytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
)

// An export killed (SIGKILL) in its seed phase and again in its write
// phase of a 2,730-tile GeoPackage export: neither kill leaves a file
// under the export's name, and after each restart the task resumes; it
// ends DONE with a whole file.
func TestExportSurvivesKills(t *testing.T) {
	ownStore(t)
	f := newFakeWMS(t)
	f.set("", 5*time.Millisecond) // a seed phase long enough to land a kill in
	dir, offline := storageDir(t), filepath.Join(t.TempDir(), "offline")
	fileOf := func(id int) string { return filepath.Join(offline, "exports", fmt.Sprintf("task-%d.gpkg", id)) }
	cfg := fmt.Sprintf(`{
	admin %s
	http_port %d
	auto_https off
	grace_period 1ns
	log {
		level WARN
	}
}
`, procAdmin, procPort) + siteConfig{port: procPort, admin: ptr("workers 2\ncheckpoint_interval 100ms\noffline_dir " + offline), tiles: `
		upstream ` + f.URL + `/wms
		storage ` + dir + `
		timeout 10s
		layer test:a {
			gridsets EPSG:4326
		}`}.String()
	info := func(id int) (taskInfo, bool) {
		a := procREST(t, "GET", fmt.Sprintf("/rest/tasks/%d.json", id), "")
		var ti taskInfo
		if a.status != 200 || json.Unmarshal(a.body, &ti) != nil || ti.Export == nil {
			return ti, false
		}
		return ti, true
	}
	// waitPhase polls task id until cond holds, bounded only against a hang.
	waitPhase := func(id int, what string, cond func(taskInfo) bool) taskInfo {
		t.Helper()
		deadline := time.Now().Add(taskPatience)
		for {
			if ti, ok := info(id); ok && cond(ti) {
				return ti
			}
			if time.Now().After(deadline) {
				ti, _ := info(id)
				t.Fatalf("%s: not seen in %v; last %+v %+v", what, taskPatience, ti, ti.Export)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	const export = `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":5,"type":"export","exportFormat":"gpkg","threadCount":2}}`
	submit := func() {
		t.Helper()
		if a := procREST(t, "POST", "/rest/seed/test:a.json", export); a.status != 200 {
			t.Fatalf("export: %d %q", a.status, a.body)
		}
	}

	p := startProc(t, cfg)
	submit()
	waitPhase(1, "the seed phase under way", func(ti taskInfo) bool { return ti.Processed > 0 && ti.Export.Phase == "seed" })
	p.stop(t, syscall.SIGKILL)
	if _, err := os.Stat(fileOf(1)); !os.IsNotExist(err) {
		t.Fatalf("a kill in the seed phase left %s (%v)", fileOf(1), err)
	}

	// Resumed; killed again once it writes. A write phase may pass
	// between two looks (2,730 tiles are a fraction of a second on a
	// quiet machine): then the same export is asked for again, whose
	// tiles are all cached, so that it goes straight to writing; at
	// most 5 tries.
	p = startProc(t, cfg)
	id := 1
	for ; ; id++ {
		if id > 1 {
			submit()
		}
		ti := waitPhase(id, "the write phase", func(ti taskInfo) bool { return ti.Export.Phase != "seed" })
		if ti.Export.Phase == "write" {
			break
		}
		if id == 5 {
			t.Fatalf("in 5 exports the write phase was never seen under way (last: %s %+v)", ti.State, ti.Export)
		}
	}
	p.stop(t, syscall.SIGKILL)
	if _, err := os.Stat(fileOf(id)); !os.IsNotExist(err) {
		t.Fatalf("a kill in the write phase left %s (%v)", fileOf(id), err)
	}

	// Resumed again: it ends DONE with all 2,730 tiles in a whole file.
	startProc(t, cfg)
	ti := waitPhase(id, "the end", func(ti taskInfo) bool { return ti.Status == 2 || ti.Status == -1 })
	if ti.State != "DONE" || ti.Export.Tiles != 2730 || ti.Export.Missing != 0 || ti.Export.File != fmt.Sprintf("task-%d.gpkg", id) {
		t.Fatalf("after two kills: %+v %+v", ti, ti.Export)
	}
	g, _ := gridset.Builtin("EPSG:4326")
	r, err := geopackage.Open(fileOf(id), g, "")
	if err != nil {
		t.Fatalf("the file after two kills: %v", err)
	}
	n := 0
	r.Each(func(gridset.Index, []byte) error { n++; return nil })
	r.Close()
	if n != 2730 {
		t.Fatalf("the file holds %d tiles, want 2730", n)
	}
	if left, _ := filepath.Glob(filepath.Join(offline, "exports", "*.partial")); len(left) != 0 {
		t.Errorf("partial files left after the export ended: %v", left)
	}
}
