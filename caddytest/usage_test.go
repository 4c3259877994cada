package caddytest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Usage accounting through a real Caddy: tile_cache's `usage` option and
// the REST interface's rest/usage.json, against the fake WMS and the real
// Badger store, whose tiles are read back to check every figure.

// usageDoc is rest/usage.json as the tests read it (over S3 too).
type usageDoc struct {
	Recounting bool   `json:"recounting"`
	Estimate   bool   `json:"estimate"`
	ListedAt   string `json:"listedAt"`
	Tiles      int64  `json:"tiles"`
	Bytes      int64  `json:"bytes"`
	Layers     []struct {
		Name       string     `json:"name"`
		Tiles      int64      `json:"tiles"`
		Bytes      int64      `json:"bytes"`
		LastAccess string     `json:"lastAccess"`
		Unlisted   *tileCount `json:"unlisted"`
		Evicted    *tileCount `json:"evicted"`
		TileSets   []struct {
			GridSetID    string  `json:"gridSetId"`
			Format       string  `json:"format"`
			ParametersID string  `json:"parametersId"`
			Parameters   *string `json:"parameters"`
			Tiles        int64   `json:"tiles"`
			Bytes        int64   `json:"bytes"`
			LastAccess   string  `json:"lastAccess"`
			Levels       []struct {
				Zoom  int   `json:"zoom"`
				Tiles int64 `json:"tiles"`
				Bytes int64 `json:"bytes"`
			} `json:"levels"`
		} `json:"tileSets"`
	} `json:"layers"`
	Quota *struct {
		MaxSize int64 `json:"maxSize"`
	} `json:"quota"`
}

type tileCount struct {
	Tiles int64 `json:"tiles"`
	Bytes int64 `json:"bytes"`
}

// getUsage reads rest/usage.json of a store that always counted.
func getUsage(t *testing.T) usageDoc {
	t.Helper()
	u := readUsage(t)
	if u.Recounting {
		t.Fatal("rest/usage.json says a recount runs, on a store that always counted")
	}
	return u
}

func readUsage(t *testing.T) usageDoc {
	t.Helper()
	a := rest(t, "GET", "/rest/usage.json", "", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET rest/usage.json: %d %s %q", a.status, a.header.Get("Content-Type"), a.body)
	}
	var u usageDoc
	if err := json.Unmarshal(a.body, &u); err != nil {
		t.Fatalf("rest/usage.json: %v: %s", err, a.body)
	}
	return u
}

// levelFigures reads set's stored tiles at level z back from the store:
// how many, and the bytes their values take (image and 17-byte header;
// the fake WMS's tiles are small, so Badger's size is exact for them).
func levelFigures(t *testing.T, dir string, set store.Set, g *gridset.Gridset, z int) (tiles, bytes int64) {
	t.Helper()
	eachStoredTile(t, openBadger(t, dir), set, g, z, func(_, _ int64, tile store.Tile) {
		tiles++
		bytes += int64(len(tile.Data)) + 17
	})
	return tiles, bytes
}

// eachStoredTile calls fn with every tile of set stored at level z, read
// cell by cell with Get (each read counts as a hit on its page).
func eachStoredTile(t *testing.T, b *store.Badger, set store.Set, g *gridset.Gridset, z int, fn func(x, y int64, tile store.Tile)) {
	t.Helper()
	r := g.GridRange(z)
	for y := r.MinY; y <= r.MaxY; y++ {
		for x := r.MinX; x <= r.MaxX; x++ {
			tile, err := b.Get(context.Background(), store.Key{Set: set, Z: z, X: x, Y: y}, nil)
			if err == store.ErrNotFound {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			fn(x, y, tile)
		}
	}
}

func TestUsageThroughREST(t *testing.T) {
	f := newFakeWMS(t)
	e := &restEnv{t: t, f: f, name: fmt.Sprintf("rest%d", restSeq.Add(1)), dir: storageDir(t)}
	// The Badger store in every pass of the suite: usage is not counted on S3.
	load(t, siteConfig{admin: ptr("cache " + e.name + "\n\t\t\tworkers 2"), upstream: f.URL, tiles: `
		upstream ` + f.URL + `/wms
		storage ` + e.dir + `
		usage
		timeout 30s
		name ` + e.name + "\n" + restLayers}.String())
	t.Cleanup(e.cleanup)

	if u := getUsage(t); u.Tiles != 0 || u.Bytes != 0 || len(u.Layers) != 0 {
		t.Fatalf("usage of an empty cache: %+v", u)
	}
	g, _ := gridset.Builtin("EPSG:4326")
	set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: paramsHash(t, e.name, "test:a", nil)}
	ti := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"type":"seed","threadCount":2}}`))
	if ti.State != "DONE" || ti.FailedTiles != 0 {
		t.Fatalf("seed %+v", ti)
	}
	// A visitor's miss in another parameter set: a tile set of its own.
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 5, Y: 3, Z: 4}, "STYLES", "population"))), "MISS")

	check := func(when string) {
		t.Helper()
		u := getUsage(t)
		var sum int64
		for _, l := range u.Layers {
			if l.Name != "test:a" {
				t.Fatalf("%s: usage of layer %q, which holds nothing", when, l.Name)
			}
			for _, ts := range l.TileSets {
				if ts.GridSetID != "EPSG:4326" || ts.Format != "image/png" {
					t.Fatalf("%s: tile set %+v", when, ts)
				}
				s := store.Set{Layer: l.Name, Gridset: ts.GridSetID, Format: ts.Format, Params: ts.ParametersID}
				var setTiles int64
				for _, lv := range ts.Levels {
					tiles, bytes := levelFigures(t, e.dir, s, g, lv.Zoom)
					if lv.Tiles != tiles || lv.Bytes != bytes || tiles == 0 {
						t.Fatalf("%s: level %d of %s: usage says %d tiles, %d bytes; the store holds %d, %d",
							when, lv.Zoom, ts.ParametersID, lv.Tiles, lv.Bytes, tiles, bytes)
					}
					setTiles += tiles
				}
				if ts.Tiles != setTiles {
					t.Fatalf("%s: tile set total %d, levels %d", when, ts.Tiles, setTiles)
				}
				if ts.ParametersID != set.Params && (ts.Parameters == nil || !strings.Contains(*ts.Parameters, "population")) {
					t.Fatalf("%s: the population set's parameters %v", when, ts.Parameters)
				}
				sum += ts.Tiles
			}
		}
		if u.Tiles != sum {
			t.Fatalf("%s: total %d, tile sets %d", when, u.Tiles, sum)
		}
	}
	check("after the seed and a miss")
	u := getUsage(t)
	if len(u.Layers) != 1 || len(u.Layers[0].TileSets) != 2 || u.Tiles != ti.Total+16 {
		t.Fatalf("after seeding %d tiles and one 16-tile metatile: %+v", ti.Total, u)
	}
	// The same figures on Caddy's /metrics.
	labels := `dir="` + e.dir + `",layer="test:a"`
	if tiles, bytes := metric(t, "caddy_tile_cache_usage_tiles", labels), metric(t, "caddy_tile_cache_usage_bytes", labels); int64(tiles) != u.Tiles || int64(bytes) != u.Bytes {
		t.Fatalf("metrics say %v tiles, %v bytes; rest/usage.json %d, %d", tiles, bytes, u.Tiles, u.Bytes)
	}

	// A range truncation of level 3 (the west half): its tiles leave the count.
	tt := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":3,"zoomStop":3,"type":"truncate",`+
		`"bounds":{"coords":{"double":[-180,-90,0,90]}}}}`))
	if tt.State != "DONE" {
		t.Fatalf("truncate %+v", tt)
	}
	check("after truncating half of level 3")
	if after := getUsage(t); tt.Total == 0 || after.Tiles != u.Tiles-tt.Total {
		t.Fatalf("truncating %d stored tiles took the count from %d to %d", tt.Total, u.Tiles, after.Tiles)
	}

	// Mass truncation: the layer goes from the usage with its answer.
	a := rest(t, "POST", "/rest/masstruncate", "text/xml", "<truncateLayer><layerName>test:a</layerName></truncateLayer>")
	if a.status != 200 {
		t.Fatalf("masstruncate: %d %q", a.status, a.body)
	}
	if u := getUsage(t); u.Tiles != 0 || u.Bytes != 0 || len(u.Layers) != 0 {
		t.Fatalf("usage after truncateLayer: %+v", u)
	}
}

// Without the option the resource says how to get it, and changes nothing.
func TestUsageOffIsA404(t *testing.T) {
	newREST(t, "", "")
	a := rest(t, "GET", "/rest/usage.json", "", "")
	mustPlain(t, "usage without the option", a, 404)
	if !strings.Contains(string(a.body), "usage") {
		t.Fatalf("the 404 does not say what to turn on: %q", a.body)
	}
	if a := rest(t, "POST", "/rest/usage.json", "application/json", "{}"); a.status != 405 {
		t.Fatalf("POST rest/usage.json: %d", a.status)
	}
}
