package store

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestNextIDIncreasesAndNeverRepeatsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	var ids []uint64
	for range 5 {
		id, err := s.NextID("task")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if ids[0] < 1 || !slices.IsSorted(ids) || slices.Compact(slices.Clone(ids))[4] != ids[4] {
		t.Fatalf("ids %v", ids)
	}
	other, _ := s.NextID("other")
	if other != 1 {
		t.Errorf("a second sequence starts at %d, want 1", other)
	}
	release(t, s)
	s = openT(t, dir)
	next, err := s.NextID("task")
	if err != nil {
		t.Fatal(err)
	}
	if next <= ids[4] {
		t.Fatalf("after reopen id %d, last before %d", next, ids[4])
	}
}

func TestSetsOfListsEachStoredSetOnce(t *testing.T) {
	s := openT(t, t.TempDir())
	sets := []Set{
		{Layer: "L", Gridset: "G", Format: "image/png", Params: "aaaa"},
		{Layer: "L", Gridset: "G", Format: "image/png", Params: "bbbb"},
		{Layer: "L", Gridset: "G", Format: "image/jpeg", Params: "aaaa"},
		{Layer: "L", Gridset: "H", Format: "image/png", Params: "aaaa"},  // other gridset
		{Layer: "L2", Gridset: "G", Format: "image/png", Params: "aaaa"}, // other layer
	}
	for _, set := range sets {
		var entries []Entry
		for z := 0; z < 3; z++ {
			for x := int64(0); x < 3; x++ {
				entries = append(entries, Entry{Key: Key{Set: set, Z: z, X: x, Y: x}, Data: []byte("tile")})
			}
		}
		if err := s.Put(entries, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SetsOf("L", "G")
	if err != nil {
		t.Fatal(err)
	}
	want := []Set{sets[2], sets[0], sets[1]} // key order: format, then params
	if !slices.Equal(got, want) {
		t.Fatalf("SetsOf = %v, want %v", got, want)
	}
	if err := s.TruncateLayer("L"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SetsOf("L", "G"); len(got) != 0 {
		t.Fatalf("after truncate: %v", got)
	}
}

func TestTaskRecordsRoundTripAndSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for _, id := range []int64{3, 1, 300} {
		if err := s.PutTask(id, []byte{byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutTask(3, []byte("three")); err != nil { // replaces
		t.Fatal(err)
	}
	if err := s.DeleteTask(1); err != nil {
		t.Fatal(err)
	}
	release(t, s)
	s = openT(t, dir)
	var ids []int64
	var vals []string
	err := s.Tasks(func(id int64, rec []byte) error {
		ids = append(ids, id)
		vals = append(vals, string(rec))
		return nil
	})
	if err != nil || !slices.Equal(ids, []int64{3, 300}) || vals[0] != "three" || vals[1] != string([]byte{44}) {
		t.Fatalf("records %v %q %v", ids, vals, err)
	}
}

// A closed store answers ErrClosed at once; Badger's own calls on a closed
// database may block for ever, which would hang requests.
func TestClosedStoreFailsFast(t *testing.T) {
	s := openT(t, t.TempDir())
	if err := s.Destruct(); err != nil {
		t.Fatal(err)
	}
	k := Key{Set: Set{Layer: "L", Gridset: "G", Format: "F", Params: "P"}}
	if _, err := s.Get(context.Background(), k, nil); err != ErrClosed {
		t.Errorf("Get: %v", err)
	}
	if err := s.Put([]Entry{{Key: k, Data: []byte("x")}}, time.Now()); err != ErrClosed {
		t.Errorf("Put: %v", err)
	}
	if _, err := s.Has([]Key{k}, time.Time{}); err != ErrClosed {
		t.Errorf("Has: %v", err)
	}
	if _, err := s.NextID("task"); err != ErrClosed {
		t.Errorf("NextID: %v", err)
	}
}

// On a (nearly) full disk a write is refused with ErrDiskFull instead of
// reaching Badger's memory-mapped files, where it would be a SIGBUS.
func TestWritesRefusedOnAFullDisk(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	orig := freeSpace
	freeSpace = func(string) (int64, error) { return free.Load(), nil }
	t.Cleanup(func() { freeSpace = orig })
	s := openT(t, t.TempDir())
	k := Key{Set: Set{Layer: "L", Gridset: "G", Format: "F", Params: "P"}}
	if err := s.Put([]Entry{{Key: k, Data: []byte("tile")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	free.Store(DefaultMinFreeSpace - 1)
	time.Sleep(250 * time.Millisecond) // past the cached reading
	k.X = 1
	if err := s.Put([]Entry{{Key: k, Data: []byte("tile")}}, time.Now()); err != ErrDiskFull {
		t.Fatalf("Put on a full disk: %v", err)
	}
	if err := s.PutTask(1, []byte("{}")); err != ErrDiskFull {
		t.Fatalf("PutTask on a full disk: %v", err)
	}
	if _, err := s.Get(context.Background(), k, nil); err != ErrNotFound {
		t.Fatalf("the refused tile: %v", err)
	}
	free.Store(1 << 30) // space freed: writes go through again at once
	if err := s.Put([]Entry{{Key: k, Data: []byte("tile")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// A task's data lives beside its record: Tasks does not list it as a
// record, it survives a reopen, and DeleteTask takes it with the record.
func TestTaskDataBesideItsRecord(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if err := s.PutTask(7, []byte("rec")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTaskData(7, []byte("a list")); err != nil {
		t.Fatal(err)
	}
	release(t, s)
	s = openT(t, dir)
	var ids []int64
	if err := s.Tasks(func(id int64, rec []byte) error { ids = append(ids, id); return nil }); err != nil || !slices.Equal(ids, []int64{7}) {
		t.Fatalf("records %v %v: the data must not read as a record", ids, err)
	}
	if b, err := s.TaskData(7); err != nil || string(b) != "a list" {
		t.Fatalf("data %q %v", b, err)
	}
	if err := s.DeleteTask(7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TaskData(7); err == nil {
		t.Fatal("the data outlived its task")
	}
	release(t, s)
}
