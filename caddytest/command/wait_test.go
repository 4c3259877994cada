package command

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var (
	headRe = regexp.MustCompile(`task (\d+): (seed|reseed|truncate) of (\S+), EPSG:4326 image/png, levels (\d+)-(\d+), (\d+) tiles`)
	// a progress line: 2026-11-25T20:23:52Z task 2 RESEED test:slow RUNNING 570/682 tiles (83.6%), 91.3 tiles/s, 0:01 left
	lineRe = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\S+ task (\d+) RESEED test:slow RUNNING (\d+)/682 tiles \([\d.]+%\), [\d.]+ tiles/s, (?:--:--|\d+:\d\d) left$`)
)

// The cron line: a reseed with --wait, output not a terminal.
// It prints the task, progress lines while it runs, the end in one line,
// and exits 0; the task is DONE with every tile rendered.
func TestReseedWaitOnAPipeWritesProgressLinesAndExitsZero(t *testing.T) {
	noTasksLeft(t)
	before := wms.count("test:slow")
	// The URL as a flag, the credentials from the environment, as in a crontab.
	r := cli(t, cliEnv(t, "TILECACHE_URL="), "reseed", "--url", restBase(), "--layer", "test:slow", "--levels", "0-4",
		"--threads", "2", "--wait", "--interval", "200ms")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and nothing on stderr:\n%s", r)
	}
	if strings.Contains(r.stdout, "\r") || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("a bar (\\r, escapes) on a pipe:\n%s", r)
	}
	head := headRe.FindStringSubmatch(r.stdout)
	if head == nil || head[2] != "reseed" || head[3] != "test:slow" || head[6] != "682" {
		t.Fatalf("no head line naming the task:\n%s", r)
	}
	id := head[1]
	lines := lineRe.FindAllStringSubmatch(r.stdout, -1)
	if len(lines) < 3 {
		t.Fatalf("%d progress lines for a task of ~3 s at --interval 200ms, want several:\n%s", len(lines), r)
	}
	prev := -1
	for _, l := range lines {
		n, _ := strconv.Atoi(l[2])
		if l[1] != id || n < prev {
			t.Errorf("progress line %q: another task, or fewer tiles than before (%d)", l[0], prev)
		}
		prev = n
	}
	if prev == 682 || prev < 0 {
		t.Errorf("no progress line while running (last %d of 682)", prev)
	}
	want := fmt.Sprintf("task %s (reseed of test:slow) DONE: 682 tiles, ", id)
	last := lastLine(r.stdout)
	if !strings.HasPrefix(last, want) || !strings.HasSuffix(last, " tiles/s") {
		t.Errorf("last line %q, want %q…", last, want)
	}
	if ti := task(t, id); ti.State != "DONE" || ti.Processed != 682 || ti.FailedTiles != 0 {
		t.Errorf("task on the server: %+v", ti)
	}
	if n := wms.count("test:slow") - before; n != 44 {
		t.Errorf("%d GetMaps, want 44 (the metatiles of levels 0-4)", n)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\r\n"), "\n")
	return strings.TrimRight(lines[len(lines)-1], "\r")
}

// On a terminal, the same command draws a bar redrawn in place with the
// tiles, the rate and the time left, then the end on a line of its own.
func TestReseedWaitOnATerminalDrawsAProgressBar(t *testing.T) {
	noTasksLeft(t)
	p := startTTY(t, cliEnv(t), "reseed", "--layer", "test:slow", "--levels", "0-4", "--threads", "2", "--wait")
	r := p.wait(30 * time.Second)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%q", r.code, r.stdout)
	}
	out := r.stdout // script puts the terminal's output, stdout and stderr, there
	head := headRe.FindStringSubmatch(out)
	if head == nil {
		t.Fatalf("no head line:\n%q", out)
	}
	bar := regexp.MustCompile(`\r\[(=*>?) *\] +(\d+)%  (\d+)/682 tiles  [\d.]+ tiles/s  (\d+:\d\d) left\x1b\[K`)
	draws := bar.FindAllStringSubmatch(out, -1)
	if len(draws) < 3 {
		t.Fatalf("%d bars with a time left drawn over a task of ~3 s, want several:\n%q", len(draws), out)
	}
	if regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT`).MatchString(out) {
		t.Errorf("log lines on a terminal:\n%q", out)
	}
	if !regexp.MustCompile(`\r\[=+\] 100%  682/682 tiles  [\d.]+ tiles/s  DONE\x1b\[K\r?\n`).MatchString(out) {
		t.Errorf("no full bar at the end:\n%q", out)
	}
	if !strings.Contains(out, fmt.Sprintf("task %s (reseed of test:slow) DONE: 682 tiles", head[1])) {
		t.Errorf("no end line:\n%q", out)
	}
}

// A task whose tiles fail ends DONE with failed tiles: exit 2, the end on
// stderr with the upstream's last error.
func TestWaitExitsTwoWhenTilesFailed(t *testing.T) {
	noTasksLeft(t)
	r := cli(t, cliEnv(t), "seed", "--layer", "test:fail", "--levels", "0-1", "--retries", "0", "--max-failures", "100",
		"--wait", "--interval", "100ms")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", r.code, r)
	}
	re := regexp.MustCompile(`^tile-cache: task (\d+) \(seed of test:fail\) DONE with 10 failed tiles of 10; last error: .*500.*\n$`)
	m := re.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr is not one line saying so:\n%s", r)
	}
	if ti := task(t, m[1]); ti.State != "DONE" || ti.FailedTiles != 10 {
		t.Errorf("task on the server: %+v", ti)
	}
}

// Past --max-failures the server aborts the task: exit 3, with the reason.
func TestWaitExitsThreeWhenAbortedForFailures(t *testing.T) {
	noTasksLeft(t)
	r := cli(t, cliEnv(t), "reseed", "--layer", "test:fail", "--levels", "0-3", "--retries", "0", "--max-failures", "0",
		"--wait", "--interval", "100ms")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3:\n%s", r.code, r)
	}
	re := regexp.MustCompile(`^tile-cache: task (\d+) \(reseed of test:fail\) ABORTED after 0 of 170 tiles: too many failures.*\n$`)
	m := re.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr is not one line saying so:\n%s", r)
	}
	if ti := task(t, m[1]); ti.State != "ABORTED" {
		t.Errorf("task on the server: %+v", ti)
	}
}

// Someone at a terminal follows a long reseed; from another shell, the
// task is killed. The follower's bar ends, it says the task was killed,
// and exits 3; the kill itself exits 0. Killing it again is refused (409).
func TestKillFromAnotherShellEndsTheWaitWithThree(t *testing.T) {
	noTasksLeft(t)
	p := startTTY(t, cliEnv(t), "reseed", "--layer", "test:slow", "--levels", "0-6", "--threads", "2", "--wait")
	id := p.waitFor(headRe, 15*time.Second)[1]
	p.waitFor(regexp.MustCompile(`\r\[=*>? *\] +\d+%  [1-9]\d*/`), 15*time.Second) // it has started
	k := cli(t, cliEnv(t), "kill", id)
	if k.code != 0 || k.stdout != "task "+id+" killed\n" || k.stderr != "" {
		t.Fatalf("kill %s:\n%s", id, k)
	}
	r := p.wait(15 * time.Second)
	if r.code != 3 {
		t.Fatalf("the follower exited %d, want 3:\n%q", r.code, r.stdout)
	}
	if !regexp.MustCompile(`ABORTED\x1b\[K\r?\ntile-cache: task ` + id + ` \(reseed of test:slow\) ABORTED after \d+ of 10922 tiles: killed\r?\n$`).MatchString(r.stdout) {
		t.Errorf("the follower's end:\n%q", r.stdout)
	}
	if ti := task(t, id); ti.State != "ABORTED" || ti.Reason != "killed" {
		t.Errorf("task on the server: %+v", ti)
	}
	again := cli(t, cliEnv(t), "kill", id)
	oneErrorLine(t, again, 5, "409 Conflict: task "+id+" has already finished (ABORTED)")
}

// Ctrl-C stops following, not the task: exit 130 with how to follow it
// again; `wait <id>` then follows it to its end.
func TestInterruptLeavesTheTaskRunningAndWaitFollowsIt(t *testing.T) {
	noTasksLeft(t)
	p := start(t, cliEnv(t), "reseed", "--layer", "test:slow", "--levels", "0-4", "--threads", "2", "--wait", "--interval", "100ms")
	id := p.waitFor(headRe, 15*time.Second)[1]
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.wait(10 * time.Second)
	oneErrorLine(t, r2(r), 130, "stopped following task "+id+"; it goes on on the server: follow it again with `caddy tile-cache wait "+id+"`")
	if ti := task(t, id); ti.State != "RUNNING" && ti.State != "PENDING" {
		t.Fatalf("the task after Ctrl-C: %+v, want it still running", ti)
	}
	w := cli(t, cliEnv(t), "wait", id, "--interval", "100ms")
	if w.code != 0 || !strings.HasPrefix(lastLine(w.stdout), "task "+id+" (reseed of test:slow) DONE: 682 tiles") {
		t.Errorf("wait %s:\n%s", id, w)
	}
}

// r2 is r without its stdout (the progress printed before an error).
func r2(r result) result { r.stdout = ""; return r }

// A short outage while a task is followed (Caddy restarting, a proxy's
// 503): the follower says so and goes on; the task's end decides the exit
// status.
func TestWaitRidesOutAShortOutage(t *testing.T) {
	noTasksLeft(t)
	var down atomic.Bool
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", srv.httpPort))
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	id := submit(t, "reseed", "--layer", "test:slow", "--levels", "0-4", "--threads", "2")
	p := start(t, cliEnv(t, "TILECACHE_URL="+proxy.URL+"/geowebcache"), "wait", id, "--interval", "100ms")
	p.waitFor(lineRe, 10*time.Second)
	down.Store(true)
	p.waitFor(regexp.MustCompile(`(?m)^\S+ task `+id+`: 503 Service Unavailable: restarting; retrying for up to 1m0s$`), 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	down.Store(false)
	r := p.wait(30 * time.Second)
	if r.code != 0 || r.stderr != "" || !strings.HasPrefix(lastLine(r.stdout), "task "+id+" (reseed of test:slow) DONE: 682 tiles") {
		t.Errorf("after the outage:\n%s", r)
	}
}
