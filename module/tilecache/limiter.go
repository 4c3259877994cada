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
	limit   int
	free    int                // limit minus slots in use; negative after the limit was lowered
	waiting [2][]chan struct{} // by Priority, FIFO
}

func newLimiter(n int) *limiter { return &limiter{limit: n, free: n} }

// setLimit changes the number of slots: a raised limit hands its new slots
// to waiters at once, a lowered one takes effect as slots come back.
func (l *limiter) setLimit(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free += n - l.limit
	l.limit = n
	for l.free > 0 && l.handOffLocked() {
		l.free--
	}
}

// handOffLocked gives a slot to the first waiter, users first; false when
// nobody waits.
func (l *limiter) handOffLocked() bool {
	for p := range l.waiting {
		if q := l.waiting[p]; len(q) > 0 {
			close(q[0])
			l.waiting[p] = q[1:]
			return true
		}
	}
	return false
}

// acquire waits for a slot. A seeder waiting in line whose metatile a user
// then asks for (urgent closes) moves to the users' line: the user is
// waiting for that very fetch.
func (l *limiter) acquire(ctx context.Context, p Priority, urgent <-chan struct{}) error {
	l.mu.Lock()
	if l.free > 0 && len(l.waiting[PriorityUser]) == 0 && (p == PriorityUser || len(l.waiting[PrioritySeed]) == 0) {
		l.free--
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiting[p] = append(l.waiting[p], ch)
	l.mu.Unlock()
	for {
		select {
		case <-ch:
			return nil
		case <-urgent:
			urgent = nil
			if p == PriorityUser {
				continue
			}
			l.mu.Lock()
			if l.remove(p, ch) {
				p = PriorityUser
				l.waiting[p] = append(l.waiting[p], ch)
			}
			l.mu.Unlock()
		case <-ctx.Done():
			return l.giveUp(p, ch, ctx.Err())
		}
	}
}

// remove takes ch out of line p; false when it was already handed a slot.
func (l *limiter) remove(p Priority, ch chan struct{}) bool {
	q := l.waiting[p]
	for i, c := range q {
		if c == ch {
			l.waiting[p] = append(q[:i], q[i+1:]...)
			return true
		}
	}
	return false
}

func (l *limiter) giveUp(p Priority, ch chan struct{}, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.remove(p, ch) {
		// Handed a slot just as we gave up: pass it on.
		l.releaseLocked()
	}
	return err
}

func (l *limiter) release() {
	l.mu.Lock()
	l.releaseLocked()
	l.mu.Unlock()
}

func (l *limiter) releaseLocked() {
	if l.free >= 0 && l.handOffLocked() {
		return
	}
	l.free++
}
