package caddytest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// The quota through a real Caddy: tile_cache's `quota` against a WMS of
// tiles of a real size (a few KB) and the real Badger store, whose tiles
// are read back to check that eviction took what it should, left the
// rest whole, and kept rest/usage.json right. Always the Badger store:
// the quota is not available on S3.

// noisyWMS is a WMS whose maps are a gradient sprinkled with pseudo-random
// noise keyed on the bbox: the tiles cut from them are a few KB each, like
// real tiles, rather than the few hundred bytes of fakeWMS's gradients, so
// that a quota of a few MiB holds a few hundred tiles. The same bbox always
// gives the same image.
type noisyWMS struct {
	*httptest.Server
	getMaps atomic.Int64
	delay   atomic.Int64 // nanoseconds added to every GetMap
}

func newNoisyWMS(t *testing.T) *noisyWMS {
	n := &noisyWMS{}
	n.Server = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.Close)
	return n
}

func (n *noisyWMS) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	get := func(k string) string {
		for key, v := range q {
			if strings.EqualFold(key, k) {
				return v[0]
			}
		}
		return ""
	}
	if !strings.EqualFold(get("REQUEST"), "GetMap") {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("noisy WMS passthrough"))
		return
	}
	n.getMaps.Add(1)
	if d := time.Duration(n.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	wd, _ := strconv.Atoi(get("WIDTH"))
	ht, _ := strconv.Atoi(get("HEIGHT"))
	if wd <= 0 || ht <= 0 || wd > 4096 || ht > 4096 {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	h := fnv.New64a()
	h.Write([]byte(get("BBOX") + "|" + get("LAYERS") + "|" + get("STYLES")))
	state := h.Sum64()
	blue := byte(state)
	img := image.NewNRGBA(image.Rect(0, 0, wd, ht))
	for y := 0; y < ht; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < wd; x++ {
			// splitmix64
			state += 0x9e3779b97f4a7c15
			z := state
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			z ^= z >> 31
			v := byte(x / 8)
			if z&63 == 0 {
				v += byte(z>>8) & 7
			}
			row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = v, byte(y/8), blue, 255
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	w.Header().Set("Content-Type", "image/png")
	w.Write(buf.Bytes())
}

// quotaEnv is one quota test's cache: its own name, directory and upstream.
type quotaEnv struct {
	t    *testing.T
	n    *noisyWMS
	name string
	dir  string
}

var quotaSeq atomic.Int64

// newQuota loads a cache with the REST interface (for rest/usage.json),
// the given quota block and layers (each of EPSG:4326).
func newQuota(t *testing.T, quotaBlock string, layers ...string) *quotaEnv {
	t.Helper()
	e := &quotaEnv{t: t, n: newNoisyWMS(t), name: fmt.Sprintf("quota%d_%d", quotaSeq.Add(1), time.Now().UnixNano()), dir: storageDir(t)}
	var ls strings.Builder
	for _, l := range layers {
		fmt.Fprintf(&ls, "\n\t\tlayer %s {\n\t\t\tgridsets EPSG:4326\n\t\t}", l)
	}
	load(t, siteConfig{admin: ptr("cache " + e.name), upstream: e.n.URL, tiles: `
		upstream ` + e.n.URL + `/wms
		storage ` + e.dir + `
		name ` + e.name + `
		timeout 10s
		` + quotaBlock + ls.String()}.String())
	return e
}

func (e *quotaEnv) set(layer string) store.Set {
	return store.Set{Layer: layer, Gridset: "EPSG:4326", Format: "image/png", Params: paramsHash(e.t, e.name, layer, nil)}
}

// miss fetches one tile per index, four at a time, and fails unless each
// is a MISS (a metatile fetched and stored) that decodes.
func (e *quotaEnv) miss(layer string, idxs []gridset.Index) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(idxs))
	work := make(chan gridset.Index)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idx := range work {
				if err := fetchTile(layer, idx, "MISS"); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, idx := range idxs {
		work <- idx
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// fetchTile is a tile request for goroutines: an error unless the answer
// is a decodable image with the given cache result.
func fetchTile(layer string, idx gridset.Index, result string) error {
	resp, err := client.Get(siteURL(tileQuery(layer, "EPSG:4326", idx)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %v: status %d %q", layer, idx, resp.StatusCode, truncate(body))
	}
	if got := resp.Header.Get("Geowebcache-Cache-Result"); got != result {
		return fmt.Errorf("%s %v: cache result %q, want %q", layer, idx, got, result)
	}
	if _, _, err := image.Decode(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("%s %v: does not decode: %v", layer, idx, err)
	}
	return nil
}

// metatiles lists one tile of each 4×4 metatile of level z inside tile
// columns x0..x1 and rows y0..y1 (inclusive; clipped to the grid).
func metatiles(z int, x0, x1, y0, y1 int64) []gridset.Index {
	g, _ := gridset.Builtin("EPSG:4326")
	r := g.GridRange(z)
	var out []gridset.Index
	for y := y0 - y0%4; y <= min(y1, r.MaxY); y += 4 {
		for x := x0 - x0%4; x <= min(x1, r.MaxX); x += 4 {
			out = append(out, gridset.Index{X: x, Y: y, Z: z})
		}
	}
	return out
}

// usageOf is rest/usage.json's figures of one layer (zero when absent),
// and by level.
func usageOf(u usageDoc, layer string) (tiles, bytes int64, levels map[int][2]int64) {
	levels = map[int][2]int64{}
	for _, l := range u.Layers {
		if l.Name != layer {
			continue
		}
		tiles, bytes = l.Tiles, l.Bytes
		for _, ts := range l.TileSets {
			for _, lv := range ts.Levels {
				f := levels[lv.Zoom]
				levels[lv.Zoom] = [2]int64{f[0] + lv.Tiles, f[1] + lv.Bytes}
			}
		}
	}
	return tiles, bytes, levels
}

// figures is what the store holds of one set at one level, read back tile
// by tile.
type figures struct {
	tiles, bytes int64
	maxTile      int64 // the largest stored value (image and header)
}

// storeFigures reads every cell of levels 0..maxZ of set from the store
// (the running Caddy's own, shared through the store's pool): tiles,
// bytes (image and 17-byte header: for values of 512 B–16 KB under keys
// shorter than 120 bytes this is Badger's ValueSize exactly), and fails
// on a stored tile that does not decode. Each Get counts as a hit on its
// page, so a test reads tiles back only where no later eviction's order
// depends on them.
func storeFigures(t *testing.T, dir string, set store.Set, maxZ int) map[int]figures {
	t.Helper()
	b := openBadger(t, dir)
	g, _ := gridset.Builtin(set.Gridset)
	out := map[int]figures{}
	for z := 0; z <= maxZ; z++ {
		var f figures
		eachStoredTile(t, b, set, g, z, func(x, y int64, tile store.Tile) {
			if _, _, err := image.Decode(bytes.NewReader(tile.Data)); err != nil {
				t.Fatalf("stored tile %s %d/%d/%d does not decode: %v", set.Layer, z, x, y, err)
			}
			size := int64(len(tile.Data)) + 17
			if size >= 16000 {
				t.Fatalf("setup: a tile of %d bytes; the byte figures here hold below 16 KB", size)
			}
			f.tiles++
			f.bytes += size
			f.maxTile = max(f.maxTile, size)
		})
		if f.tiles > 0 {
			out[z] = f
		}
	}
	return out
}

// checkUsage compares rest/usage.json's figures of layer, level by level,
// with the store's tiles, and returns the store's figures.
func (e *quotaEnv) checkUsage(when, layer string, maxZ int) (total figures) {
	e.t.Helper()
	u := getUsage(e.t)
	tiles, bytes, levels := usageOf(u, layer)
	stored := storeFigures(e.t, e.dir, e.set(layer), maxZ)
	for z := 0; z <= maxZ; z++ {
		if got, want := levels[z], stored[z]; got[0] != want.tiles || got[1] != want.bytes {
			e.t.Fatalf("%s: level %d of %s: rest/usage.json says %d tiles, %d bytes; the store holds %d, %d",
				when, z, layer, got[0], got[1], want.tiles, want.bytes)
		}
		total.tiles += stored[z].tiles
		total.bytes += stored[z].bytes
		total.maxTile = max(total.maxTile, stored[z].maxTile)
	}
	for z := range levels {
		if z > maxZ {
			e.t.Fatalf("%s: rest/usage.json has level %d of %s, which the test never asked for", when, z, layer)
		}
	}
	if tiles != total.tiles || bytes != total.bytes {
		e.t.Fatalf("%s: rest/usage.json says %s holds %d tiles, %d bytes; the store %d, %d", when, layer, tiles, bytes, total.tiles, total.bytes)
	}
	return total
}

// layerBytes is a layer's bytes in rest/usage.json.
func layerBytes(t *testing.T, layer string) int64 {
	t.Helper()
	_, b, _ := usageOf(getUsage(t), layer)
	return b
}

// evictedBoth waits until Caddy's evicted_tiles_total metric of layer
// agrees with the store's own evicted count (a pass may be finishing),
// and returns the store's tiles and bytes.
func (e *quotaEnv) evicted(layer string) (tiles, bytes int64) {
	e.t.Helper()
	b := openBadger(e.t, e.dir)
	labels := `dir="` + b.Dir() + `",layer="` + layer + `"`
	waitFor(e.t, "evicted_tiles_total and the store's evicted count agreeing", func() bool {
		ev, err := b.Evicted()
		if err != nil {
			e.t.Fatal(err)
		}
		tiles, bytes = ev[layer][0], ev[layer][1]
		return int64(metric(e.t, "caddy_tile_cache_evicted_tiles_total", labels)) == tiles &&
			int64(metric(e.t, "caddy_tile_cache_evicted_bytes_total", labels)) == bytes
	})
	return tiles, bytes
}

// cellCount counts the stored tiles of set at level z in columns x0..x1,
// rows y0..y1.
func (e *quotaEnv) cellCount(set store.Set, z int, x0, x1, y0, y1 int64) int64 {
	e.t.Helper()
	n, err := openBadger(e.t, e.dir).CountRange(set, z, gridset.Range{MinX: x0, MinY: y0, MaxX: x1, MaxY: y1})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A global quota with kept levels: several times the quota stored by
// misses ends with usage under the quota, the oldest page gone and served
// again by a miss with the same image, the kept levels whole, and
// rest/usage.json equal to the store's tiles.
func TestQuotaGlobalEviction(t *testing.T) {
	const quota = 4 << 20
	e := newQuota(t, "quota {\n\t\t\tmax_size 4MiB\n\t\t\tkeep_levels 0 2\n\t\t}", "test:a")
	set := e.set("test:a")

	// The kept levels (0..2, 42 tiles), then level 3 (one page of 128
	// tiles), whose image of tile 3/5/5 is kept to compare.
	e.miss("test:a", append(append(metatiles(0, 0, 1, 0, 0), metatiles(1, 0, 3, 0, 1)...), metatiles(2, 0, 7, 0, 3)...))
	e.miss("test:a", metatiles(3, 0, 15, 0, 7))
	probe := gridset.Index{X: 5, Y: 5, Z: 3}
	first := mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", probe))), "HIT")
	// The next second: every later page is used after level 3's.
	time.Sleep(1100 * time.Millisecond)
	// Levels 4 and 5: 2560 tiles more, about 3.5 times the quota.
	e.miss("test:a", metatiles(4, 0, 31, 0, 15))
	e.miss("test:a", metatiles(5, 0, 63, 0, 31))

	waitFor(t, "within the quota", func() bool { return layerBytes(t, "test:a") <= quota })
	evTiles, evBytes := e.evicted("test:a")
	stored := e.checkUsage("after eviction", "test:a", 5)
	t.Logf("%d tiles (%d bytes) stored, %d (%d bytes) evicted; largest tile %d bytes", stored.tiles, stored.bytes, evTiles, evBytes, stored.maxTile)
	if evTiles == 0 {
		t.Fatal("usage is within the quota without any eviction")
	}
	if total := stored.bytes + evBytes; total < 3*quota {
		t.Fatalf("setup: %d bytes stored in all, not several times the quota %d", total, quota)
	}
	if stored.tiles+evTiles != 2730 {
		t.Fatalf("%d tiles stored and %d evicted, of the 2730 of levels 0..5", stored.tiles, evTiles)
	}
	// Down to the low watermark, not much further: a pass stops at the
	// first page that takes usage under it (a page is at most 256 tiles).
	if low := int64(quota*9/10) - 256*stored.maxTile; stored.bytes < low {
		t.Fatalf("usage %d after eviction: more than a page under the watermark (%d)", stored.bytes, low)
	}
	for z, n := range []int64{2, 8, 32} {
		if got := e.cellCount(set, z, 0, 1<<30, 0, 1<<30); got != n {
			t.Fatalf("kept level %d holds %d tiles, want %d", z, got, n)
		}
	}
	// Level 3's page was the least recently used, so the first to go.
	if got := e.cellCount(set, 3, 0, 15, 0, 7); got != 0 {
		t.Fatalf("the oldest page (level 3) still holds %d tiles", got)
	}
	dir := openBadger(t, e.dir).Dir()
	if got := metric(t, "caddy_tile_cache_quota_bytes", `dir="`+dir+`",layer=""`); got != quota {
		t.Errorf("quota_bytes %v, want %d", got, quota)
	}
	if got := metric(t, "caddy_tile_cache_eviction_passes_total", `dir="`+dir+`",reason="global"`); got < 1 {
		t.Errorf("eviction_passes_total{reason=global} %v", got)
	}

	// The evicted tile: a miss again, fetched upstream, the same image.
	before := e.n.getMaps.Load()
	again := mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", probe))), "MISS")
	if got := e.n.getMaps.Load() - before; got != 1 {
		t.Fatalf("the evicted tile took %d GetMaps, want 1", got)
	}
	if !samePixels(first, again) {
		t.Fatal("the evicted tile came back with another image")
	}
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", probe))), "HIT")
	// A kept tile is a hit.
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 7, Y: 3, Z: 2}))), "HIT")
	if got := e.n.getMaps.Load() - before; got != 1 {
		t.Fatalf("%d GetMaps for one miss and two hits", got)
	}
}

func samePixels(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, a1 := a.At(x, y).RGBA()
			r2, g2, b2, a2 := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				return false
			}
		}
	}
	return true
}

// LRU: page B, stored first, then hit, outlives page A, stored after it
// but never hit, when new pages push the store over its quota by less
// than A holds.
func TestQuotaLRUKeepsHitPages(t *testing.T) {
	const quota = 2 << 20
	e := newQuota(t, "quota 2MiB {\n\t\t\tpolicy lru\n\t\t}", "test:a")
	set := e.set("test:a")
	// Level 6 is 8×4 pages of 16×16 tiles; B and A get 8 metatiles each
	// (128 tiles) in pages (0,0) and (1,0).
	pageB := metatiles(6, 0, 15, 0, 7)
	pageA := metatiles(6, 16, 31, 0, 7)
	e.miss("test:a", pageB)
	time.Sleep(1100 * time.Millisecond) // A is used a second after B
	e.miss("test:a", pageA)
	_, bytesAB, _ := usageOf(getUsage(t), "test:a")
	aBytes := bytesAB / 2
	meta := bytesAB / 16
	if bytesAB >= quota || aBytes < quota/10+2*meta {
		t.Fatalf("setup: A and B hold %d bytes (a metatile %d); the quota %d must take them, and A more than a pass evicts", bytesAB, meta, quota)
	}
	// Hits on B, two seconds after A was stored (a hit's time is the
	// tracker's clock, which ticks every second).
	time.Sleep(2100 * time.Millisecond)
	for round := 0; round < 3; round++ {
		for _, idx := range pageB {
			mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", idx))), "HIT")
		}
	}
	time.Sleep(1100 * time.Millisecond) // the new pages are used after B's hits
	// New pages, one metatile each, until the store is over its quota.
	var added []gridset.Index
	ev := openBadger(t, e.dir)
	for px := int64(2); ; px++ {
		if px == 8*4 {
			t.Fatal("setup: level 6 ran out of pages before the quota was reached")
		}
		idx := gridset.Index{X: (px % 8) * 16, Y: (px / 8) * 16, Z: 6}
		e.miss("test:a", []gridset.Index{idx})
		added = append(added, idx)
		m, err := ev.Evicted()
		if err != nil {
			t.Fatal(err)
		}
		if layerBytes(t, "test:a") > quota || m["test:a"][0] > 0 {
			break
		}
	}
	waitFor(t, "within the quota", func() bool { return layerBytes(t, "test:a") <= quota })
	evTiles, _ := e.evicted("test:a")
	after := e.checkUsage("after eviction", "test:a", 6)
	t.Logf("A and B %d bytes; %d new metatiles; %d tiles evicted; %d bytes left", bytesAB, len(added), evTiles, after.bytes)
	if got := e.cellCount(set, 6, 0, 15, 0, 15); got != 128 {
		t.Fatalf("page B, hit since it was stored, holds %d of its 128 tiles", got)
	}
	if got := e.cellCount(set, 6, 16, 31, 0, 15); got != 0 {
		t.Fatalf("page A, never hit, still holds %d tiles", got)
	}
	if evTiles != 128 {
		t.Fatalf("%d tiles evicted, want A's 128 alone", evTiles)
	}
	for _, idx := range added {
		if got := e.cellCount(set, 6, idx.X, idx.X+15, idx.Y, idx.Y+15); got != 16 {
			t.Fatalf("new page at %v holds %d of its 16 tiles", idx, got)
		}
	}
}

// A layer's own quota: only that layer loses tiles when it alone is over
// it, while the other layer, bigger, and the store stay under theirs.
func TestQuotaPerLayer(t *testing.T) {
	const quotaB = 1 << 20
	e := newQuota(t, "quota 64MiB {\n\t\t\tlayer test:b 1MiB\n\t\t}", "test:a", "test:b")
	setA := e.set("test:a")
	// test:a: a whole page of level 6 (256 tiles, over 1 MiB).
	e.miss("test:a", metatiles(6, 0, 15, 0, 15))
	aBefore := e.checkUsage("test:a stored", "test:a", 6)
	if aBefore.bytes <= quotaB {
		t.Fatalf("setup: test:a holds %d bytes, not more than test:b's quota", aBefore.bytes)
	}
	// test:b: one metatile in each of 20 pages of level 6, about 1.7 MiB.
	var idxs []gridset.Index
	for p := int64(0); p < 20; p++ {
		idxs = append(idxs, gridset.Index{X: (p % 8) * 16, Y: (p / 8) * 16, Z: 6})
	}
	for _, idx := range idxs {
		e.miss("test:b", []gridset.Index{idx})
	}
	waitFor(t, "test:b within its quota", func() bool { return layerBytes(t, "test:b") <= quotaB })
	evB, evBytesB := e.evicted("test:b")
	if evA, _ := e.evicted("test:a"); evA != 0 {
		t.Fatalf("%d tiles of test:a evicted; only test:b was over its quota", evA)
	}
	b := e.checkUsage("after eviction", "test:b", 6)
	t.Logf("test:b: %d tiles (%d bytes) left, %d (%d bytes) evicted; test:a %d bytes", b.tiles, b.bytes, evB, evBytesB, aBefore.bytes)
	if evB == 0 || b.tiles+evB != 20*16 {
		t.Fatalf("test:b: %d tiles stored, %d evicted, of 320", b.tiles, evB)
	}
	if b.bytes+evBytesB <= quotaB {
		t.Fatalf("setup: test:b stored %d bytes in all, never over its quota", b.bytes+evBytesB)
	}
	if low := int64(quotaB*9/10) - 16*b.maxTile; b.bytes < low {
		t.Fatalf("test:b holds %d bytes after eviction: more than a page under the watermark (%d)", b.bytes, low)
	}
	if a := e.checkUsage("after eviction", "test:a", 6); a != aBefore {
		t.Fatalf("test:a went from %+v to %+v", aBefore, a)
	}
	if got := e.cellCount(setA, 6, 0, 15, 0, 15); got != 256 {
		t.Fatalf("test:a holds %d of its 256 tiles", got)
	}
	dir := openBadger(t, e.dir).Dir()
	if got := metric(t, "caddy_tile_cache_eviction_passes_total", `dir="`+dir+`",reason="layer"`); got < 1 {
		t.Errorf("eviction_passes_total{reason=layer} %v", got)
	}
	if got := metric(t, "caddy_tile_cache_eviction_passes_total", `dir="`+dir+`",reason="global"`); got != 0 {
		t.Errorf("eviction_passes_total{reason=global} %v under a global quota never reached", got)
	}
	if got := metric(t, "caddy_tile_cache_quota_bytes", `dir="`+dir+`",layer="test:b"`); got != quotaB {
		t.Errorf("quota_bytes of test:b %v", got)
	}
}

// A bad quota is refused at load with one line naming what is wrong.
func TestQuotaBadConfigRefused(t *testing.T) {
	n := newNoisyWMS(t)
	site := func(extra string) string {
		return siteConfig{upstream: n.URL, tiles: `
		upstream ` + n.URL + `/wms
		storage ` + storageDir(t) + `
		` + extra + `
		layer test:a`}.String()
	}
	for _, c := range []struct{ block, want string }{
		{"quota 1MiB {\n\t\t\tpolicy mru\n\t\t}", `policy "mru" is neither lru nor lfu`},
		{"quota 1MiB {\n\t\t\tlow_watermark 20%\n\t\t}", "low_watermark 0.2 is outside 0.5–0.99"},
		{"quota 1MiB {\n\t\t\tkeep_levels 5 2\n\t\t}", "keep_levels 5 2 must be 0 ≤ min ≤ max ≤ 255"},
		{"quota 1MiB {\n\t\t\tlayer test:a {\n\t\t\t\tpolicy mru\n\t\t\t}\n\t\t}", `policy "mru" is neither lru nor lfu`},
		{"quota {\n\t\t\tpolicy lfu\n\t\t}", "set max_size for the cache or for a layer"},
		{"quota 1MiB {\n\t\t\tlayer test:a 0B\n\t\t}", `quota: "0B" is not a size`},
	} {
		msg := loadRefused(t, site(c.block))
		if !strings.Contains(msg, c.want) {
			t.Errorf("%q: error %q lacks %q", c.block, msg, c.want)
		}
		if strings.ContainsAny(strings.TrimSuffix(msg, "\n"), "\r\n") {
			t.Errorf("%q: error %q is not one line", c.block, msg)
		}
	}
}
