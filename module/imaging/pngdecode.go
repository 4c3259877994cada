package imaging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"io"
	"runtime"
	"sync"
	"weak"

	"github.com/klauspost/compress/flate"
)

// A PNG decoder for what WMS servers send as metatiles: 8-bit RGBA, RGB
// or paletted, not interlaced. It exists for two reasons image/png cannot
// serve: it decodes into pooled pixel buffers (a 1024² metatile is 4 MB
// that image/png allocates and zeroes per call), and it inflates with
// klauspost/compress, which is faster than compress/flate. Everything else
// is left to image/png (errNotHandled), and where it does decode, the
// result is what image/png returns: same image type, pixels and palette,
// and the same checks (chunk CRCs, Adler-32, exact amount of pixel data).

// errNotHandled says decodePNG leaves this image to image/png.
var errNotHandled = errors.New("imaging: PNG not handled by the pooled decoder")

// pngFormatError reads like image/png's FormatError, so a log line says
// the same thing whichever decoder refused the body.
type pngFormatError string

func (e pngFormatError) Error() string { return "png: invalid format: " + string(e) }

// maxPixelBytes bounds the pixel buffer this decoder allocates; anything
// bigger is left to image/png (Decode refuses it by size anyway).
const maxPixelBytes = 1 << 30

// pngHeader is what decodePNG handles of an IHDR.
type pngHeader struct {
	w, h      int
	colorType uint8
}

// bpp is the bytes per pixel of the filtered rows.
func (h pngHeader) bpp() int {
	switch h.colorType {
	case ctRGB:
		return 3
	case ctPalette:
		return 1
	}
	return 4
}

// parseIHDR returns ok only for the formats decodePNG handles.
func parseIHDR(data []byte) (pngHeader, bool) {
	if len(data) != 13 {
		return pngHeader{}, false
	}
	w := int32(binary.BigEndian.Uint32(data[0:4]))
	h := int32(binary.BigEndian.Uint32(data[4:8]))
	depth, ct := data[8], data[9]
	// compression, filter method and interlace: only 0, 0, 0.
	if w <= 0 || h <= 0 || depth != 8 || data[10] != 0 || data[11] != 0 || data[12] != 0 {
		return pngHeader{}, false
	}
	if ct != ctRGB && ct != ctRGBA && ct != ctPalette {
		return pngHeader{}, false
	}
	if int64(w)*int64(h)*4 > maxPixelBytes {
		return pngHeader{}, false
	}
	return pngHeader{w: int(w), h: int(h), colorType: ct}, true
}

// pngChunks is the result of walking a PNG's chunks.
type pngChunks struct {
	hdr     pngHeader
	palette color.Palette // colour type 3 only
	// idat is the first run of consecutive IDAT chunks' data; image/png
	// reads the zlib stream from that run and ignores later IDAT chunks.
	idat [][]byte
}

// Decoding stages, in the order image/png enforces them.
const (
	stStart = iota
	stIHDR
	stPLTE
	stTRNS
	stIDAT
)

// walkChunks checks the chunk structure up to IEND: CRCs, order, lengths.
// Nothing after IEND is read, as with image/png. The IDAT data is
// appended to idat, which saves growing a new slice per decode: MapServer
// writes 8 KB chunks, 10-50 of them per metatile.
func walkChunks(body []byte, idat [][]byte) (pngChunks, error) {
	c := pngChunks{idat: idat[:0]}
	if !bytes.HasPrefix(body, pngMagic) {
		return c, pngFormatError("not a PNG file")
	}
	p := body[len(pngMagic):]
	stage := stStart
	inRun := false // the last chunk was an IDAT of the first run
	for {
		if len(p) < 12 {
			return c, io.ErrUnexpectedEOF
		}
		length := binary.BigEndian.Uint32(p[:4])
		if length > 0x7fffffff {
			return c, pngFormatError("bad chunk length")
		}
		if uint64(len(p)) < 12+uint64(length) {
			return c, io.ErrUnexpectedEOF
		}
		typ, data := string(p[4:8]), p[8:8+length]
		if crc32.ChecksumIEEE(p[4:8+length]) != binary.BigEndian.Uint32(p[8+length:]) {
			return c, pngFormatError("invalid checksum")
		}
		p = p[12+length:]
		wasRun := inRun
		inRun = false

		switch typ {
		case "IHDR":
			if stage != stStart {
				return c, pngFormatError("chunk out of order")
			}
			var ok bool
			if c.hdr, ok = parseIHDR(data); !ok {
				return c, errNotHandled
			}
			stage = stIHDR
		case "PLTE":
			if stage != stIHDR {
				return c, pngFormatError("chunk out of order")
			}
			stage = stPLTE
			np := int(length / 3)
			if length%3 != 0 || np == 0 || np > 256 {
				return c, pngFormatError("bad PLTE length")
			}
			// Truecolour images may carry a suggested palette; it is ignored.
			if c.hdr.colorType == ctPalette {
				// As image/png: room for 256, the unused entries opaque black,
				// for indexes past the PLTE and tRNS entries past it.
				pal := make(color.Palette, 256)
				for i := range pal {
					pal[i] = color.RGBA{0, 0, 0, 0xff}
					if i < np {
						pal[i] = color.RGBA{data[3*i], data[3*i+1], data[3*i+2], 0xff}
					}
				}
				c.palette = pal[:np]
			}
		case "tRNS":
			// Transparency of truecolour pixels is a colour key image/png
			// expands into NRGBA or RGBA64: rare, so left to it (as is the
			// error it makes of tRNS on RGBA).
			if c.hdr.colorType != ctPalette {
				return c, errNotHandled
			}
			if stage != stPLTE {
				return c, pngFormatError("chunk out of order")
			}
			stage = stTRNS
			if length > 256 {
				return c, pngFormatError("bad tRNS length")
			}
			if len(c.palette) < len(data) {
				c.palette = c.palette[:len(data)]
			}
			for i, a := range data {
				rgba := c.palette[i].(color.RGBA)
				c.palette[i] = color.NRGBA{rgba.R, rgba.G, rgba.B, a}
			}
		case "IDAT":
			if stage < stIHDR || (stage == stIHDR && c.hdr.colorType == ctPalette) {
				return c, pngFormatError("chunk out of order")
			}
			if stage != stIDAT || wasRun {
				// The first run; a later IDAT is trailing garbage image/png
				// skips (its CRC checked above).
				c.idat = append(c.idat, data)
				inRun = true
			}
			stage = stIDAT
		case "IEND":
			if stage != stIDAT {
				return c, pngFormatError("chunk out of order")
			}
			if length != 0 {
				return c, pngFormatError("bad IEND length")
			}
			return c, nil
		default:
			// image/png skips unknown chunks, even critical ones (upper
			// case first letter), which it should not; leave those to it so
			// both decoders agree.
			if typ[0]&0x20 == 0 {
				return c, errNotHandled
			}
		}
	}
}

// pngDecoder is the reusable state of one decode.
type pngDecoder struct {
	fr     io.ReadCloser // flate reader, reset per stream
	src    bytes.Reader  // the zlib stream, after its header
	idat   [][]byte      // walkChunks' result, for reuse
	adler  uint32        // Adler-32 of the inflated bytes so far
	joined []byte        // IDAT data, when it spans several chunks
	cur    []byte        // filtered row, RGB only
	prev   []byte        // previous unfiltered row, RGB only
	zero   []byte        // the row above the first; never written
	tmp    [4]byte
}

var pngDecoders = sync.Pool{New: func() any {
	return &pngDecoder{fr: flate.NewReader(nil)}
}}

// decodePNG decodes body into a pooled image (see Recycle), or returns
// errNotHandled for a PNG it leaves to image/png. On error it returns no
// image, and the buffer it may have filled partly is back in the pool.
func decodePNG(body []byte) (image.Image, error) {
	d := pngDecoders.Get().(*pngDecoder)
	defer pngDecoders.Put(d)
	c, err := walkChunks(body, d.idat)
	// Do not keep body alive from the pool.
	defer func() {
		d.src.Reset(nil)
		clear(c.idat)
		d.idat = c.idat[:0]
	}()
	if err != nil {
		return nil, err
	}

	data := c.idat[0]
	if len(c.idat) > 1 {
		// flate reads a *bytes.Reader on its fast path; the copy costs
		// ~1 % of the inflate.
		d.joined = d.joined[:0]
		for _, b := range c.idat {
			d.joined = append(d.joined, b...)
		}
		data = d.joined
	}
	if err := checkZlibHeader(data); err != nil {
		return nil, err
	}
	d.src.Reset(data[2:])
	if err := d.fr.(flate.Resetter).Reset(&d.src, nil); err != nil {
		return nil, err
	}
	d.adler = 1

	w, h := c.hdr.w, c.hdr.h
	var (
		img image.Image
		pix []byte
	)
	switch c.hdr.colorType {
	case ctRGBA:
		pix = getPix(4 * w * h)
		img = &image.NRGBA{Pix: pix, Stride: 4 * w, Rect: image.Rect(0, 0, w, h)}
	case ctRGB:
		pix = getPix(4 * w * h)
		img = &image.RGBA{Pix: pix, Stride: 4 * w, Rect: image.Rect(0, 0, w, h)}
	case ctPalette:
		pix = getPix(w * h)
		img = &image.Paletted{Pix: pix, Stride: w, Rect: image.Rect(0, 0, w, h), Palette: c.palette}
	}
	if err := d.readRows(c.hdr, pix); err != nil {
		Recycle(img)
		return nil, err
	}
	if err := d.finish(data, c.idat); err != nil {
		Recycle(img)
		return nil, err
	}
	if p, ok := img.(*image.Paletted); ok {
		// image/png grows a short palette to cover every index used.
		if len(p.Palette) < 256 {
			var top uint8
			for _, i := range p.Pix {
				top = max(top, i)
			}
			if int(top) >= len(p.Palette) {
				p.Palette = p.Palette[:int(top)+1]
			}
		}
	}
	return img, nil
}

// checkZlibHeader accepts what compress/zlib accepts without a dictionary.
func checkZlibHeader(data []byte) error {
	if len(data) < 2 {
		return pngFormatError("not enough pixel data")
	}
	if data[0]&0x0f != 8 || data[0]>>4 > 7 || binary.BigEndian.Uint16(data)%31 != 0 {
		return pngFormatError("zlib: invalid header")
	}
	if data[1]&0x20 != 0 {
		return pngFormatError("zlib: invalid dictionary")
	}
	return nil
}

// readRows inflates and unfilters every row into pix. Rows of 4 or 1
// bytes per pixel are read and unfiltered in place, the row above being
// the previous row of pix; RGB rows go through d.cur and d.prev and are
// expanded to RGBA. Each row of pix is written whole, so a recycled
// buffer needs no clearing.
func (d *pngDecoder) readRows(hdr pngHeader, pix []byte) error {
	bpp := hdr.bpp()
	n := bpp * hdr.w
	d.zero = grow(d.zero, n)
	prev := d.zero
	if hdr.colorType == ctRGB {
		d.cur = grow(d.cur, n)
		d.prev = grow(d.prev, n)
	}
	filter := d.tmp[:1]
	for y := range hdr.h {
		var cur []byte
		if hdr.colorType == ctRGB {
			cur = d.cur
		} else {
			cur = pix[y*n : (y+1)*n]
		}
		if _, err := io.ReadFull(d.fr, filter); err != nil {
			return pixelDataError(err)
		}
		if _, err := io.ReadFull(d.fr, cur); err != nil {
			return pixelDataError(err)
		}
		// The checksum covers the filtered bytes, as inflated.
		d.adler = adler32Update(d.adler, filter)
		d.adler = adler32Update(d.adler, cur)
		if err := unfilterRow(filter[0], cur, prev, bpp); err != nil {
			return err
		}
		if hdr.colorType != ctRGB {
			prev = cur
			continue
		}
		dst := pix[4*hdr.w*y : 4*hdr.w*(y+1)]
		for i, j := 0, 0; i < len(cur); i, j = i+3, j+4 {
			dst[j], dst[j+1], dst[j+2], dst[j+3] = cur[i], cur[i+1], cur[i+2], 0xff
		}
		d.cur, d.prev = d.prev, d.cur
		prev = d.prev
	}
	return nil
}

func pixelDataError(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return pngFormatError("not enough pixel data")
	}
	return err
}

// Bytes after the zlib stream, in the IDAT chunk it ends in, are left to
// image/png (errNotHandled): it accepts them when its read-ahead buffer
// has swallowed them (within ~4 KB of the stream's end, as a rule) and
// refuses them otherwise. A metatile some server writes that way then
// decodes exactly as it did before this decoder existed.

// finish checks the end of the zlib stream after the last row: no more
// data, a matching Adler-32, and the stream ending where an IDAT chunk
// does. Whole IDAT chunks after that one are skipped, as image/png does.
func (d *pngDecoder) finish(data []byte, idat [][]byte) error {
	n, err := 0, error(nil)
	for i := 0; n == 0 && err == nil; i++ {
		if i == 100 {
			return io.ErrNoProgress
		}
		n, err = d.fr.Read(d.tmp[:1])
	}
	if n != 0 {
		return pngFormatError("too much pixel data")
	}
	if err != io.EOF {
		return err
	}
	sum := d.tmp[:4]
	if _, err := io.ReadFull(&d.src, sum); err != nil {
		return pngFormatError("zlib: " + io.ErrUnexpectedEOF.Error())
	}
	if binary.BigEndian.Uint32(sum) != d.adler {
		return pngFormatError("zlib: invalid checksum")
	}
	used := len(data) - d.src.Len()
	for _, chunk := range idat {
		used -= len(chunk)
		if used <= 0 {
			break
		}
	}
	if used != 0 {
		return errNotHandled
	}
	return nil
}

// adler32Update continues the Adler-32 checksum (RFC 1950) adler over p.
// hash/adler32 adds byte by byte, each sum waiting for the one before: a
// quarter of a metatile decode. This takes 128-byte blocks a 64-bit word
// at a time, summing bytes in 16-bit lanes (even and odd bytes apart, so
// a lane holds one byte of each word). For a block of K words w_j after
// sums s1, s2, byte i of word j adds to s2 with weight 8(K-1-j) + 8-i:
//
//	s2 += 8K*s1 + 8*Σ_j (K-1-j)*sum(w_j) + Σ_j Σ_i (8-i)*w_j[i]
//	s1 += Σ_j sum(w_j)
//
// The running lane sums give Σ_j sum(w_j) (acc) and Σ_j (K-1-j)*sum(w_j)
// (accumulating acc before each word); with K = 16 no lane passes 2^16.
func adler32Update(adler uint32, p []byte) uint32 {
	const (
		mod   = 65521
		nmax  = 5552 // bytes before s2 could overflow 32 bits (zlib's NMAX)
		block = 128
		lo    = 0x00ff00ff00ff00ff
	)
	s1, s2 := adler&0xffff, adler>>16
	for len(p) > 0 {
		var q []byte
		if len(p) > nmax {
			p, q = p[:nmax], p[nmax:]
		}
		for ; len(p) >= block; p = p[block:] {
			var accE, accO, runE, runO uint64
			for i := 0; i < block; i += 8 {
				v := binary.LittleEndian.Uint64(p[i:])
				runE += accE
				runO += accO
				accE += v & lo
				accO += v >> 8 & lo
			}
			lane := func(x uint64, k uint) uint32 { return uint32(x>>(16*k)) & 0xffff }
			run := runE + runO // lanes < 2·255·120: no carry
			weighted := 8*lane(accE, 0) + 6*lane(accE, 1) + 4*lane(accE, 2) + 2*lane(accE, 3) +
				7*lane(accO, 0) + 5*lane(accO, 1) + 3*lane(accO, 2) + lane(accO, 3)
			s2 += block*s1 + 8*(lane(run, 0)+lane(run, 1)+lane(run, 2)+lane(run, 3)) + weighted
			acc := accE + accO // lanes < 2·255·16
			s1 += lane(acc, 0) + lane(acc, 1) + lane(acc, 2) + lane(acc, 3)
		}
		for _, b := range p {
			s1 += uint32(b)
			s2 += s1
		}
		s1 %= mod
		s2 %= mod
		p = q
	}
	return s2<<16 | s1
}

// unfilterRow reverses the row filter ft (PNG spec, section 9) in cur, prev
// being the unfiltered row above (zeros for the first row).
func unfilterRow(ft byte, cur, prev []byte, bpp int) error {
	prev = prev[:len(cur)]
	switch ft {
	case ftNone:
	case ftSub:
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case ftUp:
		for i, p := range prev {
			cur[i] += p
		}
	case ftAverage:
		for i := range bpp {
			cur[i] += prev[i] / 2
		}
		for i := bpp; i < len(cur); i++ {
			cur[i] += uint8((int(cur[i-bpp]) + int(prev[i])) / 2)
		}
	case ftPaeth:
		for i := range bpp {
			cur[i] += prev[i] // the predictor of b alone, a and c being 0
		}
		// paeth is the encoder's (pngfilter.go).
		for i := bpp; i < len(cur); i++ {
			cur[i] += paeth(cur[i-bpp], prev[i], prev[i-bpp])
		}
	default:
		return pngFormatError("bad filter type")
	}
	return nil
}

// Pooled pixel buffers. A buffer is "out" from getPix until Recycle; the
// outstanding set is what lets Recycle tell our buffers from any other
// image's, and makes a second Recycle of the same image a no-op. It holds
// weak pointers, so an image never recycled is still collected (and its
// entry removed by a cleanup).
var (
	pixPools    sync.Map // buffer length → *sync.Pool of *[]byte
	outstanding sync.Map // weak.Pointer[byte] of &buf[0] → struct{}
)

func pixPool(n int) *sync.Pool {
	if p, ok := pixPools.Load(n); ok {
		return p.(*sync.Pool)
	}
	p, _ := pixPools.LoadOrStore(n, new(sync.Pool))
	return p.(*sync.Pool)
}

// getPix returns a buffer of n bytes whose contents are undefined.
func getPix(n int) []byte {
	var buf []byte
	if b, ok := pixPool(n).Get().(*[]byte); ok {
		buf = *b
	} else {
		buf = make([]byte, n)
		runtime.AddCleanup(&buf[0], func(k weak.Pointer[byte]) { outstanding.Delete(k) }, weak.Make(&buf[0]))
	}
	outstanding.Store(weak.Make(&buf[0]), struct{}{})
	return buf
}

// Recycle gives the pixels of an image Decode returned back to the pool
// the next decode of that size draws from. It is a no-op for images whose
// pixels the pool did not hand out (JPEG, PNG formats left to image/png,
// images made elsewhere) and for a second call on the same image.
//
// After Recycle neither img nor any sub-image of it (the tiles Slice cut
// from it) may be used: its pixels will be overwritten by another decode.
// So call it only once every tile has been encoded.
func Recycle(img image.Image) {
	var pix []byte
	switch m := img.(type) {
	case *image.NRGBA:
		pix = m.Pix
	case *image.RGBA:
		pix = m.Pix
	case *image.Paletted:
		pix = m.Pix
	default:
		return
	}
	if len(pix) == 0 || len(pix) != cap(pix) {
		return
	}
	if _, ok := outstanding.LoadAndDelete(weak.Make(&pix[0])); !ok {
		return
	}
	pixPool(len(pix)).Put(&pix)
}
