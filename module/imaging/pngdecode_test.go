package imaging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
)

// decodeOrFallback is Decode's PNG path without its checks.
func decodeOrFallback(b []byte) (image.Image, error) {
	img, err := decodePNG(b)
	if err == errNotHandled {
		return png.Decode(bytes.NewReader(b))
	}
	return img, err
}

// sameDecode fails unless got is exactly want: type, bounds, stride,
// pixels and palette.
func sameDecode(t testing.TB, name string, got, want image.Image) {
	t.Helper()
	if reflect.TypeOf(got) != reflect.TypeOf(want) {
		t.Fatalf("%s: got %T, image/png %T", name, got, want)
	}
	if got.Bounds() != want.Bounds() {
		t.Fatalf("%s: bounds %v, image/png %v", name, got.Bounds(), want.Bounds())
	}
	switch w := want.(type) {
	case *image.NRGBA:
		g := got.(*image.NRGBA)
		if g.Stride != w.Stride || !bytes.Equal(g.Pix, w.Pix) {
			t.Fatalf("%s: NRGBA pixels differ", name)
		}
	case *image.RGBA:
		g := got.(*image.RGBA)
		if g.Stride != w.Stride || !bytes.Equal(g.Pix, w.Pix) {
			t.Fatalf("%s: RGBA pixels differ", name)
		}
	case *image.Paletted:
		g := got.(*image.Paletted)
		if g.Stride != w.Stride || !bytes.Equal(g.Pix, w.Pix) {
			t.Fatalf("%s: palette indexes differ", name)
		}
		if !reflect.DeepEqual(g.Palette, w.Palette) {
			t.Fatalf("%s: palette %v, image/png %v", name, g.Palette, w.Palette)
		}
	default:
		// Formats left to image/png: both sides came from it.
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %T differs", name, want)
		}
	}
}

// checkAgainstStd decodes b both ways and requires the same outcome. It
// returns our image (nil on error), which the caller may Recycle.
func checkAgainstStd(t testing.TB, name string, b []byte) image.Image {
	t.Helper()
	want, wantErr := png.Decode(bytes.NewReader(b))
	got, err := decodeOrFallback(b)
	switch {
	case err != nil && got != nil:
		t.Fatalf("%s: error %v with an image", name, err)
	case err != nil && wantErr == nil:
		t.Fatalf("%s: error %v, image/png decodes it", name, err)
	case err == nil && wantErr != nil:
		t.Fatalf("%s: decoded, image/png fails: %v", name, wantErr)
	case err == nil:
		sameDecode(t, name, got, want)
	}
	return got
}

// testImages returns images of every kind decodePNG handles (and some it
// does not), in sizes that exercise edges.
func testImages() map[string]image.Image {
	rng := rand.New(rand.NewPCG(7, 9))
	out := map[string]image.Image{}
	for _, size := range []image.Point{{1, 1}, {3, 7}, {257, 5}, {64, 64}, {1024, 1024}} {
		w, h := size.X, size.Y
		big := w*h > 1<<16
		r := image.Rect(0, 0, w, h)
		add := func(kind string, m image.Image) { out[fmt.Sprintf("%s-%dx%d", kind, w, h)] = m }

		noise := image.NewNRGBA(r)
		for i := range noise.Pix {
			noise.Pix[i] = uint8(rng.Uint32())
		}
		add("noise-nrgba", noise)

		grad := image.NewNRGBA(r)
		opaque := image.NewRGBA(r) // image/png writes it as RGB
		for y := range h {
			for x := range w {
				c := color.NRGBA{uint8(x * 255 / max(1, w-1)), uint8(y * 3), uint8(x + y), uint8(255 - y%200)}
				grad.SetNRGBA(x, y, c)
				c.A = 255
				opaque.Set(x, y, c)
			}
		}
		add("gradient-nrgba", grad)
		add("gradient-rgb", opaque)

		flat := image.NewNRGBA(r)
		for i := 0; i < len(flat.Pix); i += 4 {
			copy(flat.Pix[i:], []uint8{170, 211, 223, 255})
			if i > len(flat.Pix)/2 {
				copy(flat.Pix[i:], []uint8{0, 0, 0, 0})
			}
		}
		add("flat-nrgba", flat)

		for _, alpha := range []bool{false, true} {
			pal := color.Palette{}
			for i := range 5 + rng.IntN(200) {
				c := color.NRGBA{uint8(i * 37), uint8(i * 11), uint8(255 - i), 255}
				if alpha && i%3 == 0 {
					c.A = uint8(i)
				}
				pal = append(pal, c)
			}
			p := image.NewPaletted(r, pal)
			for i := range p.Pix {
				p.Pix[i] = uint8(rng.IntN(len(pal)))
				if !big && i%7 == 0 {
					p.Pix[i] = uint8(i % len(pal))
				}
			}
			add(fmt.Sprintf("paletted-alpha=%v", alpha), p)
		}
		if !big {
			// Not handled: gray, 16-bit.
			g := image.NewGray(r)
			for i := range g.Pix {
				g.Pix[i] = uint8(rng.Uint32())
			}
			add("gray", g)
			n16 := image.NewNRGBA64(r)
			for i := range n16.Pix {
				n16.Pix[i] = uint8(rng.Uint32())
			}
			add("nrgba64", n16)
		}
	}
	return out
}

// encodings returns b encoded by image/png at every level and by this
// package's encoder at every setting.
func encodings(t testing.TB, m image.Image) map[string][]byte {
	out := map[string][]byte{}
	for _, l := range []png.CompressionLevel{png.DefaultCompression, png.NoCompression, png.BestSpeed, png.BestCompression} {
		var buf bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: l}).Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("image/png-%d", l)] = buf.Bytes()
	}
	for _, c := range []PNGCompression{PNGFast, PNGDefault, PNGBest} {
		var buf bytes.Buffer
		e := Encoder{PNG: c}
		if err := e.Encode(&buf, m, pngFormat); err != nil {
			t.Fatal(err)
		}
		out["imaging-"+c.String()] = buf.Bytes()
	}
	var buf bytes.Buffer
	if err := encodePNG(&buf, m, trueColorSettings); err != nil {
		t.Fatal(err)
	}
	out["imaging-truecolor"] = buf.Bytes()
	return out
}

func TestDecodePNGDifferential(t *testing.T) {
	handled := 0
	for name, m := range testImages() {
		if testing.Short() && m.Bounds().Dx() == 1024 {
			continue
		}
		for enc, b := range encodings(t, m) {
			if _, err := decodePNG(b); err != errNotHandled {
				handled++
			}
			img := checkAgainstStd(t, name+"/"+enc, b)
			Recycle(img)
		}
	}
	if handled == 0 {
		t.Fatal("every image was left to image/png")
	}
}

// filteredPNG writes pixel rows (bpp bytes per pixel, of colour type ct)
// filtered with filters[y%len(filters)], to reach every filter type,
// which neither encoder guarantees to use.
func filteredPNG(w, h int, ct uint8, bpp int, rows []byte, pal []color.NRGBA, filters []uint8) []byte {
	var dst bytes.Buffer
	writeHeader(&dst, w, h, 8, ct)
	if ct == ctPalette {
		var plte, trns []byte
		for _, c := range pal {
			plte = append(plte, c.R, c.G, c.B)
			trns = append(trns, c.A)
		}
		writeChunk(&dst, "PLTE", plte)
		writeChunk(&dst, "tRNS", trns)
	}
	n := w * bpp
	raw := make([]byte, 0, h*(n+1))
	prev := make([]byte, n)
	out := make([]byte, n)
	for y := range h {
		cur := rows[y*n : (y+1)*n]
		ft := filters[y%len(filters)]
		if ft < 5 {
			applyFilter(out, cur, prev, bpp, ft)
		} else {
			copy(out, cur) // an invalid filter type
		}
		raw = append(append(raw, ft), out...)
		prev = cur
	}
	writeIDAT(&dst, raw, 6)
	writeEnd(&dst)
	return dst.Bytes()
}

func TestDecodePNGAllFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pal := make([]color.NRGBA, 256)
	for i := range pal {
		pal[i] = color.NRGBA{uint8(i), uint8(255 - i), uint8(i * 7), uint8(i * 13)}
	}
	filters := []uint8{ftNone, ftSub, ftUp, ftAverage, ftPaeth, ftPaeth, ftAverage, ftSub, ftUp}
	for _, f := range []struct {
		ct  uint8
		bpp int
	}{{ctRGBA, 4}, {ctRGB, 3}, {ctPalette, 1}} {
		for _, size := range []image.Point{{1, 9}, {3, 7}, {257, 18}} {
			w, h := size.X, size.Y
			rows := make([]byte, w*h*f.bpp)
			for i := range rows {
				// smooth with noise, so every predictor matters
				rows[i] = uint8(i/3) + uint8(rng.IntN(9))
			}
			name := fmt.Sprintf("ct%d-%dx%d", f.ct, w, h)
			b := filteredPNG(w, h, f.ct, f.bpp, rows, pal, filters)
			if _, err := decodePNG(b); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			Recycle(checkAgainstStd(t, name, b))

			bad := filteredPNG(w, h, f.ct, f.bpp, rows, pal, []uint8{ftNone, ftUp, 5})
			if img, err := decodePNG(bad); err == nil || img != nil || err == errNotHandled {
				t.Fatalf("%s: filter type 5: %v", name, err)
			}
			checkAgainstStd(t, name+"-bad-filter", bad)
		}
	}
}

func mapserverBodies(t testing.TB) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "mapserver", "*.png"))
	if err != nil || len(files) == 0 {
		t.Fatal("no MapServer metatiles", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func TestDecodePNGMapServer(t *testing.T) {
	for name, b := range mapserverBodies(t) {
		if _, err := decodePNG(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		Recycle(checkAgainstStd(t, name, b))
		// And through Decode, as the cache calls it.
		img, err := Decode("image/png", b, 1024, 1024)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := png.Decode(bytes.NewReader(b))
		sameDecode(t, name, img, want)
		Recycle(img)
	}
}

// TestDecodePNGGoTestdata runs image/png's own test images, valid and
// not, from the Go installation's source tree (part of every Go install).
func TestDecodePNGGoTestdata(t *testing.T) {
	dir := filepath.Join(runtime.GOROOT(), "src", "image", "png", "testdata")
	files, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	suite, _ := filepath.Glob(filepath.Join(dir, "pngsuite", "*.png"))
	files = append(files, suite...)
	if len(files) == 0 {
		t.Fatalf("no image/png test images in %s", dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		Recycle(checkAgainstStd(t, filepath.Base(f), b))
	}
}

// rechunk rewrites a PNG's chunks, data and CRC, through edit; a nil
// result drops the chunk.
func rechunk(t testing.TB, b []byte, edit func(typ string, data []byte) []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	out.Write(pngMagic)
	p := b[len(pngMagic):]
	for len(p) >= 12 {
		n := binary.BigEndian.Uint32(p)
		typ := string(p[4:8])
		data := edit(typ, bytes.Clone(p[8:8+n])) // not nil when empty
		if data != nil {
			writeChunk(&out, typ, data)
		}
		p = p[12+n:]
	}
	return out.Bytes()
}

func TestDecodePNGFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	nrgba := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	copy(nrgba.Pix, []uint8{1, 2, 3, 4})
	var buf bytes.Buffer
	png.Encode(&buf, nrgba)
	// A 1×1 image is the same interlaced or not: pass 1 holds its only
	// pixel, and the other six passes are empty.
	interlaced := rechunk(t, buf.Bytes(), func(typ string, data []byte) []byte {
		if typ == "IHDR" {
			data[12] = 1
		}
		return data
	})
	cases := map[string][]byte{"interlaced": interlaced}
	for name, m := range map[string]image.Image{
		"gray":    image.NewGray(image.Rect(0, 0, 9, 4)),
		"gray16":  image.NewGray16(image.Rect(0, 0, 9, 4)),
		"nrgba64": image.NewNRGBA64(image.Rect(0, 0, 9, 4)),
		"rgba64":  image.NewRGBA64(image.Rect(0, 0, 9, 4)),
		"pal1bit": image.NewPaletted(image.Rect(0, 0, 9, 4), color.Palette{color.Black, color.White}),
	} {
		buf.Reset()
		png.Encode(&buf, m)
		cases[name] = bytes.Clone(buf.Bytes())
	}
	// RGB with a colour key.
	rgb := image.NewRGBA(image.Rect(0, 0, 5, 5))
	for i := range rgb.Pix {
		rgb.Pix[i] = uint8(rng.Uint32()) | 0x80
		if i%4 == 3 {
			rgb.Pix[i] = 0xff // opaque, so written as RGB
		}
	}
	buf.Reset()
	png.Encode(&buf, rgb)
	// tRNS right after IHDR, keyed to the first pixel.
	ihdrEnd := len(pngMagic) + 25
	var trns bytes.Buffer
	writeChunk(&trns, "tRNS", []byte{0, rgb.Pix[0], 0, rgb.Pix[1], 0, rgb.Pix[2]})
	cases["rgb-trns"] = append(append(bytes.Clone(buf.Bytes()[:ihdrEnd]), trns.Bytes()...), buf.Bytes()[ihdrEnd:]...)

	for name, b := range cases {
		if _, err := decodePNG(b); err != errNotHandled {
			t.Errorf("%s: %v, want errNotHandled", name, err)
		}
		want, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: image/png: %v", name, err)
		}
		got, err := decodeOrFallback(b)
		if err != nil {
			t.Fatal(err)
		}
		sameDecode(t, name, got, want)
	}
	if img, _ := png.Decode(bytes.NewReader(cases["rgb-trns"])); img.(*image.NRGBA).Pix[3] != 0 {
		t.Fatal("the colour key test image has no transparent pixel")
	}
}

func TestDecodePNGCorrupt(t *testing.T) {
	m := testImages()["gradient-nrgba-64x64"]
	var buf bytes.Buffer
	png.Encode(&buf, m)
	body := buf.Bytes()
	idat := bytes.Index(body, []byte("IDAT")) + 4
	idatLen := int(binary.BigEndian.Uint32(body[idat-8:]))

	t.Run("flip", func(t *testing.T) {
		for i := idat; i < idat+idatLen; i++ {
			b := bytes.Clone(body)
			b[i] ^= 0x10
			if img, err := decodePNG(b); err == nil || img != nil {
				t.Fatalf("byte %d flipped: the CRC must catch it", i)
			}
			// With the CRC fixed, inflate or Adler-32 must catch it, at
			// least where image/png does.
			b = rechunk(t, b, func(_ string, data []byte) []byte { return data })
			Recycle(checkAgainstStd(t, fmt.Sprint("flip ", i), b))
			if i == idat+idatLen/2 {
				if _, err := decodePNG(b); err == nil {
					t.Fatal("a flip in the middle of the stream went unnoticed")
				}
			}
		}
	})
	t.Run("adler", func(t *testing.T) {
		b := bytes.Clone(body)
		b[idat+idatLen-1] ^= 1 // last byte of the Adler-32
		b = rechunk(t, b, func(_ string, data []byte) []byte { return data })
		if _, err := decodePNG(b); err == nil || err.Error() != "png: invalid format: zlib: invalid checksum" {
			t.Fatalf("bad Adler-32: %v", err)
		}
		if _, err := png.Decode(bytes.NewReader(b)); err == nil {
			t.Fatal("image/png accepts it")
		}
	})
	t.Run("truncate", func(t *testing.T) {
		for n := range len(body) {
			if img, err := decodePNG(body[:n]); err == nil || img != nil {
				t.Fatalf("cut at %d of %d: decoded", n, len(body))
			}
		}
	})
	t.Run("short-stream", func(t *testing.T) {
		// Fewer rows than the header says: a valid zlib stream that ends
		// early, and one with a row too many.
		for _, h := range []int{63, 65} {
			mm := m.(*image.NRGBA).SubImage(image.Rect(0, 0, 64, min(h, 64))).(*image.NRGBA)
			rows := append([]byte(nil), mm.Pix...)
			if h > 64 {
				rows = append(rows, mm.Pix[:256]...)
			}
			b := filteredPNG(64, h, ctRGBA, 4, rows, nil, []uint8{ftNone})
			b = rechunk(t, b, func(typ string, data []byte) []byte {
				if typ == "IHDR" {
					binary.BigEndian.PutUint32(data[4:], 64)
				}
				return data
			})
			if img, err := decodePNG(b); err == nil || img != nil {
				t.Fatalf("%d rows for 64: decoded", h)
			}
			checkAgainstStd(t, fmt.Sprint(h, " rows"), b)
		}
	})
	t.Run("split-idat", func(t *testing.T) {
		// The stream split over IDAT chunks of every size decodes; with a
		// garbage IDAT after it too (image/png skips it); with garbage in
		// the chunk it ends in, it fails.
		var data []byte
		rechunk(t, body, func(typ string, d []byte) []byte {
			if typ == "IDAT" {
				data = d
			}
			return d
		})
		// signature and IHDR, the stream in IDATs of size bytes, then
		// optionally one more IDAT.
		build := func(size int, stream []byte, after []byte) []byte {
			var out bytes.Buffer
			out.Write(body[:len(pngMagic)+25]) // signature, IHDR
			for s := stream; len(s) > 0; {
				k := min(size, len(s))
				writeChunk(&out, "IDAT", s[:k])
				s = s[k:]
			}
			if after != nil {
				writeChunk(&out, "IDAT", after)
			}
			writeEnd(&out)
			return out.Bytes()
		}
		for _, size := range []int{1, 2, 3, 7, 100, len(data)} {
			for _, c := range []struct {
				name          string
				stream, after []byte
				ok            bool
			}{
				{"plain", data, nil, true},
				{"trailing-idat", data, []byte("garbage"), true},
				{"empty-idat", data, []byte{}, true},
				// Skipped when it makes a chunk of its own; else left to
				// image/png (errNotHandled), which checkAgainstStd compares.
				{"garbage-in-stream-chunk", append(bytes.Clone(data), 'x'), nil, len(data)%size == 0},
			} {
				name := fmt.Sprintf("%s/%d", c.name, size)
				b := build(size, c.stream, c.after)
				img, err := decodePNG(b)
				if (err == nil) != c.ok {
					t.Fatalf("%s: %v", name, err)
				}
				Recycle(img)
				Recycle(checkAgainstStd(t, name, b))
			}
		}
	})
}

func TestRecycle(t *testing.T) {
	imgs := testImages()
	a := encodings(t, imgs["noise-nrgba-257x5"])["image/png-0"]
	b := encodings(t, imgs["gradient-nrgba-257x5"])["image/png-0"]
	wantB, _ := png.Decode(bytes.NewReader(b))
	// sync.Pool may drop what it is given (the race detector makes it drop
	// a quarter at random), so reuse is asserted over several tries.
	reused := false
	for range 50 {
		first, err := decodePNG(a)
		if err != nil {
			t.Fatal(err)
		}
		p := &first.(*image.NRGBA).Pix[0]
		Recycle(first)
		Recycle(first) // a second call is a no-op
		second, err := decodePNG(b)
		if err != nil {
			t.Fatal(err)
		}
		sameDecode(t, "after recycle", second, wantB)
		reused = reused || &second.(*image.NRGBA).Pix[0] == p
		third, err := decodePNG(b)
		if err != nil {
			t.Fatal(err)
		}
		if &third.(*image.NRGBA).Pix[0] == &second.(*image.NRGBA).Pix[0] {
			t.Fatal("a buffer recycled twice was handed out twice")
		}
		Recycle(second)
		Recycle(third)
	}
	if !reused {
		t.Fatal("the recycled buffer was never reused")
	}

	// Images the pool did not hand out are left alone.
	other := image.NewNRGBA(image.Rect(0, 0, 257, 5))
	Recycle(other)
	if got, _ := decodePNG(b); &got.(*image.NRGBA).Pix[0] == &other.Pix[0] {
		t.Fatal("Recycle pooled a foreign image")
	}
	Recycle(nil)
	Recycle(image.NewGray(image.Rect(0, 0, 1, 1)))
}

func TestRecycleAfterFailedDecode(t *testing.T) {
	imgs := testImages()
	good := encodings(t, imgs["noise-nrgba-257x5"])["image/png-0"]
	want, _ := png.Decode(bytes.NewReader(good))
	// Same size, the last row's data cut short by a stream that ends
	// early: the buffer gets four rows of other pixels before failing.
	rows := bytes.Clone(imgs["gradient-nrgba-257x5"].(*image.NRGBA).Pix[:4*257*4])
	short := filteredPNG(257, 4, ctRGBA, 4, rows, nil, []uint8{ftNone})
	short = rechunk(t, short, func(typ string, data []byte) []byte {
		if typ == "IHDR" {
			binary.BigEndian.PutUint32(data[4:], 5)
		}
		return data
	})
	failedReused := false
	for range 50 {
		img, err := decodePNG(good)
		if err != nil {
			t.Fatal(err)
		}
		p := &img.(*image.NRGBA).Pix[0]
		Recycle(img)
		bad, err := decodePNG(short)
		if err == nil || bad != nil {
			t.Fatalf("short stream: %v, %v", bad, err)
		}
		// The failed decode put its buffer back; the next decode overwrites
		// it whole.
		img, err = decodePNG(good)
		if err != nil {
			t.Fatal(err)
		}
		sameDecode(t, "after a failed decode", img, want)
		failedReused = failedReused || &img.(*image.NRGBA).Pix[0] == p
		Recycle(img)
	}
	if !failedReused {
		t.Fatal("the buffer of the failed decode never came back")
	}
}

func TestAdler32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, 40000)
	for i := range buf {
		buf[i] = uint8(rng.Uint32())
	}
	ones := bytes.Repeat([]byte{0xff}, 40000) // the largest sums
	for _, b := range [][]byte{buf, ones} {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 5503, 5504, 5551, 5552, 5553, 5559, 11104, 11111, 40000} {
			if got, want := adler32Update(1, b[:n]), adler32.Checksum(b[:n]); got != want {
				t.Fatalf("%d bytes: %08x, want %08x", n, got, want)
			}
			// In pieces, as rows come.
			sum := uint32(1)
			for p := b[:n]; len(p) > 0; {
				k := min(len(p), 1+rng.IntN(4100))
				sum, p = adler32Update(sum, p[:k]), p[k:]
			}
			if want := adler32.Checksum(b[:n]); sum != want {
				t.Fatalf("%d bytes in pieces: %08x, want %08x", n, sum, want)
			}
		}
	}
}

func BenchmarkAdler32(b *testing.B) {
	buf := make([]byte, 4097)
	for i := range buf {
		buf[i] = uint8(i * 7)
	}
	b.Run("hash-adler32", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			adler32.Checksum(buf)
		}
	})
	b.Run("lanes", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			adler32Update(1, buf)
		}
	})
}

// FuzzDecodePNG: decodePNG never panics, decodes only what image/png
// decodes, to the same image, and refuses only what image/png refuses.
//
//	go test ./module/imaging/ -run '^$' -fuzz FuzzDecodePNG -fuzztime 60s
func FuzzDecodePNG(f *testing.F) {
	imgs := testImages()
	for _, name := range []string{"noise-nrgba-3x7", "gradient-rgb-3x7", "paletted-alpha=true-3x7",
		"paletted-alpha=false-1x1", "gray-3x7", "flat-nrgba-64x64"} {
		for _, b := range encodings(f, imgs[name]) {
			f.Add(b)
		}
	}
	pal := []color.NRGBA{{1, 2, 3, 4}, {5, 6, 7, 8}}
	f.Add(filteredPNG(3, 5, ctPalette, 1, []byte{0, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0}, pal, []uint8{0, 1, 2, 3, 4}))
	f.Add(filteredPNG(2, 5, ctRGB, 3, bytes.Repeat([]byte{9, 200, 31}, 10), nil, []uint8{4, 3, 2, 1, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Decode checks the size first; so does this, to keep allocations
		// of both decoders small.
		cfg, err := png.DecodeConfig(bytes.NewReader(b))
		if err != nil || cfg.Width*cfg.Height > 1<<16 {
			return
		}
		// As is, and with every CRC made right: mutations rarely keep a
		// CRC valid, and past the CRCs are the interesting parts.
		for i, b := range [][]byte{b, fixCRCs(b)} {
			img, err := decodePNG(b)
			if err != nil && img != nil {
				t.Fatal("an image with an error")
			}
			Recycle(img)
			if !errors.Is(err, errNotHandled) {
				Recycle(checkAgainstStd(t, fmt.Sprint("fuzz ", i), b))
			}
		}
	})
}

// fixCRCs returns a copy of a PNG with the CRC of every whole chunk set
// to match its type and data.
func fixCRCs(b []byte) []byte {
	b = bytes.Clone(b)
	for p := len(pngMagic); p+12 <= len(b); {
		n := binary.BigEndian.Uint32(b[p:])
		if uint64(len(b)-p-12) < uint64(n) {
			break
		}
		end := p + 8 + int(n)
		binary.BigEndian.PutUint32(b[end:], crc32.ChecksumIEEE(b[p+4:end]))
		p = end + 4
	}
	return b
}

// BenchmarkDecodePNG compares image/png with decodePNG (Recycle after
// each decode, as the cache does) on the MapServer metatiles.
//
//	go test ./module/imaging/ -run '^$' -bench 'BenchmarkDecodePNG$'
func BenchmarkDecodePNG(b *testing.B) {
	bodies := mapserverBodies(b)
	for _, name := range []string{"polygons-z3-0-0.png", "polygons-z4-m45-0.png", "polygons-z5-0-22.5.png",
		"population-z4-m45-0.png", "all-layers-z5-0-22.5.png"} {
		body := bodies[name]
		b.Run(name+"/image-png", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(4 << 20)
			for b.Loop() {
				if _, err := png.Decode(bytes.NewReader(body)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/pooled", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(4 << 20)
			for b.Loop() {
				img, err := decodePNG(body)
				if err != nil {
					b.Fatal(err)
				}
				Recycle(img)
			}
		})
	}
}
