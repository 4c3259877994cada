package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// allocated is what du counts for dir: the blocks its files occupy.
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	n, _ := diskSizes(t, dir)
	return n
}

// diskSizes is what du -s (allocated blocks) and du -sb (apparent size)
// count for dir.
func diskSizes(t *testing.T, dir string) (allocated, apparent int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // a file Badger removed during the walk
		}
		allocated += fi.Sys().(*syscall.Stat_t).Blocks * 512
		apparent += fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return allocated, apparent
}

// putRandom stores count incompressible tiles of size bytes in set at
// level z, a row of metatiles at a time, and returns their data by key.
func putRandom(t *testing.T, s *Badger, set Set, z int, count, size int) map[Key][]byte {
	t.Helper()
	out := make(map[Key][]byte, count)
	var batch []Entry
	for i := range count {
		data := make([]byte, size)
		rand.Read(data)
		k := Key{Set: set, Z: z, X: int64(i % 1000), Y: int64(i / 1000)}
		out[k] = data
		batch = append(batch, Entry{Key: k, Data: data})
		if len(batch) == 16 || i == count-1 {
			if err := s.Put(batch, time.Now()); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	return out
}

// A truncated layer's disk space comes back with the reclaim: before,
// deleting its keys one by one left every value in the value log, and
// value-log GC found nothing to free (bench/diskreclaim).
func TestTruncationGivesDiskBack(t *testing.T) {
	const vlogFile = 2 << 20
	dir := t.TempDir()
	s := openWith(t, dir, Options{ValueLogFileSize: vlogFile})

	big := Set{Layer: "big", Gridset: "g", Format: "png", Params: "p"}
	keep := Set{Layer: "keep", Gridset: "g", Format: "png", Params: "p"}
	const bigTiles, size = 6000, 4000 // 24 MB: a dozen value-log files
	putRandom(t, s, big, 12, bigTiles, size)
	kept := putRandom(t, s, keep, 12, 300, size)
	before := allocated(t, dir)

	if err := s.TruncateLayerWait("big"); err != nil {
		t.Fatal(err)
	}
	after, apparent := diskSizes(t, dir)
	t.Logf("store directory: %.1f MB with both layers, %.1f MB after truncating the %.1f MB one (%.1f MB apparent)",
		float64(before)/1e6, float64(after)/1e6, float64(bigTiles*size)/1e6, float64(apparent)/1e6)
	// What may stay (docs/storage.md): the kept layer, the value-log file
	// being written (Badger never rewrites it) and one being rewritten, the
	// LSM tree; in apparent size also what Badger reserves and has not
	// written: twice the memtable for its log, twice the value-log file.
	limit := before - bigTiles*size + 3*vlogFile
	if after > limit {
		t.Errorf("after the truncation the store still takes %d bytes (had %d; want at most %d)", after, before, limit)
	}
	if reserved := int64(2*MemTableSize + 2*vlogFile); apparent > limit+reserved {
		t.Errorf("after the truncation the store's apparent size is %d bytes, over %d + %d reserved", apparent, limit, reserved)
	}

	for k, want := range kept {
		got, err := s.Get(context.Background(), k, nil)
		if err != nil || !bytes.Equal(got.Data, want) {
			t.Fatalf("kept tile %v after the reclaim: err %v, %d bytes (want %d)", k, err, len(got.Data), len(want))
		}
	}
	if n := rawCount(t, s, layerPrefix(nil, "big")); n != 0 {
		t.Errorf("%d keys of the truncated layer left", n)
	}
}

// Badger's DropPrefix, which the reclaim uses, fails every write made
// while it runs; the store's own writes wait for it instead.
func TestReclaimDoesNotFailWrites(t *testing.T) {
	dir := t.TempDir()
	s := openWith(t, dir, Options{ValueLogFileSize: 4 << 20})
	big := Set{Layer: "big", Gridset: "g", Format: "png", Params: "p"}
	other := Set{Layer: "other", Gridset: "g", Format: "png", Params: "p"}

	var stop atomic.Bool
	var writes atomic.Int64
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	writer := func(write func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if err := write(i); err != nil {
					errs <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	payload := make([]byte, 600) // in the value log, like a real tile
	writer(func(i int) error {
		return s.Put([]Entry{{Key: Key{Set: other, Z: 3, X: int64(i % 8), Y: int64(i / 8 % 8)}, Data: payload}}, time.Now())
	})
	writer(func(i int) error { return s.PutTask(int64(i%50+1), []byte("task record")) })
	writer(func(i int) error { _, err := s.NextID("tasks"); return err })
	writer(func(i int) error { return s.RecordParams(other, "STYLES=x") })

	for round := range 8 {
		putRandom(t, s, big, 10, 2000, 800)
		if err := s.TruncateLayerWait("big"); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a write during the reclaims failed: %v", err)
	}
	if writes.Load() == 0 {
		t.Fatal("no write ran beside the reclaims")
	}
	t.Logf("%d writes beside 8 reclaims", writes.Load())
}
