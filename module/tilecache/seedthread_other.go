//go:build !linux

package tilecache

import "errors"

// onSeedThread runs fn: lowering one thread's priority is done on Linux
// only (seedthread_linux.go).
func onSeedThread(fn func()) { fn() }

// seedThreadsLocked: fn runs on the caller's goroutine, which may yield.
const seedThreadsLocked = false

func threadNice() (int, error) { return 0, errors.New("thread priorities are not read on this system") }
