package imaging

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"sync"
)

const defaultJPEGQuality = 85

// Encoder encodes tiles. The zero value is ready to use and safe for
// concurrent use; all scratch memory comes from package-level pools, so
// Encoders may be copied and created freely.
type Encoder struct {
	JPEGQuality int // 1..100; 0 means 85
}

// Encode appends the encoded tile to dst. On error dst is left as it was.
// Tiles may be sub-images with any origin.
//
// PNG: a paletted tile stays paletted (palette trimmed to the colours it
// uses), an RGBA/NRGBA tile of at most 256 distinct colours is written
// paletted with exactly those colours, and an opaque tile carries no alpha
// channel. JPEG: alpha is flattened onto white.
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
		err = encodePNG(dst, tile, true)
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

// pngEncoder reuses the encoder state, zlib writer and row buffers, which
// otherwise cost ~850 KB of allocation per 256 px tile.
var pngEncoder = png.Encoder{
	CompressionLevel: png.DefaultCompression,
	BufferPool:       &pngBufferPool{},
}

type pngBufferPool struct{ p sync.Pool }

// Get may return nil: png.Encoder then allocates a fresh buffer.
func (p *pngBufferPool) Get() *png.EncoderBuffer {
	b, _ := p.p.Get().(*png.EncoderBuffer)
	return b
}
func (p *pngBufferPool) Put(b *png.EncoderBuffer) { p.p.Put(b) }

// scratch holds per-call working memory; it is pooled because tiles are
// encoded by the thousand while seeding.
type scratch struct {
	pix   []uint8    // paletted pixels
	rgba  image.RGBA // converted or flattened pixels
	pal   paletteSet
	remap [256]uint8
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) paletted(r image.Rectangle, p color.Palette) *image.Paletted {
	n := r.Dx() * r.Dy()
	if cap(s.pix) < n {
		s.pix = make([]uint8, n)
	}
	return &image.Paletted{Pix: s.pix[:n], Stride: r.Dx(), Rect: r, Palette: p}
}

// rgbaOf returns s.rgba resized to r; its pixels are stale.
func (s *scratch) rgbaOf(r image.Rectangle) *image.RGBA {
	n := 4 * r.Dx() * r.Dy()
	if cap(s.rgba.Pix) < n {
		s.rgba.Pix = make([]uint8, n)
	}
	s.rgba.Pix, s.rgba.Stride, s.rgba.Rect = s.rgba.Pix[:n], 4*r.Dx(), r
	return &s.rgba
}

// encodePNG takes palettize as a parameter only so benchmarks can measure
// what palettizing buys.
func encodePNG(dst *bytes.Buffer, m image.Image, palettize bool) error {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)

	switch t := m.(type) {
	case *image.Paletted:
		if p := s.compactPaletted(t); p != nil {
			m = p
		}
	case *image.RGBA, *image.NRGBA:
	case *image.Gray, *image.Gray16, *image.RGBA64, *image.NRGBA64, *image.Alpha, *image.Alpha16:
		// png handles these natively; 16-bit stays 16-bit rather than
		// silently losing precision.
		return pngEncoder.Encode(dst, m)
	default:
		// Go's png writer would emit YCbCr (a JPEG upstream), CMYK or any
		// unknown model as 16-bit RGB through per-pixel interface calls:
		// twice the bytes for no gain. Convert to 8-bit RGBA first.
		b := m.Bounds()
		rgba := s.rgbaOf(b)
		draw.Draw(rgba, b, m, b.Min, draw.Src)
		m = rgba
	}
	if palettize {
		switch t := m.(type) {
		case *image.RGBA:
			if p := s.palettize(t.Pix, t.Stride, t.Rect, false); p != nil {
				m = p
			}
		case *image.NRGBA:
			if p := s.palettize(t.Pix, t.Stride, t.Rect, true); p != nil {
				m = p
			}
		}
	}
	return pngEncoder.Encode(dst, m)
}

// compactPaletted trims the palette of a paletted tile to the entries it
// uses: a metatile palette has up to 256 entries, a tile often uses a few,
// and PLTE+tRNS (up to 1 KB) then dominate a small tile, while fewer entries
// also let png pick 1, 2 or 4 bits per pixel. It returns nil when nothing
// would be gained.
func (s *scratch) compactPaletted(t *image.Paletted) *image.Paletted {
	if len(t.Palette) > 256 {
		return nil // not a valid PNG palette; let png report it
	}
	b := t.Rect
	w := b.Dx()
	var used [256]bool
	n := 0
	for y := 0; y < b.Dy(); y++ {
		row := t.Pix[y*t.Stride : y*t.Stride+w]
		for _, i := range row {
			if !used[i] {
				used[i] = true
				n++
			}
		}
	}
	if n == len(t.Palette) {
		return nil
	}
	for i := len(t.Palette); i < len(used); i++ {
		if used[i] {
			// Out-of-range indexes: leave the image as it is rather than
			// guess what it means.
			return nil
		}
	}
	pal := make(color.Palette, 0, n)
	for i, u := range used[:len(t.Palette)] {
		if u {
			s.remap[i] = uint8(len(pal))
			pal = append(pal, t.Palette[i])
		}
	}
	p := s.paletted(b, pal)
	for y := 0; y < b.Dy(); y++ {
		row := t.Pix[y*t.Stride : y*t.Stride+w]
		out := p.Pix[y*w : y*w+w]
		for x, i := range row {
			out[x] = s.remap[i]
		}
	}
	return p
}

// paletteSet is an open-addressing hash set of up to 256 colours. A map
// would do, but this is on the hot path and needs no allocation or hashing
// of interface values.
type paletteSet struct {
	keys   [paletteSlots]uint32
	slot   [paletteSlots]uint16 // index+1 into colors; 0 = empty
	colors [256]uint32
	n      int
}

const paletteSlots = 1024 // load ≤ 1/4 keeps probes short

// palettize returns pix (4 bytes per pixel: RGBA premultiplied, or NRGBA
// when nrgba) as a paletted image if it has at most 256 distinct colours,
// else nil. Colours are kept exactly: this is not quantisation.
func (s *scratch) palettize(pix []uint8, stride int, r image.Rectangle, nrgba bool) *image.Paletted {
	ps := &s.pal
	clear(ps.slot[:])
	ps.n = 0
	w, h := r.Dx(), r.Dy()
	p := s.paletted(r, nil)
	var last uint32
	var lastIdx uint8
	haveLast := false
	for y := range h {
		row := pix[y*stride : y*stride+4*w]
		out := p.Pix[y*w : y*w+w]
		for x := range w {
			q := row[4*x : 4*x+4 : 4*x+4]
			k := uint32(q[0]) | uint32(q[1])<<8 | uint32(q[2])<<16 | uint32(q[3])<<24
			if k>>24 == 0 {
				// All fully transparent pixels look the same whatever
				// their NRGBA colour bytes: one palette entry is enough.
				k = 0
			}
			// Map rasters are mostly runs of one colour.
			if haveLast && k == last {
				out[x] = lastIdx
				continue
			}
			i := (k * 0x9e3779b1) >> (32 - 10) // Fibonacci hashing into 1024 slots
			for {
				e := ps.slot[i]
				if e == 0 {
					if ps.n == 256 {
						return nil
					}
					ps.colors[ps.n] = k
					ps.n++
					ps.keys[i] = k
					ps.slot[i] = uint16(ps.n)
					e = uint16(ps.n)
				} else if ps.keys[i] != k {
					i = (i + 1) & (paletteSlots - 1)
					continue
				}
				last, lastIdx, haveLast = k, uint8(e-1), true
				out[x] = lastIdx
				break
			}
		}
	}
	pal := make(color.Palette, ps.n)
	for i, k := range ps.colors[:ps.n] {
		c := [4]uint8{uint8(k), uint8(k >> 8), uint8(k >> 16), uint8(k >> 24)}
		// Keep the source's own colour type so png converts each entry
		// exactly as it would convert the truecolour pixel.
		if nrgba {
			pal[i] = color.NRGBA{c[0], c[1], c[2], c[3]}
		} else {
			pal[i] = color.RGBA{c[0], c[1], c[2], c[3]}
		}
	}
	p.Palette = pal
	return p
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
