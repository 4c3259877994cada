// Package jpegopt rewrites a baseline JPEG with Huffman tables built from
// the image's own symbol counts, the way libjpeg's optimize_coding and
// jpegtran -optimize do. The DCT coefficients are carried over bit for bit,
// so the decoded pixels are the same; only the entropy coding shrinks.
//
// Go's image/jpeg always writes the example tables of the JPEG standard
// (Annex K.3). Those fit an average photograph; a map tile, with its flat
// fills and few colours, uses a small part of them, and the four tables
// alone take 420 bytes of every tile. MapCache, MapServer and GDAL write
// optimized tables by default, so without this pass our JPEG and mixed
// tiles were 3–15 % larger than theirs at the same PSNR.
//
// Only what a sequential Huffman encoder writes is handled: SOF0 or SOF1
// with 8-bit samples, one scan holding every component, no restart
// interval. Anything else is reported as ErrUnsupported, and the caller
// keeps the input as it is.
package jpegopt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// ErrUnsupported reports a JPEG this package does not rewrite (progressive,
// arithmetic, restart markers, several scans). The input is valid as it is.
var ErrUnsupported = errors.New("jpegopt: unsupported JPEG layout")

// JPEG markers used here (ITU T.81 Table B.1).
const (
	markerSOI  = 0xd8
	markerEOI  = 0xd9
	markerSOF0 = 0xc0
	markerSOF1 = 0xc1
	markerDHT  = 0xc4
	markerSOS  = 0xda
	markerDRI  = 0xdd
)

// A Huffman table slot: class (0 DC, 1 AC) times 4 destination ids.
const slots = 8

func slotOf(class, id int) int { return class*4 + id }

type component struct {
	id     byte
	h, v   int
	dc, ac int // table slots, from the scan header
}

// huffTable is one table as a DHT segment gives it: the number of codes of
// each length 1..16 and the symbols in code order.
type huffTable struct {
	counts [16]int
	values []byte
	// Decoding, canonical codes (T.81 F.2.2.3): for each length the
	// largest code, and where that length's symbols start in values.
	maxCode  [17]int32
	minCode  [17]int32
	valIndex [17]int
	// lookup decodes codes of up to lookupBits bits in one step: the
	// symbol in the low byte and the code length above it, 0 for longer
	// codes.
	lookup  [1 << lookupBits]uint16
	defined bool
}

const lookupBits = 9

func (t *huffTable) prepare() error {
	code, k := int32(0), 0
	for l := 1; l <= 16; l++ {
		n := t.counts[l-1]
		t.valIndex[l] = k
		t.minCode[l] = code
		code += int32(n)
		k += n
		if n == 0 {
			t.maxCode[l] = -1
		} else {
			t.maxCode[l] = code - 1
		}
		if code > 1<<l {
			return errors.New("jpegopt: over-subscribed Huffman table")
		}
		code <<= 1
	}
	if k != len(t.values) {
		return errors.New("jpegopt: Huffman table counts and values disagree")
	}
	clear(t.lookup[:])
	code, k = 0, 0
	for l := 1; l <= lookupBits; l++ {
		for range t.counts[l-1] {
			// Every lookupBits-bit string that starts with this code.
			first := int(code) << (lookupBits - l)
			for i := range 1 << (lookupBits - l) {
				t.lookup[first+i] = uint16(l)<<8 | uint16(t.values[k])
			}
			code++
			k++
		}
		code <<= 1
	}
	return nil
}

// event is one coded symbol of the scan: the table slot (3 bits), the
// symbol (8 bits), and the raw bits that follow it (count in 4 bits, value
// in up to 16 bits). The raw bits are copied, never interpreted.
type event uint32

func makeEvent(slot int, symbol byte, nbits uint, bits uint32) event {
	return event(uint32(slot)<<29 | uint32(symbol)<<21 | uint32(nbits)<<16 | bits)
}

func (e event) slot() int       { return int(e >> 29) }
func (e event) symbol() byte    { return byte(e >> 21) }
func (e event) nbits() uint     { return uint(e>>16) & 0x1f }
func (e event) rawBits() uint32 { return uint32(e) & 0xffff }

var eventPool = sync.Pool{New: func() any { s := make([]event, 0, 1<<15); return &s }}

// Optimize returns src rewritten with optimal Huffman tables. Segments
// other than DHT are kept in order; the new tables go in one DHT segment
// just before the scan. src is not modified.
func Optimize(src []byte) ([]byte, error) {
	if len(src) < 4 || src[0] != 0xff || src[1] != markerSOI {
		return nil, errors.New("jpegopt: not a JPEG (no SOI marker)")
	}
	var (
		tables     [slots]huffTable
		comps      []component
		width      int
		height     int
		haveFrame  bool
		sosStart   int // offset of the SOS marker
		sosEnd     int // offset of the first entropy-coded byte
		dhtRemoved []([2]int)
	)
	pos := 2
	for sosStart == 0 {
		if pos+4 > len(src) || src[pos] != 0xff {
			return nil, errors.New("jpegopt: truncated or corrupt JPEG header")
		}
		m := src[pos+1]
		if m == 0xff { // fill byte
			pos++
			continue
		}
		if m == markerSOI || m == markerEOI || (m >= 0xd0 && m <= 0xd7) {
			return nil, ErrUnsupported
		}
		n := int(binary.BigEndian.Uint16(src[pos+2:]))
		if n < 2 || pos+2+n > len(src) {
			return nil, errors.New("jpegopt: truncated JPEG segment")
		}
		seg := src[pos+4 : pos+2+n]
		switch {
		case m == markerSOF0 || m == markerSOF1:
			if haveFrame || len(seg) < 6 || seg[0] != 8 {
				return nil, ErrUnsupported
			}
			height = int(binary.BigEndian.Uint16(seg[1:]))
			width = int(binary.BigEndian.Uint16(seg[3:]))
			nc := int(seg[5])
			if height == 0 || width == 0 || nc < 1 || nc > 4 || len(seg) != 6+3*nc {
				return nil, ErrUnsupported
			}
			for i := range nc {
				c := seg[6+3*i:]
				h, v := int(c[1]>>4), int(c[1]&15)
				if h < 1 || h > 4 || v < 1 || v > 4 {
					return nil, errors.New("jpegopt: bad sampling factors")
				}
				comps = append(comps, component{id: c[0], h: h, v: v})
			}
			haveFrame = true
		case m >= 0xc2 && m <= 0xcf && m != markerDHT && m != 0xc8:
			// Progressive, lossless, hierarchical or arithmetic frames,
			// and arithmetic conditioning (0xcc).
			return nil, ErrUnsupported
		case m == markerDRI:
			if len(seg) != 2 {
				return nil, errors.New("jpegopt: bad DRI segment")
			}
			if binary.BigEndian.Uint16(seg) != 0 {
				return nil, ErrUnsupported
			}
		case m == markerDHT:
			if err := parseDHT(seg, &tables); err != nil {
				return nil, err
			}
			dhtRemoved = append(dhtRemoved, [2]int{pos, pos + 2 + n})
		case m == markerSOS:
			if !haveFrame || len(seg) < 1 {
				return nil, ErrUnsupported
			}
			ns := int(seg[0])
			if ns != len(comps) || len(seg) != 1+2*ns+3 {
				return nil, ErrUnsupported
			}
			// Ss=0, Se=63, Ah=Al=0 for a sequential scan.
			if tail := seg[1+2*ns:]; tail[0] != 0 || tail[1] != 63 || tail[2] != 0 {
				return nil, ErrUnsupported
			}
			for i := range ns {
				sel := seg[1+2*i:]
				if sel[0] != comps[i].id {
					return nil, ErrUnsupported
				}
				dc, ac := int(sel[1]>>4), int(sel[1]&15)
				if dc > 3 || ac > 3 {
					return nil, errors.New("jpegopt: bad table selector")
				}
				comps[i].dc, comps[i].ac = slotOf(0, dc), slotOf(1, ac)
				if !tables[comps[i].dc].defined || !tables[comps[i].ac].defined {
					return nil, errors.New("jpegopt: scan uses an undefined Huffman table")
				}
			}
			sosStart = pos
			sosEnd = pos + 2 + n
		}
		pos += 2 + n
	}

	evp := eventPool.Get().(*[]event)
	defer func() { *evp = (*evp)[:0]; eventPool.Put(evp) }()
	events, dataEnd, err := decodeScan(src[sosEnd:], comps, width, height, &tables, (*evp)[:0])
	*evp = events
	if err != nil {
		return nil, err
	}
	dataEnd += sosEnd
	// Only EOI may follow the scan: a second scan would need its own
	// tables' counts, and trailing data is not ours to keep or drop.
	if dataEnd+2 != len(src) || src[dataEnd] != 0xff || src[dataEnd+1] != markerEOI {
		return nil, ErrUnsupported
	}

	var freq [slots][257]int
	for _, e := range events {
		freq[e.slot()][e.symbol()]++
	}
	var newTables [slots]huffTable
	var codes [slots]codeTable
	for s := range slots {
		if !tables[s].defined {
			continue
		}
		used := false
		for _, f := range freq[s][:256] {
			if f > 0 {
				used = true
				break
			}
		}
		if !used {
			continue // defined but not referenced by the scan: dropped
		}
		newTables[s] = optimalTable(&freq[s])
		codes[s] = codesOf(&newTables[s])
	}

	out := make([]byte, 0, len(src))
	// Header segments, without the old DHTs.
	last := 0
	for _, r := range dhtRemoved {
		out = append(out, src[last:r[0]]...)
		last = r[1]
	}
	out = append(out, src[last:sosStart]...)
	out = appendDHT(out, &newTables)
	out = append(out, src[sosStart:sosEnd]...)
	out = encodeEvents(out, events, &codes)
	out = append(out, 0xff, markerEOI)
	return out, nil
}

func parseDHT(seg []byte, tables *[slots]huffTable) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return errors.New("jpegopt: truncated DHT segment")
		}
		class, id := int(seg[0]>>4), int(seg[0]&15)
		if class > 1 || id > 3 {
			return errors.New("jpegopt: bad DHT table class or id")
		}
		t := &tables[slotOf(class, id)]
		*t = huffTable{defined: true}
		total := 0
		for i := range 16 {
			t.counts[i] = int(seg[1+i])
			total += t.counts[i]
		}
		if total > 256 || len(seg) < 17+total {
			return errors.New("jpegopt: truncated DHT segment")
		}
		t.values = seg[17 : 17+total]
		if err := t.prepare(); err != nil {
			return err
		}
		seg = seg[17+total:]
	}
	return nil
}

// bitReader reads the entropy-coded segment MSB first, removing the zero
// byte stuffed after each 0xff. A marker ends the data.
type bitReader struct {
	data  []byte
	pos   int
	acc   uint64
	nacc  uint
	ended bool // a marker (or the end of data) was reached
}

func (r *bitReader) fill() {
	for r.nacc <= 56 {
		if r.ended || r.pos >= len(r.data) {
			r.ended = true
			return
		}
		b := r.data[r.pos]
		if b == 0xff {
			if r.pos+1 >= len(r.data) || r.data[r.pos+1] != 0 {
				r.ended = true // a marker: leave pos on it
				return
			}
			r.pos += 2
		} else {
			r.pos++
		}
		r.acc |= uint64(b) << (56 - r.nacc)
		r.nacc += 8
	}
}

var errShortScan = errors.New("jpegopt: scan data ends early")

func (r *bitReader) bits(n uint) (uint32, error) {
	if n == 0 {
		return 0, nil
	}
	if r.nacc < n {
		r.fill()
		if r.nacc < n {
			return 0, errShortScan
		}
	}
	v := uint32(r.acc >> (64 - n))
	r.acc <<= n
	r.nacc -= n
	return v, nil
}

func (r *bitReader) decode(t *huffTable) (byte, error) {
	if r.nacc < 16 {
		r.fill()
	}
	// Past the end of data the accumulator reads as zeros; a code is only
	// taken if its length is within the bits really there.
	if e := t.lookup[r.acc>>(64-lookupBits)]; e != 0 {
		l := uint(e >> 8)
		if l > r.nacc {
			return 0, errShortScan
		}
		r.acc <<= l
		r.nacc -= l
		return byte(e), nil
	}
	for l := lookupBits + 1; l <= 16; l++ {
		if uint(l) > r.nacc {
			return 0, errShortScan
		}
		code := int32(r.acc >> (64 - l))
		if code <= t.maxCode[l] {
			r.acc <<= l
			r.nacc -= uint(l)
			return t.values[t.valIndex[l]+int(code-t.minCode[l])], nil
		}
	}
	return 0, errors.New("jpegopt: bad Huffman code in scan")
}

// decodeScan walks every block of the scan and records its symbols. It
// returns the events and the offset in data where the scan's bytes end.
func decodeScan(data []byte, comps []component, width, height int, tables *[slots]huffTable, events []event) ([]event, int, error) {
	hmax, vmax := 1, 1
	for _, c := range comps {
		hmax, vmax = max(hmax, c.h), max(vmax, c.v)
	}
	r := &bitReader{data: data}
	block := func(c *component) error {
		dc := &tables[c.dc]
		s, err := r.decode(dc)
		if err != nil {
			return err
		}
		if s > 15 {
			return errors.New("jpegopt: bad DC category")
		}
		v, err := r.bits(uint(s))
		if err != nil {
			return err
		}
		events = append(events, makeEvent(c.dc, s, uint(s), v))
		ac := &tables[c.ac]
		for k := 1; k < 64; {
			rs, err := r.decode(ac)
			if err != nil {
				return err
			}
			run, size := int(rs>>4), uint(rs&15)
			v, err := r.bits(size)
			if err != nil {
				return err
			}
			events = append(events, makeEvent(c.ac, rs, size, v))
			switch {
			case size != 0:
				k += run + 1
			case run == 15: // sixteen zeros
				k += 16
			default: // end of block
				k = 64
			}
			if k > 64 {
				return errors.New("jpegopt: AC run past the end of a block")
			}
		}
		return nil
	}
	if len(comps) == 1 {
		// A single-component scan is not interleaved: its blocks cover the
		// component's own size in raster order (T.81 A.2.2).
		c := &comps[0]
		cw := (width*c.h + hmax - 1) / hmax
		ch := (height*c.v + vmax - 1) / vmax
		n := ((cw + 7) / 8) * ((ch + 7) / 8)
		for range n {
			if err := block(c); err != nil {
				return events, 0, err
			}
		}
	} else {
		mx := (width + 8*hmax - 1) / (8 * hmax)
		my := (height + 8*vmax - 1) / (8 * vmax)
		for range mx * my {
			for i := range comps {
				for range comps[i].h * comps[i].v {
					if err := block(&comps[i]); err != nil {
						return events, 0, err
					}
				}
			}
		}
	}
	// The scan's last byte is padded with ones; what follows is a marker.
	end := r.pos
	if !r.ended {
		r.fill()
		end = r.pos
	}
	if r.nacc >= 8 {
		// Whole bytes read ahead but not used: the scan ended earlier
		// than the data did, which a valid file does not do.
		return events, 0, fmt.Errorf("jpegopt: %d bytes of unexpected scan data", r.nacc/8)
	}
	return events, end, nil
}

// optimalTable builds the code lengths for the symbol counts with the
// procedure of T.81 Annex K.2: Huffman's merge, with one extra symbol of
// count 1 so that no real code is all ones, then code lengths over 16
// shortened by moving pairs of leaves up the tree.
func optimalTable(counts *[257]int) huffTable {
	var freq [257]int
	copy(freq[:], counts[:])
	freq[256] = 1
	var size [257]int
	var next [257]int
	for i := range next {
		next[i] = -1
	}
	// The symbols still in play, in increasing order: a table rarely
	// uses more than a few dozen of the 257.
	live := make([]int, 0, 257)
	for i := range 257 {
		if freq[i] > 0 {
			live = append(live, i)
		}
	}
	for len(live) > 1 {
		// The two smallest counts; ties go to the larger symbol, as
		// libjpeg does, so equal inputs give libjpeg's tables.
		i1, i2 := -1, -1
		for i, s := range live {
			if i1 < 0 || freq[s] <= freq[live[i1]] {
				i1 = i
			}
		}
		for i, s := range live {
			if i != i1 && (i2 < 0 || freq[s] <= freq[live[i2]]) {
				i2 = i
			}
		}
		c1, c2 := live[i1], live[i2]
		freq[c1] += freq[c2]
		freq[c2] = 0
		live = append(live[:i2], live[i2+1:]...)
		// Every symbol in either subtree gets one bit longer; then c2's
		// chain is hung after c1's.
		size[c1]++
		for next[c1] >= 0 {
			c1 = next[c1]
			size[c1]++
		}
		next[c1] = c2
		size[c2]++
		for next[c2] >= 0 {
			c2 = next[c2]
			size[c2]++
		}
	}
	var bits [33]int
	for i := range 257 {
		if size[i] > 0 {
			if size[i] > 32 {
				// Cannot happen with at most 2^32 events of 257 symbols,
				// but a table must stay well-formed.
				size[i] = 32
			}
			bits[size[i]]++
		}
	}
	for i := 32; i > 16; i-- {
		for bits[i] > 0 {
			j := i - 2
			for bits[j] == 0 {
				j--
			}
			bits[i] -= 2
			bits[i-1]++
			bits[j+1] += 2
			bits[j]--
		}
	}
	// Drop the reserved symbol: it has the longest code.
	i := 16
	for bits[i] == 0 {
		i--
	}
	bits[i]--
	var t huffTable
	t.defined = true
	for l := 1; l <= 16; l++ {
		t.counts[l-1] = bits[l]
	}
	for l := 1; l <= 32; l++ {
		for s := range 256 {
			if size[s] == l {
				t.values = append(t.values, byte(s))
			}
		}
	}
	return t
}

type codeTable struct {
	code [256]uint16
	size [256]uint8
}

func codesOf(t *huffTable) codeTable {
	var c codeTable
	code, k := uint16(0), 0
	for l := 1; l <= 16; l++ {
		for range t.counts[l-1] {
			s := t.values[k]
			c.code[s], c.size[s] = code, uint8(l)
			code++
			k++
		}
		code <<= 1
	}
	return c
}

func appendDHT(out []byte, tables *[slots]huffTable) []byte {
	n := 2
	for s := range slots {
		if tables[s].defined {
			n += 17 + len(tables[s].values)
		}
	}
	out = append(out, 0xff, markerDHT, byte(n>>8), byte(n))
	for s := range slots {
		t := &tables[s]
		if !t.defined {
			continue
		}
		out = append(out, byte(s/4)<<4|byte(s%4))
		for _, c := range t.counts {
			out = append(out, byte(c))
		}
		out = append(out, t.values...)
	}
	return out
}

// encodeEvents writes the symbols with the new codes and the raw bits as
// they were, stuffing a zero after each 0xff and padding with ones.
func encodeEvents(out []byte, events []event, codes *[slots]codeTable) []byte {
	var acc uint64
	var n uint
	flush := func() {
		for n >= 8 {
			b := byte(acc >> 56)
			out = append(out, b)
			if b == 0xff {
				out = append(out, 0)
			}
			acc <<= 8
			n -= 8
		}
	}
	for _, e := range events {
		c := &codes[e.slot()]
		s := e.symbol()
		acc |= uint64(c.code[s]) << (64 - n - uint(c.size[s]))
		n += uint(c.size[s])
		if nb := e.nbits(); nb > 0 {
			acc |= uint64(e.rawBits()) << (64 - n - nb)
			n += nb
		}
		flush()
	}
	if n > 0 {
		pad := 8 - n%8
		if pad < 8 {
			acc |= (uint64(1)<<pad - 1) << (64 - n - pad)
			n += pad
		}
		flush()
	}
	return out
}
