package tilecache

import (
	"context"
	"errors"
	"sync"
)

// Priority orders who gets the next free upstream slot.
type Priority int

const (
	// PriorityUser is a visitor's cache miss: someone is waiting for it.
	PriorityUser Priority = iota
	// PrioritySeed is background seeding: it waits for users, but for its
	// reserved share.
	PrioritySeed
)

// ErrUpstreamBusy is a fetch that was refused or dropped before it reached
// the upstream because the upstream is busy: the line of misses waiting
// for it is full, or nobody waits for it any more. The upstream did nothing wrong, so the circuit breaker never
// counts it; a visitor gets 503 with Retry-After.
var ErrUpstreamBusy = errors.New("the upstream is busy")

// limiter caps concurrent upstream requests (the limit). A free slot goes
// to the longest-waiting user before any seeder, so that seeding at full
// tilt never makes a visitor queue behind it; but seeders waiting with
// fewer than reserve slots in use come first, so that a flood of misses
// cannot starve a seed. The users' line holds at most queue waiters:
// beyond it a miss is refused at once instead of piling up.
type limiter struct {
	mu      sync.Mutex
	limit   int
	reserve int // slots seeding may always use when it has work
	queue   int // users that may wait in line; 0: no bound
	free    int // limit minus slots in use; negative after the limit was lowered
	inUse   [2]int
	waiting [2][]chan struct{} // by Priority, FIFO
}

func newLimiter(n int) *limiter { return &limiter{limit: n, free: n} }

// configure changes the limits: a raised limit hands its new slots to
// waiters at once, a lowered one takes effect as slots come back.
func (l *limiter) configure(limit, reserve, queue int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free += limit - l.limit
	l.limit, l.reserve, l.queue = limit, reserve, queue
	for l.free > 0 && l.handOffLocked() {
		l.free--
	}
}

// setLimit changes the number of slots only.
func (l *limiter) setLimit(n int) { l.configure(n, l.reserve, l.queue) }

// seedsFirstLocked: seeders wait and hold less than their reserve.
func (l *limiter) seedsFirstLocked() bool {
	return len(l.waiting[PrioritySeed]) > 0 && l.inUse[PrioritySeed] < l.reserve
}

// handOffLocked gives a slot to the next waiter; false when nobody waits.
func (l *limiter) handOffLocked() bool {
	order := [2]Priority{PriorityUser, PrioritySeed}
	if l.seedsFirstLocked() {
		order = [2]Priority{PrioritySeed, PriorityUser}
	}
	for _, p := range order {
		if q := l.waiting[p]; len(q) > 0 {
			close(q[0])
			l.waiting[p] = q[1:]
			l.inUse[p]++
			return true
		}
	}
	return false
}

// mayTakeLocked says whether a new request of priority p may take a free
// slot at once, without jumping a line it should wait in.
func (l *limiter) mayTakeLocked(p Priority) bool {
	if l.free <= 0 {
		return false
	}
	if p == PrioritySeed {
		return len(l.waiting[PrioritySeed]) == 0 &&
			(len(l.waiting[PriorityUser]) == 0 || l.inUse[PrioritySeed] < l.reserve)
	}
	// A user leaves the slots that waiting seeders are owed.
	owed := 0
	if len(l.waiting[PrioritySeed]) > 0 {
		owed = max(0, min(l.reserve-l.inUse[PrioritySeed], len(l.waiting[PrioritySeed])))
	}
	return len(l.waiting[PriorityUser]) == 0 && l.free > owed
}

// acquire waits for a slot and returns the priority it holds it under,
// which release must be given. A user finding the users' line full is
// refused with ErrUpstreamBusy. A seeder waiting in line whose metatile a
// user then asks for (urgent closes) moves to the users' line: the user is
// waiting for that very fetch.
func (l *limiter) acquire(ctx context.Context, p Priority, urgent <-chan struct{}) (Priority, error) {
	l.mu.Lock()
	if l.mayTakeLocked(p) {
		l.free--
		l.inUse[p]++
		l.mu.Unlock()
		return p, nil
	}
	if p == PriorityUser && l.queue > 0 && len(l.waiting[PriorityUser]) >= l.queue {
		l.mu.Unlock()
		return p, ErrUpstreamBusy
	}
	ch := make(chan struct{})
	l.waiting[p] = append(l.waiting[p], ch)
	l.mu.Unlock()
	for {
		select {
		case <-ch:
			return p, nil
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
			return p, l.giveUp(p, ch, ctx.Err())
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
		l.releaseLocked(p)
	}
	return err
}

// release gives back a slot acquire returned under priority p.
func (l *limiter) release(p Priority) {
	l.mu.Lock()
	l.releaseLocked(p)
	l.mu.Unlock()
}

func (l *limiter) releaseLocked(p Priority) {
	l.inUse[p]--
	if l.free >= 0 && l.handOffLocked() {
		return
	}
	l.free++
}
