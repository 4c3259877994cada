package admin

import (
	"github.com/tilecache/caddy-tilecache/module/httpx"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tilecache/caddy-tilecache/seeder"
)

func TestParsePath(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool // under /rest/
		err  bool
		want route
	}{
		{"/wms", false, false, route{}},
		{"/rest/seed.json", true, false, route{kind: "listing", format: "json"}},
		{"/rest/seed.xml", true, false, route{kind: "listing", format: "xml"}},
		{"/rest/seed", true, false, route{kind: "kill"}},
		{"/rest/masstruncate", true, false, route{kind: "masstruncate"}},
		{"/rest/tasks/12.json", true, false, route{kind: "task", id: 12}},
		{"/rest/tasks/0.json", true, true, route{}},
		{"/rest/tasks/x.json", true, true, route{}},
		{"/rest/tasks/12", true, false, route{kind: "task", id: 12}}, // DELETE's spelling
		{"/rest/tasks/12.xml", true, true, route{}},
		{"/rest/tasks/+12", true, true, route{}},
		{"/rest/tasks/.json", true, true, route{}},
		{"/rest/seed/test:a.json", true, false, route{kind: "layer", layer: "test:a", format: "json"}},
		{"/rest/seed/test%3Aa.xml", true, false, route{kind: "layer", layer: "test:a", format: "xml"}},
		{"/rest/seed/test:mock.layer.name.json", true, false, route{kind: "layer", layer: "test:mock.layer.name", format: "json"}},
		{"/rest/seed/test:mock.layer.name.json.xml", true, false, route{kind: "layer", layer: "test:mock.layer.name.json", format: "xml"}},
		{"/rest/seed/test%3Amock%2Elayer.xml", true, false, route{kind: "layer", layer: "test:mock.layer", format: "xml"}},
		{"/rest/seed/test:a", true, false, route{kind: "kill", layer: "test:a"}},
		{"/rest/seed/test:mock.layer.name", true, false, route{kind: "kill", layer: "test:mock.layer.name"}},
		{"/rest/seed/.json", true, false, route{kind: "kill", layer: ".json"}},
		{"/geowebcache/rest/seed/test:a.json", true, false, route{kind: "layer", layer: "test:a", format: "json"}},
		{"/rest/seed/", true, true, route{}},
		{"/rest/seed/a/b.json", true, true, route{}},
		{"/rest/seed/a%2Fb.json", true, true, route{}},
		{"/rest/seed/a%00b.json", true, true, route{}},
		{"/rest/seed/a%zzb.json", true, true, route{}},
		{"/rest/foo", true, true, route{}},
		{"/rest/", true, true, route{}},
	} {
		got, ok, err := parsePath(c.path)
		if ok != c.ok || (err != nil) != c.err || (err == nil && got != c.want) {
			t.Errorf("%s: %+v %v %v, want %+v %v err=%v", c.path, got, ok, err, c.want, c.ok, c.err)
		}
	}
}

func TestAllow(t *testing.T) {
	w := httptest.NewRecorder()
	if allow(w, httptest.NewRequest("GET", "/", nil), "GET", "POST") {
		if w.Code != 200 || w.Header().Get("Allow") != "" {
			t.Errorf("allowed GET wrote %d %q", w.Code, w.Header().Get("Allow"))
		}
	} else {
		t.Error("GET not allowed")
	}
	w = httptest.NewRecorder()
	if allow(w, httptest.NewRequest("PUT", "/", nil), "GET", "POST") {
		t.Fatal("PUT allowed")
	}
	if w.Code != 405 || w.Header().Get("Allow") != "GET, POST" || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") ||
		strings.Count(w.Body.String(), "\n") != 1 {
		t.Errorf("405: %d %q %q %q", w.Code, w.Header().Get("Allow"), w.Header().Get("Content-Type"), w.Body.String())
	}
}

func TestPlainIsOneLine(t *testing.T) {
	w := httptest.NewRecorder()
	httpx.Text(w, 400, "a\nb\r\nc")
	if w.Body.String() != "a b  c\n" || w.Code != 400 {
		t.Errorf("%d %q", w.Code, w.Body.String())
	}
}

func ip(v int) *int { return &v }

func TestParseSeedRequestForms(t *testing.T) {
	want := seeder.Request{
		GridsetID: "EPSG:4326", ZoomStart: ip(1), ZoomStop: ip(2), Format: "image/jpeg", Type: "reseed",
		ThreadCount: ip(2), Bounds: []float64{-180, -90, 0, 90}, Params: map[string]string{"STYLES": "population"},
	}
	xmlBody := `<?xml version="1.0"?><seedRequest><name>ignored</name>
		<bounds><coords><double>-180.0</double><double>-90</double><double> 0 </double><double>90</double></coords></bounds>
		<gridSetId>EPSG:4326</gridSetId><zoomStart>1</zoomStart><zoomStop> 2 </zoomStop><format>image/jpeg</format>
		<type>reseed</type><threadCount>2</threadCount><unknown>x</unknown>
		<parameters><entry><string>STYLES</string><string>population</string></entry></parameters></seedRequest>`
	got, err := parseXMLSeed([]byte(xmlBody))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("XML: %+v %v", got, err)
	}
	head := `{"seedRequest":{"name":"ignored","bounds":{"coords":{"double":[-180,"-90.0",0,90]}},"gridSetId":"EPSG:4326","zoomStart":"1","zoomStop":2,"format":"image\/jpeg","type":"reseed","threadCount":2,`
	for _, p := range []string{
		`"parameters":{"entry":[{"string":["STYLES","population"]}]}`,
		`"parameters":{"entry":{"string":["STYLES","population"]}}`,
		`"parameters":{"STYLES":"population"}`,
	} {
		got, err := parseJSONSeed([]byte(head + p + `}}`))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("JSON %s: %+v %v", p, got, err)
		}
	}
	got, err = parseJSONSeed([]byte(`{"seedRequest":{"srs":{"number":"900913"},"zoomStart":0,"zoomStop":0}}`))
	if err != nil || got.SRS == nil || *got.SRS != 900913 {
		t.Errorf("JSON srs: %+v %v", got, err)
	}
	got, err = parseXMLSeed([]byte(`<seedRequest><srs><number>3857</number></srs></seedRequest>`))
	if err != nil || got.SRS == nil || *got.SRS != 3857 || got.ZoomStart != nil {
		t.Errorf("XML srs: %+v %v", got, err)
	}
}

func TestParseSeedRequestErrors(t *testing.T) {
	for _, b := range []string{
		`<seedRequest>`, `<other/>`, `<seedRequest><zoomStart>x</zoomStart></seedRequest>`,
		`<seedRequest><type></type></seedRequest>`, `<seedRequest><bounds><coords><double>a</double></coords></bounds></seedRequest>`,
		`<seedRequest><parameters><entry><string>A</string></entry></parameters></seedRequest>`,
		`<!DOCTYPE seedRequest><seedRequest/>`, `<seedRequest><srs><number/></srs></seedRequest>`,
	} {
		if _, err := parseXMLSeed([]byte(b)); err == nil {
			t.Errorf("XML %s accepted", b)
		} else if _, ok := err.(*errBody); !ok {
			t.Errorf("XML %s: %T %v", b, err, err)
		}
	}
	for _, b := range []string{
		`{`, `[]`, `null`, `{"other":{}}`, `{"seedRequest":{},"x":1}`, `{"seedRequest":[]}`, `{"seedRequest":null}`,
		`{"seedRequest":{"zoomStart":1.5}}`, `{"seedRequest":{"zoomStart":true}}`, `{"seedRequest":{"type":""}}`,
		`{"seedRequest":{"format":1}}`, `{"seedRequest":{"srs":4326}}`, `{"seedRequest":{"srs":{}}}`,
		`{"seedRequest":{"bounds":[1,2,3,4]}}`, `{"seedRequest":{"bounds":{"coords":{"double":[1,"x",3,4]}}}}`,
		`{"seedRequest":{"parameters":[]}}`, `{"seedRequest":{"parameters":{"STYLES":1}}}`,
		`{"seedRequest":{"parameters":{"entry":[{"string":["A"]}]}}}`, `{"seedRequest":{"parameters":{"entry":"x"}}}`,
	} {
		if _, err := parseJSONSeed([]byte(b)); err == nil {
			t.Errorf("JSON %s accepted", b)
		} else if _, ok := err.(*errBody); !ok {
			t.Errorf("JSON %s: %T %v", b, err, err)
		}
	}
}

func TestBaseURL(t *testing.T) {
	r := httptest.NewRequest("GET", "http://example.org:8080/gwc/rest/masstruncate", nil)
	if got := restBase(r); got != "http://example.org:8080/gwc" {
		t.Errorf("baseURL %q", got)
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`tile_cache_admin tiles {
		workers 4
		history 10
		retry_count 0
		retry_wait 250ms
		max_failures 7
	}`)
	var h Handler
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if h.Cache != "tiles" || h.Workers != 4 || h.History != 10 || h.RetryCount == nil || *h.RetryCount != 0 ||
		time.Duration(h.RetryWait) != 250*time.Millisecond || h.MaxFailures == nil || *h.MaxFailures != 7 {
		t.Errorf("%+v", h)
	}
	for _, bad := range []string{
		`tile_cache_admin a b`, `tile_cache_admin { workers }`, `tile_cache_admin { workers x }`,
		`tile_cache_admin { workers 1 2 }`, `tile_cache_admin { bogus 1 }`, `tile_cache_admin { retry_wait soon }`,
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for _, h := range []Handler{{Workers: 0, History: 1}, {Workers: 1, History: 0}, {Workers: 1, History: 1, RetryCount: ip(-1)}} {
		if h.Validate() == nil {
			t.Errorf("%+v validated", h)
		}
	}
}
