package tilecache

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/imaging"
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
