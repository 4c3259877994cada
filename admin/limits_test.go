package admin

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestLimitOptions(t *testing.T) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`tile_cache_admin {
		max_body 2KiB
		max_tasks 7
		max_tiles_per_task 5000
		max_param_length 99
		max_list_lines 12
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxBody != 2048 || h.MaxTasks != 7 || h.MaxTilesPerTask != 5000 || h.MaxParamLength != 99 || h.MaxListLines != 12 {
		t.Errorf("%+v", h)
	}
	h.setDefaults() // set values stay
	if h.MaxBody != 2048 || h.MaxTasks != 7 || h.MaxTilesPerTask != 5000 || h.MaxParamLength != 99 {
		t.Errorf("after defaults %+v", h)
	}
	var d Handler
	d.setDefaults()
	if d.MaxBody != 8<<20 || d.MaxListLines != 50_000_000 || d.MaxTasks != 1000 || d.MaxTilesPerTask != 100_000_000 || d.MaxParamLength != 1024 ||
		d.Workers != 2 || d.History != 100 || d.Cache != "default" {
		t.Errorf("defaults %+v", d)
	}
	for in, want := range map[string]int64{"1048576": 1 << 20, "1MiB": 1 << 20, "1MB": 1000000, "512KB": 512000, "64kib": 65536} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tile_cache_admin {\n max_body " + in + "\n}")); err != nil || h.MaxBody != want {
			t.Errorf("max_body %s: %d %v", in, h.MaxBody, err)
		}
	}
	for _, bad := range []string{"max_body", "max_body x", "max_body 2PB", "max_tasks x", "max_tasks 1 2",
		"max_tiles_per_task 1.5", "max_param_length -x", "max_list_lines 1e6"} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tile_cache_admin {\n " + bad + "\n}")); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, h := range []Handler{{MaxBody: -1}, {MaxTasks: -1}, {MaxTilesPerTask: -1}, {MaxParamLength: -1}, {MaxListLines: -1}} {
		h.Workers, h.History = 1, 1
		if h.Validate() == nil {
			t.Errorf("%+v validated", h)
		}
	}
}

func TestCheckParams(t *testing.T) {
	h := &Handler{MaxParamLength: 4}
	for p, ok := range map[[2]string]bool{{"A", "1234"}: true, {"A", "12345"}: false, {"ABCDE", "1"}: false, {"", ""}: true} {
		err := h.checkParams(map[string]string{p[0]: p[1]})
		if (err == nil) != ok {
			t.Errorf("%q: %v", p, err)
		}
		if err != nil {
			checkParserError(t, []byte(p[0]+p[1]), err)
		}
	}
}

// Beyond the DTD: a second root element or text after the root would be
// ignored by xml.Unmarshal, and a body of two requests would do the first.
func TestCheckNoDTDWholeDocument(t *testing.T) {
	for _, ok := range []string{
		`<a/>`, ` <a/> `, `<?xml version="1.0"?>` + "\n<a><b/></a>\n", `<!-- c --><a/><!-- d -->`, `<a/><?pi x?>`,
	} {
		if err := checkNoDTD([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`<a/><a/>`, `<a/>x`, `x<a/>`, `<a/><b></b>`, `<!DOCTYPE a><a/>`, `<a><!DOCTYPE a></a>`, `<a>&x;</a>`, `<a>`,
	} {
		err := checkNoDTD([]byte(bad))
		if err == nil {
			t.Errorf("%.60q accepted", bad)
			continue
		}
		checkParserError(t, []byte(bad), err)
	}
}

func TestOddRESTPath(t *testing.T) {
	for p, odd := range map[string]bool{
		"/rest/seed/test:a.json":               false,
		"/geowebcache/rest/seed/test%3Aa.json": false,
		"/rest/seed/test%3Amock%2Elayer.json":  false, // an encoded dot inside a name is fine
		"/rest/seed/%2e":                       true,
		"/rest/seed/%2E%2E":                    true,
		"/rest/seed/..%2f..%2fetc.json":        true,
		"/rest/seed/a%5cb.json":                true,
		"/rest/seed/a%2Fb":                     true,
		"/gwc/../rest/seed.json":               true,
		"/rest/./seed.json":                    true,
		"/rest/seed/%zz":                       false, // parsePath's 404
		"/x/%2e%2e/y":                          false, // not addressed to the interface
	} {
		if got := oddRESTPath(p); got != odd {
			t.Errorf("%s: %v, want %v", p, got, odd)
		}
	}
}
