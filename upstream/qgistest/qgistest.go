// Package qgistest starts the project's second real upstream, QGIS Server
// behind lighttpd on loopback (upstream/qgis/start.sh, serving a project
// written with PyQGIS from the data upstream/generate.sh makes), for the
// test packages that need it.
package qgistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// scripts is the upstream/qgis/ folder, found from this file: the tests
// that call Start run in folders of their own.
func scripts() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(filepath.Dir(file)), "qgis")
}

// Start runs QGIS Server with its state in dir on a free loopback port and
// returns its WMS URL and the function that stops it.
func Start(dir string) (url string, stop func(), err error) {
	if _, err := os.Stat("/usr/lib/cgi-bin/qgis_mapserv.fcgi"); err != nil {
		return "", nil, fmt.Errorf("QGIS Server is not installed: run upstream/install.sh (test.sh does): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	out, err := exec.Command("bash", filepath.Join(scripts(), "start.sh"), dir, fmt.Sprint(port)).CombinedOutput()
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("upstream/qgis/start.sh: %v", err), errors.New(string(out)))
	}
	stop = func() { exec.Command("bash", filepath.Join(scripts(), "stop.sh"), dir).Run() }
	return fmt.Sprintf("http://127.0.0.1:%d/wms", port), stop, nil
}
