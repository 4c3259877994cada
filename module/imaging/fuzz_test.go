package imaging

import (
	"bytes"
	"image"
	"image/color"
	"testing"
)

// fuzzImage builds a tile from fuzz input: the first bytes choose the
// size, the pixel type, how many distinct colours it may have (so the
// uniform, paletted and truecolour paths all get their share) and the
// origin; the rest fills the pixels, repeated as needed. The tile is a
// sub-image of a larger image, as Slice makes them.
func fuzzImage(data []byte) (image.Image, pngSettings, bool) {
	if len(data) < 7 {
		return nil, pngSettings{}, false
	}
	w, h := 1+int(data[0])%48, 1+int(data[1])%48
	kind := data[2] % 4
	// 0: any bytes; else at most this many distinct pixel values.
	colours := []int{0, 1, 2, 3, 5, 16, 17, 200, 256, 257, 0, 0}[int(data[3])%12]
	set := fuzzSettings[int(data[4])%len(fuzzSettings)]
	origin := image.Pt(int(int8(data[5])), int(int8(data[6])))
	body := data[7:]
	if len(body) == 0 {
		body = []byte{0}
	}
	byteAt := func(i int) uint8 { return body[i%len(body)] }
	// value i of the image: with a colour limit, one of a few derived
	// from the body, else the body's bytes themselves.
	value := func(i, size int) []uint8 {
		v := make([]uint8, size)
		if colours == 0 {
			for j := range v {
				v[j] = byteAt(i*size + j)
			}
			return v
		}
		c := int(byteAt(i)) * 7919 % colours
		for j := range v {
			v[j] = uint8(c*(j+13)) ^ byteAt(j)
		}
		return v
	}
	full := image.Rect(0, 0, w+3, h+2).Add(origin)
	tile := image.Rect(2, 1, 2+w, 1+h).Add(origin)
	var m image.Image
	switch kind {
	case 0, 1:
		// NRGBA, or RGBA with whatever bytes (premultiplied or not: the
		// expected colours are what color.NRGBAModel makes of them).
		pix := make([]uint8, 4*full.Dx()*full.Dy())
		for i := range full.Dx() * full.Dy() {
			copy(pix[4*i:], value(i, 4))
		}
		if kind == 0 {
			m = &image.NRGBA{Pix: pix, Stride: 4 * full.Dx(), Rect: full}
		} else {
			m = &image.RGBA{Pix: pix, Stride: 4 * full.Dx(), Rect: full}
		}
	case 2:
		n := 1 + int(byteAt(0))%256
		if colours > 0 {
			n = min(n, colours)
		}
		pal := make(color.Palette, n)
		for i := range pal {
			v := value(i+1, 4)
			if v[0]%3 == 0 {
				// a premultiplied entry, valid or not
				pal[i] = color.RGBA{v[0], v[1], v[2], v[3]}
			} else {
				pal[i] = color.NRGBA{v[0], v[1], v[2], v[3]}
			}
		}
		p := image.NewPaletted(full, pal)
		for i := range p.Pix {
			p.Pix[i] = uint8(int(byteAt(i)) % n)
		}
		m = p
	case 3:
		g := image.NewGray(full)
		for i := range g.Pix {
			g.Pix[i] = value(i, 1)[0]
		}
		m = g
	}
	return m.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(tile), set, true
}

var fuzzSettings = []pngSettings{
	mustSettings(PNGFast),
	mustSettings(PNGDefault),
	mustSettings(PNGBest),
	{flatLevel: 2, toneLevel: 2, filter: filterUp},
	{flatLevel: 5, toneLevel: 5, filter: filterAdaptive},
	{flatLevel: 4, toneLevel: 3, filter: filterTrial, trueColor: true},
	{flatLevel: 7, toneLevel: 6, filter: filterEstimate, trueColor: true},
}

// FuzzPNGRoundTrip checks the encoder's promise on arbitrary tiles: the
// PNG decodes with image/png to exactly the tile's pixels.
//
//	go test ./module/imaging/ -run '^$' -fuzz FuzzPNGRoundTrip -fuzztime 2m
func FuzzPNGRoundTrip(f *testing.F) {
	for _, seed := range [][]byte{
		{16, 16, 0, 0, 1, 0, 0, 1, 2, 3, 255},     // NRGBA, any bytes
		{255, 3, 1, 9, 2, 200, 7, 0, 0, 0, 128},   // premultiplied, ≤ 257 colours
		{31, 47, 2, 4, 0, 1, 1, 9, 8, 7, 6, 5},    // paletted, ≤ 5 entries
		{7, 5, 3, 1, 5, 0, 0, 77},                 // gray, uniform
		{47, 47, 0, 1, 6, 250, 3, 0, 0, 0, 0},     // uniform transparent
		{40, 40, 1, 7, 4, 0, 0, 10, 20, 30, 40},   // 200 colours, adaptive
		{0, 0, 0, 11, 3, 0, 0, 1, 2, 3, 4, 5, 6},  // 1×1
		{47, 0, 2, 0, 1, 5, 5, 255, 255, 255, 18}, // one row, paletted
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tile, set, ok := fuzzImage(data)
		if !ok {
			return
		}
		roundTrip(t, tile, set)
		// The public entry point agrees with encodePNG for its settings.
		var a, b bytes.Buffer
		e := Encoder{PNG: PNGCompression(data[4] % 3)}
		if err := e.Encode(&a, tile, pngFormat); err != nil {
			t.Fatal(err)
		}
		s, _ := pngSettingsOf(e.PNG)
		if err := encodePNG(&b, tile, s); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("Encode and encodePNG differ")
		}
	})
}
