package tilecache

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The breaker and max_param_length options, in the Caddyfile and JSON.
func TestBreakerAndLimitOptions(t *testing.T) {
	h, err := parseCF(t, "tile_cache http://a/wms {\n breaker 3 10s\n max_param_length 200\n}")
	if err != nil {
		t.Fatal(err)
	}
	if h.BreakerFailures == nil || *h.BreakerFailures != 3 || time.Duration(h.BreakerCooldown) != 10*time.Second || h.MaxParamLength != 200 {
		t.Fatalf("%+v", h)
	}
	j, _ := json.Marshal(h)
	for _, want := range []string{`"breaker_failures":3`, `"breaker_cooldown":10000000000`, `"max_param_length":200`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
	var back Handler
	if err := json.Unmarshal(j, &back); err != nil || *back.BreakerFailures != 3 || back.BreakerCooldown != h.BreakerCooldown {
		t.Errorf("JSON round trip: %+v %v", back, err)
	}
	for input, want := range map[string]int{
		"tile_cache http://a/wms {\n breaker off\n}": 0,
		"tile_cache http://a/wms {\n breaker 0\n}":   0,
		"tile_cache http://a/wms {\n breaker 7\n}":   7,
	} {
		h, err := parseCF(t, input)
		if err != nil || h.BreakerFailures == nil || *h.BreakerFailures != want || h.BreakerCooldown != 0 {
			t.Errorf("%q: %+v %v", input, h, err)
		}
	}
	// Not given: the defaults (nil, 0).
	if h, err := parseCF(t, "tile_cache http://a/wms"); err != nil || h.BreakerFailures != nil || h.MaxParamLength != 0 {
		t.Errorf("defaults: %+v %v", h, err)
	}
	for _, bad := range []string{
		"breaker", "breaker x", "breaker -1", "breaker 3 soon", "breaker 3 0s", "breaker 3 -1s", "breaker off 10s",
		"breaker 1 2s 3", "max_param_length", "max_param_length x", "max_param_length 1 2",
	} {
		if _, err := parseCF(t, "tile_cache http://a/wms {\n "+bad+"\n}"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	neg := -1
	for name, h := range map[string]Handler{
		"breaker_failures":  {BreakerFailures: &neg},
		"breaker_cooldown":  {BreakerCooldown: -1},
		"max_param_length":  {MaxParamLength: -1},
		"max_param_length2": {MaxParamLength: -100},
	} {
		h.Upstream, h.UpstreamConcurrency, h.JPEGQuality = "http://a/wms", 1, 85
		if h.Validate() == nil {
			t.Errorf("negative %s validated", name)
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
	h.MaxParamLength = 20
	if _, reason := match(h, ok+"&TILED="+at(21)); reason != passMalformed {
		t.Errorf("max_param_length 20, 21 bytes: %q", reason)
	}
	if _, reason := match(h, ok+"&TILED="+at(20)); reason != "" {
		t.Errorf("max_param_length 20, 20 bytes: %q", reason)
	}
}
