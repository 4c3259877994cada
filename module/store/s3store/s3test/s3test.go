// Package s3test runs a real S3 server, MinIO, on loopback for tests.
// test.sh builds MinIO from its Go module at a pinned version into
// $TILECACHE_MINIO (default ~/.cache/caddy-tilecache/minio/bin/minio).
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials of every test server.
const (
	AccessKey = "tilecache-test"
	SecretKey = "tilecache-test-secret"
)

// T is what a Server needs of its test: a testing.TB, or the stand-in
// StartShared gives a TestMain.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

var _ T = testing.TB(nil)

// Server is one MinIO process with its data in a test's temporary folder.
type Server struct {
	t        T
	bin, dir string
	Addr     string // host:port on 127.0.0.1
	Client   *minio.Client

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Binary is where test.sh puts MinIO.
func Binary() string {
	if b := os.Getenv("TILECACHE_MINIO"); b != "" {
		return b
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "caddy-tilecache", "minio", "bin", "minio")
}

// Start runs MinIO until the test ends. It fails the test (never skips)
// when the binary is missing: test.sh installs it.
func Start(t T) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MinIO not found at %s (./test.sh builds it; or set TILECACHE_MINIO): %v", bin, err)
	}
	s := &Server{t: t, bin: bin, dir: dataDir(t), Addr: freeAddr(t)}
	s.Start()
	t.Cleanup(s.Stop)
	c, err := minio.New(s.Addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatalf("%v", err)
	}
	s.Client = c
	return s
}

// dataDir is the server's data folder: in memory (/dev/shm) when there is
// room, where MinIO stores small objects twice as fast as on disk (the
// 100,000-tile truncation test fills its bucket in 1 minute instead of 2).
// The folder holds only test data and goes with the test.
func dataDir(t T) string {
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) == nil && uint64(fs.Bavail)*uint64(fs.Bsize) > 4<<30 {
		if d, err := os.MkdirTemp("/dev/shm", "tilecache-minio-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return filepath.Join(d, "data")
		}
	}
	return filepath.Join(t.TempDir(), "data")
}

func freeAddr(t T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start (re)starts the process on the same address and data and waits
// until it answers.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	p, _ := strconv.Atoi(port)
	cmd := exec.Command(s.bin, "server", s.dir, "--address", s.Addr, "--console-address", fmt.Sprintf("127.0.0.1:%d", p+1), "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	log, err := os.Create(filepath.Join(s.dir, "..", filepath.Base(s.dir)+".log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = log, log
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting MinIO: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := http.Get("http://" + s.Addr + "/minio/health/ready")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("MinIO did not answer on %s in 30 s", s.Addr)
}

// Stop kills the process (as an outage would); Start brings it back.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Pause freezes the process (SIGSTOP): connections are accepted by the
// kernel and never answered, as from an S3 that hangs. Resume thaws it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume undoes Pause.
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

// signal sends sig and waits (up to 5 s) until the process is stopped or
// running as asked: a signal is delivered asynchronously, and a request
// sent right after Pause was once still answered.
func (s *Server) signal(sig syscall.Signal, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	tasks := fmt.Sprintf("/proc/%d/task/*/stat", s.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if allThreads(tasks, stopped) {
			return
		}
	}
}

// allThreads reports whether every thread matching the /proc glob is
// stopped (or every one is not); true where /proc cannot tell.
func allThreads(glob string, stopped bool) bool {
	files, _ := filepath.Glob(glob)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name in parentheses: "tid (comm) S ...".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if (b[i+2] == 'T' || b[i+2] == 't') != stopped {
			return false
		}
	}
	return true
}

// Bucket makes a new bucket and returns its name.
func (s *Server) Bucket(name string) string {
	s.t.Helper()
	if err := s.Client.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		s.t.Fatalf("making bucket %s: %v", name, err)
	}
	return name
}

// Keys lists every object key under prefix.
func (s *Server) Keys(bucket, prefix string) []string {
	s.t.Helper()
	var keys []string
	for o := range s.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			s.t.Fatalf("listing %s/%s: %v", bucket, prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// StartShared starts a MinIO for a whole test binary, from its TestMain,
// where there is no *testing.T: stop ends it and removes its data. A
// failure to start is returned; a failure later (making a bucket) panics.
func StartShared() (s *Server, stop func(), err error) {
	m := &mainT{}
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(mainFailure); ok {
				m.cleanup()
				s, stop, err = nil, nil, errors.New(string(f))
				return
			}
			panic(r)
		}
	}()
	return Start(m), m.cleanup, nil
}

type mainFailure string

// mainT is T for a TestMain: failures panic (StartShared turns the ones
// while starting into its error), cleanups run at stop.
type mainT struct{ cleanups []func() }

func (*mainT) Helper() {}

func (*mainT) Fatalf(format string, args ...any) { panic(mainFailure(fmt.Sprintf(format, args...))) }

func (m *mainT) Cleanup(f func()) { m.cleanups = append(m.cleanups, f) }

func (m *mainT) TempDir() string {
	d, err := os.MkdirTemp("", "tilecache-minio-")
	if err != nil {
		m.Fatalf("%v", err)
	}
	m.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (m *mainT) cleanup() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	m.cleanups = nil
}
