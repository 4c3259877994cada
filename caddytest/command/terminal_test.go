package command

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// terminal is a pseudo-terminal the test holds itself, for what script
// cannot do: look at the terminal's modes while the command runs, hold
// its output back (as ^S does) and type at a moment the test chooses.
type terminal struct {
	t      *testing.T
	master *os.File // the test's side: what is typed, and what is shown
	slave  *os.File // the command's terminal
	copied chan struct{}
}

// openTerminal opens a pseudo-terminal, closed when the test ends.
func openTerminal(t *testing.T) *terminal {
	t.Helper()
	// Opened, not given a descriptor with Fd, the master stays in Go's
	// poller: its reader ends when it is closed.
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	raw, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	raw.Control(func(fd uintptr) {
		if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
			n, err = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return &terminal{t: t, master: master, slave: slave, copied: make(chan struct{})}
}

// start runs `caddy tile-cache args...` on the terminal, the controlling
// terminal of its session, as a shell runs a command in the foreground
// (Ctrl-C signals it). What the terminal shows goes to the proc's stdout.
func (tm *terminal) start(env []string, args ...string) *proc {
	tm.t.Helper()
	cmd := exec.Command(caddyBin, append([]string{"tile-cache"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tm.slave, tm.slave, tm.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	p := startCmd(tm.t, cmd, env)
	go func() {
		io.Copy(p.stdout, tm.master) // to EIO: every slave closed
		close(tm.copied)
	}()
	return p
}

// shown is all the terminal showed, once the command has ended: the
// test's side of the terminal is closed.
func (tm *terminal) shown(p *proc) string {
	tm.t.Helper()
	tm.slave.Close()
	select {
	case <-tm.copied:
	case <-time.After(10 * time.Second):
		tm.t.Fatalf("the terminal's output did not end:\n%q", p.stdout.String())
	}
	return p.stdout.String()
}

// echo says whether the terminal echoes what is typed.
func (tm *terminal) echo() bool {
	tm.t.Helper()
	tios, err := unix.IoctlGetTermios(int(tm.slave.Fd()), unix.TCGETS)
	if err != nil {
		tm.t.Fatal(err)
	}
	return tios.Lflag&unix.ECHO != 0
}

// hold stops the terminal's output (on) or starts it again (off), as ^S
// and ^Q do, but at once: a write to the terminal waits meanwhile.
func (tm *terminal) hold(on bool) {
	tm.t.Helper()
	action := unix.TCOON
	if on {
		action = unix.TCOOFF
	}
	if err := unix.IoctlSetInt(int(tm.slave.Fd()), unix.TCXONC, action); err != nil {
		tm.t.Fatal(err)
	}
}

// typeIn types s at the terminal.
func (tm *terminal) typeIn(s string) {
	tm.t.Helper()
	if _, err := io.WriteString(tm.master, s); err != nil {
		tm.t.Fatal(err)
	}
}

// until waits for cond while the command runs, failing the test with
// what is expected when within passes or the command ends first.
func (tm *terminal) until(p *proc, within time.Duration, what string, cond func() bool) {
	tm.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		select {
		case <-p.done:
			tm.t.Fatalf("the command ended before %s:\n%s", what, p.result())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("not within %s: %s; the terminal shows %q", within, what, p.stdout.String())
		}
	}
}
