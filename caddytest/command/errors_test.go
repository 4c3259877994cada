package command

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/caddytest/proctest"
)

// Every way a command fails is one line on stderr, nothing on stdout,
// and an exit status of its own: 1 the command line, 4 no answer, 5 the
// server refused, 6 the server cannot now.
func TestFailuresAreOneLineWithTheirExitStatus(t *testing.T) {
	noTasksLeft(t)
	closed := proctest.FreePort(t) // nobody listens there
	for _, c := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		prefix string
	}{
		{"400 with the server's message", nil, []string{"seed", "--layer", "test:a", "--levels", "0-40"},
			5, "400 Bad Request: zoom levels 0..40 are outside gridset EPSG:4326"},
		{"400 for a parameter the layer has no filter for", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--param", "STYLES=x"},
			5, "400 Bad Request: "},
		{"401 wrong password", []string{"TILECACHE_PASSWORD=wrong"}, []string{"tasks"},
			5, "401 Unauthorized (wrong or missing credentials"},
		{"401 no credentials", []string{"TILECACHE_USER=", "TILECACHE_PASSWORD="}, []string{"tasks"},
			5, "401 Unauthorized"},
		{"404 unknown layer", nil, []string{"reseed", "--layer", "test:nope", "--levels", "0-2"},
			5, "404 Not Found: Unknown layer: test:nope"},
		{"404 unknown task", nil, []string{"wait", "999999"},
			5, "404 Not Found: no task 999999"},
		{"400 mass truncate of an unknown layer", nil, []string{"masstruncate", "--layer", "test:nope"},
			5, "400 Bad Request: Could not find layer test:nope"},
		{"503 in front of the cache", []string{"TILECACHE_URL=" + strings.Replace(restBase(), "/geowebcache", "/down", 1)}, []string{"tasks"},
			6, "503 Service Unavailable: down for maintenance until 22:00"},
		{"unreachable", []string{fmt.Sprintf("TILECACHE_URL=http://127.0.0.1:%d/geowebcache", closed)}, []string{"seed", "--layer", "test:a", "--levels", "0"},
			4, fmt.Sprintf("127.0.0.1:%d unreachable: ", closed)},
		{"no password flag", nil, []string{"tasks", "--password", "x"},
			1, "unknown flag: --password"},
		{"password in --url", []string{"TILECACHE_URL="}, []string{"tasks", "--url", "http://admin:pw@127.0.0.1:1/geowebcache"},
			1, "no password in --url"},
		{"no URL", []string{"TILECACHE_URL="}, []string{"tasks"},
			1, "no URL of the cache's REST interface"},
		{"no levels", nil, []string{"seed", "--layer", "test:a"},
			1, "--levels is required"},
		{"bad bounds", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--bounds", "1,2,3"},
			1, "--bounds"},
		{"unknown subcommand", nil, []string{"sed"},
			1, `unknown command "sed" (did you mean seed?)`},
		// Its flags are not tile-cache's own: the word is the mistake.
		{"unknown subcommand with flags", nil, []string{"sed", "--layer", "test:a", "--levels", "0"},
			1, `unknown command "sed" (did you mean seed?)`},
		// What cobra checks itself is reported as everything else.
		{"--interval 0s", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--wait", "--interval", "0s"},
			1, "--interval must be positive"},
		{"kill with two ids", nil, []string{"kill", "1", "2"},
			1, "kill takes one task id"},
		{"wait without an id", nil, []string{"wait"},
			1, "wait takes one task id"},
		{"tasks with an argument", nil, []string{"tasks", "extra"},
			1, `tasks takes flags only, no arguments: "extra"`},
		{"a bad flag value", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--threads", "x"},
			1, `invalid argument "x" for "--threads" flag`},
		// threadCount is at least 1: 0 is no default, it is refused as -1 is.
		{"--threads 0", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--threads", "0"},
			1, "--threads must be at least 1"},
		{"--threads -1", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--threads", "-1"},
			1, "--threads must be at least 1"},
		// Flags that go with another are refused without it, not left out.
		{"--buffer without --geometry", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--buffer", "16"},
			1, "--buffer needs --geometry"},
		{"--scheme without --tiles", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--scheme", "tms"},
			1, "--scheme needs --tiles"},
		{"--parents without --tiles", nil, []string{"seed", "--layer", "test:a", "--levels", "3", "--parents", "0"},
			1, "--parents needs --tiles"},
		{"--children without --tiles", nil, []string{"seed", "--layer", "test:a", "--levels", "0", "--children", "2"},
			1, "--children needs --tiles"},
	} {
		t.Run(c.name, func(t *testing.T) {
			oneErrorLine(t, cli(t, cliEnv(t, c.env...), c.args...), c.code, c.prefix)
		})
	}
}

// 429: the second mount has max_tasks 1; while a task runs, it refuses
// another, and says so in one line with exit 6.
func TestTooManyTasksIs429AndExitSix(t *testing.T) {
	noTasksLeft(t)
	limited := strings.Replace(restBase(), "/geowebcache", "/limited", 1)
	first := cli(t, cliEnv(t), "reseed", "--layer", "test:slow", "--levels", "0-6")
	if first.code != 0 || !regexp.MustCompile(`^task \d+ submitted: reseed of test:slow, EPSG:4326 image/png, levels 0-6, 10922 tiles\n$`).MatchString(first.stdout) {
		t.Fatalf("submitting without --wait:\n%s", first)
	}
	r := cli(t, cliEnv(t, "TILECACHE_URL="+limited), "seed", "--layer", "test:a", "--levels", "0-2", "--wait")
	oneErrorLine(t, r, 6, "429 Too Many Requests: 1 tasks are pending or running")
}

// The password from a file (its first line), with no TILECACHE_PASSWORD.
func TestPasswordFile(t *testing.T) {
	noTasksLeft(t)
	f := writeFile(t, "pw", adminPass+"\nsecond line ignored\n")
	r := cli(t, cliEnv(t, "TILECACHE_PASSWORD="), "tasks", "--password-file", f)
	if r.code != 0 || r.stdout != "no pending or running tasks\n" {
		t.Errorf("with --password-file:\n%s", r)
	}
	r = cli(t, cliEnv(t, "TILECACHE_PASSWORD=", "TILECACHE_PASSWORD_FILE="+f), "tasks")
	if r.code != 0 {
		t.Errorf("with TILECACHE_PASSWORD_FILE:\n%s", r)
	}
	r = cli(t, cliEnv(t, "TILECACHE_PASSWORD="), "tasks", "--password-file", f+".missing")
	oneErrorLine(t, r, 1, "--password-file: ")
	// Empty, or a blank first line: refused here, not sent to get a 401.
	for _, content := range []string{"", "\n", "  \n" + adminPass + "\n"} {
		empty := writeFile(t, "empty", content)
		r = cli(t, cliEnv(t, "TILECACHE_PASSWORD="), "tasks", "--password-file", empty)
		oneErrorLine(t, r, 1, "--password-file "+empty+": the first line, the password, is blank")
	}
	// No password at all and no terminal to ask on: refused before sending.
	r = cli(t, cliEnv(t, "TILECACHE_PASSWORD="), "tasks")
	oneErrorLine(t, r, 1, `no password for user "admin"`)
}

// A server that goes away while a task is followed: the follower waits
// for it (a restart takes seconds), but not forever; here it is
// unreachable from the start, which fails at once.
func TestWaitOnAnUnreachableServerFailsAtOnce(t *testing.T) {
	closed := proctest.FreePort(t)
	p := start(t, cliEnv(t, fmt.Sprintf("TILECACHE_URL=http://127.0.0.1:%d/geowebcache", closed)), "wait", "1")
	oneErrorLine(t, p.wait(10*time.Second), 4, fmt.Sprintf("127.0.0.1:%d unreachable", closed))
}

// On a terminal, a user without a password in the environment or a file
// is asked for it, and what is typed is not shown, even typed (or pasted)
// the moment the prompt shows, however late the command gets to read it:
// echo goes off before the prompt is written. The terminal holds the
// command's output back, so the command waits to write its prompt; echo
// must be off by then, and the password is typed before the prompt has
// shown at all. A command that writes its prompt before turning echo off
// never gets there, and the test fails.
func TestPasswordIsAskedForOnATerminal(t *testing.T) {
	noTasksLeft(t)
	tm := openTerminal(t)
	tm.hold(true)
	p := tm.start(cliEnv(t, "TILECACHE_PASSWORD="), "tasks")
	tm.until(p, 30*time.Second, "echo off while the prompt waits to be shown", func() bool { return !tm.echo() })
	tm.typeIn(adminPass + "\n")
	tm.hold(false)
	r := p.wait(30 * time.Second)
	shown := tm.shown(p)
	if r.code != 0 || shown != "Password for admin: \r\nno pending or running tasks\r\n" {
		t.Errorf("exit %d; the terminal shows:\n%q", r.code, shown)
	}
	if strings.Contains(shown, adminPass) {
		t.Errorf("the password was echoed:\n%q", shown)
	}
}

// Ctrl-C at the password prompt ends the command as it always has, by
// the signal, and leaves the terminal's echo on: the shell after it, and
// what is typed there, must show.
func TestCtrlCAtThePasswordPromptLeavesEchoOn(t *testing.T) {
	tm := openTerminal(t)
	p := tm.start(cliEnv(t, "TILECACHE_PASSWORD="), "tasks")
	p.waitFor(regexp.MustCompile(`Password for admin: $`), 30*time.Second)
	tm.until(p, 30*time.Second, "echo off at the prompt", func() bool { return !tm.echo() })
	tm.typeIn("\x03")
	p.wait(30 * time.Second)
	if ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("ended with %v, want the SIGINT of Ctrl-C", p.cmd.ProcessState)
	}
	if !tm.echo() {
		t.Error("echo is still off after Ctrl-C at the prompt")
	}
}
