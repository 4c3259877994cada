package caddytest

import (
	"bytes"
	"fmt"
	"image"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// fakeConfig is a site with tile_cache in front of a fake WMS, and
// reverse_proxy to the same WMS for everything that is not a tile.
func fakeConfig(t *testing.T, f *fakeWMS, storage, extra string) string {
	return siteConfig{upstream: f.URL, tiles: `
		upstream ` + f.URL + `/wms?map=/srv/world.map
		storage ` + storeLines(storage) + `
		timeout 30s
		layer test:a {
			gridsets EPSG:4326 EPSG:900913
			client_expiry 1h
			param STYLES {
				default ""
				values "" population
			}
		}
		layer test:b {
			gridsets EPSG:4326
			formats image/jpeg
			metatile 2 2
			gutter 8
		}
		` + extra}.String()
}

func TestMissThenHitWithHeaders(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	idx := gridset.Index{X: 5, Y: 2, Z: 2}
	u := siteURL(tileQuery("test:a", "EPSG:4326", idx))

	first := get(t, u)
	mustTile(t, first, "MISS")
	if f.getMaps.Load() != 1 {
		t.Fatalf("upstream GetMaps %d, want 1", f.getMaps.Load())
	}
	second := get(t, u)
	img := mustTile(t, second, "HIT")
	if !bytes.Equal(first.body, second.body) {
		t.Fatal("hit body differs from miss body")
	}
	if img.Bounds().Dx() != 256 || img.Bounds().Dy() != 256 {
		t.Fatalf("tile is %v", img.Bounds())
	}
	h := second.header
	for k, want := range map[string]string{
		"Content-Type":           "image/png",
		"Cache-Control":          "public, max-age=3600",
		"Geowebcache-Tile-Index": "[5, 2, 2]",
		"Geowebcache-Gridset":    "EPSG:4326",
		"Geowebcache-Crs":        "EPSG:4326",
		"Cache-Status":           "tile_cache; hit",
		"Etag":                   first.header.Get("Etag"),
		"Last-Modified":          first.header.Get("Last-Modified"),
	} {
		if got := h.Get(k); got != want || want == "" {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if !strings.HasPrefix(first.header.Get("Cache-Status"), "tile_cache; fwd=miss") {
		t.Errorf("miss Cache-Status %q", first.header.Get("Cache-Status"))
	}
	// Every other tile of that 4×4 metatile came with the one GetMap.
	for x := int64(4); x < 8; x++ {
		for y := int64(0); y < 4; y++ {
			mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: x, Y: y, Z: 2}))), "HIT")
		}
	}
	if f.getMaps.Load() != 1 {
		t.Fatalf("upstream GetMaps %d after the whole metatile, want 1", f.getMaps.Load())
	}
	// The upstream request kept the configured ?map= and asked for the metatile.
	q, _ := url.ParseQuery(f.lastGetMap())
	if q.Get("map") != "/srv/world.map" || q.Get("WIDTH") != "1024" || q.Get("HEIGHT") != "1024" ||
		q.Get("SRS") != "EPSG:4326" || q.Get("BBOX") != "0,-90,180,90" || q.Get("LAYERS") != "test:a" {
		t.Errorf("upstream query %s", f.lastGetMap())
	}
}

// Tiles sliced from one metatile are each their own part of it: the fake
// paints R = x/4 and G = y/4 in metatile image pixels, y from the top.
func TestSlicingPlacesEachTile(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	for x := int64(4); x < 8; x++ {
		for y := int64(0); y < 4; y++ {
			img := mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: x, Y: y, Z: 2}))), wantResult(x, y))
			col, row := int(x-4), int(3-y) // image rows count from the top
			r0, g0, _, _ := img.At(0, 0).RGBA()
			r1, g1, _, _ := img.At(255, 255).RGBA()
			if int(r0>>8) != col*64 || int(g0>>8) != row*64 || int(r1>>8) != col*64+63 || int(g1>>8) != row*64+63 {
				t.Errorf("tile %d,%d: corners (%d,%d) (%d,%d), want (%d,%d) (%d,%d)", x, y,
					r0>>8, g0>>8, r1>>8, g1>>8, col*64, row*64, col*64+63, row*64+63)
			}
		}
	}
}

// The first tile asked for fetches the metatile; the rest are hits.
func wantResult(x, y int64) string {
	if x == 4 && y == 0 {
		return "MISS"
	}
	return "HIT"
}

func TestConditionalRequestsAndHead(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	u := siteURL(tileQuery("test:a", "EPSG:900913", gridset.Index{X: 1, Y: 2, Z: 2}))
	first := get(t, u)
	mustTile(t, first, "MISS")
	etag, lm := first.header.Get("Etag"), first.header.Get("Last-Modified")

	for _, c := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"matching etag", []string{"If-None-Match", etag}, 304},
		{"etag in a list", []string{"If-None-Match", `"nope", ` + etag}, 304},
		{"weak etag", []string{"If-None-Match", "W/" + etag}, 304},
		{"star", []string{"If-None-Match", "*"}, 304},
		{"other etag", []string{"If-None-Match", `"0123"`}, 200},
		{"not modified since", []string{"If-Modified-Since", lm}, 304},
		{"modified since", []string{"If-Modified-Since", "Mon, 01 Jan 2001 00:00:00 GMT"}, 200},
		// If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
		{"etag mismatch beats date", []string{"If-None-Match", `"0123"`, "If-Modified-Since", lm}, 200},
	} {
		a := get(t, u, c.hdr...)
		if a.status != c.want {
			t.Errorf("%s: status %d, want %d", c.name, a.status, c.want)
		}
		if c.want == 304 && (len(a.body) != 0 || a.header.Get("Etag") != etag) {
			t.Errorf("%s: 304 with body %d bytes, etag %q", c.name, len(a.body), a.header.Get("Etag"))
		}
	}
	head := do(t, "HEAD", u)
	if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Length") != fmt.Sprint(len(first.body)) ||
		head.header.Get("Geowebcache-Cache-Result") != "HIT" {
		t.Errorf("HEAD: %d, body %d, length %q, result %q", head.status, len(head.body),
			head.header.Get("Content-Length"), head.header.Get("Geowebcache-Cache-Result"))
	}
	if f.getMaps.Load() != 1 {
		t.Errorf("GetMaps %d", f.getMaps.Load())
	}
}

func TestNonTileRequestsPassThroughUntouched(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	tile := tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 1})
	with := func(k, v string) url.Values {
		q := url.Values{}
		for kk, vv := range tile {
			q[kk] = append([]string(nil), vv...)
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return q
	}
	cases := map[string]struct {
		q      url.Values
		reason string
	}{
		"GetCapabilities":    {url.Values{"SERVICE": {"WMS"}, "REQUEST": {"GetCapabilities"}}, "not-getmap"},
		"GetFeatureInfo":     {with("REQUEST", "GetFeatureInfo"), "not-getmap"},
		"untiled size":       {with("WIDTH", "800"), "size"},
		"misaligned bbox":    {with("BBOX", "-150,-90,30,90"), "bbox"},
		"unknown parameter":  {with("CQL_FILTER", "x=1"), "unknown-parameter"},
		"unknown layer":      {with("LAYERS", "test:nope"), "unknown-layer"},
		"two layers":         {with("LAYERS", "test:a,test:b"), "unknown-layer"},
		"format not cached":  {with("FORMAT", "image/gif"), "format"},
		"unknown srs":        {with("SRS", "EPSG:2056"), "srs"},
		"style not allowed":  {with("STYLES", "nope"), "parameter"},
		"layer has no style": {with("LAYERS", "test:b"), "format"}, // test:b is jpeg only
		"duplicate bbox":     {nil, "duplicate-parameter"},
	}
	for name, c := range cases {
		var u string
		if c.q == nil {
			u = siteURL(tile) + "&bbox=0,0,1,1"
		} else {
			u = siteURL(c.q)
		}
		before := f.others.Load() + f.getMaps.Load()
		a := get(t, u)
		if a.status != 200 || !strings.HasPrefix(string(a.body), "fake WMS passthrough") && !bytes.HasPrefix(a.body, []byte("\x89PNG")) {
			t.Errorf("%s: status %d body %q", name, a.status, truncate(a.body))
		}
		if got := a.header.Get("Geowebcache-Miss-Reason"); got != c.reason {
			t.Errorf("%s: miss reason %q, want %q", name, got, c.reason)
		}
		if after := f.others.Load() + f.getMaps.Load(); after != before+1 {
			t.Errorf("%s: upstream saw %d requests, want 1", name, after-before)
		}
	}
	// POST is never a tile request.
	a := do(t, "POST", siteURL(tile))
	if a.header.Get("Geowebcache-Miss-Reason") != "method" {
		t.Errorf("POST: reason %q", a.header.Get("Geowebcache-Miss-Reason"))
	}
}

func TestUpstreamFailuresAnswer502AndCacheNothing(t *testing.T) {
	f := newFakeWMS(t)
	// An upstream timeout of its own, short enough for the slow mode to
	// pass it and long enough for a good answer beside CPU hogs.
	load(t, strings.Replace(fakeConfig(t, f, storageDir(t), ""), "timeout 30s", "timeout 3s", 1))
	for i, mode := range []string{"500", "exception", "text", "slow"} {
		delay := time.Duration(0)
		if mode == "slow" {
			delay = 20 * time.Second // far past the timeout
		}
		f.set(mode, delay)
		u := siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: int64(4 * i), Y: 1, Z: 3}))
		a := get(t, u)
		if a.status != 502 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") ||
			bytes.Count(bytes.TrimSpace(a.body), []byte("\n")) != 0 || len(a.body) == 0 {
			t.Errorf("%s: status %d, type %q, body %q", mode, a.status, a.header.Get("Content-Type"), a.body)
		}
		f.set("", 0)
		before := f.getMaps.Load()
		mustTile(t, get(t, u), "MISS") // nothing was stored by the failure
		if f.getMaps.Load() != before+1 {
			t.Errorf("%s: recovery took %d GetMaps", mode, f.getMaps.Load()-before)
		}
	}
}

func TestConcurrentMissesMakeOneUpstreamRequest(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	f.set("", 300*time.Millisecond) // keep the flight open while all 50 arrive
	var wg sync.WaitGroup
	results := make([]answer, 50)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 16 different tiles of the one metatile (x 8..11, y 4..7 at z 4).
			idx := gridset.Index{X: 8 + int64(i%4), Y: 4 + int64(i/4%4), Z: 4}
			results[i] = get(t, siteURL(tileQuery("test:a", "EPSG:900913", idx)))
		}()
	}
	wg.Wait()
	for i, a := range results {
		if a.status != 200 {
			t.Fatalf("request %d: %d %q", i, a.status, truncate(a.body))
		}
	}
	if n := f.getMaps.Load(); n != 1 {
		t.Fatalf("50 concurrent misses made %d upstream GetMaps, want 1", n)
	}
}

func TestWMS130AxisOrderHitsTheSameTile(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	idx := gridset.Index{X: 3, Y: 1, Z: 1} // lon 90..180, lat 0..90
	miss := get(t, siteURL(tileQuery("test:a", "EPSG:4326", idx)))
	mustTile(t, miss, "MISS")
	q := tileQuery("test:a", "EPSG:4326", idx, "VERSION", "1.3.0", "CRS", "EPSG:4326", "BBOX", "0,90,90,180")
	q.Del("SRS")
	hit := get(t, siteURL(q))
	mustTile(t, hit, "HIT")
	if hit.header.Get("Geowebcache-Tile-Index") != "[3, 1, 1]" || !bytes.Equal(hit.body, miss.body) {
		t.Errorf("1.3.0 lat/lon hit %s", hit.header.Get("Geowebcache-Tile-Index"))
	}
	// CRS:84 keeps lon/lat order in 1.3.0.
	q = tileQuery("test:a", "EPSG:4326", idx, "VERSION", "1.3.0", "CRS", "CRS:84")
	q.Del("SRS")
	mustTile(t, get(t, siteURL(q)), "HIT")
	// The EPSG:3857 code is an alias of the 900913 gridset.
	m := tileQuery("test:a", "EPSG:900913", gridset.Index{X: 0, Y: 0, Z: 0})
	mustTile(t, get(t, siteURL(m)), "MISS")
	m.Set("SRS", "EPSG:3857")
	mustTile(t, get(t, siteURL(m)), "HIT")
	// Parameter names are case-insensitive.
	lower := url.Values{}
	for k, v := range tileQuery("test:a", "EPSG:4326", idx) {
		lower[strings.ToLower(k)] = v
	}
	mustTile(t, get(t, siteURL(lower)), "HIT")
}

func TestParameterFiltersSplitAndShareTiles(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	idx := gridset.Index{X: 0, Y: 0, Z: 0}
	def := get(t, siteURL(tileQuery("test:a", "EPSG:4326", idx)))
	mustTile(t, def, "MISS")
	pop := get(t, siteURL(tileQuery("test:a", "EPSG:4326", idx, "STYLES", "population")))
	mustTile(t, pop, "MISS") // another tile set
	if bytes.Equal(def.body, pop.body) {
		t.Error("population tile equals default tile")
	}
	if q, _ := url.ParseQuery(f.lastGetMap()); q.Get("STYLES") != "population" {
		t.Errorf("upstream STYLES %q", q.Get("STYLES"))
	}
	lower := tileQuery("test:a", "EPSG:4326", idx)
	lower.Del("STYLES")
	lower.Set("styles", "population")
	again := get(t, siteURL(lower))
	mustTile(t, again, "HIT")
	if !bytes.Equal(again.body, pop.body) {
		t.Error("population hit differs")
	}
}

func TestJPEGLayerWithGutter(t *testing.T) {
	f := newFakeWMS(t)
	load(t, fakeConfig(t, f, storageDir(t), ""))
	idx := gridset.Index{X: 4, Y: 2, Z: 3} // interior 2×2 metatile: gutter on all sides
	a := get(t, siteURL(tileQuery("test:b", "EPSG:4326", idx, "FORMAT", "image/jpeg")))
	img := mustTile(t, a, "MISS")
	if a.header.Get("Content-Type") != "image/jpeg" || img.Bounds() != image.Rect(0, 0, 256, 256) {
		t.Fatalf("type %q bounds %v", a.header.Get("Content-Type"), img.Bounds())
	}
	q, _ := url.ParseQuery(f.lastGetMap())
	if q.Get("WIDTH") != "528" || q.Get("HEIGHT") != "528" || q.Get("FORMAT") != "image/jpeg" || q.Get("TRANSPARENT") != "" {
		t.Errorf("upstream %s", f.lastGetMap())
	}
}

func TestReloadKeepsTilesAndTheOpenStore(t *testing.T) {
	f := newFakeWMS(t)
	dir := storageDir(t)
	load(t, fakeConfig(t, f, dir, ""))
	u := siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 0, Y: 0, Z: 1}))
	mustTile(t, get(t, u), "MISS")
	opens := metric(t, "caddy_tile_cache_store_opens_total", "")
	if opens == 0 {
		t.Fatal("no store_opens_total metric")
	}
	// A different config (one more layer) on the same directory.
	load(t, fakeConfig(t, f, dir, "layer test:c"))
	mustTile(t, get(t, u), "HIT")
	if got := metric(t, "caddy_tile_cache_store_opens_total", ""); got != opens {
		t.Errorf("reload opened the store again: %v opens, was %v", got, opens)
	}
	if f.getMaps.Load() != 1 {
		t.Errorf("GetMaps %d", f.getMaps.Load())
	}
	if h := metric(t, "caddy_tile_cache_hits_total", `layer="test:a"`); h < 1 {
		t.Errorf("hits metric %v", h)
	}
}

func TestJSONConfig(t *testing.T) {
	f := newFakeWMS(t)
	u, _ := url.Parse(f.URL)
	cfg := fmt.Sprintf(`{
	"admin": {"listen": %q},
	"apps": {"http": {"http_port": %d, "servers": {"tiles": {
		"listen": [":%d"],
		"automatic_https": {"disable": true},
		"routes": [{"handle": [
			{"handler": "tile_cache", "upstream": %q, %s,
			 "layers": [{"name": "test:j", "gridsets": ["EPSG:900913"], "metatile_width": 1, "metatile_height": 1,
			             "parameters": [{"key": "CQL_FILTER", "default": "1=1", "regex": "[a-z0-9=]+"}]}]},
			{"handler": "reverse_proxy", "upstreams": [{"dial": %q}]}
		]}]
	}}}}
}`, adminAddr, httpPort, httpPort, f.URL+"/wms", storeJSON(storageDir(t)), u.Host)
	newJSONTester(t, cfg)
	a := get(t, siteURL(tileQuery("test:j", "EPSG:900913", gridset.Index{X: 1, Y: 1, Z: 1})))
	mustTile(t, a, "MISS")
	q, _ := url.ParseQuery(f.lastGetMap())
	if q.Get("WIDTH") != "256" || q.Get("CQL_FILTER") != "1=1" || q.Get("SRS") != "EPSG:3857" {
		t.Errorf("upstream %s", f.lastGetMap())
	}
	b := get(t, siteURL(tileQuery("test:j", "EPSG:900913", gridset.Index{X: 1, Y: 1, Z: 1}, "CQL_FILTER", "pop=3")))
	mustTile(t, b, "MISS")
	if q, _ := url.ParseQuery(f.lastGetMap()); q.Get("CQL_FILTER") != "pop=3" {
		t.Errorf("filter value not sent: %s", f.lastGetMap())
	}
	c := get(t, siteURL(tileQuery("test:j", "EPSG:900913", gridset.Index{X: 1, Y: 1, Z: 1}, "CQL_FILTER", "POP>3")))
	if c.header.Get("Geowebcache-Miss-Reason") != "parameter" {
		t.Errorf("rejected filter value: reason %q", c.header.Get("Geowebcache-Miss-Reason"))
	}
}
