package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
	"github.com/tilecache/caddy-tilecache/seeder"
)

// Hostile input to the REST interface. Properties everywhere: no panic,
// and every rejection a 4xx with one non-empty line of text/plain. The
// committed corpora (testdata/fuzz/<Fuzz...>/) make `go test` replay them.

// checkParserError: a parser's rejection is an *errBody (the handler's
// 400) with a message.
func checkParserError(t *testing.T, in []byte, err error) {
	t.Helper()
	var eb *errBody
	if !errors.As(err, &eb) {
		t.Fatalf("%q: error %T %v is not a 400", in, err, err)
	}
	if strings.TrimSpace(eb.msg) == "" {
		t.Fatalf("%q: empty message", in)
	}
}

func FuzzParseXMLSeed(f *testing.F) {
	for _, s := range []string{
		`<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>1</zoomStop></seedRequest>`,
		`<?xml version="1.0"?><seedRequest><bounds><coords><double>-180</double><double>-90</double><double>0</double><double>90</double></coords></bounds><srs><number>4326</number></srs><parameters><entry><string>STYLES</string><string>x</string></entry></parameters><type>truncate</type></seedRequest>`,
		`<!DOCTYPE seedRequest [<!ENTITY z "0">]><seedRequest><zoomStart>&z;</zoomStart></seedRequest>`,
		`<seedRequest><zoomStart>99999999999999999999</zoomStart></seedRequest>`,
		`<seedRequest/><seedRequest/>`,
		`<a:seedRequest xmlns:a="x"><zoomStart> 1 </zoomStart></a:seedRequest>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseXMLSeed(body)
		if err != nil {
			checkParserError(t, body, err)
			return
		}
		if req.Bounds != nil && len(req.Bounds) == 0 && !bytes.Contains(body, []byte("bounds")) {
			t.Fatalf("%q: bounds from nowhere", body)
		}
		checkParamLimit(t, body, req.Params)
	})
}

func FuzzParseJSONSeed(f *testing.F) {
	for _, s := range []string{
		`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1}}`,
		`{"seedRequest":{"bounds":{"coords":{"double":[-180,"-90.0",0,90]}},"zoomStart":"1","zoomStop":2,"parameters":{"entry":{"string":["STYLES","x"]}}}}`,
		`{"seedRequest":{"parameters":{"entry":[{"string":["A","1"]},{"string":["B"]}]}}}`,
		`{"seedRequest":{"srs":{"number":"900913"},"threadCount":1e400}}`,
		`{"seedRequest":{"zoomStart":-9223372036854775808,"zoomStop":9223372036854775807}}`,
		`{"seedRequest":null}`, `[]`, `{"seedRequest":{"type":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseJSONSeed(body)
		if err != nil {
			checkParserError(t, body, err)
			return
		}
		checkParamLimit(t, body, req.Params)
	})
}

// checkParamLimit: the default max_param_length refuses a parsed request
// exactly when a parameter name or value is longer, with a parser's error.
func checkParamLimit(t *testing.T, body []byte, p map[string]string) {
	t.Helper()
	h := &Handler{}
	h.setDefaults()
	long := false
	for k, v := range p {
		long = long || len(k) > h.MaxParamLength || len(v) > h.MaxParamLength
	}
	err := h.checkParams(p)
	if long != (err != nil) {
		t.Fatalf("%q: a parameter over %d bytes: %v, refused: %v", body, h.MaxParamLength, long, err)
	}
	if err != nil {
		checkParserError(t, body, err)
	}
}

// FuzzParseWhich: exactly running, 1, pending and all, in any case, are
// accepted; every other value gets a message naming the choices.
func FuzzParseWhich(f *testing.F) {
	for _, s := range []string{"all", "RUNNING", "1", "pending", "", "2", "al\u0130", "running\n", "ALL "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := seeder.ParseWhich(s)
		low := strings.ToLower(s)
		valid := low == "all" || low == "running" || low == "pending" || low == "1"
		if valid != (err == nil) {
			t.Fatalf("%q: accepted %v (%v)", s, err == nil, err)
		}
		if err != nil && !strings.Contains(err.Error(), "all|running|pending") {
			t.Fatalf("%q: message %q", s, err)
		}
		if err == nil && (w < seeder.KillRunning || w > seeder.KillAll) {
			t.Fatalf("%q: %v", s, w)
		}
	})
}

// FuzzParsePath: any path either is not the interface's, or is one of its
// resources, or an error; a layer is never empty and never holds a slash
// or NUL; an odd path (oddRESTPath) never panics either.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/rest/seed/test:a.json", "/rest/seed/..%2f..%2fetc%2fpasswd.json", "/rest/seed/%2e",
		"/rest/tasks/1.json", "/x/rest/seed/a%00.xml", "/rest/seed/%zz", "/rest/seed/a%252f.json", "/rest/rest/seed.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		oddRESTPath(p)
		rt, ok, err := parsePath(p)
		if !ok || err != nil {
			return
		}
		switch rt.kind {
		case "listing", "kill", "masstruncate", "layers":
		case "layer":
			if rt.layer == "" || strings.ContainsAny(rt.layer, "/\x00") || (rt.format != "json" && rt.format != "xml") {
				t.Fatalf("%q: %+v", p, rt)
			}
		case "task":
			if rt.id <= 0 {
				t.Fatalf("%q: %+v", p, rt)
			}
		default:
			t.Fatalf("%q: kind %q", p, rt.kind)
		}
		if rt.kind == "kill" && rt.layer != "" && strings.ContainsAny(rt.layer, "/\x00") {
			t.Fatalf("%q: %+v", p, rt)
		}
		if len(rt.layer) > maxLayerNameLength+len(".json") {
			t.Fatalf("%q: a layer name of %d bytes", p, len(rt.layer))
		}
	})
}

// fixture is a tile_cache (layers test:a with a STYLES filter and test:q
// with a free CQL_FILTER, an upstream nobody listens on, its breaker
// refusing after the first failures) and a tile_cache_admin in front of
// it: max_tasks 2, so that whatever the fuzzer makes valid is submitted
// twice and refused (429) after that, at no cost.
type fixture struct {
	h *Handler
}

var fixtureSeq atomic.Int64

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	name := fmt.Sprintf("fuzz%d-%d", time.Now().UnixNano(), fixtureSeq.Add(1))
	c, err := tilecache.NewCache(name, tilecache.Config{
		Upstream: "http://127.0.0.1:1/wms",
		Storage:  tb.TempDir(),
		Timeout:  caddy.Duration(time.Second),
		Breaker:  &tilecache.BreakerConfig{Failures: 1, Cooldown: caddy.Duration(time.Hour)},
		Layers: []tilecache.LayerConfig{
			{Name: "test:a", Gridsets: []string{"EPSG:4326", "EPSG:900913"},
				Parameters: []params.FilterConfig{{Key: "STYLES", Values: []string{"", "population"}}}},
			{Name: "test:q", Gridsets: []string{"EPSG:4326"},
				Parameters: []params.FilterConfig{{Key: "CQL_FILTER", Default: "INCLUDE", Regex: ".*"}}},
		},
	}, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Release() })
	e, err := seeder.Acquire(name, seeder.Config{Workers: 1, History: 10,
		Retry: seeder.RetryPolicy{Retries: 0, Wait: time.Millisecond, MaxFailures: 0}}, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Release() })
	e.Attach(c)
	h := &Handler{Cache: name, Workers: 1, History: 10, MaxTasks: 2, MaxBody: 64 << 10, engine: e, log: zap.NewNop()}
	h.bound = new(bound)
	h.bound.c.Store(c)
	if err := h.Validate(); err != nil {
		tb.Fatal(err)
	}
	return &fixture{h: h}
}

// serve sends one request through the handler and checks the properties.
// A target Go's server would not hand over (unparsable) is skipped: nil.
func (fx *fixture) serve(t *testing.T, method, target, ct string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil || strings.ContainsAny(target, " \t\r\n\x00") {
		return nil
	}
	path := target
	r := &http.Request{
		Method: method, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Host: "localhost", RemoteAddr: "127.0.0.1:1234",
	}
	r = r.WithContext(context.Background())
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	w := httptest.NewRecorder()
	nextCalled := false
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { nextCalled = true; return nil })
	if err := fx.h.ServeHTTP(w, r, next); err != nil {
		t.Fatalf("%s %q: handler error %v", method, path, err)
	}
	if nextCalled {
		return w
	}
	if w.Code >= 500 {
		t.Fatalf("%s %q (%q, %q): %d %q", method, path, ct, body, w.Code, w.Body.String())
	}
	if w.Code >= 400 {
		out := w.Body.String()
		line := strings.TrimSuffix(out, "\n")
		if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") || strings.TrimSpace(line) == "" ||
			strings.ContainsAny(line, "\r\n") || !strings.HasSuffix(out, "\n") {
			t.Fatalf("%s %q (%q, %q): %d with %q %q: not one line of text/plain", method, path, ct, body, w.Code,
				w.Header().Get("Content-Type"), out)
		}
	}
	return w
}

// FuzzSeedHandler: seed requests through the handler, XML or JSON.
func FuzzSeedHandler(f *testing.F) {
	f.Add(false, "test:a", []byte(`<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>0</zoomStop><type>truncate</type></seedRequest>`))
	f.Add(true, "test:a", []byte(`{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":30}}`))
	f.Add(true, "test:q", []byte(`{"seedRequest":{"zoomStart":0,"zoomStop":0,"parameters":{"CQL_FILTER":"`+strings.Repeat("x", 1100)+`"}}}`))
	f.Add(true, "test:a", []byte(`{"seedRequest":{"zoomStart":0,"zoomStop":0,"bounds":{"coords":{"double":[1e308,-1e308,"NaN",0]}}}}`))
	f.Add(false, "nope", []byte(`<seedRequest/>`))
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, json bool, layer string, body []byte) {
		ext := ".xml"
		if json {
			ext = ".json"
		}
		w := fx.serve(t, "POST", "/rest/seed/"+url.PathEscape(layer)+ext, "", body)
		if w != nil && w.Code == 200 && (w.Body.Len() != 0 || !strings.Contains(w.Header().Get("Location"), "/rest/tasks/")) {
			t.Fatalf("%q: 200 with %q, Location %q", body, w.Body.String(), w.Header().Get("Location"))
		}
	})
}

// FuzzKillForm: the kill form through the handler, in a form body, a
// multipart body or the query string, for all layers or one.
func FuzzKillForm(f *testing.F) {
	for _, c := range []struct{ layer, query, ct, body string }{
		{"", "", "application/x-www-form-urlencoded", "kill_all=all"},
		{"test:a", "kill_all=RUNNING", "", ""},
		{"", "kill_all=%zz", "", ""},
		{"", "", "application/x-www-form-urlencoded", "kill_all=1&kill_all=2"},
		{"", "", "multipart/form-data; boundary=X", "--X\r\nContent-Disposition: form-data; name=\"kill_all\"\r\n\r\npending\r\n--X--\r\n"},
		{"", "", "multipart/form-data", "--X\r\n"},
		{"nope", "", "application/x-www-form-urlencoded", "kill_all=all"},
		{"", "", "application/x-www-form-urlencoded; charset=utf-16", "kill_all=<script>"},
	} {
		f.Add(c.layer, c.query, c.ct, []byte(c.body))
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, layer, query, ct string, body []byte) {
		p := "/rest/seed"
		if layer != "" {
			p += "/" + url.PathEscape(layer)
		}
		if query != "" {
			p += "?" + query
		}
		w := fx.serve(t, "POST", p, ct, body)
		if w == nil {
			return
		}
		if w.Code == 200 && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("kill 200 as %q", w.Header().Get("Content-Type"))
		}
		if w.Code == 200 && strings.Contains(w.Body.String(), "<script") {
			t.Fatalf("kill page echoes markup: %q", w.Body.String())
		}
	})
}

// FuzzMassTruncate: mass truncate requests through the handler.
func FuzzMassTruncate(f *testing.F) {
	for _, c := range []struct{ ct, body string }{
		{"text/xml", `<truncateLayer><layerName>test:a</layerName></truncateLayer>`},
		{"", `<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:4326</gridSetId><bounds><coords><double>-180</double><double>-90</double><double>0</double><double>90</double></coords></bounds></truncateExtent>`},
		{"application/xml; charset=utf-8", `<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><truncateLayer><layerName>&x;</layerName></truncateLayer>`},
		{"text/xml", `<truncateLayer><layerName>test:a</layerName></truncateLayer><truncateLayer><layerName>test:q</layerName></truncateLayer>`},
		{"text/xml", `<truncateLayer><layerName>nope</layerName></truncateLayer>`},
		{"application/json", `{}`},
		{"text/xml", `<truncateExtent><layerName>test:a</layerName><gridSetId>x</gridSetId></truncateExtent>`},
	} {
		f.Add(c.ct, []byte(c.body))
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		fx.serve(t, "POST", "/rest/masstruncate", ct, body)
	})
}

// FuzzAdminPaths: any method on any path under the mount point.
func FuzzAdminPaths(f *testing.F) {
	for _, c := range []struct{ method, path string }{
		{"GET", "/rest/seed.json"}, {"GET", "/rest/seed/test:a.xml"}, {"POST", "/rest/seed/..%2f..%2fetc%2fpasswd.json"},
		{"GET", "/rest/tasks/99999999999999999999.json"}, {"DELETE", "/rest/masstruncate"}, {"GET", "/rest/seed/%2e"},
		{"POST", "/rest/seed/test%3Aa%00.json"}, {"GET", "/rest/layers.json"}, {"PATCH", "/rest/"},
	} {
		f.Add(c.method, c.path)
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, method, path string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			return // not an HTTP method Go's server would hand over
		}
		fx.serve(t, method, path, "", nil)
	})
}
