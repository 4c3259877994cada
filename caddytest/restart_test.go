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
	return fmt.Sprintf(`{
	admin %s
	http_port %d
	auto_https off
	grace_period 1ns
	log {
		level WARN
	}
}
`, procAdmin, procPort) + siteConfig{port: procPort, admin: ptr("workers 1\ncheckpoint_interval 100ms"), tiles: `
		upstream ` + f.URL + `/wms
		storage ` + storeLines(storage) + `
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

// runResumeTest seeds level 4 of EPSG:4326 (512 tiles, 32 metatiles, one
// worker), stops Caddy part-way with sig, starts it again on the same
// store, and checks that the task comes back under its id and finishes,
// fetching again no more than the work since the last checkpoint.
func runResumeTest(t *testing.T, sig syscall.Signal) {
	f := newFakeWMS(t)
	f.set("", 40*time.Millisecond)
	dir := storageDir(t)
	p := startProc(t, procConfig(f, dir))
	a := procREST(t, "POST", "/rest/seed/test:a.json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":4,"zoomStop":4}}`)
	if a.status != 200 {
		t.Fatalf("seed: %d %s", a.status, a.body)
	}
	taskPath := strings.TrimPrefix(a.header.Get("Location"), fmt.Sprintf("http://localhost:%d/geowebcache", procPort))
	deadline := time.Now().Add(20 * time.Second)
	for f.getMaps.Load() < 12 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.stop(t, sig)
	before := f.getMaps.Load()
	if before >= 32 {
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
	if ti.State != "DONE" || ti.Processed != 512 || ti.Total != 512 || ti.FailedTiles != 0 {
		t.Fatalf("resumed task %+v", ti)
	}
	// Redone: what was fetched since the last checkpoint (100 ms ≈ 3
	// metatiles at 40 ms) plus the two a worker has in hand.
	if extra := f.getMaps.Load() - 32; extra < 0 || extra > 8 {
		t.Fatalf("%d GetMaps for 32 metatiles: %d fetched again after the restart", f.getMaps.Load(), extra)
	}
	// Every stored tile decodes: nothing half-written survived.
	p2.stop(t, syscall.SIGTERM)
	n := 0
	err := eachTile(t, dir, func(data []byte) error {
		n++
		_, _, err := image.Decode(bytes.NewReader(data))
		return err
	})
	if err != nil || n < 512 {
		t.Fatalf("stored tiles: %d decoded, error %v", n, err)
	}
}

func TestCrashResumesSeedFromCheckpoint(t *testing.T) { runResumeTest(t, syscall.SIGKILL) }
func TestGracefulStopResumesSeed(t *testing.T)        { runResumeTest(t, syscall.SIGTERM) }
