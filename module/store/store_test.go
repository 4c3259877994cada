package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// ---- helpers ----

// openT opens a store in dir and releases it when the test ends (unless
// the test released it itself).
func openT(tb testing.TB, dir string) *Badger {
	tb.Helper()
	return openWith(tb, dir, Options{})
}

// openWith opens dir with opts, released at the end of the test unless
// the test closed it.
func openWith(tb testing.TB, dir string, opts Options) *Badger {
	tb.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if !s.closed.Load() {
			s.Release()
		}
	})
	return s
}

func release(tb testing.TB, s *Badger) {
	tb.Helper()
	if err := s.Release(); err != nil {
		tb.Fatal(err)
	}
	if !s.closed.Load() {
		tb.Fatal("store still open after its last Release")
	}
}

// fill stores one tile per cell of the w×h block at (x0, y0), level z, in
// batches small enough for one transaction; the image of each tile names it
// unless size > 0, in which case it is size random bytes.
func fill(tb testing.TB, s *Badger, set Set, z int, x0, y0, w, h int64, size int) int64 {
	tb.Helper()
	var batch []Entry
	at := time.Now()
	flush := func() {
		if err := s.Put(batch, at); err != nil {
			tb.Fatal(err)
		}
		batch = batch[:0]
	}
	for x := x0; x < x0+w; x++ {
		for y := y0; y < y0+h; y++ {
			batch = append(batch, Entry{Key: Key{Set: set, Z: z, X: x, Y: y}, Data: image(set, z, x, y, size)})
			if len(batch) == 1000 {
				flush()
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return w * h
}

func image(set Set, z int, x, y int64, size int) []byte {
	if size > 0 {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		return b
	}
	return fmt.Appendf(nil, "%v/%d/%d/%d", set, z, x, y)
}

// rawCount counts the keys under prefix, whatever their generation, with a
// key-only iterator: what is physically there, not what Get sees.
func rawCount(tb testing.TB, s *Badger, prefix []byte) int {
	tb.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func present(tb testing.TB, s *Badger, k Key) bool {
	tb.Helper()
	_, err := s.Get(context.Background(), k, nil)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrNotFound):
		return false
	}
	tb.Fatal(err)
	return false
}

func count(tb testing.TB, s *Badger, set Set, z int, r gridset.Range) int64 {
	tb.Helper()
	n, err := s.CountRange(set, z, r)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

var everything = gridset.Range{MinX: 0, MinY: 0, MaxX: MaxIndex, MaxY: MaxIndex}

// smallChunks makes deletions flush every few keys so that tests cross
// chunk boundaries, inside a column and between columns.
func smallChunks(t *testing.T, n int) {
	old := deleteChunk
	deleteChunk = n
	t.Cleanup(func() { deleteChunk = old })
}

// ---- key layout ----

func TestKeyLayout(t *testing.T) {
	k := Key{Set: Set{Layer: "roads", Gridset: "EPSG:3857", Format: "png", Params: "h1"}, Z: 5, X: 0x01020304, Y: 0x0a0b0c0d}
	gen := uint64(0x1112131415161718)
	want := []byte("troads\x00\x11\x12\x13\x14\x15\x16\x17\x18EPSG:3857\x00png\x00h1\x00\x05\x01\x02\x03\x04\x0a\x0b\x0c\x0d")
	got := tileKey(nil, &k, gen)
	if !bytes.Equal(got, want) {
		t.Fatalf("tileKey = %q, want %q", got, want)
	}
	if g := generationKey("roads"); !bytes.Equal(g, []byte("groads")) {
		t.Errorf("generationKey = %q", g)
	}
	if d := dropKey("roads", 7); !bytes.Equal(d, []byte("droads\x00\x00\x00\x00\x00\x00\x00\x00\x07")) {
		t.Errorf("dropKey = %q", d)
	}
	if l, g, ok := parseDropKey(dropKey("ro\xffads", 1<<40)); !ok || l != "ro\xffads" || g != 1<<40 {
		t.Errorf("parseDropKey(dropKey) = %q %d %v", l, g, ok)
	}

	// Each prefix is a prefix of the next, and all of the tile key.
	chain := [][]byte{
		layerPrefix(nil, k.Layer),
		generationPrefix(nil, k.Layer, gen),
		setPrefix(nil, k.Set, gen),
		zoomPrefix(nil, k.Set, gen, k.Z),
		columnPrefix(nil, k.Set, gen, k.Z, k.X),
		got,
	}
	for i := 1; i < len(chain); i++ {
		if !bytes.HasPrefix(chain[i], chain[i-1]) || len(chain[i]) <= len(chain[i-1]) {
			t.Errorf("prefix %d %q does not strictly nest in %d %q", i-1, chain[i-1], i, chain[i])
		}
	}

	// Layer "a" is not a prefix of layer "ab"'s keys, at any level, nor
	// set "g","f","p" of set "g","f","pq".
	ab := Key{Set: Set{Layer: "ab", Gridset: "g", Format: "f", Params: "p"}}
	if bytes.HasPrefix(tileKey(nil, &ab, 0), layerPrefix(nil, "a")) {
		t.Error(`layer "a" prefix matches layer "ab"`)
	}
	pq := Key{Set: Set{Layer: "a", Gridset: "g", Format: "f", Params: "pq"}}
	if bytes.HasPrefix(tileKey(nil, &pq, 0), setPrefix(nil, Set{Layer: "a", Gridset: "g", Format: "f", Params: "p"}, 0)) {
		t.Error(`params "p" prefix matches params "pq"`)
	}
	if bytes.HasPrefix(dropKey("ab", 0), []byte("da\x00")) {
		t.Error(`drop records of "a" match "ab"`)
	}

	// Byte order of keys is numeric order of (z, x, y), including values
	// that a little-endian or signed encoding would misorder.
	vals := []int64{0, 1, 255, 256, 65535, 65536, 1<<24 + 1, 1<<31 - 1, 1 << 31, MaxIndex}
	var keys []Key
	for _, z := range []int{0, 1, 17, 255} {
		for _, x := range vals {
			for _, y := range vals {
				keys = append(keys, Key{Set: k.Set, Z: z, X: x, Y: y})
			}
		}
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	byBytes := slices.Clone(keys)
	sort.Slice(byBytes, func(i, j int) bool {
		return bytes.Compare(tileKey(nil, &byBytes[i], 3), tileKey(nil, &byBytes[j], 3)) < 0
	})
	byNum := slices.Clone(keys)
	sort.Slice(byNum, func(i, j int) bool {
		a, b := byNum[i], byNum[j]
		if a.Z != b.Z {
			return a.Z < b.Z
		}
		if a.X != b.X {
			return a.X < b.X
		}
		return a.Y < b.Y
	})
	if !slices.Equal(byBytes, byNum) {
		t.Error("byte order of tile keys differs from numeric order of (z, x, y)")
	}
}

// ---- basic store ----

func TestPutGetHas(t *testing.T) {
	s := openT(t, t.TempDir())
	set := Set{Layer: "l", Gridset: "g", Format: "image/png", Params: "p"}
	at := time.Unix(1_700_000_000, 123_456_789)
	data := bytes.Repeat([]byte("tile"), 300)
	k := Key{Set: set, Z: 3, X: 4, Y: 5}
	if err := s.Put([]Entry{{Key: k, Data: data}, {Key: Key{Set: set, Z: 3, X: 4, Y: 6}, Data: []byte("x")}}, at); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 10)
	tile, err := s.Get(context.Background(), k, dst)
	if err != nil {
		t.Fatal(err)
	}
	if tile.StoredAt.UnixNano() != at.UnixNano() {
		t.Errorf("StoredAt = %v, want %v", tile.StoredAt, at)
	}
	if tile.ETag != ETagOf(data) || tile.ETag == ETagOf([]byte("x")) {
		t.Errorf("ETag = %x, want %x", tile.ETag, ETagOf(data))
	}
	if !bytes.Equal(tile.Data, data) {
		t.Error("Data differs")
	}

	absent := Key{Set: set, Z: 3, X: 5, Y: 4}
	if _, err := s.Get(context.Background(), absent, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(absent) = %v, want ErrNotFound", err)
	}
	other := k
	other.Params = "q"
	if _, err := s.Get(context.Background(), other, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(other params) = %v, want ErrNotFound", err)
	}

	has, err := s.Has([]Key{k, absent, k}, at)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(has, []bool{true, false, true}) {
		t.Errorf("Has(notBefore = stored) = %v", has)
	}
	has, _ = s.Has([]Key{k}, at.Add(time.Nanosecond))
	if has[0] {
		t.Error("Has reports a tile older than notBefore")
	}

	for _, bad := range []string{"", "a\x00b", "\x00"} {
		if !errors.Is(CheckName(bad), ErrBadName) {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
	if CheckName("EPSG:4326") != nil {
		t.Error("CheckName rejects a good name")
	}
}

func TestPool(t *testing.T) {
	dir := t.TempDir()
	before := Opens()
	a, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir+"/.", Options{}) // same directory, spelt differently
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("second Open of the same directory returned another store")
	}
	if n := Opens() - before; n != 1 {
		t.Fatalf("Opens grew by %d, want 1", n)
	}
	k := Key{Set: Set{Layer: "l", Gridset: "g", Format: "f", Params: "p"}, Z: 1, X: 1, Y: 1}
	if err := a.Put([]Entry{{Key: k, Data: []byte("durable")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if a.closed.Load() {
		t.Fatal("first Release closed a store still in use")
	}
	if !present(t, b, k) {
		t.Fatal("store unusable after the first of two Releases")
	}
	release(t, b)

	c := openT(t, dir)
	if c == a {
		t.Fatal("Open after the last Release returned the closed store")
	}
	if n := Opens() - before; n != 2 {
		t.Fatalf("Opens grew by %d after reopening, want 2", n)
	}
	tile, err := c.Get(context.Background(), k, nil)
	if err != nil || string(tile.Data) != "durable" {
		t.Fatalf("after reopening: %q, %v", tile.Data, err)
	}
}

// ---- truncation ----

func TestTruncateLayer(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	a1 := Set{Layer: "a", Gridset: "g", Format: "png", Params: "p"}
	a2 := Set{Layer: "a", Gridset: "g2", Format: "jpeg", Params: "q"}
	b := Set{Layer: "ab", Gridset: "g", Format: "png", Params: "p"} // "a" is a prefix of its name
	fill(t, s, a1, 4, 0, 0, 10, 10, 0)
	fill(t, s, a2, 7, 5, 5, 10, 10, 0)
	fill(t, s, b, 4, 0, 0, 10, 10, 0)

	s.pauseReclaim.Store(true) // so that the old tiles are still there below
	if err := s.TruncateLayer("a"); err != nil {
		t.Fatal(err)
	}
	if g := s.Generation("a"); g != 1 {
		t.Fatalf("generation %d after one truncation", g)
	}
	if rawCount(t, s, generationPrefix(nil, "a", 0)) != 200 {
		t.Fatal("test broken: the old generation should still be on disk")
	}
	// Gone at once, through every read path.
	for x := int64(0); x < 10; x++ {
		for y := int64(0); y < 10; y++ {
			if present(t, s, Key{Set: a1, Z: 4, X: x, Y: y}) {
				t.Fatalf("tile %d/%d of the truncated layer still served", x, y)
			}
			if !present(t, s, Key{Set: b, Z: 4, X: x, Y: y}) {
				t.Fatalf("tile %d/%d of the other layer lost", x, y)
			}
		}
	}
	if has, _ := s.Has([]Key{{Set: a2, Z: 7, X: 5, Y: 5}}, time.Time{}); has[0] {
		t.Error("Has sees a truncated tile")
	}
	if n := count(t, s, a1, 4, everything) + count(t, s, a2, 7, everything); n != 0 {
		t.Errorf("CountRange sees %d truncated tiles", n)
	}
	if n, err := s.DeleteSet(a1); err != nil || n != 0 {
		t.Errorf("DeleteSet after truncation deleted %d (%v), want 0", n, err)
	}
	if n, err := s.DeleteRange(a2, 7, everything, nil); err != nil || n != 0 {
		t.Errorf("DeleteRange after truncation deleted %d (%v), want 0", n, err)
	}

	// New tiles go to the new generation and are visible.
	fresh := Key{Set: a1, Z: 4, X: 3, Y: 3}
	if err := s.Put([]Entry{{Key: fresh, Data: []byte("new")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if tile, err := s.Get(context.Background(), fresh, nil); err != nil || string(tile.Data) != "new" {
		t.Fatalf("new tile after truncation: %q, %v", tile.Data, err)
	}

	// The background reclaim removes every key of the old generation and
	// nothing else.
	s.pauseReclaim.Store(false)
	s.wakeReclaimer()
	if err := s.waitReclaimed(); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, s, generationPrefix(nil, "a", 0)); n != 0 {
		t.Errorf("%d keys of the old generation remain", n)
	}
	if n := rawCount(t, s, layerPrefix(nil, "a")); n != 1 {
		t.Errorf("layer a holds %d keys, want the 1 new one", n)
	}
	if n := rawCount(t, s, layerPrefix(nil, "ab")); n != 100 {
		t.Errorf("layer ab holds %d keys, want 100", n)
	}
	if n := rawCount(t, s, []byte{tagDrop}); n != 0 {
		t.Errorf("%d drop records remain", n)
	}

	// TruncateLayerWait: returns with the space reclaimed.
	fill(t, s, a2, 9, 0, 0, 20, 20, 0)
	if err := s.TruncateLayerWait("a"); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, s, layerPrefix(nil, "a")); n != 0 {
		t.Errorf("after TruncateLayerWait, layer a holds %d keys", n)
	}
	if err := s.TruncateLayer("a\x00b"); !errors.Is(err, ErrBadName) {
		t.Errorf("TruncateLayer(bad name) = %v", err)
	}

	// The generation survives a close.
	if err := s.Put([]Entry{{Key: fresh, Data: []byte("newer")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	release(t, s)
	if err := s.TruncateLayer("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("TruncateLayer on a closed store = %v", err)
	}
	s = openT(t, dir)
	if g := s.Generation("a"); g != 2 {
		t.Errorf("generation %d after reopening, want 2", g)
	}
	if tile, err := s.Get(context.Background(), fresh, nil); err != nil || string(tile.Data) != "newer" {
		t.Errorf("after reopening: %q, %v", tile.Data, err)
	}
	if present(t, s, Key{Set: a1, Z: 4, X: 4, Y: 4}) {
		t.Error("a truncated tile is back after reopening")
	}
}

// A crash between the truncation and the end of its reclaim leaves the
// drop record and old tiles; the next Open finishes the job.
func TestTruncateResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	a := Set{Layer: "a", Gridset: "g", Format: "png", Params: "p"}
	b := Set{Layer: "b", Gridset: "g", Format: "png", Params: "p"}
	fill(t, s, b, 2, 0, 0, 3, 3, 0)
	// What TruncateLayer commits, plus old-generation tiles, written behind
	// the store's back as if it had crashed straight after.
	err := s.db.Update(func(txn *badger.Txn) error {
		for i := range int64(300) {
			k := Key{Set: a, Z: 8, X: i, Y: i}
			if err := txn.Set(tileKey(nil, &k, 0), encodeValue([]byte("old"), time.Now())); err != nil {
				return err
			}
		}
		k := Key{Set: a, Z: 8, X: 1, Y: 1}
		if err := txn.Set(tileKey(nil, &k, 1), encodeValue([]byte("current"), time.Now())); err != nil {
			return err
		}
		if err := txn.Set(generationKey("a"), binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			return err
		}
		if err := txn.Set(dropKey("a", 0), nil); err != nil {
			return err
		}
		// A bogus record naming b's live generation must not destroy it.
		return txn.Set(dropKey("b", 0), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	release(t, s)

	s = openT(t, dir)
	if g := s.Generation("a"); g != 1 {
		t.Fatalf("generation %d, want 1", g)
	}
	if err := s.waitReclaimed(); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, s, generationPrefix(nil, "a", 0)); n != 0 {
		t.Errorf("%d old-generation keys left after the resumed reclaim", n)
	}
	if tile, err := s.Get(context.Background(), Key{Set: a, Z: 8, X: 1, Y: 1}, nil); err != nil || string(tile.Data) != "current" {
		t.Errorf("current generation's tile: %q, %v", tile.Data, err)
	}
	if n := count(t, s, b, 2, everything); n != 9 {
		t.Errorf("layer b holds %d tiles after a bogus drop record, want 9", n)
	}
	if n := rawCount(t, s, []byte{tagDrop}); n != 0 {
		t.Errorf("%d drop records remain", n)
	}
}

// Destruct stops a reclaim in progress without waiting for it to finish;
// the next Open completes it.
func TestTruncateStopsOnClose(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	a := Set{Layer: "a", Gridset: "g", Format: "png", Params: "p"}
	fill(t, s, a, 10, 0, 0, 100, 100, 0)
	if err := s.TruncateLayer("a"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		s.Release()
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("Release hangs while a reclaim runs")
	}
	s = openT(t, dir)
	if err := s.waitReclaimed(); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, s, layerPrefix(nil, "a")); n != 0 {
		t.Errorf("%d keys of the truncated layer left", n)
	}
}

// ---- deletions ----

func TestDeleteRange(t *testing.T) {
	for _, chunk := range []int{10_000, 7} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			smallChunks(t, chunk)
			testDeleteRange(t)
		})
	}
}

func testDeleteRange(t *testing.T) {
	s := openT(t, t.TempDir())
	set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
	others := []Set{
		{Layer: "l", Gridset: "g", Format: "png", Params: "p2"},
		{Layer: "l", Gridset: "g", Format: "jpeg", Params: "p"},
		{Layer: "l", Gridset: "g2", Format: "png", Params: "p"},
		{Layer: "l2", Gridset: "g", Format: "png", Params: "p"},
	}
	// A 20×20 block at z=10, the same cells at z=9 and z=11 and in the
	// other sets.
	block := gridset.Range{MinX: 100, MinY: 200, MaxX: 119, MaxY: 219}
	fillR := func(set Set, z int) {
		fill(t, s, set, z, block.MinX, block.MinY, block.MaxX-block.MinX+1, block.MaxY-block.MinY+1, 0)
	}
	for _, z := range []int{9, 10, 11} {
		fillR(set, z)
	}
	for _, o := range others {
		fillR(o, 10)
	}

	r := gridset.Range{MinX: 105, MinY: 205, MaxX: 110, MaxY: 212}
	n, err := s.DeleteRange(set, 10, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6*8 {
		t.Errorf("deleted %d, want 48", n)
	}
	for x := block.MinX; x <= block.MaxX; x++ {
		for y := block.MinY; y <= block.MaxY; y++ {
			if got, want := present(t, s, Key{Set: set, Z: 10, X: x, Y: y}), !r.Contains(x, y); got != want {
				t.Fatalf("tile 10/%d/%d present=%v, want %v", x, y, got, want)
			}
		}
	}
	for _, z := range []int{9, 11} {
		if c := count(t, s, set, z, everything); c != 400 {
			t.Errorf("zoom %d lost tiles: %d left", z, c)
		}
	}
	for _, o := range others {
		if c := count(t, s, o, 10, everything); c != 400 {
			t.Errorf("set %v lost tiles: %d left", o, c)
		}
	}
	if c := count(t, s, set, 10, everything); c != 400-48 {
		t.Errorf("CountRange = %d, want 352", c)
	}
	if c := count(t, s, set, 10, r); c != 0 {
		t.Errorf("CountRange(deleted rectangle) = %d", c)
	}

	// Again: nothing left there. Overlapping: only what is present counts.
	if n, _ := s.DeleteRange(set, 10, r, nil); n != 0 {
		t.Errorf("deleting again deleted %d", n)
	}
	over := gridset.Range{MinX: 110, MinY: -5, MaxX: 1 << 40, MaxY: 205} // clipped to the key space
	want := count(t, s, set, 10, over)
	if want != 10*6-1 { // x 110..119, y 200..205, less (110,205)
		t.Fatalf("CountRange(over) = %d, want 59", want)
	}
	if n, err := s.DeleteRange(set, 10, over, nil); err != nil || n != want {
		t.Errorf("DeleteRange(over) = %d, %v; want %d", n, err, want)
	}

	// stop is polled before each column: stopping at the 4th poll leaves
	// three whole columns deleted and no error.
	polls := 0
	stop := func() bool { polls++; return polls > 3 }
	col := gridset.Range{MinX: 100, MinY: 213, MaxX: 104, MaxY: 219}
	n, err = s.DeleteRange(set, 10, col, stop)
	if err != nil || n != 3*7 {
		t.Errorf("stopped DeleteRange = %d, %v; want 21, nil", n, err)
	}
	if c := count(t, s, set, 10, col); c != 2*7 {
		t.Errorf("after a stopped DeleteRange %d tiles left in the range, want 14", c)
	}
	if n, _ := s.DeleteRange(set, 10, col, func() bool { return true }); n != 0 {
		t.Errorf("DeleteRange stopped at once deleted %d", n)
	}

	// Bad arguments.
	if _, err := s.DeleteRange(set, 256, r, nil); err == nil {
		t.Error("zoom 256 accepted")
	}
	if _, err := s.DeleteRange(Set{Layer: "l", Gridset: "g\x00png", Format: "p", Params: "x"}, 10, r, nil); err == nil {
		t.Error("a name with NUL accepted")
	}
	if n, err := s.DeleteRange(set, 10, gridset.Range{MinX: 119, MinY: 0, MaxX: 100, MaxY: 300}, nil); n != 0 || err != nil {
		t.Errorf("empty range: %d, %v", n, err)
	}
}

// CountRange and DeleteRange agree with a brute-force count on sparse data,
// which exercises skipping over empty columns.
func TestRangeRandom(t *testing.T) {
	smallChunks(t, 5)
	s := openT(t, t.TempDir())
	set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
	rng := rand.New(rand.NewPCG(1, 2))
	stored := map[[2]int64]bool{}
	var batch []Entry
	for range 600 {
		x, y := rng.Int64N(200), rng.Int64N(200)
		if rng.IntN(10) == 0 {
			x = MaxIndex - rng.Int64N(3) // the edge of the key space
		}
		stored[[2]int64{x, y}] = true
		batch = append(batch, Entry{Key: Key{Set: set, Z: 20, X: x, Y: y}, Data: []byte{1}})
	}
	if err := s.Put(batch, time.Now()); err != nil {
		t.Fatal(err)
	}
	fill(t, s, set, 19, 0, 0, 50, 50, 0)
	fill(t, s, set, 21, 0, 0, 50, 50, 0)
	brute := func(r gridset.Range) int64 {
		var n int64
		for c := range stored {
			if r.Contains(c[0], c[1]) {
				n++
			}
		}
		return n
	}
	for i := range 60 {
		x0, y0 := rng.Int64N(220)-10, rng.Int64N(220)-10
		r := gridset.Range{MinX: x0, MinY: y0, MaxX: x0 + rng.Int64N(80), MaxY: y0 + rng.Int64N(80)}
		if i%10 == 0 {
			r.MaxX = MaxIndex
		}
		want := brute(r)
		if got := count(t, s, set, 20, r); got != want {
			t.Fatalf("CountRange(%+v) = %d, want %d", r, got, want)
		}
		if i%3 == 0 {
			got, err := s.DeleteRange(set, 20, r, nil)
			if err != nil || got != want {
				t.Fatalf("DeleteRange(%+v) = %d, %v; want %d", r, got, err, want)
			}
			for c := range stored {
				if r.Contains(c[0], c[1]) {
					delete(stored, c)
				}
			}
		}
	}
	if got := count(t, s, set, 20, everything); got != int64(len(stored)) {
		t.Errorf("%d tiles left, want %d", got, len(stored))
	}
	for c := range stored {
		if !present(t, s, Key{Set: set, Z: 20, X: c[0], Y: c[1]}) {
			t.Fatalf("tile %v lost", c)
		}
	}
	if count(t, s, set, 19, everything) != 2500 || count(t, s, set, 21, everything) != 2500 {
		t.Error("neighbouring zoom levels lost tiles")
	}
}

func TestDeleteSet(t *testing.T) {
	smallChunks(t, 7)
	s := openT(t, t.TempDir())
	set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
	others := []Set{
		{Layer: "l", Gridset: "g", Format: "png", Params: "pp"},
		{Layer: "l", Gridset: "g", Format: "png8", Params: "p"},
		{Layer: "l", Gridset: "gg", Format: "png", Params: "p"},
		{Layer: "ll", Gridset: "g", Format: "png", Params: "p"},
	}
	want := fill(t, s, set, 3, 0, 0, 8, 8, 0) + fill(t, s, set, 4, 0, 0, 10, 10, 0)
	for _, o := range others {
		fill(t, s, o, 3, 0, 0, 8, 8, 0)
	}
	n, err := s.DeleteSet(set)
	if err != nil || n != want {
		t.Fatalf("DeleteSet = %d, %v; want %d", n, err, want)
	}
	if c := rawCount(t, s, setPrefix(nil, set, 0)); c != 0 {
		t.Errorf("%d keys of the set left", c)
	}
	for _, o := range others {
		if c := count(t, s, o, 3, everything); c != 64 {
			t.Errorf("set %v holds %d tiles, want 64", o, c)
		}
	}
	if _, err := s.DeleteSet(Set{Layer: "l", Gridset: "g", Format: "png"}); !errors.Is(err, ErrBadName) {
		t.Errorf("DeleteSet with an empty name: %v", err)
	}
}

// ---- benchmarks ----

// BenchmarkTruncateLayer times TruncateLayer alone on layers of very
// different sizes: the ns/op must not grow with the layer. The reclaim is
// paused and the generation put back between iterations, untimed, so that
// every iteration truncates a full layer.
func BenchmarkTruncateLayer(b *testing.B) {
	for _, tiles := range []int64{1_000, 100_000} {
		b.Run(fmt.Sprint("tiles=", tiles), func(b *testing.B) {
			s := openT(b, b.TempDir())
			s.pauseReclaim.Store(true)
			set := Set{Layer: "big", Gridset: "g", Format: "png", Params: "p"}
			fill(b, s, set, 12, 0, 0, tiles/100, 100, 600) // 600 B: in the value log
			b.ResetTimer()
			for range b.N {
				if err := s.TruncateLayer("big"); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				untruncate(b, s, "big")
				b.StartTimer()
			}
			b.StopTimer()
			if n := count(b, s, set, 12, everything); n != tiles {
				b.Fatalf("layer holds %d tiles, want %d", n, tiles)
			}
		})
	}
}

// untruncate undoes a truncation whose reclaim has not run.
func untruncate(tb testing.TB, s *Badger, layer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	g := s.Generation(layer)
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(generationKey(layer), binary.BigEndian.AppendUint64(nil, g-1)); err != nil {
			return err
		}
		return txn.Delete(dropKey(layer, g-1))
	})
	if err != nil {
		tb.Fatal(err)
	}
	s.setGeneration(layer, g-1)
	s.drops = s.drops[:0]
}

// BenchmarkDeleteRange100k deletes 100,000 tiles, with usage accounting
// off and on (then each deletion reads its tile again in its transaction).
func BenchmarkDeleteRange100k(b *testing.B) {
	for _, usage := range []bool{false, true} {
		b.Run(fmt.Sprint("usage=", usage), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{Usage: usage})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Release()
			set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
			r := gridset.Range{MinX: 0, MinY: 0, MaxX: 399, MaxY: 249}
			var deleted int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fill(b, s, set, 12, 0, 0, 400, 250, 600)
				b.StartTimer()
				n, err := s.DeleteRange(set, 12, r, nil)
				if err != nil || n != 100_000 {
					b.Fatalf("deleted %d, %v", n, err)
				}
				deleted += n
			}
			b.ReportMetric(float64(deleted)/b.Elapsed().Seconds(), "tiles/s")
		})
	}
}

// BenchmarkReclaim100k compares the two ways of deleting a truncated
// generation: batched deletes (what the reclaimer did, and what DeleteSet
// does) and DropPrefix (what the reclaimer does now, under the write lock).
func BenchmarkReclaim100k(b *testing.B) {
	for _, how := range []string{"WriteBatch", "DropPrefix"} {
		b.Run(how, func(b *testing.B) {
			s := openT(b, b.TempDir())
			s.pauseReclaim.Store(true)
			set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
			var deleted int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fill(b, s, set, 12, 0, 0, 400, 250, 600)
				prefix := generationPrefix(nil, "l", s.Generation("l"))
				b.StartTimer()
				if how == "DropPrefix" {
					if err := s.db.DropPrefix(prefix); err != nil {
						b.Fatal(err)
					}
				} else if _, err := s.deletePrefix(prefix); err != nil {
					b.Fatal(err)
				}
				deleted += 100_000
			}
			b.StopTimer()
			if n := rawCount(b, s, layerPrefix(nil, "l")); n != 0 {
				b.Fatalf("%d keys left", n)
			}
			b.ReportMetric(float64(deleted)/b.Elapsed().Seconds(), "tiles/s")
		})
	}
}

func BenchmarkGet(b *testing.B) { benchmarkGet(b, openT(b, b.TempDir())) }

// benchmarkGet times hits on one 20 KB tile of s.
func benchmarkGet(b *testing.B, s *Badger) {
	k := Key{Set: Set{Layer: "l", Gridset: "EPSG:3857", Format: "image/png", Params: "0123456789abcdef"}, Z: 14, X: 8000, Y: 5000}
	if err := s.Put([]Entry{{Key: k, Data: image(k.Set, 0, 0, 0, 20_000)}}, time.Now()); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t, err := s.Get(context.Background(), k, dst)
		if err != nil || len(t.Data) != 20_000 {
			b.Fatal(err)
		}
		dst = t.Data
	}
}

// A task's final save may race the store's close (the seeder saves in a
// goroutine of its own): every call either completes or gets ErrClosed,
// never reaches the closed Badger (where Sync panics).
func TestCallsRacingCloseGetErrClosed(t *testing.T) {
	for round := range 20 {
		s := openT(t, t.TempDir())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := s.PutTask(int64(w*1000+i), []byte(`{}`))
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: PutTask: %v", round, err)
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		release(t, s)
		wg.Wait()
	}
}

// BenchmarkGetFromTables reads tiles that are in Badger's tables, not in
// its memtable (BenchmarkGet and tilecache's BenchmarkHitPath read tiles
// just written): 50,000 tiles, the store reopened (which flushes them into
// a table), then Gets in a scattered order. Tiny tiles sit in the table
// blocks themselves; tile-sized ones in the value log.
func BenchmarkGetFromTables(b *testing.B) {
	for _, size := range []int{70, 1400} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			dir := b.TempDir()
			s := openT(b, dir)
			set := Set{Layer: "l", Gridset: "EPSG:3857", Format: "image/png", Params: "0123456789abcdef"}
			n := fill(b, s, set, 14, 0, 0, 250, 200, size)
			release(b, s)
			s = openT(b, dir)
			if len(s.db.Tables()) == 0 {
				b.Fatal("no tables after reopening")
			}
			dst := make([]byte, 0, 32<<10)
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				i = (i + 7919) % n // a prime stride: every tile, scattered
				t, err := s.Get(context.Background(), Key{Set: set, Z: 14, X: i / 200, Y: i % 200}, dst)
				if err != nil || len(t.Data) != size {
					b.Fatal(i, err)
				}
				dst = t.Data
			}
		})
	}
}
