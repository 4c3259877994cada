package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// countingStorage counts the listings of the storage that fail with a
// not-exist error although the prefix exists: the race of certmagic's
// file_system storage this package must not read as "nothing stored".
type countingStorage struct {
	certmagic.Storage
	races atomic.Int64
}

func (s *countingStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	keys, err := s.Storage.List(ctx, prefix, recursive)
	if IsNotExist(err) {
		if _, serr := s.Storage.Stat(ctx, prefix); serr == nil {
			s.races.Add(1)
		}
	}
	return keys, err
}

// beater stands for another node: it re-stores its heartbeat record in
// the shared file_system storage as fast as it can, as certmagic does it
// (a temporary file in the same directory, renamed into place), so that
// a listing of nodes/ often meets a temporary file that vanishes.
type beater struct {
	id     string
	beats  atomic.Int64
	paused atomic.Bool

	mu   sync.Mutex
	done []time.Time // when recent Stores ended, a ring of beatRing
	next int
}

const beatRing = 4096

func (b *beater) run(ctx context.Context, st certmagic.Storage, key string) {
	for ctx.Err() == nil {
		if b.paused.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		raw, _ := json.Marshal(heartbeat{ID: b.id, Beat: b.beats.Add(1), Host: "test"})
		if st.Store(ctx, key, raw) == nil {
			b.mu.Lock()
			if len(b.done) < beatRing {
				b.done = append(b.done, time.Now())
			} else {
				b.done[b.next] = time.Now()
				b.next = (b.next + 1) % beatRing
			}
			b.mu.Unlock()
		}
	}
}

// stalled is the longest time within the last window (until now) in
// which the writer stored no beat: on a busy machine a writer goroutine
// can go unscheduled, or its Store take, longer than a lease, and then
// the observer is right to judge it dead.
func (b *beater) stalled(window time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	from := now.Add(-window)
	times := append(append([]time.Time(nil), b.done[b.next:]...), b.done[:b.next]...)
	longest, prev := time.Duration(0), from
	for _, at := range times {
		if at.Before(from) {
			continue
		}
		longest = max(longest, at.Sub(prev))
		prev = at
	}
	return max(longest, now.Sub(prev))
}

// records counts the writers' heartbeat records among keys.
func records(keys []string) int {
	n := 0
	for _, k := range keys {
		if strings.Contains(k, "0a0b0c0d") {
			n++
		}
	}
	return n
}

// Many nodes re-storing their heartbeats into one file_system storage make
// listings race (the storage's List fails with not-exist when another
// node's temporary file goes mid-walk; hit here many times a second). Over
// thousands of reads of the heartbeats, no listing comes back empty and no
// node that kept beating (never half a lease without a stored beat, which
// on a busy machine a writer goroutine can miss) is judged dead; a node
// silent for the lease is dead,
// and alive again as soon as it beats again.
func TestListingRacesJudgeNobodyDead(t *testing.T) {
	st := &countingStorage{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	lease := 1500 * time.Millisecond
	obs := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer obs.Destruct()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	const writers = 8
	beaters := make([]*beater, writers)
	for i := range beaters {
		b := &beater{id: fmt.Sprintf("peer%d-0a0b0c0d", i)}
		beaters[i] = b
		wg.Add(1)
		go func() { defer wg.Done(); b.run(ctx, st, obs.key("nodes/"+b.id)) }()
	}
	// Counted by name: a listing also holds the writers' temporary files
	// (digits only), so its length says nothing about who has beaten.
	waitFor(t, "every writer's first beat", 5*time.Second, func() bool {
		keys, err := obs.List("nodes")
		return err == nil && records(keys) >= writers
	})
	if err := obs.readPeers(); err != nil {
		t.Fatal(err)
	}

	const reads = 3000
	deadline := time.Now().Add(60 * time.Second)
	unknown, stalls := 0, 0
	n := 0
	for ; n < reads && time.Now().Before(deadline); n++ {
		if n%2 == 0 {
			// The listing itself: never empty, never short of a record
			// that is there the whole time.
			keys, err := obs.List("nodes")
			if err != nil {
				unknown++
				continue
			}
			if found := records(keys); found < writers {
				t.Fatalf("read %d: a listing found %d of %d heartbeat records (%d keys)", n, found, writers, len(keys))
			}
			continue
		}
		if err := obs.readPeers(); err != nil {
			unknown++ // an error is "unknown": it must change no judgment
		}
		for _, b := range beaters {
			if !obs.Alive(b.id) {
				// Dead is wrong only if the writer kept beating: no stall of
				// half a lease within the last two leases.
				if g := b.stalled(2 * lease); g >= lease/2 {
					stalls++
					continue
				}
				t.Fatalf("read %d: node %s judged dead although it beat %d times, never %v apart lately (listing races so far: %d)",
					n, b.id, b.beats.Load(), lease/2, st.races.Load())
			}
		}
	}
	races := st.races.Load()
	t.Logf("%d reads, %d listing races met, %d reads that stayed unknown, %d judgments of a writer that had stalled", n, races, unknown, stalls)
	if n < reads {
		t.Fatalf("only %d of %d reads in 60 s", n, reads)
	}
	if races < 10 {
		t.Fatalf("only %d listings raced a write: the test did not exercise the race", races)
	}
	if unknown > n/10 {
		t.Fatalf("%d of %d reads failed: the retries do not get past the race", unknown, n)
	}

	// One writer goes silent: dead after the lease, alive on its next beat.
	quiet := beaters[0]
	quiet.paused.Store(true)
	time.Sleep(10 * time.Millisecond) // its last Store is done
	waitFor(t, "the silent node judged dead", 3*lease, func() bool {
		obs.readPeers()
		return !obs.Alive(quiet.id)
	})
	for _, b := range beaters[1:] {
		if !obs.Alive(b.id) {
			t.Fatalf("node %s, beating, judged dead beside a silent one", b.id)
		}
	}
	quiet.paused.Store(false)
	waitFor(t, "the silent node alive again once it beats", 2*time.Second, func() bool {
		obs.readPeers()
		return obs.Alive(quiet.id)
	})
}

// A heartbeat record missing from a read (the storage wiped, the record
// deleted by a node that thought it long dead) does not make its node
// dead: only the lease does. A node that leaves says so in its last beat
// and is dead at the next read, well before the lease.
func TestMissingRecordIsNotDeath(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	lease := 2 * time.Second
	a := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer a.Destruct()
	b := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	c := Join(st, "c", lease, 100*time.Millisecond, zap.NewNop())
	defer c.Destruct()
	waitFor(t, "a sees b and c", 3*time.Second, func() bool { return len(a.Peers()) == 3 })

	// c's record goes; a reads the heartbeats several times before c
	// writes its next one.
	if err := st.Delete(context.Background(), c.key("nodes/"+c.ID)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.readPeers(); err != nil {
			t.Fatal(err)
		}
		if !a.Alive(c.ID) {
			t.Fatal("a node judged dead because its record was missing from a read")
		}
	}

	left := time.Now()
	b.Destruct()
	waitFor(t, "a sees b leave", lease, func() bool { return !a.Alive(b.ID) })
	if d := time.Since(left); d >= lease {
		t.Fatalf("a node that left counted dead only after %v, the lease", d)
	}
	if !a.Alive(c.ID) {
		t.Fatal("c judged dead")
	}
}
