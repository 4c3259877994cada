package caddytest

import (
	"bytes"
	"fmt"
	"image"
	_ "image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

var client = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}

// load puts a Caddyfile into the running Caddy and fails the test if it
// does not become the active config.
func load(t *testing.T, caddyfile string) {
	t.Helper()
	loadWhole(t, globalOptions()+caddyfile)
}

// loadWhole is load for a Caddyfile that brings its own global options.
func loadWhole(t *testing.T, caddyfile string) {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(caddyfile, "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	// Connections kept alive from the last config belong to its servers,
	// which close them as the new config takes over: a POST sent on one
	// just then failed with EOF (net/http retries only idempotent
	// requests), once in a few runs of the suite.
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// tileQuery builds a WMS 1.1.1 GetMap for one tile of a built-in gridset.
func tileQuery(layer, gs string, idx gridset.Index, extra ...string) url.Values {
	g, ok := gridset.Builtin(gs)
	if !ok {
		panic(gs)
	}
	b := g.TileBBox(idx)
	q := url.Values{
		"SERVICE": {"WMS"}, "VERSION": {"1.1.1"}, "REQUEST": {"GetMap"},
		"LAYERS": {layer}, "STYLES": {""}, "SRS": {gs},
		"BBOX":  {fmtF(b.MinX) + "," + fmtF(b.MinY) + "," + fmtF(b.MaxX) + "," + fmtF(b.MaxY)},
		"WIDTH": {"256"}, "HEIGHT": {"256"}, "FORMAT": {"image/png"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

func siteURL(q url.Values) string {
	return fmt.Sprintf("http://localhost:%d/wms?%s", httpPort, q.Encode())
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, u string, hdr ...string) answer {
	t.Helper()
	return doBody(t, method, u, "", hdr...)
}

// doBody sends one request with exactly the given headers and body.
func doBody(t *testing.T, method, u, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, got}
}

func get(t *testing.T, u string, hdr ...string) answer { t.Helper(); return do(t, "GET", u, hdr...) }

// mustTile asserts a 200 tile answer with the given cache result and
// returns the decoded image.
func mustTile(t *testing.T, a answer, result string) image.Image {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("status %d, body %q", a.status, truncate(a.body))
	}
	if got := a.header.Get("Geowebcache-Cache-Result"); got != result {
		t.Fatalf("cache result %q, want %q (Cache-Status %q, miss reason %q)", got, result,
			a.header.Get("Cache-Status"), a.header.Get("Geowebcache-Miss-Reason"))
	}
	img, _, err := image.Decode(bytes.NewReader(a.body))
	if err != nil {
		t.Fatalf("tile does not decode: %v", err)
	}
	return img
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// metric reads one sample from Caddy's admin /metrics (0 when absent).
func metric(t *testing.T, name string, labels string) float64 {
	t.Helper()
	a := get(t, "http://"+adminAddr+"/metrics")
	prefix := name
	if labels != "" {
		prefix += "{" + labels + "}"
	}
	for _, line := range strings.Split(string(a.body), "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(prefix):]), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

func newJSONTester(t *testing.T, cfg string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "json")
	if t.Failed() {
		t.FailNow()
	}
	return tester
}
