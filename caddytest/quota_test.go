package caddytest

import (
	"bytes"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"hash/fnv"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// noisyWMS is a WMS whose maps are a gradient sprinkled with pseudo-random
// noise keyed on the bbox: the tiles cut from them are a few KB each, like
// real tiles, rather than the few hundred bytes of fakeWMS's gradients, so
// that a quota of a few MiB holds a few hundred tiles. The same bbox always
// gives the same image.
type noisyWMS struct {
	*httptest.Server
	getMaps atomic.Int64
	delay   atomic.Int64 // nanoseconds added to every GetMap
}

func newNoisyWMS(t *testing.T) *noisyWMS {
	n := &noisyWMS{}
	n.Server = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.Close)
	return n
}

func (n *noisyWMS) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	get := func(k string) string {
		for key, v := range q {
			if strings.EqualFold(key, k) {
				return v[0]
			}
		}
		return ""
	}
	if !strings.EqualFold(get("REQUEST"), "GetMap") {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("noisy WMS passthrough"))
		return
	}
	n.getMaps.Add(1)
	if d := time.Duration(n.delay.Load()); d > 0 {
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
	h := fnv.New64a()
	h.Write([]byte(get("BBOX") + "|" + get("LAYERS") + "|" + get("STYLES")))
	state := h.Sum64()
	img := image.NewNRGBA(image.Rect(0, 0, wd, ht))
	for y := 0; y < ht; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < wd; x++ {
			// splitmix64
			state += 0x9e3779b97f4a7c15
			z := state
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			z ^= z >> 31
			v := byte(x / 8)
			if z&15 == 0 {
				v += byte(z>>8) & 15
			}
			row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = v, byte(y/8), byte(state>>56)&0x80, 255
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	w.Header().Set("Content-Type", "image/png")
	w.Write(buf.Bytes())
}

func TestQuotaProbe(t *testing.T) {
	n := newNoisyWMS(t)
	dir := storageDir(t)
	name := "qprobe" + strconv.FormatInt(time.Now().UnixNano(), 36)
	load(t, siteConfig{admin: ptr("cache " + name), upstream: n.URL, tiles: `
		upstream ` + n.URL + `/wms
		storage ` + dir + `
		usage
		name ` + name + `
		layer test:a {
			gridsets EPSG:4326
		}`}.String())
	start := time.Now()
	for i := 0; i < 8; i++ {
		a := get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: int64(4 * i), Y: 4, Z: 5})))
		mustTile(t, a, "MISS")
		t.Logf("tile %d bytes", len(a.body))
	}
	t.Logf("8 misses took %v", time.Since(start))
	u := getUsage(t)
	t.Logf("usage %d tiles %d bytes: %d per tile", u.Tiles, u.Bytes, u.Bytes/max(u.Tiles, 1))
}
