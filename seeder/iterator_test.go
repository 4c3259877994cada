package seeder

import (
	"math/rand/v2"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The iterator's units partition the task's ranges: every tile exactly
// once, each unit inside one metatile aligned on multiples of its size.
func TestIteratorPartitionsTheRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		metaW, metaH := int64(1+rng.IntN(5)), int64(1+rng.IntN(5))
		spec := Spec{ZoomStart: rng.IntN(3)}
		for range 1 + rng.IntN(3) {
			x0, y0 := rng.Int64N(20), rng.Int64N(20)
			r := gridset.Range{MinX: x0, MinY: y0, MaxX: x0 + rng.Int64N(12) - 1, MaxY: y0 + rng.Int64N(12) - 1}
			spec.Ranges = append(spec.Ranges, r) // may be empty
		}
		it := newIterator(&spec, metaW, metaH)
		seen := map[[3]int64]bool{}
		for {
			u, ok := it.next()
			if !ok {
				break
			}
			r := spec.Ranges[u.z-spec.ZoomStart]
			if u.tiles.Empty() || u.tiles.Intersect(r) != u.tiles {
				t.Fatalf("unit %+v not inside range %+v", u, r)
			}
			if u.tiles.MinX/metaW != u.tiles.MaxX/metaW || u.tiles.MinY/metaH != u.tiles.MaxY/metaH {
				t.Fatalf("unit %+v spans metatiles of %dx%d", u, metaW, metaH)
			}
			for x := u.tiles.MinX; x <= u.tiles.MaxX; x++ {
				for y := u.tiles.MinY; y <= u.tiles.MaxY; y++ {
					k := [3]int64{int64(u.z), x, y}
					if seen[k] {
						t.Fatalf("tile %v handed out twice", k)
					}
					seen[k] = true
				}
			}
		}
		var total int64
		for _, r := range spec.Ranges {
			total += r.Count()
		}
		if int64(len(seen)) != total {
			t.Fatalf("trial %d: %d tiles handed out, ranges hold %d", trial, len(seen), total)
		}
		if !it.done() {
			t.Fatal("iterator not done after its last unit")
		}
	}
}

// A truncate walks whole levels: one unit per level, whatever its size.
func TestIteratorWholeLevels(t *testing.T) {
	g, _ := gridset.Builtin("EPSG:4326")
	spec := Spec{ZoomStart: 19, Ranges: []gridset.Range{g.GridRange(19), g.GridRange(20), g.GridRange(21)}}
	it := newIterator(&spec, wholeLevel, wholeLevel)
	for z := 19; z <= 21; z++ {
		u, ok := it.next()
		if !ok || u.z != z || u.tiles != g.GridRange(z) {
			t.Fatalf("level %d: %+v %v", z, u, ok)
		}
	}
	if _, ok := it.next(); ok {
		t.Fatal("more than one unit per level")
	}
}

func TestParseTypeAndWhich(t *testing.T) {
	for in, want := range map[string]Type{"seed": Seed, "RESEED": Reseed, " Truncate ": Truncate} {
		if got, err := ParseType(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseType("delete"); err == nil {
		t.Error("unknown type accepted")
	}
	for in, want := range map[string]Which{"running": KillRunning, "1": KillRunning, "Pending": KillPending, "ALL": KillAll} {
		if got, err := ParseWhich(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	_, err := ParseWhich("some")
	if err == nil || err.Error() != "Unknown kill_all code: 'some'. One of all|running|pending is expected." {
		t.Errorf("unknown kill_all: %v", err)
	}
}

// A clustered task finds any unit by its place in the order (units.go):
// at(i) must be the iterator's i'th unit, and count the number it hands out.
func TestIteratorRandomAccessMatchesTheWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		metaW, metaH := int64(1+rng.IntN(5)), int64(1+rng.IntN(5))
		spec := Spec{ZoomStart: rng.IntN(3)}
		for range 1 + rng.IntN(4) {
			x0, y0 := rng.Int64N(30), rng.Int64N(30)
			spec.Ranges = append(spec.Ranges, gridset.Range{MinX: x0, MinY: y0, MaxX: x0 + rng.Int64N(14) - 1, MaxY: y0 + rng.Int64N(14) - 1})
		}
		walk := newIterator(&spec, metaW, metaH)
		random := newIterator(&spec, metaW, metaH)
		var i int64
		for {
			want, ok := walk.next()
			if !ok {
				break
			}
			got, ok := random.at(i)
			if !ok || got.z != want.z || got.tiles != want.tiles {
				t.Fatalf("trial %d: at(%d) = %+v %v, the walk's unit is %+v", trial, i, got, ok, want)
			}
			i++
		}
		if n := random.count(); n != i {
			t.Fatalf("trial %d: count %d, the walk handed out %d", trial, n, i)
		}
		if _, ok := random.at(i); ok {
			t.Fatalf("trial %d: at(%d) past the end found a unit", trial, i)
		}
	}
}
