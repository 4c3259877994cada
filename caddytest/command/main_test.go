// Package command tests `caddy tile-cache`: the subcommands of the Caddy
// binary built from cmd/caddy, run as processes (on a pipe, and on a
// pseudo-terminal through util-linux's script) against one real Caddy
// process with a Badger store, a fake WMS in this test process, and the
// REST interface behind basic_auth. Everything is on loopback. The tests
// share that Caddy and run one after another: kill --all must not meet
// another test's tasks.
package command

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/tilecache/caddy-tilecache/caddytest/proctest"
)

const (
	adminUser = "admin"
	adminPass = "s3cret with spaces"
)

var (
	caddyBin string // Caddy with the plugin, built once
	tmpRoot  string
	wms      *fakeWMS
	srv      struct {
		httpPort, httpsPort, adminPort int
		xdg                            string // Caddy's XDG_DATA_HOME: its local CA is there
		log                            *proctest.Output
	}
)

// restBase is where the REST interface is mounted on the plain HTTP site.
func restBase() string { return fmt.Sprintf("http://127.0.0.1:%d/geowebcache", srv.httpPort) }

// tlsBase is the same interface on the `tls internal` site.
func tlsBase() string { return fmt.Sprintf("https://127.0.0.1:%d/geowebcache", srv.httpsPort) }

// localRoot is the root certificate of Caddy's local CA.
func localRoot() string {
	return filepath.Join(srv.xdg, "caddy", "pki", "authorities", "local", "root.crt")
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	tmpRoot, err = os.MkdirTemp("", "tilecache-command-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "command:", err)
		return 1
	}
	defer os.RemoveAll(tmpRoot)
	caddyBin = filepath.Join(tmpRoot, "caddy")
	if out, err := exec.Command("go", "build", "-o", caddyBin, "../../cmd/caddy").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "command: building cmd/caddy: %v\n%s", err, out)
		return 1
	}
	wms = newFakeWMS()
	defer wms.Close()
	stop, err := startCaddy()
	if err != nil {
		fmt.Fprintln(os.Stderr, "command:", err)
		if srv.log != nil {
			fmt.Fprintln(os.Stderr, srv.log.String())
		}
		return 1
	}
	defer stop()
	return m.Run()
}

// caddyfile: one cache with a fast, a slow and a failing layer; the REST
// interface at /geowebcache (on HTTP and on HTTPS with Caddy's local CA),
// again at /limited with max_tasks 1 (429), and a 503 at /down. The
// breaker is off: the failing layer must fail tiles, not pause the others.
func caddyfile(hash string) string {
	admin := func(extra string) string {
		return fmt.Sprintf(`basic_auth {
			%s %s
		}
		tile_cache_admin {
			workers 2
			retry_count 0
			retry_wait 10ms
			checkpoint_interval 200ms%s
		}`, adminUser, hash, extra)
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	http_port %d
	https_port %d
	auto_https disable_redirects
	skip_install_trust
	grace_period 1ns
}

http://127.0.0.1:%d {
	handle_path /geowebcache/* {
		%s
	}
	handle_path /limited/* {
		%s
	}
	handle_path /down/* {
		respond "down for maintenance until 22:00" 503
	}
	handle {
		tile_cache {
			upstream %s/wms
			storage %s
			timeout 5s
			breaker off
			layer test:a {
				gridsets EPSG:4326
			}
			layer test:slow {
				gridsets EPSG:4326
			}
			layer test:fail {
				gridsets EPSG:4326
			}
		}
	}
}

https://127.0.0.1:%d {
	tls internal
	handle_path /geowebcache/* {
		%s
	}
}
`, srv.adminPort, srv.httpPort, srv.httpsPort, srv.httpPort, admin(""), admin("\n\t\t\tmax_tasks 1"),
		wms.URL, filepath.Join(tmpRoot, "badger"), srv.httpsPort, admin(""))
}

// startCaddy starts the Caddy process and waits until both sites answer.
func startCaddy() (stop func(), err error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(adminPass), 4) // low cost: tests log in often
	if err != nil {
		return nil, err
	}
	for _, p := range []*int{&srv.httpPort, &srv.httpsPort, &srv.adminPort} {
		if *p, err = proctest.Port(); err != nil {
			return nil, err
		}
	}
	srv.xdg = filepath.Join(tmpRoot, "caddy-data")
	srv.log = &proctest.Output{}
	cfg := filepath.Join(tmpRoot, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile(string(hash))), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(caddyBin, "run", "--config", cfg, "--adapter", "caddyfile")
	cmd.Stdout, cmd.Stderr = srv.log, srv.log
	// A test binary that dies (a timeout's panic) takes Caddy along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+srv.xdg, "XDG_CONFIG_HOME="+filepath.Join(tmpRoot, "caddy-config"))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			return nil, fmt.Errorf("caddy exited while starting")
		default:
		}
		if ready() {
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("caddy did not answer on both sites in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ready: the REST interface answers on HTTP, and on HTTPS with a
// certificate of the local CA.
func ready() bool {
	if code, _ := restStatus(http.DefaultClient, restBase()+"/rest/seed.json"); code != http.StatusOK {
		return false
	}
	pem, err := os.ReadFile(localRoot())
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	code, _ := restStatus(c, tlsBase()+"/rest/seed.json")
	return code == http.StatusOK
}

func restStatus(c *http.Client, u string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
