package command

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// submit starts a task without --wait and returns its id.
func submit(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, cliEnv(t), args...)
	m := regexp.MustCompile(`^task (\d+) submitted: `).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("%v:\n%s", args, r)
	}
	return m[1]
}

// With a pool of 2 workers, a task of 2 threads runs and two more wait:
// tasks lists them readably; kill --pending --layer ends only that
// layer's pending task; kill --all the rest; then nothing is listed.
func TestTasksListingAndKillByStateAndLayer(t *testing.T) {
	noTasksLeft(t)
	running := submit(t, "reseed", "--layer", "test:slow", "--levels", "0-6", "--threads", "2")
	pendingSlow := submit(t, "reseed", "--layer", "test:slow", "--levels", "0-5")
	pendingA := submit(t, "reseed", "--layer", "test:a", "--levels", "0-6")
	eventually(t, 10*time.Second, "the first task running", func() bool { return task(t, running).State == "RUNNING" })

	r := cli(t, cliEnv(t), "tasks")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("tasks:\n%s", r)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^ID +LAYER +TYPE +STATE +LEVELS +TILES +% +FAILED +RATE +LEFT$`).MatchString(lines[0]) {
		t.Fatalf("want a header and 3 rows:\n%s", r.stdout)
	}
	rows := []*regexp.Regexp{
		regexp.MustCompile(`^` + running + ` +test:slow +RESEED +RUNNING +0-6 +\d+/10922 +[\d.]+% +0 +[\d.]+ tiles/s +(\d+:\d\d|--:--)$`),
		regexp.MustCompile(`^` + pendingSlow + ` +test:slow +RESEED +PENDING +0-5 +0/2730 +0\.0% +0$`),
		regexp.MustCompile(`^` + pendingA + ` +test:a +RESEED +PENDING +0-6 +0/10922 +0\.0% +0$`),
	}
	for i, re := range rows {
		if !re.MatchString(strings.TrimRight(lines[i+1], " ")) {
			t.Errorf("row %d %q does not match %s", i+1, lines[i+1], re)
		}
	}
	r = cli(t, cliEnv(t), "tasks", "--layer", "test:a")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "\n"+pendingA+" ") {
		t.Errorf("tasks --layer test:a:\n%s", r)
	}
	r = cli(t, cliEnv(t), "tasks", "--json")
	if r.code != 0 || !strings.HasPrefix(r.stdout, `{"long-array-array":[[`) {
		t.Errorf("tasks --json:\n%s", r)
	}

	r = cli(t, cliEnv(t), "kill", "--pending", "--layer", "test:slow")
	want := fmt.Sprintf("terminated 1 pending task of layer test:slow:\n  task %s: RESEED of test:slow\n", pendingSlow)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("kill --pending --layer test:slow:\n%s\nwant stdout:\n%s", r, want)
	}
	if ti := task(t, running); ti.State != "RUNNING" {
		t.Errorf("the running task after kill --pending: %+v", ti)
	}
	if ti := task(t, pendingA); ti.State != "PENDING" {
		t.Errorf("the other layer's pending task after kill --pending --layer test:slow: %+v", ti)
	}

	r = cli(t, cliEnv(t), "kill", "--all")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "terminated 2 running and pending tasks:\n") ||
		!strings.Contains(r.stdout, "  task "+running+": RESEED of test:slow\n") || !strings.Contains(r.stdout, "  task "+pendingA+": RESEED of test:a\n") {
		t.Fatalf("kill --all:\n%s", r)
	}
	r = cli(t, cliEnv(t), "kill", "--running")
	if r.code != 0 || r.stdout != "no running tasks to terminate\n" {
		t.Errorf("kill --running with nothing running:\n%s", r)
	}
	r = cli(t, cliEnv(t), "tasks")
	if r.code != 0 || r.stdout != "no pending or running tasks\n" {
		t.Errorf("tasks after kill --all:\n%s", r)
	}
	for _, id := range []string{running, pendingSlow, pendingA} {
		if ti := task(t, id); ti.State != "ABORTED" {
			t.Errorf("task %s after the kills: %+v", id, ti)
		}
	}
	oneErrorLine(t, cli(t, cliEnv(t), "kill", "--all", "--pending"), 1, "give one of --all, --running, --pending")
	oneErrorLine(t, cli(t, cliEnv(t), "kill", running, "--all"), 1, "give a task id, or")
	oneErrorLine(t, cli(t, cliEnv(t), "kill", "12x"), 1, `"12x" is not a task id`)
}

// masstruncate empties a layer: a seed after it renders again what a
// seed before it had found cached.
func TestMassTruncateEmptiesTheLayer(t *testing.T) {
	noTasksLeft(t)
	seed := func() int {
		before := wms.count("test:a")
		r := cli(t, cliEnv(t), "seed", "--layer", "test:a", "--levels", "0-2", "--wait", "--interval", "100ms")
		if r.code != 0 {
			t.Fatalf("seed:\n%s", r)
		}
		return wms.count("test:a") - before
	}
	seed()
	if n := seed(); n != 0 {
		t.Fatalf("a second seed fetched %d metatiles, want 0 (all cached)", n)
	}
	r := cli(t, cliEnv(t), "masstruncate", "--layer", "test:a")
	if r.code != 0 || r.stdout != "layer test:a truncated: every gridset, format and parameter set\n" || r.stderr != "" {
		t.Fatalf("masstruncate:\n%s", r)
	}
	if n := seed(); n != 4 {
		t.Errorf("the seed after masstruncate fetched %d metatiles, want 4 (levels 0-2, nothing cached)", n)
	}
	// truncate, a task, empties a range the same way.
	r = cli(t, cliEnv(t), "truncate", "--layer", "test:a", "--levels", "2", "--wait", "--interval", "100ms")
	if r.code != 0 || !strings.Contains(r.stdout, "(truncate of test:a) DONE: 32 tiles") {
		t.Fatalf("truncate:\n%s", r)
	}
	if n := seed(); n != 2 {
		t.Errorf("the seed after truncating level 2 fetched %d metatiles, want 2", n)
	}
}
