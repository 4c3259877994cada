package quota

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

func openStore(t *testing.T) *store.Badger {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{Usage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Release() })
	if err := st.SetTracking(true); err != nil {
		t.Fatal(err)
	}
	return st
}

// evictor returns an evictor that only runs when the test calls Enforce.
func evictor(t *testing.T, st *store.Badger, cfg *Config) *Evictor {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := &Evictor{st: st, log: zap.NewNop(), cfg: cfg, now: time.Now}
	return e
}

// page fills the whole page (px, py) of level z with tiles of size bytes,
// stored at time at.
func page(t *testing.T, st *store.Badger, set store.Set, z int, px, py int64, size int, at time.Time) {
	t.Helper()
	var batch []store.Entry
	for x := px * store.PageSize; x < (px+1)*store.PageSize; x++ {
		for y := py * store.PageSize; y < (py+1)*store.PageSize; y++ {
			batch = append(batch, store.Entry{Key: store.Key{Set: set, Z: z, X: x, Y: y}, Data: make([]byte, size)})
		}
	}
	if err := st.Put(batch, at); err != nil {
		t.Fatal(err)
	}
}

func held(t *testing.T, st *store.Badger, set store.Set, z int, px, py int64) int64 {
	t.Helper()
	n, err := st.CountRange(set, z, gridset.Range{MinX: px * store.PageSize, MinY: py * store.PageSize,
		MaxX: (px+1)*store.PageSize - 1, MaxY: (py+1)*store.PageSize - 1})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func usage(t *testing.T, st *store.Badger, layer string) int64 {
	t.Helper()
	levels, _, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	var b int64
	for _, lv := range levels {
		if layer == "" || lv.Set.Layer == layer {
			b += lv.Bytes
		}
	}
	return b
}

var (
	setA = store.Set{Layer: "a", Gridset: "g", Format: "png", Params: "p"}
	setB = store.Set{Layer: "b", Gridset: "g", Format: "png", Params: "p"}
)

// pageBytes is what one full page of 1,000-byte tiles counts for.
const pageBytes = 256 * (1000 + 17 + 6) // image, value header, Badger's entry overhead

// LRU: the pages used least recently go first, hits count as uses, and
// eviction stops at the low watermark, not at the quota.
func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	st := openStore(t)
	t0 := time.Now().Add(-time.Hour)
	for i := range int64(10) { // page i stored at t0 + i minutes
		page(t, st, setA, 10, i, 0, 1000, t0.Add(time.Duration(i)*time.Minute))
	}
	// The two oldest pages are hit now: they are the most recent.
	st.Get(context.Background(), store.Key{Set: setA, Z: 10, X: 0, Y: 0}, nil)
	st.Get(context.Background(), store.Key{Set: setA, Z: 10, X: 16, Y: 3}, nil)
	total := usage(t, st, "")
	// A quota of 7.5 pages with watermark 0.6: 4.5 pages may stay, so 6
	// pages go: 2, 3, 4, 5, 6, 7; 8, 9 (newer) and 0, 1 (hit) stay.
	e := evictor(t, st, &Config{MaxSize: total * 3 / 4, LowWatermark: 0.6})
	p, err := e.Enforce()
	if err != nil {
		t.Fatal(err)
	}
	if p.Pages != 6 || p.Reason != "global" || p.Short {
		t.Fatalf("pass: %+v", p)
	}
	for i := range int64(10) {
		want := int64(256)
		if i >= 2 && i <= 7 {
			want = 0
		}
		if n := held(t, st, setA, 10, i, 0); n != want {
			t.Errorf("page %d holds %d tiles, want %d", i, n, want)
		}
	}
	if u := usage(t, st, ""); u > int64(float64(total*3/4)*0.6) {
		t.Fatalf("usage %d after the pass, over the watermark %d", u, int64(float64(total*3/4)*0.6))
	}
	// Under the quota now: another pass does nothing.
	if p, err := e.Enforce(); err != nil || p.Pages != 0 {
		t.Fatalf("second pass: %+v %v", p, err)
	}
}

// LFU: the pages with the fewest hits per hour go first, whatever their
// recency.
func TestLFUEvictsLeastFrequentlyUsed(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	for i := range int64(4) {
		page(t, st, setA, 10, i, 0, 1000, now.Add(-time.Duration(4-i)*time.Minute))
	}
	// Hits: page 0 ×5, page 1 ×0, page 2 ×3, page 3 (newest) ×1.
	for i, hits := range []int{5, 0, 3, 1} {
		for range hits {
			st.Get(context.Background(), store.Key{Set: setA, Z: 10, X: int64(i) * 16, Y: 0}, nil)
		}
	}
	total := usage(t, st, "")
	// Room for a bit more than two pages: the two least used go.
	e := evictor(t, st, &Config{MaxSize: total - 1, LowWatermark: 0.55, Policy: LFU})
	if _, err := e.Enforce(); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(held(t, st, setA, 10, 0, 0), held(t, st, setA, 10, 1, 0), held(t, st, setA, 10, 2, 0), held(t, st, setA, 10, 3, 0))
	if got != "256 0 256 0" {
		t.Fatalf("pages hold %s tiles, want 256 0 256 0 (the least hit pages 1 and 3 go)", got)
	}
}

// Kept levels are never evicted, even if that leaves usage over the
// watermark (the pass says so); a layer over its own quota loses its own
// pages before the global quota is looked at, and the other layer's stay.
func TestKeptLevelsAndLayerQuotas(t *testing.T) {
	st := openStore(t)
	old := time.Now().Add(-time.Hour)
	for i := range int64(4) {
		page(t, st, setA, 3, i, 0, 1000, old) // kept, and the oldest
		page(t, st, setA, 12, i, 0, 1000, time.Now())
		page(t, st, setB, 12, i, 0, 1000, old) // b's are older than a's
	}
	perLevel := usage(t, st, "a") / 2
	e := evictor(t, st, &Config{KeepLevels: &[2]int{0, 8}, Layers: map[string]*LayerConfig{
		"a": {MaxSize: perLevel + perLevel/2}, // over by half a level: three of a's level 12 pages go
	}})
	p, err := e.Enforce()
	if err != nil {
		t.Fatal(err)
	}
	if p.Reason != "layer" || p.Pages != 3 || p.Evicted["b"] != [2]int64{} {
		t.Fatalf("pass: %+v", p)
	}
	for i := range int64(4) {
		if held(t, st, setA, 3, i, 0) != 256 || held(t, st, setB, 12, i, 0) != 256 {
			t.Fatal("a kept level's page or another layer's page went")
		}
	}
	// A global quota under what the kept levels hold: everything else
	// goes, the kept levels stay, and the pass says it fell short.
	e.SetConfig(&Config{MaxSize: perLevel / 2, LowWatermark: 0.9, Policy: LRU, KeepLevels: &[2]int{0, 8}})
	e.log = zap.NewNop()
	p, err = e.Enforce()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Short {
		t.Fatalf("pass: %+v, want short", p)
	}
	if u := usage(t, st, ""); u != perLevel {
		t.Fatalf("usage %d after evicting all it may, want the kept level's %d", u, perLevel)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "set max_size"},
		{Config{MaxSize: -1}, "negative"},
		{Config{MaxSize: 1, LowWatermark: 0.2}, "low_watermark"},
		{Config{MaxSize: 1, Policy: "mru"}, "policy"},
		{Config{MaxSize: 1, KeepLevels: &[2]int{5, 2}}, "keep_levels"},
		{Config{Layers: map[string]*LayerConfig{"x": {MaxSize: -5}}}, `layer "x"`},
		{Config{Layers: map[string]*LayerConfig{"x": {}}}, "set max_size"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.cfg, err, c.want)
		}
	}
	c := Config{MaxSize: 1 << 30}
	if err := c.Validate(); err != nil || c.LowWatermark != DefaultLowWatermark || c.Policy != LRU {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

// Uses are stamped to the second: among pages used in the same second, a
// page visitors hit goes after one a seed is writing into, and among
// those, the higher level first.
func TestOrderBreaksTiesByHitsThenLevel(t *testing.T) {
	page := func(z int, hits uint64) candidate {
		ps := store.PageStat{Page: store.Page{Set: setA, Z: z}, Last: 1000, Hits: hits}
		return candidate{ps, score(LRU, ps, 2000)}
	}
	older := candidate{store.PageStat{Page: store.Page{Set: setA, Z: 1}, Last: 999, Hits: 50}, 999}
	cands := []candidate{page(3, 40), page(9, 0), older, page(12, 0), page(2, 400)}
	order(cands)
	var got []string
	for _, c := range cands {
		got = append(got, fmt.Sprintf("z%d/%d", c.stat.Z, c.stat.Hits))
	}
	if s := strings.Join(got, " "); s != "z1/50 z12/0 z9/0 z3/40 z2/400" {
		t.Fatalf("order %s, want z1/50 z12/0 z9/0 z3/40 z2/400", s)
	}
}
