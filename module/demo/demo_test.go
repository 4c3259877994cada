package demo

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func testInfo() Info {
	return Info{
		WMSURL:  "../wms",
		WMTSURL: "../wmts",
		Layers: []Layer{{
			Name:    "test:a<b>",
			Formats: []string{"image/png", "image/jpeg"},
			Styles:  []string{"", "population"},
			Gridsets: []Gridset{{
				Name: "EPSG:4326", SRS: "EPSG:4326",
				Extent: [4]float64{-180, -90, 180, 90}, Coverage: [4]float64{-180, -90, 180, 90},
				Resolutions: []float64{0.703125, 0.3515625}, TileWidth: 256, TileHeight: 256,
				MinZoom: 0, MaxZoom: 1,
			}, {
				Name: "EPSG:900913", SRS: "EPSG:900913", TopLeft: true,
				MinZoom: 2, MaxZoom: 5, TileWidth: 256, TileHeight: 256,
			}},
		}, {
			Name: "empty",
		}},
	}
}

func serve(t *testing.T, h http.Handler, method, target string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPageListsLayersWithoutJavaScript(t *testing.T) {
	h := Handler("/x/demo", testInfo)
	for _, tc := range []struct{ path, base string }{
		{"/x/demo/", ""},
		{"/x/demo/index.html", ""},
		{"/x/demo", `<base href="demo/">`},
	} {
		r := serve(t, h, "GET", tc.path)
		b := body(t, r)
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("%s: %d %q", tc.path, r.StatusCode, r.Header.Get("Content-Type"))
		}
		if got := strings.Contains(b, "<base "); got != (tc.base != "") || tc.base != "" && !strings.Contains(b, tc.base) {
			t.Fatalf("%s: base element wrong:\n%s", tc.path, b)
		}
		for _, want := range []string{
			`<script src="app.js" defer></script>`,
			`<link rel="stylesheet" href="app.css">`,
			`test:a&lt;b&gt;`, // escaped
			`<td>EPSG:900913</td>`,
			`<td>2–5</td>`,
			`image/png<br>image/jpeg`,
			`<i>(default)</i><br>population`,
			`href="#layer=test%3aa%3cb%3e&amp;gridset=EPSG%3a900913"`,
			`href="../wmts?SERVICE=WMTS&amp;REQUEST=GetCapabilities"`,
		} {
			if !strings.Contains(b, want) {
				t.Errorf("%s: page lacks %s", tc.path, want)
			}
		}
		if strings.Contains(b, "<b>") {
			t.Errorf("%s: a layer name went into the page unescaped", tc.path)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", tc.path, csp)
		}
	}
}

func TestInfoJSON(t *testing.T) {
	h := Handler("/demo/", testInfo) // a trailing slash in the prefix is the same prefix
	r := serve(t, h, "GET", "/demo/info.json")
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(body(t, r)), &got); err != nil {
		t.Fatal(err)
	}
	layers := got["layers"].([]any)
	empty := layers[1].(map[string]any)
	if empty["formats"] == nil || empty["gridsets"] == nil {
		t.Fatalf("empty lists are null: %v", empty)
	}
	gs := layers[0].(map[string]any)["gridsets"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "srs", "extent", "coverage", "resolutions", "tileWidth", "tileHeight", "topLeft", "minZoom", "maxZoom"} {
		if _, ok := gs[k]; !ok {
			t.Errorf("gridset lacks %s: %v", k, gs)
		}
	}
	if got["wmsUrl"] != "../wms" || got["wmtsUrl"] != "../wmts" {
		t.Fatalf("service URLs: %v", got)
	}
	if _, ok := got["tmsUrl"]; ok {
		t.Fatal("an off service is listed")
	}
	// No layers at all: [] too.
	r = serve(t, Handler("/demo", func() Info { return Info{} }), "GET", "/demo/info.json")
	if b := body(t, r); !strings.Contains(b, `"layers":[]`) {
		t.Fatalf("no layers: %s", b)
	}
}

func TestAssets(t *testing.T) {
	h := Handler("/demo", testInfo)
	for _, name := range []string{"app.js", "app.css", "THIRD_PARTY_LICENSES.txt"} {
		plainResp := serve(t, h, "GET", "/demo/"+name)
		plain := body(t, plainResp)
		if plainResp.StatusCode != 200 || plainResp.Header.Get("Content-Encoding") != "" || len(plain) < 1000 {
			t.Fatalf("%s: %d, %d bytes", name, plainResp.StatusCode, len(plain))
		}
		etag := plainResp.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("%s: no ETag", name)
		}
		if r := serve(t, h, "GET", "/demo/"+name, "If-None-Match", etag); r.StatusCode != 304 {
			t.Fatalf("%s: revalidation answered %d", name, r.StatusCode)
		}
		gzResp := serve(t, h, "GET", "/demo/"+name, "Accept-Encoding", "br, gzip")
		if gzResp.Header.Get("Content-Encoding") != "gzip" || gzResp.Header.Get("ETag") == etag {
			t.Fatalf("%s: gzip %q, ETag %q", name, gzResp.Header.Get("Content-Encoding"), gzResp.Header.Get("ETag"))
		}
		zr, err := gzip.NewReader(gzResp.Body)
		if err != nil {
			t.Fatal(err)
		}
		unz, _ := io.ReadAll(zr)
		if !bytes.Equal(unz, []byte(plain)) {
			t.Fatalf("%s: gzipped body differs", name)
		}
		if r := serve(t, h, "GET", "/demo/"+name, "Accept-Encoding", "gzip;q=0"); r.Header.Get("Content-Encoding") != "" {
			t.Fatalf("%s: gzip sent despite q=0", name)
		}
	}
	if ct := serve(t, h, "GET", "/demo/app.js").Header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Fatalf("app.js: %q", ct)
	}
}

// The page fetches nothing from elsewhere: no absolute URL in what loads
// resources (the bundle's XML namespace names are not fetched).
func TestNothingFromTheInternet(t *testing.T) {
	h := Handler("/demo", testInfo)
	page := body(t, serve(t, h, "GET", "/demo/"))
	css := body(t, serve(t, h, "GET", "/demo/app.css"))
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindString(page); m != "" {
		t.Fatalf("page loads %s", m)
	}
	if m := regexp.MustCompile(`(?i)url\(\s*['"]?(https?:)?//|@import|@font-face`).FindString(css); m != "" {
		t.Fatalf("app.css loads %s", m)
	}
	js := body(t, serve(t, h, "GET", "/demo/app.js"))
	if m := regexp.MustCompile(`(?i)https?://(cdn|unpkg|fonts|tile|[a-z]\.tile)`).FindString(js); m != "" {
		t.Fatalf("app.js names %s", m)
	}
}

func TestOtherPathsAndMethods(t *testing.T) {
	h := Handler("/demo", testInfo)
	for _, p := range []string{"/demo/nope.js", "/demo/assets/app.js", "/demox", "/other", "/demo/../secret"} {
		if r := serve(t, h, "GET", p); r.StatusCode != 404 {
			t.Errorf("%s: %d", p, r.StatusCode)
		}
	}
	r := serve(t, h, "POST", "/demo/")
	if r.StatusCode != 405 || r.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %q", r.StatusCode, r.Header.Get("Allow"))
	}
	r = serve(t, h, "HEAD", "/demo/info.json")
	if r.StatusCode != 200 || body(t, r) != "" {
		t.Fatalf("HEAD: %d", r.StatusCode)
	}
}
