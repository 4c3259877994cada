package caddytest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestGISClients runs GDAL and OWSLib (Debian's python3-gdal and
// python3-owslib, which test.sh installs) against tile_cache in front of
// the project's MapServer, through every protocol: WMS-C 1.1.1 from the
// TILED=true capabilities and 1.3.0, WMTS (REST through GDAL, KVP through
// OWSLib) in EPSG:4326, EPSG:900913 and EPSG:3857, TMS and XYZ. The
// script (testdata/clients/clients.py) compares every level it reads with
// the upstream's own render of the same metatiles, pixel for pixel, reads
// it again expecting only hits, and follows the URLs the capabilities
// advertise; it prints a line per check.
func TestGISClients(t *testing.T) {
	const python = "/usr/bin/python3" // Debian's, which has the packages
	if out, err := exec.Command(python, "-c", "import osgeo.gdal, owslib, numpy").CombinedOutput(); err != nil {
		t.Fatalf("GDAL/OWSLib for Python missing (test.sh installs python3-gdal python3-owslib): %v\n%s", err, out)
	}
	up := mapServer(t)
	load(t, siteConfig{upstream: up, tiles: `
		upstream ` + up + `
		storage ` + storageDir(t) + `
		timeout 60s
		services {
			wmts /wmts
			tms /tms
			xyz /xyz
		}
		layer test:polygons {
			gridsets EPSG:4326 EPSG:900913
			metatile 4 4
		}`}.String())
	origin := fmt.Sprintf("http://localhost:%d", httpPort)
	cmd := exec.Command(python, "testdata/clients/clients.py", origin, up, "http://"+adminAddr+"/metrics")
	cmd.Env = append(os.Environ(), "GDAL_HTTP_TIMEOUT=60", "CPL_DEBUG=OFF")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the client script did not finish in 5 minutes:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	oks := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") {
			oks++
		}
	}
	if err != nil || oks < 100 || !strings.HasSuffix(lines[len(lines)-1], "0 failures") {
		t.Fatalf("GIS clients: %v, %d checks passed\n%s", err, oks, out)
	}
	t.Logf("%d client checks passed", oks)
}
