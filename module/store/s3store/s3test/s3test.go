// Package s3test runs a real S3 server, MinIO, on loopback for tests.
// test.sh builds MinIO from its Go module at a pinned version into
// $TILECACHE_MINIO (default ~/.cache/caddy-tilecache/minio/bin/minio).
package s3test

import (
	"context"
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

// Server is one MinIO process with its data in a test's temporary folder.
type Server struct {
	t        testing.TB
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
func Start(t testing.TB) *Server {
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
		t.Fatal(err)
	}
	s.Client = c
	return s
}

// dataDir is the server's data folder: in memory (/dev/shm) when there is
// room, where MinIO stores small objects twice as fast as on disk (the
// 100,000-tile truncation test fills its bucket in 1 minute instead of 2).
// The folder holds only test data and goes with the test.
func dataDir(t testing.TB) string {
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) == nil && uint64(fs.Bavail)*uint64(fs.Bsize) > 4<<30 {
		if d, err := os.MkdirTemp("/dev/shm", "tilecache-minio-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return filepath.Join(d, "data")
		}
	}
	return filepath.Join(t.TempDir(), "data")
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
