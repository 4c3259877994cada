// Package upstreamtest starts the project's real upstream WMS servers for
// the test packages that need them: MapServer (upstream/start.sh) and QGIS
// Server (upstream/qgis/start.sh, a project written with PyQGIS from the
// same data), each behind its own lighttpd on a free loopback port.
package upstreamtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// upstreamDir is the upstream/ folder, found from this file: the tests that
// call Start run in folders of their own.
func upstreamDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// MapServer runs MapServer with its state in dir and returns its WMS URL
// and the function that stops it.
func MapServer(dir string) (url string, stop func(), err error) {
	return start("MapServer", "/usr/lib/cgi-bin/mapserv", "", dir)
}

// QGIS runs QGIS Server with its state in dir and returns its WMS URL and
// the function that stops it.
func QGIS(dir string) (url string, stop func(), err error) {
	return start("QGIS Server", "/usr/lib/cgi-bin/qgis_mapserv.fcgi", "qgis", dir)
}

// start runs sub/start.sh DIR PORT (sub "" for upstream/ itself) on a port
// the kernel had free a moment before.
func start(name, binary, sub, dir string) (url string, stop func(), err error) {
	if _, err := os.Stat(binary); err != nil {
		return "", nil, fmt.Errorf("%s is not installed: run upstream/install.sh (test.sh does): %v", name, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	scripts := filepath.Join(upstreamDir(), sub)
	out, err := exec.Command("bash", filepath.Join(scripts, "start.sh"), dir, fmt.Sprint(port)).CombinedOutput()
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("%s: upstream/%s: %v", name, filepath.Join(sub, "start.sh"), err), errors.New(string(out)))
	}
	stop = func() { exec.Command("bash", filepath.Join(scripts, "stop.sh"), dir).Run() }
	return fmt.Sprintf("http://127.0.0.1:%d/wms", port), stop, nil
}
