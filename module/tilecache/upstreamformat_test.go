package tilecache

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// formatUpstream answers every GetMap with an uncompressed PNG of
// thousands of colours and varying alpha, and notes the FORMAT asked for.
type formatUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	formats []string
	sent    []*image.NRGBA
	// chunked sends the answer without a Content-Length; short sends a
	// Content-Length larger than the body (a connection cut mid-answer).
	chunked, short bool
}

func newFormatUpstream(t *testing.T) *formatUpstream {
	u := &formatUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wd, _ := strconv.Atoi(r.URL.Query().Get("WIDTH"))
		ht, _ := strconv.Atoi(r.URL.Query().Get("HEIGHT"))
		img := image.NewNRGBA(image.Rect(0, 0, wd, ht))
		for y := range ht {
			for x := range wd {
				img.SetNRGBA(x, y, color.NRGBA{R: uint8(x), G: uint8(y), B: uint8(x/256 + 4*(y/256)), A: uint8(255 - (x+y)%7)})
			}
		}
		var b bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, img); err != nil {
			t.Error(err)
		}
		u.mu.Lock()
		u.formats = append(u.formats, r.URL.Query().Get("FORMAT"))
		u.sent = append(u.sent, img)
		chunked, short := u.chunked, u.short
		u.mu.Unlock()
		w.Header().Set("Content-Type", "image/png; mode=raw")
		switch {
		case chunked:
			w.Write(b.Bytes()[:1000])
			w.(http.Flusher).Flush() // no Content-Length from here on
			w.Write(b.Bytes()[1000:])
		case short:
			w.Header().Set("Content-Length", strconv.Itoa(b.Len()+100))
			w.Write(b.Bytes())
		default:
			w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
			w.Write(b.Bytes())
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *formatUpstream) last() (string, *image.NRGBA, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.formats) == 0 {
		return "", nil, 0
	}
	return u.formats[len(u.formats)-1], u.sent[len(u.sent)-1], len(u.formats)
}

// isAreaOf reports whether tile equals one 256-pixel square of meta, pixel
// for pixel (every square of the test upstream's image is distinct).
func isAreaOf(tile image.Image, meta *image.NRGBA) bool {
	n := toNRGBATest(tile)
	for oy := 0; oy < meta.Rect.Dy(); oy += 256 {
		for ox := 0; ox < meta.Rect.Dx(); ox += 256 {
			same := true
			for y := 0; y < 256 && same; y++ {
				got := n.Pix[y*n.Stride : y*n.Stride+256*4]
				off := (oy+y)*meta.Stride + ox*4
				same = bytes.Equal(got, meta.Pix[off:off+256*4])
			}
			if same {
				return true
			}
		}
	}
	return false
}

func toNRGBATest(img image.Image) *image.NRGBA {
	if n, ok := img.(*image.NRGBA); ok {
		return n
	}
	b := img.Bounds()
	out := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.Set(x, y, img.At(x, y))
		}
	}
	return out
}

// upstream_format: the metatile is asked for in that FORMAT, whatever the
// tile's, and the tiles cut from it are the upstream's pixels exactly;
// the other layer still asks in the tile's format.
func TestUpstreamFormatIsWhatMetatilesAreRequestedIn(t *testing.T) {
	up := newFormatUpstream(t)
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	cfg.Timeout = caddy.Duration(5e9)
	cfg.Layers[0].UpstreamFormat = "image/png; mode=raw"
	h := handlerOf(t, openTest(t, compileTest(t, cfg), nil), nil)

	w := getTile(t, h, "test:a", "image/png", gridset.Index{X: 1, Y: 1, Z: 2})
	format, meta, n := up.last()
	if w.Code != 200 || n != 1 || format != "image/png; mode=raw" {
		t.Fatalf("PNG tile: %d %q; upstream asked %d times, last FORMAT %q", w.Code, w.Body.String(), n, format)
	}
	tile, err := png.Decode(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !isAreaOf(tile, meta) {
		t.Fatal("the PNG tile is not an exact area of the upstream's metatile")
	}

	// A JPEG tile of the same layer: also fetched as the raw PNG.
	w = getTile(t, h, "test:a", "image/jpeg", gridset.Index{X: 1, Y: 1, Z: 2})
	format, _, n = up.last()
	if w.Code != 200 || n != 2 || format != "image/png; mode=raw" || w.Header().Get("Content-Type") != "image/jpeg" {
		t.Fatalf("JPEG tile: %d %q; upstream asked %d times, last FORMAT %q", w.Code, w.Header().Get("Content-Type"), n, format)
	}
	if _, err := jpeg.Decode(w.Body); err != nil {
		t.Fatalf("JPEG tile does not decode: %v", err)
	}

	// test:b has no upstream_format: its own format goes upstream.
	w = getTile(t, h, "test:b", "image/jpeg", gridset.Index{X: 9, Y: 4, Z: 3})
	if format, _, n = up.last(); w.Code != 200 || n != 3 || format != "image/jpeg" {
		t.Fatalf("test:b: %d; upstream asked %d times, last FORMAT %q", w.Code, n, format)
	}
}

// An answer without a Content-Length is read as well; one cut short of
// its Content-Length is a failed fetch: 502, nothing stored, and the next
// request asks again.
func TestUpstreamAnswerLengths(t *testing.T) {
	up := newFormatUpstream(t)
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	cfg.Timeout = caddy.Duration(5e9)
	h := handlerOf(t, openTest(t, compileTest(t, cfg), nil), nil)

	up.chunked = true
	w := getTile(t, h, "test:a", "image/png", gridset.Index{X: 5, Y: 1, Z: 2})
	_, meta, _ := up.last()
	if w.Code != 200 {
		t.Fatalf("chunked answer: %d %q", w.Code, w.Body.String())
	}
	if tile, err := png.Decode(w.Body); err != nil || !isAreaOf(tile, meta) {
		t.Fatalf("chunked answer: tile %v, exact %v", err, err == nil)
	}

	up.mu.Lock()
	up.chunked, up.short = false, true
	up.mu.Unlock()
	idx := gridset.Index{X: 1, Y: 1, Z: 3}
	w = getTile(t, h, "test:a", "image/png", idx)
	if w.Code != 502 || strings.Count(w.Body.String(), "\n") != 1 {
		t.Fatalf("short answer: %d %q", w.Code, w.Body.String())
	}
	up.mu.Lock()
	up.short = false
	up.mu.Unlock()
	w = getTile(t, h, "test:a", "image/png", idx)
	if _, _, n := up.last(); w.Code != 200 || w.Header().Get("Geowebcache-Cache-Result") != "MISS" || n != 3 {
		t.Fatalf("after the short answer: %d %s, %d upstream requests", w.Code, w.Header().Get("Geowebcache-Cache-Result"), n)
	}
}

func TestUpstreamFormatRefusesControlCharacters(t *testing.T) {
	cfg := testConfig()
	cfg.Layers[0].UpstreamFormat = "image/png\r\nX: y"
	if _, err := compile(t.Name(), cfg); err == nil || !strings.Contains(err.Error(), "upstream_format") {
		t.Fatalf("compile: %v", err)
	}
}
