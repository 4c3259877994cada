package tilecache

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Two layers, compiled as Provision would compile them (without the store,
// the fetcher and the metrics registry, which matching does not use):
//
//   - test:a: both built-in gridsets, PNG and JPEG, a STYLES filter
//     ("" or "red"), every level, the whole world;
//   - test:b: EPSG:4326 only, JPEG only, levels 2..10, lon 0..90 lat 0..45.
func newTestHandler(t testing.TB) *Cache {
	t.Helper()
	return compileTest(t, testConfig())
}

func testConfig() Config {
	minZ, maxZ := 2, 10
	return Config{
		Upstream:      "http://127.0.0.1:1/wms",
		NeutralParams: []string{"FORMAT_OPTIONS"},
		Layers: []LayerConfig{
			{
				Name:     "test:a",
				Gridsets: []string{"EPSG:4326", "EPSG:900913"},
				Parameters: []params.FilterConfig{
					{Key: "STYLES", Values: []string{"", "red"}},
				},
			},
			{
				Name:     "test:b",
				Formats:  []string{"image/jpeg"},
				Gridsets: []string{"EPSG:4326"},
				MinZoom:  &minZ,
				MaxZoom:  &maxZ,
				Extent:   &[4]float64{0, 0, 90, 45},
			},
		},
	}
}

// compileTest compiles cfg as the app would, without opening anything.
func compileTest(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := compile(t.Name(), cfg)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return c
}

// openTest opens a compiled cache on st (a fresh Badger in a temp dir if
// nil), under a name of its own so that its upstream state is its own.
func openTest(t testing.TB, c *Cache, st store.Store) *Cache {
	t.Helper()
	c.name = fmt.Sprintf("%s-%d", t.Name(), testSeq.Add(1))
	if st == nil {
		b, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st = b
	}
	if err := c.open(zap.NewNop(), st, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Release() })
	return c
}

var testSeq atomic.Int64

// handlerOf is a handler serving c, as Provision binds one.
func handlerOf(t testing.TB, c *Cache, svc *ServicesConfig) *Handler {
	t.Helper()
	h := &Handler{Name: c.name, Services: svc, log: zap.NewNop(), bound: new(lazy[binding])}
	if err := h.bind(c); err != nil {
		t.Fatal(err)
	}
	return h
}

// match runs a raw query through scanWMS and matchTile as ServeHTTP does.
func match(c *Cache, raw string) (tileRequest, string) {
	var q query
	var tr tileRequest
	if reason := c.scanWMS(raw, &q); reason != "" {
		return tr, reason
	}
	return tr, c.matchTile(&q, &tr)
}

// getTile asks h for a tile of layer in EPSG:4326 in the given format.
func getTile(t *testing.T, h *Handler, layer, format string, idx gridset.Index) *httptest.ResponseRecorder {
	t.Helper()
	q := getMap("SERVICE", "WMS", "VERSION", "1.1.1", "REQUEST", "GetMap", "LAYERS", layer, "STYLES", "",
		"FORMAT", format, "SRS", "EPSG:4326", "BBOX", bboxStr(tileBBox(t, "EPSG:4326", idx), false),
		"WIDTH", "256", "HEIGHT", "256")
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Fatalf("tile request passed through")
		return nil
	})
	if err := h.ServeHTTP(w, httptest.NewRequest("GET", "/wms?"+q, nil), next); err != nil {
		t.Fatal(err)
	}
	return w
}
