package seeder

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/cluster"
)

// The registry's ledger on a real file_system storage, with several nodes
// in one process (each its own cluster.Node, as each Caddy would have).

func testRegistries(t *testing.T, n int) []*registry {
	t.Helper()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	regs := make([]*registry, n)
	for i := range regs {
		node := cluster.Join(st, "test", 2*time.Second, 100*time.Millisecond, zap.NewNop())
		t.Cleanup(func() { node.Destruct() })
		regs[i] = &registry{n: node, log: zap.NewNop(), history: func() int { return 3 }}
	}
	return regs
}

func testRecord(id, units, perUnit int64) *record {
	r := &record{ID: id, Metatiles: units * perUnit, PerUnit: perUnit, Units: units}
	r.Layer, r.Type, r.State, r.Total = "test:a", Seed, Pending, units*perUnit*16
	r.Retry.MaxFailures = 1000
	return r
}

// Three nodes claiming and reporting at once: every unit is handed out
// exactly once, and the finished task counts every tile exactly once.
func TestRegistryHandsEachUnitOutOnce(t *testing.T) {
	regs := testRegistries(t, 3)
	const units = 60
	if err := regs[0].submit(testRecord(1, units, 1)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	handed := map[int64]int{}
	var wg sync.WaitGroup
	for _, r := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rep report
			for {
				got, rec, err := r.claim(1, 2, rep)
				if errors.Is(err, errGone) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				rep = report{}
				for _, u := range got {
					mu.Lock()
					handed[u]++
					mu.Unlock()
					rep.done = append(rep.done, doneUnit{Unit: u, Processed: 16, Node: r.n.ID})
				}
				if len(got) == 0 && len(rep.done) == 0 && !rec.active() {
					return
				}
				if len(got) == 0 {
					time.Sleep(5 * time.Millisecond) // others still hold units
				}
			}
		}()
	}
	wg.Wait()
	for u := int64(0); u < units; u++ {
		if handed[u] != 1 {
			t.Fatalf("unit %d handed out %d times", u, handed[u])
		}
	}
	rec, err := regs[1].lookup(1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != Done || rec.Processed != units*16 || rec.FailedTiles != 0 {
		t.Fatalf("finished task: state %v, processed %d of %d, failed %d", rec.State, rec.Processed, units*16, rec.FailedTiles)
	}
	if recs, _ := regs[2].active(); len(recs) != 0 {
		t.Fatalf("%d tasks still active", len(recs))
	}
}

// A silent node's units: the one it finished counts from its done record,
// the one it did not is handed out again; neither counts twice.
func TestRegistryTakesOverADeadNodesUnits(t *testing.T) {
	regs := testRegistries(t, 2)
	r := regs[0]
	// The ghost: a node that was there and is gone.
	ghost := regs[1].n.ID
	r.n.Alive(ghost)
	regs[1].n.Destruct()
	deadline := time.Now().Add(3 * time.Second)
	for r.n.Alive(ghost) {
		if time.Now().After(deadline) {
			t.Fatal("the node that left still counts alive")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec := testRecord(7, 4, 1)
	rec.Next, rec.State = 3, Running
	rec.Held = map[int64]string{0: ghost, 1: ghost, 2: r.n.ID}
	if err := r.submit(rec); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doneUnit{Unit: 0, Processed: 16, Node: ghost})
	if err := r.n.Store(doneKey(7, 0), b); err != nil {
		t.Fatal(err)
	}
	got, after, err := r.claim(7, 5, report{done: []doneUnit{{Unit: 2, Processed: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("claimed %v, want the dead node's unfinished unit 1, then the new unit 3", got)
	}
	if after.Processed != 32 {
		t.Fatalf("processed %d after the takeover, want 32 (unit 0 from its done record, unit 2 reported)", after.Processed)
	}
	// The dead node comes back and reports unit 1, which is no longer its.
	after, err = r.update(7, func(rec *record) error {
		rec.Held[1] = ghost
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, after, err = r.claim(7, 0, report{done: []doneUnit{{Unit: 1, Processed: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	if after.Processed != 32 {
		t.Fatalf("processed %d: a unit reported by a node that no longer holds it was counted", after.Processed)
	}
}

// Ids are unique across nodes drawing at once, and above a node's floor.
func TestRegistryIDsAreUniqueAcrossNodes(t *testing.T) {
	regs := testRegistries(t, 3)
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				id, err := r.nextID(int64(i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("id %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 15 {
		t.Fatalf("%d ids, want 15", len(seen))
	}
	id, err := regs[0].nextID(1000)
	if err != nil || id != 1001 {
		t.Fatalf("next id above a floor of 1000: %d, %v", id, err)
	}
}

// Ending a task: once, then ErrFinished; unknown ids are ErrNoTask; the
// history keeps only the newest.
func TestRegistryEndAndHistory(t *testing.T) {
	regs := testRegistries(t, 2)
	for id := int64(1); id <= 5; id++ {
		if err := regs[0].submit(testRecord(id, 3, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for id := int64(1); id <= 5; id++ {
		sum, err := regs[id%2].end(id, "killed")
		if err != nil || sum.State != Aborted {
			t.Fatalf("end %d: %+v %v", id, sum, err)
		}
	}
	if _, err := regs[1].end(5, "killed"); !errors.Is(err, ErrFinished) {
		t.Fatalf("ending an ended task: %v, want ErrFinished", err)
	}
	if _, err := regs[1].end(99, "killed"); !errors.Is(err, ErrNoTask) {
		t.Fatalf("ending an unknown task: %v, want ErrNoTask", err)
	}
	done, err := regs[0].finished()
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 || done[0].ID != 3 || done[0].Reason != "killed" {
		t.Fatalf("history %+v, want tasks 3..5", done)
	}
	if _, err := regs[0].lookup(1); !errors.Is(err, ErrNoTask) {
		t.Fatalf("an evicted task: %v, want ErrNoTask", err)
	}
}

// racingStorage makes every listing fail as certmagic's file_system
// storage does when a file goes while it walks the directory, while race
// is set.
type racingStorage struct {
	certmagic.Storage
	race atomic.Bool
}

func (s *racingStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if s.race.Load() {
		return nil, &fs.PathError{Op: "lstat", Path: prefix + "/1234567", Err: fs.ErrNotExist}
	}
	return s.Storage.List(ctx, prefix, recursive)
}

// A listing that keeps racing is an error, never an empty registry (the
// poll would stop every task, a kill would find none); and a storage's
// temporary file in history/ (digits, like a task id, holding another
// task's record) is neither listed as a task nor pushes one out.
func TestRegistryUnknownIsNotEmpty(t *testing.T) {
	st := &racingStorage{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	node := cluster.Join(st, "test", 2*time.Second, 100*time.Millisecond, zap.NewNop())
	t.Cleanup(func() { node.Destruct() })
	r := &registry{n: node, log: zap.NewNop(), history: func() int { return 3 }}
	for id := int64(1); id <= 2; id++ {
		if err := r.submit(testRecord(id, 3, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.end(1, "killed"); err != nil {
		t.Fatal(err)
	}
	st.race.Store(true)
	if recs, err := r.active(); err == nil || !errors.Is(err, cluster.ErrStorage) {
		t.Fatalf("a racing listing of the tasks: %d records, error %v; want an ErrStorage", len(recs), err)
	}
	if _, err := r.finished(); err == nil {
		t.Fatal("a racing listing of the history read as an empty history")
	}
	st.race.Store(false)
	if recs, err := r.active(); err != nil || len(recs) != 1 {
		t.Fatalf("after the race: %d active tasks, %v; want 1", len(recs), err)
	}

	rec, _ := r.lookup(1)
	b, _ := json.Marshal(rec)
	if err := node.Store("history/987654321", b); err != nil {
		t.Fatal(err)
	}
	for id := int64(2); id <= 4; id++ {
		if id > 2 {
			if err := r.submit(testRecord(id, 3, 1)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.end(id, "killed"); err != nil {
			t.Fatal(err)
		}
	}
	done, err := r.finished()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, d := range done {
		ids = append(ids, d.ID)
	}
	if !slices.Equal(ids, []int64{2, 3, 4}) {
		t.Fatalf("history %v, want the newest 3 real tasks 2, 3, 4", ids)
	}
}
