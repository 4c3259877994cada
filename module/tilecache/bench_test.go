package tilecache

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// discardWriter is the least a ResponseWriter can be: a reusable header
// map, the status and the byte count kept, the body dropped.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func (w *discardWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

// noisyPNG is a 256×256 PNG of 12–21 KB: flat colour blocks, like a
// rendered map, with a few per cent of random pixels.
func noisyPNG(tb testing.TB, seed int64) []byte {
	r := rand.New(rand.NewSource(seed))
	pct := 2 + int(seed%3)
	img := image.NewNRGBA(image.Rect(0, 0, 256, 256))
	for y := 0; y < 256; y++ {
		for x := 0; x < 256; x++ {
			c := color.NRGBA{uint8(40 * ((x/32 + y/48 + int(seed)) % 6)), uint8(30 * ((x/64 + y/20) % 7)), 128, 255}
			if r.Intn(100) < pct {
				c.R, c.G = uint8(r.Intn(256)), uint8(r.Intn(256))
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

const benchTiles = 300

// hitFixture is a handler over a store holding benchTiles PNG tiles of
// test:a in EPSG:900913 at z9, and a prebuilt GetMap for each, written as
// OpenLayers writes them (EPSG:3857, TILED and TRANSPARENT).
type hitFixture struct {
	h     *Handler
	reqs  []*http.Request
	next  caddyhttp.Handler
	bytes int // total tile bytes
}

func newHitFixture(b *testing.B) *hitFixture {
	b.Helper()
	c := openTest(b, newTestHandler(b), nil)
	st := c.Store()
	h := handlerOf(b, c, nil)

	l := c.layers["test:a"]
	g, _ := l.Grid("EPSG:900913")
	f, _ := l.Format("image/png")
	set := store.Set{Layer: l.Name, Gridset: g.Name, Format: f.Name, Params: l.Params.Defaults().Hash()}
	fx := &hitFixture{h: h, next: caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		b.Fatal("request passed through")
		return nil
	})}
	const z = 9
	var entries []store.Entry
	for i := 0; i < benchTiles; i++ {
		idx := gridset.Index{X: 200 + int64(i%20), Y: 300 + int64(i/20), Z: z}
		data := noisyPNG(b, int64(i))
		fx.bytes += len(data)
		entries = append(entries, store.Entry{Key: store.Key{Set: set, Z: idx.Z, X: idx.X, Y: idx.Y}, Data: data})
		q := "SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image%2Fpng&TRANSPARENT=true&TILED=true" +
			"&LAYERS=test%3Aa&STYLES=&WIDTH=256&HEIGHT=256&SRS=EPSG%3A3857&BBOX=" +
			url.QueryEscape(bboxStr(g.TileBBox(idx), false))
		fx.reqs = append(fx.reqs, &http.Request{
			Method: http.MethodGet,
			URL:    &url.URL{Path: "/wms", RawQuery: q},
			Header: http.Header{},
		})
	}
	if err := st.Put(entries, time.Now()); err != nil {
		b.Fatal(err)
	}
	// Every request is a hit before the clock starts.
	w := &discardWriter{h: http.Header{}}
	for i, r := range fx.reqs {
		w.reset()
		if err := h.ServeHTTP(w, r, fx.next); err != nil {
			b.Fatal(err)
		}
		if w.status != http.StatusOK || w.n != len(entries[i].Data) || w.h.Get("Geowebcache-Cache-Result") != "HIT" {
			b.Fatalf("tile %d: status %d, %d bytes (want %d), headers %v", i, w.status, w.n, len(entries[i].Data), w.h)
		}
	}
	return fx
}

func BenchmarkHitPath(b *testing.B) {
	fx := newHitFixture(b)
	w := &discardWriter{h: make(http.Header, 16)}
	b.SetBytes(int64(fx.bytes / len(fx.reqs)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.reset()
		if err := fx.h.ServeHTTP(w, fx.reqs[i], fx.next); err != nil {
			b.Fatal(err)
		}
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
		if i++; i == len(fx.reqs) {
			i = 0
		}
	}
}

func BenchmarkHitPathParallel(b *testing.B) {
	fx := newHitFixture(b)
	b.SetBytes(int64(fx.bytes / len(fx.reqs)))
	b.ReportAllocs()
	b.ResetTimer()
	var start atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: make(http.Header, 16)}
		// Goroutines start at different tiles.
		i := int(start.Add(37) % int64(len(fx.reqs)))
		for pb.Next() {
			w.reset()
			if err := fx.h.ServeHTTP(w, fx.reqs[i], fx.next); err != nil {
				b.Error(err)
				return
			}
			if w.status != http.StatusOK {
				b.Errorf("status %d", w.status)
				return
			}
			if i++; i == len(fx.reqs) {
				i = 0
			}
		}
	})
}

// BenchmarkHitPath304 is a revalidation: If-None-Match with the tile's ETag.
func BenchmarkHitPath304(b *testing.B) {
	fx := newHitFixture(b)
	w := &discardWriter{h: make(http.Header, 16)}
	reqs := make([]*http.Request, len(fx.reqs))
	for i, r := range fx.reqs {
		w.reset()
		if err := fx.h.ServeHTTP(w, r, fx.next); err != nil {
			b.Fatal(err)
		}
		r2 := *r
		r2.Header = http.Header{"If-None-Match": {w.h.Get("Etag")}}
		reqs[i] = &r2
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.reset()
		if err := fx.h.ServeHTTP(w, reqs[i], fx.next); err != nil {
			b.Fatal(err)
		}
		if w.status != http.StatusNotModified {
			b.Fatalf("status %d", w.status)
		}
		if i++; i == len(reqs) {
			i = 0
		}
	}
}

// BenchmarkMatchOnly is parseWMS and matchTile alone, as ServeHTTP calls them.
func BenchmarkMatchOnly(b *testing.B) {
	h := newTestHandler(b)
	g, _ := gridset.Builtin("EPSG:900913")
	var qs []string
	for i := 0; i < benchTiles; i++ {
		idx := gridset.Index{X: 200 + int64(i%20), Y: 300 + int64(i/20), Z: 9}
		qs = append(qs, "SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image%2Fpng&TRANSPARENT=true&TILED=true"+
			"&LAYERS=test%3Aa&STYLES=&WIDTH=256&HEIGHT=256&SRS=EPSG%3A3857&BBOX="+
			url.QueryEscape(bboxStr(g.TileBBox(idx), false)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, r := match(h, qs[i]); r != "" {
			b.Fatal(r)
		}
		if i++; i == len(qs) {
			i = 0
		}
	}
}
