package tilecache

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/image/webp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
)

// mapUpstream renders, for any BBOX in lon/lat, a map whose kind depends
// on the longitude, so that at level 1 of EPSG:4326 (tiles 90° wide) each
// tile column is one kind: x=0 an opaque picture of thousands of colours,
// x=1 the same with a fully transparent band across it (an edge of the
// layer), x=2 a transparent road layer (antialiased lines over nothing),
// x=3 one opaque colour (sea). It notes the FORMAT of every GetMap and
// keeps what it sent, lossless.
type mapUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	formats []string
}

// picture is thousands of colours: gradients in every channel. (Through
// int: a negative float converted to uint8 is not portable Go.)
func picture(lon, lat float64) color.NRGBA {
	return color.NRGBA{R: uint8(int(lon * 7)), G: uint8(int(lat * 5)), B: uint8(int((lon + lat) * 3)), A: 255}
}

func mapPixel(lon, lat float64) color.NRGBA {
	switch {
	case lon < -90:
		return picture(lon, lat)
	case lon < 0:
		if lat > -40 && lat < -20 {
			return color.NRGBA{}
		}
		return picture(lon, lat)
	case lon < 90:
		// Roads: a line every 10°, antialiased over 0.8°.
		d := math.Abs(math.Mod(lon+lat, 10) - 5)
		if d > 0.8 {
			return color.NRGBA{}
		}
		return color.NRGBA{R: 200, G: 60, B: 20, A: uint8(255 * (1 - d/0.8))}
	}
	return color.NRGBA{R: 30, G: 90, B: 200, A: 255}
}

func newMapUpstream(t *testing.T) *mapUpstream {
	u := &mapUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		wd, _ := strconv.Atoi(q.Get("WIDTH"))
		ht, _ := strconv.Atoi(q.Get("HEIGHT"))
		var b [4]float64
		for i, s := range strings.Split(q.Get("BBOX"), ",") {
			b[i], _ = strconv.ParseFloat(s, 64)
		}
		img := image.NewNRGBA(image.Rect(0, 0, wd, ht))
		for y := range ht {
			lat := b[3] - (float64(y)+0.5)*(b[3]-b[1])/float64(ht)
			for x := range wd {
				img.SetNRGBA(x, y, mapPixel(b[0]+(float64(x)+0.5)*(b[2]-b[0])/float64(wd), lat))
			}
		}
		var buf bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
			t.Error(err)
		}
		u.mu.Lock()
		u.formats = append(u.formats, q.Get("FORMAT"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "image/png")
		w.Write(buf.Bytes())
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *mapUpstream) asked() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.formats...)
}

// wantTile is the lossless tile x of level 1 (EPSG:4326; y 0 is the
// southern row, as GeoWebCache counts), as the upstream draws it.
func wantTile(x int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, 256, 256))
	for py := range 256 {
		lat := -(float64(py) + 0.5) * 90 / 256
		for px := range 256 {
			img.SetNRGBA(px, py, mapPixel(-180+float64(x)*90+(float64(px)+0.5)*90/256, lat))
		}
	}
	return img
}

func distinctColors(m image.Image) int {
	seen := map[color.NRGBA]bool{}
	b := m.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			seen[color.NRGBAModel.Convert(m.At(x, y)).(color.NRGBA)] = true
		}
	}
	return len(seen)
}

// Every format through the handler: asked upstream as lossless PNG once
// per metatile, each tile encoded in its format, answered with its
// Content-Type on the miss and on the hit, decoding to the map: exact for
// the lossless formats, close for the others. The mixed formats switch to
// PNG where a tile has transparency and for a tile of one colour.
func TestEveryFormatFromOneLosslessMetatile(t *testing.T) {
	up := newMapUpstream(t)
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	cfg.Timeout = caddy.Duration(30e9)
	all := []string{"image/png", "image/png8", "image/jpeg", "image/vnd.jpeg-png", "image/vnd.jpeg-png8", "image/webp"}
	cfg.Layers[0].Formats = all
	cfg.Layers[0].Gridsets = []string{"EPSG:4326"}
	cfg.Layers = append(cfg.Layers, LayerConfig{Name: "test:lossy", Gridsets: []string{"EPSG:4326"},
		Formats:       []string{"image/webp", "image/png8"},
		FormatOptions: map[string]imaging.Options{"image/webp": {Quality: 80}, "image/png8": {Colors: 16}}})
	cfg.Layers = append(cfg.Layers, LayerConfig{Name: "test:quantized", Gridsets: []string{"EPSG:4326"},
		Formats: []string{"image/webp"}, FormatOptions: map[string]imaging.Options{"image/webp": {Colors: 256}}})
	h := handlerOf(t, openTest(t, compileTest(t, cfg), nil), nil)

	type want struct {
		ctype   string  // the Content-Type answered
		minPSNR float64 // +Inf: exact
	}
	exact := math.Inf(1)
	cases := []struct {
		layer, format string
		tiles         [4]want // by column x of level 1
	}{
		{"test:a", "image/png", [4]want{{"image/png", exact}, {"image/png", exact}, {"image/png", exact}, {"image/png", exact}}},
		// The picture is a gradient in three channels (tens of thousands
		// of colours), the hardest case for 256: the corpus tests in
		// package imaging hold png8 to real maps' floors.
		{"test:a", "image/png8", [4]want{{"image/png", 30}, {"image/png", 30}, {"image/png", 40}, {"image/png", exact}}},
		{"test:a", "image/jpeg", [4]want{{"image/jpeg", 28}, {"image/jpeg", 0}, {"image/jpeg", 0}, {"image/jpeg", 40}}},
		{"test:a", "image/vnd.jpeg-png", [4]want{{"image/jpeg", 28}, {"image/png", exact}, {"image/png", exact}, {"image/png", exact}}},
		{"test:a", "image/vnd.jpeg-png8", [4]want{{"image/jpeg", 28}, {"image/png", 30}, {"image/png", 40}, {"image/png", exact}}},
		{"test:a", "image/webp", [4]want{{"image/webp", exact}, {"image/webp", exact}, {"image/webp", exact}, {"image/webp", exact}}},
		// Lossy WebP moves even a flat colour by a few levels (YUV 4:2:0).
		{"test:lossy", "image/webp", [4]want{{"image/webp", 25}, {"image/webp", 25}, {"image/webp", 25}, {"image/webp", 28}}},
		{"test:lossy", "image/png8", [4]want{{"image/png", 20}, {"image/png", 20}, {"image/png", 25}, {"image/png", exact}}},
		{"test:quantized", "image/webp", [4]want{{"image/webp", 30}, {"image/webp", 30}, {"image/webp", 40}, {"image/webp", exact}}},
	}
	for _, tc := range cases {
		before := len(up.asked())
		for x, w := range tc.tiles {
			for _, result := range []string{"MISS", "HIT"} {
				if x > 0 && result == "MISS" {
					result = "HIT" // the metatile's first tile stored them all
				}
				r := getTile(t, h, tc.layer, tc.format, gridset.Index{X: int64(x), Y: 0, Z: 1})
				if r.Code != 200 || r.Header().Get("Geowebcache-Cache-Result") != result {
					t.Fatalf("%s %s x=%d: %d %s %q", tc.layer, tc.format, x, r.Code, r.Header().Get("Geowebcache-Cache-Result"), r.Body.String())
				}
				if ct := r.Header().Get("Content-Type"); ct != w.ctype {
					t.Errorf("%s %s x=%d (%s): Content-Type %s, want %s", tc.layer, tc.format, x, result, ct, w.ctype)
				}
				var got image.Image
				var err error
				switch w.ctype {
				case "image/png":
					got, err = png.Decode(bytes.NewReader(r.Body.Bytes()))
				case "image/jpeg":
					got, err = jpeg.Decode(bytes.NewReader(r.Body.Bytes()))
				case "image/webp":
					got, err = webp.Decode(bytes.NewReader(r.Body.Bytes()))
				}
				if err != nil {
					t.Fatalf("%s %s x=%d: %s does not decode: %v", tc.layer, tc.format, x, w.ctype, err)
				}
				if tc.format == "image/png8" || tc.format == "image/vnd.jpeg-png8" && w.ctype == "image/png" {
					colors := 256
					if tc.layer == "test:lossy" {
						colors = 16
					}
					if n := distinctColors(got); n > colors {
						t.Errorf("%s %s x=%d: %d colours in a tile of at most %d", tc.layer, tc.format, x, n, colors)
					}
				}
				if w.minPSNR == 0 {
					continue // JPEG of a transparent tile: flattened, nothing to compare
				}
				if p := imaging.PSNR(got, wantTile(x)); p < w.minPSNR {
					t.Errorf("%s %s x=%d (%s): PSNR %.1f dB against the lossless tile, want ≥ %.1f", tc.layer, tc.format, x, result, p, w.minPSNR)
				}
			}
		}
		// Level 1 is one metatile (4×2 tiles): one GetMap, as lossless
		// PNG unless the tiles are JPEG.
		asked := up.asked()[before:]
		wantFormat := "image/png"
		if tc.format == "image/jpeg" {
			wantFormat = "image/jpeg"
		}
		if len(asked) != 1 || asked[0] != wantFormat {
			t.Errorf("%s %s: the upstream was asked %q, want one GetMap for %s", tc.layer, tc.format, asked, wantFormat)
		}
	}
}
