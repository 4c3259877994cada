package command

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// slowDelay is how long test:slow's every GetMap takes: with 2 workers,
// levels 0-4 (44 metatiles) take about 3 s, levels 0-6 (684) a minute,
// long enough to be killed.
const slowDelay = 150 * time.Millisecond

// fakeWMS answers GetMap on 127.0.0.1 by the requested layer: test:slow
// slowly, test:fail with a 500, any other with a PNG at once. It counts
// the GetMaps per layer.
type fakeWMS struct {
	*httptest.Server
	mu      sync.Mutex
	getMaps map[string]int
	pngs    map[string][]byte // by size
}

func newFakeWMS() *fakeWMS {
	f := &fakeWMS{getMaps: map[string]int{}, pngs: map[string][]byte{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// count is the GetMaps of a layer so far.
func (f *fakeWMS) count(layer string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.getMaps[layer]
}

func (f *fakeWMS) serve(w http.ResponseWriter, r *http.Request) {
	q := map[string]string{}
	for k, v := range r.URL.Query() {
		q[strings.ToUpper(k)] = v[0]
	}
	if !strings.EqualFold(q["REQUEST"], "GetMap") {
		http.Error(w, "fake WMS: GetMap only", http.StatusBadRequest)
		return
	}
	layer := q["LAYERS"]
	f.mu.Lock()
	f.getMaps[layer]++
	f.mu.Unlock()
	switch layer {
	case "test:fail":
		http.Error(w, "fake WMS: this layer always fails", http.StatusInternalServerError)
		return
	case "test:slow":
		select {
		case <-time.After(slowDelay):
		case <-r.Context().Done():
			return
		}
	}
	wd, _ := strconv.Atoi(q["WIDTH"])
	ht, _ := strconv.Atoi(q["HEIGHT"])
	if wd <= 0 || ht <= 0 || wd > 4096 || ht > 4096 {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(f.png(wd, ht))
}

// png is a two-colour image of the size, encoded once per size.
func (f *fakeWMS) png(wd, ht int) []byte {
	key := strconv.Itoa(wd) + "x" + strconv.Itoa(ht)
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.pngs[key]; ok {
		return b
	}
	img := image.NewPaletted(image.Rect(0, 0, wd, ht), color.Palette{color.NRGBA{30, 90, 160, 255}, color.NRGBA{20, 20, 20, 255}})
	for y := 0; y < ht; y++ {
		for x := 0; x < wd; x++ {
			if (x+y)%64 == 0 {
				img.Pix[y*img.Stride+x] = 1
			}
		}
	}
	var b bytes.Buffer
	(&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img)
	f.pngs[key] = b.Bytes()
	return b.Bytes()
}
