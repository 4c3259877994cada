// Package storetest is the contract every store.Tiles keeps, as a test
// suite each store runs against itself: the embedded Badger, the S3 store,
// and S3 behind a local tier. The handler, the seeder and truncation rely
// on exactly these behaviours, so a store that passes here can stand in
// for another.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Open makes a fresh, empty store for one subtest and closes it when the
// subtest ends.
type Open func(t *testing.T) store.Tiles

// Tiles runs the contract against stores made by open.
func Tiles(t *testing.T, open Open) {
	t.Run("PutGetHas", func(t *testing.T) { putGetHas(t, open(t)) })
	t.Run("DeleteRangeIsExact", func(t *testing.T) { deleteRangeIsExact(t, open(t)) })
	t.Run("TruncateLayer", func(t *testing.T) { truncateLayer(t, open(t)) })
	t.Run("SetsOf", func(t *testing.T) { setsOf(t, open(t)) })
}

var (
	pngSet  = store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: "e3b0c44298fc1c14"}
	jpegSet = store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/jpeg", Params: "e3b0c44298fc1c14"}
)

func with(set store.Set, change func(*store.Set)) store.Set { change(&set); return set }

// image is a tile's content: it names the tile, so a tile read back under
// another key shows.
func image(k store.Key) []byte {
	return fmt.Appendf(nil, "%s|%s|%s|%s|%d/%d/%d", k.Layer, k.Gridset, k.Format, k.Params, k.Z, k.X, k.Y)
}

// fill stores the w×h block of tiles at (x0, y0), level z, 64 to a Put
// (about a metatile, as the handler and the seeder write).
func fill(t *testing.T, s store.Tiles, set store.Set, z int, x0, y0, w, h int64) []store.Key {
	t.Helper()
	var keys []store.Key
	var batch []store.Entry
	at := time.Now()
	flush := func() {
		if err := s.Put(batch, at); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for x := x0; x < x0+w; x++ {
		for y := y0; y < y0+h; y++ {
			k := store.Key{Set: set, Z: z, X: x, Y: y}
			keys = append(keys, k)
			batch = append(batch, store.Entry{Key: k, Data: image(k)})
			if len(batch) == 64 {
				flush()
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return keys
}

// stored tells which keys Get finds, checking each found tile's content.
func stored(t *testing.T, s store.Tiles, keys []store.Key) []bool {
	t.Helper()
	out := make([]bool, len(keys))
	for i, k := range keys {
		tile, err := s.Get(context.Background(), k, nil)
		switch {
		case err == nil:
			if !bytes.Equal(tile.Data, image(k)) {
				t.Fatalf("Get(%v) = %q, not the tile stored under that key", k, tile.Data)
			}
			out[i] = true
		case !errors.Is(err, store.ErrNotFound):
			t.Fatalf("Get(%v): %v", k, err)
		}
	}
	return out
}

func putGetHas(t *testing.T, s store.Tiles) {
	at := time.Unix(1_700_000_000, 123_456_789)
	data := bytes.Repeat([]byte("tile"), 3000)
	k := store.Key{Set: pngSet, Z: 3, X: 4, Y: 5}
	next := store.Key{Set: pngSet, Z: 3, X: 4, Y: 6}
	if err := s.Put([]store.Entry{{Key: k, Data: data}, {Key: next, Data: []byte("x")}}, at); err != nil {
		t.Fatal(err)
	}
	tile, err := s.Get(context.Background(), k, make([]byte, 0, 10))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tile.Data, data) {
		t.Fatalf("Get returned %d bytes, not the %d stored", len(tile.Data), len(data))
	}
	if !tile.StoredAt.Equal(at) {
		t.Errorf("StoredAt = %v, want %v (Last-Modified comes from it)", tile.StoredAt, at)
	}
	if tile.ETag != store.ETagOf(data) {
		t.Errorf("ETag = %x, want %x", tile.ETag, store.ETagOf(data))
	}
	if again, _ := s.Get(context.Background(), next, nil); again.ETag == tile.ETag {
		t.Error("two different tiles have the same ETag")
	}

	// Every part of the key tells tiles apart.
	for name, other := range map[string]store.Key{
		"another y":       {Set: pngSet, Z: 3, X: 5, Y: 4},
		"another level":   {Set: pngSet, Z: 4, X: 4, Y: 5},
		"another format":  {Set: jpegSet, Z: 3, X: 4, Y: 5},
		"other params":    {Set: with(pngSet, func(s *store.Set) { s.Params = "0123456789abcdef" }), Z: 3, X: 4, Y: 5},
		"another gridset": {Set: with(pngSet, func(s *store.Set) { s.Gridset = "EPSG:3857" }), Z: 3, X: 4, Y: 5},
		"another layer":   {Set: with(pngSet, func(s *store.Set) { s.Layer = "test:b" }), Z: 3, X: 4, Y: 5},
	} {
		if _, err := s.Get(context.Background(), other, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) = %v, want ErrNotFound", name, err)
		}
	}

	absent := store.Key{Set: pngSet, Z: 3, X: 5, Y: 4}
	has, err := s.Has([]store.Key{k, absent, next}, at)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(has, []bool{true, false, true}) {
		t.Errorf("Has(stored, absent, stored; notBefore = when stored) = %v", has)
	}
	if has, _ := s.Has([]store.Key{k}, at.Add(time.Millisecond)); has[0] {
		t.Error("Has reports a tile stored before notBefore (reseed would skip it)")
	}

	// A Put over a stored tile replaces it.
	later := at.Add(time.Hour)
	if err := s.Put([]store.Entry{{Key: k, Data: []byte("new")}}, later); err != nil {
		t.Fatal(err)
	}
	tile, err = s.Get(context.Background(), k, nil)
	if err != nil || string(tile.Data) != "new" || !tile.StoredAt.Equal(later) {
		t.Fatalf("after a second Put: %q stored at %v, %v; want %q at %v", tile.Data, tile.StoredAt, err, "new", later)
	}
}

// deleteRangeIsExact deletes random ranges of a level and checks every
// tile of the level, the levels around it, another parameter set and
// another layer against a model.
func deleteRangeIsExact(t *testing.T, s store.Tiles) {
	other := with(pngSet, func(s *store.Set) { s.Params = "0123456789abcdef" })
	neighbour := with(pngSet, func(s *store.Set) { s.Layer = "test:a2" })
	const side = 12
	keys := fill(t, s, pngSet, 5, 0, 0, side, side)
	guards := slices.Concat(fill(t, s, pngSet, 4, 0, 0, side, side), fill(t, s, pngSet, 6, 0, 0, 4, 4),
		fill(t, s, other, 5, 0, 0, side, side), fill(t, s, neighbour, 5, 0, 0, side, side))
	want := make([]bool, len(keys))
	for i := range want {
		want[i] = true
	}
	r := rand.New(rand.NewPCG(11, 25))
	for round := 0; round < 4; round++ {
		x0, y0 := r.Int64N(side), r.Int64N(side)
		rg := gridset.Range{MinX: x0, MinY: y0, MaxX: x0 + r.Int64N(side-x0), MaxY: y0 + r.Int64N(side-y0)}
		var expect int64
		for i, k := range keys {
			if want[i] && k.X >= rg.MinX && k.X <= rg.MaxX && k.Y >= rg.MinY && k.Y <= rg.MaxY {
				want[i] = false
				expect++
			}
		}
		n, err := s.DeleteRange(pngSet, 5, rg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n != expect {
			t.Errorf("round %d: DeleteRange(%v) reports %d tiles, want %d", round, rg, n, expect)
		}
		if got := stored(t, s, keys); !slices.Equal(got, want) {
			t.Fatalf("round %d: after DeleteRange(%v) the level holds the wrong tiles", round, rg)
		}
	}
	if n, err := s.DeleteRange(pngSet, 5, gridset.Range{MinX: 100, MinY: 100, MaxX: 200, MaxY: 200}, nil); err != nil || n != 0 {
		t.Errorf("DeleteRange of an empty range = %d, %v; want 0", n, err)
	}
	for i, ok := range stored(t, s, guards) {
		if !ok {
			t.Fatalf("deleting at level 5 of one set took %v", guards[i])
		}
	}
}

func truncateLayer(t *testing.T, s store.Tiles) {
	prefixed := with(pngSet, func(s *store.Set) { s.Layer = "test:ab" }) // "test:a" is a prefix of its name
	a := slices.Concat(fill(t, s, pngSet, 2, 0, 0, 4, 4), fill(t, s, jpegSet, 2, 0, 0, 2, 2),
		fill(t, s, with(pngSet, func(s *store.Set) { s.Gridset = "EPSG:3857" }), 1, 0, 0, 2, 2))
	b := fill(t, s, prefixed, 2, 0, 0, 4, 4)
	if err := s.TruncateLayer("test:a"); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, a); slices.Contains(got, true) {
		t.Fatalf("%d of %d tiles of a truncated layer are still served", count(got), len(a))
	}
	if has, err := s.Has(a[:3], time.Time{}); err != nil || slices.Contains(has, true) {
		t.Fatalf("Has after truncation = %v, %v; want all false (a reseed must render them)", has, err)
	}
	if sets, err := s.SetsOf("test:a", "EPSG:4326"); err != nil || len(sets) != 0 {
		t.Fatalf("SetsOf a truncated layer = %v, %v; want none", sets, err)
	}
	if got := stored(t, s, b); slices.Contains(got, false) {
		t.Fatalf("truncating test:a took %d tiles of test:ab", len(b)-count(got))
	}
	// The layer fills again, and truncates again.
	again := fill(t, s, pngSet, 2, 0, 0, 2, 2)
	if got := stored(t, s, again); slices.Contains(got, false) {
		t.Fatal("tiles stored after a truncation are not served")
	}
	if err := s.TruncateLayer("test:a"); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, again); slices.Contains(got, true) {
		t.Fatal("a second truncation left tiles")
	}
	if err := s.TruncateLayer("test:never-stored"); err != nil {
		t.Fatalf("truncating a layer with no tiles: %v", err)
	}
}

func setsOf(t *testing.T, s store.Tiles) {
	p2 := with(pngSet, func(s *store.Set) { s.Params = "0123456789abcdef" })
	g2 := with(pngSet, func(s *store.Set) { s.Gridset = "EPSG:3857" })
	for _, set := range []store.Set{pngSet, p2, jpegSet, g2} {
		fill(t, s, set, 1, 0, 0, 1, 2)
		fill(t, s, set, 3, 2, 2, 1, 1) // a second level adds no second entry
	}
	fill(t, s, with(pngSet, func(s *store.Set) { s.Layer = "test:ab" }), 1, 0, 0, 1, 1)
	got, err := s.SetsOf("test:a", "EPSG:4326")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Set{pngSet, p2, jpegSet}
	key := func(s store.Set) string { return s.Format + "|" + s.Params }
	sort.Slice(got, func(i, j int) bool { return key(got[i]) < key(got[j]) })
	sort.Slice(want, func(i, j int) bool { return key(want[i]) < key(want[j]) })
	if !slices.Equal(got, want) {
		t.Fatalf("SetsOf(test:a, EPSG:4326) = %v, want %v", got, want)
	}
	if got, err := s.SetsOf("test:a", "EPSG:900913"); err != nil || len(got) != 0 {
		t.Fatalf("SetsOf a gridset with no tiles = %v, %v", got, err)
	}
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
