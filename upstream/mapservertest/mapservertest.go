// Package mapservertest starts the project's real upstream, MapServer
// behind lighttpd on loopback (upstream/start.sh, with the data
// upstream/generate.sh makes), for the test packages that need it.
package mapservertest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// scripts is the upstream/ folder, found from this file: the tests that
// call Start run in folders of their own.
func scripts() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// Start runs MapServer with its state in dir on a free loopback port and
// returns its WMS URL and the function that stops it.
func Start(dir string) (url string, stop func(), err error) {
	if _, err := os.Stat("/usr/lib/cgi-bin/mapserv"); err != nil {
		return "", nil, fmt.Errorf("MapServer is not installed: run upstream/install.sh (test.sh does): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	out, err := exec.Command("bash", filepath.Join(scripts(), "start.sh"), dir, fmt.Sprint(port)).CombinedOutput()
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("upstream/start.sh: %v", err), errors.New(string(out)))
	}
	stop = func() { exec.Command("bash", filepath.Join(scripts(), "stop.sh"), dir).Run() }
	return fmt.Sprintf("http://127.0.0.1:%d/wms", port), stop, nil
}
