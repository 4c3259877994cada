package caddytest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// debianPython is Debian's own Python, which has python3-gdal,
// python3-owslib and python3-qgis (test.sh installs them); a Python of
// its own on PATH (pyenv, a venv) would not.
const debianPython = "/usr/bin/python3"

// TestGISClients runs GDAL and OWSLib (Debian's python3-gdal and
// python3-owslib) against tile_cache in front of the project's MapServer,
// through every protocol: WMS-C 1.1.1 from the TILED=true capabilities and
// 1.3.0, WMTS (REST through GDAL, KVP through OWSLib) in EPSG:4326,
// EPSG:900913 and EPSG:3857, TMS and XYZ. The script
// (testdata/clients/clients.py) compares every level it reads with the
// upstream's own render of the same metatiles, pixel for pixel, reads it
// again expecting only hits, and follows the URLs the capabilities
// advertise; it prints a line per check.
func TestGISClients(t *testing.T) {
	clientsOnce(t)
	runClientScript(t, "testdata/clients/clients.py", "import osgeo.gdal, owslib, numpy", clientLayers, 100)
}

// TestQGIS draws the layer with QGIS 3.22 (Debian's python3-qgis, headless)
// the ways an operator adds it: WMTS from the plain /wmts URL in EPSG:3857
// and EPSG:4326, XYZ, TMS, WMS-C from the tiled capabilities with QGIS's
// default DPI parameters, and untiled WMS from the passed-through
// capabilities. Each drawing must equal MapServer's render pixel for pixel
// and a fresh QGIS drawing it again must get only hits
// (testdata/clients/qgis_clients.py).
func TestQGIS(t *testing.T) {
	clientsOnce(t)
	runClientScript(t, "testdata/clients/qgis_clients.py", "import qgis.core, numpy", clientLayers, 40)
}

// clientPatience bounds a client script's whole run, only so that a run
// which hangs ends: the QGIS script takes about a minute on a quiet
// machine and has taken over 5 minutes beside CPU hogs with every check
// passing, so it is no speed. A script bounds each of its own requests by
// requestPatience and each QGIS drawing by drawPatience (passed in its
// environment), both under clientPatience, so that a hang inside a run
// is reported by the script with what it was doing.
const (
	clientPatience  = 20 * time.Minute
	requestPatience = 5 * time.Minute
	drawPatience    = 10 * time.Minute
)

// clientLayers is the site of clients.py and qgis_clients.py: layer
// test:polygons in EPSG:4326 and EPSG:900913 with 4x4 metatiles.
const clientLayers = `
		layer test:polygons {
			gridsets EPSG:4326 EPSG:900913
			metatile 4 4
		}`

// runClientScript serves layers (every service) in front of MapServer,
// with the neutral parameters Caddyfile.example sets for QGIS, and runs a
// client script as `script ORIGIN UPSTREAM METRICS`. The script prints
// "ok   …" or "FAIL …" per check and "N failures" last.
func runClientScript(t *testing.T, script, imports, layers string, minChecks int) {
	if out, err := exec.Command(debianPython, "-c", imports).CombinedOutput(); err != nil {
		t.Fatalf("%s: Debian's Python packages missing (test.sh installs them): %v\n%s", imports, err, out)
	}
	up := mapServer(t)
	load(t, siteConfig{upstream: up, tiles: `
		upstream ` + up + `
		storage ` + storeLines(storageDir(t)) + `
		timeout 60s
		neutral_params DPI MAP_RESOLUTION FORMAT_OPTIONS
		services {
			wmts /wmts
			tms /tms
			xyz /xyz
		}` + layers}.String())
	origin := fmt.Sprintf("http://localhost:%d", httpPort)
	cmd := exec.Command(debianPython, script, origin, up, "http://"+adminAddr+"/metrics")
	// TILECACHE_CLIENT_REQUEST_TIMEOUT bounds each HTTP request of the script,
	// TILECACHE_CLIENT_DRAW_TIMEOUT each QGIS drawing (seconds).
	cmd.Env = append(os.Environ(), fmt.Sprintf("GDAL_HTTP_TIMEOUT=%d", int(requestPatience.Seconds())),
		"CPL_DEBUG=OFF", "QT_QPA_PLATFORM=offscreen",
		fmt.Sprintf("TILECACHE_CLIENT_REQUEST_TIMEOUT=%d", int(requestPatience.Seconds())),
		fmt.Sprintf("TILECACHE_CLIENT_DRAW_TIMEOUT=%d", int(drawPatience.Seconds())))
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(clientPatience):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish in %v (a hung run):\n%s", script, clientPatience, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	oks := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") {
			oks++
		}
	}
	if err != nil || oks < minChecks || !strings.HasSuffix(lines[len(lines)-1], "0 failures") {
		t.Fatalf("%s: %v, %d checks passed\n%s", script, err, oks, out)
	}
	t.Logf("%s: %d checks passed\n%s", script, oks, out)
}
