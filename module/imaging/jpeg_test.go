package imaging

import (
	"bytes"
	"image"
	"image/draw"
	"image/jpeg"
	"math"
	"testing"
)

// TestJPEGOpaqueNRGBAView checks the view an opaque NRGBA tile is encoded
// through: the same bytes as the tile's pixels copied to RGBA, sub-images
// included; a translucent tile still goes through the flattening.
func TestJPEGOpaqueNRGBAView(t *testing.T) {
	m := toNRGBA(renderMap(300, 300, 4, 8))
	for _, tile := range busyTiles(t, m) {
		rgba := image.NewRGBA(tile.Bounds())
		draw.Draw(rgba, rgba.Rect, tile, tile.Bounds().Min, draw.Src)
		var a, b bytes.Buffer
		if err := (&Encoder{}).Encode(&a, tile, jpegFormat); err != nil {
			t.Fatal(err)
		}
		if err := (&Encoder{}).Encode(&b, rgba, jpegFormat); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("tile %v: NRGBA and RGBA copies encode differently", tile.Bounds())
		}
	}
	// A transparent black block: flattened onto white, not shown black.
	for y := range 16 {
		clear(m.Pix[y*m.Stride : y*m.Stride+4*16])
	}
	tile := m.SubImage(image.Rect(0, 0, 64, 64))
	_, out := encodeDecode(t, tile, jpegFormat)
	if r, g, b, _ := out.At(4, 4).RGBA(); r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
		t.Errorf("transparent pixel came out %d,%d,%d, want white", r>>8, g>>8, b>>8)
	}
}

// BenchmarkJPEG encodes MapServer's tiles (NRGBA, opaque) as JPEG, and as
// before the opaque-NRGBA view: flattened onto white into a copy first.
func BenchmarkJPEG(b *testing.B) {
	for _, set := range benchSets()[:3] {
		b.Run(set.name+"/flattened-copy", func(b *testing.B) {
			benchEncode(b, set, func(buf *bytes.Buffer, tile image.Image) error {
				rgba := image.NewRGBA(tile.Bounds())
				draw.Draw(rgba, rgba.Rect, image.White, image.Point{}, draw.Src)
				draw.Draw(rgba, rgba.Rect, tile, tile.Bounds().Min, draw.Over)
				return (&Encoder{}).Encode(buf, rgba, jpegFormat)
			})
		})
		b.Run(set.name+"/encoder", func(b *testing.B) {
			benchEncode(b, set, func(buf *bytes.Buffer, tile image.Image) error {
				return (&Encoder{}).Encode(buf, tile, jpegFormat)
			})
		})
	}
}

// TestJPEGTilesHaveOwnHuffmanTables: a JPEG tile is written with Huffman
// tables made for it (jpegopt), smaller than image/jpeg's output of the
// same 4:2:0 planes and decoding to the same pixels.
func TestJPEGTilesHaveOwnHuffmanTables(t *testing.T) {
	m := toNRGBA(renderMap(512, 512, 4, 8))
	for _, tile := range busyTiles(t, m) {
		var ours, plain bytes.Buffer
		if err := (&Encoder{}).Encode(&ours, tile, jpegFormat); err != nil {
			t.Fatal(err)
		}
		rgba := image.NewRGBA(tile.Bounds())
		draw.Draw(rgba, rgba.Rect, tile, tile.Bounds().Min, draw.Src)
		if err := jpeg.Encode(&plain, toYCbCr420(new(image.YCbCr), rgba), &jpeg.Options{Quality: defaultJPEGQuality}); err != nil {
			t.Fatal(err)
		}
		if ours.Len() >= plain.Len() {
			t.Errorf("tile %v: %d bytes, image/jpeg alone writes %d", tile.Bounds(), ours.Len(), plain.Len())
		}
		a, err := jpeg.Decode(bytes.NewReader(ours.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := jpeg.Decode(bytes.NewReader(plain.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if PSNR(a, b) != math.Inf(1) {
			t.Errorf("tile %v: pixels differ from image/jpeg's (PSNR %.2f dB)", tile.Bounds(), PSNR(a, b))
		}
	}
}
