// Package proctest is what the test packages that run Caddy as a process
// (caddytest/cluster, caddytest/command) share: loopback ports for its
// listeners, and a buffer for its output.
package proctest

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// FreePort is a loopback port nobody listens on, never one it handed out
// before in this test binary: the kernel may give a port just closed to
// the next Listen, and Caddy binds with SO_REUSEPORT, so a node once got
// the same port for its admin endpoint and its site, and its tiles were
// answered by the admin API (404).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Port is FreePort for code that has no test at hand (a TestMain).
func Port() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[p] {
			portsGiven[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no loopback port that was not handed out before")
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Output is a process's output, written by its pipe goroutines while the
// test reads it.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Output) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Output) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tail is the last n lines.
func (s *Output) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(s.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Grep returns the lines containing any of the words.
func (s *Output) Grep(words ...string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}
