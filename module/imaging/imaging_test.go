package imaging

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ---------------------------------------------------------------- helpers

func mustPNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustJPEG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngIHDR returns the bit depth and colour type of an encoded PNG
// (colour type 0 gray, 2 RGB, 3 paletted, 4 gray+alpha, 6 RGBA).
func pngIHDR(t testing.TB, b []byte) (depth, colorType int) {
	t.Helper()
	if len(b) < 26 || !bytes.HasPrefix(b, pngMagic) || string(b[12:16]) != "IHDR" {
		t.Fatalf("not a PNG: % x", b[:min(len(b), 32)])
	}
	return int(b[24]), int(b[25])
}

// sameColor compares colours as PNG stores them (8-bit, not premultiplied);
// fully transparent pixels are equal whatever their colour bytes.
func sameColor(a, b color.Color) bool {
	x := color.NRGBAModel.Convert(a).(color.NRGBA)
	y := color.NRGBAModel.Convert(b).(color.NRGBA)
	if x.A == 0 && y.A == 0 {
		return true
	}
	return x == y
}

// assertSamePixels compares want and got pixel by pixel, aligning their
// top-left corners (their origins may differ).
func assertSamePixels(t *testing.T, want, got image.Image) {
	t.Helper()
	wb, gb := want.Bounds(), got.Bounds()
	if wb.Size() != gb.Size() {
		t.Fatalf("size: got %v, want %v", gb.Size(), wb.Size())
	}
	for y := 0; y < wb.Dy(); y++ {
		for x := 0; x < wb.Dx(); x++ {
			w := want.At(wb.Min.X+x, wb.Min.Y+y)
			g := got.At(gb.Min.X+x, gb.Min.Y+y)
			if !sameColor(w, g) {
				t.Fatalf("pixel (%d,%d): got %v, want %v", x, y,
					color.NRGBAModel.Convert(g), color.NRGBAModel.Convert(w))
			}
		}
	}
}

// meanAbsDiff is the mean absolute difference per RGB channel (0..255),
// comparing want flattened onto white with got.
func meanAbsDiff(want, got image.Image) float64 {
	wb, gb := want.Bounds(), got.Bounds()
	var sum float64
	for y := 0; y < wb.Dy(); y++ {
		for x := 0; x < wb.Dx(); x++ {
			r1, g1, b1, a1 := want.At(wb.Min.X+x, wb.Min.Y+y).RGBA()
			r2, g2, b2, _ := got.At(gb.Min.X+x, gb.Min.Y+y).RGBA()
			white := 0xffff - a1
			sum += math.Abs(float64(r1+white)-float64(r2)) + math.Abs(float64(g1+white)-float64(g2)) +
				math.Abs(float64(b1+white)-float64(b2))
		}
	}
	return sum / float64(3*wb.Dx()*wb.Dy()) / 257
}

func fill(m draw.Image, r image.Rectangle, c color.Color) {
	draw.Draw(m, r, image.NewUniform(c), image.Point{}, draw.Src)
}

// noSub hides SubImage, as a third-party image type might.
type noSub struct{ image.Image }

// -------------------------------------------------------------- ParseFormat

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in, mime, ext string
	}{
		{"image/png", "image/png", "png"},
		{"IMAGE/PNG", "image/png", "png"},
		{" image/png ", "image/png", "png"},
		{"image/png; mode=8bit", "image/png", "png"},
		{"image/png;mode=24bit", "image/png", "png"},
		{"image/jpeg", "image/jpeg", "jpeg"},
		{"Image/JPEG", "image/jpeg", "jpeg"},
		{"image/jpg", "image/jpeg", "jpeg"},
		{"image/png8", "image/png8", "png8"},
		{"image/vnd.jpeg-png", "image/vnd.jpeg-png", "jpeg-png"},
		{"IMAGE/VND.JPEG-PNG8", "image/vnd.jpeg-png8", "jpeg-png8"},
		{"image/webp", "image/webp", "webp"},
	} {
		f, err := ParseFormat(tc.in)
		if err != nil {
			t.Errorf("ParseFormat(%q): %v", tc.in, err)
			continue
		}
		if f.MIME != tc.mime || f.Extension() != tc.ext {
			t.Errorf("ParseFormat(%q) = %q (.%s), want %q (.%s)", tc.in, f.MIME, f.Extension(), tc.mime, tc.ext)
		}
	}
	for _, in := range []string{"", "image/gif", "image/png8; colors=64", "image/jpeg; quality=90", "text/xml",
		"application/vnd.ogc.se_xml", "png", "image/webp; quality=80", "image/pngx", "image/png 8"} {
		if f, err := ParseFormat(in); err == nil {
			t.Errorf("ParseFormat(%q) = %v, want error", in, f)
		}
	}
	if ext := (Format{}).Extension(); ext != "" {
		t.Errorf("zero Format extension %q", ext)
	}
}

// ------------------------------------------------------------------- Decode

const serviceException = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE ServiceExceptionReport SYSTEM "http://schemas.opengis.net/wms/1.1.1/WMS_exception_1_1_1.dtd">
<ServiceExceptionReport version="1.1.1">
  <ServiceException code="LayerNotDefined">
    msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter: roads
  </ServiceException>
</ServiceExceptionReport>`

func TestDecode(t *testing.T) {
	const w, h = 64, 48
	rgba := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(rgba, rgba.Rect, color.RGBA{10, 20, 30, 255})
	fill(rgba, image.Rect(5, 5, 20, 30), color.RGBA{200, 100, 0, 255})
	goodPNG := mustPNG(t, rgba)
	goodJPEG := mustJPEG(t, rgba)
	// Cutting before IEND looks like a complete image data stream but is
	// still a truncated file.
	iend := bytes.LastIndex(goodPNG, []byte("IEND")) - 4

	pass := []struct {
		name, ct string
		body     []byte
	}{
		{"png", "image/png", goodPNG},
		{"png with parameters", "image/png; mode=8bit", goodPNG},
		{"jpeg", "image/jpeg", goodJPEG},
		{"header case", "Image/PNG", goodPNG},
		{"png mislabelled as jpeg", "image/jpeg", goodPNG},
		{"jpeg mislabelled as png", "image/png", goodJPEG},
	}
	for _, tc := range pass {
		img, err := Decode(tc.ct, tc.body, w, h)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if b := img.Bounds(); b != image.Rect(0, 0, w, h) {
			t.Errorf("%s: bounds %v", tc.name, b)
		}
	}
	if img, err := Decode("image/png", goodPNG, w, h); err == nil {
		assertSamePixels(t, rgba, img)
	}

	fail := []struct {
		name, ct string
		body     []byte
		wantMsg  string // part of the error, to keep messages useful in logs
	}{
		{"wrong width", "image/png", goodPNG, "64x48, want 65x48"},
		{"wrong height", "image/jpeg", goodJPEG, "64x48, want 64x49"},
		{"ServiceException labelled image/png", "image/png", []byte(serviceException), "Invalid layer(s)"},
		{"ServiceException with BOM and blank lines", "image/png",
			append([]byte("\xef\xbb\xbf\r\n  "), serviceException...), "LAYERS parameter"},
		{"ServiceException as se_xml", "application/vnd.ogc.se_xml", []byte(serviceException), "LayerNotDefined"},
		{"ServiceException as text/xml", "text/xml; charset=UTF-8", []byte(serviceException), "text/xml"},
		{"text/xml with a PNG body", "text/xml", goodPNG, "not an image"},
		{"no content type", "", goodPNG, "not an image"},
		{"html error page", "text/html", []byte("<html><body><h1>502 Bad Gateway</h1></body></html>"), "502 Bad Gateway"},
		{"truncated png", "image/png", goodPNG[:len(goodPNG)/2], "png"},
		{"png without IEND", "image/png", goodPNG[:iend], "png"},
		{"png header only", "image/png", goodPNG[:8], "png"},
		{"truncated jpeg", "image/jpeg", goodJPEG[:len(goodJPEG)/2], "jpeg"},
		{"garbage", "image/png", []byte("\x00\x01\x02garbage, not an image at all"), "neither PNG nor JPEG"},
		{"gif", "image/gif", []byte("GIF89a\x01\x00\x01\x00"), "neither PNG nor JPEG"},
		{"empty body", "image/png", nil, "empty"},
		{"empty body, empty slice", "image/png", []byte{}, "empty"},
	}
	for _, tc := range fail {
		wantW, wantH := w, h
		switch tc.name {
		case "wrong width":
			wantW++
		case "wrong height":
			wantH++
		}
		img, err := Decode(tc.ct, tc.body, wantW, wantH)
		if err == nil {
			t.Errorf("%s: decoded %v, want error", tc.name, img.Bounds())
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.wantMsg) {
			t.Errorf("%s: error %q does not mention %q", tc.name, msg, tc.wantMsg)
		}
		if len(msg) > 300 || strings.ContainsAny(msg, "\n\r") {
			t.Errorf("%s: error not log-friendly (%d bytes): %q", tc.name, len(msg), msg)
		}
	}
}

// -------------------------------------------------------------------- Slice

var gutterColor = color.NRGBA{255, 0, 255, 255}

// tileColor is distinct per (c, r) and never the gutter colour; it stays
// within the first 256 gray levels and palette entries used below.
func tileColor(c, r int) color.NRGBA {
	return color.NRGBA{uint8(16 + 20*c), uint8(16 + 20*r), uint8(7*c + 11*r), 255}
}

// metatile builds an image of kind whose tiles are flat, distinct colours
// inside a gutter-coloured margin; origin shifts its bounds, as an image
// from elsewhere might have.
func metatile(kind string, cols, rows, tw, th int, g Gutter, origin image.Point) image.Image {
	r := image.Rect(0, 0, cols*tw+g.Left+g.Right, rows*th+g.Top+g.Bottom).Add(origin)
	var m draw.Image
	switch kind {
	case "rgba":
		m = image.NewRGBA(r)
	case "nrgba":
		m = image.NewNRGBA(r)
	case "paletted":
		pal := color.Palette{gutterColor}
		for rr := range rows {
			for c := range cols {
				pal = append(pal, tileColor(c, rr))
			}
		}
		m = image.NewPaletted(r, pal)
	case "gray":
		m = image.NewGray(r)
	default:
		panic(kind)
	}
	gutter, tile := color.Color(gutterColor), func(c, r int) color.Color { return tileColor(c, r) }
	if kind == "gray" {
		gutter, tile = grayGutter, grayTile
	}
	fill(m, r, gutter)
	for rr := range rows {
		for c := range cols {
			min := r.Min.Add(image.Pt(g.Left+c*tw, g.Top+rr*th))
			fill(m, image.Rectangle{Min: min, Max: min.Add(image.Pt(tw, th))}, tile(c, rr))
		}
	}
	return m
}

// Gray images cannot hold the colours above; these stay distinct for up to
// 4 rows and 5 columns.
var grayGutter = color.Gray{250}

func grayTile(c, r int) color.Color { return color.Gray{uint8(20 + 10*c + 50*r)} }

func TestSlice(t *testing.T) {
	layouts := []struct {
		cols, rows, tw, th int
		g                  Gutter
	}{
		{1, 1, 16, 16, Gutter{}},
		{1, 1, 16, 16, Gutter{4, 4, 4, 4}},
		{1, 1, 256, 256, Gutter{0, 10, 10, 0}},
		{4, 4, 16, 16, Gutter{}},
		{4, 4, 16, 16, Gutter{5, 5, 5, 5}},
		{4, 4, 256, 256, Gutter{32, 32, 32, 32}},
		{4, 4, 16, 16, Gutter{Left: 0, Top: 5, Right: 5, Bottom: 0}}, // at the grid's bottom-left corner
		{4, 4, 16, 16, Gutter{Left: 6, Top: 0, Right: 0, Bottom: 0}}, // a one-metatile-high grid's right end
		{3, 2, 16, 16, Gutter{}},
		{3, 2, 16, 16, Gutter{Left: 7, Top: 0, Right: 0, Bottom: 2}},
		{3, 2, 20, 12, Gutter{Left: 1, Top: 2, Right: 3, Bottom: 4}}, // non-square tiles
		{2, 3, 12, 20, Gutter{Left: 0, Top: 9, Right: 0, Bottom: 9}},
	}
	for _, kind := range []string{"rgba", "nrgba", "paletted", "gray", "nosub"} {
		for _, origin := range []image.Point{{}, {-7, 13}} {
			for _, l := range layouts {
				name := fmt.Sprintf("%s/%dx%d/%dx%dpx/%+v/origin%v", kind, l.cols, l.rows, l.tw, l.th, l.g, origin)
				t.Run(name, func(t *testing.T) {
					k := kind
					if kind == "nosub" {
						k = "nrgba"
					}
					src := metatile(k, l.cols, l.rows, l.tw, l.th, l.g, origin)
					gutter, want := color.Color(gutterColor), func(c, r int) color.Color { return tileColor(c, r) }
					if kind == "gray" {
						gutter, want = grayGutter, grayTile
					}
					if kind == "nosub" {
						src = noSub{src}
					}
					tiles, err := Slice(src, l.cols, l.rows, l.tw, l.th, l.g)
					if err != nil {
						t.Fatal(err)
					}
					if len(tiles) != l.cols*l.rows {
						t.Fatalf("%d tiles, want %d", len(tiles), l.cols*l.rows)
					}
					for r := range l.rows {
						for c := range l.cols {
							tile := tiles[r*l.cols+c]
							b := tile.Bounds()
							if b.Dx() != l.tw || b.Dy() != l.th {
								t.Fatalf("tile (%d,%d) is %v, want %dx%d", c, r, b, l.tw, l.th)
							}
							wc := want(c, r)
							for _, p := range []image.Point{b.Min, {b.Max.X - 1, b.Min.Y}, {b.Min.X, b.Max.Y - 1}, b.Max.Sub(image.Pt(1, 1))} {
								if got := tile.At(p.X, p.Y); !sameColor(got, wc) {
									t.Fatalf("tile (%d,%d) corner %v: %v, want %v", c, r, p, got, wc)
								}
							}
							for y := b.Min.Y; y < b.Max.Y; y++ {
								for x := b.Min.X; x < b.Max.X; x++ {
									if sameColor(tile.At(x, y), gutter) {
										t.Fatalf("tile (%d,%d) has gutter colour at (%d,%d)", c, r, x, y)
									}
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestSliceSharesPixels checks that tiles are views: writing to the
// metatile shows through, and the tile's Pix aliases the source's.
func TestSliceSharesPixels(t *testing.T) {
	g := Gutter{3, 2, 1, 4}
	for _, kind := range []string{"rgba", "nrgba", "paletted", "gray"} {
		src := metatile(kind, 4, 4, 16, 16, g, image.Point{})
		tiles, err := Slice(src, 4, 4, 16, 16, g)
		if err != nil {
			t.Fatal(err)
		}
		tile := tiles[2*4+1] // column 1, row 2
		min := tile.Bounds().Min
		if want := image.Pt(g.Left+16, g.Top+32); min != want {
			t.Fatalf("%s: tile origin %v, want %v", kind, min, want)
		}
		var srcPix, tilePix []uint8
		var off int
		switch s := src.(type) {
		case *image.RGBA:
			srcPix, tilePix, off = s.Pix, tile.(*image.RGBA).Pix, s.PixOffset(min.X, min.Y)
		case *image.NRGBA:
			srcPix, tilePix, off = s.Pix, tile.(*image.NRGBA).Pix, s.PixOffset(min.X, min.Y)
		case *image.Paletted:
			srcPix, tilePix, off = s.Pix, tile.(*image.Paletted).Pix, s.PixOffset(min.X, min.Y)
		case *image.Gray:
			srcPix, tilePix, off = s.Pix, tile.(*image.Gray).Pix, s.PixOffset(min.X, min.Y)
		}
		if &srcPix[off] != &tilePix[0] {
			t.Errorf("%s: tile pixels were copied", kind)
		}
		src.(draw.Image).Set(min.X+3, min.Y+4, gutterColor)
		if !sameColor(tile.At(min.X+3, min.Y+4), color.GrayModel.Convert(gutterColor)) &&
			!sameColor(tile.At(min.X+3, min.Y+4), gutterColor) {
			t.Errorf("%s: write to metatile not visible in tile", kind)
		}
	}
}

func TestSliceErrors(t *testing.T) {
	src := metatile("rgba", 4, 4, 16, 16, Gutter{2, 2, 2, 2}, image.Point{})
	for _, tc := range []struct {
		name               string
		cols, rows, tw, th int
		g                  Gutter
	}{
		{"no gutter given", 4, 4, 16, 16, Gutter{}},
		{"gutter on one side missing", 4, 4, 16, 16, Gutter{2, 2, 0, 2}},
		{"gutter too wide", 4, 4, 16, 16, Gutter{3, 2, 2, 2}},
		{"width off by one", 4, 4, 16, 16, Gutter{2, 2, 1, 2}},
		{"height off by one", 4, 4, 16, 16, Gutter{2, 2, 2, 3}},
		{"too many columns", 5, 4, 16, 16, Gutter{2, 2, 2, 2}},
		{"rows and cols swapped", 4, 3, 16, 16, Gutter{2, 2, 2, 2}},
		{"tile size", 4, 4, 17, 16, Gutter{2, 2, 2, 2}},
		{"zero cols", 0, 4, 16, 16, Gutter{2, 2, 2, 2}},
		{"zero tile height", 4, 4, 16, 0, Gutter{2, 2, 2, 2}},
		{"negative gutter", 4, 4, 16, 16, Gutter{-2, 2, 6, 2}},
		{"huge", 1 << 40, 1, 1 << 30, 16, Gutter{2, 2, 2, 2}},
	} {
		if tiles, err := Slice(src, tc.cols, tc.rows, tc.tw, tc.th, tc.g); err == nil {
			t.Errorf("%s: %d tiles, want error", tc.name, len(tiles))
		}
	}
	if _, err := Slice(nil, 1, 1, 16, 16, Gutter{}); err == nil {
		t.Error("nil image sliced")
	}
	// 3x2 layout of a 4x4-sized image must not slice either.
	if _, err := Slice(metatile("rgba", 3, 2, 16, 16, Gutter{}, image.Point{}), 2, 3, 16, 16, Gutter{}); err == nil {
		t.Error("3x2 metatile sliced as 2x3")
	}
}

// ---------------------------------------------------------------- Encode PNG

// busyTiles slices the top-left of src into 2x2 tiles of 128 px with a
// gutter, so tiles have non-zero origins.
func busyTiles(t testing.TB, src image.Image) []image.Image {
	t.Helper()
	g := Gutter{5, 3, 0, 7}
	b := src.Bounds()
	sub := src.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(image.Rect(0, 0, 2*128+g.Left+g.Right, 2*128+g.Top+g.Bottom).Add(b.Min))
	tiles, err := Slice(sub, 2, 2, 128, 128, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, tile := range tiles[1:] {
		if tile.Bounds().Min == (image.Point{}) {
			t.Fatal("expected tiles with non-zero origin")
		}
	}
	return tiles
}

func encodeDecode(t *testing.T, tile image.Image, f Format) ([]byte, image.Image) {
	t.Helper()
	var e Encoder
	var buf bytes.Buffer
	if err := e.Encode(&buf, tile, f); err != nil {
		t.Fatal(err)
	}
	out, _, err := image.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if out.Bounds() != image.Rect(0, 0, tile.Bounds().Dx(), tile.Bounds().Dy()) {
		t.Fatalf("decoded bounds %v for tile %v", out.Bounds(), tile.Bounds())
	}
	return buf.Bytes(), out
}

var pngFormat, jpegFormat = Format{MIME: mimePNG}, Format{MIME: mimeJPEG}

func TestEncodePNGRoundTrip(t *testing.T) {
	aaMap := renderMap(320, 320, 16, 1)  // antialiased: often > 256 colours per tile
	flatMap := renderMap(320, 320, 1, 1) // no antialiasing: few colours

	translucent := image.NewNRGBA(image.Rect(0, 0, 320, 320))
	for y := range 320 {
		for x := range 320 {
			translucent.Pix[translucent.PixOffset(x, y)+0] = uint8(x * 3)
			translucent.Pix[translucent.PixOffset(x, y)+1] = uint8(y * 5)
			translucent.Pix[translucent.PixOffset(x, y)+2] = uint8(x ^ y)
			translucent.Pix[translucent.PixOffset(x, y)+3] = uint8(x + y)
		}
	}
	translucentRGBA := image.NewRGBA(translucent.Rect)
	draw.Draw(translucentRGBA, translucentRGBA.Rect, translucent, image.Point{}, draw.Src)

	// Few colours with alpha, and transparent pixels with different colour
	// bytes, as renderers leave them.
	fewAlpha := image.NewNRGBA(image.Rect(0, 0, 320, 320))
	for y := range 320 {
		for x := range 320 {
			c := color.NRGBA{uint8(x / 16 * 20), 80, uint8(y / 16 * 20), uint8(255 - (x/32)*60)}
			if (x+y)%7 == 0 {
				c = color.NRGBA{uint8(x), uint8(y), 0, 0}
			}
			fewAlpha.SetNRGBA(x, y, c)
		}
	}
	fewAlphaRGBA := image.NewRGBA(fewAlpha.Rect)
	draw.Draw(fewAlphaRGBA, fewAlphaRGBA.Rect, fewAlpha, image.Point{}, draw.Src)

	pal := make(color.Palette, 0, 256)
	for i := range 256 {
		pal = append(pal, color.NRGBA{uint8(i), uint8(255 - i), uint8(i * 7), uint8(min(255, i*4))})
	}
	paletted := image.NewPaletted(image.Rect(0, 0, 320, 320), pal)
	for i := range paletted.Pix {
		paletted.Pix[i] = uint8((i/320/20)*16 + (i%320)/40) // some of the 256 entries per tile, some translucent
	}
	palettedWeb := image.NewPaletted(aaMap.Rect, palette.WebSafe)
	draw.Draw(palettedWeb, palettedWeb.Rect, aaMap, image.Point{}, draw.Src)

	gray := image.NewGray(aaMap.Rect)
	draw.Draw(gray, gray.Rect, aaMap, image.Point{}, draw.Src)

	// PNG color types a tile of each source may come out as.
	const (
		gray8 = 1 << 0
		rgb   = 1 << 2
		pal8  = 1 << 3
		rgba  = 1 << 6
	)
	for _, tc := range []struct {
		name    string
		src     image.Image
		types   int // allowed PNG colour types (bit set)
		mustSee int // colour types some tile must have, so each path runs
	}{
		{"rgba antialiased opaque", aaMap, rgb | pal8, rgb | pal8},
		{"rgba flat opaque", flatMap, pal8, pal8},
		{"nrgba opaque", toNRGBA(aaMap), rgb | pal8, rgb | pal8},
		{"nrgba translucent", translucent, rgba, rgba},
		{"rgba translucent", translucentRGBA, rgba, rgba},
		{"nrgba few colours with alpha", fewAlpha, pal8, pal8},
		{"rgba few colours with alpha", fewAlphaRGBA, pal8, pal8},
		{"paletted", paletted, pal8, pal8},
		{"paletted websafe", palettedWeb, pal8, pal8},
		{"gray", gray, gray8, gray8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := 0
			for i, tile := range busyTiles(t, tc.src) {
				enc, out := encodeDecode(t, tile, pngFormat)
				assertSamePixels(t, tile, out)
				depth, ct := pngIHDR(t, enc)
				seen |= 1 << ct
				if tc.types&(1<<ct) == 0 {
					t.Errorf("tile %d: PNG colour type %d", i, ct)
				}
				if ct == 3 {
					if _, ok := out.(*image.Paletted); !ok {
						t.Errorf("tile %d: decoded as %T", i, out)
					}
				}
				if depth != 8 && ct != 3 {
					t.Errorf("tile %d: bit depth %d", i, depth)
				}
			}
			if seen&tc.mustSee != tc.mustSee {
				t.Errorf("colour types seen %b, want all of %b", seen, tc.mustSee)
			}
		})
	}

	t.Run("paletted palette trimmed", func(t *testing.T) {
		tile := busyTiles(t, paletted)[3]
		enc, out := encodeDecode(t, tile, pngFormat)
		used := map[uint8]bool{}
		p := tile.(*image.Paletted)
		for y := p.Rect.Min.Y; y < p.Rect.Max.Y; y++ {
			for x := p.Rect.Min.X; x < p.Rect.Max.X; x++ {
				used[p.ColorIndexAt(x, y)] = true
			}
		}
		if n := len(out.(*image.Paletted).Palette); n != len(used) {
			t.Errorf("palette has %d entries, tile uses %d", n, len(used))
		}
		if depth, _ := pngIHDR(t, enc); len(used) <= 16 && depth > 4 {
			t.Errorf("%d colours written with %d bits per pixel", len(used), depth)
		}
	})

	t.Run("ycbcr from a jpeg upstream", func(t *testing.T) {
		img, err := jpeg.Decode(bytes.NewReader(mustJPEG(t, aaMap)))
		if err != nil {
			t.Fatal(err)
		}
		for _, tile := range busyTiles(t, img) {
			enc, out := encodeDecode(t, tile, pngFormat)
			if depth, ct := pngIHDR(t, enc); depth != 8 || (ct != 2 && ct != 3) {
				t.Errorf("YCbCr tile written with depth %d colour type %d, want 8-bit RGB", depth, ct)
			}
			b := tile.Bounds()
			for y := 0; y < b.Dy(); y++ {
				for x := 0; x < b.Dx(); x++ {
					r1, g1, b1, _ := tile.At(b.Min.X+x, b.Min.Y+y).RGBA()
					r2, g2, b2, _ := out.At(x, y).RGBA()
					if d := max(absDiff(r1>>8, r2>>8), absDiff(g1>>8, g2>>8), absDiff(b1>>8, b2>>8)); d > 1 {
						t.Fatalf("pixel (%d,%d) off by %d", x, y, d)
					}
				}
			}
		}
	})

	t.Run("image without SubImage", func(t *testing.T) {
		tiles, err := Slice(noSub{aaMap}, 2, 2, 160, 160, Gutter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tile := range tiles {
			_, out := encodeDecode(t, tile, pngFormat)
			assertSamePixels(t, tile, out)
		}
	})

	t.Run("palettized and truecolour agree", func(t *testing.T) {
		for _, src := range []image.Image{flatMap, fewAlpha, fewAlphaRGBA} {
			for _, tile := range busyTiles(t, src) {
				var a, b bytes.Buffer
				if err := encodePNG(&a, tile, mustSettings(PNGDefault)); err != nil {
					t.Fatal(err)
				}
				if err := encodePNG(&b, tile, trueColorSettings); err != nil {
					t.Fatal(err)
				}
				if _, ct := pngIHDR(t, b.Bytes()); ct == 3 {
					t.Fatal("palettize=false produced a paletted PNG")
				}
				ia, _ := png.Decode(&a)
				ib, _ := png.Decode(&b)
				assertSamePixels(t, ib, ia)
			}
		}
	})
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

func toNRGBA(m image.Image) *image.NRGBA {
	n := image.NewNRGBA(m.Bounds())
	draw.Draw(n, n.Rect, m, m.Bounds().Min, draw.Src)
	return n
}

// TestPNGOpaqueIsRGB pins the behaviour the encoder relies on: Go's png
// writer drops the alpha channel of opaque RGBA/NRGBA images, sub-images
// included.
func TestPNGOpaqueIsRGB(t *testing.T) {
	m := renderMap(128, 128, 4, 2)
	n := toNRGBA(m)
	for _, src := range []image.Image{m, n, m.SubImage(image.Rect(17, 9, 81, 73)), n.SubImage(image.Rect(17, 9, 81, 73))} {
		var b bytes.Buffer
		if err := encodePNG(&b, src, trueColorSettings); err != nil {
			t.Fatal(err)
		}
		if _, ct := pngIHDR(t, b.Bytes()); ct != 2 {
			t.Errorf("%T opaque tile: colour type %d, want 2 (RGB)", src, ct)
		}
	}
}

// --------------------------------------------------------------- Encode JPEG

func TestEncodeJPEG(t *testing.T) {
	m := renderMap(320, 320, 4, 3)
	for _, src := range []image.Image{m, toNRGBA(m)} {
		for _, tile := range busyTiles(t, src) {
			enc, out := encodeDecode(t, tile, jpegFormat)
			if !bytes.HasPrefix(enc, jpegMagic) {
				t.Fatal("not a JPEG")
			}
			if d := meanAbsDiff(tile, out); d > 4 {
				t.Errorf("%T tile %v: mean abs diff %.2f", src, tile.Bounds(), d)
			}
		}
	}

	// Flat tiles in a gutter: a misplaced origin would bleed the gutter or a
	// neighbour's colour into the tile.
	t.Run("sub-image origin", func(t *testing.T) {
		g := Gutter{8, 16, 0, 24}
		for _, kind := range []string{"rgba", "nrgba", "paletted", "gray"} {
			src := metatile(kind, 3, 2, 64, 64, g, image.Pt(3, -5))
			tiles, err := Slice(src, 3, 2, 64, 64, g)
			if err != nil {
				t.Fatal(err)
			}
			for i, tile := range tiles {
				_, out := encodeDecode(t, tile, jpegFormat)
				if d := meanAbsDiff(tile, out); d > 1.5 {
					t.Errorf("%s tile %d %v: mean abs diff %.2f", kind, i, tile.Bounds(), d)
				}
			}
		}
	})

	t.Run("ycbcr", func(t *testing.T) {
		img, err := jpeg.Decode(bytes.NewReader(mustJPEG(t, m)))
		if err != nil {
			t.Fatal(err)
		}
		for _, tile := range busyTiles(t, img) {
			if _, ok := tile.(*image.YCbCr); !ok {
				t.Fatalf("tile is %T", tile)
			}
			_, out := encodeDecode(t, tile, jpegFormat)
			if d := meanAbsDiff(tile, out); d > 4 {
				t.Errorf("tile %v: mean abs diff %.2f", tile.Bounds(), d)
			}
		}
	})

	t.Run("alpha flattened on white", func(t *testing.T) {
		n := image.NewNRGBA(image.Rect(0, 0, 128, 128))
		fill(n, image.Rect(0, 0, 64, 128), color.NRGBA{0, 0, 0, 0})      // transparent → white
		fill(n, image.Rect(64, 0, 128, 64), color.NRGBA{255, 0, 0, 128}) // half red → pink
		fill(n, image.Rect(64, 64, 128, 128), color.NRGBA{0, 0, 255, 255})
		rgba := image.NewRGBA(n.Rect)
		draw.Draw(rgba, rgba.Rect, n, image.Point{}, draw.Src)
		pal := image.NewPaletted(n.Rect, color.Palette{color.NRGBA{0, 0, 0, 0}, color.NRGBA{255, 0, 0, 128}, color.NRGBA{0, 0, 255, 255}})
		draw.Draw(pal, pal.Rect, n, image.Point{}, draw.Src)
		for _, src := range []draw.Image{n, rgba, pal} {
			for _, tile := range gridTiles(t, src, 2, 2, 64) {
				_, out := encodeDecode(t, tile, jpegFormat)
				if d := meanAbsDiff(tile, out); d > 3 {
					t.Errorf("%T tile %v: mean abs diff %.2f", src, tile.Bounds(), d)
				}
			}
			_, out := encodeDecode(t, src, jpegFormat)
			for _, p := range []struct {
				pt      image.Point
				r, g, b uint8
			}{{image.Pt(20, 20), 255, 255, 255}, {image.Pt(100, 20), 255, 127, 127}, {image.Pt(100, 100), 0, 0, 255}} {
				r, g, b, _ := out.At(p.pt.X, p.pt.Y).RGBA()
				if absDiff(r>>8, uint32(p.r)) > 6 || absDiff(g>>8, uint32(p.g)) > 6 || absDiff(b>>8, uint32(p.b)) > 6 {
					t.Errorf("%T at %v: got %d,%d,%d, want about %d,%d,%d", src, p.pt, r>>8, g>>8, b>>8, p.r, p.g, p.b)
				}
			}
		}
	})

	t.Run("quality", func(t *testing.T) {
		tile := m.SubImage(image.Rect(10, 10, 138, 138))
		size := func(q int) int {
			var buf bytes.Buffer
			if err := (&Encoder{JPEGQuality: q}).Encode(&buf, tile, jpegFormat); err != nil {
				t.Fatal(err)
			}
			return buf.Len()
		}
		lo, def, hi := size(30), size(0), size(98)
		if !(lo < def && def < hi) || def != size(85) {
			t.Errorf("sizes q30=%d default=%d q85=%d q98=%d", lo, def, size(85), hi)
		}
		for _, q := range []int{-1, 101} {
			var buf bytes.Buffer
			if err := (&Encoder{JPEGQuality: q}).Encode(&buf, tile, jpegFormat); err == nil {
				t.Errorf("quality %d accepted", q)
			}
		}
	})
}

func gridTiles(t *testing.T, m image.Image, cols, rows, size int) []image.Image {
	t.Helper()
	tiles, err := Slice(m, cols, rows, size, size, Gutter{})
	if err != nil {
		t.Fatal(err)
	}
	return tiles
}

// ------------------------------------------------------------ Encode general

func TestEncodeAppendsAndErrors(t *testing.T) {
	m := renderMap(64, 64, 4, 4)
	var e Encoder
	for _, f := range []Format{pngFormat, jpegFormat} {
		buf := bytes.NewBufferString("prefix")
		if err := e.Encode(buf, m, f); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(buf.Bytes(), []byte("prefix")) {
			t.Fatalf("%s: dst overwritten", f.MIME)
		}
		if _, _, err := image.Decode(bytes.NewReader(buf.Bytes()[len("prefix"):])); err != nil {
			t.Fatalf("%s: appended bytes do not decode: %v", f.MIME, err)
		}
	}
	for name, tc := range map[string]struct {
		tile image.Image
		f    Format
	}{
		"zero format":   {m, Format{}},
		"gif":           {m, Format{MIME: "image/gif"}},
		"empty tile":    {m.SubImage(image.Rect(10, 10, 10, 20)), pngFormat},
		"empty jpeg":    {image.NewRGBA(image.Rect(0, 0, 0, 0)), jpegFormat},
		"nil tile":      {nil, pngFormat},
		"jpeg too wide": {image.NewGray(image.Rect(0, 0, 1<<16, 1)), jpegFormat},
		// png fails after writing its header: dst must be rolled back.
		"palette too long": {image.NewPaletted(image.Rect(0, 0, 8, 8), make(color.Palette, 300)), pngFormat},
	} {
		buf := bytes.NewBufferString("keep")
		if err := e.Encode(buf, tc.tile, tc.f); err == nil {
			t.Errorf("%s: no error", name)
		}
		if buf.String() != "keep" {
			t.Errorf("%s: dst changed to %q", name, buf.String())
		}
	}
	if err := e.Encode(nil, m, pngFormat); err == nil {
		t.Error("nil dst accepted")
	}
	var nilEnc *Encoder
	if err := nilEnc.Encode(new(bytes.Buffer), m, jpegFormat); err != nil {
		t.Errorf("nil *Encoder should use defaults: %v", err)
	}
}

// TestEncodeConcurrent checks that pooled buffers are not shared between
// concurrent calls: every output must equal the sequential one.
func TestEncodeConcurrent(t *testing.T) {
	m := renderMap(512, 512, 4, 5)
	tiles, err := Slice(m, 4, 4, 128, 128, Gutter{})
	if err != nil {
		t.Fatal(err)
	}
	flat := renderMap(512, 512, 1, 5)
	flatTiles, _ := Slice(flat, 4, 4, 128, 128, Gutter{})
	tiles = append(tiles, flatTiles...)
	var e Encoder
	want := make([][]byte, 0, 2*len(tiles))
	for _, f := range []Format{pngFormat, jpegFormat} {
		for _, tile := range tiles {
			var b bytes.Buffer
			if err := e.Encode(&b, tile, f); err != nil {
				t.Fatal(err)
			}
			want = append(want, b.Bytes())
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			var b bytes.Buffer
			for round := range 3 {
				for i := range want {
					j := (i + w*7 + round) % len(want)
					f := pngFormat
					if j >= len(tiles) {
						f = jpegFormat
					}
					b.Reset()
					if err := e.Encode(&b, tiles[j%len(tiles)], f); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(b.Bytes(), want[j]) {
						errs <- fmt.Errorf("worker %d: output %d differs", w, j)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// ----------------------------------------------------------- map rendering

// renderMap draws a deterministic street-map-like picture: land, parks,
// water, a river, buildings and cased roads. ss is the supersampling
// factor per axis: 4 gives antialiased edges like MapServer/GeoServer
// output, 1 gives hard edges with a handful of colours.
func renderMap(w, h, ss int, seed uint64) *image.RGBA {
	rng := rand.New(rand.NewPCG(seed, 42))
	type pt struct{ x, y float64 }
	type shape struct {
		pts        []pt
		col        int
		minY, maxY float64
	}
	colors := [][3]uint8{
		{242, 239, 233}, // land
		{205, 235, 176}, // park
		{173, 209, 158}, // forest
		{224, 223, 223}, // residential
		{170, 211, 223}, // water
		{217, 208, 201}, // building
		{188, 181, 173}, // building outline / casing
		{255, 255, 255}, // minor road
		{247, 250, 191}, // major road
		{232, 146, 162}, // motorway
	}
	// Feature counts follow the area, so any size has the density of a
	// 1024 px metatile at street level.
	area := float64(w*h) / (1024 * 1024)
	count := func(n int) int { return max(1, int(math.Round(float64(n)*area))) }
	const scale = 1.0
	var shapes []shape
	add := func(col int, pts ...pt) {
		s := shape{pts: pts, col: col, minY: math.Inf(1), maxY: math.Inf(-1)}
		for _, p := range pts {
			s.minY, s.maxY = min(s.minY, p.y), max(s.maxY, p.y)
		}
		shapes = append(shapes, s)
	}
	blob := func(col int, cx, cy, r float64) {
		n := 7 + rng.IntN(8)
		pts := make([]pt, n)
		for i := range pts {
			a := 2 * math.Pi * (float64(i) + rng.Float64()*0.5) / float64(n)
			rr := r * (0.6 + 0.5*rng.Float64())
			pts[i] = pt{cx + rr*math.Cos(a), cy + rr*math.Sin(a)}
		}
		add(col, pts...)
	}
	rect := func(col int, cx, cy, hw, hh, angle float64) {
		s, c := math.Sincos(angle)
		var pts []pt
		for _, d := range [][2]float64{{-hw, -hh}, {hw, -hh}, {hw, hh}, {-hw, hh}} {
			pts = append(pts, pt{cx + d[0]*c - d[1]*s, cy + d[0]*s + d[1]*c})
		}
		add(col, pts...)
	}
	line := func(col int, width float64, pts []pt) {
		for i := 1; i < len(pts); i++ {
			a, b := pts[i-1], pts[i]
			dx, dy := b.x-a.x, b.y-a.y
			l := math.Hypot(dx, dy)
			nx, ny := -dy/l*width/2, dx/l*width/2
			add(col, pt{a.x + nx, a.y + ny}, pt{b.x + nx, b.y + ny}, pt{b.x - nx, b.y - ny}, pt{a.x - nx, a.y - ny})
			rect(col, b.x, b.y, width/2, width/2, math.Atan2(dy, dx)) // fill the joint
		}
	}
	walk := func(n int, step float64) []pt {
		p := pt{rng.Float64() * float64(w), rng.Float64() * float64(h)}
		a := rng.Float64() * 2 * math.Pi
		pts := []pt{p}
		for range n {
			a += (rng.Float64() - 0.5) * 0.6
			p = pt{p.x + step*math.Cos(a), p.y + step*math.Sin(a)}
			pts = append(pts, p)
		}
		return pts
	}
	for range count(6) {
		blob(3, rng.Float64()*float64(w), rng.Float64()*float64(h), 220*scale)
	}
	for range count(5) {
		blob(1+rng.IntN(2), rng.Float64()*float64(w), rng.Float64()*float64(h), 90*scale)
	}
	for range count(2) {
		blob(4, rng.Float64()*float64(w), rng.Float64()*float64(h), 70*scale)
	}
	line(4, 14*scale, walk(40, 40*scale))
	for range count(350) {
		cx, cy := rng.Float64()*float64(w), rng.Float64()*float64(h)
		a := rng.Float64() * math.Pi
		hw, hh := (4+rng.Float64()*10)*scale, (4+rng.Float64()*7)*scale
		rect(6, cx, cy, hw+1, hh+1, a)
		rect(5, cx, cy, hw, hh, a)
	}
	var roads [][]pt
	var widths []float64
	var cols []int
	for i := range count(14) {
		width, col := 6.0, 7
		switch {
		case i < 2:
			width, col = 12, 9
		case i < 6:
			width, col = 9, 8
		}
		roads = append(roads, walk(30, 45*scale))
		widths = append(widths, width*scale)
		cols = append(cols, col)
	}
	for i, r := range roads {
		line(6, widths[i]+3*scale, r)
	}
	for i, r := range roads {
		line(cols[i], widths[i], r)
	}

	img := image.NewRGBA(image.Rect(0, 0, w, h))
	W := w * ss
	sub := make([]uint8, W)
	acc := make([][3]uint32, w)
	var xs []float64
	for y := range h {
		clear(acc)
		for sy := range ss {
			fy := float64(y) + (float64(sy)+0.5)/float64(ss)
			clear(sub) // land
			for _, s := range shapes {
				if fy < s.minY || fy >= s.maxY {
					continue
				}
				xs = xs[:0]
				for i := range s.pts {
					a, b := s.pts[i], s.pts[(i+1)%len(s.pts)]
					if (a.y <= fy) != (b.y <= fy) {
						xs = append(xs, a.x+(fy-a.y)*(b.x-a.x)/(b.y-a.y))
					}
				}
				slices.Sort(xs)
				for i := 0; i+1 < len(xs); i += 2 {
					x0 := max(0, int(math.Ceil(xs[i]*float64(ss)-0.5)))
					x1 := min(W, int(math.Ceil(xs[i+1]*float64(ss)-0.5)))
					for x := x0; x < x1; x++ {
						sub[x] = uint8(s.col)
					}
				}
			}
			for x, c := range sub {
				p := &acc[x/ss]
				p[0] += uint32(colors[c][0])
				p[1] += uint32(colors[c][1])
				p[2] += uint32(colors[c][2])
			}
		}
		n := uint32(ss * ss)
		for x, p := range acc {
			o := img.PixOffset(x, y)
			img.Pix[o+0] = uint8((p[0] + n/2) / n)
			img.Pix[o+1] = uint8((p[1] + n/2) / n)
			img.Pix[o+2] = uint8((p[2] + n/2) / n)
			img.Pix[o+3] = 255
		}
	}
	return img
}

// --------------------------------------------------------------- benchmarks

// benchMaps renders the 1024 px metatiles once: smooth is antialiased with
// 256 coverage levels like MapServer AGG or GeoServer output, coarse with 16
// levels, flat not at all (GD-style, a handful of colours).
var benchMaps = sync.OnceValue(func() (m struct{ smooth, coarse, flat *image.RGBA }) {
	m.smooth = renderMap(1024, 1024, 16, 7)
	m.coarse = renderMap(1024, 1024, 4, 7)
	m.flat = renderMap(1024, 1024, 1, 7)
	return m
})

// benchSliceEncode slices src into 4x4 tiles of 256 px and encodes each
// with enc, reporting the mean tile size and how many tiles came out
// paletted.
func benchSliceEncode(b *testing.B, src image.Image, enc func(*bytes.Buffer, image.Image) error) {
	b.ReportAllocs()
	var buf bytes.Buffer
	var total, paletted int
	for b.Loop() {
		tiles, err := Slice(src, 4, 4, 256, 256, Gutter{})
		if err != nil {
			b.Fatal(err)
		}
		total, paletted = 0, 0
		for _, tile := range tiles {
			buf.Reset()
			if err := enc(&buf, tile); err != nil {
				b.Fatal(err)
			}
			total += buf.Len()
			if bytes.HasPrefix(buf.Bytes(), pngMagic) && buf.Bytes()[25] == 3 {
				paletted++
			}
		}
	}
	b.ReportMetric(float64(total)/16, "B/tile")
	b.ReportMetric(float64(paletted), "paletted/16")
}

func productionPNG(buf *bytes.Buffer, tile image.Image) error {
	var e Encoder
	return e.Encode(buf, tile, pngFormat)
}

// BenchmarkSliceEncodePNG4x4 is the production path on an antialiased map
// metatile, as a WMS returns it in PNG24.
func BenchmarkSliceEncodePNG4x4(b *testing.B) {
	aa := benchMaps().smooth
	benchSliceEncode(b, aa, productionPNG)
}

func BenchmarkSliceEncodeJPEG4x4(b *testing.B) {
	aa := benchMaps().smooth
	benchSliceEncode(b, aa, func(buf *bytes.Buffer, tile image.Image) error {
		var e Encoder
		return e.Encode(buf, tile, jpegFormat)
	})
}

// BenchmarkDecodeMapServer decodes real 1024² metatiles of the project's
// upstream: the other half of a miss's CPU next to encoding its tiles.
func BenchmarkDecodeMapServer(b *testing.B) {
	for _, n := range []string{"polygons-z4-m45-0.png", "population-z4-m45-0.png", "all-layers-z5-0-22.5.png"} {
		body, err := os.ReadFile(filepath.Join("testdata", "mapserver", n))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode("image/png", body, 1024, 1024); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodePNG1024(b *testing.B) {
	aa := benchMaps().smooth
	body := mustPNG(b, aa)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("image/png", body, 1024, 1024); err != nil {
			b.Fatal(err)
		}
	}
}
