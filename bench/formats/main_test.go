package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tileImg is a 16x16 tile that differs per key, half transparent when
// alpha is set.
func tileImg(k key, alpha bool) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for y := range 16 {
		for x := range 16 {
			a := uint8(255)
			if alpha && x < 8 {
				a = 0
			}
			m.SetNRGBA(x, y, color.NRGBA{uint8(k.x*40 + x*8), uint8(k.y*60 + y*8), uint8(k.z * 50), a})
		}
	}
	return m
}

func enc(t *testing.T, m image.Image, typ string) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch typ {
	case "png":
		err = png.Encode(&b, m)
	case "jpeg":
		err = jpeg.Encode(&b, m, &jpeg.Options{Quality: 90})
	case "palette":
		p := image.NewPaletted(m.Bounds(), nil)
		idx := map[color.NRGBA]uint8{}
		for y := range 16 {
			for x := range 16 {
				c := m.(*image.NRGBA).NRGBAAt(x, y)
				c.R &^= 0x1f // fewer colours: lossy
				i, ok := idx[c]
				if !ok {
					i = uint8(len(p.Palette))
					idx[c] = i
					p.Palette = append(p.Palette, c)
				}
				p.SetColorIndex(x, y, i)
			}
		}
		err = png.Encode(&b, p)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	g := grids["EPSG:4326"]
	root := t.TempDir()
	var all []key
	for x := range 4 {
		for y := range 2 {
			all = append(all, key{1, x, y})
		}
	}
	for _, k := range all {
		m := tileImg(k, false)
		write(t, filepath.Join(root, "ref", fmt.Sprint(k.z), fmt.Sprint(k.x), fmt.Sprint(k.y)+".png"), enc(t, m, "png"))
		// MapCache's layout, every tile exact; one extension per format.
		write(t, filepath.Join(root, "mc", fmt.Sprintf("%02d/000/000/%03d/000/000/%03d.xxx", k.z, k.x, k.y)), enc(t, m, "png"))
		// XYZ rows, a palette (lossy here), and tile 1/3/1 missing.
		if k != (key{1, 3, 1}) {
			write(t, filepath.Join(root, "xyz", fmt.Sprint(k.z), fmt.Sprint(k.x), fmt.Sprint(g.rows(k.z)-1-k.y)+".png8"), enc(t, m, "palette"))
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var z, x, row int
		if _, err := fmt.Sscanf(r.URL.Path, "/xyz/%d/%d/%d.jpeg", &z, &x, &row); err != nil {
			http.NotFound(w, r)
			return
		}
		k := key{z, x, g.rows(z) - 1 - row}
		if k == (key{1, 0, 0}) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("geowebcache-cache-result", "HIT")
		w.Write(enc(t, tileImg(k, false), "jpeg"))
	}))
	defer srv.Close()

	mk := func(label, spec string) *set {
		src, err := parseSource(spec, g, "geowebcache-cache-result=HIT")
		if err != nil {
			t.Fatal(err)
		}
		return &set{label: label, src: src, types: map[string]int{}, worstDB: math.Inf(1)}
	}
	sets := []*set{
		mk("ref", "dir:"+filepath.Join(root, "ref")),
		mk("mc", "mapcache:"+filepath.Join(root, "mc")),
		mk("png8", "xyzdir:"+filepath.Join(root, "xyz")),
		mk("jpeg", srv.URL+"/xyz/{z}/{x}/{y}.jpeg"),
	}
	levels, _ := parseLevels("1")
	keys, err := tileKeys(sets, g, levels)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 8 {
		t.Fatalf("%d keys, want 8", len(keys))
	}
	if err := compare(context.Background(), sets, keys, 3); err != nil {
		t.Fatal(err)
	}
	ref, mc, p8, jp := sets[0], sets[1], sets[2], sets[3]
	if ref.present != 8 || ref.missing != 0 || ref.types["png-rgb"] != 8 {
		t.Errorf("ref: %d present, %d missing, types %s", ref.present, ref.missing, ref.typeList())
	}
	if mc.pairs != 8 || mc.identical != 8 || !math.IsInf(median(mc.psnrs), 1) {
		t.Errorf("mapcache layout: %d pairs, %d identical, median %v", mc.pairs, mc.identical, median(mc.psnrs))
	}
	if p8.present != 7 || p8.missing != 1 || p8.types["png-palette"] != 7 || p8.identical != 0 {
		t.Errorf("png8: %d present, %d missing, types %s, %d identical", p8.present, p8.missing, p8.typeList(), p8.identical)
	}
	if w := p8.worstDBOrNaN(); !(w > 20 && w < 60) || median(p8.psnrs) < w {
		t.Errorf("png8: worst %v, median %v", w, median(p8.psnrs))
	}
	if jp.present != 7 || jp.missing != 1 || jp.types["jpeg"] != 7 {
		t.Errorf("jpeg: %d present, %d missing, types %s", jp.present, jp.missing, jp.typeList())
	}
	if m := median(jp.psnrs); !(m > 25 && m < 60) {
		t.Errorf("jpeg: median %v", m)
	}

	// A URL source cannot be listed: without levels there must be a
	// listable one.
	if _, err := tileKeys(sets[3:], g, nil); err == nil {
		t.Error("tile keys of a URL source without levels: no error")
	}
	// Without levels, the directories' tiles.
	keys, err = tileKeys(sets[:3], g, nil)
	if err != nil || len(keys) != 8 {
		t.Errorf("listed %d keys (%v), want 8", len(keys), err)
	}
}

func TestHeaderRequired(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("geowebcache-cache-result", "MISS")
		w.Write(enc(t, tileImg(key{}, false), "png"))
	}))
	defer srv.Close()
	src, err := parseSource(srv.URL+"/{z}/{x}/{-y}.png", grids["EPSG:4326"], "geowebcache-cache-result=HIT")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.get(context.Background(), key{0, 0, 0}); err == nil || !strings.Contains(err.Error(), "MISS") {
		t.Errorf("a MISS: %v", err)
	}
}

func TestAlphaAndSize(t *testing.T) {
	a := tileImg(key{1, 1, 1}, true)
	// The same tile with other colour bytes under alpha 0: equal.
	b := image.NewNRGBA(a.Rect)
	copy(b.Pix, a.Pix)
	for i := 0; i < len(b.Pix); i += 4 {
		if b.Pix[i+3] == 0 {
			b.Pix[i], b.Pix[i+1], b.Pix[i+2] = 1, 2, 3
		}
	}
	ra, err := decode(enc(t, a, "png"))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := decode(enc(t, b, "png"))
	if err != nil {
		t.Fatal(err)
	}
	if k := kind(enc(t, a, "png")); k != "png-rgba" {
		t.Errorf("kind %s", k)
	}
	if p := psnr(ra, rb); !math.IsInf(p, 1) {
		t.Errorf("colour bytes under alpha 0 count: PSNR %v", p)
	}

	// A candidate of another size stops the run.
	root := t.TempDir()
	k := key{0, 0, 0}
	write(t, filepath.Join(root, "ref/0/0/0.png"), enc(t, a, "png"))
	big := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	write(t, filepath.Join(root, "c/0/0/0.png"), enc(t, big, "png"))
	r, _ := parseSource("dir:"+filepath.Join(root, "ref"), grids["EPSG:4326"], "")
	c, _ := parseSource("dir:"+filepath.Join(root, "c"), grids["EPSG:4326"], "")
	sets := []*set{{src: r, types: map[string]int{}}, {src: c, types: map[string]int{}}}
	if err := compare(context.Background(), sets, []key{k}, 1); err == nil {
		t.Error("a size mismatch: no error")
	}
}

func TestWebPKind(t *testing.T) {
	chunk := func(id string, n int) []byte {
		b := append([]byte(id), byte(n), 0, 0, 0)
		return append(b, make([]byte, n+n&1)...)
	}
	riff := func(chunks ...[]byte) []byte {
		body := []byte("WEBP")
		for _, c := range chunks {
			body = append(body, c...)
		}
		return append(append([]byte("RIFF"), byte(len(body)), 0, 0, 0), body...)
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{riff(chunk("VP8L", 5)), "webp-lossless"},
		{riff(chunk("VP8 ", 10)), "webp-lossy"},
		{riff(chunk("VP8X", 10), chunk("ALPH", 3), chunk("VP8 ", 10)), "webp-lossy+alpha"},
		{riff(chunk("VP8X", 10), chunk("VP8L", 7)), "webp-lossless"},
		{[]byte{0xff, 0xd8, 0xff, 0xe0}, "jpeg"},
		{[]byte("GIF89a"), "unknown"},
	} {
		if got := kind(c.b); got != c.want {
			t.Errorf("kind(% x) = %s, want %s", c.b[:min(len(c.b), 24)], got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	g := grids["EPSG:4326"]
	d := dirSource{layout: layoutMapCache, g: g}
	if k, ok := d.parse("04/000/001/234/000/000/012.png"); !ok || k != (key{4, 1234, 12}) {
		t.Errorf("mapcache path: %v %v", k, ok)
	}
	if _, ok := d.parse("04/000/001/234/000/000/012.png.lck"); ok {
		t.Error("a lock file parsed as a tile")
	}
	x := dirSource{layout: layoutXYZ, g: g}
	if k, ok := x.parse("2/5/0.webp"); !ok || k != (key{2, 5, 3}) {
		t.Errorf("xyz path: %v %v", k, ok)
	}
	h, _ := parseSource("http://h/tms/1.0.0/l@EPSG:4326@png/{z}/{x}/{-y}.png", g, "")
	if u := h.(*httpSource).url(key{3, 4, 5}); u != "http://h/tms/1.0.0/l@EPSG:4326@png/3/4/5.png" {
		t.Errorf("TMS URL %s", u)
	}
	h, _ = parseSource("http://h/xyz/l/EPSG:4326/{z}/{x}/{y}.png", g, "")
	if u := h.(*httpSource).url(key{3, 4, 5}); u != "http://h/xyz/l/EPSG:4326/3/4/2.png" {
		t.Errorf("XYZ URL %s", u)
	}
	for _, s := range []string{"", "4", "3-5"} {
		if _, err := parseLevels(s); err != nil {
			t.Errorf("levels %q: %v", s, err)
		}
	}
	for _, s := range []string{"x", "5-3", "-1"} {
		if _, err := parseLevels(s); err == nil {
			t.Errorf("levels %q: no error", s)
		}
	}
}
