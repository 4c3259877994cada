// Package cluster runs several Caddy processes as one cache (the `cluster`
// option of tile_cache): tiles shared through one MinIO bucket, tasks, work
// units and locks through one file_system storage directory that every
// node names in its global `storage` option. Each test starts its own
// three nodes (the binary built from cmd/caddy), its own storage
// directory, bucket and prefix, and kills them at its end. Everything runs
// on loopback.
package cluster

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
)

var (
	// caddyBin is Caddy with the plugin, built once for the test binary.
	caddyBin string
	// minioSrv is the S3 server of every test (one bucket per test).
	minioSrv *s3test.Server
	// tmpRoot holds the binary and whatever outlives single tests.
	tmpRoot string
	// atExit runs after all tests (stopping MapServer).
	atExit []func()
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	tmpRoot, err = os.MkdirTemp("", "tilecache-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	defer os.RemoveAll(tmpRoot)
	caddyBin = filepath.Join(tmpRoot, "caddy")
	if out, err := exec.Command("go", "build", "-o", caddyBin, "../../cmd/caddy").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: building cmd/caddy: %v\n%s", err, out)
		return 1
	}
	srv, stop, err := s3test.StartShared()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: MinIO did not start:", err)
		return 1
	}
	defer stop()
	minioSrv = srv
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	return code
}
