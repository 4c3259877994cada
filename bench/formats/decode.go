package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"

	"golang.org/x/image/webp"
)

// kind names a tile's encoding from its bytes: png-<colour type> (gray,
// rgb, palette, graya, rgba), jpeg, webp-lossless, webp-lossy (with
// "+alpha" when a lossy WebP has an alpha channel), or unknown.
func kind(b []byte) string {
	switch {
	case len(b) >= 26 && bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) && string(b[12:16]) == "IHDR":
		if t, ok := map[byte]string{0: "gray", 2: "rgb", 3: "palette", 4: "graya", 6: "rgba"}[b[25]]; ok {
			return "png-" + t
		}
		return fmt.Sprintf("png-type%d", b[25])
	case len(b) >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff:
		return "jpeg"
	case len(b) >= 16 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return webpKind(b)
	}
	return "unknown"
}

// webpKind walks the RIFF chunks: VP8L is lossless, VP8 lossy, and an
// ALPH chunk beside VP8 is the alpha plane of a lossy image.
func webpKind(b []byte) string {
	lossy, lossless, alpha := false, false, false
	for p := 12; p+8 <= len(b); {
		id := string(b[p : p+4])
		n := int(binary.LittleEndian.Uint32(b[p+4 : p+8]))
		switch id {
		case "VP8 ":
			lossy = true
		case "VP8L":
			lossless = true
		case "ALPH":
			alpha = true
		}
		if n < 0 || p+8+n > len(b) {
			break
		}
		p += 8 + n + n&1
	}
	switch {
	case lossless:
		return "webp-lossless"
	case lossy && alpha:
		return "webp-lossy+alpha"
	case lossy:
		return "webp-lossy"
	}
	return "webp-unknown"
}

// decode decodes a PNG, JPEG or WebP tile into non-premultiplied RGBA.
func decode(b []byte) (*image.NRGBA, error) {
	var (
		m   image.Image
		err error
	)
	switch k := kind(b); {
	case len(k) > 4 && k[:4] == "png-":
		m, err = png.Decode(bytes.NewReader(b))
	case k == "jpeg":
		m, err = jpeg.Decode(bytes.NewReader(b))
	case len(k) > 5 && k[:5] == "webp-":
		m, err = webp.Decode(bytes.NewReader(b))
	default:
		return nil, fmt.Errorf("not a PNG, JPEG or WebP (starts %q)", b[:min(len(b), 12)])
	}
	if err != nil {
		return nil, err
	}
	return toNRGBA(m), nil
}

// toNRGBA converts to 8-bit non-premultiplied RGBA the way a browser
// shows the tile: exactly for NRGBA and palettes, YCbCr through the
// standard conversion, premultiplied colours un-premultiplied.
func toNRGBA(m image.Image) *image.NRGBA {
	if n, ok := m.(*image.NRGBA); ok && n.Rect.Min == (image.Point{}) {
		return n
	}
	r := m.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	for y := r.Min.Y; y < r.Max.Y; y++ {
		o := dst.PixOffset(0, y-r.Min.Y)
		for x := r.Min.X; x < r.Max.X; x++ {
			var c color.NRGBA
			switch s := m.(type) {
			case *image.YCbCr:
				yc := s.YCbCrAt(x, y)
				cr, cg, cb := color.YCbCrToRGB(yc.Y, yc.Cb, yc.Cr)
				c = color.NRGBA{cr, cg, cb, 255}
			case *image.NYCbCrA:
				yc := s.NYCbCrAAt(x, y)
				cr, cg, cb := color.YCbCrToRGB(yc.Y, yc.Cb, yc.Cr)
				c = color.NRGBA{cr, cg, cb, yc.A}
			default:
				c = color.NRGBAModel.Convert(m.At(x, y)).(color.NRGBA)
			}
			dst.Pix[o], dst.Pix[o+1], dst.Pix[o+2], dst.Pix[o+3] = c.R, c.G, c.B, c.A
			o += 4
		}
	}
	return dst
}

// mseOf is the mean squared error a PSNR in dB stands for (0 for +Inf).
func mseOf(db float64) float64 {
	if math.IsInf(db, 1) {
		return 0
	}
	return 255 * 255 / math.Pow(10, db/10)
}

// psnrOfMSE is the PSNR in dB of a mean squared error, peak 255; +Inf
// for 0.
func psnrOfMSE(mse float64) float64 {
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}
