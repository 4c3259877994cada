package caddytest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// These tests run Caddy as a separate process, built from cmd/caddy, so
// that they can kill it: with SIGKILL (a crash) and SIGTERM (a graceful
// stop). Its ports differ from the in-process Caddy's.
const (
	procAdmin = "localhost:2997"
	procPort  = 9097
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func caddyBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(storageRoot, "caddy")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/caddy").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("building cmd/caddy: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type caddyProc struct {
	cmd *exec.Cmd
	log *bytes.Buffer
}

func startProc(t *testing.T, config string) *caddyProc {
	t.Helper()
	f := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(f, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &caddyProc{cmd: exec.Command(caddyBinary(t), "run", "--config", f, "--adapter", "caddyfile"), log: new(bytes.Buffer)}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + procAdmin + "/config/"); err == nil {
			resp.Body.Close()
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("separate Caddy did not start:\n%s", p.log)
	return nil
}

func (p *caddyProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("Caddy did not stop on %v:\n%s", sig, p.log)
	}
}

func procConfig(f *fakeWMS, storage string) string {
	return procConfigWith(f.URL, "WARN", 1, "storage "+storeLines(storage))
}

// procConfigWith is the separate Caddy's config: its log level, seeding
// workers, and the cache's lines before its one layer (storage, quota...).
func procConfigWith(upstream, level string, workers int, cacheLines string) string {
	return fmt.Sprintf(`{
	admin %s
	http_port %d
	auto_https off
	grace_period 1ns
	log {
		level %s
	}
}
`, procAdmin, procPort, level) + siteConfig{port: procPort, admin: ptr(fmt.Sprintf("workers %d\ncheckpoint_interval 100ms", workers)), tiles: `
		upstream ` + upstream + `/wms
		` + cacheLines + `
		layer test:a {
			gridsets EPSG:4326
		}`}.String()
}

func procREST(t *testing.T, method, path, body string) answer {
	t.Helper()
	hdr := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass))}
	if body != "" {
		hdr = append(hdr, "Content-Type", "application/json")
	}
	return doBody(t, method, fmt.Sprintf("http://localhost:%d/geowebcache%s", procPort, path), body, hdr...)
}

// resumable is a task to stop part-way: how it is submitted (a path and
// body under the REST interface) and what it must come to, on level 4 of
// EPSG:4326 (512 tiles in 32 metatiles) with one worker.
type resumable struct {
	path, body   string
	tiles, metas int64
}

// boxTask is all of level 4.
var boxTask = resumable{"/rest/seed/test:a.json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":4,"zoomStop":4}}`, 512, 32}

// polygonTask is a triangle over level 4: its polygon is read back from
// the store after the restart.
func polygonTask(t *testing.T) resumable {
	const tri = `{"type":"Polygon","coordinates":[[[-180,-90],[180,-90],[-180,90],[-180,-90]]]}`
	g, _ := gridset.Builtin("EPSG:4326")
	geom, err := area.ParseGeoJSON([]byte(tri), area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tiles, metas := selected(g, geom, 0, 4, 4)
	return resumable{"/rest/seed/test:a.json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":4,"zoomStop":4,"geometry":` + tri + `}}`,
		int64(len(tiles)), int64(len(metas))}
}

// listTask is a tile list of every third tile of level 4: its list is
// read back from the store after the restart.
func listTask() resumable {
	var b strings.Builder
	n := 0
	for x := 0; x < 32; x++ {
		for y := 0; y < 16; y++ {
			if (x+y)%3 == 0 {
				fmt.Fprintf(&b, "4/%d/%d\n", x, y)
				n++
			}
		}
	}
	return resumable{"/rest/seed/test:a/tiles?type=seed&gridSetId=EPSG:4326", b.String(), int64(n), 32}
}

// runResumeTest submits task, stops Caddy part-way with sig, starts it
// again on the same store, and checks that the task comes back under its
// id and finishes, fetching again no more than the work since the last
// checkpoint.
func runResumeTest(t *testing.T, sig syscall.Signal, task resumable) {
	f := newFakeWMS(t)
	f.set("", 40*time.Millisecond)
	dir := storageDir(t)
	p := startProc(t, procConfig(f, dir))
	a := procREST(t, "POST", task.path, task.body)
	if a.status != 200 {
		t.Fatalf("seed: %d %s", a.status, a.body)
	}
	taskPath := strings.TrimPrefix(a.header.Get("Location"), fmt.Sprintf("http://localhost:%d/geowebcache", procPort))
	deadline := time.Now().Add(20 * time.Second)
	for f.getMaps.Load() < task.metas/3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.stop(t, sig)
	before := f.getMaps.Load()
	if before >= task.metas {
		t.Fatalf("the seed finished (%d GetMaps) before Caddy was stopped", before)
	}

	p2 := startProc(t, procConfig(f, dir))
	var ti taskInfo
	deadline = time.Now().Add(60 * time.Second)
	for {
		a := procREST(t, "GET", taskPath, "")
		if a.status == 200 {
			if err := json.Unmarshal(a.body, &ti); err != nil {
				t.Fatal(err)
			}
			if ti.Status == 2 || ti.Status == -1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not finished after restart: %d %s", taskPath, a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ti.State != "DONE" || ti.Processed != task.tiles || ti.Total != task.tiles || ti.FailedTiles != 0 {
		t.Fatalf("resumed task %+v, want DONE %d/%d", ti, task.tiles, task.tiles)
	}
	// Redone: what was fetched since the last checkpoint (100 ms ≈ 3
	// metatiles at 40 ms) plus the two a worker has in hand.
	if extra := f.getMaps.Load() - task.metas; extra < 0 || extra > 8 {
		t.Fatalf("%d GetMaps for %d metatiles: %d fetched again after the restart", f.getMaps.Load(), task.metas, extra)
	}
	// Every stored tile decodes: nothing half-written survived.
	p2.stop(t, syscall.SIGTERM)
	n := 0
	err := eachTile(t, dir, func(data []byte) error {
		n++
		_, _, err := image.Decode(bytes.NewReader(data))
		return err
	})
	if err != nil || int64(n) < task.tiles {
		t.Fatalf("stored tiles: %d decoded, error %v", n, err)
	}
}

func TestCrashResumesSeedFromCheckpoint(t *testing.T) { runResumeTest(t, syscall.SIGKILL, boxTask) }
func TestGracefulStopResumesSeed(t *testing.T)        { runResumeTest(t, syscall.SIGTERM, boxTask) }

// A polygon task and a tile list task resume after a crash too: their
// polygon and list are saved once beside the task's record.
func TestCrashResumesPolygonSeed(t *testing.T)  { runResumeTest(t, syscall.SIGKILL, polygonTask(t)) }
func TestCrashResumesTileListSeed(t *testing.T) { runResumeTest(t, syscall.SIGKILL, listTask()) }
