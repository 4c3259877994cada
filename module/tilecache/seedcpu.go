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

	mu      sync.Mutex
	inUse   int
	changed chan struct{} // closed when a core is given back
}

// visitStep is the resolution of lastVisit.
const visitStep = int64(50 * time.Millisecond)

func newCPUGate(cores int, quiet time.Duration) *cpuGate {
	return &cpuGate{cores: max(1, cores), quiet: quiet, changed: make(chan struct{})}
}

// visited notes a tile request (hit or miss, any protocol).
func (g *cpuGate) visited() {
	now := time.Now().UnixNano()
	if now-g.lastVisit.Load() > visitStep {
		g.lastVisit.Store(now)
	}
}

// limit is how many metatiles seeding may work on now.
func (g *cpuGate) limit() int {
	if g.cores > 1 && time.Since(time.Unix(0, g.lastVisit.Load())) < g.quiet {
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
