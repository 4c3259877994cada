//go:build linux

package tilecache

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
)

// seedNice is the nice value of the threads a seed's local work runs on.
//
// seedCPU keeps a Go P free for cache hits, but the operating system
// shares the cores among threads, not Ps: with the upstream rendering on
// the same machine, the thread that answers a hit queued behind the
// seeding thread (hits while seeding a raster layer, p99 13-24 ms). Linux
// groups the threads of a session or service (autogroup, cgroups) and
// shares the CPU inside the group by nice value, so a niced seeding thread
// gives way to the hit at once, and still takes whatever is left over.
const seedNice = 10

// seedThreadsLocked says onSeedThread runs fn on a goroutine locked to
// its thread. Such a goroutine must not yield between tiles: a yield hands
// its P to another thread and waits to get one back, two futex wakes each,
// and seedCPU already keeps a P free for hits.
const seedThreadsLocked = true

// seedThreads are GOMAXPROCS goroutines locked to threads at seedNice,
// for the life of the process (as many as seedCPU lets work at once): an
// unprivileged process may raise a thread's nice value but never lower it
// back, so these threads serve nothing else.
var seedThreads struct {
	once sync.Once
	work chan func()
}

// onSeedThread runs fn on one of the seed threads and waits for it; a
// panic in fn comes back as a panic here, for the fetch's own recover.
func onSeedThread(fn func()) {
	seedThreads.once.Do(func() {
		seedThreads.work = make(chan func())
		for range runtime.GOMAXPROCS(0) {
			go func() {
				runtime.LockOSThread() // never unlocked: see seedThreads
				// Best effort: a seed at full priority is still a correct seed.
				_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), seedNice)
				for f := range seedThreads.work {
					f()
				}
			}()
		}
	})
	done := make(chan any, 1)
	seedThreads.work <- func() {
		defer func() {
			if r := recover(); r != nil {
				// The stack is the seed thread's: the caller's would not
				// show where it went wrong.
				done <- fmt.Sprintf("%v\n%s", r, debug.Stack())
				return
			}
			done <- nil
		}()
		fn()
	}
	if p := <-done; p != nil {
		panic(fmt.Sprint(p))
	}
}

// threadNice reports the calling thread's nice value (tests).
func threadNice() (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The raw syscall answers 20 - nice (getpriority(2), NOTES).
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - p, err
}
