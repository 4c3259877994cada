package tilecache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// queued is how many wait in line p.
func queued(l *limiter, p Priority) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting[p])
}

// waitQueued waits until line p holds n waiters.
func waitQueued(t *testing.T, l *limiter, p Priority, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for queued(l, p) != n {
		if time.Now().After(deadline) {
			t.Fatalf("line %d holds %d waiters, want %d", p, queued(l, p), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// checkIdle checks that every slot comes back free with no one waiting
// (waiting a little: a holder may be between reporting and releasing).
func checkIdle(t *testing.T, l *limiter, capacity int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		free, users, seeders := l.free, len(l.waiting[PriorityUser]), len(l.waiting[PrioritySeed])
		l.mu.Unlock()
		if free == capacity && users == 0 && seeders == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("free %d (want %d), waiting users %d seeders %d", free, capacity, users, seeders)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// acquireAll takes every slot of an idle limiter without blocking.
func acquireAll(t *testing.T, l *limiter, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		done := make(chan error, 1)
		go func() { done <- l.acq(context.Background(), PrioritySeed, nil) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("slot %d of %d not available", i+1, n)
		}
	}
}

func TestLimiterCapacity(t *testing.T) {
	const capacity, workers, rounds = 3, 64, 50
	l := newLimiter(capacity)
	var inFlight, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := Priority(w % 2)
			for i := 0; i < rounds; i++ {
				if err := l.acq(context.Background(), p, nil); err != nil {
					t.Error(err)
					return
				}
				n := inFlight.Add(1)
				for {
					m := maxSeen.Load()
					if n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(time.Duration(i%3) * 10 * time.Microsecond)
				inFlight.Add(-1)
				l.rel()
			}
		}()
	}
	wg.Wait()
	if m := maxSeen.Load(); m > capacity {
		t.Fatalf("%d in flight at once, capacity %d", m, capacity)
	} else if m < capacity {
		t.Logf("only %d in flight at most (capacity %d)", m, capacity)
	}
	checkIdle(t, l, capacity)
}

// Capacity also holds while waiters give up all the time.
func TestLimiterCapacityWithCancellations(t *testing.T) {
	const capacity, workers, rounds = 2, 32, 100
	l := newLimiter(capacity)
	var inFlight, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((w+i)%5)*20*time.Microsecond)
				err := l.acq(ctx, Priority((w+i)%2), nil)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					continue
				}
				n := inFlight.Add(1)
				for {
					m := maxSeen.Load()
					if n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(10 * time.Microsecond)
				inFlight.Add(-1)
				l.rel()
			}
		}()
	}
	wg.Wait()
	if m := maxSeen.Load(); m > capacity {
		t.Fatalf("%d in flight at once, capacity %d", m, capacity)
	}
	checkIdle(t, l, capacity)
}

// record acquires at priority p and reports name on order when it gets
// the slot, then gives the slot back.
func record(l *limiter, p Priority, name string, order chan<- string, urgent <-chan struct{}) {
	if err := l.acq(context.Background(), p, urgent); err != nil {
		order <- "error " + name + ": " + err.Error()
		return
	}
	order <- name
	l.rel()
}

func collect(t *testing.T, order <-chan string, n int) []string {
	t.Helper()
	var got []string
	for i := 0; i < n; i++ {
		select {
		case s := <-order:
			got = append(got, s)
		case <-time.After(5 * time.Second):
			t.Fatalf("after %v: timed out", got)
		}
	}
	return got
}

func TestLimiterUserBeforeEarlierSeeder(t *testing.T) {
	l := newLimiter(1)
	acquireAll(t, l, 1)
	order := make(chan string, 2)
	go record(l, PrioritySeed, "seeder", order, nil)
	waitQueued(t, l, PrioritySeed, 1)
	go record(l, PriorityUser, "user", order, nil)
	waitQueued(t, l, PriorityUser, 1)
	l.rel()
	got := collect(t, order, 2)
	if got[0] != "user" || got[1] != "seeder" {
		t.Fatalf("order %v, want user then seeder", got)
	}
	checkIdle(t, l, 1)
}

// A free slot does not go to a newly arriving seeder while users wait,
// nor to a newly arriving user ahead of users already waiting.
func TestLimiterNoBargingPastWaiters(t *testing.T) {
	l := newLimiter(1)
	acquireAll(t, l, 1)
	order := make(chan string, 3)
	go record(l, PriorityUser, "u1", order, nil)
	waitQueued(t, l, PriorityUser, 1)
	go record(l, PrioritySeed, "s1", order, nil)
	waitQueued(t, l, PrioritySeed, 1)
	go record(l, PriorityUser, "u2", order, nil)
	waitQueued(t, l, PriorityUser, 2)
	l.rel()
	got := collect(t, order, 3)
	want := []string{"u1", "u2", "s1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	checkIdle(t, l, 1)
}

func TestLimiterFIFOWithinPriority(t *testing.T) {
	l := newLimiter(1)
	acquireAll(t, l, 1)
	const n = 8
	order := make(chan string, 2*n)
	// Interleave arrivals: s0 u0 s1 u1 ...; users go first, each line in
	// arrival order.
	for i := 0; i < n; i++ {
		go record(l, PrioritySeed, "s"+string(rune('0'+i)), order, nil)
		waitQueued(t, l, PrioritySeed, i+1)
		go record(l, PriorityUser, "u"+string(rune('0'+i)), order, nil)
		waitQueued(t, l, PriorityUser, i+1)
	}
	l.rel()
	got := collect(t, order, 2*n)
	for i := 0; i < n; i++ {
		if got[i] != "u"+string(rune('0'+i)) || got[n+i] != "s"+string(rune('0'+i)) {
			t.Fatalf("order %v", got)
		}
	}
	checkIdle(t, l, 1)
}

func TestLimiterCancelWhileWaiting(t *testing.T) {
	for _, p := range []Priority{PriorityUser, PrioritySeed} {
		const capacity = 2
		l := newLimiter(capacity)
		acquireAll(t, l, capacity)

		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- l.acq(ctx, p, nil) }()
		waitQueued(t, l, p, 1)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("priority %d: got %v, want context.Canceled", p, err)
		}
		if queued(l, p) != 0 {
			t.Fatalf("priority %d: cancelled waiter still in line", p)
		}

		// A deadline works the same way.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Millisecond)
		err := l.acq(ctx2, p, nil)
		cancel2()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("priority %d: got %v, want context.DeadlineExceeded", p, err)
		}

		for i := 0; i < capacity; i++ {
			l.rel()
		}
		checkIdle(t, l, capacity)
		// and every slot can be taken again
		acquireAll(t, l, capacity)
		for i := 0; i < capacity; i++ {
			l.rel()
		}
		checkIdle(t, l, capacity)
	}
}

// A waiter that gives up does not hold up the ones behind it.
func TestLimiterCancelledWaiterSkipped(t *testing.T) {
	l := newLimiter(1)
	acquireAll(t, l, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.acq(ctx, PriorityUser, nil) }()
	waitQueued(t, l, PriorityUser, 1)
	order := make(chan string, 1)
	go record(l, PriorityUser, "u2", order, nil)
	waitQueued(t, l, PriorityUser, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	l.rel()
	if got := collect(t, order, 1); got[0] != "u2" {
		t.Fatal(got)
	}
	checkIdle(t, l, 1)
}

// Cancelling exactly when the slot is handed over must pass the slot on,
// not lose it: hammer that race and check no slot leaks.
func TestLimiterCancelRaceDoesNotLeak(t *testing.T) {
	l := newLimiter(1)
	for i := 0; i < 2000; i++ {
		acquireAll(t, l, 1)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		p := Priority(i % 2)
		go func() { errc <- l.acq(ctx, p, nil) }()
		waitQueued(t, l, p, 1)
		// release and cancel at the same moment
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); l.rel() }()
		go func() { defer wg.Done(); cancel() }()
		wg.Wait()
		if err := <-errc; err == nil {
			l.rel() // it won the slot
		} else if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		checkIdle(t, l, 1)
	}
}

// A seeder whose metatile a user then asks for (urgent closes) moves to the
// end of the users' line: ahead of seeders that queued before it, behind
// users already waiting.
func TestLimiterUrgentPromotesSeeder(t *testing.T) {
	l := newLimiter(1)
	acquireAll(t, l, 1)
	order := make(chan string, 4)
	go record(l, PrioritySeed, "s1", order, nil)
	waitQueued(t, l, PrioritySeed, 1)
	urgent := make(chan struct{})
	go record(l, PrioritySeed, "s2", order, urgent)
	waitQueued(t, l, PrioritySeed, 2)
	go record(l, PriorityUser, "u1", order, nil)
	waitQueued(t, l, PriorityUser, 1)
	close(urgent)
	waitQueued(t, l, PriorityUser, 2)
	waitQueued(t, l, PrioritySeed, 1)
	go record(l, PriorityUser, "u2", order, nil)
	waitQueued(t, l, PriorityUser, 3)
	l.rel()
	got := collect(t, order, 4)
	want := []string{"u1", "s2", "u2", "s1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	checkIdle(t, l, 1)
}

// Promoted, then cancelled: the seeder leaves the users' line.
func TestLimiterUrgentThenCancel(t *testing.T) {
	l := newLimiter(1)
	acquireAll(t, l, 1)
	urgent := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.acq(ctx, PrioritySeed, urgent) }()
	waitQueued(t, l, PrioritySeed, 1)
	close(urgent)
	waitQueued(t, l, PriorityUser, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	l.rel()
	checkIdle(t, l, 1)
}

// urgent closed for a user, or closed before the seeder has to wait, is
// harmless.
func TestLimiterUrgentNoop(t *testing.T) {
	l := newLimiter(1)
	closed := make(chan struct{})
	close(closed)
	if err := l.acq(context.Background(), PrioritySeed, closed); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 1)
	go record(l, PriorityUser, "u", order, closed)
	waitQueued(t, l, PriorityUser, 1)
	l.rel()
	if got := collect(t, order, 1); got[0] != "u" {
		t.Fatal(got)
	}
	checkIdle(t, l, 1)
}

// A reload may change upstream_concurrency on the shared limiter: a raised
// limit hands its new slots to waiters at once, a lowered one holds as the
// slots in use come back, and no slot is lost either way.
func TestLimiterSetLimit(t *testing.T) {
	l := newLimiter(2)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := l.acq(ctx, PriorityUser, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan struct{}, 3)
	for i := 0; i < 3; i++ {
		go func() {
			if l.acq(ctx, PrioritySeed, nil) == nil {
				got <- struct{}{}
			}
		}()
	}
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.waiting[PrioritySeed]) == 3 })
	l.setLimit(4) // two more slots: two waiters get them now
	for i := 0; i < 2; i++ {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("a raised limit did not hand its slots to waiters")
		}
	}
	select {
	case <-got:
		t.Fatal("more slots than the limit")
	case <-time.After(50 * time.Millisecond):
	}
	// 4 in use, 1 waiting. Lowered to 1: three releases are absorbed, the
	// fourth goes to the waiter.
	l.setLimit(1)
	for i := 0; i < 3; i++ {
		l.rel()
		select {
		case <-got:
			t.Fatalf("release %d handed a slot over a lowered limit", i+1)
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.rel()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never got the one slot")
	}
	l.rel()
	checkIdle(t, l, 1)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// acq and rel are acquire and release for the tests that reserve no slots
// for seeding, where which line a slot was taken in changes nothing.
func (l *limiter) acq(ctx context.Context, p Priority, urgent <-chan struct{}) error {
	_, err := l.acquire(ctx, p, urgent)
	return err
}

func (l *limiter) rel() { l.release(PriorityUser) }

// The users' line is bounded: with every slot taken and the line full, a
// miss is refused at once instead of waiting; seeders are not counted.
func TestLimiterQueueBound(t *testing.T) {
	l := newLimiter(1)
	l.configure(1, 0, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := l.acquire(ctx, PriorityUser, nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 3)
	for i := 0; i < 2; i++ {
		go func() { _, err := l.acquire(ctx, PriorityUser, nil); errc <- err }()
	}
	go func() { _, err := l.acquire(ctx, PrioritySeed, nil); errc <- err }()
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiting[PriorityUser]) == 2 && len(l.waiting[PrioritySeed]) == 1
	})
	start := time.Now()
	if _, err := l.acquire(ctx, PriorityUser, nil); !errors.Is(err, ErrUpstreamBusy) {
		t.Fatalf("a third waiting user: %v, want ErrUpstreamBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refused after %v: it waited", d)
	}
	cancel()
	for i := 0; i < 3; i++ {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
}

// With a reserve of seed slots, a waiting seeder below its reserve gets the
// next slot before waiting users; above it, users come first again.
func TestLimiterSeedReserve(t *testing.T) {
	l := newLimiter(2)
	l.configure(2, 1, 0)
	ctx := context.Background()
	// Two users hold both slots; users and a seeder queue up.
	for i := 0; i < 2; i++ {
		if _, err := l.acquire(ctx, PriorityUser, nil); err != nil {
			t.Fatal(err)
		}
	}
	order := make(chan string, 5)
	wait := func(who string, p Priority, n int) {
		for i := 0; i < n; i++ {
			go func() {
				if got, err := l.acquire(ctx, p, nil); err == nil && got == p {
					order <- who
				}
			}()
		}
	}
	wait("user", PriorityUser, 3)
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.waiting[PriorityUser]) == 3 })
	wait("seed", PrioritySeed, 2)
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.waiting[PrioritySeed]) == 2 })
	// The first slot back goes to a seeder (0 of its 1 reserved in use),
	// the next to a user: the second seeder would exceed the reserve.
	l.release(PriorityUser)
	if got := <-order; got != "seed" {
		t.Fatalf("first slot went to a %s, want the seeder below its reserve", got)
	}
	l.release(PriorityUser)
	if got := <-order; got != "user" {
		t.Fatalf("second slot went to a %s, want a user", got)
	}
	// The seed slot comes back with a seeder still waiting: below its
	// reserve again, the seeder gets it before the two waiting users.
	l.release(PrioritySeed)
	if got := <-order; got != "seed" {
		t.Fatalf("the seed slot came back: it went to a %s, want the waiting seeder (below reserve again)", got)
	}
}
