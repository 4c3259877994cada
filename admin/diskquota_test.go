package admin

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
	"github.com/tilecache/caddy-tilecache/seeder"
)

// cacheFixture is a tile_cache with layers test:a and test:q (as
// newFixture's), configured by cfg, behind a tile_cache_admin.
func cacheFixture(tb testing.TB, setup func(*tilecache.Config)) (*fixture, *tilecache.Cache) {
	tb.Helper()
	name := fmt.Sprintf("quota%d-%d", time.Now().UnixNano(), fixtureSeq.Add(1))
	cfg := tilecache.Config{
		Upstream: "http://127.0.0.1:1/wms",
		Storage:  tb.TempDir(),
		Timeout:  caddy.Duration(time.Second),
		Layers: []tilecache.LayerConfig{
			{Name: "test:a", Gridsets: []string{"EPSG:4326", "EPSG:900913"},
				Parameters: []params.FilterConfig{{Key: "STYLES", Values: []string{"", "population"}}}},
			{Name: "test:q", Gridsets: []string{"EPSG:4326"}},
		},
	}
	setup(&cfg)
	c, err := tilecache.NewCache(name, cfg, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Release() })
	e, err := seeder.Acquire(name, seeder.Config{Workers: 1, History: 10}, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Release() })
	e.Attach(c)
	h := &Handler{Cache: name, Workers: 1, History: 10, MaxTasks: 2, MaxBody: 64 << 10, engine: e, log: zap.NewNop()}
	h.bound = new(bound)
	h.bound.c.Store(c)
	return &fixture{h: h}, c
}

// The quota the tests start from.
func testQuota() *quota.Config {
	return &quota.Config{
		MaxSize:    100 << 20,
		Policy:     quota.LRU,
		KeepLevels: &[2]int{0, 2},
		Layers:     map[string]*quota.LayerConfig{"test:a": {MaxSize: 10 << 20, Policy: quota.LFU}},
	}
}

func quotaFixture(tb testing.TB) (*fixture, *quota.Evictor) {
	fx, c := cacheFixture(tb, func(cfg *tilecache.Config) { cfg.Quota = testQuota() })
	if c.Quota() == nil {
		tb.Fatal("a cache with a quota has no evictor")
	}
	return fx, c.Quota()
}

// xmlQuotaDoc reads a gwcQuotaConfiguration back, independently of the
// types that wrote it.
type xmlQuotaDoc struct {
	XMLName      xml.Name `xml:"gwcQuotaConfiguration"`
	Enabled      string   `xml:"enabled"`
	Frequency    string   `xml:"cacheCleanUpFrequency"`
	Units        string   `xml:"cacheCleanUpUnits"`
	MaxCleanUps  string   `xml:"maxConcurrentCleanUps"`
	Policy       string   `xml:"globalExpirationPolicyName"`
	GlobalValue  *string  `xml:"globalQuota>value"`
	GlobalUnits  string   `xml:"globalQuota>units"`
	LowWatermark string   `xml:"lowWatermark"`
	KeepMin      *string  `xml:"keepLevels>min"`
	KeepMax      string   `xml:"keepLevels>max"`
	LayerQuotas  *struct {
		LayerQuota []struct {
			Layer  string  `xml:"layer"`
			Policy string  `xml:"expirationPolicyName"`
			Value  *string `xml:"quota>value"`
			Units  string  `xml:"quota>units"`
		} `xml:"LayerQuota"`
	} `xml:"layerQuotas"`
}

func TestDiskQuotaGetXML(t *testing.T) {
	fx, _ := quotaFixture(t)
	for _, c := range []struct{ path, accept string }{
		{"/rest/diskquota.xml", ""}, {"/rest/diskquota", ""}, {"/rest/diskquota", "text/html, application/xml;q=0.9, */*;q=0.8"},
		{"/rest/diskquota", "application/json;q=0.5, application/xml"}, {"/gwc/rest/diskquota.xml", "application/json"},
	} {
		w := fx.serveAccept(t, "GET", c.path, c.accept, "", "")
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/xml" {
			t.Fatalf("GET %s (%q): %d %q %q", c.path, c.accept, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
		if !strings.HasPrefix(w.Body.String(), `<?xml version="1.0" encoding="UTF-8"?>`) {
			t.Errorf("no XML declaration: %q", w.Body.String())
		}
		var d xmlQuotaDoc
		if err := xml.Unmarshal(w.Body.Bytes(), &d); err != nil {
			t.Fatalf("%v: %s", err, w.Body.String())
		}
		if d.Enabled != "true" || d.Frequency != "1" || d.Units != "SECONDS" || d.MaxCleanUps != "1" || d.Policy != "LRU" ||
			d.GlobalValue == nil || *d.GlobalValue != "100" || d.GlobalUnits != "MiB" || d.LowWatermark != "0.9" ||
			d.KeepMin == nil || *d.KeepMin != "0" || d.KeepMax != "2" {
			t.Errorf("GET %s: %+v\n%s", c.path, d, w.Body.String())
		}
		if d.LayerQuotas == nil || len(d.LayerQuotas.LayerQuota) != 1 {
			t.Fatalf("layerQuotas: %s", w.Body.String())
		}
		lq := d.LayerQuotas.LayerQuota[0]
		if lq.Layer != "test:a" || lq.Policy != "LFU" || lq.Value == nil || *lq.Value != "10" || lq.Units != "MiB" {
			t.Errorf("LayerQuota %+v", lq)
		}
	}
}

// jsonQuotaDoc reads the JSON form back.
type jsonQuotaDoc struct {
	Doc struct {
		Enabled     *bool  `json:"enabled"`
		Frequency   int    `json:"cacheCleanUpFrequency"`
		Units       string `json:"cacheCleanUpUnits"`
		MaxCleanUps int    `json:"maxConcurrentCleanUps"`
		Policy      string `json:"globalExpirationPolicyName"`
		GlobalQuota *struct {
			Value string `json:"value"`
			Units string `json:"units"`
		} `json:"globalQuota"`
		LowWatermark float64         `json:"lowWatermark"`
		KeepLevels   *map[string]int `json:"keepLevels"`
		LayerQuotas  []struct {
			Layer  string `json:"layer"`
			Policy string `json:"expirationPolicyName"`
			Quota  *struct {
				Value string `json:"value"`
				Units string `json:"units"`
			} `json:"quota"`
		} `json:"layerQuotas"`
	} `json:"gwcQuotaConfiguration"`
}

func TestDiskQuotaGetJSON(t *testing.T) {
	fx, _ := quotaFixture(t)
	for _, c := range []struct{ path, accept string }{
		{"/rest/diskquota.json", ""}, {"/rest/diskquota", "application/json"}, {"/rest/diskquota", "application/xml;q=0.5, application/json"},
		{"/rest/diskquota.json", "application/xml"},
	} {
		w := fx.serveAccept(t, "GET", c.path, c.accept, "", "")
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s (%q): %d %q %q", c.path, c.accept, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
		var d jsonQuotaDoc
		if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
			t.Fatalf("%v: %s", err, w.Body.String())
		}
		q := d.Doc
		if q.Enabled == nil || !*q.Enabled || q.Frequency != 1 || q.Units != "SECONDS" || q.MaxCleanUps != 1 || q.Policy != "LRU" ||
			q.GlobalQuota == nil || q.GlobalQuota.Value != "100" || q.GlobalQuota.Units != "MiB" || q.LowWatermark != 0.9 ||
			q.KeepLevels == nil || (*q.KeepLevels)["min"] != 0 || (*q.KeepLevels)["max"] != 2 {
			t.Errorf("GET %s: %s", c.path, w.Body.String())
		}
		if len(q.LayerQuotas) != 1 || q.LayerQuotas[0].Layer != "test:a" || q.LayerQuotas[0].Policy != "LFU" ||
			q.LayerQuotas[0].Quota == nil || q.LayerQuotas[0].Quota.Value != "10" || q.LayerQuotas[0].Quota.Units != "MiB" {
			t.Errorf("layerQuotas: %s", w.Body.String())
		}
	}
	if os.Getenv("DISKQUOTA_EXAMPLE") != "" { // the examples in docs/rest.md
		for _, p := range []string{"/rest/diskquota.xml", "/rest/diskquota.json"} {
			t.Logf("GET %s\n%s", p, fx.serveAccept(t, "GET", p, "", "", "").Body.String())
		}
	}
}

func TestDiskQuotaSizes(t *testing.T) {
	for bytes, want := range map[int64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 100 << 20: "100 MiB",
		3<<30 + 1<<29: "3.5 GiB", 1<<40 + 1: "1.0000000000009094947017729282379150390625 TiB",
		1<<63 - 1: "7.999999999999999999132638262011596452794037759304046630859375 EiB",
	} {
		d := sizeDocOf(bytes)
		if got := d.Value + " " + d.Units; got != want {
			t.Errorf("%d: %s, want %s", bytes, got, want)
		}
		back, err := parseSize("x", d.Value, d.Units, true, true)
		if err != nil || back != bytes {
			t.Errorf("%d: read back as %d %v", bytes, back, err)
		}
	}
	for _, c := range []struct {
		value, units string
		want         int64
	}{
		{"100", "MiB", 100 << 20}, {"1.5", "GiB", 3 << 29}, {" 2 ", " KB ", 2048}, {"1", "MB", 1 << 20}, {"1", "mib", 1 << 20},
		{"1e3", "B", 1000}, {"0.5", "B", 0}, {"1.9", "B", 1}, {".5", "KiB", 512}, {"7", "EiB", 7 << 60}, {"1", "TB", 1 << 40},
		{"+3", "B", 3},
	} {
		got, err := parseSize("globalQuota", c.value, c.units, true, true)
		if err != nil || got != c.want {
			t.Errorf("%q %q: %d %v, want %d", c.value, c.units, got, err, c.want)
		}
	}
	for _, c := range []struct{ value, units, msg string }{
		{"-1", "MiB", "must not be negative"}, {"x", "MiB", "not a number"}, {"1e", "MiB", "not a number"},
		{"0x10", "B", "not a number"}, {"1/2", "GiB", "not a number"}, {"1e1000", "B", "not a number"},
		{"8", "EiB", "too large"}, {"1", "ZZiB", "unknown units"}, {"1", "", "unknown units"}, {"NaN", "B", "not a number"},
		{"Inf", "B", "not a number"}, {"", "B", "not a number"},
	} {
		if _, err := parseSize("globalQuota", c.value, c.units, true, true); err == nil || !strings.Contains(err.Error(), c.msg) ||
			!strings.HasPrefix(err.Error(), "globalQuota: ") {
			t.Errorf("%q %q: %v, want %q", c.value, c.units, err, c.msg)
		}
	}
}

func TestDiskQuotaPut(t *testing.T) {
	fx, ev := quotaFixture(t)
	// XML: policy, global quota, enabled off, layer quotas replaced.
	w := fx.serve(t, "PUT", "/rest/diskquota.xml", "text/xml", []byte(`<gwcQuotaConfiguration>
		<enabled>false</enabled><diskBlockSize>4096</diskBlockSize><maxConcurrentCleanUps>3</maxConcurrentCleanUps>
		<cacheCleanUpFrequency>10</cacheCleanUpFrequency><cacheCleanUpUnits>MINUTES</cacheCleanUpUnits>
		<globalExpirationPolicyName>lfu</globalExpirationPolicyName>
		<globalQuota><value>2</value><units>GiB</units></globalQuota>
		<layerQuotas><LayerQuota><layer>test:q</layer><quota><value>1.5</value><units>MiB</units></quota>
		<keepLevels><min>1</min><max>3</max></keepLevels></LayerQuota>
		<LayerQuota><layer>test:a</layer><expirationPolicyName>LRU</expirationPolicyName></LayerQuota></layerQuotas>
		</gwcQuotaConfiguration>`))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/xml" {
		t.Fatalf("PUT: %d %q", w.Code, w.Body.String())
	}
	want := &quota.Config{MaxSize: 2 << 30, LowWatermark: 0.9, Policy: quota.LFU, KeepLevels: &[2]int{0, 2},
		Layers: map[string]*quota.LayerConfig{
			"test:q": {MaxSize: 3 << 19, KeepLevels: &[2]int{1, 3}},
			"test:a": {Policy: quota.LRU},
		}}
	if got := ev.Config(); !reflect.DeepEqual(got, want) || ev.Enabled() {
		t.Fatalf("after PUT: %s enabled %v, want %s disabled", got, ev.Enabled(), want)
	}
	var d xmlQuotaDoc
	if err := xml.Unmarshal(w.Body.Bytes(), &d); err != nil || d.Enabled != "false" || d.Policy != "LFU" ||
		d.GlobalValue == nil || *d.GlobalValue != "2" || d.GlobalUnits != "GiB" || d.LayerQuotas == nil ||
		len(d.LayerQuotas.LayerQuota) != 2 || d.LayerQuotas.LayerQuota[0].Layer != "test:a" ||
		d.LayerQuotas.LayerQuota[0].Value != nil || d.LayerQuotas.LayerQuota[1].Units != "MiB" ||
		*d.LayerQuotas.LayerQuota[1].Value != "1.5" || d.LayerQuotas.LayerQuota[1].Policy != "" {
		t.Errorf("PUT's answer %v: %s", err, w.Body.String())
	}
	// GET answers the same.
	if g := fx.serve(t, "GET", "/rest/diskquota.xml", "", nil); g.Body.String() != w.Body.String() {
		t.Errorf("GET after PUT:\n%s\nPUT answered:\n%s", g.Body.String(), w.Body.String())
	}

	// JSON with enabled alone: the rest stays.
	before := ev.Config()
	w = fx.serve(t, "PUT", "/rest/diskquota.json", "application/json", []byte(`{"gwcQuotaConfiguration":{"enabled":true}}`))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("PUT JSON: %d %q", w.Code, w.Body.String())
	}
	if got := ev.Config(); !reflect.DeepEqual(got, before) || !ev.Enabled() {
		t.Fatalf("after enabled=true: %s enabled %v, want %s enabled", got, ev.Enabled(), before)
	}
	if got := ev.Config(); got == before {
		t.Error("PUT changed the running quota's own struct instead of replacing it")
	}

	// JSON in GeoWebCache's shapes: string values, KB units, the
	// extensions, layerQuotas wrapped as XStream's Jettison writes them.
	w = fx.serve(t, "PUT", "/rest/diskquota", "", []byte(`{"gwcQuotaConfiguration":{"enabled":"true",
		"globalQuota":{"value":"0","units":"B"},"globalExpirationPolicyName":"LRU","lowWatermark":"0.8","keepLevels":null,
		"layerQuotas":{"LayerQuota":{"layer":"test:a","expirationPolicyName":"LFU","quota":{"value":512,"units":"KB"},
		"keepLevels":{"min":0,"max":4}}},"diskBlockSize":2048,"quotaStore":"H2"}}`))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("PUT bare JSON: %d %q", w.Code, w.Body.String())
	}
	want = &quota.Config{LowWatermark: 0.8, Policy: quota.LRU,
		Layers: map[string]*quota.LayerConfig{"test:a": {MaxSize: 512 << 10, Policy: quota.LFU, KeepLevels: &[2]int{0, 4}}}}
	if got := ev.Config(); !reflect.DeepEqual(got, want) || !ev.Enabled() {
		t.Fatalf("after PUT: %s enabled %v, want %s", got, ev.Enabled(), want)
	}
	var jd jsonQuotaDoc
	if err := json.Unmarshal(w.Body.Bytes(), &jd); err != nil || jd.Doc.GlobalQuota != nil || jd.Doc.KeepLevels != nil ||
		len(jd.Doc.LayerQuotas) != 1 || jd.Doc.LayerQuotas[0].Quota.Value != "512" || jd.Doc.LayerQuotas[0].Quota.Units != "KiB" {
		t.Errorf("answer %v: %s", err, w.Body.String())
	}

	if os.Getenv("DISKQUOTA_EXAMPLE") != "" { // the examples in docs/rest.md
		for _, body := range []string{
			`{"gwcQuotaConfiguration":{"globalQuota":{"value":"2","units":"GiB"},"globalExpirationPolicyName":"LFU"}}`,
			`{"gwcQuotaConfiguration":{"globalQuota":{"value":"100","units":"ZZiB"}}}`,
		} {
			w := fx.serve(t, "PUT", "/rest/diskquota.json", "", []byte(body))
			t.Logf("PUT /rest/diskquota.json %s\n%d %s", body, w.Code, w.Body.String())
		}
	}

	// An array of layer quotas; an empty one removes them (with a global
	// quota left to bound the store).
	for _, c := range []struct {
		body   string
		layers int
	}{
		{`{"gwcQuotaConfiguration":{"globalQuota":{"value":1,"units":"GiB"},"layerQuotas":[{"layer":"test:q","quota":{"value":"1","units":"MiB"}},{"LayerQuota":{"layer":"test:a"}}]}}`, 2},
		{`{"gwcQuotaConfiguration":{"layerQuotas":[]}}`, 0},
	} {
		if w := fx.serve(t, "PUT", "/rest/diskquota.json", "", []byte(c.body)); w.Code != 200 || len(ev.Config().Layers) != c.layers {
			t.Errorf("%s: %d %q, layers %v", c.body, w.Code, w.Body.String(), ev.Config().Layers)
		}
	}
	if w := fx.serve(t, "PUT", "/rest/diskquota.xml", "", []byte(`<gwcQuotaConfiguration><keepLevels><min>2</min><max>5</max></keepLevels></gwcQuotaConfiguration>`)); w.Code != 200 ||
		ev.Config().KeepLevels == nil || *ev.Config().KeepLevels != [2]int{2, 5} {
		t.Errorf("keepLevels: %d %q %v", w.Code, w.Body.String(), ev.Config())
	}
	if w := fx.serve(t, "PUT", "/rest/diskquota.xml", "", []byte(`<gwcQuotaConfiguration><keepLevels/></gwcQuotaConfiguration>`)); w.Code != 200 ||
		ev.Config().KeepLevels != nil {
		t.Errorf("keepLevels removed: %d %q %v", w.Code, w.Body.String(), ev.Config())
	}
}

// Every bad value: 400 with one line naming the field, nothing changed.
func TestDiskQuotaPutRefused(t *testing.T) {
	fx, ev := quotaFixture(t)
	before := ev.Config()
	saved := copyQuota(before)
	for _, c := range []struct{ path, body, msg string }{
		{".xml", `<gwcQuotaConfiguration><enabled>false</enabled><globalExpirationPolicyName>FIFO</globalExpirationPolicyName></gwcQuotaConfiguration>`, "globalExpirationPolicyName"},
		{".xml", `<gwcQuotaConfiguration><enabled>false</enabled><globalQuota><value>-5</value><units>MiB</units></globalQuota></gwcQuotaConfiguration>`, "globalQuota: value -5 must not be negative"},
		{".xml", `<gwcQuotaConfiguration><globalQuota><value>lots</value><units>MiB</units></globalQuota></gwcQuotaConfiguration>`, "globalQuota: value"},
		{".xml", `<gwcQuotaConfiguration><globalQuota><value>1</value><units>ZZiB</units></globalQuota></gwcQuotaConfiguration>`, "globalQuota: unknown units"},
		{".xml", `<gwcQuotaConfiguration><globalQuota><value>1</value></globalQuota></gwcQuotaConfiguration>`, "globalQuota: units is missing"},
		{".xml", `<gwcQuotaConfiguration><globalQuota><units>MiB</units></globalQuota></gwcQuotaConfiguration>`, "globalQuota: value is missing"},
		{".xml", `<gwcQuotaConfiguration><globalQuota><value>9</value><units>EiB</units></globalQuota></gwcQuotaConfiguration>`, "globalQuota: 9 EiB is too large"},
		{".xml", `<gwcQuotaConfiguration><enabled>maybe</enabled></gwcQuotaConfiguration>`, "enabled"},
		{".xml", `<gwcQuotaConfiguration><enabled>false</enabled>`, "malformed XML"},
		{".xml", `<seedRequest/>`, "gwcQuotaConfiguration is expected"},
		{".xml", ``, "empty request body"},
		{".xml", `<!DOCTYPE x [<!ENTITY a "b">]><gwcQuotaConfiguration/>`, "DOCTYPE"},
		{".xml", `<gwcQuotaConfiguration><globalquota><value>1</value><units>GiB</units></globalquota></gwcQuotaConfiguration>`, "unknown element <globalquota>"},
		{".xml", `<gwcQuotaConfiguration><lowWatermark>0.3</lowWatermark></gwcQuotaConfiguration>`, "lowWatermark"},
		{".xml", `<gwcQuotaConfiguration><keepLevels><min>5</min><max>2</max></keepLevels></gwcQuotaConfiguration>`, "keepLevels"},
		{".xml", `<gwcQuotaConfiguration><keepLevels><min>5</min></keepLevels></gwcQuotaConfiguration>`, "keepLevels: needs both"},
		{".xml", `<gwcQuotaConfiguration><layerQuotas><LayerQuota><layer>nope</layer><quota><value>1</value><units>MiB</units></quota></LayerQuota></layerQuotas></gwcQuotaConfiguration>`, `layerQuotas[0]: "nope" is not a layer of this cache`},
		{".xml", `<gwcQuotaConfiguration><layerQuotas><LayerQuota><quota><value>1</value><units>MiB</units></quota></LayerQuota></layerQuotas></gwcQuotaConfiguration>`, "layerQuotas[0]: layer is missing"},
		{".xml", `<gwcQuotaConfiguration><layerQuotas><LayerQuota><layer>test:a</layer><quota><value>-1</value><units>MiB</units></quota></LayerQuota></layerQuotas></gwcQuotaConfiguration>`, `layerQuotas[0] (layer "test:a"): quota: value -1 must not be negative`},
		{".xml", `<gwcQuotaConfiguration><layerQuotas><LayerQuota><layer>test:a</layer><expirationPolicyName>MRU</expirationPolicyName></LayerQuota></layerQuotas></gwcQuotaConfiguration>`, "expirationPolicyName"},
		{".xml", `<gwcQuotaConfiguration><layerQuotas><LayerQuota><layer>test:a</layer></LayerQuota><LayerQuota><layer>test:a</layer></LayerQuota></layerQuotas></gwcQuotaConfiguration>`, "given twice"},
		{".xml", `<gwcQuotaConfiguration><layerQuotas><Quota/></layerQuotas></gwcQuotaConfiguration>`, "unknown element <Quota> in layerQuotas"},
		// No bound left at all: the quota's own check, as one line.
		{".xml", `<gwcQuotaConfiguration><globalQuota><value>0</value><units>B</units></globalQuota><layerQuotas/></gwcQuotaConfiguration>`, "set max_size"},
		{".json", `{"gwcQuotaConfiguration":{"enabled":false,"globalExpirationPolicyName":"random"}}`, "globalExpirationPolicyName"},
		{".json", `{"gwcQuotaConfiguration":{"enabled":false,"globalQuota":{"value":"-1","units":"GiB"}}}`, "globalQuota: value -1 must not be negative"},
		{".json", `{"gwcQuotaConfiguration":{"globalQuota":{"value":"100","units":"ZZiB"}}}`, "globalQuota: unknown units"},
		{".json", `{"gwcQuotaConfiguration":{"globalQuota":{"value":{},"units":"MiB"}}}`, "globalQuota: value"},
		{".json", `{"gwcQuotaConfiguration":{"globalQuota":100}}`, "globalQuota must be a JSON object"},
		{".json", `{"gwcQuotaConfiguration":{"globalQuota":{"value":1,"units":"MiB","unit":"GiB"}}}`, `globalQuota: unknown field "unit"`},
		{".json", `{"gwcQuotaConfiguration":{"enabled":"yes"}}`, "enabled"},
		{".json", `{"gwcQuotaConfiguration":{"enabled":false}`, "malformed JSON"},
		{".json", `{"gwcQuotaConfiguration":{"enabled":false},"x":1}`, "gwcQuotaConfiguration"},
		{".json", `{"enabled":false}`, "gwcQuotaConfiguration"},
		{".json", `{"gwcQuotaConfiguration":[]}`, "gwcQuotaConfiguration must be a JSON object"},
		{".json", `{"gwcQuotaConfiguration":{"globalquota":{"value":1,"units":"GiB"}}}`, `unknown field "globalquota"`},
		{".json", `{"gwcQuotaConfiguration":{"lowWatermark":1.5}}`, "lowWatermark"},
		{".json", `{"gwcQuotaConfiguration":{"keepLevels":[0,3]}}`, "keepLevels"},
		{".json", `{"gwcQuotaConfiguration":{"layerQuotas":[{"layer":"nope"}]}}`, `layerQuotas[0]: "nope" is not a layer of this cache`},
		{".json", `{"gwcQuotaConfiguration":{"layerQuotas":[{"layer":"test:a","quota":{"value":"1","units":"parsecs"}}]}}`, `layerQuotas[0] (layer "test:a"): quota: unknown units`},
		{".json", `{"gwcQuotaConfiguration":{"layerQuotas":[{"layer":"test:a","size":1}]}}`, `unknown field "size"`},
		{".json", `{"gwcQuotaConfiguration":{"layerQuotas":"test:a"}}`, "layerQuotas must be"},
		{".json", `{"gwcQuotaConfiguration":{"layerQuotas":[{"quota":{"value":1,"units":"B"}}]}}`, "layerQuotas[0]: layer is missing"},
		{".json", ``, "empty request body"},
		{"", `{"gwcQuotaConfiguration":{"globalQuota":{"value":"-1","units":"GiB"}}}`, "globalQuota"},
		{"", `<gwcQuotaConfiguration><globalQuota><value>-1</value><units>GiB</units></globalQuota></gwcQuotaConfiguration>`, "globalQuota"},
	} {
		w := fx.serve(t, "PUT", "/rest/diskquota"+c.path, "", []byte(c.body))
		if w.Code != 400 || !strings.Contains(w.Body.String(), c.msg) {
			t.Errorf("%s %s: %d %q, want 400 with %q", c.path, c.body, w.Code, w.Body.String(), c.msg)
		}
		if ev.Config() != before || !reflect.DeepEqual(before, saved) || !ev.Enabled() {
			t.Fatalf("%s: the quota changed: %s enabled %v", c.body, ev.Config(), ev.Enabled())
		}
	}
	for _, m := range []string{"POST", "DELETE", "PATCH"} {
		w := fx.serve(t, m, "/rest/diskquota.xml", "", nil)
		if w.Code != 405 || w.Header().Get("Allow") != "GET, PUT" {
			t.Errorf("%s: %d %q", m, w.Code, w.Header().Get("Allow"))
		}
	}
	big := []byte(`<gwcQuotaConfiguration>` + strings.Repeat(" ", 70<<10) + `</gwcQuotaConfiguration>`)
	if w := fx.serve(t, "PUT", "/rest/diskquota.xml", "", big); w.Code != 413 {
		t.Errorf("a body over max_body: %d", w.Code)
	}
}

func TestDiskQuotaWithoutQuota(t *testing.T) {
	fx := newFixture(t)
	for _, m := range []string{"GET", "PUT"} {
		for _, p := range []string{"/rest/diskquota", "/rest/diskquota.xml", "/rest/diskquota.json"} {
			w := fx.serve(t, m, p, "", []byte(`<gwcQuotaConfiguration><enabled>true</enabled></gwcQuotaConfiguration>`))
			if w.Code != 404 || w.Body.String() != "no quota configured: add quota to tile_cache\n" {
				t.Errorf("%s %s: %d %q", m, p, w.Code, w.Body.String())
			}
		}
	}
	for _, p := range []string{"/rest/diskquota.txt", "/rest/diskquota/", "/rest/diskquotas"} {
		if w := fx.serve(t, "GET", p, "", nil); w.Code != 404 || strings.Contains(w.Body.String(), "quota") {
			t.Errorf("%s: %d %q", p, w.Code, w.Body.String())
		}
	}
}

func TestParsePathDiskQuota(t *testing.T) {
	for p, want := range map[string]route{
		"/rest/diskquota": {kind: "diskquota"}, "/rest/diskquota.xml": {kind: "diskquota", format: "xml"},
		"/gwc/rest/diskquota.json": {kind: "diskquota", format: "json"},
	} {
		if got, ok, err := parsePath(p); !ok || err != nil || got != want {
			t.Errorf("%s: %+v %v %v", p, got, ok, err)
		}
	}
}

// rest/usage.json's additions: last access per layer and set, evictions
// per layer, the quotas.
func TestUsageQuotaAndAccess(t *testing.T) {
	fx, c := cacheFixture(t, func(cfg *tilecache.Config) { cfg.Quota = testQuota() })
	at := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	later := at.Add(90 * time.Minute)
	put := func(set store.Set, when time.Time, x int64) {
		t.Helper()
		if err := c.Store().Put([]store.Entry{{Key: store.Key{Set: set, Z: 3, X: x, Y: 1}, Data: []byte("tile")}}, when); err != nil {
			t.Fatal(err)
		}
	}
	a1 := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png"}
	a2 := store.Set{Layer: "test:a", Gridset: "EPSG:900913", Format: "image/png"}
	q1 := store.Set{Layer: "test:q", Gridset: "EPSG:4326", Format: "image/png"}
	put(a1, at, 0)
	put(a1, later, 40) // another page of the same set, used later
	put(a2, at, 0)
	put(q1, at, 0)
	u := getUsageDoc(t, fx)
	if u.Quota == nil || !u.Quota.Enabled || u.Quota.MaxSize != 100<<20 || u.Quota.LowWatermark != 0.9 || u.Quota.Policy != "lru" ||
		u.Quota.KeepLevels == nil || *u.Quota.KeepLevels != [2]int{0, 2} {
		t.Errorf("quota: %+v", u.Quota)
	}
	if len(u.Layers) != 2 || u.Layers[0].Name != "test:a" || u.Layers[1].Name != "test:q" {
		t.Fatalf("layers: %+v", u.Layers)
	}
	la, lq := u.Layers[0], u.Layers[1]
	if la.Quota != 10<<20 || lq.Quota != 0 {
		t.Errorf("layer quotas %d %d", la.Quota, lq.Quota)
	}
	if la.LastAccess != "2025-03-14T16:39:26Z" || lq.LastAccess != "2025-03-14T15:09:26Z" {
		t.Errorf("layers' lastAccess %q %q", la.LastAccess, lq.LastAccess)
	}
	sets := map[string]string{}
	for _, s := range la.TileSets {
		sets[s.GridSetID] = s.LastAccess
	}
	if sets["EPSG:4326"] != "2025-03-14T16:39:26Z" || sets["EPSG:900913"] != "2025-03-14T15:09:26Z" {
		t.Errorf("sets' lastAccess %v", sets)
	}
	if la.Evicted == nil || *la.Evicted != [2]int64{0, 0} || lq.Evicted == nil {
		t.Errorf("evicted %v %v", la.Evicted, lq.Evicted)
	}
	// Eviction is counted per layer.
	if _, err := c.Store().(interface {
		EvictPage(store.Page, int64) (store.Eviction, error)
	}).EvictPage(store.Page{Set: a1, Z: 3, X: 0, Y: 0}, later.Unix()); err != nil {
		t.Fatal(err)
	}
	u = getUsageDoc(t, fx)
	if e := u.Layers[0].Evicted; e == nil || e[0] != 1 || e[1] <= 0 || u.Layers[0].Tiles != 2 {
		t.Errorf("after an eviction: %+v", u.Layers[0])
	}
	// A PUT to rest/diskquota shows in the usage.
	if w := fx.serve(t, "PUT", "/rest/diskquota.xml", "", []byte(`<gwcQuotaConfiguration><enabled>false</enabled><layerQuotas>
		<LayerQuota><layer>test:q</layer><quota><value>1</value><units>KiB</units></quota></LayerQuota></layerQuotas></gwcQuotaConfiguration>`)); w.Code != 200 {
		t.Fatalf("PUT: %d %q", w.Code, w.Body.String())
	}
	u = getUsageDoc(t, fx)
	if u.Quota.Enabled || u.Layers[0].Quota != 0 || u.Layers[1].Quota != 1024 {
		t.Errorf("after PUT: %+v %+v", u.Quota, u.Layers)
	}
	if os.Getenv("DISKQUOTA_EXAMPLE") != "" {
		t.Logf("GET /rest/usage.json\n%s", fx.serve(t, "GET", "/rest/usage.json", "", nil).Body.String())
	}
}

// Usage counted without a quota: no quota, no access, but evictions (0).
func TestUsageWithoutQuota(t *testing.T) {
	fx, c := cacheFixture(t, func(cfg *tilecache.Config) { cfg.Usage = true })
	set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png"}
	if err := c.Store().Put([]store.Entry{{Key: store.Key{Set: set, Z: 1, X: 0, Y: 0}, Data: []byte("tile")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	w := fx.serve(t, "GET", "/rest/usage.json", "", nil)
	if w.Code != 200 {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
	body := w.Body.String()
	for _, absent := range []string{`"quota"`, `"lastAccess"`} {
		if strings.Contains(body, absent) {
			t.Errorf("%s in %s", absent, body)
		}
	}
	if !strings.Contains(body, `"evicted":{"tiles":0,"bytes":0}`) {
		t.Errorf("no evicted counts: %s", body)
	}
}

type usageQuotaDoc struct {
	Quota *struct {
		Enabled      bool    `json:"enabled"`
		MaxSize      int64   `json:"maxSize"`
		LowWatermark float64 `json:"lowWatermark"`
		Policy       string  `json:"policy"`
		KeepLevels   *[2]int `json:"keepLevels"`
	} `json:"quota"`
	Layers []struct {
		Name       string    `json:"name"`
		Tiles      int64     `json:"tiles"`
		Quota      int64     `json:"quota"`
		LastAccess string    `json:"lastAccess"`
		Evicted    *[2]int64 `json:"-"`
		EvictedRaw *struct {
			Tiles int64 `json:"tiles"`
			Bytes int64 `json:"bytes"`
		} `json:"evicted"`
		TileSets []struct {
			GridSetID  string `json:"gridSetId"`
			LastAccess string `json:"lastAccess"`
		} `json:"tileSets"`
	} `json:"layers"`
}

func getUsageDoc(t *testing.T, fx *fixture) usageQuotaDoc {
	t.Helper()
	w := fx.serve(t, "GET", "/rest/usage.json", "", nil)
	if w.Code != 200 {
		t.Fatalf("GET rest/usage.json: %d %q", w.Code, w.Body.String())
	}
	var u usageQuotaDoc
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatalf("%v: %s", err, w.Body.String())
	}
	for i := range u.Layers {
		if e := u.Layers[i].EvictedRaw; e != nil {
			u.Layers[i].Evicted = &[2]int64{e.Tiles, e.Bytes}
		}
	}
	return u
}

// serveAccept is serve with an Accept header.
func (fx *fixture) serveAccept(t *testing.T, method, target, accept, ct, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	w := httptest.NewRecorder()
	if err := fx.h.ServeHTTP(w, r, nil); err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return w
}

func TestPrefersJSON(t *testing.T) {
	for accept, want := range map[string]bool{
		"": false, "application/json": true, "*/*": false, "application/xml, application/json": false,
		"application/json, application/xml": false, "application/json;q=0.9, text/xml;q=0.8": true,
		"application/json;q=x": false, "text/html": false, "application/json;q=0": false,
	} {
		r := httptest.NewRequest("GET", "/rest/diskquota", nil)
		r.Header.Set("Accept", accept)
		if got := prefersJSON(r); got != want {
			t.Errorf("%q: %v", accept, got)
		}
	}
}

// FuzzDiskQuotaBody: the PUT parsers never panic, and refuse with one line.
func FuzzDiskQuotaBody(f *testing.F) {
	for _, s := range []string{
		`<gwcQuotaConfiguration><enabled>true</enabled><globalQuota><value>1.5</value><units>GiB</units></globalQuota></gwcQuotaConfiguration>`,
		`{"gwcQuotaConfiguration":{"globalQuota":{"value":"100","units":"MiB"},"layerQuotas":[{"layer":"a","quota":{"value":1,"units":"KB"}}]}}`,
		`{"gwcQuotaConfiguration":{"layerQuotas":{"LayerQuota":[{"layer":"a"}]}}}`,
		`<gwcQuotaConfiguration><layerQuotas><LayerQuota><layer>a</layer><keepLevels><min>1</min><max>2</max></keepLevels></LayerQuota></layerQuotas></gwcQuotaConfiguration>`,
		`{"gwcQuotaConfiguration":{"globalQuota":{"value":"1e999","units":"B"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, parse := range []func([]byte) (quotaPatch, error){parseQuotaXML, parseQuotaJSON} {
			p, err := parse(body)
			if err != nil {
				if msg := err.Error(); strings.TrimSpace(msg) == "" || strings.ContainsAny(msg, "\r\n") {
					t.Fatalf("%q: message %q", body, msg)
				}
				continue
			}
			if p.maxSize != nil && *p.maxSize < 0 {
				t.Fatalf("%q: negative size %d", body, *p.maxSize)
			}
			if p.layers != nil {
				for _, l := range *p.layers {
					if l.maxSize < 0 || l.name == "" {
						t.Fatalf("%q: layer %+v", body, l)
					}
				}
			}
		}
	})
}
