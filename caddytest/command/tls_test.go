package command

import (
	"fmt"
	"strings"
	"testing"
)

// HTTPS as Caddy does it: the system's roots, plus the root of Caddy's
// local CA in the user's Caddy data directory (a `tls internal` or
// localhost site of a Caddy run by the same user), plus --ca-cert. A
// certificate of a CA trusted by none of them is refused: exit 4 with
// the hint.
func TestTLSTrustsCaddysLocalCAOrCACert(t *testing.T) {
	noTasksLeft(t)
	// The same user as the Caddy process: its data directory, its local CA.
	r := cli(t, cliEnv(t, "TILECACHE_URL="+tlsBase(), "XDG_DATA_HOME="+srv.xdg), "tasks")
	if r.code != 0 || r.stdout != "no pending or running tasks\n" {
		t.Errorf("with Caddy's data directory:\n%s", r)
	}
	// Another user: the local CA is unknown.
	r = cli(t, cliEnv(t, "TILECACHE_URL="+tlsBase()), "tasks")
	oneErrorLine(t, r, 4, fmt.Sprintf("127.0.0.1:%d unreachable: TLS: ", srv.httpsPort))
	if !strings.Contains(r.stderr, "(trust its CA with --ca-cert)") {
		t.Errorf("no hint at --ca-cert:\n%s", r)
	}
	// ...unless its root is given.
	r = cli(t, cliEnv(t, "TILECACHE_URL="+tlsBase()), "tasks", "--ca-cert", localRoot())
	if r.code != 0 || r.stdout != "no pending or running tasks\n" {
		t.Errorf("with --ca-cert:\n%s", r)
	}
	r = cli(t, cliEnv(t, "TILECACHE_URL="+tlsBase(), "TILECACHE_CA_CERT="+localRoot()), "seed", "--layer", "test:a", "--levels", "0", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout, "(seed of test:a) DONE: 2 tiles") {
		t.Errorf("a seed over HTTPS with TILECACHE_CA_CERT:\n%s", r)
	}
	bad := writeFile(t, "not.pem", "not a certificate\n")
	oneErrorLine(t, cli(t, cliEnv(t, "TILECACHE_URL="+tlsBase()), "tasks", "--ca-cert", bad), 1, "--ca-cert "+bad+": no PEM certificate in it")
}
