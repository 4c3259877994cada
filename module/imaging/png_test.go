package imaging

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"
)

// encoderCases are every setting the encoder can run with: the public
// ones and the internal strategies behind them, so each code path is
// checked for losslessness on its own.
var encoderCases = []struct {
	name string
	set  pngSettings
}{
	{"fast", mustSettings(PNGFast)},
	{"default", mustSettings(PNGDefault)},
	{"best", mustSettings(PNGBest)},
	{"none-L1", pngSettings{flatLevel: 1, toneLevel: 1, filter: filterNone}},
	{"up-L5", pngSettings{flatLevel: 5, toneLevel: 5, filter: filterUp}},
	{"adaptive-L6", pngSettings{flatLevel: 6, toneLevel: 6, filter: filterAdaptive}},
	{"trial-L3", pngSettings{flatLevel: 3, toneLevel: 2, filter: filterTrial}},
	{"estimate-truecolor", pngSettings{flatLevel: 7, toneLevel: 6, filter: filterEstimate, trueColor: true}},
	{"adaptive-truecolor", pngSettings{flatLevel: 4, toneLevel: 4, filter: filterAdaptive, trueColor: true}},
}

// pngInfo is what a PNG's header says.
type pngInfo struct {
	w, h             int
	depth, colorType int
	chunks           []string
}

// parsePNG walks the chunks, checking lengths and CRCs, which image/png
// checks too but reports less precisely.
func parsePNG(t testing.TB, b []byte) pngInfo {
	t.Helper()
	if !bytes.HasPrefix(b, pngMagic) {
		t.Fatalf("no PNG signature: % x", b[:min(len(b), 8)])
	}
	var info pngInfo
	for p := b[8:]; len(p) > 0; {
		if len(p) < 12 {
			t.Fatalf("truncated chunk: % x", p)
		}
		n := int(binary.BigEndian.Uint32(p))
		if len(p) < 12+n {
			t.Fatalf("chunk %q of %d bytes overruns the file", p[4:8], n)
		}
		typ, data := string(p[4:8]), p[8:8+n]
		if got, want := binary.BigEndian.Uint32(p[8+n:]), crc32.ChecksumIEEE(p[4:8+n]); got != want {
			t.Fatalf("chunk %s: CRC %08x, want %08x", typ, got, want)
		}
		if typ == "IHDR" {
			info.w, info.h = int(binary.BigEndian.Uint32(data)), int(binary.BigEndian.Uint32(data[4:]))
			info.depth, info.colorType = int(data[8]), int(data[9])
		}
		info.chunks = append(info.chunks, typ)
		p = p[12+n:]
	}
	if len(info.chunks) == 0 || info.chunks[0] != "IHDR" || info.chunks[len(info.chunks)-1] != "IEND" {
		t.Fatalf("chunks %v", info.chunks)
	}
	return info
}

// roundTrip encodes tile with set, decodes it with image/png and checks
// every pixel (as NRGBA; fully transparent pixels compare equal whatever
// their colour bytes) and the header against the tile.
func roundTrip(t testing.TB, tile image.Image, set pngSettings) pngInfo {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("prefix")
	if err := encodePNG(&buf, tile, set); err != nil {
		t.Fatalf("encode %T %v: %v", tile, tile.Bounds(), err)
	}
	if !strings.HasPrefix(buf.String(), "prefix") {
		t.Fatal("dst overwritten")
	}
	enc := buf.Bytes()[len("prefix"):]
	info := parsePNG(t, enc)
	out, err := png.Decode(bytes.NewReader(enc))
	if err != nil {
		t.Fatalf("image/png cannot decode %T %v (colour type %d): %v", tile, tile.Bounds(), info.colorType, err)
	}
	b := tile.Bounds()
	if info.w != b.Dx() || info.h != b.Dy() || out.Bounds() != image.Rect(0, 0, b.Dx(), b.Dy()) {
		t.Fatalf("IHDR %dx%d, decoded %v, tile %v", info.w, info.h, out.Bounds(), b)
	}
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			want := color.NRGBAModel.Convert(tile.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			got := color.NRGBAModel.Convert(out.At(x, y)).(color.NRGBA)
			if want != got && !(want.A == 0 && got.A == 0) {
				t.Fatalf("%T %v colour type %d: pixel (%d,%d) = %v, want %v", tile, b, info.colorType, x, y, got, want)
			}
		}
	}
	// The decoder's type must match the colour type claimed.
	switch out.(type) {
	case *image.Paletted:
		if info.colorType != ctPalette {
			t.Errorf("decoded paletted from colour type %d", info.colorType)
		}
	case *image.RGBA:
		if info.colorType != ctRGB {
			t.Errorf("decoded RGBA from colour type %d", info.colorType)
		}
	case *image.NRGBA:
		// RGBA, or gray with a transparent level (tRNS).
		if info.colorType != ctRGBA && info.colorType != ctGray {
			t.Errorf("decoded NRGBA from colour type %d", info.colorType)
		}
	case *image.Gray:
		if info.colorType != ctGray {
			t.Errorf("decoded Gray from colour type %d", info.colorType)
		}
	}
	return info
}

// withMargin copies m into a larger image of the same type, at origin
// (-13, 29) plus a 3-pixel margin of another colour, and returns the
// sub-image holding m's pixels: a tile as Slice makes it, with a stride
// wider than the tile and a non-zero origin.
func withMargin(m image.Image) image.Image {
	b := m.Bounds()
	r := image.Rect(0, 0, b.Dx()+6, b.Dy()+6).Add(image.Pt(-13, 29))
	var big draw.Image
	switch m := m.(type) {
	case *image.RGBA:
		big = image.NewRGBA(r)
	case *image.NRGBA:
		big = image.NewNRGBA(r)
	case *image.Gray:
		big = image.NewGray(r)
	case *image.Paletted:
		big = image.NewPaletted(r, m.Palette)
	default:
		panic(fmt.Sprintf("%T", m))
	}
	if p, ok := big.(*image.Paletted); ok {
		for i := range p.Pix {
			p.Pix[i] = uint8(i % len(p.Palette))
		}
	} else {
		draw.Draw(big, r, image.NewUniform(color.NRGBA{200, 10, 99, 77}), image.Point{}, draw.Src)
	}
	inner := image.Rect(3, 3, 3+b.Dx(), 3+b.Dy()).Add(r.Min)
	draw.Draw(big, inner, m, b.Min, draw.Src)
	return big.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(inner)
}

func uniformNRGBA(w, h int, c color.NRGBA) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.Draw(m, m.Rect, image.NewUniform(c), image.Point{}, draw.Src)
	return m
}

func gradient(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / max(1, w-1)), uint8(y * 255 / max(1, h-1)), uint8((x + y) / 3), 255})
		}
	}
	return m
}

// Colour types the encoder must choose.
const (
	wantGray1    = 1 << iota // uniform black, white or transparent: 1-bit gray
	wantPal1                 // uniform other colour: 1-bit one-entry palette
	wantPaletted             // ≤ 256 colours
	wantRGB                  // opaque, > 256 colours
	wantRGBA                 // translucent, > 256 colours
	wantGray8                // gray source
)

func classify(info pngInfo) int {
	switch {
	case info.colorType == ctGray && info.depth == 1:
		return wantGray1
	case info.colorType == ctPalette && info.depth == 1 && info.chunks[1] == "PLTE":
		// also a 2-colour tile; the caller knows which it built
		return wantPal1 | wantPaletted
	case info.colorType == ctPalette:
		return wantPaletted
	case info.colorType == ctRGB:
		return wantRGB
	case info.colorType == ctRGBA:
		return wantRGBA
	case info.colorType == ctGray && info.depth == 8:
		return wantGray8
	}
	return 0
}

func TestPNGRoundTrip(t *testing.T) {
	aa := renderMap(256, 256, 16, 11) // antialiased: > 256 colours
	flat := renderMap(256, 256, 1, 11)
	translucent := image.NewNRGBA(image.Rect(0, 0, 256, 256))
	for y := range 256 {
		for x := range 256 {
			translucent.SetNRGBA(x, y, color.NRGBA{uint8(x * 3), uint8(y * 5), uint8(x ^ y), uint8(x + y)})
		}
	}
	premul := image.NewRGBA(translucent.Rect)
	draw.Draw(premul, premul.Rect, translucent, image.Point{}, draw.Src)
	fewAlpha := image.NewNRGBA(image.Rect(0, 0, 200, 120))
	for y := range 120 {
		for x := range 200 {
			c := color.NRGBA{uint8(x / 20 * 25), 80, uint8(y / 20 * 40), uint8(255 - x/50*60)}
			if (x+y)%7 == 0 {
				c = color.NRGBA{uint8(x), uint8(y), 9, 0} // transparent, stray colour bytes
			}
			fewAlpha.SetNRGBA(x, y, c)
		}
	}
	fewAlphaPremul := image.NewRGBA(fewAlpha.Rect)
	draw.Draw(fewAlphaPremul, fewAlphaPremul.Rect, fewAlpha, image.Point{}, draw.Src)
	// A paletted source: 256 entries, some translucent, duplicates, most
	// unused by any one tile.
	pal := make(color.Palette, 256)
	for i := range pal {
		pal[i] = color.NRGBA{uint8(i), uint8(255 - i), uint8(i * 7), uint8(min(255, i*4))}
	}
	pal[200] = pal[100]
	paletted := image.NewPaletted(image.Rect(0, 0, 256, 256), pal)
	for i := range paletted.Pix {
		paletted.Pix[i] = uint8(100 + (i/256/40)*20 + (i%256)/40)
	}
	palettedTwo := image.NewPaletted(image.Rect(0, 0, 77, 33), pal)
	for i := range palettedTwo.Pix {
		palettedTwo.Pix[i] = uint8(3 + i%2*50)
	}
	gray := image.NewGray(aa.Rect)
	draw.Draw(gray, gray.Rect, aa, image.Point{}, draw.Src)
	transparentBytes := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	for i := range transparentBytes.Pix {
		if i%4 != 3 {
			transparentBytes.Pix[i] = uint8(i) // alpha stays 0
		}
	}

	for _, tc := range []struct {
		name string
		src  image.Image
		want int // allowed classes
	}{
		{"opaque > 256 colours", aa, wantRGB},
		{"opaque few colours", flat, wantPaletted},
		{"translucent > 256 colours", translucent, wantRGBA},
		{"premultiplied translucent > 256 colours", premul, wantRGBA},
		{"partially transparent few colours", fewAlpha, wantPaletted},
		{"premultiplied partially transparent few colours", fewAlphaPremul, wantPaletted},
		{"gradient", gradient(256, 256), wantRGB},
		{"hillshade", hillshade(256, 256, 5), wantRGB},
		{"smooth relief", relief(256, 256, 5, 16), wantRGB | wantPaletted},
		{"map over relief", topoMap(256, 256, 5), wantRGB},
		{"paletted", paletted, wantPaletted},
		{"paletted two colours", palettedTwo, wantPaletted},
		{"gray", gray, wantGray8},
		{"uniform opaque", uniformNRGBA(256, 256, color.NRGBA{170, 211, 223, 255}), wantPal1},
		{"uniform translucent", uniformNRGBA(256, 256, color.NRGBA{170, 211, 223, 99}), wantPal1},
		{"uniform black", uniformNRGBA(256, 256, color.NRGBA{0, 0, 0, 255}), wantGray1},
		{"uniform white odd size", uniformNRGBA(13, 7, color.NRGBA{255, 255, 255, 255}), wantGray1},
		{"uniform transparent", uniformNRGBA(256, 256, color.NRGBA{}), wantGray1},
		{"transparent with colour bytes", transparentBytes, wantGray1},
		{"uniform gray", image.NewGray(image.Rect(0, 0, 30, 30)), wantGray1},
		{"one pixel", uniformNRGBA(1, 1, color.NRGBA{1, 2, 3, 4}), wantPal1},
		{"one column", gradient(1, 300), wantPaletted | wantRGB},
		{"odd size", gradient(37, 19), wantPaletted | wantRGB},
	} {
		for _, ec := range encoderCases {
			for _, sub := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/sub-image=%v", tc.name, ec.name, sub)
				t.Run(name, func(t *testing.T) {
					tile := tc.src
					if sub {
						tile = withMargin(tile)
					}
					got := classify(roundTrip(t, tile, ec.set))
					want := tc.want
					_, isPaletted := tc.src.(*image.Paletted)
					if ec.set.trueColor && want&wantPaletted != 0 && !isPaletted {
						want = wantRGB | wantRGBA
					}
					if got&want == 0 {
						t.Errorf("colour class %b, want one of %b", got, want)
					}
				})
			}
		}
	}
}

// TestPNGPaletteDepth checks the bit depth follows the number of colours
// and that the palette holds exactly the colours used.
func TestPNGPaletteDepth(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 16, 17, 255, 256} {
		m := image.NewNRGBA(image.Rect(0, 0, 50, 41))
		for i := 0; i < 50*41; i++ {
			k := i % n
			m.Pix[4*i], m.Pix[4*i+1], m.Pix[4*i+2], m.Pix[4*i+3] = uint8(k), uint8(k*3), 7, uint8(255-k%3)
		}
		var buf bytes.Buffer
		if err := encodePNG(&buf, m, mustSettings(PNGDefault)); err != nil {
			t.Fatal(err)
		}
		info := parsePNG(t, buf.Bytes())
		wantDepth := map[bool]int{true: 1}[n <= 2]
		switch {
		case n <= 2:
		case n <= 4:
			wantDepth = 2
		case n <= 16:
			wantDepth = 4
		default:
			wantDepth = 8
		}
		if info.colorType != ctPalette || info.depth != wantDepth {
			t.Errorf("%d colours: colour type %d depth %d, want 3 and %d", n, info.colorType, info.depth, wantDepth)
		}
		out, err := png.Decode(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(out.(*image.Paletted).Palette); got != n {
			t.Errorf("%d colours: palette of %d", n, got)
		}
	}
}

// TestPNGTRNSShort checks translucent entries come first, so tRNS holds
// only them.
func TestPNGTRNSShort(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 40, 10))
	for i := 0; i < 400; i++ {
		a := uint8(255)
		if i%40 == 39 {
			a = 128
		}
		m.SetNRGBA(i%40, i/40, color.NRGBA{uint8(i % 40), 1, 2, a})
	}
	var buf bytes.Buffer
	if err := encodePNG(&buf, m, mustSettings(PNGDefault)); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := bytes.Index(b, []byte("tRNS"))
	if i < 4 {
		t.Fatal("no tRNS")
	}
	if n := binary.BigEndian.Uint32(b[i-4:]); n != 1 {
		t.Errorf("tRNS has %d entries, want 1", n)
	}
	roundTrip(t, m, mustSettings(PNGDefault))
}

func TestPNGUniformMemo(t *testing.T) {
	c := color.NRGBA{12, 34, 56, 255}
	m := uniformNRGBA(96, 80, c)
	var a, b bytes.Buffer
	if err := encodePNG(&a, m, mustSettings(PNGFast)); err != nil {
		t.Fatal(err)
	}
	uniformMemo.RLock()
	memo, ok := uniformMemo.m[uniformKey{packNRGBA(12, 34, 56, 255), 96, 80}]
	uniformMemo.RUnlock()
	if !ok || !bytes.Equal(memo, a.Bytes()) {
		t.Fatal("uniform tile not memoised")
	}
	// Any setting, any source type of the same colour and size: the same
	// bytes.
	premul := image.NewRGBA(m.Rect)
	draw.Draw(premul, premul.Rect, m, image.Point{}, draw.Src)
	if err := encodePNG(&b, withMargin(premul), mustSettings(PNGBest)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("same uniform tile encoded differently")
	}
	if a.Len() > 100 {
		t.Errorf("uniform 96x80 tile is %d bytes", a.Len())
	}
	// The memo stays bounded however many colours it meets.
	for i := range uniformMemoMax + 10 {
		var buf bytes.Buffer
		writeUniform(&buf, packNRGBA(uint8(i), uint8(i>>8), 1, 255), 3, 3)
	}
	uniformMemo.RLock()
	n := len(uniformMemo.m)
	uniformMemo.RUnlock()
	if n > uniformMemoMax {
		t.Errorf("memo holds %d entries", n)
	}
}

// TestPNGEstimateOnRealTiles pins the estimate's verdicts on the content
// it was tuned on: unfiltered rows for MapServer's fills and edges, Up for
// shaded relief.
func TestPNGEstimateOnRealTiles(t *testing.T) {
	hint := func(tile image.Image) filterHint {
		n := toNRGBA(tile)
		st := scan4(n.Pix, n.Stride, n.Rect.Dx(), n.Rect.Dy())
		return chooseFilter(st.tone, n.Rect.Dx()*n.Rect.Dy())
	}
	for _, set := range benchSets() {
		var want filterHint
		switch {
		case strings.HasPrefix(set.name, "mapserver-"), set.name == "synthetic-aa-polygons", set.name == "synthetic-topo":
			want = hintNone
		case set.name == "synthetic-hillshade":
			want = hintFilter
		default:
			continue
		}
		for i, tile := range set.tiles {
			if got := hint(tile); got != want {
				t.Errorf("%s tile %d: hint %d, want %d", set.name, i, got, want)
			}
		}
	}
}

func TestParsePNGCompression(t *testing.T) {
	for in, want := range map[string]PNGCompression{
		"fast": PNGFast, "default": PNGDefault, "best": PNGBest, "": PNGDefault, " Best ": PNGBest, "FAST": PNGFast,
	} {
		got, err := ParsePNGCompression(in)
		if err != nil || got != want {
			t.Errorf("ParsePNGCompression(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"fastest", "9", "none", "default,"} {
		if got, err := ParsePNGCompression(in); err == nil {
			t.Errorf("ParsePNGCompression(%q) = %v, want error", in, got)
		}
	}
	var zero PNGCompression
	if zero != PNGDefault || zero.String() != "default" {
		t.Errorf("zero value is %q", zero)
	}
	type cfg struct {
		C PNGCompression `json:"c"`
	}
	for _, c := range []PNGCompression{PNGFast, PNGDefault, PNGBest} {
		b, err := json.Marshal(cfg{c})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"c":%q}`, c); string(b) != want {
			t.Errorf("JSON %s, want %s", b, want)
		}
		var back cfg
		if err := json.Unmarshal(b, &back); err != nil || back.C != c {
			t.Errorf("JSON round trip of %v: %v, %v", c, back.C, err)
		}
	}
	var back cfg
	if err := json.Unmarshal([]byte(`{"c":"smallest"}`), &back); err == nil {
		t.Error("JSON accepted an unknown compression")
	}
	if _, err := json.Marshal(cfg{PNGCompression(9)}); err == nil {
		t.Error("JSON marshalled an invalid compression")
	}
	// The Encoder refuses an invalid value and leaves dst alone.
	buf := bytes.NewBufferString("keep")
	if err := (&Encoder{PNG: PNGCompression(9)}).Encode(buf, gradient(8, 8), pngFormat); err == nil || buf.String() != "keep" {
		t.Errorf("invalid compression: err %v, dst %q", err, buf.String())
	}
	// The zero Encoder is the default.
	var a, b bytes.Buffer
	tile := renderMap(128, 128, 16, 3)
	if err := (&Encoder{}).Encode(&a, tile, pngFormat); err != nil {
		t.Fatal(err)
	}
	if err := (&Encoder{PNG: PNGDefault}).Encode(&b, tile, pngFormat); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("zero Encoder differs from PNGDefault")
	}
}

// TestPNGCompressionOrder checks the settings keep their promise on the
// real tiles: best no larger than default, default no larger than fast.
func TestPNGCompressionOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes every benchmark tile three times")
	}
	for _, set := range benchSets() {
		var size [3]int
		for i, c := range []PNGCompression{PNGFast, PNGDefault, PNGBest} {
			e := Encoder{PNG: c}
			for _, tile := range set.tiles {
				var buf bytes.Buffer
				if err := e.Encode(&buf, tile, pngFormat); err != nil {
					t.Fatal(err)
				}
				size[i] += buf.Len()
			}
		}
		if !(size[2] <= size[1] && size[1] <= size[0]) {
			t.Errorf("%s: fast %d, default %d, best %d bytes", set.name, size[0], size[1], size[2])
		}
	}
}

// ---------------------------------------------------------------- filters

// unfilter is the decoder's side of PNG filtering (PNG spec §9),
// written plainly as the reference for the encoder's filters.
func unfilter(ft uint8, f, prev []byte, bpp int) []byte {
	out := make([]byte, len(f))
	for i := range f {
		var a, b, c int
		if i >= bpp {
			a, c = int(out[i-bpp]), int(prev[i-bpp])
		}
		b = int(prev[i])
		var pred int
		switch ft {
		case ftSub:
			pred = a
		case ftUp:
			pred = b
		case ftAverage:
			pred = (a + b) / 2
		case ftPaeth:
			p := a + b - c
			pa, pb, pc := max(p-a, a-p), max(p-b, b-p), max(p-c, c-p)
			switch {
			case pa <= pb && pa <= pc:
				pred = a
			case pb <= pc:
				pred = b
			default:
				pred = c
			}
		}
		out[i] = f[i] + uint8(pred)
	}
	return out
}

func TestPNGFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bpp := range []int{1, 3, 4} {
		for _, n := range []int{1, 3, 4, 7, 8, 9, 15, 16, 17, 100, 767, 1024} {
			if n%bpp != 0 {
				continue
			}
			cur, prev, out := make([]byte, n), make([]byte, n), make([]byte, n)
			for round := range 20 {
				for i := range cur {
					if round%2 == 0 {
						cur[i], prev[i] = uint8(rng.Uint32()), uint8(rng.Uint32())
					} else { // smooth rows, where small residuals matter
						cur[i], prev[i] = uint8(128+i/3+rng.IntN(3)), uint8(127+i/3+rng.IntN(3))
					}
				}
				for ft := uint8(ftNone); ft <= ftPaeth; ft++ {
					applyFilter(out, cur, prev, bpp, ft)
					if ft == ftNone {
						if !bytes.Equal(out, cur) {
							t.Fatal("None changed the row")
						}
						continue
					}
					if back := unfilter(ft, out, prev, bpp); !bytes.Equal(back, cur) {
						t.Fatalf("filter %d bpp %d n %d: row does not round-trip", ft, bpp, n)
					}
				}
				want := 0
				for _, c := range cur {
					want += max(int(int8(c)), -int(int8(c)))
				}
				if got := absSum(cur); got != want {
					t.Fatalf("absSum = %d, want %d", got, want)
				}
			}
		}
	}
	// absSum's 16-bit lanes across many words, worst case: all 0x80.
	big := bytes.Repeat([]byte{0x80}, 8*300+5)
	if got := absSum(big); got != 128*len(big) {
		t.Errorf("absSum of %d × 0x80 = %d", len(big), got)
	}
}

func TestPNGSWAR(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		x, y := rng.Uint64(), rng.Uint64()
		if rng.IntN(4) == 0 {
			y = x ^ (rng.Uint64() & 0x0101010101010101) // nearly equal bytes
		}
		sub, avg := subBytes(x, y), avgBytes(x, y)
		for i := range 8 {
			a, b := uint8(x>>(8*i)), uint8(y>>(8*i))
			if got := uint8(sub >> (8 * i)); got != a-b {
				t.Fatalf("subBytes byte %d: %d - %d = %d", i, a, b, got)
			}
			if got := uint8(avg >> (8 * i)); got != uint8((int(a)+int(b))/2) {
				t.Fatalf("avgBytes byte %d: (%d + %d)/2 = %d", i, a, b, got)
			}
		}
	}
}

// TestPNGTrialPicksSmallest checks filterTrial keeps the smallest of its
// candidates, and that adaptive filtering uses several filter types.
func TestPNGTrialPicksSmallest(t *testing.T) {
	for _, m := range []*image.RGBA{renderMap(128, 128, 16, 4), hillshade(128, 128, 4)} {
		size := func(f filterStrategy) int {
			var buf bytes.Buffer
			if err := encodePNG(&buf, m, pngSettings{flatLevel: 6, toneLevel: 6, filter: f, trueColor: true}); err != nil {
				t.Fatal(err)
			}
			return buf.Len()
		}
		trial := size(filterTrial)
		if best := min(size(filterNone), size(filterUp), size(filterAdaptive)); trial != best {
			t.Errorf("trial %d bytes, smallest candidate %d", trial, best)
		}
	}
	m := hillshade(64, 64, 9)
	var rgb []byte
	for i := 0; i < len(m.Pix); i += 4 {
		rgb = append(rgb, m.Pix[i:i+3]...)
	}
	r := rowSet{pix: rgb, stride: 192, n: 192, h: 64, bpp: 3}
	raw := make([]byte, 64*193)
	adaptiveRows(raw, r, make([]byte, 192), make([]byte, 4*192))
	used := map[byte]bool{}
	for y := range 64 {
		used[raw[y*193]] = true
	}
	if len(used) < 2 {
		t.Errorf("adaptive filtering used only %v on shaded relief", used)
	}
}

// TestPNGSixteenBit: 16-bit and alpha-only tiles go to image/png, which
// keeps their precision; checked at 16 bits.
func TestPNGSixteenBit(t *testing.T) {
	r := image.Rect(0, 0, 40, 30)
	g16, n64, r64, a8, a16 := image.NewGray16(r), image.NewNRGBA64(r), image.NewRGBA64(r), image.NewAlpha(r), image.NewAlpha16(r)
	for y := range 30 {
		for x := range 40 {
			v := uint16(x*1601 + y*977)
			g16.SetGray16(x, y, color.Gray16{v})
			n64.SetNRGBA64(x, y, color.NRGBA64{v, v ^ 0x5555, uint16(x * y), 0xffff - v/3})
			a := 0xffff - v/5
			r64.SetRGBA64(x, y, color.RGBA64{min(v, a), min(v/2, a), 0, a})
			a8.SetAlpha(x, y, color.Alpha{uint8(v)})
			a16.SetAlpha16(x, y, color.Alpha16{v})
		}
	}
	for _, m := range []image.Image{g16, n64, r64, a8, a16} {
		for _, ec := range encoderCases[:3] {
			var buf bytes.Buffer
			if err := encodePNG(&buf, m, ec.set); err != nil {
				t.Fatal(err)
			}
			out, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("%T: %v", m, err)
			}
			for y := range 30 {
				for x := range 40 {
					want := color.NRGBA64Model.Convert(m.At(x, y)).(color.NRGBA64)
					got := color.NRGBA64Model.Convert(out.At(x, y)).(color.NRGBA64)
					if want != got && !(want.A == 0 && got.A == 0) {
						t.Fatalf("%T %s: pixel (%d,%d) = %v, want %v", m, ec.name, x, y, got, want)
					}
				}
			}
		}
	}
}

func TestPNGPalettedEdgeCases(t *testing.T) {
	pal := color.Palette{color.NRGBA{1, 2, 3, 255}, color.NRGBA{9, 9, 9, 0}, color.NRGBA{1, 2, 3, 255}}
	one := image.NewPaletted(image.Rect(0, 0, 20, 20), pal)
	for i := range one.Pix {
		one.Pix[i] = uint8(i % 2 * 2) // entries 0 and 2: the same colour
	}
	if got := classify(roundTrip(t, one, mustSettings(PNGDefault))); got&wantPal1 == 0 {
		t.Errorf("one colour under two indexes: class %b, want a 1-bit uniform tile", got)
	}
	transparent := image.NewPaletted(image.Rect(0, 0, 9, 9), pal)
	for i := range transparent.Pix {
		transparent.Pix[i] = 1
	}
	if got := classify(roundTrip(t, transparent, mustSettings(PNGDefault))); got != wantGray1 {
		t.Errorf("transparent paletted tile: class %b", got)
	}
	for name, m := range map[string]*image.Paletted{
		"index past the palette": {Pix: []uint8{0, 3}, Stride: 2, Rect: image.Rect(0, 0, 2, 1), Palette: pal},
		"nil palette entry":      {Pix: []uint8{0, 1}, Stride: 2, Rect: image.Rect(0, 0, 2, 1), Palette: color.Palette{pal[0], nil}},
		"no palette":             {Pix: []uint8{0, 0}, Stride: 2, Rect: image.Rect(0, 0, 2, 1)},
	} {
		buf := bytes.NewBufferString("keep")
		if err := (&Encoder{}).Encode(buf, m, pngFormat); err == nil || buf.String() != "keep" {
			t.Errorf("%s: err %v, dst %q", name, err, buf.String())
		}
	}
}

// TestPNGUniformConcurrent encodes uniform tiles of a few colours from
// several goroutines (run with -race): the memo is shared.
func TestPNGUniformConcurrent(t *testing.T) {
	want := make([][]byte, 5)
	tiles := make([]image.Image, 5)
	for i := range tiles {
		tiles[i] = uniformNRGBA(64+i, 64, color.NRGBA{uint8(40 * i), 100, 200, uint8(255 - 50*i)})
		var buf bytes.Buffer
		if err := encodePNG(&buf, tiles[i], mustSettings(PNGDefault)); err != nil {
			t.Fatal(err)
		}
		want[i] = buf.Bytes()
	}
	done := make(chan error, 8)
	for g := range 8 {
		go func() {
			var buf bytes.Buffer
			for i := range 200 {
				j := (i + g) % len(tiles)
				buf.Reset()
				if err := encodePNG(&buf, tiles[j], mustSettings(PNGFast)); err != nil {
					done <- err
					return
				}
				if !bytes.Equal(buf.Bytes(), want[j]) {
					done <- fmt.Errorf("goroutine %d: tile %d differs", g, j)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
