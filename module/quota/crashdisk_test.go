package quota

import (
	"bufio"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// The disk bound through crashes: a store under a quota, written to by a
// process that is killed (SIGKILL) again and again while eviction runs,
// must, once opened again and idle, give the disk back down to the bound
// docs/quota.md states, in apparent and in allocated size. A crash loses
// the reclaim the store would have made (the deletions waiting in the
// memtable, the value-log rewrites not done yet), so the restarted store
// must find that garbage by itself: nothing evicts any more, usage is
// under the quota.

// crashChildEnv names the store directory in the re-executed test binary
// that writes into it until it is killed.
const crashChildEnv = "TILECACHE_QUOTA_CRASH_CHILD"

// crashQuota is the smallest quota the bound is documented for.
const crashQuota = 100 << 20

// TestCrashChild is the writer: not a test on its own (it returns at once
// unless re-executed by TestDiskBoundAfterKills).
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		return
	}
	st, ev := openWithQuota(t, dir)
	defer ev.Release()
	defer st.Release()
	set := store.Set{Layer: "big", Gridset: "EPSG:4326", Format: "image/png", Params: "default"}
	out := bufio.NewWriter(os.Stdout)
	// Metatiles of 4×4 tiles of 15–25 KB of noise (as PNGs of dense maps
	// are, for the value log), along rows of level 14 from a random row,
	// so that each run writes new tiles and evicts the runs' before it.
	x, y := int64(0), mrand.Int64N(1<<12)*4
	var written int64
	for {
		entries := make([]store.Entry, 0, 16)
		for dy := int64(0); dy < 4; dy++ {
			for dx := int64(0); dx < 4; dx++ {
				data := make([]byte, 15000+mrand.IntN(10001))
				rand.Read(data)
				entries = append(entries, store.Entry{Key: store.Key{Set: set, Z: 14, X: x + dx, Y: y + dy}, Data: data})
				written += int64(len(data))
			}
		}
		if err := st.Put(entries, time.Now()); err != nil {
			t.Fatal(err)
		}
		// Tells the parent how far it got (it kills once the quota is
		// crossed).
		fmt.Fprintln(out, written)
		out.Flush()
		x += 4
		if x >= 1<<14 {
			x, y = 0, y+4
		}
	}
}

// openWithQuota opens dir as tile_cache does for a quota of crashQuota.
func openWithQuota(t *testing.T, dir string) (*store.Badger, *Evictor) {
	t.Helper()
	st, err := store.Open(dir, store.Options{Usage: true, ValueLogFileSize: ValueLogFileSize(crashQuota)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetTracking(true); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{MaxSize: crashQuota}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ev, err := Acquire(st, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return st, ev
}

// dirSizes is what du -sb (apparent) and du -sB1 (allocated) report for a
// directory without subdirectories, and how many value-log files it holds.
func dirSizes(t *testing.T, dir string) (apparent, allocated int64, vlogs int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.IsDir() {
			continue
		}
		apparent += fi.Size()
		allocated += fi.Sys().(*syscall.Stat_t).Blocks * 512
		if len(e.Name()) > 5 && e.Name()[len(e.Name())-5:] == ".vlog" {
			vlogs++
		}
	}
	return
}

func TestDiskBoundAfterKills(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		return
	}
	dir := t.TempDir()
	kills := 10
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Each run writes the quota's worth and a random share more, so
		// that eviction and its reclaim are at work when it dies.
		target := int64(crashQuota) + mrand.Int64N(crashQuota)
		sc := bufio.NewScanner(stdout)
		var written int64
		for sc.Scan() {
			if written, _ = strconv.ParseInt(sc.Text(), 10, 64); written >= target {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		a, b, n := dirSizes(t, dir)
		t.Logf("kill %d after %d MiB: directory %.1f MiB apparent, %.1f MiB allocated, %d value-log files", i+1, written>>20, float64(a)/(1<<20), float64(b)/(1<<20), n)
	}
	// Opened again and left idle, the store gives the crashes' garbage
	// back: waited for (bounded, generously), not timed.
	st, ev := openWithQuota(t, dir)
	defer st.Release()
	defer ev.Release()
	allocBound, apparentBound := DiskBound(crashQuota)
	var a, b int64
	var n int
	deadline := time.Now().Add(3 * time.Minute)
	for {
		a, b, n = dirSizes(t, dir)
		if (a <= apparentBound && b <= allocBound) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	levels, _, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, lv := range levels {
		used += lv.Bytes
	}
	t.Logf("after the restart: directory %.3f× the quota apparent, %.3f× allocated, %d value-log files, usage %.3f×",
		float64(a)/crashQuota, float64(b)/crashQuota, n, float64(used)/crashQuota)
	if b > allocBound {
		t.Errorf("allocated size %d bytes after the restart, over the stated bound %d (%.3f× the quota)", b, allocBound, float64(b)/crashQuota)
	}
	if a > apparentBound {
		t.Errorf("apparent size %d bytes after the restart, over the stated bound %d (%.3f× the quota)", a, apparentBound, float64(a)/crashQuota)
	}
}
