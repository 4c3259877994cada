package tilecache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// seedCPU bounds the metatiles whose local work (decoding, slicing and
// encoding) seeding does at once. While visitors are around it leaves one
// core free: a hit that finds every P busy with an encoder waits for the
// scheduler's next look at the network (up to ~10 ms). While nobody has
// asked for a tile for visitorQuiet, seeding takes every core: a night's
// seed runs at the upstream's pace instead of one core's. A visitor's own
// miss is never bound: someone waits for it.
var seedCPU = newCPUGate(runtime.GOMAXPROCS(0), visitorQuiet)

// visitorQuiet is how long after the last tile request seeding may use
// every core again.
const visitorQuiet = time.Second

// cpuGate is a semaphore of cores whose size drops by one while visitors
// are around.
type cpuGate struct {
	cores int
	quiet time.Duration
	// lastVisit is when a tile was last asked for (Unix ns); written at
	// most every visitStep, so that the hit path rarely writes a shared
	// cache line.
	lastVisit atomic.Int64

	sleep func(time.Duration) // time.Sleep; tests record instead

	mu      sync.Mutex
	inUse   int
	changed chan struct{} // closed when a core is given back
}

// visitStep is the resolution of lastVisit.
const visitStep = int64(50 * time.Millisecond)

func newCPUGate(cores int, quiet time.Duration) *cpuGate {
	return &cpuGate{cores: max(1, cores), quiet: quiet, changed: make(chan struct{}), sleep: time.Sleep}
}

// visited notes a tile request (hit or miss, any protocol).
func (g *cpuGate) visited() {
	now := time.Now().UnixNano()
	if now-g.lastVisit.Load() > visitStep {
		g.lastVisit.Store(now)
	}
}

// visitorsAround reports whether a tile was asked for within quiet.
func (g *cpuGate) visitorsAround() bool {
	return time.Since(time.Unix(0, g.lastVisit.Load())) < g.quiet
}

// limit is how many metatiles seeding may work on now.
func (g *cpuGate) limit() int {
	if g.cores > 1 && g.visitorsAround() {
		return g.cores - 1
	}
	return g.cores
}

// acquire takes a core for seeding's local work, waiting while the limit
// is reached; it returns false, holding nothing, if urgent closes first (a
// visitor joined the metatile, which then goes unbound).
func (g *cpuGate) acquire(urgent <-chan struct{}) bool {
	for {
		g.mu.Lock()
		if g.inUse < g.limit() {
			g.inUse++
			g.mu.Unlock()
			return true
		}
		changed := g.changed
		g.mu.Unlock()
		// The limit also rises when visitors leave, which nothing
		// signals: look again after a while.
		t := time.NewTimer(g.quiet / 4)
		select {
		case <-changed:
		case <-t.C:
		case <-urgent:
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// release gives a core back.
func (g *cpuGate) release() {
	g.mu.Lock()
	g.inUse--
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// visitorDuty is the share of its time a seed thread may work while
// visitors are around; pace has it sleep the rest. A niced thread gives
// way to a hit inside Caddy's CPU group (seedthread_linux.go), but the
// kernel also shares the CPU between groups (MapServer's processes are
// another), and a group that used its whole share makes its next waking
// thread wait its turn: hits during a seed of test:relief had a p99 of
// 10-12 ms at full duty, 4-4.5 ms at half. While visitors are around a
// seed's own CPU work takes twice as long; an upstream-bound seed (render
// time above the cache's CPU time per metatile, the usual case) loses
// little, and one at night nothing.
const visitorDuty = 0.5

// pace follows worked time of a seed's local work: while visitors are
// around it sleeps long enough to keep the thread at visitorDuty.
func (g *cpuGate) pace(worked time.Duration) {
	if !g.visitorsAround() {
		return
	}
	g.sleep(time.Duration(float64(worked) * (1 - visitorDuty) / visitorDuty))
}
