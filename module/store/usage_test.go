package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

func openUsage(tb testing.TB, dir string) *Badger {
	tb.Helper()
	return openWith(tb, dir, Options{Usage: true})
}

// scanUsage counts what the tiles of the current generations hold, from
// the tiles themselves: the reference the records must equal.
func scanUsage(t *testing.T, s *Badger) []LevelUsage {
	t.Helper()
	byLevel := map[string]*LevelUsage{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tagTile}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			level := usageLevelOf(k)
			set, gen, z, ok := parseLevel(level)
			if !ok {
				return fmt.Errorf("bad key %q", k)
			}
			if gen != s.Generation(set.Layer) {
				continue
			}
			lu := byLevel[string(level)]
			if lu == nil {
				lu = &LevelUsage{Set: set, Z: z}
				byLevel[string(level)] = lu
			}
			lu.Tiles++
			lu.Bytes += it.Item().ValueSize()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []LevelUsage
	for _, lu := range byLevel {
		out = append(out, *lu)
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Set, out[i].Z) < fmt.Sprint(out[j].Set, out[j].Z) })
	return out
}

func sortedUsage(t *testing.T, s *Badger) []LevelUsage {
	t.Helper()
	u, recounting, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if recounting {
		t.Fatal("Usage says a recount runs")
	}
	sort.Slice(u, func(i, j int) bool { return fmt.Sprint(u[i].Set, u[i].Z) < fmt.Sprint(u[j].Set, u[j].Z) })
	return u
}

// waitRecount waits for the recount that turning usage on started; the
// deadline only keeps a broken recount from hanging the suite.
func waitRecount(t *testing.T, s *Badger) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, recounting, err := s.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if !recounting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the recount did not finish within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func checkUsage(t *testing.T, s *Badger, when string) {
	t.Helper()
	got, want := sortedUsage(t, s), scanUsage(t, s)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: usage records\n%v\nbut the tiles hold\n%v", when, got, want)
	}
}

// The size a Put counts for a new tile is the one Badger reports for it
// once stored, whether the value is inline or in the value log, for any
// key and value length.
func TestUsageValueSize(t *testing.T) {
	s := openUsage(t, t.TempDir())
	sizes := []int{0, 1, 494, 495, 496, 600, 16383 - headerLen, 16384 - headerLen, 16385, 70000, 2_097_151 - headerLen, 2_097_152}
	for _, layerLen := range []int{1, 60, 110, 130, 300} {
		set := Set{Layer: string(bytes.Repeat([]byte{'L'}, layerLen)), Gridset: "g", Format: "png", Params: "p"}
		for i, n := range sizes {
			data := make([]byte, n)
			if err := s.Put([]Entry{{Key: Key{Set: set, Z: 1, X: int64(i), Y: 0}, Data: data}}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkUsage(t, s, "tiles of every size")
}

// Every write changes the records exactly as it changes the tiles:
// random stores, replacements, range and set deletions, truncations,
// folds and reopenings, checked against a count of the tiles after each.
func TestUsageFollowsEveryWrite(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			smallChunks(t, 7) // several delete transactions per deletion
			dir := t.TempDir()
			s := openUsage(t, dir)
			rng := rand.New(rand.NewPCG(seed, 1))
			sets := []Set{
				{Layer: "a", Gridset: "g", Format: "png", Params: "p"},
				{Layer: "a", Gridset: "g", Format: "png", Params: "q"},
				{Layer: "b", Gridset: "g", Format: "jpeg", Params: "p"},
			}
			for step := range 120 {
				set := sets[rng.IntN(len(sets))]
				z := rng.IntN(3)
				var what string
				switch op := rng.IntN(20); {
				case op < 12:
					n := 1 + rng.IntN(16)
					var batch []Entry
					for range n {
						// 200–3000 bytes: both inline and value-log tiles,
						// often replacing one already there.
						data := make([]byte, 200+rng.IntN(2800))
						batch = append(batch, Entry{Key: Key{Set: set, Z: z, X: int64(rng.IntN(6)), Y: int64(rng.IntN(6))}, Data: data})
					}
					if err := s.Put(batch, time.Now()); err != nil {
						t.Fatal(err)
					}
					what = fmt.Sprintf("put %d tiles", n)
				case op < 15:
					r := gridset.Range{MinX: int64(rng.IntN(6)), MinY: int64(rng.IntN(6))}
					r.MaxX, r.MaxY = r.MinX+int64(rng.IntN(4)), r.MinY+int64(rng.IntN(4))
					if _, err := s.DeleteRange(set, z, r, nil); err != nil {
						t.Fatal(err)
					}
					what = fmt.Sprintf("delete range %v", r)
				case op < 16:
					if _, err := s.DeleteSet(set); err != nil {
						t.Fatal(err)
					}
					what = "delete set"
				case op < 17:
					if err := s.TruncateLayerWait(set.Layer); err != nil {
						t.Fatal(err)
					}
					what = "truncate layer"
				case op < 19:
					if err := s.foldUsage(); err != nil {
						t.Fatal(err)
					}
					what = "fold"
				default:
					s.Release()
					s = openUsage(t, dir)
					what = "reopen"
				}
				checkUsage(t, s, fmt.Sprintf("step %d (%s)", step, what))
			}
		})
	}
}

// Writers replacing and deleting the same tiles at once, and the fold
// running beside them, leave the records equal to the tiles: a Put reads
// what it replaces in its own transaction, so two Puts of one tile
// conflict and the later one counts again.
func TestUsageConcurrentWrites(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		s := openUsage(t, dir)
		set := Set{Layer: "c", Gridset: "g", Format: "png", Params: "p"}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range 300 {
					if w == 5 {
						r := gridset.Range{MinX: int64(rng.IntN(4)), MinY: int64(rng.IntN(4))}
						r.MaxX, r.MaxY = r.MinX+1, r.MinY+1
						if _, err := s.DeleteRange(set, 2, r, nil); err != nil {
							errs <- err
							return
						}
						continue
					}
					var batch []Entry
					for i := range 4 {
						batch = append(batch, Entry{Key: Key{Set: set, Z: 2, X: int64(rng.IntN(4)), Y: int64(i)},
							Data: make([]byte, 300+rng.IntN(1500))})
					}
					if err := s.Put(batch, time.Now()); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		stop, folded := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(folded)
			for {
				select {
				case <-stop:
					return
				default:
					s.foldUsage()
				}
			}
		}()
		wg.Wait()
		close(stop)
		<-folded
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		checkUsage(t, s, fmt.Sprint("round ", round))
		s.Release()
	}
}

// Opened with usage after writes it did not count, the store recounts;
// opened without usage after counting, it forgets that the records could
// be trusted, and the next opening with usage recounts again.
func TestUsageRecountedWhenTurnedOn(t *testing.T) {
	dir := t.TempDir()
	set := Set{Layer: "r", Gridset: "g", Format: "png", Params: "p"}
	fillSized := func(s *Badger, n int) {
		for i := range n {
			if err := s.Put([]Entry{{Key: Key{Set: set, Z: 3, X: int64(i), Y: 0}, Data: make([]byte, 100+i)}}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := openT(t, dir) // without usage
	if _, _, err := s.Usage(); err != ErrUsageOff {
		t.Fatalf("Usage without accounting: %v, want ErrUsageOff", err)
	}
	fillSized(s, 40)
	s.Release()

	s = openUsage(t, dir)
	waitRecount(t, s)
	checkUsage(t, s, "after the recount")
	fillSized(s, 60) // 20 more, 40 replaced
	checkUsage(t, s, "counted writes after the recount")
	s.Release()

	s = openT(t, dir) // without usage: writes not counted
	fillSized(s, 90)
	s.Release()
	s = openUsage(t, dir)
	waitRecount(t, s)
	checkUsage(t, s, "after a spell without usage")
}

// A child process stores, replaces and deletes tiles until it is killed
// with SIGKILL at a random moment; the records, read as soon as the store
// opens again, equal the tiles, ten times over.
func TestUsageAfterKill9(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	for kill := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUsageKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TILECACHE_USAGE_CHILD="+dir, fmt.Sprint("TILECACHE_USAGE_SEED=", kill))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: the child ended by itself (%v):\n%s", kill, err, out.String())
		}
		s := openUsage(t, dir)
		checkUsage(t, s, fmt.Sprint("after kill ", kill))
		s.Release()
	}
}

// TestUsageKillChild is the process TestUsageAfterKill9 kills; without
// its environment variable it returns at once.
func TestUsageKillChild(t *testing.T) {
	dir := os.Getenv("TILECACHE_USAGE_CHILD")
	if dir == "" {
		return
	}
	var seed uint64
	fmt.Sscan(os.Getenv("TILECACHE_USAGE_SEED"), &seed)
	s, err := Open(dir, Options{Usage: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	set := Set{Layer: "k", Gridset: "g", Format: "png", Params: "p"}
	for {
		z := rng.IntN(3)
		if rng.IntN(8) == 0 {
			r := gridset.Range{MinX: int64(rng.IntN(16)), MinY: int64(rng.IntN(16))}
			r.MaxX, r.MaxY = r.MinX+3, r.MinY+3
			if _, err := s.DeleteRange(set, z, r, nil); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var batch []Entry
		for range 16 {
			batch = append(batch, Entry{Key: Key{Set: set, Z: z, X: int64(rng.IntN(16)), Y: int64(rng.IntN(16))},
				Data: make([]byte, 200+rng.IntN(3000))})
		}
		if err := s.Put(batch, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkPutMetatile stores 16-tile metatiles of 20 KB tiles, new and
// replacing (a reseed), with usage accounting off and on: what the
// accounting costs a seed.
func BenchmarkPutMetatile(b *testing.B) {
	for _, usage := range []bool{false, true} {
		for _, reseed := range []bool{false, true} {
			b.Run(fmt.Sprintf("usage=%v/reseed=%v", usage, reseed), func(b *testing.B) {
				s, err := Open(b.TempDir(), Options{Usage: usage})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Release()
				set := Set{Layer: "l", Gridset: "EPSG:3857", Format: "image/png", Params: "p"}
				data := make([]byte, 20_000)
				batch := make([]Entry, 16)
				put := func(i int) {
					for j := range batch {
						batch[j] = Entry{Key: Key{Set: set, Z: 14, X: int64(i%1000*4 + j%4), Y: int64(i/1000*4 + j/4)}, Data: data}
					}
					if err := s.Put(batch, time.Now()); err != nil {
						b.Fatal(err)
					}
				}
				if reseed {
					for i := range b.N {
						put(i)
					}
				}
				b.ResetTimer()
				for i := range b.N {
					put(i)
				}
			})
		}
	}
}

// A chunk of deletions larger than one Badger transaction holds is split
// into several, each with its own delta records.
func TestUsageDeletesSplitLargeChunks(t *testing.T) {
	smallChunks(t, 1_000_000) // one chunk for the whole range
	s := openUsage(t, t.TempDir())
	set := Set{Layer: "big", Gridset: "g", Format: "png", Params: "p"}
	fill(t, s, set, 12, 0, 0, 200, 200, 100) // 40,000 tiles: a few MB of deletions
	checkUsage(t, s, "after storing")
	n, err := s.DeleteRange(set, 12, gridset.Range{MaxX: 199, MaxY: 199}, nil)
	if err != nil || n != 40_000 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	checkUsage(t, s, "after deleting")
	if u := sortedUsage(t, s); len(u) != 0 {
		t.Fatalf("usage after deleting every tile: %v", u)
	}
}

// A store with a tile TTL (a local tier) counts what it writes exactly,
// expiry included in the sizes; tiles that expire leave without a write,
// and the periodic recount brings the figures back to what is there.
func TestUsageWithTileTTL(t *testing.T) {
	old := ttlRecountEvery
	ttlRecountEvery = time.Second
	defer func() { ttlRecountEvery = old }()
	s := openWith(t, t.TempDir(), Options{Usage: true, TileTTL: 2 * time.Second})
	set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
	for i, n := range []int{10, 494, 495, 600, 20000, 70000} {
		if err := s.Put([]Entry{{Key: Key{Set: set, Z: 3, X: int64(i), Y: 1}, Data: make([]byte, n)}}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	checkUsage(t, s, "tiles with a TTL")
	if u := scanUsage(t, s); len(u) != 1 || u[0].Tiles != 6 {
		t.Fatalf("stored: %v", u)
	}
	// Expired: the scan sees nothing; the records follow within a recount.
	deadline := time.Now().Add(15 * time.Second)
	for {
		u, _, err := s.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if len(u) == 0 && len(scanUsage(t, s)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the tiles expired, usage still says %v", u)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
