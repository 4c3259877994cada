package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

func openTracked(tb testing.TB, dir string) *Badger {
	tb.Helper()
	s := openWith(tb, dir, Options{Usage: true})
	if err := s.SetTracking(true); err != nil {
		tb.Fatal(err)
	}
	return s
}

func pagesOf(t *testing.T, s *Badger, layer string) map[Page]PageStat {
	t.Helper()
	out := map[Page]PageStat{}
	if err := s.Pages(layer, func(ps PageStat) error { out[ps.Page] = ps; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every Put leaves a record for each page it wrote into, stamped with its
// time; hits add up in memory at once, reach the records on a flush, and
// survive a reopen.
func TestAccessRecordsFollowPutsAndHits(t *testing.T) {
	dir := t.TempDir()
	s := openTracked(t, dir)
	set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
	at := time.Unix(1_700_000_000, 0)
	// A 4×4 metatile inside page (0,0), and one straddling pages (1,1),
	// (2,1), (1,2), (2,2).
	var meta, straddle []Entry
	for dx := range int64(4) {
		for dy := range int64(4) {
			meta = append(meta, Entry{Key: Key{Set: set, Z: 5, X: 4 + dx, Y: 8 + dy}, Data: []byte("x")})
			straddle = append(straddle, Entry{Key: Key{Set: set, Z: 5, X: 30 + dx, Y: 30 + dy}, Data: []byte("y")})
		}
	}
	if err := s.Put(meta, at); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(straddle, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	pages := pagesOf(t, s, "l")
	if len(pages) != 5 {
		t.Fatalf("%d page records, want 5: %v", len(pages), pages)
	}
	p0 := Page{set, 5, 0, 0}
	if ps := pages[p0]; ps.Last != at.Unix() || ps.Created != at.Unix() || ps.Hits != 0 {
		t.Fatalf("page (0,0): %+v", ps)
	}
	for _, p := range []Page{{set, 5, 1, 1}, {set, 5, 2, 1}, {set, 5, 1, 2}, {set, 5, 2, 2}} {
		if ps, ok := pages[p]; !ok || ps.Last != at.Add(time.Hour).Unix() {
			t.Fatalf("page %v: %+v", p, ps)
		}
	}
	// Hits: counted at once (in memory), misses not at all.
	for range 7 {
		if _, err := s.Get(context.Background(), meta[3].Key, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(context.Background(), Key{Set: set, Z: 5, X: 0, Y: 0}, nil); err != ErrNotFound {
		t.Fatal(err)
	}
	if ps := pagesOf(t, s, "")[p0]; ps.Hits != 7 || ps.Last <= at.Unix() {
		t.Fatalf("after 7 hits: %+v", ps)
	}
	if err := s.FlushAccess(); err != nil {
		t.Fatal(err)
	}
	if ps := pagesOf(t, s, "l")[p0]; ps.Hits != 7 {
		t.Fatalf("after the flush: %+v", ps)
	}
	// A second store of the page keeps its hits and first store.
	if err := s.Put(meta[:1], at.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	s.Get(context.Background(), meta[0].Key, nil)
	release(t, s) // flushes the last hit at close
	s = openTracked(t, dir)
	if ps := pagesOf(t, s, "l")[p0]; ps.Hits != 8 || ps.Created != at.Unix() || ps.Last < at.Add(2*time.Hour).Unix() {
		t.Fatalf("after a reopen: %+v", ps)
	}
	// A truncated layer's records go with its tiles.
	if err := s.TruncateLayerWait("l"); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, s, []byte{tagAccess}); n != 0 {
		t.Fatalf("%d page records left after the truncation", n)
	}
}

// Without tracking, the hit path neither counts nor allocates; with it, a
// hit on a page already counted allocates nothing either.
func TestTrackingAddsNoAllocationPerHit(t *testing.T) {
	for _, tracked := range []bool{false, true} {
		s := openWith(t, t.TempDir(), Options{Usage: true})
		if err := s.SetTracking(tracked); err != nil {
			t.Fatal(err)
		}
		k := Key{Set: Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}, Z: 9, X: 100, Y: 200}
		if err := s.Put([]Entry{{Key: k, Data: make([]byte, 2000)}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		// A later write in both stores: Badger's read of a key committed
		// before the last commit searches its levels too, and allocates
		// once more for that (whether tracking is on or not).
		other := k
		other.X++
		if err := s.Put([]Entry{{Key: other, Data: make([]byte, 2000)}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 0, 4096)
		get := func() {
			if _, err := s.Get(context.Background(), k, dst); err != nil {
				t.Fatal(err)
			}
		}
		get()
		base := testing.AllocsPerRun(200, get)
		if tracked && base != allocsUntracked {
			t.Fatalf("a tracked hit allocates %v times, an untracked one %v", base, allocsUntracked)
		}
		allocsUntracked = base
		if a := s.access.Load(); tracked != (a != nil) {
			t.Fatalf("tracking %v but tracker %v", tracked, a)
		}
	}
}

var allocsUntracked float64

// Evicting a page deletes its tiles and nothing else, in one transaction
// with its usage and its record; a page used after it was chosen stays.
func TestEvictPage(t *testing.T) {
	s := openTracked(t, t.TempDir())
	set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
	// Pages (0,0) and (1,0) of level 6, full, and a tile of level 5 at
	// the same cells.
	fill(t, s, set, 6, 0, 0, 32, 16, 700)
	fill(t, s, set, 5, 0, 0, 1, 1, 700)
	checkUsage(t, s, "filled")
	p := Page{set, 6, 1, 0}
	last := pagesOf(t, s, "l")[p].Last
	ev, err := s.EvictPage(p, last)
	if err != nil || ev.Skipped || ev.Tiles != 256 || ev.Bytes <= 256*700 {
		t.Fatalf("EvictPage: %+v %v", ev, err)
	}
	checkUsage(t, s, "evicted")
	if n := count(t, s, set, 6, gridset.Range{MinX: 16, MaxX: 31, MaxY: 15}); n != 0 {
		t.Fatalf("%d tiles left in the evicted page", n)
	}
	if n := count(t, s, set, 6, gridset.Range{MaxX: 15, MaxY: 15}); n != 256 {
		t.Fatalf("the neighbouring page holds %d tiles, want 256", n)
	}
	if !present(t, s, Key{Set: set, Z: 5}) {
		t.Fatal("a tile of another level went")
	}
	if _, ok := pagesOf(t, s, "l")[p]; ok {
		t.Fatal("the evicted page's record stayed")
	}
	ev2, _ := s.Evicted()
	if ev2["l"] != [2]int64{256, ev.Bytes} {
		t.Fatalf("evicted totals %v, want 256 tiles and %d bytes", ev2, ev.Bytes)
	}
	// Chosen, then hit: it stays.
	p0 := Page{set, 6, 0, 0}
	last0 := pagesOf(t, s, "l")[p0].Last
	s.access.Load().now.Add(2) // two seconds later
	s.Get(context.Background(), Key{Set: set, Z: 6, X: 3, Y: 3}, nil)
	if ev, err := s.EvictPage(p0, last0); err != nil || !ev.Skipped {
		t.Fatalf("a page hit after it was chosen: %+v %v", ev, err)
	}
	if n := count(t, s, set, 6, gridset.Range{MaxX: 15, MaxY: 15}); n != 256 {
		t.Fatalf("the page hit after it was chosen holds %d tiles", n)
	}
}

// Random stores, hits, evictions, range deletions and truncations, with
// writers racing the evictions: the usage records equal a recount of the
// tiles after every step, and every page holding tiles has a record.
func TestAccountingWithEvictions(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			dir := t.TempDir()
			s := openTracked(t, dir)
			rng := rand.New(rand.NewPCG(seed, 7))
			sets := []Set{{Layer: "a", Gridset: "g", Format: "png", Params: "p"}, {Layer: "b", Gridset: "g", Format: "png", Params: "p"}}
			for step := range 150 {
				set := sets[rng.IntN(2)]
				z := 3 + rng.IntN(2)
				var what string
				switch op := rng.IntN(20); {
				case op < 9:
					x0, y0 := int64(rng.IntN(12))*4, int64(rng.IntN(12))*4
					var batch []Entry
					for i := range 16 {
						batch = append(batch, Entry{Key: Key{Set: set, Z: z, X: x0 + int64(i%4), Y: y0 + int64(i/4)}, Data: make([]byte, 100+rng.IntN(1500))})
					}
					// A concurrent eviction of a random page.
					done := make(chan error, 1)
					go func() {
						pages := []PageStat{}
						s.Pages("", func(ps PageStat) error { pages = append(pages, ps); return nil })
						if len(pages) == 0 {
							done <- nil
							return
						}
						ps := pages[rng.IntN(len(pages))]
						_, err := s.EvictPage(ps.Page, ps.Last)
						done <- err
					}()
					if err := s.Put(batch, time.Now()); err != nil {
						t.Fatal(err)
					}
					if err := <-done; err != nil {
						t.Fatal(err)
					}
					what = "put racing an eviction"
				case op < 12:
					for range 5 {
						s.Get(context.Background(), Key{Set: set, Z: z, X: int64(rng.IntN(48)), Y: int64(rng.IntN(48))}, nil)
					}
					if rng.IntN(2) == 0 {
						if err := s.FlushAccess(); err != nil {
							t.Fatal(err)
						}
					}
					what = "hits"
				case op < 16:
					var pages []PageStat
					s.Pages(set.Layer, func(ps PageStat) error { pages = append(pages, ps); return nil })
					for _, ps := range pages {
						if rng.IntN(3) == 0 {
							if _, err := s.EvictPage(ps.Page, ps.Last+1); err != nil {
								t.Fatal(err)
							}
						}
					}
					what = "evictions"
				case op < 18:
					r := gridset.Range{MinX: int64(rng.IntN(48)), MinY: int64(rng.IntN(48))}
					r.MaxX, r.MaxY = r.MinX+int64(rng.IntN(20)), r.MinY+int64(rng.IntN(20))
					if _, err := s.DeleteRange(set, z, r, nil); err != nil {
						t.Fatal(err)
					}
					what = "delete range"
				case op < 19:
					if err := s.TruncateLayerWait(set.Layer); err != nil {
						t.Fatal(err)
					}
					what = "truncate"
				default:
					s.Release()
					s = openTracked(t, dir)
					what = "reopen"
				}
				when := fmt.Sprintf("step %d (%s)", step, what)
				checkUsage(t, s, when)
				checkEveryPageRecorded(t, s, when)
			}
		})
	}
}

// checkEveryPageRecorded: no tile of a current generation lies in a page
// without a record, so eviction can reach every tile.
func checkEveryPageRecorded(t *testing.T, s *Badger, when string) {
	t.Helper()
	pages := pagesOf(t, s, "")
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tagTile}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			level := usageLevelOf(k)
			set, gen, z, _ := parseLevel(level)
			if gen != s.Generation(set.Layer) {
				continue
			}
			x, y, _ := cellOf(k, len(level))
			if _, ok := pages[Page{set, z, x >> PageShift, y >> PageShift}]; !ok {
				return fmt.Errorf("tile %v z%d (%d,%d) has no page record", set, z, x, y)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// Tiles stored while tracking was off get page records (with no use, so
// they go first) in the background once it is turned on, and only then
// does the marker vouch for the records.
func TestTrackingIndexesUntrackedTiles(t *testing.T) {
	dir := t.TempDir()
	s := openWith(t, dir, Options{Usage: true})
	set := Set{Layer: "old", Gridset: "g", Format: "png", Params: "p"}
	fill(t, s, set, 7, 0, 0, 40, 20, 0) // pages x 0..2, y 0..1
	if err := s.SetTracking(true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Indexing() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Indexing() {
		t.Fatal("indexing never ended")
	}
	pages := pagesOf(t, s, "old")
	if len(pages) != 6 {
		t.Fatalf("%d pages indexed, want 6", len(pages))
	}
	for p, ps := range pages {
		if ps.Last != 0 || ps.Hits != 0 {
			t.Fatalf("indexed page %v: %+v, want no use", p, ps)
		}
	}
	checkEveryPageRecorded(t, s, "indexed")
	// Off and on again: the records are not vouched for any more.
	if err := s.SetTracking(false); err != nil {
		t.Fatal(err)
	}
	fill(t, s, set, 7, 100, 100, 1, 1, 0) // an untracked page
	if err := s.SetTracking(true); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for s.Indexing() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	checkEveryPageRecorded(t, s, "indexed again")
}

// BenchmarkGetTracking compares a hit with access tracking off and on,
// on stores that are otherwise the same (usage on in both): run both in
// one run and compare ns/op and allocs/op.
func BenchmarkGetTracking(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprint("tracking=", on), func(b *testing.B) {
			s := openWith(b, b.TempDir(), Options{Usage: true})
			if err := s.SetTracking(on); err != nil {
				b.Fatal(err)
			}
			benchmarkGet(b, s)
		})
	}
}
