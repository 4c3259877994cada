package tilecache

import (
	"context"
	"sync"
)

// Priority orders who gets the next free upstream slot.
type Priority int

const (
	// PriorityUser is a visitor's cache miss: someone is waiting for it.
	PriorityUser Priority = iota
	// PrioritySeed is background seeding: it waits for users.
	PrioritySeed
)

// limiter caps concurrent upstream requests. When a slot frees up it goes
// to the longest-waiting user before any seeder, so that seeding at full
// tilt never makes a visitor queue behind it.
type limiter struct {
	mu      sync.Mutex
	free    int
	waiting [2][]chan struct{} // by Priority, FIFO
}

func newLimiter(n int) *limiter { return &limiter{free: n} }

func (l *limiter) acquire(ctx context.Context, p Priority) error {
	l.mu.Lock()
	if l.free > 0 && len(l.waiting[PriorityUser]) == 0 && (p == PriorityUser || len(l.waiting[PrioritySeed]) == 0) {
		l.free--
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiting[p] = append(l.waiting[p], ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		q := l.waiting[p]
		for i, c := range q {
			if c == ch {
				l.waiting[p] = append(q[:i], q[i+1:]...)
				return ctx.Err()
			}
		}
		// Handed a slot just as we gave up: pass it on.
		l.releaseLocked()
		return ctx.Err()
	}
}

func (l *limiter) release() {
	l.mu.Lock()
	l.releaseLocked()
	l.mu.Unlock()
}

func (l *limiter) releaseLocked() {
	for p := range l.waiting {
		if q := l.waiting[p]; len(q) > 0 {
			close(q[0])
			l.waiting[p] = q[1:]
			return
		}
	}
	l.free++
}
