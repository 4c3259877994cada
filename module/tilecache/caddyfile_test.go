package tilecache

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/params"
)

const fullCaddyfile = `tile_cache http://127.0.0.1:8080/cgi-bin/mapserv?map=/srv/world.map {
	name tiles
	timeout 45s
	upstream_concurrency 8
	storage /var/cache/tiles
	jpeg_quality 90
	neutral_params FORMAT_OPTIONS _olSALT
	neutral_params BUFFER
	gridset swiss {
		srs EPSG:2056
		extent 2420000 1030000 2900000 1350000
		resolutions 4000 2000 1000 500 250.5
		tile_size 256
		origin top_left
		meters_per_unit 1
		pixel_size 0.00028
		y_first
	}
	gridset scaled {
		srs urn:ogc:def:crs:EPSG::3035
		extent 1000000 1000000 5000000 5000000
		scale_denominators 5000000 2500000
		tile_size 512 256
		origin bottom_left
	}
	gridset levelled {
		srs EPSG:4326
		extent -180 -90 180 90
		levels 10
	}
	layer test:polygons {
		upstream_layers polygons lines
		upstream_layers points
		upstream_format "image/png; mode=raw"
		formats image/png image/jpeg
		gridsets EPSG:4326 EPSG:900913 swiss
		extent -10 35 30 70.5
		gridset_extent swiss 2485000 1075000 2834000 1296000
		metatile 8
		gutter 16
		zoom 1 18
		transparent false
		client_expiry 1h
		server_expiry 7d
		param STYLES {
			default ""
			values "" red blue
			values green
		}
		param CQL_FILTER {
			default
			regex "(pop>[0-9]+)?"
			ignore_case
		}
		param TIME {
			default 2024
			values 2024 2025
			ignore_case
		}
	}
	layer test:lines {
		metatile 2 3
		zoom 4
	}
}`

func intp(v int) *int    { return &v }
func boolp(v bool) *bool { return &v }

func fullHandler() Handler {
	return Handler{
		Name: "tiles",
		Config: Config{Upstream: "http://127.0.0.1:8080/cgi-bin/mapserv?map=/srv/world.map",
			Timeout:             caddy.Duration(45 * time.Second),
			UpstreamConcurrency: 8,
			Storage:             "/var/cache/tiles",
			JPEGQuality:         90,
			NeutralParams:       []string{"FORMAT_OPTIONS", "_olSALT", "BUFFER"},
			Gridsets: []gridset.Config{
				{
					Name:          "swiss",
					SRS:           "EPSG:2056",
					Extent:        [4]float64{2420000, 1030000, 2900000, 1350000},
					Resolutions:   []float64{4000, 2000, 1000, 500, 250.5},
					TileWidth:     256,
					TileHeight:    256,
					Origin:        "top_left",
					MetersPerUnit: 1,
					PixelSize:     0.00028,
					YFirst:        true,
				},
				{
					Name:              "scaled",
					SRS:               "urn:ogc:def:crs:EPSG::3035",
					Extent:            [4]float64{1000000, 1000000, 5000000, 5000000},
					ScaleDenominators: []float64{5000000, 2500000},
					TileWidth:         512,
					TileHeight:        256,
					Origin:            "bottom_left",
				},
				{
					Name:   "levelled",
					SRS:    "EPSG:4326",
					Extent: [4]float64{-180, -90, 180, 90},
					Levels: 10,
				},
			},
			Layers: []LayerConfig{
				{
					Name:           "test:polygons",
					UpstreamLayers: []string{"polygons", "lines", "points"},
					UpstreamFormat: "image/png; mode=raw",
					Formats:        []string{"image/png", "image/jpeg"},
					Gridsets:       []string{"EPSG:4326", "EPSG:900913", "swiss"},
					Extent:         &[4]float64{-10, 35, 30, 70.5},
					GridsetExtents: map[string][4]float64{"swiss": {2485000, 1075000, 2834000, 1296000}},
					MetaWidth:      8,
					MetaHeight:     8,
					Gutter:         16,
					MinZoom:        intp(1),
					MaxZoom:        intp(18),
					Transparent:    boolp(false),
					ClientExpiry:   caddy.Duration(time.Hour),
					ServerExpiry:   caddy.Duration(7 * 24 * time.Hour),
					Parameters: []params.FilterConfig{
						{Key: "STYLES", Default: "", Values: []string{"", "red", "blue", "green"}},
						{Key: "CQL_FILTER", Regex: "(pop>[0-9]+)?", IgnoreCase: true},
						{Key: "TIME", Default: "2024", Values: []string{"2024", "2025"}, IgnoreCase: true},
					},
				},
				{
					Name:       "test:lines",
					MetaWidth:  2,
					MetaHeight: 3,
					MinZoom:    intp(4),
				},
			},
		}}
}

func parseCF(t *testing.T, input string) (Handler, error) {
	t.Helper()
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	return h, err
}

func TestUnmarshalCaddyfileFull(t *testing.T) {
	got, err := parseCF(t, fullCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	want := fullHandler()
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", "  ")
		wj, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("got\n%s\nwant\n%s", gj, wj)
	}

	// The whole configuration also compiles.
	c := compileTest(t, got.Config)
	l := c.layers["test:polygons"]
	if l == nil || len(l.Grids) != 3 || l.MetaWidth != 8 || l.MetaHeight != 8 || l.transparent ||
		l.upstreamLayers != "polygons,lines,points" || l.ServerExpiry != 7*24*time.Hour {
		t.Fatalf("compiled layer %+v", l)
	}
	if g, _ := l.Grid("EPSG:4326"); g.MinZoom != 1 || g.MaxZoom != 18 {
		t.Errorf("EPSG:4326 zoom %d..%d", g.MinZoom, g.MaxZoom)
	}
	// swiss has 5 levels: max_zoom 18 is clipped to 4.
	if g, _ := l.Grid("swiss"); g.MinZoom != 1 || g.MaxZoom != 4 {
		t.Errorf("swiss zoom %d..%d", g.MinZoom, g.MaxZoom)
	}
	if !reflect.DeepEqual(l.cacheControl, []string{"public, max-age=3600"}) {
		t.Errorf("cache control %q", l.cacheControl)
	}
	if lines := c.layers["test:lines"]; lines == nil || lines.upstreamLayers != "test:lines" || !lines.transparent || len(lines.Formats) != 2 || len(lines.Grids) != 2 {
		t.Errorf("test:lines defaults %+v", lines)
	}
}

func TestUnmarshalCaddyfileJSONRoundTrip(t *testing.T) {
	h, err := parseCF(t, fullCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Handler
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h) {
		t.Fatalf("round trip changed the handler:\n%s", b)
	}
	// The Caddy JSON duration form ("45s") reads the same as nanoseconds.
	var d Handler
	if err := json.Unmarshal([]byte(`{"upstream":"http://x","timeout":"45s","layers":[{"name":"a","server_expiry":"1d"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Timeout != caddy.Duration(45*time.Second) || d.Layers[0].ServerExpiry != caddy.Duration(24*time.Hour) {
		t.Fatalf("durations %v %v", d.Timeout, d.Layers[0].ServerExpiry)
	}
}

func TestUnmarshalCaddyfileSmall(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  Handler
	}{
		{"upstream as an option", "tile_cache {\n upstream http://a/wms\n layer x\n}",
			Handler{Config: Config{Upstream: "http://a/wms", Layers: []LayerConfig{{Name: "x"}}}}},
		{"no block", "tile_cache http://a/wms", Handler{Config: Config{Upstream: "http://a/wms"}}},
		{"empty block", "tile_cache http://a/wms {\n}", Handler{Config: Config{Upstream: "http://a/wms"}}},
		{"layer with empty block", "tile_cache http://a/wms {\n layer x {\n }\n}",
			Handler{Config: Config{Upstream: "http://a/wms", Layers: []LayerConfig{{Name: "x"}}}}},
		{"zoom with one arg", "tile_cache {\n layer x {\n zoom 3\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", MinZoom: intp(3)}}}}},
		{"zoom with two args", "tile_cache {\n layer x {\n zoom 0 5\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", MinZoom: intp(0), MaxZoom: intp(5)}}}}},
		{"metatile with one arg", "tile_cache {\n layer x {\n metatile 3\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", MetaWidth: 3, MetaHeight: 3}}}}},
		{"metatile with two args", "tile_cache {\n layer x {\n metatile 3 1\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", MetaWidth: 3, MetaHeight: 1}}}}},
		{"transparent true", "tile_cache {\n layer x {\n transparent true\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", Transparent: boolp(true)}}}}},
		{"param default without args is empty", "tile_cache {\n layer x {\n param styles {\n default\n values \"\" a\n }\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", Parameters: []params.FilterConfig{{Key: "styles", Values: []string{"", "a"}}}}}}}},
		{"two gridset_extents", "tile_cache {\n layer x {\n gridset_extent a 0 0 1 1\n gridset_extent b 1 2 3 4\n }\n}",
			Handler{Config: Config{Layers: []LayerConfig{{Name: "x", GridsetExtents: map[string][4]float64{"a": {0, 0, 1, 1}, "b": {1, 2, 3, 4}}}}}}},
		{"tile_size two args", "tile_cache {\n gridset g {\n tile_size 512 256\n }\n}",
			Handler{Config: Config{Gridsets: []gridset.Config{{Name: "g", TileWidth: 512, TileHeight: 256}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCF(t, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	layer := func(body string) string { return "tile_cache http://a {\n layer x {\n " + body + "\n }\n}" }
	grid := func(body string) string { return "tile_cache http://a {\n gridset g {\n " + body + "\n }\n}" }
	param := func(body string) string { return layer("param STYLES {\n " + body + "\n }") }
	tests := []struct {
		name, input, want string // want: a substring of the error
	}{
		// unknown options
		{"unknown option", "tile_cache http://a {\n frobnicate 1\n}", `unknown tile_cache option "frobnicate"`},
		{"name without arg", "tile_cache http://a {\n name\n}", "wrong argument count"},
		{"unknown gridset option", grid("colour red"), `unknown gridset option "colour"`},
		{"unknown layer option", layer("colour red"), `unknown layer option "colour"`},
		{"unknown param option", param("colour red"), `unknown param option "colour"`},
		{"layer option at top level", "tile_cache http://a {\n zoom 1\n}", `unknown tile_cache option "zoom"`},

		// argument counts
		{"two upstreams on the directive", "tile_cache http://a http://b", "wrong argument count"},
		{"upstream without arg", "tile_cache {\n upstream\n}", "wrong argument count"},
		{"upstream with two args", "tile_cache {\n upstream http://a http://b\n}", "wrong argument count"},
		{"timeout without arg", "tile_cache {\n timeout\n}", "wrong argument count"},
		{"storage with two args", "tile_cache {\n storage a b\n}", "wrong argument count"},
		{"jpeg_quality without arg", "tile_cache {\n jpeg_quality\n}", "wrong argument count"},
		{"upstream_concurrency with two args", "tile_cache {\n upstream_concurrency 1 2\n}", "wrong argument count"},
		{"gridset without name", "tile_cache {\n gridset {\n srs EPSG:2056\n }\n}", ""},
		{"layer without name", "tile_cache {\n layer\n}", "wrong argument count"},
		{"gridset srs without arg", grid("srs"), "wrong argument count"},
		{"gridset extent with 3 numbers", grid("extent 1 2 3"), "wrong argument count"},
		{"gridset extent with 5 numbers", grid("extent 1 2 3 4 5"), "wrong argument count"},
		{"resolutions without args", grid("resolutions"), "wrong argument count"},
		{"scale_denominators without args", grid("scale_denominators"), "wrong argument count"},
		{"levels without arg", grid("levels"), "wrong argument count"},
		{"tile_size without args", grid("tile_size"), "wrong argument count"},
		{"tile_size with 3 args", grid("tile_size 1 2 3"), "wrong argument count"},
		{"origin with two args", grid("origin top left"), "wrong argument count"},
		{"meters_per_unit without arg", grid("meters_per_unit"), "wrong argument count"},
		{"pixel_size with two args", grid("pixel_size 1 2"), "wrong argument count"},
		{"layer extent with 3 numbers", layer("extent 1 2 3"), "wrong argument count"},
		{"gridset_extent without args", layer("gridset_extent"), "wrong argument count"},
		{"gridset_extent with 3 numbers", layer("gridset_extent swiss 1 2 3"), "wrong argument count"},
		{"metatile without args", layer("metatile"), "wrong argument count"},
		{"metatile with 3 args", layer("metatile 1 2 3"), "wrong argument count"},
		{"gutter without arg", layer("gutter"), "wrong argument count"},
		{"zoom without args", layer("zoom"), "wrong argument count"},
		{"zoom with 3 args", layer("zoom 1 2 3"), "wrong argument count"},
		{"transparent without arg", layer("transparent"), "wrong argument count"},
		{"client_expiry without arg", layer("client_expiry"), "wrong argument count"},
		{"server_expiry with two args", layer("server_expiry 1h 2h"), "wrong argument count"},
		{"param without key", layer("param {\n values a\n }"), ""},
		{"param default with two args", param("default a b"), "wrong argument count"},
		{"param regex without arg", param("regex"), "wrong argument count"},

		// numbers
		{"upstream_concurrency not a number", "tile_cache {\n upstream_concurrency many\n}", "is not a"},
		{"jpeg_quality not a number", "tile_cache {\n jpeg_quality high\n}", "is not a"},
		{"gridset extent not numbers", grid("extent a b c d"), "is not a"},
		{"resolutions not numbers", grid("resolutions 1 two"), "is not a"},
		{"scale_denominators not numbers", grid("scale_denominators x"), "is not a"},
		{"levels not a number", grid("levels 1.5"), "is not a"},
		{"tile_size not a number", grid("tile_size big"), "is not a"},
		{"tile_size height not a number", grid("tile_size 256 tall"), "is not a"},
		{"meters_per_unit not a number", grid("meters_per_unit one"), "is not a"},
		{"pixel_size not a number", grid("pixel_size small"), "is not a"},
		{"layer extent not numbers", layer("extent -10 35 30 north"), "is not a"},
		{"gridset_extent not numbers", layer("gridset_extent swiss 1 2 3 x"), "is not a"},
		{"metatile not a number", layer("metatile four"), "is not a"},
		{"metatile height not a number", layer("metatile 4 four"), "is not a"},
		{"gutter not a number", layer("gutter wide"), "is not a"},
		{"zoom min not a number", layer("zoom low"), "zoom"},
		{"zoom max not a number", layer("zoom 1 high"), "zoom"},

		// durations
		{"timeout bad", "tile_cache {\n timeout soon\n}", "duration"},
		{"timeout bad unit", "tile_cache {\n timeout 5x\n}", "duration"},
		{"client_expiry bad", layer("client_expiry forever"), "duration"},
		{"server_expiry bad", layer("server_expiry 1w"), "duration"},

		// booleans
		{"transparent bad", layer("transparent maybe"), "transparent"},
		{"transparent yes", layer("transparent yes"), "transparent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCF(t, tc.input)
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.input)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// Caddyfile errors should name the file and line (d.Errf / d.ArgErr do);
// an error returned raw from strconv does not.
func TestUnmarshalCaddyfileErrorsHaveLocation(t *testing.T) {
	for _, input := range []string{
		"tile_cache http://a {\n gridset g {\n tile_size big\n }\n}",
		"tile_cache http://a {\n layer x {\n metatile four\n }\n}",
		"tile_cache http://a {\n layer x {\n zoom low\n }\n}",
		"tile_cache http://a {\n jpeg_quality high\n}",
	} {
		_, err := parseCF(t, input)
		if err == nil {
			t.Errorf("no error for %q", input)
			continue
		}
		if !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("error without file:line: %q (input %q)", err, input)
		}
	}
}

// A bad duration's error should say which option it is about: durationArg
// formats d.Val(), which after RemainingArgs is the bad value itself (that
// time.ParseDuration's message quotes again), not the option name.
func TestUnmarshalCaddyfileDurationErrorNamesOption(t *testing.T) {
	for opt, input := range map[string]string{
		"timeout":       "tile_cache http://a {\n timeout soon\n}",
		"client_expiry": "tile_cache http://a {\n layer x {\n client_expiry forever\n }\n}",
		"server_expiry": "tile_cache http://a {\n layer x {\n server_expiry 1w\n }\n}",
	} {
		_, err := parseCF(t, input)
		if err == nil || !strings.Contains(err.Error(), opt) {
			t.Errorf("%s: error %q does not name the option", opt, err)
		}
	}
}

// Options that take no arguments (y_first, ignore_case) must not take one:
// "ignore_case false" must not turn the flag on. (They are refused because
// the stray argument is read as the next option name.)
func TestUnmarshalCaddyfileFlagArgs(t *testing.T) {
	for _, input := range []string{
		"tile_cache http://a {\n gridset g {\n y_first no\n }\n}",
		"tile_cache http://a {\n layer x {\n param STYLES {\n ignore_case false\n }\n }\n}",
	} {
		if h, err := parseCF(t, input); err == nil {
			t.Errorf("accepted (gridsets %+v, layers %+v):\n%s", h.Gridsets, h.Layers, input)
		}
	}
}

// The list options (neutral_params, upstream_layers, formats, gridsets,
// values) given no arguments are silently a no-op; a wrong argument count
// is refused everywhere else.
func TestUnmarshalCaddyfileEmptyLists(t *testing.T) {
	for _, input := range []string{
		"tile_cache http://a {\n neutral_params\n}",
		"tile_cache http://a {\n layer x {\n upstream_layers\n }\n}",
		"tile_cache http://a {\n layer x {\n formats\n }\n}",
		"tile_cache http://a {\n layer x {\n gridsets\n }\n}",
		"tile_cache http://a {\n layer x {\n param STYLES {\n values\n }\n }\n}",
	} {
		if _, err := parseCF(t, input); err == nil {
			t.Errorf("accepted:\n%s", input)
		}
	}
}

// compileErr compiles cfg as the app would, with an upstream if it has none.
func compileErr(cfg Config) error {
	if cfg.Upstream == "" {
		cfg.Upstream = "http://a/wms"
	}
	_, err := compile("x", cfg)
	return err
}

func TestCompileErrors(t *testing.T) {
	swiss := gridset.Config{Name: "swiss", SRS: "EPSG:2056",
		Extent: [4]float64{2420000, 1030000, 2900000, 1350000}, Resolutions: []float64{4000, 2000, 1000}}
	tests := []struct {
		name string
		h    Config
		want string // substring of the error, "" for success
	}{
		{"ok", Config{Layers: []LayerConfig{{Name: "x"}}}, ""},
		{"no layers", Config{}, "no layers"},
		{"unknown gridset", Config{Layers: []LayerConfig{{Name: "x", Gridsets: []string{"EPSG:3857"}}}}, `unknown gridset "EPSG:3857"`},
		{"duplicate layer", Config{Layers: []LayerConfig{{Name: "x"}, {Name: "x"}}}, `layer "x" defined twice`},
		{"duplicate custom gridset", Config{Gridsets: []gridset.Config{swiss, swiss}, Layers: []LayerConfig{{Name: "x"}}}, `gridset "swiss" defined twice`},
		{"custom gridset shadows a built-in", Config{Gridsets: []gridset.Config{{Name: "EPSG:4326", SRS: "EPSG:4326",
			Extent: [4]float64{-180, -90, 180, 90}, Levels: 3}}, Layers: []LayerConfig{{Name: "x"}}}, `gridset "EPSG:4326" defined twice`},
		{"bad custom gridset", Config{Gridsets: []gridset.Config{{Name: "bad", SRS: "EPSG:2056", Extent: [4]float64{0, 0, 1, 1}}},
			Layers: []LayerConfig{{Name: "x"}}}, "give exactly one of"},
		{"metatile width 0 means default", Config{Layers: []LayerConfig{{Name: "x", MetaWidth: 0, MetaHeight: 2}}}, ""},
		{"metatile too wide", Config{Layers: []LayerConfig{{Name: "x", MetaWidth: 17, MetaHeight: 4}}}, "metatile size"},
		{"metatile negative", Config{Layers: []LayerConfig{{Name: "x", MetaWidth: 4, MetaHeight: -1}}}, "metatile size"},
		{"gutter too large", Config{Layers: []LayerConfig{{Name: "x", Gutter: 513}}}, "gutter"},
		{"negative expiry", Config{Layers: []LayerConfig{{Name: "x", ServerExpiry: -1}}}, "expiry"},
		{"min_zoom > max_zoom", Config{Layers: []LayerConfig{{Name: "x", MinZoom: intp(5), MaxZoom: intp(4)}}}, "min_zoom/max_zoom"},
		{"min_zoom negative", Config{Layers: []LayerConfig{{Name: "x", MinZoom: intp(-1)}}}, "min_zoom/max_zoom"},
		{"min_zoom beyond the gridset", Config{Layers: []LayerConfig{{Name: "x", Gridsets: []string{"EPSG:4326"}, MinZoom: intp(22)}}}, "min_zoom/max_zoom"},
		{"max_zoom beyond the gridset is clipped", Config{Layers: []LayerConfig{{Name: "x", MaxZoom: intp(40)}}}, ""},
		{"layer name with a comma", Config{Layers: []LayerConfig{{Name: "a,b"}}}, "name"},
		{"layer name with a slash", Config{Layers: []LayerConfig{{Name: "a/b"}}}, "name"},
		{"empty layer name", Config{Layers: []LayerConfig{{Name: ""}}}, "name"},
		{"bad format", Config{Layers: []LayerConfig{{Name: "x", Formats: []string{"image/gif"}}}}, "image/gif"},
		{"bad param filter", Config{Layers: []LayerConfig{{Name: "x", Parameters: []params.FilterConfig{{Key: "STYLES"}}}}}, "STYLES"},
		{"inverted extent", Config{Layers: []LayerConfig{{Name: "x", Extent: &[4]float64{10, 0, 0, 10}}}}, "min < max"},
		{"lon/lat extent on an unknown CRS", Config{Gridsets: []gridset.Config{swiss},
			Layers: []LayerConfig{{Name: "x", Gridsets: []string{"EPSG:4326", "swiss"}, Extent: &[4]float64{5, 45, 11, 48}}}}, "gridset_extents"},
		{"lon/lat extent plus gridset_extents", Config{Gridsets: []gridset.Config{swiss},
			Layers: []LayerConfig{{Name: "x", Gridsets: []string{"EPSG:4326", "swiss"}, Extent: &[4]float64{5, 45, 11, 48},
				GridsetExtents: map[string][4]float64{"swiss": {2485000, 1075000, 2834000, 1296000}}}}}, ""},
		{"no extent on an unknown CRS uses the gridset's", Config{Gridsets: []gridset.Config{swiss},
			Layers: []LayerConfig{{Name: "x", Gridsets: []string{"swiss"}}}}, ""},
		{"gridset_extents for an unused gridset", Config{Gridsets: []gridset.Config{swiss},
			Layers: []LayerConfig{{Name: "x", Gridsets: []string{"EPSG:4326"},
				GridsetExtents: map[string][4]float64{"swiss": {2485000, 1075000, 2834000, 1296000}}}}}, `gridset_extents names gridset "swiss"`},
		{"gridset_extents for a built-in the layer uses by default", Config{
			Layers: []LayerConfig{{Name: "x", GridsetExtents: map[string][4]float64{"EPSG:900913": {0, 0, 1e6, 1e6}}}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := compileErr(tc.h)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// gridset_extents win over the lon/lat extent for their gridset, and the
// extent is projected into the others.
func TestCompileExtents(t *testing.T) {
	swiss := gridset.Config{Name: "swiss", SRS: "EPSG:2056",
		Extent: [4]float64{2420000, 1030000, 2900000, 1350000}, Resolutions: []float64{4000, 2000, 1000}}
	h := compileTest(t, Config{Upstream: "http://a/wms", Gridsets: []gridset.Config{swiss}, Layers: []LayerConfig{{
		Name: "x", Gridsets: []string{"EPSG:4326", "EPSG:900913", "swiss"}, Extent: &[4]float64{0, 0, 90, 45},
		GridsetExtents: map[string][4]float64{"swiss": {2420000, 1030000, 2420000 + 256000, 1030000 + 256000}},
	}}})
	l := h.layers["x"]
	g4326, _ := l.Grid("EPSG:4326")
	if got := g4326.Coverage[3]; got != (gridset.Range{MinX: 8, MinY: 4, MaxX: 11, MaxY: 5}) {
		t.Errorf("EPSG:4326 z3 coverage %v", got)
	}
	g900913, _ := l.Grid("EPSG:900913")
	// lon 0..90 is the third quarter of the Mercator world; lat 0..45 is
	// y from the equator to 5621521 m, i.e. rows 2^(z-1) .. 2^(z-1)+0.28*2^(z-1).
	if got := g900913.Coverage[2]; got != (gridset.Range{MinX: 2, MinY: 2, MaxX: 2, MaxY: 2}) {
		t.Errorf("EPSG:900913 z2 coverage %v", got)
	}
	gs, _ := l.Grid("swiss")
	// 256 km at 1000 m/px is one tile of 256 px.
	if got := gs.Coverage[2]; got != (gridset.Range{}) {
		t.Errorf("swiss z2 coverage %v", got)
	}
}

func TestValidate(t *testing.T) {
	base := func() Config {
		return Config{Upstream: "http://127.0.0.1:8080/wms?map=x", UpstreamConcurrency: 4, JPEGQuality: 85,
			Layers: []LayerConfig{{Name: "x"}}}
	}
	validate := func(c Config) error { _, err := compile("x", c); return err }
	if err := validate(base()); err != nil {
		t.Fatalf("base: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"empty upstream", func(h *Config) { h.Upstream = "" }},
		{"relative upstream", func(h *Config) { h.Upstream = "/wms" }},
		{"host without scheme", func(h *Config) { h.Upstream = "localhost:8080/wms" }},
		{"ftp upstream", func(h *Config) { h.Upstream = "ftp://host/wms" }},
		{"no host", func(h *Config) { h.Upstream = "http:///wms" }},
		{"unparsable upstream", func(h *Config) { h.Upstream = "http://[::1/wms" }},
		{"control character", func(h *Config) { h.Upstream = "http://host/\x7f" }},
		{"jpeg_quality 101", func(h *Config) { h.JPEGQuality = 101 }},
		{"jpeg_quality negative", func(h *Config) { h.JPEGQuality = -5 }},
		{"upstream_concurrency negative", func(h *Config) { h.UpstreamConcurrency = -1 }},
	}
	for _, tc := range tests {
		h := base()
		tc.mod(&h)
		if err := validate(h); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	for _, ok := range []string{"https://wms.example.org/ows", "HTTP://Host:1/x", "http://host"} {
		h := base()
		h.Upstream = ok
		if err := validate(h); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// Zero means the default, set before validation.
	h := base()
	h.JPEGQuality, h.UpstreamConcurrency, h.Timeout = 0, 0, 0
	c, err := compile("x", h)
	if err != nil || c.cfg.JPEGQuality != 85 || c.cfg.UpstreamConcurrency != 4 || time.Duration(c.cfg.Timeout) != 30*time.Second {
		t.Errorf("defaults: %+v %v", c, err)
	}
}

// png_compression is per layer and reaches the layer's encoder.
func TestPNGCompressionOption(t *testing.T) {
	h, err := parseCF(t, "tile_cache http://a/wms {\n layer x {\n png_compression best\n }\n layer y\n}")
	if err != nil {
		t.Fatal(err)
	}
	c := compileTest(t, h.Config)
	if got := c.layers["x"].encoder.PNG; got != imaging.PNGBest {
		t.Errorf("x: %v", got)
	}
	if got := c.layers["y"].encoder.PNG; got != imaging.PNGDefault {
		t.Errorf("y: %v", got)
	}
	j, _ := json.Marshal(h.Layers)
	if !strings.Contains(string(j), `"png_compression":"best"`) || strings.Count(string(j), "png_compression") != 1 {
		t.Errorf("JSON %s", j)
	}
	if _, err := parseCF(t, "tile_cache http://a/wms {\n layer x {\n png_compression tiny\n }\n}"); err == nil {
		t.Error("png_compression tiny accepted")
	}
}
