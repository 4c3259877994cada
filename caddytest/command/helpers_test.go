package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/caddytest/proctest"
)

// result is how a subcommand ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// cliEnv is the environment of a subcommand: the URL and credentials in
// TILECACHE_*, and a home of its own, so that neither the user's Caddy
// data (its local CA) nor their TILECACHE_* settings play a part. extra
// (NAME=VALUE) overrides; NAME= alone removes.
func cliEnv(t *testing.T, extra ...string) []string {
	env := map[string]string{
		"PATH":               os.Getenv("PATH"),
		"HOME":               t.TempDir(),
		"XDG_DATA_HOME":      t.TempDir(),
		"TERM":               "xterm",
		"TILECACHE_URL":      restBase(),
		"TILECACHE_USER":     adminUser,
		"TILECACHE_PASSWORD": adminPass,
	}
	for _, e := range extra {
		k, v, _ := strings.Cut(e, "=")
		if v == "" {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// proc is a subcommand running in the background.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *proctest.Output
	stderr *proctest.Output
	done   chan struct{}
}

// start starts `caddy tile-cache args...` with its output on pipes.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(caddyBin, append([]string{"tile-cache"}, args...)...), env)
}

// startTTY starts `caddy tile-cache args...` on a pseudo-terminal, as a
// person at a terminal runs it: util-linux's script allocates it and
// copies what the command writes there to its stdout; with -e it exits
// with the command's status.
func startTTY(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	line := shellQuote(caddyBin) + " tile-cache"
	for _, a := range args {
		line += " " + shellQuote(a)
	}
	return startCmd(t, exec.Command("script", "-qefc", line, "/dev/null"), env)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// A cmd whose output already goes somewhere (a terminal) keeps it there.
func startCmd(t *testing.T, cmd *exec.Cmd, env []string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, stdout: &proctest.Output{}, stderr: &proctest.Output{}, done: make(chan struct{})}
	cmd.Env = env
	if cmd.Stdout == nil && cmd.Stderr == nil {
		cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	// A grandchild holding the output pipes must not hold up Wait forever.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits (up to within) for the command to end.
func (p *proc) wait(within time.Duration) result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("%v still running after %s:\n%s", p.cmd.Args, within, p.result())
	}
	return p.result()
}

func (p *proc) result() result {
	code := -1
	if p.cmd.ProcessState != nil {
		code = p.cmd.ProcessState.ExitCode()
	}
	return result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}

// waitFor waits until the command's stdout matches re, and returns the match.
func (p *proc) waitFor(re *regexp.Regexp, within time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.stdout.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			p.t.Fatalf("%v ended before printing %s:\n%s", p.cmd.Args, re, p.result())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("%v printed no %s in %s:\n%s", p.cmd.Args, re, within, p.result())
	return nil
}

// cli runs `caddy tile-cache args...` to its end (30 s at most).
func cli(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return start(t, env, args...).wait(30 * time.Second)
}

// oneErrorLine checks the way every failure reads: exit code, nothing
// on stdout, one line on stderr starting with "tile-cache: " + prefix.
func oneErrorLine(t *testing.T, r result, code int, prefix string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\n%s", r.code, code, r)
	}
	if r.stdout != "" {
		t.Errorf("stdout should be empty:\n%s", r)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr should be one line:\n%s", r)
	}
	if !strings.HasPrefix(r.stderr, "tile-cache: "+prefix) {
		t.Errorf("stderr should start with %q:\n%s", "tile-cache: "+prefix, r)
	}
}

// taskInfo is the part of a task's resource the tests check, read
// straight from the REST interface, not through the command.
type taskInfo struct {
	ID          int64  `json:"id"`
	Layer       string `json:"layer"`
	Type        string `json:"type"`
	State       string `json:"state"`
	Processed   int64  `json:"processed"`
	Total       int64  `json:"total"`
	FailedTiles int64  `json:"failedTiles"`
	Reason      string `json:"abortReason"`
}

func rest(t *testing.T, method, path string, body io.Reader, contentType string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, restBase()+path, body)
	req.SetBasicAuth(adminUser, adminPass)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func task(t *testing.T, id string) taskInfo {
	t.Helper()
	code, b := rest(t, http.MethodGet, "/rest/tasks/"+id+".json", nil, "")
	var ti taskInfo
	if code != http.StatusOK || json.Unmarshal(b, &ti) != nil {
		t.Fatalf("task %s: %d %s", id, code, b)
	}
	return ti
}

// active is the listing: [processed, total, remaining, id, status] rows.
func active(t *testing.T) [][5]int64 {
	t.Helper()
	code, b := rest(t, http.MethodGet, "/rest/seed.json", nil, "")
	var l struct {
		Rows [][5]int64 `json:"long-array-array"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
		t.Fatalf("listing: %d %s", code, b)
	}
	return l.Rows
}

// noTasksLeft kills whatever a test left running, so that the next one
// starts with an idle pool.
func noTasksLeft(t *testing.T) {
	t.Cleanup(func() {
		rest(t, http.MethodPost, "/rest/seed", strings.NewReader("kill_all=all"), "application/x-www-form-urlencoded")
		deadline := time.Now().Add(10 * time.Second)
		for len(active(t)) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// eventually waits for cond, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeFile writes a file in the test's temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
