package caddytest

// Issue 31's tile formats in web maps: Leaflet (testdata/leaflet/formats.html)
// and OpenLayers on the demo page, in headless Chromium, in front of MapServer.

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// --- browsers ---

// waitPatiently polls a JavaScript expression until it is true. The bound
// (eventPatience) only ends a hung page: a first load renders metatiles of
// the shaded relief reprojected, which beside CPU hogs takes long.
func waitPatiently(b *browser, what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, eventPatience+10*time.Second)
	defer cancel()
	var err error
	for try := 0; try < 5; try++ {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](expr,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(eventPatience)))
		// A navigation that replaces the page's JavaScript context while
		// the poll runs (a reload still settling) is no answer: poll the
		// new context.
		if err == nil || !strings.Contains(err.Error(), "Cannot find context with specified id") {
			break
		}
	}
	if err != nil {
		if p, err := b.shoot("failed-" + strings.NewReplacer("/", "-", ":", "_").Replace(b.t.Name())); err == nil {
			b.t.Logf("screenshot: %s", p)
		}
		b.t.Fatalf("waiting for %s: %v (page errors: %v)", what, err, b.errors())
	}
}

// browserFormats are the formats the web maps draw: 8-bit PNG, the mixed
// format (JPEG and 8-bit PNG tiles in one map) and lossless WebP.
var browserFormats = []struct{ format, ext string }{
	{"image/png8", "png8"}, {"image/vnd.jpeg-png8", "jpeg-png8"}, {"image/webp", "webp"},
}

// formatsBrowserConfig is a site with the cache in front of MapServer
// (test:polygons and test:relief in every format; WMTS, XYZ and the demo
// page on) and the
// Leaflet pages under /leaflet/.
func formatsBrowserConfig(t *testing.T, up string) string {
	pages, err := filepath.Abs("testdata/leaflet")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	return fmt.Sprintf(`
http://localhost:%d {
	# Chromium asks for it on the demo page; a 404 would be a page error.
	handle /favicon.ico {
		respond 204
	}
	handle_path /leaflet/* {
		root * %s
		file_server
	}
	handle {
		tile_cache {
			upstream %s
			storage %s
			timeout 60s
			services {
				demo /demo
				wmts /wmts
				xyz /xyz
			}
			layer test:polygons {
				gridsets EPSG:4326 EPSG:900913
				formats %s
			}
			layer test:relief {
				gridsets EPSG:4326 EPSG:900913
				formats %s
			}
		}
		%s
	}
}
`, httpPort, pages, up, storeLines(storageDir(t)), allTileFormats, allTileFormats, indentAll(forwardMapServer.lines(u.Host), 2))
}

// tileTypes records the Content-Type of every tile response the tab gets
// (the browser type records status and cache result only).
type tileTypes struct {
	mu    sync.Mutex
	types map[string]int // Content-Type → responses
}

func watchTileTypes(t *testing.T, b *browser) *tileTypes {
	tt := &tileTypes{types: map[string]int{}}
	err := chromedp.Listen(b.ctx, func(ev any) {
		e, ok := ev.(*network.EventResponseReceived)
		if !ok {
			return
		}
		u := e.Response.URL
		if strings.Contains(u, "/wms?") || strings.Contains(u, "/xyz/") || strings.Contains(u, "/wmts/1.0.0/") ||
			strings.Contains(u, "/wmts?") && strings.Contains(strings.ToLower(u), "gettile") {
			tt.mu.Lock()
			tt.types[header(e.Response.Headers, "content-type")]++
			tt.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func (tt *tileTypes) take() map[string]int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	r := tt.types
	tt.types = map[string]int{}
	return r
}

// checkTypes asserts the Content-Types of a map's tiles: each of want
// seen, nothing else.
func checkTypes(t *testing.T, format string, types map[string]int, want ...string) {
	t.Helper()
	got := 0
	for _, ct := range want {
		if types[ct] == 0 {
			t.Errorf("%s: no tile answered as %s (%v)", format, ct, types)
		}
		got += types[ct]
	}
	if total := sumValues(types); got != total || total == 0 {
		t.Errorf("%s: tiles answered as %v, want %q only", format, types, want)
	}
}

// mapTypes are the Content-Types of a map of layers in a format: PNG for
// png8, WebP, and for the mixed format JPEG for the relief's opaque tiles
// and PNG for test:polygons (never fully opaque).
func mapTypes(format string, layers ...string) []string {
	switch format {
	case "image/webp":
		return []string{"image/webp"}
	case "image/vnd.jpeg-png8":
		var out []string
		if slices.Contains(layers, "test:relief") {
			out = append(out, "image/jpeg")
		}
		if slices.Contains(layers, "test:polygons") {
			out = append(out, "image/png")
		}
		return out
	}
	return []string{"image/png"}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Leaflet 1.9 draws test:polygons over test:relief in png8, the mixed
// format and WebP, on XYZ (L.tileLayer, the format's extension) and WMS-C
// (L.tileLayer.wms with format=...), in EPSG:3857 at zoom 2 (the whole
// map, polar band included): every tile loads as a 256-pixel image with pixels drawn,
// none fails, each answered by the cache with the format's Content-Type
// (both JPEG and PNG for the mixed one), a reload is all hits, and the page
// logs no error.
func TestFormatsBrowserLeaflet(t *testing.T) {
	clientsOnce(t)
	up := mapServer(t)
	load(t, formatsBrowserConfig(t, up))
	for _, f := range browserFormats {
		for _, mode := range []string{"xyz", "wms"} {
			t.Run(f.ext+"-"+mode, func(t *testing.T) {
				b := newBrowser(t)
				types := watchTileTypes(t, b)
				page := fmt.Sprintf("http://localhost:%d/leaflet/formats.html?mode=%s&format=%s&ext=%s",
					httpPort, mode, url.QueryEscape(f.format), f.ext)
				for round := 1; round <= 2; round++ {
					b.do(chromedp.Navigate(page))
					waitPatiently(b, "the tiles", `window.done === true && window.tiles.loaded > 0`)
					tiles := eval[map[string]int](b, `window.tiles`)
					resp := b.takeResponses()
					got := types.take()
					if tiles["failed"] != 0 || tiles["empty"] != 0 || tiles["blank"] != 0 || len(resp) != tiles["loaded"] || tiles["loaded"] != 32 {
						t.Fatalf("round %d: %v tiles, %d tile responses: %v", round, tiles, len(resp), resp)
					}
					for u, rs := range resp {
						if len(rs) != 1 || rs[0] != "200 HIT" && (round == 2 || rs[0] != "200 MISS") {
							t.Errorf("round %d: %s answered %v", round, u, rs)
						}
					}
					checkTypes(t, f.format, got, mapTypes(f.format, "test:relief", "test:polygons")...)
					t.Logf("round %d: %v; Content-Types %v", round, tiles, got)
				}
				b.screenshot("formats-leaflet-" + f.ext + "-" + mode)
				b.checkNoErrors()
			})
		}
	}
}

// imageWatch counts, in the page, every image given a blob: URL (the demo
// page's tiles, fetched and handed to OpenLayers as blobs): loaded with a
// width, loaded empty, or failed to decode.
const imageWatch = `(() => {
	window.blobImages = {loaded: 0, empty: 0, failed: 0};
	const d = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, 'src');
	Object.defineProperty(HTMLImageElement.prototype, 'src', {
		configurable: true, enumerable: d.enumerable,
		get() { return d.get.call(this); },
		set(v) {
			if (typeof v === 'string' && v.startsWith('blob:') && !this.blobWatched) {
				this.blobWatched = true;
				this.addEventListener('load', () => { window.blobImages[this.naturalWidth === 256 ? 'loaded' : 'empty']++; });
				this.addEventListener('error', () => { window.blobImages.failed++; });
			}
			d.set.call(this, v);
		},
	});
})();`

// OpenLayers 10 on the demo page draws test:polygons in png8, the mixed
// format and WebP (its format switch, through the URL hash), from WMS-C
// and WMTS in EPSG:4326: every tile is fetched from the cache and decodes
// to a 256-pixel image (none failed: the page's count and the images'
// own), the tiles' Content-Types are the format's (JPEG and PNG for the
// mixed one), the map's canvas is drawn, a reload is all hits, and the
// page logs no error.
func TestFormatsBrowserOpenLayers(t *testing.T) {
	clientsOnce(t)
	up := mapServer(t)
	load(t, formatsBrowserConfig(t, up))
	for _, f := range browserFormats {
		for _, mode := range []string{"wms", "wmts"} {
			t.Run(f.ext+"-"+mode, func(t *testing.T) {
				b := newBrowser(t)
				types := watchTileTypes(t, b)
				b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: imageWatch})
					return err
				}))
				for _, layer := range []string{"test:relief", "test:polygons"} {
					demoFormatRounds(t, b, types, layer, mode, f.format, f.ext)
				}
				b.screenshot("formats-demo-" + f.ext + "-" + mode)
				b.checkLocal()
				b.checkNoErrors()
			})
		}
	}
}

// demoFormatRounds shows a layer in a format on the demo page (mode wms or
// wmts, EPSG:4326), then reloads it, with the checks of
// TestFormatsBrowserOpenLayers.
func demoFormatRounds(t *testing.T, b *browser, types *tileTypes, layer, mode, format, ext string) {
	t.Helper()
	drawn := `(() => { const s = document.getElementById('stats'), m = document.getElementById('map');
		return !!s && +s.dataset.loaded > 0 && +s.dataset.loading === 0 && +m.dataset.rendered > 0
			&& window.blobImages.loaded + window.blobImages.empty + window.blobImages.failed >= +s.dataset.loaded; })()`
	u := fmt.Sprintf("http://localhost:%d/demo/#layer=%s&gridset=EPSG:4326&mode=%s&format=%s",
		httpPort, layer, mode, url.QueryEscape(format))
	var first map[string][]string
	for round := 1; round <= 2; round++ {
		if round == 1 {
			b.do(chromedp.Navigate("about:blank"), chromedp.Navigate(u))
		} else {
			b.do(chromedp.Reload())
		}
		waitPatiently(b, "the map's tiles", drawn)
		state := eval[map[string]string](b, `Object.assign({}, window.tilecacheDemo.state)`)
		if state["format"] != format || state["mode"] != mode || state["layer"] != layer {
			t.Fatalf("the page shows %v", state)
		}
		stats := eval[map[string]string](b, `Object.assign({}, document.getElementById('stats').dataset)`)
		imgs := eval[map[string]int](b, `window.blobImages`)
		resp := b.takeResponses()
		got := types.take()
		if stats["errors"] != "0" || imgs["failed"] != 0 || imgs["empty"] != 0 || fmt.Sprint(imgs["loaded"]) != stats["loaded"] ||
			stats["loaded"] != fmt.Sprint(len(resp)) || len(resp) < 8 {
			t.Fatalf("%s round %d: page counted %v, images %v, %d tile responses", layer, round, stats, imgs, len(resp))
		}
		for u, rs := range resp {
			if len(rs) != 1 || rs[0] != "200 HIT" && (round == 2 || rs[0] != "200 MISS") {
				t.Errorf("round %d: %s answered %v", round, u, rs)
			}
			if queryGet(u, "format") != format && !strings.HasSuffix(u, "."+ext) {
				t.Errorf("round %d: %s is not a tile in %s", round, u, format)
			}
		}
		if round == 1 {
			first = resp
		} else if len(resp) != len(first) || stats["hit"] != stats["loaded"] {
			t.Errorf("reload: %d tiles (first load %d), page counted %v", len(resp), len(first), stats)
		}
		checkTypes(t, format, got, mapTypes(format, layer)...)
		// The canvas shows the map: most of it drawn, not blank.
		painted := eval[float64](b, `(() => { const c = document.querySelector('#map canvas');
					const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
					for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
					return n / (c.width * c.height); })()`)
		if painted < 0.3 {
			t.Errorf("round %d: %.0f%% of the map's canvas drawn", round, painted*100)
		}
		t.Logf("%s round %d: page %v, images %v, Content-Types %v, canvas %.0f%% drawn", layer, round, stats, imgs, got, painted*100)
	}
}
