package imaging

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"

	"github.com/tilecache/caddy-tilecache/module/imaging/jpegopt"
)

const defaultJPEGQuality = 85

// Encoder encodes tiles. The zero value is ready to use and safe for
// concurrent use; all scratch memory comes from package-level pools, so
// Encoders may be copied and created freely.
type Encoder struct {
	JPEGQuality int            // 1..100; 0 means 85
	PNG         PNGCompression // the zero value is PNGDefault
}

// Encode appends the tile, encoded in format f, to dst. On error dst is
// left as it was. Tiles may be sub-images with any origin.
//
// image/png is lossless: a tile of one colour is written with 1 bit per
// pixel (and encoded once per colour and size), a tile of at most 256
// distinct colours is written paletted with exactly those colours (a
// paletted tile's palette trimmed to the colours it uses), an opaque tile
// carries no alpha channel, and rows are filtered as e.PNG chooses.
// image/png8 is the tile quantized to f.Colors (quantize.go; exact when
// the tile has no more colours), written by the same PNG writer. JPEG:
// alpha is flattened onto white. The mixed formats write a fully opaque
// tile as JPEG and any other as PNG (vnd.jpeg-png) or PNG8
// (vnd.jpeg-png8); a tile of one colour is PNG in both, which is exact and
// a tenth of a JPEG's bytes. image/webp is lossless, lossy at f.Quality, or
// the quantized tile losslessly with f.Colors.
func (e *Encoder) Encode(dst *bytes.Buffer, tile image.Image, f Format) error {
	if dst == nil || tile == nil {
		return errors.New("imaging: encode: nil buffer or tile")
	}
	if tile.Bounds().Empty() {
		return fmt.Errorf("imaging: encode: empty tile %v", tile.Bounds())
	}
	var c PNGCompression
	jq := f.Quality
	if e != nil {
		c = e.PNG
		if jq == 0 {
			jq = e.JPEGQuality
		}
	}
	if jq == 0 {
		jq = defaultJPEGQuality
	}
	if jq < 1 || jq > 100 {
		// Only JPEG tiles use it; other formats encode whatever it is.
		if f.MIME == mimeJPEG || f.Mixed() {
			return fmt.Errorf("imaging: encode: JPEG quality %d outside 1..100", jq)
		}
	}
	colors := f.Colors
	if colors == 0 {
		colors = 256
	}
	set, err := pngSettingsOf(c)
	if err != nil {
		return err
	}
	start := dst.Len()
	switch f.MIME {
	case mimePNG:
		err = encodePNG(dst, tile, set)
	case mimePNG8:
		err = encodePNG(dst, quantize(tile, colors, f.Dither), set)
	case mimeJPEG:
		err = encodeJPEG(dst, tile, jq)
	case mimeJPEGPNG, mimeJPEGPNG8:
		switch {
		case opaque(tile) && !uniform(tile):
			err = encodeJPEG(dst, tile, jq)
		case f.MIME == mimeJPEGPNG:
			err = encodePNG(dst, tile, set)
		default:
			err = encodePNG(dst, quantize(tile, colors, f.Dither), set)
		}
	case mimeWebP:
		switch {
		case f.Colors != 0:
			err = encodeWebP(dst, quantize(tile, f.Colors, f.Dither), 0)
		default:
			err = encodeWebP(dst, tile, f.Quality)
		}
	default:
		return fmt.Errorf("imaging: encode: unsupported format %q", f.MIME)
	}
	if err != nil {
		dst.Truncate(start)
		return fmt.Errorf("imaging: encode %s: %w", f.MIME, err)
	}
	return nil
}

// opaque reports whether every pixel of m is fully opaque, which is when
// a mixed format may write it as JPEG without losing its edges.
func opaque(m image.Image) bool {
	if o, ok := m.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	b := m.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if _, _, _, a := m.At(x, y).RGBA(); a != 0xffff {
				return false
			}
		}
	}
	return true
}

// uniform reports whether all of m's pixels are the same colour (open sea,
// a land fill): such a tile is smaller as a 1-bit PNG than as any JPEG.
func uniform(m image.Image) bool {
	var pix []byte
	var stride int
	b := m.Bounds()
	switch t := m.(type) {
	case *image.NRGBA:
		pix, stride = t.Pix[t.PixOffset(b.Min.X, b.Min.Y):], t.Stride
	case *image.RGBA:
		pix, stride = t.Pix[t.PixOffset(b.Min.X, b.Min.Y):], t.Stride
	default:
		first := m.At(b.Min.X, b.Min.Y)
		r0, g0, b0, a0 := first.RGBA()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if r, g, bl, a := m.At(x, y).RGBA(); r != r0 || g != g0 || bl != b0 || a != a0 {
					return false
				}
			}
		}
		return true
	}
	w := 4 * b.Dx()
	first := pix[:4]
	for y := range b.Dy() {
		row := pix[y*stride : y*stride+w]
		for x := 0; x < w; x += 4 {
			if row[x] != first[0] || row[x+1] != first[1] || row[x+2] != first[2] || row[x+3] != first[3] {
				return false
			}
		}
	}
	return true
}

// jpegWriter lets jpeg.Encode write straight into the buffer: without a
// Flush method it wraps every destination in a fresh 4 KB bufio.Writer.
type jpegWriter struct{ *bytes.Buffer }

func (jpegWriter) Flush() error { return nil }

func encodeJPEG(dst *bytes.Buffer, m image.Image, quality int) error {
	src := m
	switch t := m.(type) {
	case *image.YCbCr, *image.Gray:
		// Opaque, and jpeg has fast paths for them.
	case *image.RGBA:
		if !t.Opaque() {
			src = nil
		}
	case *image.NRGBA:
		// Opaque NRGBA bytes are RGBA bytes: a view instead of the
		// flattening copy (MapServer's PNGs decode to NRGBA).
		if t.Opaque() {
			src = &image.RGBA{Pix: t.Pix, Stride: t.Stride, Rect: t.Rect}
		} else {
			src = nil
		}
	default:
		src = nil
	}
	if src == nil {
		// Flatten onto white: JPEG has no alpha, and encoding as is would
		// show premultiplied (black) backgrounds. This also converts
		// NRGBA/Paletted tiles to RGBA, which jpeg encodes without
		// per-pixel interface calls.
		s := scratchPool.Get().(*scratch)
		defer scratchPool.Put(s)
		b := m.Bounds()
		rgba := s.rgbaOf(b)
		for i := range rgba.Pix {
			rgba.Pix[i] = 0xff
		}
		draw.Draw(rgba, b, m, b.Min, draw.Over)
		src = rgba
	}
	if rgba, ok := src.(*image.RGBA); ok && rgba.Rect.Dx()%2 == 0 && rgba.Rect.Dy()%2 == 0 {
		// Opaque here: our own 4:2:0 conversion, which rounds chroma once.
		y := ycbcrPool.Get().(*image.YCbCr)
		defer ycbcrPool.Put(y)
		src = toYCbCr420(y, rgba)
	}
	start := dst.Len()
	if err := jpeg.Encode(jpegWriter{dst}, src, &jpeg.Options{Quality: quality}); err != nil {
		return err
	}
	// image/jpeg writes the standard's example Huffman tables; tables
	// made for the tile's own symbols save 3–20 % with the same pixels
	// (what libjpeg's optimize_coding, on in MapCache and GDAL, does).
	// Should the pass ever refuse, the tile as written is still valid.
	if opt, err := jpegopt.Optimize(dst.Bytes()[start:]); err == nil {
		dst.Truncate(start)
		dst.Write(opt)
	}
	return nil
}
