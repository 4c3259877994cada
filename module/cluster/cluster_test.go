package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three nodes on one file_system storage see each other alive; one that
// leaves is dead at once, one that goes silent (a crash) after the lease.
func TestLiveness(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	lease := 800 * time.Millisecond
	a := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer a.Destruct()
	b := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	c := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	if a.ID == b.ID || b.ID == c.ID {
		t.Fatal("two nodes with one id")
	}
	waitFor(t, "a sees b and c", 2*time.Second, func() bool { return len(a.Peers()) == 3 })
	if !a.Alive(b.ID) || !a.Alive(c.ID) || !a.Alive(a.ID) {
		t.Fatal("a live node counted dead")
	}
	b.Destruct() // leaves: its last beat says so
	waitFor(t, "a sees b gone", 2*time.Second, func() bool { return !a.Alive(b.ID) })
	c.cancel() // silent, record kept: a crash
	<-c.done
	// c's last beat may have been seen up to two beat intervals (lease/4
	// each: c's writing, a's reading) before this point.
	time.Sleep(lease / 8)
	if !a.Alive(c.ID) {
		t.Fatal("a silent node counted dead before its lease ran out")
	}
	waitFor(t, "a counts silent c dead", 2*lease, func() bool { return !a.Alive(c.ID) })
	// A node not heard of yet counts as alive (it may have joined since
	// the last read) until the lease runs out without a heartbeat of it.
	if !a.Alive("never-seen") {
		t.Fatal("a node not heard of yet counted dead before a read")
	}
	asked := time.Now()
	waitFor(t, "a counts a node without a heartbeat dead", 2*time.Second, func() bool { return !a.Alive("never-seen") })
	if d := time.Since(asked); d < lease {
		t.Fatalf("a node never seen counted dead after %v, before the lease", d)
	}
}

// While the storage fails, nobody is judged dead, and errors say where
// they come from.
func TestStorageOutage(t *testing.T) {
	dir := t.TempDir()
	st := &certmagic.FileStorage{Path: filepath.Join(dir, "s")}
	lease := 600 * time.Millisecond
	a := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer a.Destruct()
	b := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer b.Destruct()
	waitFor(t, "a sees b", 2*time.Second, func() bool { return len(a.Peers()) == 2 })
	// The storage becomes unusable: a file where its directory was.
	if err := os.Rename(st.Path, st.Path+".off"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.Path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a notices the outage", 2*time.Second, func() bool { return a.Err() != nil })
	time.Sleep(2 * lease)
	if !a.Alive(b.ID) {
		t.Fatal("a node judged dead while the storage could not tell")
	}
	if err := a.Store("x", []byte("1")); !errors.Is(err, ErrStorage) {
		t.Fatalf("a write during the outage: %v, want ErrStorage", err)
	}
	if _, err := a.Load("x"); !errors.Is(err, ErrStorage) || IsNotExist(err) {
		t.Fatalf("a read during the outage: %v, want ErrStorage", err)
	}
	// The errors reach REST clients: they name the key, not the server's
	// directories.
	for _, op := range []func() error{
		func() error { return a.Store("tasks/1/task", []byte("1")) },
		func() error { _, err := a.Load("tasks/1/task"); return err },
		func() error { _, err := a.List("tasks"); return err },
		func() error { return a.Locked("seq", func() error { return nil }) },
	} {
		err := op()
		if err == nil || strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "tasks") && !strings.Contains(err.Error(), "seq") {
			t.Errorf("storage error %q: want the key named and no path under %s", err, dir)
		}
	}
	os.Remove(st.Path)
	if err := os.Rename(st.Path+".off", st.Path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a recovers", 2*time.Second, func() bool { return a.Err() == nil })
	if !a.Alive(b.ID) {
		t.Fatal("b dead after the outage although it beats again")
	}
}

// A render marker keeps another node waiting until it is removed, and
// only a live node's unexpired marker counts.
func TestRenderMarkers(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	a := Join(st, "c", 2*time.Second, 100*time.Millisecond, zap.NewNop())
	defer a.Destruct()
	b := Join(st, "c", 2*time.Second, 100*time.Millisecond, zap.NewNop())
	defer b.Destruct()
	waitFor(t, "b sees a", 2*time.Second, func() bool { return b.Alive(a.ID) && len(b.Peers()) == 2 })
	key := MarkerKey("layer", "EPSG:4326", "image/png", "", "z1")
	if key != MarkerKey("layer", "EPSG:4326", "image/png", "", "z1") || key == MarkerKey("layer", "EPSG:4326", "image/png", "", "z2") {
		t.Fatal("marker keys are not one per metatile")
	}
	if busy, _ := b.RenderingElsewhere(key); busy {
		t.Fatal("a marker seen before anyone wrote one")
	}
	done := a.MarkRender(key, 5*time.Second)
	if busy, _ := a.RenderingElsewhere(key); busy {
		t.Fatal("a node waits for its own marker")
	}
	// The marker is written beside the render: b sees it shortly.
	var busy bool
	var until time.Time
	waitFor(t, "b sees a's marker", 2*time.Second, func() bool {
		busy, until = b.RenderingElsewhere(key)
		return busy
	})
	if time.Until(until) < 4*time.Second {
		t.Fatalf("a's marker runs until %v, want 5 s from its writing", until)
	}
	released := make(chan struct{})
	go func() {
		b.WaitRender(context.Background(), key, until)
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("b stopped waiting while a still renders")
	case <-time.After(300 * time.Millisecond):
	}
	done()
	select {
	case <-released:
	case <-time.After(2 * time.Second):
		t.Fatal("b still waits after a removed its marker")
	}
	// An expired marker does not count.
	a.MarkRender(key, 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if busy, _ := b.RenderingElsewhere(key); busy {
		t.Fatal("an expired marker still counts")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Name: "a/b"}, {Lease: -1}, {Lease: 500 * 1e6}, {Poll: 20 * 1e9}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	ok := Config{Name: "tiles"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if lease, poll := ok.Settings(); lease != DefaultLease || poll != DefaultPoll {
		t.Fatalf("defaults %v %v", lease, poll)
	}
}

// A lock whose release failed because the storage went away is given back
// once the storage answers again. certmagic's file_system storage keeps
// the lock file fresh while it exists, so without the retry nobody could
// take the lock again (a task stuck for good, found by the cluster tests).
func TestLockGivenBackAfterAnOutage(t *testing.T) {
	st := &certmagic.FileStorage{Path: filepath.Join(t.TempDir(), "s")}
	a := Join(st, "c", 2*time.Second, 100*time.Millisecond, zap.NewNop())
	defer a.Destruct()
	b := Join(st, "c", 2*time.Second, 100*time.Millisecond, zap.NewNop())
	defer b.Destruct()
	err := a.Locked("tasks/1", func() error {
		// The storage goes away while a holds the lock: its release fails.
		if err := os.Rename(st.Path, st.Path+".off"); err != nil {
			return err
		}
		return os.WriteFile(st.Path, []byte("x"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(st.Path)
	if err := os.Rename(st.Path+".off", st.Path); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Locked("tasks/1", func() error { return nil }) }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("b could not take the lock after the outage: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lock a could not give back during the outage still blocks b after it")
	}
}

// A node that was itself stalled (here: its heartbeat loop stopped, as in
// a starved process) does not judge the others dead for its own silence:
// it judges by what its last read of the heartbeats saw.
func TestAStalledNodeJudgesNobody(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	lease := 600 * time.Millisecond
	a := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	b := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer b.Destruct()
	waitFor(t, "a sees b", 2*time.Second, func() bool { return len(a.Peers()) == 2 })
	a.cancel() // a stops reading (and writing) heartbeats
	<-a.done
	time.Sleep(2 * lease)
	if !a.Alive(b.ID) {
		t.Fatal("a judged b dead although a itself has not read any heartbeat since b's last")
	}
}

// A lock whose holder is gone but which the storage keeps fresh is broken
// after lockBreakAfter. Here the stuck lock is taken straight from the
// storage and never given back: certmagic's file_system storage keeps it
// fresh for as long as this process runs, as a refresher left over from
// an earlier holder does after the new holder's kill -9.
func TestStuckLockIsBroken(t *testing.T) {
	defer func(w, b time.Duration) { lockWait, lockBreakAfter = w, b }(lockWait, lockBreakAfter)
	lockWait, lockBreakAfter = 300*time.Millisecond, 500*time.Millisecond
	st := &certmagic.FileStorage{Path: t.TempDir()}
	a := Join(st, "c", 2*time.Second, 100*time.Millisecond, zap.NewNop())
	defer a.Destruct()
	if err := st.Lock(context.Background(), a.key("tasks/1")); err != nil {
		t.Fatal(err)
	}
	ran := false
	deadline := time.Now().Add(10 * time.Second)
	for !ran {
		err := a.Locked("tasks/1", func() error { ran = true; return nil })
		if err != nil && !errors.Is(err, ErrStorage) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a stuck lock was never broken")
		}
	}
}

// Two nodes that wait for the same stuck lock must not both break it:
// the second would delete the lock the first just took, and both would
// run their critical sections at once (seen in a loaded run of
// caddytest/cluster's TestClusterNodeKilledMidSeed: two nodes broke the
// task lock 32 ms apart and took over the same work units). Rounds of a
// stuck lock with three waiters; every critical section runs alone. The
// sections are long enough for a second breaker to come in while the
// first holds the lock, and three of them together still shorter than
// lockBreakAfter, as a few storage calls are against 3 × opTimeout.
func TestStuckLockIsBrokenOnce(t *testing.T) {
	defer func(w, b time.Duration) { lockWait, lockBreakAfter = w, b }(lockWait, lockBreakAfter)
	lockWait, lockBreakAfter = 200*time.Millisecond, 1500*time.Millisecond
	st := &certmagic.FileStorage{Path: t.TempDir()}
	var nodes []*Node
	for range 3 {
		n := Join(st, "c", 5*time.Second, 100*time.Millisecond, zap.NewNop())
		defer n.Destruct()
		nodes = append(nodes, n)
	}
	for round := range 8 {
		name := fmt.Sprintf("tasks/%d", round)
		if err := st.Lock(context.Background(), nodes[0].key(name)); err != nil {
			t.Fatal(err)
		}
		var inside, most atomic.Int32
		var ran atomic.Int32
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(time.Minute)
				for time.Now().Before(deadline) {
					err := n.Locked(name, func() error {
						in := inside.Add(1)
						if in > most.Load() {
							most.Store(in)
						}
						time.Sleep(250 * time.Millisecond) // a second breaker comes within lockWait
						inside.Add(-1)
						ran.Add(1)
						return nil
					})
					if err == nil {
						return
					}
					if !errors.Is(err, ErrStorage) {
						t.Error(err)
						return
					}
				}
				t.Errorf("round %d: a node never got %s", round, name)
			}()
		}
		wg.Wait()
		if most.Load() != 1 || ran.Load() != 3 {
			t.Fatalf("round %d: %d critical sections ran, at most %d at once; want 3, one at a time", round, ran.Load(), most.Load())
		}
	}
}
