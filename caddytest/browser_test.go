package caddytest

// Browser tests: the demo page and the task page in a real, headless
// Chromium (Debian's package "chromium"), driven with chromedp. Each test
// saves PNG screenshots to $ARTIFACTS, or testdata/artifacts/ by default.
//
// Without a Chromium the tests are skipped, unless CI is set: then they fail.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// chromePath finds the browser: $CHROME, or Debian's chromium.
func chromePath() string {
	if p := os.Getenv("CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium with one tab, recording the tab's
// network traffic and its errors.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu        sync.Mutex
	requests  []string            // every URL the tab requested
	responses map[string][]string // tile URL → status and geowebcache-cache-result of each response
	errs      []string            // console errors, exceptions, CSP violations
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromePath()
	if path == "" {
		// A browser test that did not run has not passed: ./test.sh installs it.
		t.Fatal("no Chromium: apt-get install chromium (./test.sh does), or set CHROME")
	}
	profile, err := os.MkdirTemp("", "tilecache-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	// The machine may have no network at all: these flags keep Chromium
	// from calling home, which would otherwise retry closed connections.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 960),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx, responses: map[string][]string{}}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit, before its profile is removed
	})
	// The first run starts the browser: it must have no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	if err := chromedp.Listen(ctx, b.event); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		// Every load asks the server: the tile cache, not the browser's.
		if _, err := cdp.Call(ctx, tg, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{})
		return err
	}))
	return b
}

func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, e.Request.URL)
	case *network.EventResponseReceived:
		// Tiles: the demo page fetch()es them, as it does info.json and the
		// WMTS capabilities.
		// Leaflet loads them as images.
		if e.Type == network.ResourceTypeFetch && !strings.HasSuffix(e.Response.URL, "/info.json") &&
			!strings.Contains(e.Response.URL, "GetCapabilities") ||
			e.Type == network.ResourceTypeImage && (strings.Contains(e.Response.URL, "/wms?") || strings.Contains(e.Response.URL, "/xyz/")) {
			b.responses[e.Response.URL] = append(b.responses[e.Response.URL],
				fmt.Sprintf("%d %s", e.Response.Status, header(e.Response.Headers, "geowebcache-cache-result")))
		}
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			b.errs = append(b.errs, fmt.Sprintf("%s: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if ex := e.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
		b.errs = append(b.errs, "exception: "+msg)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			b.errs = append(b.errs, "console.error")
		}
	}
}

func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return fmt.Sprint(v)
		}
	}
	return ""
}

// browserPatience bounds one action in the tab and a wait for the page
// (waitFor): the bound of a hung browser only, as eventPatience is for the
// rest of the suite; a page beside CPU hogs draws far slower than on a
// quiet machine.
const browserPatience = eventPatience

// do runs actions in the tab, failing the test on an error.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserPatience)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v (page errors: %v)", err, b.errors())
	}
}

// run runs one action that returns a value.
func run[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserPatience)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v (page errors: %v)", err, b.errors())
	}
	return v
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return run(b, chromedp.Evaluate[T](expr))
}

// waitFor polls a JavaScript expression until it is true (browserPatience
// at most).
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserPatience+10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(browserPatience))); err != nil {
		if p, err := b.shoot("failed-" + strings.NewReplacer("/", "-", ":", "_").Replace(b.t.Name())); err == nil {
			b.t.Logf("screenshot: %s", p)
		}
		b.t.Fatalf("waiting for %s: %v (page errors: %v)", what, err, b.errors())
	}
}

func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// takeResponses returns and forgets the tile responses seen so far.
func (b *browser) takeResponses() map[string][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.responses
	b.responses = map[string][]string{}
	return r
}

// checkLocal fails if the tab requested anything but this test's own Caddy.
func (b *browser) checkLocal() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	own := fmt.Sprintf("http://localhost:%d/", httpPort)
	for _, u := range b.requests {
		if !strings.HasPrefix(u, own) && !strings.HasPrefix(u, "blob:") && !strings.HasPrefix(u, "data:") {
			b.t.Errorf("the page requested %s", u)
		}
	}
}

func (b *browser) checkNoErrors() {
	b.t.Helper()
	if errs := b.errors(); len(errs) > 0 {
		b.t.Errorf("page errors: %q", errs)
	}
}

// screenshot saves the whole page as a PNG artifact.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	p, err := b.shoot(name)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.t.Logf("screenshot: %s", p)
}

// shoot writes the screenshot to $ARTIFACTS or testdata/artifacts/ and
// returns its absolute path.
func (b *browser) shoot(name string) (string, error) {
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(b.ctx, browserPatience)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		return "", err
	}
	p, _ := filepath.Abs(filepath.Join(dir, name+".png"))
	return p, os.WriteFile(p, png, 0o644)
}

// --- the demo page ---

// demoConfig is a site with tile_cache's demo page at /demo and WMTS at
// /wmts (for the page's WMTS view).
func demoConfig(f *fakeWMS, storage, layers string) string {
	return siteConfig{upstream: f.URL, tiles: `
		upstream ` + f.URL + `/wms
		storage ` + storeLines(storage) + `
		services {
			demo /demo
			wmts /wmts
		}
		` + layers}.String()
}

// The demo map's tiles come from the cache: a first load fills it (from
// metatiles), a second load of the same view is answered by HITs only, and
// the upstream sees no request more.
func TestBrowserDemoMapTilesFromCache(t *testing.T) {
	clientsOnce(t)
	for _, tc := range []struct{ gs, mode string }{{"EPSG:4326", "wms"}, {"EPSG:900913", "wms"}, {"EPSG:4326", "wmts"}, {"EPSG:900913", "wmts"}} {
		gs := tc.gs
		name := strings.ReplaceAll(gs, ":", "_") + "-" + tc.mode
		t.Run(name, func(t *testing.T) {
			f := newFakeWMS(t)
			load(t, demoConfig(f, storageDir(t), `
		layer test:a {
			gridsets EPSG:4326 EPSG:900913
		}`))
			b := newBrowser(t)
			page := fmt.Sprintf("http://localhost:%d/demo/#layer=test:a&gridset=%s&mode=%s", httpPort, gs, tc.mode)
			// The map has drawn when every tile is in and the map said rendercomplete.
			drawn := `(() => { const s = document.getElementById('stats'), m = document.getElementById('map');
				return !!s && +s.dataset.loaded > 0 && +s.dataset.loading === 0 && +m.dataset.rendered > 0; })()`
			b.do(chromedp.Navigate(page))
			defer func() {
				if t.Failed() {
					t.Logf("map: %s", eval[string](b, `(() => { const m = tilecacheDemo.map(), l = m.getLayers().item(0), s = l && l.getSource(), g = s && s.getTileGrid();
						return JSON.stringify({size: m.getSize(), view: m.getView().calculateExtent(), zoom: m.getView().getZoom(), layerExtent: l && l.getExtent(),
							urls: s && s.getUrls && s.getUrls(), state: s && s.getState(), grid: g && {extent: g.getExtent(), origin: g.getOrigin(0), res: g.getResolutions().slice(0, 3), minZoom: g.getMinZoom()}}); })()`))
				}
			}()
			b.waitFor("the map's tiles", drawn)
			first := b.takeResponses()
			upstream := f.getMaps.Load()
			if len(first) == 0 || upstream == 0 {
				t.Fatalf("first load: %d tile requests, %d upstream GetMaps", len(first), upstream)
			}
			for u, rs := range first {
				key := map[string]string{"wms": "srs", "wmts": "tilematrixset"}[tc.mode]
				if queryGet(u, key) != gs {
					t.Errorf("first load asked for %s, not a tile of %s", u, gs)
				}
				if len(rs) != 1 || !strings.HasPrefix(rs[0], "200 ") || rs[0] == "200 " {
					t.Errorf("first load, %s: %q", u, rs)
				}
			}
			b.do(chromedp.Reload())
			b.waitFor("the map's tiles, again", drawn)
			second := b.takeResponses()
			if len(second) != len(first) {
				t.Errorf("second load asked for %d tiles, the first for %d", len(second), len(first))
			}
			for u, rs := range second {
				if len(rs) != 1 || rs[0] != "200 HIT" {
					t.Errorf("second load, %s: %q, want one 200 HIT", u, rs)
				}
				if _, ok := first[u]; !ok {
					t.Errorf("second load asked for a tile the first did not: %s", u)
				}
			}
			if n := f.getMaps.Load(); n != upstream {
				t.Errorf("the second load sent %d GetMaps upstream", n-upstream)
			}
			stats := eval[map[string]string](b, `Object.assign({}, document.getElementById('stats').dataset)`)
			if stats["hit"] != stats["loaded"] || stats["loaded"] != fmt.Sprint(len(second)) || stats["errors"] != "0" {
				t.Errorf("the page counted %v for %d tiles", stats, len(second))
			}
			text := eval[string](b, `document.getElementById('stats').textContent + ' | ' + document.getElementById('status').textContent`)
			t.Logf("%d tiles, %d upstream GetMaps; page: %s", len(second), upstream, text)

			// Two levels down the tiles are still the gridset's own: the cache
			// answers each one itself (a GetMap off the grid would go through
			// to the upstream and come back without a cache result).
			zoom0 := eval[string](b, `document.getElementById('zoom').textContent`)
			loaded := eval[int](b, `+document.getElementById('stats').dataset.loaded`)
			for range 2 {
				b.do(chromedp.Click(chromedp.CSS(".ol-zoom-in")))
				time.Sleep(400 * time.Millisecond) // the zoom animation
			}
			b.waitFor("the map's tiles two levels down", fmt.Sprintf(`(() => { const s = document.getElementById('stats');
				return /^zoom \d+$/.test(document.getElementById('zoom').textContent) && +s.dataset.loading === 0 && +s.dataset.loaded >= %d; })()`, loaded+8))
			time.Sleep(300 * time.Millisecond)
			b.waitFor("no tile loading", `+document.getElementById('stats').dataset.loading === 0`)
			zoomed := b.takeResponses()
			for u, rs := range zoomed {
				for _, r := range rs {
					if r != "200 HIT" && r != "200 MISS" {
						t.Errorf("zoomed in, %s: %q, want the cache's HIT or MISS", u, r)
					}
				}
			}
			zoom := eval[string](b, `document.getElementById('zoom').textContent`)
			text = eval[string](b, `document.getElementById('stats').textContent`)
			t.Logf("%s → %s: %d more tiles; page: %s", zoom0, zoom, len(zoomed), text)
			if len(zoomed) < 8 {
				t.Errorf("zoomed in, the map asked for %d tiles", len(zoomed))
			}
			b.screenshot("demo-" + name)
			b.checkLocal()
			b.checkNoErrors()
		})
	}
}

// queryGet returns the URL's query parameter key, matched in any case.
func queryGet(u, key string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	for k, v := range p.Query() {
		if strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// The demo page without JavaScript still lists the layers.
func TestBrowserDemoLayerListWithoutJavaScript(t *testing.T) {
	f := newFakeWMS(t)
	load(t, demoConfig(f, storageDir(t), `
		layer test:a {
			gridsets EPSG:4326 EPSG:900913
		}
		layer test:b {
			gridsets EPSG:4326
			formats image/jpeg
		}`))
	a := get(t, fmt.Sprintf("http://localhost:%d/demo/", httpPort))
	if a.status != 200 {
		t.Fatalf("demo page: %d %q", a.status, truncate(a.body))
	}
	rows := regexp.MustCompile(`<tr data-layer="([^"]+)" data-gridset="([^"]+)">`).FindAllStringSubmatch(string(a.body), -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1]+" "+r[2])
	}
	if want := "test:a EPSG:4326,test:a EPSG:900913,test:b EPSG:4326"; strings.Join(got, ",") != want {
		t.Fatalf("layer rows %q, want %s", got, want)
	}
	b := newBrowser(t)
	b.do(scripts(false), chromedp.Navigate(fmt.Sprintf("http://localhost:%d/demo", httpPort)))
	n := eval[int](b, `document.querySelectorAll('#layers tbody tr').length`)
	hidden := eval[bool](b, `document.getElementById('preview').hidden`)
	if n != 3 || !hidden {
		t.Fatalf("without JavaScript: %d layer rows, preview hidden %v", n, hidden)
	}
	b.screenshot("demo-nojs")
	b.checkLocal()
}

// scripts turns the tab's JavaScript on or off.
func scripts(on bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
		return err
	})
}

// --- the task page ---

// The browser signs in to the task page with the Authorization header the
// tab adds to every request.
func (b *browser) basicAuth() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{
			"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass)),
		}})
		return err
	})
}

const taskPageLayers = `
		layer test:a {
			gridsets EPSG:4326 EPSG:900913
		}`

// submitForm fills the task page's form and clicks Submit.
func (b *browser) submitForm(layer, gs, typ string, zs, ze, threads int) {
	b.t.Helper()
	b.waitFor("the layer list", `document.querySelectorAll('#f-layer option').length > 0`)
	eval[bool](b, fmt.Sprintf(`(() => {
		const set = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input')); };
		set('f-layer', %q); set('f-gridset', %q); set('f-type', %q);
		set('f-zoomStart', %d); set('f-zoomStop', %d); set('f-threadCount', %d);
		return true; })()`, layer, gs, typ, zs, ze, threads))
	b.do(chromedp.Click(chromedp.ID("f-submit")))
}

// progressState is a task row's progress bar, as the page shows it.
type progressState struct {
	Value   int64  `json:"value"`
	Max     int64  `json:"max"`
	Status  string `json:"status"`
	Rate    string `json:"rate"`
	Left    string `json:"left"`
	Present bool   `json:"present"`
}

// A seed submitted from the task page shows its progress bar rising, then
// the task among the finished ones as DONE.
func TestBrowserTaskPageShowsSeedProgress(t *testing.T) {
	e := newREST(t, "workers 1", taskPageLayers)
	// Levels 0..4 of EPSG:4326: 2+8+32+128+512 = 682 tiles in 44 metatiles.
	e.f.set("", 120*time.Millisecond)
	b := newBrowser(t)
	b.do(b.basicAuth(), chromedp.Navigate(restURL("/tasks")))
	b.submitForm("test:a", "EPSG:4326", "seed", 0, 4, 1)
	estimate := eval[string](b, `document.getElementById('f-estimate').textContent`)
	if estimate != "682 tiles" {
		t.Errorf("the form estimated %q", estimate)
	}
	b.waitFor("the task's row", `!!document.querySelector('#tasks tr[data-task-id]')`)
	id := eval[int64](b, `+document.querySelector('#tasks tr[data-task-id]').dataset.taskId`)
	e.mu.Lock()
	e.tasks = append(e.tasks, fmt.Sprintf("/rest/tasks/%d.json", id))
	e.mu.Unlock()

	// Watch the bar until the task is done.
	var seen []int64
	var shot bool
	deadline := time.Now().Add(taskPatience) // a seed of 682 tiles: a task's end
	for {
		st := eval[progressState](b, fmt.Sprintf(`(() => { const r = document.querySelector('#tasks tr[data-task-id="%d"]');
			if (!r) return {present: false};
			const p = r.querySelector('progress');
			return {present: true, value: p.value, max: p.max, status: r.dataset.status, rate: r.cells[6].textContent, left: r.cells[7].textContent}; })()`, id))
		if !st.Present {
			break
		}
		if st.Max != 682 && st.Max != 1 {
			t.Fatalf("progress max %d, want 682", st.Max)
		}
		if len(seen) == 0 || seen[len(seen)-1] != st.Value {
			seen = append(seen, st.Value)
		}
		if !shot && st.Value > 682/3 && st.Rate != "" && st.Left != "" {
			b.screenshot("tasks-progress")
			t.Logf("mid-way: %d/%d, %s tiles/s, %s left", st.Value, st.Max, st.Rate, st.Left)
			shot = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still listed after %v; progress %v", taskPatience, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var rising int
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("progress went back: %v", seen)
		}
		if seen[i] > 0 && seen[i] < 682 {
			rising++
		}
	}
	if rising < 3 || !shot {
		t.Fatalf("the bar showed %v (screenshot taken: %v)", seen, shot)
	}
	b.waitFor("the finished task", fmt.Sprintf(`(() => { const r = document.querySelector('#finished tr[data-task-id="%d"]');
		return !!r && r.dataset.state === 'DONE' && r.cells[5].textContent === '682 / 682'; })()`, id))
	if ti := task(t, fmt.Sprintf("/rest/tasks/%d.json", id)); ti.State != "DONE" || ti.Processed != 682 {
		t.Fatalf("task resource %+v", ti)
	}
	b.screenshot("tasks-done")
	t.Logf("progress seen: %v", seen)
	b.checkLocal()
	b.checkNoErrors()
}

// The Kill buttons end tasks: a pending task's kills the layer's pending
// tasks only, a running task's the running ones; their resources then say
// ABORTED.
func TestBrowserTaskPageKillsTasks(t *testing.T) {
	e := newREST(t, "workers 1", taskPageLayers)
	e.f.set("", 200*time.Millisecond)
	b := newBrowser(t)
	b.do(b.basicAuth(), chromedp.Navigate(restURL("/")))
	// One worker: the first task runs, the second waits.
	b.submitForm("test:a", "EPSG:4326", "seed", 0, 6, 1)
	b.waitFor("the first task's row", `document.querySelectorAll('#tasks tr[data-task-id]').length === 1`)
	b.submitForm("test:a", "EPSG:900913", "seed", 0, 6, 1)
	b.waitFor("a running and a pending task with progress", `(() => {
		const rows = [...document.querySelectorAll('#tasks tr[data-task-id]')];
		return rows.length === 2 && rows[0].dataset.status === 'RUNNING' && rows[1].dataset.status === 'PENDING'
			&& rows[0].querySelector('progress').value > 0 && rows[0].cells[6].textContent !== ''
			&& !rows[0].querySelector('button').disabled && !rows[1].querySelector('button').disabled; })()`)
	ids := eval[[]int64](b, `[...document.querySelectorAll('#tasks tr[data-task-id]')].map(r => +r.dataset.taskId)`)
	e.mu.Lock()
	for _, id := range ids {
		e.tasks = append(e.tasks, fmt.Sprintf("/rest/tasks/%d.json", id))
	}
	e.mu.Unlock()
	running, pending := ids[0], ids[1]
	b.screenshot("tasks-running-pending")

	// A second pending task of the same layer: a row's Kill ends that task
	// only (DELETE on its resource), not every pending task of the layer.
	b.submitForm("test:a", "EPSG:4326", "seed", 0, 6, 1)
	b.waitFor("a third task's row", `document.querySelectorAll('#tasks tr[data-task-id]').length === 3`)
	third := eval[[]int64](b, `[...document.querySelectorAll('#tasks tr[data-task-id]')].map(r => +r.dataset.taskId)`)[2]
	e.mu.Lock()
	e.tasks = append(e.tasks, fmt.Sprintf("/rest/tasks/%d.json", third))
	e.mu.Unlock()
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tasks tr[data-task-id="%d"] button`, third))))
	b.waitFor("the third task ABORTED", fmt.Sprintf(`(() => { const r = document.querySelector('#finished tr[data-task-id="%d"]');
		return !!r && r.dataset.state === 'ABORTED'; })()`, third))
	if ti := task(t, fmt.Sprintf("/rest/tasks/%d.json", pending)); ti.State != "PENDING" {
		t.Fatalf("killing task %d made the other pending task of its layer %s", third, ti.State)
	}

	// The pending task's Kill: it ends, the running one goes on.
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tasks tr[data-task-id="%d"] button`, pending))))
	b.waitFor("the pending task ABORTED", fmt.Sprintf(`(() => { const r = document.querySelector('#finished tr[data-task-id="%d"]');
		return !!r && r.dataset.state === 'ABORTED'; })()`, pending))
	if ti := task(t, fmt.Sprintf("/rest/tasks/%d.json", pending)); ti.State != "ABORTED" || ti.Processed != 0 {
		t.Fatalf("killed pending task %+v", ti)
	}
	if ti := task(t, fmt.Sprintf("/rest/tasks/%d.json", running)); ti.State != "RUNNING" {
		t.Fatalf("the running task is %s after killing the pending one", ti.State)
	}

	// The running task's Kill.
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tasks tr[data-task-id="%d"] button`, running))))
	b.waitFor("the running task ABORTED", fmt.Sprintf(`(() => { const r = document.querySelector('#finished tr[data-task-id="%d"]');
		return !!r && r.dataset.state === 'ABORTED' && document.querySelectorAll('#tasks tr[data-task-id]').length === 0; })()`, running))
	ti := task(t, fmt.Sprintf("/rest/tasks/%d.json", running))
	if ti.State != "ABORTED" || ti.Processed == 0 || ti.Processed >= ti.Total {
		t.Fatalf("killed running task %+v", ti)
	}
	b.screenshot("tasks-killed")
	b.checkLocal()
	b.checkNoErrors()
}

// The task page and rest/layers.json, without a browser: behind the same
// basic_auth as the REST interface, at <mount>/ and <mount>/tasks.
func TestBrowserTaskPageRoutes(t *testing.T) {
	newREST(t, "", taskPageLayers+`
		layer test:b {
			gridsets EPSG:900913
			formats image/jpeg
			zoom 2 5
			param STYLES {
				default ""
				values "" population
			}
		}`)
	for _, p := range []string{"/", "/tasks"} {
		a := rest(t, "GET", p, "", "")
		if a.status != 200 || a.header.Get("Content-Type") != "text/html; charset=utf-8" ||
			!strings.Contains(string(a.body), "<title>Tile cache tasks</title>") ||
			!strings.Contains(a.header.Get("Content-Security-Policy"), "script-src 'sha256-") {
			t.Fatalf("GET %s: %d %q %q", p, a.status, a.header.Get("Content-Type"), truncate(a.body))
		}
		if a := restAs(t, "", "", "GET", p, "", ""); a.status != 401 {
			t.Fatalf("GET %s without credentials: %d", p, a.status)
		}
	}
	if a := rest(t, "POST", "/tasks", "", ""); a.status != 405 {
		t.Fatalf("POST /tasks: %d", a.status)
	}
	a := rest(t, "GET", "/rest/layers.json", "", "")
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("layers.json: %d %q %q", a.status, a.header.Get("Content-Type"), truncate(a.body))
	}
	// Tiles per level: the whole gridset at the cached levels, 0 elsewhere.
	tiles := func(gs string, minZ, maxZ int) string {
		g, _ := gridset.Builtin(gs)
		var n []string
		for z := range g.Levels {
			c := int64(0)
			if z >= minZ && z <= maxZ {
				c = g.GridRange(z).Count()
			}
			n = append(n, fmt.Sprint(c))
		}
		// The layers have no bounds of their own: their extent is the gridset's, in lon/lat.
		ll, _ := g.ToLonLat(g.Extent)
		ext, _ := json.Marshal([4]float64{ll.MinX, ll.MinY, ll.MaxX, ll.MaxY})
		return fmt.Sprintf(`{"name":%q,"srs":%q,"minZoom":%d,"maxZoom":%d,"levels":%d,"tiles":[%s],"extent":%s}`,
			gs, gs, minZ, maxZ, len(g.Levels), strings.Join(n, ","), ext)
	}
	g4326, _ := gridset.Builtin("EPSG:4326")
	g900913, _ := gridset.Builtin("EPSG:900913")
	want := `{"layers":[` +
		`{"name":"test:a","formats":["image/png","image/jpeg"],"gridsets":[` +
		tiles("EPSG:4326", 0, len(g4326.Levels)-1) + "," + tiles("EPSG:900913", 0, len(g900913.Levels)-1) + `],` +
		`"parameters":[],"metaTile":[4,4]},` +
		`{"name":"test:b","formats":["image/jpeg"],"gridsets":[` + tiles("EPSG:900913", 2, 5) + `],` +
		`"parameters":[{"name":"STYLES","default":""}],"metaTile":[4,4]}]}` + "\n"
	if string(a.body) != want {
		t.Fatalf("layers.json:\n%s\nwant\n%s", a.body, want)
	}
	if a := restAs(t, "", "", "GET", "/rest/layers.json", "", ""); a.status != 401 {
		t.Fatalf("layers.json without credentials: %d", a.status)
	}
	if a := rest(t, "POST", "/rest/layers.json", "", ""); a.status != 405 {
		t.Fatalf("POST layers.json: %d", a.status)
	}
}

// A polygon drawn on the task page's map with the mouse is seeded exactly:
// the task's resource has the drawn vertices and the exact tile count of
// the polygon (module/area's), the form shows that count, and the task's
// "Show area" draws its area on the map. A WKT pasted into the textarea is
// drawn and truncated with its buffer; a polygon off the gridset is refused
// with the server's message under the form.
func TestBrowserTaskPageSeedsAPolygon(t *testing.T) {
	e := newREST(t, "workers 1", taskPageLayers)
	e.f.set("", 20*time.Millisecond)
	g, _ := gridset.Builtin("EPSG:4326")
	b := newBrowser(t)
	b.do(b.basicAuth(), chromedp.Navigate(restURL("/tasks")))
	b.waitFor("the layer list", `document.querySelectorAll('#f-layer option').length > 0`)
	setForm := func(typ string, zs, ze int) {
		eval[bool](b, fmt.Sprintf(`(() => {
			const set = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input')); };
			set('f-layer', 'test:a'); set('f-gridset', 'EPSG:4326'); set('f-type', %q);
			set('f-zoomStart', %d); set('f-zoomStop', %d); set('f-threadCount', 1);
			return true; })()`, typ, zs, ze))
	}
	setForm("seed", 0, 4)
	// test:a has no bounds: its extent on the map is the whole gridset.
	if ext := eval[string](b, `(() => { const r = document.getElementById('map-extent');
		return r.hasAttribute('hidden') ? 'hidden' : ['x', 'y', 'width', 'height'].map(a => r.getAttribute(a)).join(' '); })()`); ext != "-180 -90 360 180" {
		t.Errorf("layer extent on the map: %q", ext)
	}

	// Draw: three clicks, then a double-click on the fourth vertex closes
	// the ring. Each click is a real mouse event at the point's place on
	// screen, from the SVG's own transform.
	drawn := [][2]float64{{-100, 45}, {30, 62}, {75, -20}, {-40, -55}}
	var pixel float64 // degrees per screen pixel
	for i, p := range drawn {
		xy := eval[[]float64](b, fmt.Sprintf(`(() => { const s = document.getElementById('map');
			s.scrollIntoView({block: 'center'});
			const p = new DOMPoint(%g, %g).matrixTransform(s.getScreenCTM());
			return [p.x, p.y, 360 / s.getBoundingClientRect().width]; })()`, p[0], -p[1]))
		pixel = xy[2]
		b.do(chromedp.MouseClickXY(xy[0], xy[1]))
		if i == len(drawn)-1 {
			b.do(chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(2)))
		}
	}
	if pixel <= 0 || pixel > 1 {
		t.Fatalf("the map is %g° a pixel", pixel)
	}
	b.waitFor("the closed polygon", `!!document.querySelector('#map-draft path') && document.querySelectorAll('#map-draft circle').length === 4`)
	text := eval[string](b, `document.getElementById('f-geometry').value`)
	var poly struct {
		Type        string         `json:"type"`
		Coordinates [][][2]float64 `json:"coordinates"`
	}
	if err := json.Unmarshal([]byte(text), &poly); err != nil || poly.Type != "Polygon" || len(poly.Coordinates) != 1 || len(poly.Coordinates[0]) != 5 {
		t.Fatalf("the textarea after drawing: %q (%v)", text, err)
	}
	ring := poly.Coordinates[0]
	for i, p := range drawn {
		if q := ring[i]; math.Abs(q[0]-p[0]) > pixel || math.Abs(q[1]-p[1]) > pixel {
			t.Errorf("vertex %d drawn at %v, clicked at %v (%.2f° a pixel)", i, q, p, pixel)
		}
	}
	if ring[4] != ring[0] {
		t.Errorf("the drawn ring is not closed: %v", ring)
	}
	if est := eval[string](b, `document.getElementById('f-estimate').textContent`); !strings.Contains(est, "exact count after submitting") {
		t.Errorf("a polygon's estimate: %q", est)
	}

	// The exact count, from the polygon as the page sends it.
	geom, err := area.ParseGeoJSON([]byte(text), area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	exact := func(geom area.Geometry, buffer float64, zs, ze int) int64 {
		c := area.NewCover(g, geom, buffer)
		var n int64
		for z := zs; z <= ze; z++ {
			n += c.Count(z, g.GridRange(z)) // test:a covers the whole gridset
		}
		return n
	}
	want := exact(geom, 0, 0, 4)
	if want <= 0 || want >= 682 {
		t.Fatalf("the polygon has %d of the 682 tiles of levels 0..4", want)
	}

	b.do(chromedp.Click(chromedp.ID("f-submit")))
	b.waitFor("the polygon task's row", `!!document.querySelector('#tasks tr[data-task-id], #finished tr[data-task-id]')`)
	id := eval[int64](b, `+document.querySelector('#tasks tr[data-task-id], #finished tr[data-task-id]').dataset.taskId`)
	path := fmt.Sprintf("/rest/tasks/%d.json", id)
	e.mu.Lock()
	e.tasks = append(e.tasks, path)
	e.mu.Unlock()
	ti := task(t, path)
	if ti.Total != want || !strings.EqualFold(ti.Type, "seed") || ti.ZoomStart != 0 || ti.ZoomStop != 4 || ti.Buffer != 0 {
		t.Errorf("task %d: %s of levels %d..%d, total %d, buffer %g; want a seed of 0..4 with %d tiles",
			id, ti.Type, ti.ZoomStart, ti.ZoomStop, ti.Total, ti.Buffer, want)
	}
	checkGeometry := func(ti taskInfo, want [][][2]float64) {
		t.Helper()
		var mp struct {
			Type        string           `json:"type"`
			Coordinates [][][][2]float64 `json:"coordinates"`
		}
		if err := json.Unmarshal(ti.Geometry, &mp); err != nil || mp.Type != "MultiPolygon" || len(mp.Coordinates) != 1 || len(mp.Coordinates[0]) != len(want) {
			t.Fatalf("task %d's geometry: %s (%v)", ti.ID, ti.Geometry, err)
		}
		for i, r := range want {
			got := mp.Coordinates[0][i]
			if len(got) != len(r) {
				t.Fatalf("task %d's ring %d: %v, want %v", ti.ID, i, got, r)
			}
			for k := range r {
				if math.Abs(got[k][0]-r[k][0]) > 1e-9 || math.Abs(got[k][1]-r[k][1]) > 1e-9 {
					t.Errorf("task %d's ring %d: %v, want %v", ti.ID, i, got, r)
					break
				}
			}
		}
	}
	checkGeometry(ti, [][][2]float64{ring})
	b.waitFor("the exact count in the form", fmt.Sprintf(`document.getElementById('f-estimate').dataset.total === '%d'`, want))

	// Done, then its area on the map, apart from the drawn polygon.
	b.waitFor("the polygon task DONE", fmt.Sprintf(`(() => { const r = document.querySelector('#finished tr[data-task-id="%d"]');
		return !!r && r.dataset.state === 'DONE' && r.cells[5].textContent === '%d / %d'; })()`, id, want, want))
	if ti := task(t, path); ti.State != "DONE" || ti.Processed != want {
		t.Fatalf("task resource %+v", ti)
	}
	if n := eval[int](b, `document.querySelectorAll('#map-task path').length`); n != 0 {
		t.Fatalf("%d task areas on the map before Show area", n)
	}
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#finished tr[data-task-id="%d"] button.show-area`, id))))
	b.waitFor("the task's area", `document.querySelectorAll('#map-task path').length === 1`)
	shown := eval[struct {
		D, Task, TaskStroke, DraftStroke string
	}](b, `(() => { const p = document.querySelector('#map-task path'), d = document.querySelector('#map-draft path');
		return {d: p.getAttribute('d'), task: document.getElementById('map-task').dataset.taskId,
			taskStroke: getComputedStyle(p).stroke, draftStroke: getComputedStyle(d).stroke}; })()`)
	var pts [][2]float64
	for _, m := range regexp.MustCompile(`([ML])(-?[\d.]+) (-?[\d.]+)`).FindAllStringSubmatch(shown.D, -1) {
		var x, y float64
		fmt.Sscan(m[2], &x)
		fmt.Sscan(m[3], &y)
		pts = append(pts, [2]float64{x, -y})
	}
	if len(pts) != 4 || !strings.HasSuffix(shown.D, "Z") || shown.Task != fmt.Sprint(id) {
		t.Fatalf("task %d's area drawn as %q (task %s)", id, shown.D, shown.Task)
	}
	for i, p := range pts {
		if math.Abs(p[0]-ring[i][0]) > 1e-9 || math.Abs(p[1]-ring[i][1]) > 1e-9 {
			t.Errorf("the area's vertex %d is %v, the task's %v", i, p, ring[i])
		}
	}
	if shown.TaskStroke == shown.DraftStroke || shown.TaskStroke == "" {
		t.Errorf("the task's area and the drawn polygon are both stroked %q", shown.TaskStroke)
	}
	b.screenshot("tasks-polygon-area")

	// Paste a WKT with a hole and truncate it with a 2-pixel buffer.
	b.do(chromedp.Click(chromedp.ID("map-clear")))
	if v := eval[string](b, `document.getElementById('f-geometry').value + document.querySelectorAll('#map-draft > *').length`); v != "0" {
		t.Fatalf("after Clear: %q", v)
	}
	const wkt = "POLYGON((-30 -10, 50 -10, 50 40, -30 40, -30 -10), (0 0, 20 0, 20 20, 0 20, 0 0))"
	setForm("truncate", 0, 4)
	b.do(chromedp.Focus(chromedp.ID("f-geometry")), insertText(wkt),
		chromedp.SendKeys(chromedp.ID("f-buffer"), "2"))
	b.waitFor("the pasted polygon", `(() => { const p = document.querySelector('#map-draft path');
		return !!p && (p.getAttribute('d').match(/[ML]/g) || []).length === 8; })()`)
	pasted, _, err := area.ParseWKT(wkt, area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantTrunc := exact(pasted, 2, 0, 4)
	ids := eval[[]int64](b, `[...document.querySelectorAll('tr[data-task-id]')].map(r => +r.dataset.taskId)`)
	b.do(chromedp.Click(chromedp.ID("f-submit")))
	b.waitFor("the truncate's row", fmt.Sprintf(`document.querySelectorAll('#tasks tr[data-task-id], #finished tr[data-task-id]').length > %d`, len(ids)))
	trunc := eval[int64](b, `Math.max(...[...document.querySelectorAll('tr[data-task-id]')].map(r => +r.dataset.taskId))`)
	tpath := fmt.Sprintf("/rest/tasks/%d.json", trunc)
	e.mu.Lock()
	e.tasks = append(e.tasks, tpath)
	e.mu.Unlock()
	tt := waitTask(t, tpath)
	if !strings.EqualFold(tt.Type, "truncate") || tt.Buffer != 2 || tt.Total != wantTrunc || tt.State != "DONE" {
		t.Errorf("truncate task %+v, want %d tiles with a buffer of 2", tt, wantTrunc)
	}
	checkGeometry(tt, [][][2]float64{
		{{-30, -10}, {50, -10}, {50, 40}, {-30, 40}, {-30, -10}},
		{{0, 0}, {20, 0}, {20, 20}, {0, 20}, {0, 0}},
	})
	b.waitFor("the truncate's exact count in the form", fmt.Sprintf(`document.getElementById('f-estimate').dataset.total === '%d'`, wantTrunc))
	t.Logf("drawn polygon: %d tiles of 682 (task %d); pasted WKT with a hole, buffer 2: %d (task %d)", want, id, wantTrunc, trunc)

	b.checkLocal()
	b.checkNoErrors()

	// A polygon off the gridset: the server's one-line refusal, under the
	// form. Chromium logs the 400 response itself, and nothing else.
	before := len(b.errors())
	b.do(chromedp.Click(chromedp.ID("map-clear")), chromedp.Focus(chromedp.ID("f-geometry")),
		insertText(`{"type":"Polygon","coordinates":[[[200,10],[210,10],[210,20],[200,10]]]}`))
	b.do(chromedp.Click(chromedp.ID("f-submit")))
	b.waitFor("the refusal", `document.getElementById('form-msg').classList.contains('error')`)
	if msg := eval[string](b, `document.getElementById('form-msg').textContent`); !strings.Contains(msg, "HTTP 400") || !strings.Contains(msg, "outside gridset") {
		t.Errorf("refusal shown as %q", msg)
	}
	b.screenshot("tasks-polygon-refused")
	b.checkLocal()
	if errs := b.errors()[before:]; len(errs) != 1 || !strings.Contains(errs[0], "status of 400") {
		t.Errorf("page errors after the refusal: %q", errs)
	}
}

// insertText types text into the focused element at once, as a paste does
// (one input event).
func insertText(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: text})
		return err
	})
}
