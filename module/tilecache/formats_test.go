package tilecache

import (
	"encoding/xml"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/ogc"
)

// The format block of a layer: options by format name, in the Caddyfile
// and compiled into the layer's formats.
func TestFormatOptionsCaddyfile(t *testing.T) {
	h, err := parseCF(t, `tile_cache http://a/wms {
	layer roads {
		formats image/vnd.jpeg-png8 image/png8 image/webp image/jpeg
		format image/png8 {
			colors 64
			dither
		}
		format image/webp {
			quality 80
		}
		format image/vnd.jpeg-png8 {
			quality 70
			colors 128
		}
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]imaging.Options{
		"image/png8":          {Colors: 64, Dither: true},
		"image/webp":          {Quality: 80},
		"image/vnd.jpeg-png8": {Quality: 70, Colors: 128},
	}
	if got := h.Config.Layers[0].FormatOptions; !reflect.DeepEqual(got, want) {
		t.Fatalf("format options %+v, want %+v", got, want)
	}
	c := compileTest(t, h.Config)
	l := c.layers["roads"]
	for _, tc := range []struct {
		name  string
		o     imaging.Options
		ctype string
	}{
		{"image/vnd.jpeg-png8", imaging.Options{Quality: 70, Colors: 128}, ""},
		{"image/png8", imaging.Options{Colors: 64, Dither: true}, "image/png"},
		{"image/webp", imaging.Options{Quality: 80}, "image/webp"},
		{"image/jpeg", imaging.Options{}, "image/jpeg"},
	} {
		f, ok := l.Format(tc.name)
		if !ok || f.Options != tc.o {
			t.Errorf("%s: %+v, want options %+v", tc.name, f, tc.o)
			continue
		}
		if tc.ctype != "" && !reflect.DeepEqual(f.contentTypeOf([]byte{0x89}), []string{tc.ctype}) {
			t.Errorf("%s answers Content-Type %q, want %s", tc.name, f.contentTypeOf([]byte{0x89}), tc.ctype)
		}
	}
	// A mixed format answers each tile with its own type.
	f, _ := l.Format("image/vnd.jpeg-png8")
	if got := f.contentTypeOf([]byte{0xff, 0xd8}); got[0] != "image/jpeg" {
		t.Errorf("a JPEG tile of a mixed format answers %q", got)
	}
	if got := f.contentTypeOf([]byte("\x89PNG")); got[0] != "image/png" {
		t.Errorf("a PNG tile of a mixed format answers %q", got)
	}
}

func TestFormatOptionsErrors(t *testing.T) {
	layer := func(body string) string { return "tile_cache http://a {\n layer x {\n " + body + "\n }\n}" }
	for _, tc := range []struct{ name, input, want string }{
		{"format without name", layer("format {\n colors 8\n }"), "wrong argument count"},
		{"format with two names", layer("format image/png8 image/webp {\n colors 8\n }"), "wrong argument count"},
		{"unknown option", layer("format image/png8 {\n palette 8\n }"), `unknown option "palette"`},
		{"colors not a number", layer("format image/png8 {\n colors many\n }"), "not a whole number"},
		{"dither with an argument", layer("format image/png8 {\n dither on\n }"), "wrong argument count"},
		{"options twice", layer("format image/png8 {\n colors 8\n }\n format image/png8 {\n dither\n }"), "given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCF(t, tc.input)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	opts := func(name string, o imaging.Options, formats ...string) Config {
		return Config{Layers: []LayerConfig{{Name: "x", Formats: formats, FormatOptions: map[string]imaging.Options{name: o}}}}
	}
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"options of a format not cached", opts("image/webp", imaging.Options{Quality: 80}, "image/png"), `format options name format "image/webp", which the layer is not cached in`},
		{"options of a default format", opts("image/jpeg", imaging.Options{Quality: 60}), ""},
		{"quality on png8", opts("image/png8", imaging.Options{Quality: 80}, "image/png8"), "image/png8 has no quality"},
		{"colors on png", opts("image/png", imaging.Options{Colors: 8}, "image/png"), "image/png has no palette"},
		{"colors 300", opts("image/png8", imaging.Options{Colors: 300}, "image/png8"), "colors 300 is outside 2..256"},
		{"quality 0 on webp is lossless", opts("image/webp", imaging.Options{}, "image/webp"), ""},
		{"webp quality 101", opts("image/webp", imaging.Options{Quality: 101}, "image/webp"), "quality 101 is outside 1..100"},
		{"a format twice", Config{Layers: []LayerConfig{{Name: "x", Formats: []string{"image/png8", "IMAGE/PNG8"}}}}, "listed twice"},
		{"webp in the formats", Config{Layers: []LayerConfig{{Name: "x", Formats: []string{"image/webp"}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compileErr(tc.c)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line saying %q", err, tc.want)
			}
		})
	}
}

// Every format is reachable by every protocol: WMTS lists it with its
// ResourceURL, and REST, KVP, TMS and XYZ route its file extension to it.
func TestEveryFormatInEveryProtocol(t *testing.T) {
	cfg := testConfig()
	all := imaging.Names
	cfg.Layers[0].Formats = all
	s := servicesOf(t, compileTest(t, cfg), &ServicesConfig{WMTS: "/wmts", TMS: "/tms/", XYZ: "/xyz"})
	base := "http://h/wmts"
	d := readCaps(t, s.wmtsCapabilities(base))
	a := d.Layers[0]
	if !reflect.DeepEqual(a.Formats, all) {
		t.Errorf("WMTS formats %q, want %q", a.Formats, all)
	}
	exts := map[string]string{"image/png": "png", "image/png8": "png8", "image/jpeg": "jpeg",
		"image/vnd.jpeg-png": "jpeg-png", "image/vnd.jpeg-png8": "jpeg-png8", "image/webp": "webp"}
	var urls []string
	for _, r := range a.Resources {
		urls = append(urls, r.Format+" "+r.Template)
	}
	for _, f := range all {
		want := f + " " + base + "/1.0.0/test:a/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}." + exts[f]
		if !slices.Contains(urls, want) {
			t.Errorf("no ResourceURL %q in %q", want, urls)
		}
		ext := exts[f]
		for _, path := range []string{
			"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5." + ext,
			"/tms/1.0.0/test:a@EPSG:4326@" + ext + "/2/5/2." + ext,
			"/xyz/test:a/EPSG:4326/2/5/1." + ext,
		} {
			r := wmtsReq(path)
			var tr tileRequest
			var e *svcError
			switch {
			case strings.HasPrefix(path, "/wmts"):
				tr, _, e = s.routeWMTS(r, pathSegments(r, "/wmts"))
			case strings.HasPrefix(path, "/tms"):
				var a tmsAnswer
				a, e = s.routeTMS(r, pathSegments(r, "/tms"))
				tr = a.tile
			default:
				tr, e = s.routeXYZ(r, pathSegments(r, "/xyz"))
			}
			if e != nil || tr.format == nil || tr.format.Name != f {
				t.Errorf("%s: %v, format %v, want %s", path, e, tr.format, f)
			}
		}
		tr, _, e := s.routeKVP("SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=test:a&STYLE=default&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=1&TILECOL=5&FORMAT=" + f)
		if e != nil || tr.format == nil || tr.format.Name != f {
			t.Errorf("KVP %s: %v", f, e)
		}
		b, err := ogc.Marshal(s.tmsTileMap("http://h/tms", s.cache.layers["test:a"], s.cache.layers["test:a"].Grids[0], tr.format))
		var tm struct {
			TileFormat struct {
				MIME      string `xml:"mime-type,attr"`
				Extension string `xml:"extension,attr"`
			}
		}
		if err != nil || xml.Unmarshal(b, &tm) != nil || tm.TileFormat.MIME != f || tm.TileFormat.Extension != ext {
			t.Errorf("TMS tile map of %s: %+v (%v)", f, tm.TileFormat, err)
		}
	}
}
