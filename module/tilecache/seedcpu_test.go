package tilecache

import (
	"testing"
	"time"
)

// Seeding may use every core while no visitor is around, one fewer as
// soon as one asks for a tile, and every core again once they have gone.
func TestCPUGateLeavesVisitorsACore(t *testing.T) {
	g := newCPUGate(2, 200*time.Millisecond)
	if !g.acquire(nil) || !g.acquire(nil) {
		t.Fatal("with no visitors, seeding did not get both cores")
	}
	g.release()
	g.release()

	g.visited()
	if !g.acquire(nil) {
		t.Fatal("no core for seeding while visitors are around")
	}
	got := make(chan bool, 1)
	go func() { got <- g.acquire(nil) }()
	select {
	case <-got:
		t.Fatal("seeding took the visitors' core")
	case <-time.After(100 * time.Millisecond):
	}
	// The visitors go: the second core comes back without any release.
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("acquire failed")
		}
	case <-time.After(time.Second):
		t.Fatal("the second core did not come back once the visitors had gone")
	}
	g.release()
	g.release()
}

// A waiting seed gives up its wait when a visitor joins its metatile.
func TestCPUGateUrgentEndsTheWait(t *testing.T) {
	g := newCPUGate(1, time.Hour)
	if !g.acquire(nil) {
		t.Fatal("first acquire failed")
	}
	urgent := make(chan struct{})
	got := make(chan bool, 1)
	go func() { got <- g.acquire(urgent) }()
	close(urgent)
	select {
	case ok := <-got:
		if ok {
			t.Fatal("acquire took a core beyond the limit")
		}
	case <-time.After(time.Second):
		t.Fatal("urgent did not end the wait")
	}
	g.release()
	if g.inUse != 0 {
		t.Fatalf("%d cores in use after every release", g.inUse)
	}
}

// One core: seeding is never held back for visitors (there is no other core).
func TestCPUGateOneCore(t *testing.T) {
	g := newCPUGate(1, time.Hour)
	g.visited()
	if !g.acquire(nil) {
		t.Fatal("a single core was withheld from seeding")
	}
	g.release()
}

// While visitors are around, a seed thread sleeps as long as it worked;
// with nobody around it does not sleep at all.
func TestCPUGatePacesSeedingWhileVisited(t *testing.T) {
	g := newCPUGate(1, time.Hour)
	var slept []time.Duration
	g.sleep = func(d time.Duration) { slept = append(slept, d) }
	g.pace(8 * time.Millisecond)
	if len(slept) != 0 {
		t.Fatalf("slept %v with no visitor around", slept)
	}
	g.visited()
	g.pace(8 * time.Millisecond)
	if len(slept) != 1 || slept[0] != 8*time.Millisecond {
		t.Fatalf("slept %v after 8ms of work while visited; want 8ms", slept)
	}
}
