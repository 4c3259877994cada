package imaging

import "encoding/binary"

// PNG row filters (PNG spec §9). Each scanline is stored as a filter type
// byte followed by the row transformed by that filter; which filter helps
// deflate depends on the picture. Sub, Up and Average work on 8 bytes at a
// time (SWAR): Go does not vectorise, and a byte loop costs as much as
// the fast deflate levels themselves.

const (
	ftNone    = 0
	ftSub     = 1
	ftUp      = 2
	ftAverage = 3
	ftPaeth   = 4
)

// rowSet addresses h rows of n bytes each, stride bytes apart: either a
// source image's own pixels (no copy) or a converted copy.
type rowSet struct {
	pix       []byte
	stride, n int
	h         int
	bpp       int // bytes per complete pixel, the filters' left distance
}

func (r rowSet) row(y int) []byte { return r.pix[y*r.stride : y*r.stride+r.n] }

// filterRows lays the rows out, each filtered with ft: out must hold
// h*(n+1) bytes; zero at least n zero bytes (the row above the first).
func filterRows(out []byte, r rowSet, ft uint8, zero []byte) {
	prev := zero[:r.n]
	for y := range r.h {
		cur := r.row(y)
		o := out[y*(r.n+1) : (y+1)*(r.n+1)]
		o[0] = ft
		applyFilter(o[1:], cur, prev, r.bpp, ft)
		prev = cur
	}
}

// adaptiveRows filters every row with the filter that minimises the sum
// of its bytes taken as signed magnitudes: the heuristic of libpng and of
// image/png, good on photographic and shaded content. tmp must hold 4n
// bytes.
func adaptiveRows(out []byte, r rowSet, zero, tmp []byte) {
	prev := zero[:r.n]
	cand := [5][]byte{ftSub: tmp[:r.n], ftUp: tmp[r.n : 2*r.n], ftAverage: tmp[2*r.n : 3*r.n], ftPaeth: tmp[3*r.n : 4*r.n]}
	for y := range r.h {
		cur := r.row(y)
		cand[ftNone] = cur
		best, bestSum := uint8(ftNone), absSum(cur)
		for ft := uint8(ftSub); ft <= ftPaeth; ft++ {
			applyFilter(cand[ft], cur, prev, r.bpp, ft)
			if s := absSum(cand[ft]); s < bestSum {
				best, bestSum = ft, s
			}
		}
		o := out[y*(r.n+1) : (y+1)*(r.n+1)]
		o[0] = best
		copy(o[1:], cand[best])
		prev = cur
	}
}

const (
	hiBits  = 0x8080808080808080
	lo7Bits = 0x7f7f7f7f7f7f7f7f
	lanes16 = 0x00ff00ff00ff00ff
)

// subBytes subtracts each byte of y from the byte of x, modulo 256.
func subBytes(x, y uint64) uint64 {
	return ((x | hiBits) - (y &^ hiBits)) ^ ((x ^ ^y) & hiBits)
}

// avgBytes is floor((x+y)/2) per byte.
func avgBytes(x, y uint64) uint64 {
	return (x & y) + ((x ^ y) >> 1 & lo7Bits)
}

func load64(b []byte) uint64     { return binary.LittleEndian.Uint64(b) }
func store64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// absSum is the sum of |int8(c)| over b: the filter heuristic's score.
func absSum(b []byte) int {
	total := 0
	for len(b) >= 8 {
		// 16-bit lanes take 255 words (2 bytes of ≤128 each) before they
		// could overflow.
		k := min(len(b)/8, 255)
		var acc uint64
		for j := range k {
			x := load64(b[8*j:])
			neg := subBytes(0, x)
			m := (x & hiBits) >> 7 * 0xff // 0xff where the byte is negative
			a := x&^m | neg&m
			acc += a&lanes16 + a>>8&lanes16
		}
		total += int(acc&0xffff + acc>>16&0xffff + acc>>32&0xffff + acc>>48)
		b = b[8*k:]
	}
	for _, c := range b {
		total += abs8(c)
	}
	return total
}

func abs8(x uint8) int {
	v := int(int8(x))
	m := v >> 63
	return (v ^ m) - m
}

func absInt(v int) int {
	m := v >> 63
	return (v ^ m) - m
}

// paeth is the Paeth predictor of the byte with left a, above b and
// upper-left c, written with selects rather than branches: on shaded
// relief the branches are unpredictable.
func paeth(a, b, c uint8) uint8 {
	pa := int(b) - int(c) // |p-a| with p = a+b-c
	pb := int(a) - int(c) // |p-b|
	pc := absInt(pa + pb) // |p-c|
	pa, pb = absInt(pa), absInt(pb)
	pred, best := a, pa
	if pb < best {
		pred, best = b, pb
	}
	if pc < best {
		pred = c
	}
	return pred
}

// applyFilter writes cur filtered with ft (prev is the unfiltered row
// above) to out.
func applyFilter(out, cur, prev []byte, bpp int, ft uint8) {
	n := len(cur)
	out, prev = out[:n], prev[:n]
	switch ft {
	case ftNone:
		copy(out, cur)
	case ftSub:
		copy(out[:bpp], cur[:bpp])
		i := bpp
		for ; i+8 <= n; i += 8 {
			store64(out[i:], subBytes(load64(cur[i:]), load64(cur[i-bpp:])))
		}
		for ; i < n; i++ {
			out[i] = cur[i] - cur[i-bpp]
		}
	case ftUp:
		i := 0
		for ; i+8 <= n; i += 8 {
			store64(out[i:], subBytes(load64(cur[i:]), load64(prev[i:])))
		}
		for ; i < n; i++ {
			out[i] = cur[i] - prev[i]
		}
	case ftAverage:
		for i := 0; i < bpp; i++ {
			out[i] = cur[i] - prev[i]>>1
		}
		i := bpp
		for ; i+8 <= n; i += 8 {
			store64(out[i:], subBytes(load64(cur[i:]), avgBytes(load64(cur[i-bpp:]), load64(prev[i:]))))
		}
		for ; i < n; i++ {
			out[i] = cur[i] - uint8((int(cur[i-bpp])+int(prev[i]))>>1)
		}
	case ftPaeth:
		for i := 0; i < bpp; i++ {
			out[i] = cur[i] - prev[i]
		}
		for i := bpp; i < n; i++ {
			out[i] = cur[i] - paeth(cur[i-bpp], prev[i], prev[i-bpp])
		}
	}
}
