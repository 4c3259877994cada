// Package caddytest runs the plugin inside a real, in-process Caddy
// (Caddy's own caddytest harness, admin on localhost:2999) against fake and
// real WMS upstreams. All Caddy-level tests live in this one package because
// there is one Caddy per process.
package caddytest

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tilecache/caddy-tilecache"
)

const (
	adminAddr = "localhost:2999"
	httpPort  = 9080
)

// storageRoot holds every test's Badger directory. It is removed only after
// all tests, because the last loaded config keeps its store open until the
// process ends.
var storageRoot string

// atExit runs after all tests: stopping processes tests started.
var atExit []func()

func TestMain(m *testing.M) {
	// Parse the test flags now: starting Caddy below rewrites os.Args,
	// which m.Run would otherwise parse instead.
	flag.Parse()
	var err error
	storageRoot, err = os.MkdirTemp("", "tilecache-caddytest-")
	if err != nil {
		panic(err)
	}
	checkStore, stopStore, err := startStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "caddytest: the tile store did not start:", err)
		os.Exit(1)
	}
	// Start Caddy ourselves instead of leaving it to caddytest, which
	// *skips* every test when Caddy does not come up: here that is a failure.
	if err := startCaddy(); err != nil {
		fmt.Fprintln(os.Stderr, "caddytest: Caddy did not start:", err)
		stopStore()
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	if err := checkStore(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "caddytest:", err)
		code = 1
	}
	stopStore()
	os.RemoveAll(storageRoot)
	os.Exit(code)
}

func startCaddy() error {
	// Another test binary's Caddy on the same admin port would receive our
	// configs (and we its): refuse to run alongside it.
	if resp, err := http.Get("http://" + adminAddr + "/config/"); err == nil {
		resp.Body.Close()
		return fmt.Errorf("something already answers on %s (another caddytest run?)", adminAddr)
	}
	cfg, err := os.CreateTemp("", "caddytest-init-*.caddyfile")
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg, "{\n\tadmin %s\n}\n", adminAddr)
	cfg.Close()
	os.Args = []string{"caddy", "run", "--config", cfg.Name(), "--adapter", "caddyfile"}
	go caddycmd.Main()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + adminAddr + "/config/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("admin API at %s not answering", adminAddr)
}

// globalOptions is the head of every test Caddyfile: the admin address the
// harness talks to, loopback-only ports, and no waiting on shutdown; extra
// global options (the tile_cache app's caches) go in the same block.
func globalOptions(extra ...string) string {
	return fmt.Sprintf(`{
	admin %s
	http_port %d
	https_port 9443
	grace_period 1ns
	skip_install_trust
	auto_https off
	log {
		level WARN
	}
	%s
}
`, adminAddr, httpPort, strings.Join(extra, "\n\t"))
}

func storageDir(t *testing.T) string {
	d, err := os.MkdirTemp(storageRoot, "store-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}
