package caddytest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// corsLines are docs/gis-clients.md's lines that let web maps on other origins
// read the tile services (capabilities with fetch(), tiles into a canvas).
const corsLines = `
	@maps path /wms* /wmts* /tms* /xyz*
	header @maps Access-Control-Allow-Origin *`

// clientsConfig is a site with the cache (WMTS and XYZ on, layer test:a in
// front of f) and the Leaflet pages under /leaflet/, plus a second site on
// otherPort serving the same pages: another origin. cors puts docs/gis-clients.md's
// CORS lines in the cache's site.
func clientsConfig(t *testing.T, f *fakeWMS, otherPort int, cors bool) string {
	pages, err := filepath.Abs("testdata/leaflet")
	if err != nil {
		t.Fatal(err)
	}
	extra := ""
	if cors {
		extra = corsLines
	}
	return fmt.Sprintf(`
http://localhost:%d {%s
	handle_path /leaflet/* {
		root * %s
		file_server
	}
	handle {
		tile_cache {
			upstream %s/wms
			storage %s
			services {
				wmts /wmts
				xyz /xyz
			}
			layer test:a {
				gridsets EPSG:4326 EPSG:900913
			}
		}
		reverse_proxy %s
	}
}
http://localhost:%d {
	root * %s
	file_server
}
`, httpPort, extra, pages, f.URL, storeLines(storageDir(t)), strings.TrimPrefix(f.URL, "http://"), otherPort, pages)
}

// Leaflet 1.9 (L.tileLayer.wms in EPSG:3857 and EPSG:4326, L.tileLayer on
// XYZ), configured as docs/gis-clients.md tells its users: every tile comes from
// the cache (none passes it by to the upstream), none fails, and a reload
// is all hits.
func TestBrowserLeaflet(t *testing.T) {
	clientsOnce(t)
	other, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"wms3857", "wms4326", "xyz"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeWMS(t)
			load(t, clientsConfig(t, f, other, false))
			b := newBrowser(t)
			page := fmt.Sprintf("http://localhost:%d/leaflet/map.html?mode=%s", httpPort, mode)
			for round := 1; round <= 2; round++ {
				b.do(chromedp.Navigate(page))
				b.waitFor("the tiles", `window.done === true && window.tiles.loaded > 0`)
				tiles := eval[map[string]int](b, `window.tiles`)
				resp := b.takeResponses()
				if tiles["failed"] != 0 || len(resp) != tiles["loaded"] {
					t.Fatalf("round %d: %v tiles, %d tile responses", round, tiles, len(resp))
				}
				for u, got := range resp {
					want := map[bool]string{true: "200 HIT", false: "200 MISS"}
					if got[0] != want[true] && (round == 2 || got[0] != want[false]) {
						t.Errorf("round %d: %s answered %v", round, u, got)
					}
				}
			}
			if n := f.others.Load(); n != 0 {
				t.Errorf("%d requests passed the cache by", n)
			}
			b.checkNoErrors()
		})
	}
}

// A web map on another origin reads the WMTS capabilities and a tile's
// pixels with docs/gis-clients.md's CORS lines, and cannot without them.
func TestBrowserCrossOriginMap(t *testing.T) {
	other, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, cors := range []bool{true, false} {
		t.Run(fmt.Sprintf("cors=%v", cors), func(t *testing.T) {
			f := newFakeWMS(t)
			load(t, clientsConfig(t, f, other, cors))
			b := newBrowser(t)
			b.do(chromedp.Navigate(fmt.Sprintf("http://localhost:%d/cors.html?cache=http://localhost:%d", other, httpPort)))
			b.waitFor("the result", `!!window.result`)
			r := eval[map[string]string](b, `window.result`)
			if cors && (r["caps"] != "ok" || r["pixels"] != "ok") {
				t.Errorf("with the CORS lines: %v", r)
			}
			if !cors && (r["caps"] == "ok" || r["pixels"] == "ok") {
				t.Errorf("without them the other origin could read: %v", r)
			}
		})
	}
}
