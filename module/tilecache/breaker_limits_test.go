package tilecache

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The breaker and max_param_length options, in the Caddyfile and JSON.
func TestBreakerAndLimitOptions(t *testing.T) {
	h, err := parseCF(t, "tile_cache http://a/wms {\n breaker 3 10s\n max_param_length 200\n}")
	if err != nil {
		t.Fatal(err)
	}
	if b := h.Breaker; b == nil || b.Failures != 3 || time.Duration(b.Cooldown) != 10*time.Second || b.Off || h.MaxParamLength != 200 {
		t.Fatalf("%+v", h)
	}
	j, _ := json.Marshal(h)
	for _, want := range []string{`"breaker":{"failures":3,"cooldown":10000000000}`, `"max_param_length":200`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
	var back Handler
	if err := json.Unmarshal(j, &back); err != nil || back.Breaker == nil || *back.Breaker != *h.Breaker {
		t.Errorf("JSON round trip: %+v %v", back, err)
	}
	for input, want := range map[string]BreakerConfig{
		"tile_cache http://a/wms {\n breaker off\n}":                              {Off: true},
		"tile_cache http://a/wms {\n breaker 7\n}":                                {Failures: 7},
		"tile_cache http://a/wms {\n breaker {\n failures 2\n cooldown 1m\n }\n}": {Failures: 2, Cooldown: caddy.Duration(time.Minute)},
		"tile_cache http://a/wms {\n breaker {\n off\n }\n}":                      {Off: true},
	} {
		h, err := parseCF(t, input)
		if err != nil || h.Breaker == nil || *h.Breaker != want {
			t.Errorf("%q: %+v %v", input, h.Breaker, err)
		}
	}
	// Not given: the defaults, filled in when compiled.
	h, err = parseCF(t, "tile_cache http://a/wms {\n layer x\n}")
	if err != nil || h.Breaker != nil || h.MaxParamLength != 0 {
		t.Errorf("defaults: %+v %v", h, err)
	}
	c := compileTest(t, h.Config)
	if n, cool := c.cfg.breakerSettings(); n != 5 || cool != 30*time.Second || c.cfg.MaxParamLength != 1024 {
		t.Errorf("compiled defaults: breaker %d %v, max_param_length %d", n, cool, c.cfg.MaxParamLength)
	}
	for _, bad := range []string{
		"breaker", "breaker x", "breaker -1", "breaker 0", "breaker 3 soon", "breaker 3 0s", "breaker 3 -1s", "breaker off 10s",
		"breaker 1 2s 3", "breaker {\n failures 0\n }", "breaker {\n cooldown 0s\n }", "breaker {\n speed 1\n }",
		"breaker 3 {\n cooldown 1s\n }", "max_param_length", "max_param_length x", "max_param_length 1 2",
	} {
		if _, err := parseCF(t, "tile_cache http://a/wms {\n "+bad+"\n}"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for name, cfg := range map[string]Config{
		"breaker failures":  {Breaker: &BreakerConfig{Failures: -1}},
		"breaker cooldown":  {Breaker: &BreakerConfig{Cooldown: -1}},
		"max_param_length":  {MaxParamLength: -1},
		"max_param_length2": {MaxParamLength: -100},
	} {
		cfg.Upstream, cfg.Layers = "http://a/wms", []LayerConfig{{Name: "x"}}
		if _, err := compile("x", cfg); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("negative %s compiled: %v", name, err)
		}
	}
}

// A parameter name or value longer than max_param_length (1024 bytes by
// default, unescaped) makes a request not a tile request: "malformed".
func TestParamLengthLimit(t *testing.T) {
	h := newTestHandler(t)
	bbox := bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 0, Y: 0, Z: 1}), false)
	ok := q111("test:a", "EPSG:4326", bbox)
	if _, reason := match(h, ok); reason != "" {
		t.Fatalf("base request: %s", reason)
	}
	at := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		q    string
		want string
	}{
		{ok + "&TILED=" + at(1024), ""},
		{ok + "&TILED=" + at(1025), passMalformed},
		{ok + "&TILED=" + strings.Repeat("%41", 1024), ""}, // 3072 bytes escaped, 1024 unescaped
		{ok + "&TILED=" + strings.Repeat("%41", 1025), passMalformed},
		{ok + "&" + at(1025) + "=1", passMalformed}, // a name, too
		{q111("test:a", "EPSG:4326", bbox+strings.Repeat(" ", 1100)), passMalformed},
		{"REQUEST=GetMap&LAYERS=" + at(5000), passMalformed}, // before any other check
	} {
		if _, reason := match(h, c.q); reason != c.want {
			t.Errorf("%.80s… (%d bytes): %q, want %q", c.q, len(c.q), reason, c.want)
		}
	}
	h.cfg.MaxParamLength = 20
	if _, reason := match(h, ok+"&TILED="+at(21)); reason != passMalformed {
		t.Errorf("max_param_length 20, 21 bytes: %q", reason)
	}
	if _, reason := match(h, ok+"&TILED="+at(20)); reason != "" {
		t.Errorf("max_param_length 20, 20 bytes: %q", reason)
	}
}
