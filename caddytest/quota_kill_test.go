package caddytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// The quota's accounting through crashes: the built Caddy seeds through the
// REST interface into a store with a quota about a third of what the seed
// stores, so that eviction runs all along, and is killed (SIGKILL) at
// random moments. After each kill the store as the crash left it is read
// back tile by tile (in a copy) and its usage records must equal the
// tiles exactly, with no recount needed; the restarted Caddy's
// rest/usage.json must report the same; and at the end, with the seeding
// stopped, eviction brings the store within its quota.

// killQuota is the quota: about a third of levels 0..5 of EPSG:4326 (2730
// tiles of ~5.4 KB from the noisy WMS, ~14.7 MB).
const killQuota = 5_000_000

func quotaProcConfig(n *noisyWMS, dir string) string {
	return procConfigWith(n.URL, "INFO", 4, "storage "+dir+"\n\t\ttimeout 10s\n\t\tquota 5MB")
}

// procUsage reads the separate Caddy's rest/usage.json, waiting (bounded)
// for its site to answer.
func procUsage(t *testing.T) usageDoc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(fmt.Sprintf("http://localhost:%d/geowebcache/rest/usage.json", procPort))
		if err == nil {
			resp.Body.Close()
			break // the site answers (401 without credentials)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the separate Caddy's site not answering: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	a := procREST(t, "GET", "/rest/usage.json", "")
	if a.status != 200 {
		t.Fatalf("rest/usage.json: %d %q", a.status, a.body)
	}
	var u usageDoc
	if err := json.Unmarshal(a.body, &u); err != nil {
		t.Fatalf("rest/usage.json: %v: %s", err, a.body)
	}
	return u
}

// procTasksActive reports whether a seed task is pending or running.
func procTasksActive(t *testing.T) bool {
	t.Helper()
	a := procREST(t, "GET", "/rest/seed.json", "")
	var l struct {
		L [][5]int64 `json:"long-array-array"`
	}
	if a.status != 200 || json.Unmarshal(a.body, &l) != nil {
		t.Fatalf("GET rest/seed.json: %d %q", a.status, a.body)
	}
	for _, r := range l.L {
		if r[4] == 0 || r[4] == 1 {
			return true
		}
	}
	return false
}

// crashFigures is what a store directory holds: its usage records and the
// tiles read back, in total, and the evicted totals.
type crashFigures struct {
	recTiles, recBytes    int64 // the usage records
	tiles, bytes          int64 // the tiles
	evictedTiles, evBytes int64
	recounting            bool
	levelsDiffer          string // the first level whose records differ from its tiles
}

// readStoreDir opens dir in this process (no Caddy may hold it), reads its
// usage records and every tile of levels 0..5 of test:a's set, and closes
// it again.
func readStoreDir(t *testing.T, dir string) crashFigures {
	t.Helper()
	st, err := store.Open(dir, store.Options{Usage: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release()
	var f crashFigures
	levels, recounting, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	f.recounting = recounting
	g, _ := gridset.Builtin("EPSG:4326")
	rec := map[int][2]int64{}
	var set store.Set
	for _, lv := range levels {
		if lv.Set.Layer != "test:a" || lv.Set.Gridset != "EPSG:4326" || lv.Set.Format != "image/png" || lv.Z > 5 {
			t.Fatalf("usage records of %+v level %d, which the seed never stored", lv.Set, lv.Z)
		}
		if set.Layer != "" && lv.Set != set {
			t.Fatalf("usage records of two tile sets: %+v and %+v", set, lv.Set)
		}
		set = lv.Set
		rec[lv.Z] = [2]int64{lv.Tiles, lv.Bytes}
		f.recTiles += lv.Tiles
		f.recBytes += lv.Bytes
	}
	// Every tile the store holds (of any set and generation), decoded.
	var all int64
	if err := st.EachTile(func(data []byte) error {
		all++
		_, _, err := image.Decode(bytes.NewReader(data))
		return err
	}); err != nil {
		t.Fatalf("a stored tile does not decode: %v", err)
	}
	if set.Layer != "" {
		for z := 0; z <= 5; z++ {
			var tiles, size int64
			r := g.GridRange(z)
			for y := r.MinY; y <= r.MaxY; y++ {
				for x := r.MinX; x <= r.MaxX; x++ {
					tile, err := st.Get(context.Background(), store.Key{Set: set, Z: z, X: x, Y: y}, nil)
					if err == store.ErrNotFound {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if len(tile.Data)+17 >= 16000 {
						t.Fatalf("setup: a tile of %d bytes; the byte figures here hold below 16 KB", len(tile.Data)+17)
					}
					tiles++
					size += int64(len(tile.Data)) + 17
				}
			}
			if rec[z] != [2]int64{tiles, size} && f.levelsDiffer == "" {
				f.levelsDiffer = fmt.Sprintf("level %d: records %d tiles, %d bytes; the store %d, %d", z, rec[z][0], rec[z][1], tiles, size)
			}
			f.tiles += tiles
			f.bytes += size
		}
	}
	if all != f.tiles {
		t.Fatalf("the store holds %d tiles, %d of them in test:a's set at levels 0..5", all, f.tiles)
	}
	ev, err := st.Evicted()
	if err != nil {
		t.Fatal(err)
	}
	for layer, e := range ev {
		if layer != "test:a" {
			t.Fatalf("evictions recorded for layer %q", layer)
		}
		f.evictedTiles, f.evBytes = e[0], e[1]
	}
	return f
}

// copyOf copies the files of a store directory (flat, as Badger's is)
// into a new one, and returns it.
func copyOf(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Fatalf("a directory %s in the store", e.Name())
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// procMetric is the sum of a metric's samples on the separate Caddy's
// /metrics.
func procMetric(t *testing.T, name string) float64 {
	t.Helper()
	a := get(t, "http://"+procAdmin+"/metrics")
	var sum float64
	for _, line := range strings.Split(string(a.body), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// storedSoFar is how many tiles a store has taken in, as rest/usage.json
// shows it: the tiles it holds and the ones evicted (a seed writes no tile
// twice), so it only grows.
func storedSoFar(u usageDoc) int64 {
	n := u.Tiles
	for _, l := range u.Layers {
		if l.Evicted != nil {
			n += l.Evicted.Tiles
		}
	}
	return n
}

func within(got, want int64, share float64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return float64(d) <= share*float64(want)
}

func TestQuotaSurvivesKills(t *testing.T) {
	n := newNoisyWMS(t)
	dir := storageDir(t)
	cfg := quotaProcConfig(n, dir)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)

	seedBody := `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":5,"type":"seed","threadCount":4}}`
	var logs strings.Builder
	// First the store fills up to its quota and eviction starts.
	p := startProc(t, cfg)
	if a := procREST(t, "POST", "/rest/seed/test:a.json", seedBody); a.status != 200 {
		t.Fatalf("seed: %d %q", a.status, a.body)
	}
	start := time.Now()
	waitFor(t, "evicting", func() bool {
		return procMetric(t, "caddy_tile_cache_evicted_tiles_total") > 0
	})
	t.Logf("the first eviction after %v of seeding", time.Since(start).Round(time.Millisecond))
	p.stop(t, syscall.SIGKILL)
	logs.Write(p.log.Bytes())
	last := readStoreDir(t, copyOf(t, dir)) // the store as the last kill left it
	if last.recounting || last.levelsDiffer != "" || last.recTiles != last.tiles || last.recBytes != last.bytes {
		t.Fatalf("after the first kill: %+v", last)
	}

	// At least 12 kills, and as many more (up to 36) as it takes for 3
	// of them to fall after an eviction: on a loaded machine the seed
	// between two kills may not reach the quota.
	const rounds = 12
	evictingRounds, kills := 0, 0
	for round := 1; round <= rounds || evictingRounds < 3 && round <= 3*rounds; round++ {
		// Nothing new is stored in the first moments after the start, so
		// that rest/usage.json shows the store as the crash left it.
		n.delay.Store(int64(250 * time.Millisecond))
		p := startProc(t, cfg)
		u := procUsage(t)
		if u.Recounting {
			t.Fatalf("round %d: the restarted Caddy recounts usage after a kill", round)
		}
		if !within(u.Tiles, last.tiles, 0.01) || !within(u.Bytes, last.bytes, 0.01) {
			t.Fatalf("round %d: the restarted Caddy reports %d tiles, %d bytes; the store as the kill left it holds %d, %d",
				round, u.Tiles, u.Bytes, last.tiles, last.bytes)
		}
		n.delay.Store(0)
		if !procTasksActive(t) {
			if a := procREST(t, "POST", "/rest/seed/test:a.json", seedBody); a.status != 200 {
				t.Fatalf("round %d: seed: %d %q", round, a.status, a.body)
			}
		}
		// The seed moves in every round, however slow the machine: the
		// kill comes at a random moment after this Caddy has stored three
		// more metatiles. A fixed time, or even two more GetMaps answered,
		// stored nothing in most rounds beside CPU hogs (slicing a
		// metatile took longer than the round), and eviction ran in none
		// or one of 36.
		// A resumed seed may end with fewer than three metatiles left to
		// store (a kill near its end): then a new one is asked for, which
		// fetches what eviction took.
		from := storedSoFar(u)
		waitFor(t, "three more metatiles stored", func() bool {
			if !procTasksActive(t) {
				if a := procREST(t, "POST", "/rest/seed/test:a.json", seedBody); a.status != 200 {
					t.Fatalf("round %d: seed: %d %q", round, a.status, a.body)
				}
			}
			return storedSoFar(procUsage(t)) >= from+3*16
		})
		time.Sleep(time.Duration(rng.IntN(1301)) * time.Millisecond)
		p.stop(t, syscall.SIGKILL)
		kills++
		logs.Write(p.log.Bytes())

		f := readStoreDir(t, copyOf(t, dir))
		t.Logf("round %d: %d tiles, %d bytes; %d tiles evicted so far", round, f.tiles, f.bytes, f.evictedTiles)
		if f.recounting {
			t.Fatalf("round %d: the usage records are not trusted after a kill (a recount runs)", round)
		}
		if f.levelsDiffer != "" || f.recTiles != f.tiles || f.recBytes != f.bytes {
			t.Fatalf("round %d: after a kill the usage records say %d tiles, %d bytes; the store holds %d, %d (%s)",
				round, f.recTiles, f.recBytes, f.tiles, f.bytes, f.levelsDiffer)
		}
		if f.evictedTiles < last.evictedTiles {
			t.Fatalf("round %d: the evicted total went back from %d to %d", round, last.evictedTiles, f.evictedTiles)
		}
		if f.evictedTiles > last.evictedTiles {
			evictingRounds++
		}
		last = f
	}
	if evictingRounds < 3 {
		t.Fatalf("setup: eviction ran in only %d of %d rounds", evictingRounds, kills)
	}

	// The seeding stopped, the store comes within its quota.
	n.delay.Store(int64(250 * time.Millisecond))
	p = startProc(t, cfg)
	if u := procUsage(t); !within(u.Bytes, last.bytes, 0.01) || !within(u.Tiles, last.tiles, 0.01) {
		t.Fatalf("after the last kill: rest/usage.json %d tiles, %d bytes; the store %d, %d", u.Tiles, u.Bytes, last.tiles, last.bytes)
	}
	n.delay.Store(0)
	a := doBody(t, "POST", fmt.Sprintf("http://localhost:%d/geowebcache/rest/seed", procPort), "kill_all=all",
		"Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass)),
		"Content-Type", "application/x-www-form-urlencoded")
	if a.status != 200 {
		t.Fatalf("kill_all: %d %q", a.status, a.body)
	}
	waitFor(t, "seeding stopped", func() bool { return !procTasksActive(t) })
	// A killed task's metatile already on the wire is still stored, maybe
	// after the task shows as killed: rest/usage.json is compared with
	// the store through one more start, in which nothing is stored (no
	// task runs, no visitor comes) and only the quota acts.
	p.stop(t, syscall.SIGTERM)
	logs.Write(p.log.Bytes())
	p = startProc(t, cfg)
	if procTasksActive(t) {
		t.Fatal("setup: a killed seed runs again after a restart")
	}
	var u usageDoc
	waitFor(t, "within the quota", func() bool { u = procUsage(t); return u.Bytes <= killQuota })
	// A pass may still be taking pages: wait until two reads a pass
	// interval apart agree.
	waitFor(t, "usage settled", func() bool {
		time.Sleep(600 * time.Millisecond)
		v := procUsage(t)
		same := v.Tiles == u.Tiles && v.Bytes == u.Bytes
		u = v
		return same
	})
	p.stop(t, syscall.SIGTERM)
	logs.Write(p.log.Bytes())
	f := readStoreDir(t, dir)
	if f.levelsDiffer != "" || f.recTiles != f.tiles || f.recBytes != f.bytes || f.tiles != u.Tiles || f.bytes != u.Bytes {
		t.Fatalf("at the end: rest/usage.json %d tiles, %d bytes, the records %d, %d; the store holds %d, %d (%s)",
			u.Tiles, u.Bytes, f.recTiles, f.recBytes, f.tiles, f.bytes, f.levelsDiffer)
	}
	if f.bytes > killQuota || f.evictedTiles == 0 {
		t.Fatalf("at the end the store holds %d bytes (quota %d), %d tiles evicted", f.bytes, killQuota, f.evictedTiles)
	}
	if !strings.Contains(logs.String(), "tile quota: evicted") {
		t.Fatal(`no "tile quota: evicted" line in the logs of the separate Caddys`)
	}
	t.Logf("at the end %d tiles, %d bytes; %d tiles (%d bytes) evicted in all, in %d of %d rounds",
		f.tiles, f.bytes, f.evictedTiles, f.evBytes, evictingRounds, kills)
}
