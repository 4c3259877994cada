package caddytest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeWMS is an in-process WMS that counts requests and can be told to fail.
// It renders a GetMap as a gradient keyed on the bbox, so different areas
// give different images.
type fakeWMS struct {
	*httptest.Server
	getMaps atomic.Int64 // GetMap requests seen
	others  atomic.Int64 // every other request (pass-through traffic)
	// inFlight GetMaps now; maxInFlight the most there ever were at once.
	inFlight, maxInFlight atomic.Int64

	// failNext makes the next N GetMaps answer 500, whatever the mode.
	failNext atomic.Int64

	mu       sync.Mutex
	bboxes   []string      // BBOX of every GetMap, in arrival order
	styles   []string      // STYLES of every GetMap, in arrival order
	mode     string        // "", "500", "exception", "slow", "text"
	delay    time.Duration // for "slow", and added to every GetMap
	lastGet  string        // last GetMap query
	gotQuery []string
}

func newFakeWMS(t *testing.T) *fakeWMS {
	f := &fakeWMS{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeWMS) set(mode string, delay time.Duration) {
	f.mu.Lock()
	f.mode, f.delay = mode, delay
	f.mu.Unlock()
}

// arrivals returns the BBOX of every GetMap so far, in arrival order.
func (f *fakeWMS) arrivals() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bboxes...)
}

// stylesSeen returns the STYLES of every GetMap so far, in arrival order.
func (f *fakeWMS) stylesSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.styles...)
}

func (f *fakeWMS) lastGetMap() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastGet
}

func (f *fakeWMS) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	get := func(k string) string {
		for key, v := range q {
			if strings.EqualFold(key, k) {
				return v[0]
			}
		}
		return ""
	}
	if !strings.EqualFold(get("REQUEST"), "GetMap") || r.URL.Path == "/direct" {
		f.others.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "fake WMS passthrough %s", get("REQUEST"))
		return
	}
	f.getMaps.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for m := f.maxInFlight.Load(); n > m && !f.maxInFlight.CompareAndSwap(m, n); m = f.maxInFlight.Load() {
	}
	f.mu.Lock()
	mode, delay := f.mode, f.delay
	f.lastGet = r.URL.RawQuery
	f.bboxes = append(f.bboxes, get("BBOX"))
	f.styles = append(f.styles, get("STYLES"))
	f.mu.Unlock()
	for n := f.failNext.Load(); n > 0; n = f.failNext.Load() {
		if f.failNext.CompareAndSwap(n, n-1) {
			http.Error(w, "injected failure", http.StatusInternalServerError)
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch mode {
	case "500":
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case "exception":
		w.Header().Set("Content-Type", "application/vnd.ogc.se_xml")
		fmt.Fprint(w, `<?xml version="1.0"?><ServiceExceptionReport version="1.1.1"><ServiceException code="StyleNotDefined">no such style</ServiceException></ServiceExceptionReport>`)
		return
	case "text":
		w.Header().Set("Content-Type", "image/png") // lying about it
		fmt.Fprint(w, "definitely not a PNG")
		return
	}
	wd, _ := strconv.Atoi(get("WIDTH"))
	ht, _ := strconv.Atoi(get("HEIGHT"))
	if wd <= 0 || ht <= 0 || wd > 8192 || ht > 8192 {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	h := fnv.New32a()
	h.Write([]byte(get("BBOX") + get("STYLES")))
	seed := h.Sum32()
	img := image.NewNRGBA(image.Rect(0, 0, wd, ht))
	for y := 0; y < ht; y++ {
		for x := 0; x < wd; x++ {
			img.SetNRGBA(x, y, color.NRGBA{byte(x / 4), byte(y / 4), byte(seed), 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	w.Header().Set("Content-Type", "image/png")
	w.Write(buf.Bytes())
}
