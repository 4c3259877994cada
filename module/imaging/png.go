package imaging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"slices"
	"sync"
)

// filterStrategy says how truecolour and gray rows are filtered. Paletted
// rows are always left unfiltered, as the PNG spec advises: neighbouring
// palette indexes have no numeric relation a filter could exploit.
type filterStrategy uint8

const (
	// filterNone leaves every row unfiltered, as MapCache does: on flat
	// fills and antialiased edges deflate finds the repeats itself, and
	// filters turn them into noise.
	filterNone filterStrategy = iota
	// filterAdaptive picks each row's filter by the minimum-sum heuristic
	// (libpng, image/png): for shaded relief, gradients and photos.
	filterAdaptive
	// filterUp filters every row with Up, which on continuous-tone tiles
	// deflates within a few percent of adaptive at a tenth of its cost.
	filterUp
	// filterEstimate chooses None or Up per tile from the colour scan's
	// counts (see chooseFilter).
	filterEstimate
	// filterTrial compresses None, Up and adaptive rows and keeps the
	// smallest.
	filterTrial
)

// pngSettings is what a PNGCompression means to the encoder.
type pngSettings struct {
	// Deflate levels (1..9) by content: flat for paletted and unfiltered
	// rows (fills, edges, text: the lazy matcher of levels 7-9 finds the
	// long repeats cheaply), tone for filtered rows (shading: levels 7-9
	// crawl through their small, similar residuals at 3-10× the time of 6).
	flatLevel, toneLevel int
	// flatAlso, when set, is a second level tried for flat data, the
	// smaller result kept: no level is smallest on every tile.
	flatAlso int
	filter   filterStrategy
	// trueColor writes RGB/RGBA even when the tile has ≤ 256 colours; for
	// tests and benchmarks only.
	trueColor bool
}

// pngSettingsOf maps the operator's choice to settings, chosen from
// BenchmarkPNGCandidates on MapServer tiles of this project's upstream and
// on synthetic tiles of thousands of colours (klauspost's levels; on the
// 2-core reference machine, per 256 px tile):
//
//   - flat data (paletted, unfiltered; maps): levels 6 and 7 each save
//     1-6 % over the level below for 0-20 % more time (map over relief:
//     40 %); 8 saves at most 2.5 % more for up to 60 % more time; 9 takes
//     7-10× as long and came out larger on paletted relief. Default 7:
//     then every MapServer set is at least as small as MapCache's PNG
//     (libpng, no filter, zlib level 1) at a third of image/png's time.
//   - tone data (Up-filtered; shading): 4 is about as fast as 1 and 15 %
//     smaller, 6 saves 4 % more for 35-40 % more time, 7 and 8 take 3× and
//     8× as long as 6. Default 6, fast 4.
//   - best: level 8 (and 7 on flat data, keeping the smaller), every
//     filter tried.
func pngSettingsOf(c PNGCompression) (pngSettings, error) {
	switch c {
	case PNGFast:
		return pngSettings{flatLevel: 1, toneLevel: 4, filter: filterEstimate}, nil
	case PNGDefault:
		return pngSettings{flatLevel: 7, toneLevel: 6, filter: filterEstimate}, nil
	case PNGBest:
		return pngSettings{flatLevel: 8, flatAlso: 7, toneLevel: 8, filter: filterTrial}, nil
	}
	return pngSettings{}, fmt.Errorf("imaging: invalid PNG compression %d", uint8(c))
}

// stdlibLevel maps settings to image/png's levels for the pixel formats
// this encoder leaves to image/png (16-bit and alpha-only).
func (s pngSettings) stdlibLevel() png.CompressionLevel {
	switch {
	case s.flatLevel <= 2:
		return png.BestSpeed
	case s.flatLevel >= 8:
		return png.BestCompression
	}
	return png.DefaultCompression
}

// scratch holds per-call working memory; it is pooled because tiles are
// encoded by the thousand while seeding.
type scratch struct {
	idx   []uint8      // palette indexes, w per row
	raw   []uint8      // deflate input: filter byte + row, per row
	raw2  []uint8      // filtered rows, when raw holds the unfiltered ones
	tmp   []uint8      // adaptive filtering's candidate rows
	zero  []uint8      // the row above the first
	trial bytes.Buffer // trial compressions
	rgba  image.RGBA   // converted pixels of unusual colour models
	pal   paletteSet
	plte  [256]nrgba
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// rgbaOf returns s.rgba resized to r; its pixels are stale.
func (s *scratch) rgbaOf(r image.Rectangle) *image.RGBA {
	s.rgba.Pix = grow(s.rgba.Pix, 4*r.Dx()*r.Dy())
	s.rgba.Stride, s.rgba.Rect = 4*r.Dx(), r
	return &s.rgba
}

// encodePNG appends m as a PNG. Every path is lossless: the decoded PNG's
// NRGBA pixels equal color.NRGBAModel.Convert of m's.
func encodePNG(dst *bytes.Buffer, m image.Image, set pngSettings) error {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)

	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	switch t := m.(type) {
	case *image.Paletted:
		return s.encodePaletted(dst, t, set)
	case *image.NRGBA:
		return s.encode4(dst, t.Pix[t.PixOffset(b.Min.X, b.Min.Y):], t.Stride, w, h, false, set)
	case *image.RGBA:
		return s.encode4(dst, t.Pix[t.PixOffset(b.Min.X, b.Min.Y):], t.Stride, w, h, true, set)
	case *image.Gray:
		return s.encodeGray(dst, t, set)
	case *image.Gray16, *image.RGBA64, *image.NRGBA64, *image.Alpha, *image.Alpha16:
		// Rare in tiles; image/png writes them natively, 16-bit staying
		// 16-bit rather than silently losing precision.
		enc := png.Encoder{CompressionLevel: set.stdlibLevel(), BufferPool: stdlibBuffers}
		return enc.Encode(dst, m)
	default:
		// YCbCr (a JPEG upstream), CMYK or unknown models: image/png would
		// write them as 16-bit RGB through per-pixel interface calls.
		rgba := s.rgbaOf(b)
		draw.Draw(rgba, b, m, b.Min, draw.Src)
		return s.encode4(dst, rgba.Pix, rgba.Stride, w, h, true, set)
	}
}

// stdlibBuffers lets image/png reuse its encoder state (~850 KB per call
// otherwise) on the paths still handed to it.
var stdlibBuffers = &pngBufferPool{}

type pngBufferPool struct{ p sync.Pool }

// Get may return nil: png.Encoder then allocates a fresh buffer.
func (p *pngBufferPool) Get() *png.EncoderBuffer {
	b, _ := p.p.Get().(*png.EncoderBuffer)
	return b
}
func (p *pngBufferPool) Put(b *png.EncoderBuffer) { p.p.Put(b) }

// scan4 is one pass over 4-byte pixels that tells what the encoder must
// choose between: uniform, opaque, and what kind of picture it is.
type scan4Result struct {
	uniform bool
	opaque  bool
	first   uint32 // the first pixel, as stored
	tone
}

// tone counts how pixels differ from their left neighbour: by a little
// (smooth: shading, gradients) or by a lot (sharp: edges between fills).
type tone struct{ smooth, sharp int }

// smoothStep is the largest channel difference still counted as smooth.
const smoothStep = 8

// smoothChange reports whether two packed 8-bit RGBA pixels (either
// channel order) differ by at most smoothStep in every channel.
func smoothChange(a, b uint32) bool {
	return max(absInt(int(a&0xff)-int(b&0xff)), absInt(int(a>>8&0xff)-int(b>>8&0xff)),
		absInt(int(a>>16&0xff)-int(b>>16&0xff)), absInt(int(a>>24)-int(b>>24))) <= smoothStep
}

func scan4(pix []byte, stride, w, h int) scan4Result {
	first := binary.LittleEndian.Uint32(pix)
	first2 := uint64(first)<<32 | uint64(first)
	var diff, or uint64
	and := ^uint64(0)
	var t tone
	count := func(v, prev uint32) {
		if smoothChange(v, prev) {
			t.smooth++
		} else {
			t.sharp++
		}
	}
	for y := range h {
		row := pix[y*stride : y*stride+4*w]
		prev := binary.LittleEndian.Uint32(row)
		x := 0
		// Two pixels per load; maps are mostly runs, where both equal
		// the pixel on their left.
		for ; x+8 <= len(row); x += 8 {
			q := load64(row[x:])
			diff |= q ^ first2
			and &= q
			or |= q
			if q != q<<32|uint64(prev) {
				lo, hi := uint32(q), uint32(q>>32)
				if lo != prev {
					count(lo, prev)
				}
				if hi != lo {
					count(hi, lo)
				}
			}
			prev = uint32(q >> 32)
		}
		if x < len(row) {
			v := binary.LittleEndian.Uint32(row[x:])
			q := uint64(v)<<32 | uint64(v)
			diff |= q ^ first2
			and &= q
			or |= q
			if v != prev {
				count(v, prev)
			}
		}
	}
	return scan4Result{
		// All pixels the same, or all fully transparent whatever their
		// colour bytes.
		uniform: diff == 0 || (or>>24|or>>56)&0xff == 0,
		opaque:  (and>>24)&(and>>56)&0xff == 0xff,
		first:   first,
		tone:    t,
	}
}

// filterHint is filterEstimate's verdict on a tile.
type filterHint uint8

const (
	hintNone   filterHint = iota // unfiltered rows will deflate smaller
	hintFilter                   // Up-filtered rows will
	hintUnsure                   // try both on a band of rows
)

// chooseFilter reads a tile's tone. Measured tile by tile, unfiltered
// against filtered, on MapServer tiles and on synthetic maps, relief and
// a map over relief (the sets of BenchmarkPNG; TestPNGEstimateOnRealTiles
// pins the verdicts): where sharp changes are at least an eighth of the
// smooth ones (flat fills, antialiased edges, text, a map over relief)
// None won on every tile, by 10-30 %; where a fifth of the pixels change
// smoothly and hardly any sharply (hillshade) Up won by 10-20 %; between
// (zoomed-in, very smooth relief) either won by up to 20 %, so a band of
// rows decides.
func chooseFilter(t tone, pixels int) filterHint {
	switch {
	case t.smooth < 8*t.sharp:
		return hintNone
	case 5*t.smooth >= pixels:
		return hintFilter
	}
	return hintUnsure
}

// encode4 encodes 4-byte pixels (premultiplied RGBA when premul, else
// NRGBA), pix starting at the tile's top-left pixel.
func (s *scratch) encode4(dst *bytes.Buffer, pix []byte, stride, w, h int, premul bool, set pngSettings) error {
	nrgbaOf := func(k uint32) nrgba {
		if premul {
			return unpremultiply(uint8(k), uint8(k>>8), uint8(k>>16), uint8(k>>24))
		}
		return packNRGBA(uint8(k), uint8(k>>8), uint8(k>>16), uint8(k>>24))
	}
	// Palettizing first: most map tiles have ≤ 256 colours, and then this
	// is the only pass over the pixels (it finds uniform tiles too).
	if !set.trueColor {
		if n := s.palettize(pix, stride, w, h); n == 1 {
			writeUniform(dst, nrgbaOf(s.pal.colors[0]), w, h)
			return nil
		} else if n > 0 {
			for i, k := range s.pal.colors[:n] {
				s.plte[i] = nrgbaOf(k)
			}
			s.writePaletted(dst, w, h, n, set)
			return nil
		}
	}
	st := scan4(pix, stride, w, h)
	if st.uniform {
		writeUniform(dst, nrgbaOf(st.first), w, h)
		return nil
	}

	ct, bpp := uint8(ctRGBA), 4
	if st.opaque {
		// No alpha channel: a quarter less to deflate.
		ct, bpp = ctRGB, 3
	}
	u := s.unfiltered(h, bpp*w)
	for y := range h {
		src := pix[y*stride : y*stride+4*w]
		out := u[y*(bpp*w+1)+1 : (y+1)*(bpp*w+1)]
		switch {
		case st.opaque:
			dropAlpha(out, src)
		case premul:
			for x := 0; x < len(src); x += 4 {
				p := src[x : x+4 : x+4]
				c := binary.LittleEndian.Uint32(p)
				if p[3] != 0xff {
					c = uint32(unpremultiply(p[0], p[1], p[2], p[3]))
				}
				binary.LittleEndian.PutUint32(out[x:], c)
			}
		default:
			copy(out, src)
		}
	}
	writeHeader(dst, w, h, 8, ct)
	s.writeFiltered(dst, u, h, bpp*w, bpp, set, chooseFilter(st.tone, w*h))
	writeEnd(dst)
	return nil
}

// dropAlpha writes the RGB bytes of the RGBA pixels in src to out, four
// pixels (12 bytes) per two stores: a byte loop was a tenth of the
// encoding time of an opaque tile.
func dropAlpha(out, src []byte) {
	x, o := 0, 0
	for ; x+16 <= len(src); x, o = x+16, o+12 {
		p0 := uint64(binary.LittleEndian.Uint32(src[x:]))
		p1 := uint64(binary.LittleEndian.Uint32(src[x+4:]))
		p2 := uint64(binary.LittleEndian.Uint32(src[x+8:]))
		p3 := binary.LittleEndian.Uint32(src[x+12:])
		binary.LittleEndian.PutUint64(out[o:], p0&0xffffff|(p1&0xffffff)<<24|p2<<48)
		binary.LittleEndian.PutUint32(out[o+8:], uint32(p2>>16)&0xff|p3<<8)
	}
	for ; x+4 <= len(src); x, o = x+4, o+3 {
		out[o], out[o+1], out[o+2] = src[x], src[x+1], src[x+2]
	}
}

// unfiltered returns s.raw sized for h rows of n bytes, each after a
// filter type byte of None: the rows are converted straight into the
// layout deflate reads, so unfiltered tiles (most of them) take no
// further copy.
func (s *scratch) unfiltered(h, n int) []byte {
	s.raw = grow(s.raw, h*(n+1))
	for y := range h {
		s.raw[y*(n+1)] = ftNone
	}
	return s.raw
}

// writeFiltered writes the IDAT of u, h unfiltered rows of n bytes laid
// out by s.unfiltered, bpp bytes per pixel, per set.filter; hint is
// filterEstimate's verdict.
func (s *scratch) writeFiltered(dst *bytes.Buffer, u []byte, h, n, bpp int, set pngSettings, hint filterHint) {
	r := rowSet{pix: u[1:], stride: n + 1, n: n, h: h, bpp: bpp}
	if len(s.zero) < n {
		s.zero = make([]byte, n)
	}
	ft := set.filter
	if ft == filterEstimate {
		ft = filterNone
		switch hint {
		case hintFilter:
			ft = filterUp
		case hintUnsure:
			ft = s.bandTrial(u, r, set.toneLevel)
		}
	}
	switch ft {
	case filterNone:
		s.writeFlatIDAT(dst, u, set)
	case filterUp, filterAdaptive:
		writeIDAT(dst, s.filtered(r, ft), set.toneLevel)
	case filterTrial:
		start := dst.Len()
		s.writeFlatIDAT(dst, u, set)
		for _, ft := range [...]filterStrategy{filterUp, filterAdaptive} {
			s.trial.Reset()
			writeIDAT(&s.trial, s.filtered(r, ft), set.toneLevel)
			if s.trial.Len() < dst.Len()-start {
				dst.Truncate(start)
				dst.Write(s.trial.Bytes())
			}
		}
	}
}

// filtered returns r's rows filtered by ft (filterUp or filterAdaptive)
// in s.raw2.
func (s *scratch) filtered(r rowSet, ft filterStrategy) []byte {
	s.raw2 = grow(s.raw2, r.h*(r.n+1))
	if ft == filterUp {
		filterRows(s.raw2, r, ftUp, s.zero)
	} else {
		s.tmp = grow(s.tmp, 4*r.n)
		adaptiveRows(s.raw2, r, s.zero, s.tmp)
	}
	return s.raw2
}

// writeFlatIDAT writes unfiltered or paletted rows at set.flatLevel, or
// at set.flatAlso where that comes out smaller.
func (s *scratch) writeFlatIDAT(dst *bytes.Buffer, raw []byte, set pngSettings) {
	start := dst.Len()
	writeIDAT(dst, raw, set.flatLevel)
	if set.flatAlso == 0 {
		return
	}
	s.trial.Reset()
	writeIDAT(&s.trial, raw, set.flatAlso)
	if s.trial.Len() < dst.Len()-start {
		dst.Truncate(start)
		dst.Write(s.trial.Bytes())
	}
}

// bandTrial compresses a band of rows from the middle of the tile both
// unfiltered and Up-filtered and says which came out smaller.
func (s *scratch) bandTrial(u []byte, r rowSet, level int) filterStrategy {
	const bandRows = 64
	band, y0 := r, 0
	if r.h > bandRows {
		y0 = (r.h - bandRows) / 2
		band.pix = r.pix[y0*r.stride:]
		band.h = bandRows
	}
	s.trial.Reset()
	writeIDAT(&s.trial, u[y0*r.stride:(y0+band.h)*r.stride], level)
	none := s.trial.Len()
	// The band's first row is Up-filtered against the zero row rather
	// than the real one above: a small bias against Up, on one row of 64.
	s.trial.Reset()
	writeIDAT(&s.trial, s.filtered(band, filterUp), level)
	if s.trial.Len() < none {
		return filterUp
	}
	return filterNone
}

// encodeGray writes an 8-bit gray tile as gray (no palette needed).
func (s *scratch) encodeGray(dst *bytes.Buffer, g *image.Gray, set pngSettings) error {
	b := g.Rect
	w, h := b.Dx(), b.Dy()
	pix := g.Pix[g.PixOffset(b.Min.X, b.Min.Y):]
	r := rowSet{pix: pix, stride: g.Stride, n: w, h: h, bpp: 1}
	v := pix[0]
	uniform := true
	var t tone
	for y := range h {
		row := r.row(y)
		prev := row[0]
		for _, c := range row {
			uniform = uniform && c == v
			if c != prev {
				if absInt(int(c)-int(prev)) <= smoothStep {
					t.smooth++
				} else {
					t.sharp++
				}
				prev = c
			}
		}
	}
	if uniform {
		writeUniform(dst, packNRGBA(v, v, v, 0xff), w, h)
		return nil
	}
	u := s.unfiltered(h, w)
	for y := range h {
		copy(u[y*(w+1)+1:], r.row(y))
	}
	writeHeader(dst, w, h, 8, ctGray)
	s.writeFiltered(dst, u, h, w, 1, set, chooseFilter(t, w*h))
	writeEnd(dst)
	return nil
}

// encodePaletted writes a paletted source with only the palette entries
// its pixels use (a metatile's palette often has 256 entries, a tile a
// few: PLTE and tRNS would dominate a small tile, and fewer entries allow
// 1, 2 or 4 bits per pixel), identical colours merged.
func (s *scratch) encodePaletted(dst *bytes.Buffer, t *image.Paletted, set pngSettings) error {
	if len(t.Palette) > 256 {
		return fmt.Errorf("palette has %d colours, PNG allows 256", len(t.Palette))
	}
	b := t.Rect
	w, h := b.Dx(), b.Dy()
	var used [256]bool
	for y := range h {
		off := t.PixOffset(b.Min.X, b.Min.Y+y)
		for _, i := range t.Pix[off : off+w] {
			used[i] = true
		}
	}
	// Map each used entry to a merged entry of s.plte.
	var remap [256]uint8
	ps := &s.pal
	ps.reset()
	for i, u := range used {
		if !u {
			continue
		}
		if i >= len(t.Palette) || t.Palette[i] == nil {
			return errors.New("pixel refers to no palette colour")
		}
		c := color.NRGBAModel.Convert(t.Palette[i]).(color.NRGBA)
		k := uint32(packNRGBA(c.R, c.G, c.B, c.A))
		e, _ := ps.index(k)
		remap[i] = e
	}
	n := ps.n
	if n == 1 {
		writeUniform(dst, nrgba(ps.colors[0]), w, h)
		return nil
	}
	for i, k := range ps.colors[:n] {
		s.plte[i] = nrgba(k)
	}
	identity := true // as for a quantized tile: every entry used, each once
	for i, u := range used {
		identity = identity && (!u || remap[i] == uint8(i))
	}
	if off := t.PixOffset(b.Min.X, b.Min.Y); identity && t.Stride == w {
		// The tile's own indexes are the ones to write: no copy.
		own := s.idx
		s.idx = t.Pix[off : off+w*h]
		s.writePaletted(dst, w, h, n, set)
		s.idx = own
		return nil
	}
	s.idx = grow(s.idx, w*h)
	for y := range h {
		off := t.PixOffset(b.Min.X, b.Min.Y+y)
		out := s.idx[y*w : (y+1)*w]
		for x, i := range t.Pix[off : off+w] {
			out[x] = remap[i]
		}
	}
	s.writePaletted(dst, w, h, n, set)
	return nil
}

// writePaletted writes s.idx (w indexes per row into s.plte[:n]) as a
// paletted PNG of the fewest bits per pixel that hold n entries.
func (s *scratch) writePaletted(dst *bytes.Buffer, w, h, n int, set pngSettings) {
	// Translucent entries first: tRNS then ends at the last of them
	// instead of running through the opaque ones.
	var order [256]uint8
	var plte [3 * 256]byte
	var trns [256]byte
	nt := 0
	for i, c := range s.plte[:n] {
		if c.a() != 0xff {
			order[i] = uint8(nt)
			nt++
		}
	}
	no := nt
	for i, c := range s.plte[:n] {
		if c.a() == 0xff {
			order[i] = uint8(no)
			no++
		}
	}
	filtered := false
	if n > paletteFilterMin {
		// Whether filters pay shows in how the tile's colours change from
		// pixel to pixel: a flat map changes seldom and sharply, a shaded
		// relief at every other pixel and by a level or two. Only a tile
		// between the two is worth compressing a band of both ways.
		switch sm := s.smoothShare(w, h); {
		case sm >= toneShare:
			order, filtered = s.lightnessOrder(n), true
		case sm >= flatShare:
			if lo := s.lightnessOrder(n); s.filterPays(order, lo, w, h, set) {
				order, filtered = lo, true
			}
		}
	}
	for i, c := range s.plte[:n] {
		j := int(order[i])
		plte[3*j], plte[3*j+1], plte[3*j+2] = c.r(), c.g(), c.b()
		trns[j] = c.a()
	}

	depth := 8
	switch {
	case n <= 2:
		depth = 1
	case n <= 4:
		depth = 2
	case n <= 16:
		depth = 4
	}
	rowBytes := (w*depth + 7) / 8
	s.raw = grow(s.raw, h*(rowBytes+1))
	perByte := 8 / depth
	inOrder := true // order is the identity, as for a quantized tile
	for i := range n {
		inOrder = inOrder && order[i] == uint8(i)
	}
	for y := range h {
		in := s.idx[y*w : (y+1)*w]
		out := s.raw[y*(rowBytes+1) : (y+1)*(rowBytes+1)]
		out[0] = ftNone
		out = out[1:]
		if depth == 8 {
			if inOrder {
				copy(out, in)
				continue
			}
			for x, i := range in {
				out[x] = order[i]
			}
			continue
		}
		clear(out)
		for x, i := range in {
			shift := uint(8 - depth*(x%perByte+1))
			out[x/perByte] |= order[i] << shift
		}
	}

	writeHeader(dst, w, h, uint8(depth), ctPalette)
	writeChunk(dst, "PLTE", plte[:3*n])
	if nt > 0 {
		writeChunk(dst, "tRNS", trns[:nt])
	}
	if filtered {
		s.raw2 = grow(s.raw2, h*(w+1))
		s.adaptiveIndexes(s.raw2, s.raw, w, h)
		writeIDAT(dst, s.raw2, set.toneLevel)
	} else {
		s.writeFlatIDAT(dst, s.raw, set)
	}
	writeEnd(dst)
}

// paletteFilterMin is the fewest palette entries for which filtered rows
// are tried: quantized continuous tone (shaded relief) has many, flat
// maps few. Paletted rows are otherwise written unfiltered, as the PNG
// spec advises. (A variable for tests.)
var paletteFilterMin = 64

// flatShare and toneShare bound smoothShare where writePaletted tries
// filtered rows against plain ones. Measured (2026-11-29): the tiles of
// the MapServer testdata and of the bench sets' maps lie at 0.03 and
// below, where the trial never chose filters; quantized shaded relief
// (three level-4 metatiles of test:relief) from 0.39 up, where it chose
// them on 43 of 48 tiles, and filtering all 48 made them 0.2–0.7 %
// smaller than the trial's choices did; the synthetic topographic maps
// lie between (0.03–0.34), where the trial mostly declines, the
// synthetic hillshade at 0.53 and above. Skipping the trial saves an
// eighth of a png8 metatile's encoding on the mosaic and on the relief.
// (Variables for tests.)
var flatShare, toneShare = 0.1, 0.45

// smoothShare is the share of s.idx's pixels that differ from the pixel
// on their left by at most smoothStep in every channel of their palette
// entries (s.plte): the changes that filtering in lightness order turns
// into small residuals. It is counted on every smoothRowStep-th row.
func (s *scratch) smoothShare(w, h int) float64 {
	smooth, rows := 0, 0
	for y := 0; y < h; y += smoothRowStep {
		rows++
		row := s.idx[y*w : (y+1)*w]
		prev := row[0]
		for _, i := range row[1:] {
			if i == prev {
				continue
			}
			if smoothChange(uint32(s.plte[i]), uint32(s.plte[prev])) {
				smooth++
			}
			prev = i
		}
	}
	return float64(smooth) / float64(w*rows)
}

// smoothRowStep: smoothShare reads one row in this many. Every row cost
// 4 % of a png8 metatile's time on the mosaic; one in four leaves every
// choice, and so every byte, of the bench sets and of a relief metatile
// as it was (one in eight changed three relief tiles).
const smoothRowStep = 4

// lightnessOrder orders s.plte[:n] translucent entries first (so that
// tRNS stays short), each group from dark to light: on shaded relief and
// gradients neighbouring pixels then get neighbouring indexes, which
// filters turn into small residuals.
func (s *scratch) lightnessOrder(n int) [256]uint8 {
	var byLight [256]uint8
	for i := range n {
		byLight[i] = uint8(i)
	}
	light := func(c nrgba) int { return 299*int(c.r()) + 587*int(c.g()) + 114*int(c.b()) }
	slices.SortStableFunc(byLight[:n], func(a, b uint8) int {
		ca, cb := s.plte[a], s.plte[b]
		if ta, tb := ca.a() != 0xff, cb.a() != 0xff; ta != tb {
			if ta {
				return -1
			}
			return 1
		}
		return light(ca) - light(cb)
	})
	var order [256]uint8
	for j, i := range byLight[:n] {
		order[i] = uint8(j)
	}
	return order
}

// filterPays compresses a band of 64 rows from the middle of the tile
// (s.idx) unfiltered in the first-seen order and with adaptive filters in
// the lightness order, and says whether the filters came out smaller. On
// quantized shaded relief they save about a seventh; on flat maps they
// cost bytes, and the lightness order alone does too (a few percent with
// this deflate), so it is only used with the filters.
func (s *scratch) filterPays(order, light [256]uint8, w, h int, set pngSettings) bool {
	const bandRows = 64
	y0, bh := 0, h
	if h > bandRows {
		y0, bh = (h-bandRows)/2, bandRows
	}
	s.tmp = grow(s.tmp, 2*bh*(w+1))
	plain, lit := s.tmp[:bh*(w+1)], s.tmp[bh*(w+1):]
	for y := range bh {
		in := s.idx[(y0+y)*w : (y0+y+1)*w]
		p, l := plain[y*(w+1):(y+1)*(w+1)], lit[y*(w+1):(y+1)*(w+1)]
		p[0], l[0] = ftNone, ftNone
		for x, i := range in {
			p[1+x], l[1+x] = order[i], light[i]
		}
	}
	s.trial.Reset()
	writeIDAT(&s.trial, plain, set.flatLevel)
	none := s.trial.Len()
	s.raw2 = grow(s.raw2, bh*(w+1))
	s.adaptiveIndexes(s.raw2, lit, w, bh)
	s.trial.Reset()
	writeIDAT(&s.trial, s.raw2[:bh*(w+1)], set.toneLevel)
	// A clear margin: where the band says "about the same", the whole tile
	// is as likely to come out larger (0.3 % on the synthetic topographic
	// set without it).
	return s.trial.Len()*20 < none*19
}

// adaptiveIndexes filters h unfiltered rows of w 8-bit indexes (each
// after its filter byte, as writePaletted lays them out) into out.
func (s *scratch) adaptiveIndexes(out, raw []byte, w, h int) {
	if len(s.zero) < w {
		s.zero = make([]byte, w)
	}
	tmp := make([]byte, 4*w)
	adaptiveRows(out, rowSet{pix: raw[1:], stride: w + 1, n: w, h: h, bpp: 1}, s.zero, tmp)
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

func (ps *paletteSet) reset() {
	clear(ps.slot[:])
	ps.n = 0
}

// index returns k's index, adding it; ok is false when the set is full.
func (ps *paletteSet) index(k uint32) (uint8, bool) {
	i := (k * 0x9e3779b1) >> (32 - 10) // Fibonacci hashing into 1024 slots
	for {
		e := ps.slot[i]
		if e == 0 {
			if ps.n == 256 {
				return 0, false
			}
			ps.colors[ps.n] = k
			ps.n++
			ps.keys[i] = k
			ps.slot[i] = uint16(ps.n)
			return uint8(ps.n - 1), true
		}
		if ps.keys[i] == k {
			return uint8(e - 1), true
		}
		i = (i + 1) & (paletteSlots - 1)
	}
}

// palettize fills s.idx with the palette indexes of 4-byte pixels and
// s.pal.colors with the distinct colours as stored (all fully transparent
// ones as 0), returning their number, or 0 if there are more than 256.
// Colours are kept exactly: this is not quantisation.
func (s *scratch) palettize(pix []uint8, stride, w, h int) int {
	ps := &s.pal
	ps.reset()
	s.idx = grow(s.idx, w*h)
	last := paletteKey(binary.LittleEndian.Uint32(pix))
	lastIdx, _ := ps.index(last)
	last2 := uint64(last)<<32 | uint64(last)
	for y := range h {
		row := pix[y*stride : y*stride+4*w]
		out := s.idx[y*w : y*w+w]
		x := 0
		// Two pixels per load: map rasters are mostly runs of one colour.
		for ; x+2 <= w; x += 2 {
			q := load64(row[4*x:])
			if q == last2 {
				out[x], out[x+1] = lastIdx, lastIdx
				continue
			}
			for j := range 2 {
				if k := paletteKey(uint32(q >> (32 * j))); k != last {
					i, ok := ps.index(k)
					if !ok {
						return 0
					}
					last, lastIdx, last2 = k, i, uint64(k)<<32|uint64(k)
				}
				out[x+j] = lastIdx
			}
		}
		if x < w {
			if k := paletteKey(binary.LittleEndian.Uint32(row[4*x:])); k != last {
				i, ok := ps.index(k)
				if !ok {
					return 0
				}
				last, lastIdx, last2 = k, i, uint64(k)<<32|uint64(k)
			}
			out[x] = lastIdx
		}
	}
	return ps.n
}

// paletteKey maps all fully transparent pixels to one key whatever their
// colour bytes: one palette entry is enough for them.
func paletteKey(k uint32) uint32 {
	if k>>24 == 0 {
		return 0
	}
	return k
}
