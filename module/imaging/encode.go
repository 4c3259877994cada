package imaging

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
)

const defaultJPEGQuality = 85

// Encoder encodes tiles. The zero value is ready to use and safe for
// concurrent use; all scratch memory comes from package-level pools, so
// Encoders may be copied and created freely.
type Encoder struct {
	JPEGQuality int            // 1..100; 0 means 85
	PNG         PNGCompression // the zero value is PNGDefault
}

// Encode appends the encoded tile to dst. On error dst is left as it was.
// Tiles may be sub-images with any origin.
//
// PNG is lossless: a tile of one colour is written with 1 bit per pixel
// (and encoded once per colour and size), a tile of at most 256 distinct
// colours is written paletted with exactly those colours (a paletted
// tile's palette trimmed to the colours it uses), an opaque tile carries
// no alpha channel, and rows are filtered as e.PNG chooses. JPEG: alpha is
// flattened onto white.
func (e *Encoder) Encode(dst *bytes.Buffer, tile image.Image, f Format) error {
	if dst == nil || tile == nil {
		return errors.New("imaging: encode: nil buffer or tile")
	}
	if tile.Bounds().Empty() {
		return fmt.Errorf("imaging: encode: empty tile %v", tile.Bounds())
	}
	start := dst.Len()
	var err error
	switch f.MIME {
	case mimePNG:
		var c PNGCompression
		if e != nil {
			c = e.PNG
		}
		set, serr := pngSettingsOf(c)
		if serr != nil {
			return serr
		}
		err = encodePNG(dst, tile, set)
	case mimeJPEG:
		q := 0
		if e != nil {
			q = e.JPEGQuality
		}
		if q == 0 {
			q = defaultJPEGQuality
		}
		if q < 1 || q > 100 {
			return fmt.Errorf("imaging: encode: JPEG quality %d outside 1..100", q)
		}
		err = encodeJPEG(dst, tile, q)
	default:
		return fmt.Errorf("imaging: encode: unsupported format %q", f.MIME)
	}
	if err != nil {
		dst.Truncate(start)
		return fmt.Errorf("imaging: encode %s: %w", f.MIME, err)
	}
	return nil
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
	return jpeg.Encode(jpegWriter{dst}, src, &jpeg.Options{Quality: quality})
}
