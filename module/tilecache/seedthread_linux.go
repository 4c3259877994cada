//go:build linux

package tilecache

import (
	"fmt"
	"runtime"
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

// onSeedThread runs fn on an OS thread of its own at seedNice and waits
// for it. The thread is thrown away afterwards (the goroutine ends still
// locked to it, and the runtime then ends the thread): an unprivileged
// process may raise its nice value but not lower it back, so the thread
// could never serve anything else at full priority. A thread per metatile
// costs tens of microseconds against milliseconds of encoding.
func onSeedThread(fn func()) {
	var panicked any
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		defer close(done)
		defer func() { panicked = recover() }()
		// Best effort: a seed at full priority is still a correct seed.
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), seedNice)
		fn()
	}()
	<-done
	if panicked != nil {
		panic(fmt.Sprint(panicked)) // to the fetch's own recover, on the caller's goroutine
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
