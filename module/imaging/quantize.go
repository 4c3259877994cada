package imaging

import (
	"cmp"
	"encoding/binary"
	"image"
	"image/color"
	"image/draw"
	"math"
	"slices"
	"sync"
)

// The 8-bit PNG quantizer. Rendered maps are mostly flat fills, with a few
// thousand colours on their antialiased edges, text and shading; the
// palette is chosen over the tile's distinct colours weighted by pixel
// count, in three steps:
//
//  1. a histogram: each pixel's colour (non-premultiplied, every fully
//     transparent pixel one colour, as encodePNG stores them) is looked up
//     once per run in a hash table, and the pixel keeps its colour's
//     number, so mapping the tile later costs one table read per pixel;
//  2. a median cut that always splits the box of most squared error
//     (plain median cut splits the most populous box, which wastes
//     entries on fills), along its channel of most squared error, at
//     the value that leaves the least;
//  3. each colour mapped to its nearest entry, the search starting from
//     its box's (the entries are the boxes' means).
//
// A Lloyd (k-means) pass between 2 and 3, moving each entry to the mean
// of the colours nearest to it, was kept until 2026-11-29: it gained
// 0.32 dB (median PSNR) on the mosaic's testdata metatile, 0.16 on the
// all-layers one and 0.08 on a shaded relief, invisible at 44–59 dB and
// still 1.5–2 dB above MapCache's, for a third of the quantizing time
// (a second nearest-entry search over every colour); png8 seeds the
// mosaic 18 % faster without it.
//
// Squared error is summed over R, G and B as PSNR sums it, alpha weighing
// more (alphaWeight). Opaque, translucent and fully transparent colours
// are kept apart (each maps only to entries of its own kind while there
// is one), so an opaque tile stays opaque, a transparent background stays
// exactly transparent and fills never pick up alpha from the antialiased
// edges around them.

// quantize returns m as a paletted image of at most colors (2..256,
// clamped) entries of type color.NRGBA, with m's bounds. A tile of no more
// than colors distinct colours comes back exact. dither diffuses the
// error of pixels that have no (nearly) exact entry, Floyd–Steinberg at
// reduced strength; pixels that do have one, fills above all, neither
// take nor pass on error, so fills stay flat. Safe for concurrent use.
func quantize(m image.Image, colors int, dither bool) *image.Paletted {
	colors = min(max(colors, 2), 256)
	b := m.Bounds()
	out := &image.Paletted{Pix: make([]uint8, b.Dx()*b.Dy()), Stride: b.Dx(), Rect: b}
	if b.Empty() {
		return out
	}
	q := quantizerPool.Get().(*quantizer)
	defer quantizerPool.Put(q)
	q.histogram(m)
	if len(q.bins) <= colors {
		q.exact(out)
		return out
	}
	q.medianCut(colors)
	q.mapColours(dither)
	q.finish(out, dither)
	return out
}

// ditherStrength scales the diffused error: full Floyd–Steinberg grains
// antialiased edges and costs bytes for little visible gain on maps.
const ditherStrength = 0.75

// alphaWeight is how much more a squared error in alpha counts than one
// in a colour channel when choosing and mapping to entries (PSNR weighs
// them alike). Translucent pixels are few, on antialiased edges, and
// often of many colours; weighed alike, a pixel of alpha 7 mapped to an
// entry of alpha 40 on a test disc, a visible halo. 4 (twice the error in
// amplitude) kept alpha within 32 there; opaque tiles are unaffected.
const alphaWeight = 4

// weight is each channel's weight in squared error.
var channelWeight = [4]float64{1, 1, 1, alphaWeight}

// nearExact is the largest squared RGBA distance at which a pixel counts as
// mapped exactly when dithering: a fill whose entry, its box's mean, is a
// level or two off must not start a dither pattern.
const nearExact = 12

// quantizer is one call's working memory, pooled: tiles are quantized by
// the thousand while seeding.
type quantizer struct {
	read   pixelReader
	row    []nrgba
	w, h   int
	ids    []int32  // per pixel: its colour's index in bins
	table  []uint64 // open addressing: colour<<32 | index+1; 0 = empty
	shift  uint
	bins   []nrgba // distinct colours
	count  []int32 // pixels per colour
	items  []qitem // median cut's copy of bins, reordered by it
	sorted []qitem // split's scratch: a box's items sorted by a channel
	boxes  []qbox
	pal    []qentry      // the palette being built
	near   nearestEntry  // pal sorted for nearest-entry searches
	cand   [256][]uint32 // per box: entries that may be nearer to its colours, distance<<8 | index
	assign []uint8       // per bin: its entry
	dist   []int32       // per bin: squared distance to its entry
	first  []int32       // per item: squared distance to its box's entry
	errs   []float32     // dithering: two rows of RGB error
}

var quantizerPool = sync.Pool{New: func() any { return new(quantizer) }}

// resize returns s with length n, reusing its array when it is big enough;
// the contents are stale.
func growTo[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// histogram fills bins, count and ids from m.
func (q *quantizer) histogram(m image.Image) {
	b := m.Bounds()
	q.w, q.h = b.Dx(), b.Dy()
	q.read.reset(m)
	q.row = growTo(q.row, q.w)
	q.ids = growTo(q.ids, q.w*q.h)
	q.bins, q.count = q.bins[:0], q.count[:0]
	// The table starts at the size the last tile needed: tiles of one
	// layer are alike, and growing the table rehashes every colour. Not
	// above 1<<16 slots (512 KB, cleared for every tile), which hold a
	// tile of 32,768 colours.
	bits := uint(12)
	if q.shift != 0 {
		bits = min(max(bits, 32-q.shift), 16)
	}
	q.resetTable(bits)
	switch m := m.(type) {
	case *image.NRGBA:
		q.histogramPix(m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, false)
		return
	case *image.RGBA:
		q.histogramPix(m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, true)
		return
	}
	for y := range q.h {
		q.read.row(q.row, b.Min.Y+y)
		ids := q.ids[y*q.w : (y+1)*q.w]
		last, id := q.row[0], q.lookup(q.row[0])
		for x, k := range q.row {
			if k != last {
				last, id = k, q.lookup(k)
			}
			ids[x] = id
			q.count[id]++
		}
	}
}

// histogramPix is histogram for the decoders' own pixel formats (NRGBA,
// and RGBA, premultiplied), read in place: a pixel is converted and
// looked up only where it differs from the one on its left, and counted
// by the run.
func (q *quantizer) histogramPix(pix []byte, stride int, premul bool) {
	for y := range q.h {
		row := pix[y*stride:][:4*q.w]
		ids := q.ids[y*q.w : (y+1)*q.w]
		last := binary.LittleEndian.Uint32(row)
		id, run := q.lookup(pixelOf(last, premul)), int32(0)
		for x := range ids {
			if k := binary.LittleEndian.Uint32(row[4*x:]); k != last {
				q.count[id] += run
				last, id, run = k, q.lookup(pixelOf(k, premul)), 0
			}
			ids[x] = id
			run++
		}
		q.count[id] += run
	}
}

// pixelOf is a little-endian RGBA pixel as the quantizer counts it.
func pixelOf(k uint32, premul bool) nrgba {
	if premul && k>>24 != 0xff {
		return unpremultiply(uint8(k), uint8(k>>8), uint8(k>>16), uint8(k>>24))
	}
	return straight(k)
}

// straight is an NRGBA pixel as the quantizer counts it: every fully
// transparent pixel is one colour, 0.
func straight(k uint32) nrgba {
	if k>>24 == 0 {
		return 0
	}
	return nrgba(k)
}

// resetTable empties the hash table, sized 1<<bits slots.
func (q *quantizer) resetTable(bits uint) {
	q.table = growTo(q.table, 1<<bits)
	clear(q.table)
	q.shift = 32 - bits
}

// lookup returns k's index in bins, adding it.
func (q *quantizer) lookup(k nrgba) int32 {
	mask := uint32(len(q.table) - 1)
	for i := uint32(k) * 0x9e3779b1 >> q.shift; ; i = (i + 1) & mask {
		e := q.table[i]
		if e == 0 {
			id := int32(len(q.bins))
			q.bins = append(q.bins, k)
			q.count = append(q.count, 0)
			q.table[i] = uint64(k)<<32 | uint64(id+1)
			if 2*len(q.bins) > len(q.table) {
				q.rehash()
			}
			return id
		}
		if nrgba(e>>32) == k {
			return int32(uint32(e)) - 1
		}
	}
}

// rehash doubles the table, keeping its load at most one half.
func (q *quantizer) rehash() {
	q.resetTable(33 - q.shift)
	mask := uint32(len(q.table) - 1)
	for id, k := range q.bins {
		i := uint32(k) * 0x9e3779b1 >> q.shift
		for q.table[i] != 0 {
			i = (i + 1) & mask
		}
		q.table[i] = uint64(k)<<32 | uint64(id+1)
	}
}

// exact writes out with the tile's own colours.
func (q *quantizer) exact(out *image.Paletted) {
	out.Palette = make(color.Palette, len(q.bins))
	for i, k := range q.bins {
		out.Palette[i] = color.NRGBA{k.r(), k.g(), k.b(), k.a()}
	}
	for i, id := range q.ids {
		out.Pix[i] = uint8(id)
	}
}

// class is what kind of alpha a colour has; colours map to entries of
// their own class.
type alphaClass uint8

const (
	clearClass alphaClass = iota // fully transparent (all one colour, 0)
	translucentClass
	opaqueClass
	alphaClasses
)

func classOf(a int32) alphaClass {
	switch a {
	case 0:
		return clearClass
	case 0xff:
		return opaqueClass
	}
	return translucentClass
}

// qitem is a distinct colour with its pixel count and its index in bins:
// 12 bytes, as the median cut moves them about.
type qitem struct {
	c     [4]uint8
	n, id int32
}

func itemOf(k nrgba, n, id int32) qitem {
	return qitem{[4]uint8{k.r(), k.g(), k.b(), k.a()}, n, id}
}

// boxStats are the weighted sums of a set of colours: enough for its mean
// and its squared error around the mean. Integers: exact, so a part of a
// split box has the box's sums less the other part's.
type boxStats struct {
	n       int64
	sum, sq [4]int64
}

func (s *boxStats) add(it qitem) {
	n := int64(it.n)
	s.n += n
	for ch, v := range it.c {
		s.sum[ch] += n * int64(v)
		s.sq[ch] += n * int64(v) * int64(v)
	}
}

// spread is Σ weight·sum²/n over the channels: the squared error is
// Σ weight·sq minus this.
func (s boxStats) spread() float64 {
	return spread4(s.n, s.sum[0], s.sum[1], s.sum[2], s.sum[3])
}

func (s boxStats) minus(t boxStats) boxStats {
	for ch := range s.sum {
		s.sum[ch] -= t.sum[ch]
		s.sq[ch] -= t.sq[ch]
	}
	s.n -= t.n
	return s
}

// sse1 is the weighted squared error of channel ch around its mean.
func (s boxStats) sse1(ch int) float64 {
	if s.n == 0 {
		return 0
	}
	sum := float64(s.sum[ch])
	return channelWeight[ch] * (float64(s.sq[ch]) - sum*sum/float64(s.n))
}

// sse is the squared error of the colours around their mean.
func (s boxStats) sse() float64 {
	return s.sse1(0) + s.sse1(1) + s.sse1(2) + s.sse1(3)
}

// qbox is a median cut box: items[lo:hi] with their boxStats and squared
// error around their mean.
type qbox struct {
	lo, hi int
	boxStats
	sse    float64
	sorted int // the channel items[lo:hi] are in order of, or -1
}

// medianCut fills pal with at most colors entries.
func (q *quantizer) medianCut(colors int) {
	// Items grouped by class, and one box per class, so that no split
	// mixes them; with too few colours for that, translucent and opaque
	// share one.
	q.items = q.items[:0]
	var start [alphaClasses + 1]int
	for cl := range alphaClasses {
		start[cl] = len(q.items)
		for i, k := range q.bins {
			if classOf(int32(k.a())) == cl {
				q.items = append(q.items, itemOf(k, q.count[i], int32(i)))
			}
		}
	}
	start[alphaClasses] = len(q.items)
	q.boxes = q.boxes[:0]
	q.addBox(start[clearClass], start[translucentClass])
	if colors < int(alphaClasses) {
		q.addBox(start[translucentClass], start[alphaClasses])
	} else {
		q.addBox(start[translucentClass], start[opaqueClass])
		q.addBox(start[opaqueClass], start[alphaClasses])
	}
	// Split the box of most squared error, until there are enough.
	for len(q.boxes) < colors {
		best, most := -1, 0.0
		for i := range q.boxes {
			if e := q.boxes[i].sse; e > most {
				best, most = i, e
			}
		}
		if best < 0 {
			break
		}
		lo, hi := q.split(q.boxes[best])
		q.boxes[best] = lo
		q.boxes = append(q.boxes, hi)
	}
	// Each colour's box is where mapColours starts looking for its entry.
	q.pal = q.pal[:0]
	q.assign = growTo(q.assign, len(q.bins))
	for j, bx := range q.boxes {
		q.pal = append(q.pal, entryOf(bx.boxStats))
		for _, it := range q.items[bx.lo:bx.hi] {
			q.assign[it.id] = uint8(j)
		}
	}
}

func newBox(lo, hi int, st boxStats) qbox {
	e := st.sse()
	if hi-lo < 2 {
		e = 0 // one colour: nothing to split
	}
	return qbox{lo: lo, hi: hi, boxStats: st, sse: e, sorted: -1}
}

// addBox adds the box of items[lo:hi], if not empty.
func (q *quantizer) addBox(lo, hi int) {
	if lo == hi {
		return
	}
	var st boxStats
	for _, it := range q.items[lo:hi] {
		st.add(it)
	}
	q.boxes = append(q.boxes, newBox(lo, hi, st))
}

// spread4 is Σ weight·sum²/n over the channels of n pixels whose
// channel sums are s0..s3: boxStats.spread, and the cut search's on sums
// kept in registers.
func spread4(n, s0, s1, s2, s3 int64) float64 {
	f0, f1, f2, f3 := float64(s0), float64(s1), float64(s2), float64(s3)
	return (f0*f0 + f1*f1 + f2*f2 + alphaWeight*f3*f3) / float64(n)
}

// split cuts bx in two along the channel of most squared error, where
// that leaves the least. The box's items are sorted by their value in
// that channel (a counting sort: two passes and a copy), then summed in
// order, the cut between each two values tried as the sums pass it.
// Sorting first keeps the sums in registers; summing each value's items
// into a table, as before, cost five read-modify-writes of memory an
// item and a partition afterwards.
func (q *quantizer) split(bx qbox) (qbox, qbox) {
	axis := 0
	for ch := range 4 {
		if bx.sse1(ch) > bx.sse1(axis) {
			axis = ch
		}
	}
	items := q.items[bx.lo:bx.hi]
	if bx.sorted != axis {
		q.sortBy(items, axis)
	}
	// The cut leaving the least squared error is the one with the
	// greatest Σ sum²/n over both parts and all channels: the squares of
	// the colours add up to the same whatever the cut.
	var n, s0, s1, s2, s3 int64
	t0, t1, t2, t3 := bx.sum[0], bx.sum[1], bx.sum[2], bx.sum[3]
	base, gain, mid := bx.spread(), -1.0, 0
	for i := 0; i < len(items); {
		v := items[i].c[axis]
		for ; i < len(items) && items[i].c[axis] == v; i++ {
			it := &items[i]
			w := int64(it.n)
			n += w
			s0 += w * int64(it.c[0])
			s1 += w * int64(it.c[1])
			s2 += w * int64(it.c[2])
			s3 += w * int64(it.c[3])
		}
		if i == len(items) {
			break // no cut above the last value
		}
		// The spread of both parts.
		if g := spread4(n, s0, s1, s2, s3) + spread4(bx.n-n, t0-s0, t1-s1, t2-s2, t3-s3) - base; g > gain {
			gain, mid = g, i
		}
	}
	// The full sums, squares too, of the smaller part; the other's are
	// the rest.
	lo, hi := 0, mid
	if mid > len(items)-mid {
		lo, hi = mid, len(items)
	}
	part := sumOf(items[lo:hi])
	mid += bx.lo
	var a, b qbox
	if lo == 0 {
		a, b = newBox(bx.lo, mid, part), newBox(mid, bx.hi, bx.minus(part))
	} else {
		a, b = newBox(bx.lo, mid, bx.minus(part)), newBox(mid, bx.hi, part)
	}
	// Both parts stay in order: their next cut along the same channel
	// (common: a map's colours vary most along one or two) sorts nothing.
	a.sorted, b.sorted = axis, axis
	return a, b
}

// sortBy sorts items by their value in channel ch: a counting sort, two
// passes and a copy.
func (q *quantizer) sortBy(items []qitem, ch int) {
	var at [257]int32 // where each value's items go
	first, last := uint8(255), uint8(0)
	for _, it := range items {
		v := it.c[ch]
		at[int(v)+1]++
		first, last = min(first, v), max(last, v)
	}
	for v := int(first) + 1; v <= int(last); v++ {
		at[v] += at[v-1]
	}
	sorted := growTo(q.sorted, len(items))
	q.sorted = sorted
	for _, it := range items {
		v := it.c[ch]
		sorted[at[v]] = it
		at[v]++
	}
	copy(items, sorted)
}

// sumOf is the boxStats of items, summed in registers.
func sumOf(items []qitem) boxStats {
	var n, s0, s1, s2, s3, q0, q1, q2, q3 int64
	for i := range items {
		it := &items[i]
		w := int64(it.n)
		c0, c1, c2, c3 := int64(it.c[0]), int64(it.c[1]), int64(it.c[2]), int64(it.c[3])
		n += w
		s0, s1, s2, s3 = s0+w*c0, s1+w*c1, s2+w*c2, s3+w*c3
		q0, q1, q2, q3 = q0+w*c0*c0, q1+w*c1*c1, q2+w*c2*c2, q3+w*c3*c3
	}
	return boxStats{n: n, sum: [4]int64{s0, s1, s2, s3}, sq: [4]int64{q0, q1, q2, q3}}
}

// qentry is a palette entry.
type qentry struct{ c [4]int32 }

// entryOf is the rounded mean of s.
func entryOf(s boxStats) qentry {
	var e qentry
	for ch := range e.c {
		e.c[ch] = int32(min(255, (2*s.sum[ch]+s.n)/(2*s.n)))
	}
	return e
}

// mapColours maps each distinct colour to its nearest entry of its class
// (assign, dist). The search starts from the colour's box's entry e, the
// box's mean: an entry nearer to c than e is within twice c's distance
// from e (√d(e,j) ≤ √d(e,c) + √d(c,j) < 2√d(e,c)), so each box keeps the
// entries within twice its farthest colour's distance, nearest first,
// and each of its colours tries them until they lie beyond twice its own.
// Exact; a colour tries 2.7 entries on the mosaic, 1.8 on a shaded relief
// (nearestEntry.find's walk tried 34 for each colour of the mosaic that
// the hint did not settle, half of them). The sorted palette that
// dithering searches is built only for it.
func (q *quantizer) mapColours(dither bool) {
	q.dist = growTo(q.dist, len(q.bins))
	if dither {
		q.near.build(q.pal)
	}
	// Each colour's distance to its box's entry, and 4 × the farthest.
	q.first = growTo(q.first, len(q.items))
	var reach [256]int32
	for b, bx := range q.boxes {
		e := q.pal[b].c
		far := int32(0)
		for i, it := range q.items[bx.lo:bx.hi] {
			d := qdist(itemColour(it), e)
			q.first[bx.lo+i] = d
			far = max(far, d)
		}
		reach[b] = 4 * far
	}
	var cl [256]alphaClass
	for j, e := range q.pal {
		cl[j] = classOf(e.c[3])
	}
	q.candidates(&reach, &cl)
	for b, bx := range q.boxes {
		cand := q.cand[b]
		sortCandidates(cand)
		first := q.first[bx.lo:bx.hi]
		for i, it := range q.items[bx.lo:bx.hi] {
			c := itemColour(it)
			if classOf(c[3]) != cl[b] {
				// A box of two classes (palettes of two or three
				// colours merge translucent and opaque).
				q.assign[it.id], q.dist[it.id] = q.nearestOfClass(c)
				continue
			}
			first := first[i]
			best, bi := first, uint8(b)
			for _, k := range cand {
				if int32(k>>8) >= 4*first {
					break
				}
				if d := qdist(c, q.pal[k&0xff].c); d < best {
					best, bi = d, uint8(k)
				}
			}
			q.assign[it.id], q.dist[it.id] = bi, best
		}
	}
}

// candidates fills cand[b] with the entries of b's class within
// reach[b] of entry b. The entries are walked in order of their value in
// the channel along which they spread most, outwards from b, until that
// channel alone puts them beyond reach. An entry looks at 39 % of the
// others on the mosaic, 1–9 % on the other bench sets, where a loop over
// all pairs measured each pair once (50 %).
func (q *quantizer) candidates(reach *[256]int32, cl *[256]alphaClass) {
	n := len(q.pal)
	var lo, hi [4]int32
	for ch := range 4 {
		lo[ch], hi[ch] = 255, 0
	}
	for _, e := range q.pal {
		for ch, v := range e.c {
			lo[ch], hi[ch] = min(lo[ch], v), max(hi[ch], v)
		}
	}
	axis, weight := 0, int32(1)
	for ch := 1; ch < 4; ch++ {
		w := int32(1)
		if ch == 3 {
			w = alphaWeight
		}
		if w*(hi[ch]-lo[ch])*(hi[ch]-lo[ch]) > weight*(hi[axis]-lo[axis])*(hi[axis]-lo[axis]) {
			axis, weight = ch, w
		}
	}
	// Entries by their value along axis, a counting sort.
	var at [257]int32
	for _, e := range q.pal {
		at[e.c[axis]+1]++
	}
	for v := 1; v <= 256; v++ {
		at[v] += at[v-1]
	}
	var order [256]uint8 // entries by value
	var rank [256]int32  // each entry's place in order
	for j, e := range q.pal {
		v := e.c[axis]
		order[at[v]], rank[j] = uint8(j), at[v]
		at[v]++
	}
	for b := range n {
		cand := q.cand[b][:0]
		e, r := q.pal[b].c, reach[b]
		for k := rank[b] - 1; k >= 0; k-- {
			j := order[k]
			if d := e[axis] - q.pal[j].c[axis]; weight*d*d >= r {
				break
			}
			if cl[j] == cl[b] {
				if d := qdist(e, q.pal[j].c); d < r {
					cand = append(cand, uint32(d)<<8|uint32(j))
				}
			}
		}
		for k := rank[b] + 1; k < int32(n); k++ {
			j := order[k]
			if d := q.pal[j].c[axis] - e[axis]; weight*d*d >= r {
				break
			}
			if cl[j] == cl[b] {
				if d := qdist(e, q.pal[j].c); d < r {
					cand = append(cand, uint32(d)<<8|uint32(j))
				}
			}
		}
		q.cand[b] = cand
	}
}

// sortCandidates sorts a box's candidates by distance (the high bits):
// by insertion when the list is short, as most are (13 entries on the
// mosaic).
func sortCandidates(c []uint32) {
	if len(c) > 32 {
		slices.Sort(c)
		return
	}
	for i := 1; i < len(c); i++ {
		v, j := c[i], i
		for ; j > 0 && c[j-1] > v; j-- {
			c[j] = c[j-1]
		}
		c[j] = v
	}
}

// nearestOfClass is the entry nearest to c among those of c's class, or
// among all when there is none, by exhaustive search.
func (q *quantizer) nearestOfClass(c [4]int32) (uint8, int32) {
	best, bi := int32(math.MaxInt32), -1
	for _, anyClass := range [2]bool{false, true} {
		for j, e := range q.pal {
			if anyClass || classOf(e.c[3]) == classOf(c[3]) {
				if d := qdist(c, e.c); d < best {
					best, bi = d, j
				}
			}
		}
		if bi >= 0 {
			break
		}
	}
	return uint8(bi), best
}

func itemColour(it qitem) [4]int32 {
	return [4]int32{int32(it.c[0]), int32(it.c[1]), int32(it.c[2]), int32(it.c[3])}
}

func colourOf(k nrgba) [4]int32 {
	return [4]int32{int32(k.r()), int32(k.g()), int32(k.b()), int32(k.a())}
}

// finish writes the palette (the entries some pixel uses) and the pixels.
// Without dithering the entries in use are those some colour maps to,
// and the pixels are written once, already renumbered.
func (q *quantizer) finish(out *image.Paletted, dither bool) {
	var used [256]bool
	if dither {
		q.dither(out)
		for _, p := range out.Pix {
			used[p] = true
		}
	} else {
		for _, j := range q.assign[:len(q.bins)] {
			used[j] = true
		}
	}
	// Entries with alpha first, as the PNG encoder orders them for a
	// short tRNS chunk: it then writes the indexes as they are.
	remap := identityMap
	out.Palette = make(color.Palette, 0, len(q.pal))
	for _, opaque := range [2]bool{false, true} {
		for j, e := range q.pal {
			if used[j] && (e.c[3] == 0xff) == opaque {
				remap[j] = uint8(len(out.Palette))
				out.Palette = append(out.Palette, color.NRGBA{uint8(e.c[0]), uint8(e.c[1]), uint8(e.c[2]), uint8(e.c[3])})
			}
		}
	}
	if !dither {
		for i, j := range q.assign[:len(q.bins)] {
			q.assign[i] = remap[j]
		}
		for i, id := range q.ids {
			out.Pix[i] = q.assign[id]
		}
	} else if remap != identityMap {
		for i, p := range out.Pix {
			out.Pix[i] = remap[p]
		}
	}
}

// identityMap maps every index to itself.
var identityMap = func() (m [256]uint8) {
	for i := range m {
		m[i] = uint8(i)
	}
	return m
}()

// dither maps the pixels with error diffusion: Floyd–Steinberg weights on
// R, G and B at ditherStrength, left to right. Alpha is not diffused: it
// decides which entries a pixel may map to.
func (q *quantizer) dither(out *image.Paletted) {
	w := q.w
	// Two rows of error, each with a pixel of margin on both sides.
	q.errs = growTo(q.errs, 2*3*(w+2))
	clear(q.errs)
	cur, next := q.errs[:3*(w+2)], q.errs[3*(w+2):]
	for y := range q.h {
		ids := q.ids[y*w : (y+1)*w]
		pix := out.Pix[y*w : (y+1)*w]
		for x, id := range ids {
			if q.dist[id] <= nearExact {
				pix[x] = q.assign[id]
				continue
			}
			c := colourOf(q.bins[id])
			e := cur[3*(x+1) : 3*(x+1)+3 : 3*(x+1)+3]
			for ch := range 3 {
				c[ch] = min(255, max(0, c[ch]+int32(e[ch]+0.5*sign(e[ch]))))
			}
			j, _ := q.near.find(c, int(q.assign[id]))
			pix[x] = j
			p := q.pal[j].c
			for ch := range 3 {
				d := float32(c[ch]-p[ch]) * (ditherStrength / 16)
				cur[3*(x+2)+ch] += 7 * d
				next[3*x+ch] += 3 * d
				next[3*(x+1)+ch] += 5 * d
				next[3*(x+2)+ch] += d
			}
		}
		cur, next = next, cur
		clear(next)
	}
}

func sign(v float32) float32 {
	if v < 0 {
		return -1
	}
	return 1
}

// nearest finds a colour's nearest palette entry. Entries are sorted by
// class, then by their projection on the palette's principal axis (where
// entries spread most); two colours whose projections differ by s are at
// least s apart, so the search walks out from the query's projection and
// stops on each side once s² exceeds the best squared distance found.
type nearestEntry struct {
	n    int
	axis [4]float32
	proj [256]float32
	c    [256][4]int32
	id   [256]uint8           // palette index of each sorted entry
	pos  [256]uint8           // sorted position of each palette index
	gap  [256]int32           // squared distance from each sorted entry to the nearest other of its class
	seg  [alphaClasses][2]int // each class's entries, proj[seg[cl][0]:seg[cl][1]]
}

func (s *nearestEntry) build(pal []qentry) {
	s.n = len(pal)
	s.axis = principalAxis(pal)
	type key struct {
		cl   alphaClass
		proj float32
		id   uint8
	}
	var keys [256]key
	for i, e := range pal {
		keys[i] = key{classOf(e.c[3]), s.project(e.c), uint8(i)}
	}
	slices.SortFunc(keys[:s.n], func(a, b key) int {
		if a.cl != b.cl {
			return int(a.cl) - int(b.cl)
		}
		return cmp.Compare(a.proj, b.proj)
	})
	s.seg = [alphaClasses][2]int{}
	for i, k := range keys[:s.n] {
		s.c[i], s.id[i], s.proj[i] = pal[k.id].c, k.id, k.proj
		s.pos[k.id] = uint8(i)
		if s.seg[k.cl][1] == 0 {
			s.seg[k.cl][0] = i
		}
		s.seg[k.cl][1] = i + 1
	}
	for _, seg := range s.seg {
		for i := seg[0]; i < seg[1]; i++ {
			s.gap[i] = 1 << 20
		}
		for i := seg[0]; i < seg[1]; i++ {
			for j := i + 1; j < seg[1]; j++ {
				d := qdist(s.c[i], s.c[j])
				s.gap[i], s.gap[j] = min(s.gap[i], d), min(s.gap[j], d)
			}
		}
	}
}

// project is c's position along the axis, in the space where qdist is
// the squared Euclidean distance (alpha scaled by √alphaWeight).
func (s *nearestEntry) project(c [4]int32) float32 {
	return s.axis[0]*float32(c[0]) + s.axis[1]*float32(c[1]) + s.axis[2]*float32(c[2]) + s.axis[3]*float32(alphaScale*c[3])
}

// alphaScale is √alphaWeight.
const alphaScale = 2

// principalAxis is the unit direction along which the entries vary most
// (alpha scaled as in project), by power iteration on their covariance.
func principalAxis(pal []qentry) [4]float32 {
	scaled := func(e qentry, ch int) float64 {
		if ch == 3 {
			return alphaScale * float64(e.c[3])
		}
		return float64(e.c[ch])
	}
	var mean [4]float64
	for _, e := range pal {
		for ch := range mean {
			mean[ch] += scaled(e, ch) / float64(len(pal))
		}
	}
	var cov [4][4]float64
	for _, e := range pal {
		for i := range 4 {
			for j := range 4 {
				cov[i][j] += (scaled(e, i) - mean[i]) * (scaled(e, j) - mean[j])
			}
		}
	}
	v := [4]float64{0.5, 0.5, 0.5, 0.5}
	for range 12 {
		var w [4]float64
		var norm float64
		for i := range 4 {
			for j := range 4 {
				w[i] += cov[i][j] * v[j]
			}
			norm += w[i] * w[i]
		}
		if norm == 0 {
			break
		}
		norm = math.Sqrt(norm)
		for i := range w {
			v[i] = w[i] / norm
		}
	}
	return [4]float32{float32(v[0]), float32(v[1]), float32(v[2]), float32(v[3])}
}

// find returns the entry nearest to c among those of c's class (all
// entries when there are none) and its squared distance. hint, when not
// negative, is an entry likely to be near (the mean of c's median cut
// box, or a dithered pixel's undithered entry): its distance bounds the
// search from the start.
func (s *nearestEntry) find(c [4]int32, hint int) (uint8, int32) {
	cl := classOf(c[3])
	lo, hi := s.seg[cl][0], s.seg[cl][1]
	best, bi := int32(1<<20), -1 // above any distance (7·255²)
	if lo == hi {
		// No entry of c's class (a palette of two or three colours
		// merges translucent and opaque): any entry, searched in full,
		// since the projections are sorted only within a class.
		for k := range s.n {
			if d := qdist(s.c[k], c); d < best {
				best, bi = d, k
			}
		}
		return s.id[bi], best
	}
	// The walk starts at the hint when there is one (the entry is
	// likely near c in the sort too), else where c's projection falls.
	l, r := -1, -1
	if hint >= 0 {
		if k := int(s.pos[hint]); k >= lo && k < hi {
			best, bi = qdist(s.c[k], c), k
			// No other entry can be nearer than the hint when c is
			// within half the distance from it to its nearest
			// neighbour (triangle inequality).
			if 4*best <= s.gap[k] {
				return s.id[k], best
			}
			l, r = k-1, k+1
		}
	}
	p := s.project(c)
	if bi < 0 {
		i, _ := slices.BinarySearch(s.proj[lo:hi], p)
		l, r = lo+i-1, lo+i
	}
	// Outwards, one step a side at a time. Two colours whose projections
	// differ by ds are at least ds apart, so a side ends at the first
	// entry beyond the bound, which only grows stricter (the margin
	// covers float32 rounding of the projections). From the hint that
	// holds too: a side that walks towards c's projection first passes
	// entries nearer to it in projection than the hint, or than any
	// entry found since, all within the bound.
	try := func(k int) bool {
		if ds := s.proj[k] - p; ds*ds > float32(best)+0.5 {
			return false
		}
		if d := qdist(s.c[k], c); d < best {
			best, bi = d, k
		}
		return true
	}
	for l >= lo || r < hi {
		if r < hi {
			if try(r) {
				r++
			} else {
				r = hi
			}
		}
		if l >= lo {
			if try(l) {
				l--
			} else {
				l = lo - 1
			}
		}
	}
	return s.id[bi], best
}

// qdist is the quantizer's squared distance, alpha weighted.
func qdist(a, b [4]int32) int32 {
	d0, d1, d2, d3 := a[0]-b[0], a[1]-b[1], a[2]-b[2], a[3]-b[3]
	return d0*d0 + d1*d1 + d2*d2 + alphaWeight*d3*d3
}

// dist4 is the plain squared distance, as PSNR counts it.
func dist4(a, b [4]int32) int32 {
	d0, d1, d2, d3 := a[0]-b[0], a[1]-b[1], a[2]-b[2], a[3]-b[3]
	return d0*d0 + d1*d1 + d2*d2 + d3*d3
}

// pixelReader reads rows of any image as packed non-premultiplied colours,
// as encodePNG stores them: every fully transparent pixel is 0, and
// premultiplied pixels are converted the way color.NRGBAModel does.
type pixelReader struct {
	m    image.Image
	pal  [256]nrgba // a Paletted image's palette; indexes past it read as 0
	rgba image.RGBA // one row of a YCbCr or Gray image, drawn
}

func (r *pixelReader) reset(m image.Image) {
	r.m = m
	if p, ok := m.(*image.Paletted); ok {
		r.pal = [256]nrgba{}
		for i, c := range p.Palette[:min(len(p.Palette), 256)] {
			if c != nil {
				n := color.NRGBAModel.Convert(c).(color.NRGBA)
				r.pal[i] = packNRGBA(n.R, n.G, n.B, n.A)
			}
		}
	}
}

// row reads the row at y (in m's coordinates) into dst, len(dst) being
// m's width.
func (r *pixelReader) row(dst []nrgba, y int) {
	b := r.m.Bounds()
	switch m := r.m.(type) {
	case *image.NRGBA:
		straightRow(dst, m.Pix[m.PixOffset(b.Min.X, y):])
	case *image.RGBA:
		premulRow(dst, m.Pix[m.PixOffset(b.Min.X, y):])
	case *image.Paletted:
		for x, i := range m.Pix[m.PixOffset(b.Min.X, y):][:len(dst)] {
			dst[x] = r.pal[i]
		}
	case *image.YCbCr, *image.Gray:
		// Opaque, so premultiplied loses nothing, and draw has fast
		// paths for them (a JPEG upstream gives YCbCr).
		rect := image.Rect(b.Min.X, y, b.Max.X, y+1)
		r.rgba.Pix = growTo(r.rgba.Pix, 4*len(dst))
		r.rgba.Stride, r.rgba.Rect = 4*len(dst), rect
		draw.Draw(&r.rgba, rect, r.m, rect.Min, draw.Src)
		premulRow(dst, r.rgba.Pix)
	default:
		// Pixel by pixel: through premultiplied 8-bit RGBA, translucent
		// colours would lose bits.
		for x := range dst {
			c := color.NRGBAModel.Convert(r.m.At(b.Min.X+x, y)).(color.NRGBA)
			dst[x] = packNRGBA(c.R, c.G, c.B, c.A)
		}
	}
}

func straightRow(dst []nrgba, pix []byte) {
	for x := range dst {
		dst[x] = straight(binary.LittleEndian.Uint32(pix[4*x:]))
	}
}

func premulRow(dst []nrgba, pix []byte) {
	for x := range dst {
		p := pix[4*x : 4*x+4 : 4*x+4]
		if p[3] == 0xff {
			dst[x] = nrgba(binary.LittleEndian.Uint32(p))
		} else {
			dst[x] = unpremultiply(p[0], p[1], p[2], p[3])
		}
	}
}
