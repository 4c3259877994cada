package admin

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/tilecache"
)

func TestIsPagePath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/tasks": true, "/geowebcache/tasks": true, "tasks": true,
		"": false, "/tasks/": false, "/tasks.js": false, "/geowebcache/": false, "/mytasks": false, "/x": false,
	} {
		if got := isPagePath(p); got != want {
			t.Errorf("isPagePath(%q) = %v", p, got)
		}
	}
	if rt, ok, err := parsePath("/geowebcache/rest/layers.json"); !ok || err != nil || rt.kind != "layers" {
		t.Fatalf("layers.json: %+v %v %v", rt, ok, err)
	}
}

// The page is one document: its script and styles inlined, each allowed
// by its hash in the Content-Security-Policy, and every request it makes
// relative to the page.
func TestTaskPage(t *testing.T) {
	body, csp := taskPage()
	page := string(body)
	for _, re := range []string{`(?s)<script>(.*?)</script>`, `(?s)<style>(.*?)</style>`} {
		m := regexp.MustCompile(re).FindAllStringSubmatch(page, -1)
		if len(m) != 1 {
			t.Fatalf("%d blocks for %s", len(m), re)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, h) {
			t.Fatalf("CSP %q lacks %s", csp, h)
		}
	}
	if strings.Contains(page, `src="`) || strings.Contains(page, `rel="stylesheet"`) {
		t.Fatal("the page still loads a file")
	}
	refs := regexp.MustCompile("(?:request|getJSON)\\(\\s*[`'\"]([^`'\"]+)").FindAllStringSubmatch(page, -1)
	if len(refs) < 4 {
		t.Fatalf("found %d requests in the page's script", len(refs))
	}
	for _, ref := range refs {
		if strings.HasPrefix(ref[1], "/") || strings.Contains(ref[1], "://") {
			t.Errorf("the page requests %q: not relative", ref[1])
		}
	}
	h := &Handler{}
	w := httptest.NewRecorder()
	h.page(w, httptest.NewRequest("HEAD", "/tasks", nil))
	if w.Code != 200 || w.Header().Get("Content-Security-Policy") != csp || w.Body.Len() != 0 {
		t.Fatalf("HEAD: %d %q", w.Code, w.Header())
	}
	w = httptest.NewRecorder()
	h.page(w, httptest.NewRequest("DELETE", "/tasks", nil))
	if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("DELETE: %d %q", w.Code, w.Header())
	}
}

// The Storage panel: its markup and script are served, and it is marked
// for reading rest/usage.json exactly when the cache counts usage (a 404
// would be a console error on every visit).
func TestTaskPageStorage(t *testing.T) {
	body, _ := taskPage()
	page := string(body)
	for _, want := range []string{
		`<section id="storage-section" hidden>`, `<table id="storage" class="storage">`, `<tr class="total"><td>All layers</td>`,
		`getJSON('rest/usage.json')`, `function renderStorage(usage)`, `el('meter'`, `dataset.usage !== 'on'`, `.quota-col {`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	counted, _ := cacheFixture(t, func(cfg *tilecache.Config) { cfg.Usage = true })
	for _, c := range []struct {
		fx   *fixture
		want bool
	}{{newFixture(t), false}, {counted, true}} {
		w := c.fx.serve(t, "GET", "/tasks", "", nil)
		if w.Code != 200 {
			t.Fatalf("GET /tasks: %d", w.Code)
		}
		on := strings.Contains(w.Body.String(), `<section id="storage-section" hidden data-usage="on">`)
		if on != c.want || strings.Count(w.Body.String(), `id="storage-section"`) != 1 {
			t.Errorf("usage counted %v: panel marked %v", c.want, on)
		}
	}
}
