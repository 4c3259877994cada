package cluster

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeWMS is an in-process WMS on 127.0.0.1 that counts its GetMaps per
// BBOX and per node (each node's upstream URL carries ?node=<name>), can
// be slowed down, and answers a PNG of the requested size whose colours
// depend on the BBOX (a different colour per metatile, and per tile
// within it), so that tiles mixed up between metatiles or nodes show.
type fakeWMS struct {
	*httptest.Server
	getMaps atomic.Int64
	delay   atomic.Int64 // time.Duration added to every GetMap

	mu     sync.Mutex
	bboxes map[string]int     // GetMaps per BBOX and size ("<bbox> <w>x<h>")
	nodes  map[string]int     // GetMaps per node= query value
	who    map[string][]fetch // who fetched each BBOX and size, and when, in order
}

// fetch is one GetMap: the node that sent it, and when it arrived.
type fetch struct {
	node string
	at   time.Time
}

func (f fetch) String() string { return f.node + "@" + f.at.Format("15:04:05.000") }

func newFakeWMS(t *testing.T) *fakeWMS {
	t.Helper()
	f := &fakeWMS{bboxes: map[string]int{}, nodes: map[string]int{}, who: map[string][]fetch{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve)) // 127.0.0.1
	t.Cleanup(f.Close)
	return f
}

// url is the upstream URL of node name.
func (f *fakeWMS) url(node string) string { return f.URL + "/wms?node=" + node }

func (f *fakeWMS) setDelay(d time.Duration) { f.delay.Store(int64(d)) }

// perBBox returns a copy of the GetMaps per BBOX and size.
func (f *fakeWMS) perBBox() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.bboxes))
	for k, v := range f.bboxes {
		out[k] = v
	}
	return out
}

// byNode returns the GetMaps per node.
func (f *fakeWMS) byNode() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.nodes))
	for k, v := range f.nodes {
		out[k] = v
	}
	return out
}

// fetchers returns, for every BBOX and size fetched more than once, the
// nodes that fetched it in arrival order.
func (f *fakeWMS) fetchers() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for b, n := range f.bboxes {
		if n > 1 {
			for _, w := range f.who[b] {
				out[b] = append(out[b], w.node)
			}
		}
	}
	return out
}

// refetched returns the GetMaps of every BBOX and size fetched more than
// once, in arrival order.
func (f *fakeWMS) refetched() map[string][]fetch {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]fetch{}
	for b, n := range f.bboxes {
		if n > 1 {
			out[b] = append([]fetch(nil), f.who[b]...)
		}
	}
	return out
}

// repeated lists the BBOXes fetched more than once, with the nodes that
// fetched them and when.
func (f *fakeWMS) repeated() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for b, n := range f.bboxes {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s by %v", b, f.who[b]))
		}
	}
	sort.Strings(out)
	return out
}

func (f *fakeWMS) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	get := func(k string) string {
		for key, v := range q {
			if strings.EqualFold(key, k) && len(v) > 0 {
				return v[0]
			}
		}
		return ""
	}
	if !strings.EqualFold(get("REQUEST"), "GetMap") {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "fake WMS: %s", get("REQUEST"))
		return
	}
	bbox := get("BBOX")
	f.getMaps.Add(1)
	f.mu.Lock()
	// Levels 0 and 1 of EPSG:4326 have one metatile each, both of the
	// whole world: the size tells them apart.
	key := bbox + " " + get("WIDTH") + "x" + get("HEIGHT")
	f.bboxes[key]++
	f.nodes[q.Get("node")]++
	f.who[key] = append(f.who[key], fetch{q.Get("node"), time.Now()})
	f.mu.Unlock()
	if d := time.Duration(f.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	wd, _ := strconv.Atoi(get("WIDTH"))
	ht, _ := strconv.Atoi(get("HEIGHT"))
	if wd <= 0 || ht <= 0 || wd > 4096 || ht > 4096 {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(renderPNG(bbox, wd, ht))
}

// renderPNG draws a paletted image (cheap to encode): each 256×256 cell
// in a colour of its own, derived from the BBOX and the cell, crossed by
// dark diagonals so that no tile is one flat colour.
func renderPNG(bbox string, wd, ht int) []byte {
	h := fnv.New32a()
	h.Write([]byte(bbox))
	s := h.Sum32()
	cw, ch := (wd+255)/256, (ht+255)/256
	pal := color.Palette{color.NRGBA{20, 20, 20, 255}}
	for i := 0; i < cw*ch && len(pal) < 256; i++ {
		pal = append(pal, color.NRGBA{byte(s), byte(s >> 8), byte(s>>16) + byte(i*15), 255})
	}
	img := image.NewPaletted(image.Rect(0, 0, wd, ht), pal)
	for y := 0; y < ht; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+wd]
		for x := range row {
			if (x+y)%64 == 0 {
				row[x] = 0
				continue
			}
			c := (y/256)*cw + x/256
			row[x] = byte(1 + c%(len(pal)-1))
		}
	}
	var b bytes.Buffer
	(&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img)
	return b.Bytes()
}
