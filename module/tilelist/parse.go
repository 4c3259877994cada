package tilelist

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// Scheme is how a list counts rows.
type Scheme int

const (
	// XYZ counts rows from the top, as slippy maps, osm2pgsql, imposm and
	// mod_tile do. It is the zero value because that is what expire lists
	// are written in.
	XYZ Scheme = iota
	// Native counts rows from the bottom, as the gridset's own index and
	// TMS do.
	Native
)

// None disables Options.Parents or Options.Children.
const None = -1

// Defaults for the limits, sized so that a 50 M line list of one level
// parses and a list whose derivation explodes is refused.
const (
	DefaultMaxLines = 50_000_000
	DefaultMaxTiles = 200_000_000
)

// Options says how to read a list.
type Options struct {
	Gridset *gridset.Gridset
	Scheme  Scheme
	// MetaW and MetaH are the metatile size in tiles (1..16 each) that
	// the units are grouped by; 0 means 1.
	MetaW, MetaH int
	// Parents adds, for each listed tile at level z, the tiles covering it
	// at every level from z-1 up to Parents (as mod_tile's render_expired
	// min-zoom does). None (-1) adds none. Note that 0 is a level: the zero
	// Options derives parents up to level 0.
	Parents int
	// Children adds, for each listed tile at level z, the tiles inside it
	// at every level from z+1 down to Children. None (-1) adds none.
	Children int
	// Coverage is the range of tiles the layer caches at level z (native
	// rows); false means the level is not cached. Tiles outside are dropped
	// and counted, not refused. It is called once per level before reading.
	// nil keeps every tile.
	Coverage func(z int) (gridset.Range, bool)
	// MaxLines bounds the tile lines read; 0 means DefaultMaxLines. Blank
	// and comment lines name no tile and do not count; they have a bound
	// of their own, as many again, so that a body of nothing else ends too.
	MaxLines int64
	// MaxTiles bounds the tiles the list names, counting every listed and
	// derived tile before duplicates are removed; 0 means DefaultMaxTiles.
	// Counting before deduplication makes the check exact per line, so a
	// single line whose children would be billions of tiles is refused
	// before any is generated.
	MaxTiles int64
}

// maxLineBytes bounds a line; a longer one is an error, not a stall.
const maxLineBytes = 4096

// chunkKeys is the size of the sort buffer: 8 MB of keys. Larger buffers
// deduplicate more per run but cost their size in peak heap; runs of a
// million keys already compress a random z18 list to about 3 bytes a key.
// It is a variable so that tests can make runs tiny and many.
var chunkKeys = 1 << 20

// Parse reads an expire list, one tile per line, "z/x/y" or "z x y" (spaces
// or tabs). Blank lines and lines starting with '#' are skipped; CRLF and
// surrounding white space are accepted. It streams: memory grows with the
// distinct tiles, not with the lines.
func Parse(r io.Reader, opt Options) (*List, error) {
	p, err := newParser(opt)
	if err != nil {
		return nil, err
	}
	// The scanner's buffer is its line limit, so reads go through a larger
	// bufio.Reader to keep read calls few.
	sc := bufio.NewScanner(bufio.NewReaderSize(r, 64<<10))
	sc.Buffer(make([]byte, maxLineBytes), maxLineBytes)
	var lineNo int64
	for sc.Scan() {
		lineNo++
		if err := p.line(lineNo, sc.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes", lineNo+1, maxLineBytes)
		}
		return nil, fmt.Errorf("line %d: %w", lineNo+1, err)
	}
	return p.finish(), nil
}

type parser struct {
	g        *gridset.Gridset
	scheme   Scheme
	lay      layout
	parents  int
	children int
	cov      []gridset.Range // per level; an empty range when not cached
	nests    []bool          // nests[z]: level z+1 halves level z exactly
	maxLines int64
	maxTiles int64

	buf     []uint64 // keys waiting to be sorted into a run
	runs    [][]byte // sorted, deduplicated, delta-varint encoded keys
	named   int64    // tiles named so far, derived included, before dedup
	lines   int64    // tile lines
	skipped int64    // blank and comment lines
	dropped int64
}

func newParser(opt Options) (*parser, error) {
	g := opt.Gridset
	if g == nil || len(g.Levels) == 0 {
		return nil, errors.New("tilelist: a gridset is required")
	}
	mw, mh := max(opt.MetaW, 1), max(opt.MetaH, 1)
	if mw > 16 || mh > 16 {
		return nil, fmt.Errorf("tilelist: metatile size %dx%d: each side must be 1 to 16", mw, mh)
	}
	if opt.Scheme != XYZ && opt.Scheme != Native {
		return nil, fmt.Errorf("tilelist: unknown scheme %d", opt.Scheme)
	}
	n := len(g.Levels)
	for _, v := range []struct {
		name string
		z    int
	}{{"parents", opt.Parents}, {"children", opt.Children}} {
		if v.z != None && (v.z < 0 || v.z >= n) {
			return nil, fmt.Errorf("tilelist: %s level %d is not in gridset %s (levels 0 to %d)", v.name, v.z, g.Name, n-1)
		}
	}
	wide, high := make([]int64, n), make([]int64, n)
	for z, l := range g.Levels {
		wide[z], high[z] = l.TilesWide, l.TilesHigh
	}
	lay, ok := newLayout(wide, high, mw, mh)
	if !ok {
		return nil, fmt.Errorf("tilelist: gridset %s has too many tiles to number in 64 bits", g.Name)
	}
	p := &parser{g: g, scheme: opt.Scheme, lay: lay, parents: opt.Parents, children: opt.Children,
		maxLines: opt.MaxLines, maxTiles: opt.MaxTiles, buf: make([]uint64, 0, min(4096, chunkKeys))}
	if p.maxLines <= 0 {
		p.maxLines = DefaultMaxLines
	}
	if p.maxTiles <= 0 {
		p.maxTiles = DefaultMaxTiles
	}
	p.cov = make([]gridset.Range, n)
	for z := range n {
		p.cov[z] = g.GridRange(z)
		if opt.Coverage != nil {
			r, ok := opt.Coverage(z)
			if !ok {
				r = gridset.Range{MinX: 0, MinY: 0, MaxX: -1, MaxY: -1}
			}
			p.cov[z] = r.Intersect(g.GridRange(z))
		}
	}
	// Derivation by shifting is only right when each level splits every
	// tile of the one above into exactly 2x2: twice the tiles each way at
	// half the resolution (equal tile counts alone could come from a
	// resolution that is not half, whose tiles straddle their parents').
	p.nests = make([]bool, n)
	for z := 0; z+1 < n; z++ {
		a, b := g.Levels[z], g.Levels[z+1]
		ratio := a.Resolution / b.Resolution
		p.nests[z] = b.TilesWide == 2*a.TilesWide && b.TilesHigh == 2*a.TilesHigh && math.Abs(ratio-2) < 1e-9
	}
	return p, nil
}

// line handles one line of the list.
func (p *parser) line(no int64, b []byte) error {
	z, x, y, ok := parseTile(b)
	if !ok {
		if z == -1 {
			return p.skip(no)
		}
		return fmt.Errorf("line %d: %q is not z/x/y or \"z x y\"", no, quote(b))
	}
	if p.lines++; p.lines > p.maxLines {
		return fmt.Errorf("line %d: more than %d tile lines", no, p.maxLines)
	}
	g := p.g
	if z >= int64(len(g.Levels)) {
		return fmt.Errorf("line %d: level %d is not in gridset %s (levels 0 to %d)", no, z, g.Name, len(g.Levels)-1)
	}
	zi := int(z)
	lv := g.Levels[zi]
	if x >= lv.TilesWide || y >= lv.TilesHigh {
		return fmt.Errorf("line %d: tile %d/%d/%d is outside level %d's grid of %dx%d tiles", no, z, x, y, z, lv.TilesWide, lv.TilesHigh)
	}
	if p.scheme == XYZ {
		y = lv.TilesHigh - 1 - y
	}
	lo, hi := zi, zi
	if p.parents != None && p.parents < zi {
		lo = p.parents
	}
	if p.children != None && p.children > zi {
		hi = p.children
	}
	for d := lo; d < hi; d++ {
		if !p.nests[d] {
			return fmt.Errorf("line %d: derived levels need nested levels (each level twice the tiles of the one above each way, at half the resolution), and gridset %s's level %d does not nest in level %d",
				no, g.Name, d+1, d)
		}
	}
	// Count what this line names before generating any of it.
	n := int64(zi - lo + 1)
	for k := 1; k <= hi-zi; k++ {
		if 2*k >= 62 {
			n = math.MaxInt64
			break
		}
		n += int64(1) << (2 * k)
		if n > p.maxTiles {
			break
		}
	}
	if n > p.maxTiles-p.named {
		return fmt.Errorf("line %d: more than %d tiles (derived tiles included)", no, p.maxTiles)
	}
	p.named += n
	for pz := zi; pz >= lo; pz-- {
		k := zi - pz
		p.add(pz, x>>k, y>>k)
	}
	for cz := zi + 1; cz <= hi; cz++ {
		k := cz - zi
		block := gridset.Range{MinX: x << k, MinY: y << k, MaxX: (x+1)<<k - 1, MaxY: (y+1)<<k - 1}
		in := block.Intersect(p.cov[cz])
		p.dropped += block.Count() - in.Count()
		for ty := in.MinY; ty <= in.MaxY; ty++ {
			for tx := in.MinX; tx <= in.MaxX; tx++ {
				p.push(p.lay.key(cz, tx, ty))
			}
		}
	}
	return nil
}

// skip passes over a blank or comment line. It names no tile, so it does
// not count toward maxLines; but the body is not bounded otherwise (an
// expire list is read as it streams in), so as many again is the most.
func (p *parser) skip(no int64) error {
	if p.skipped++; p.skipped > p.maxLines {
		return fmt.Errorf("line %d: more than %d blank or comment lines", no, p.maxLines)
	}
	return nil
}

// add keeps one tile if the layer covers it.
func (p *parser) add(z int, x, y int64) {
	if !p.cov[z].Contains(x, y) {
		p.dropped++
		return
	}
	p.push(p.lay.key(z, x, y))
}

func (p *parser) push(k uint64) {
	if len(p.buf) == cap(p.buf) {
		p.spill()
	}
	p.buf = append(p.buf, k)
}

// spill makes room in the buffer. Until it reaches chunkKeys it grows (so
// a ten-line list does not cost 8 MB); from then on its keys are sorted,
// deduplicated and encoded into a run, and the buffer is reused.
func (p *parser) spill() {
	if cap(p.buf) < chunkKeys {
		nb := make([]uint64, len(p.buf), max(min(2*cap(p.buf), chunkKeys), 1))
		copy(nb, p.buf)
		p.buf = nb
		return
	}
	p.flush()
}

func (p *parser) flush() {
	if len(p.buf) == 0 {
		return
	}
	slices.Sort(p.buf)
	keys := slices.Compact(p.buf)
	// Size first, so the run is allocated once at its exact size.
	var size int
	eachStretch(keys, func(gap, extra uint64) {
		size += uvarintLen(gap << 1)
		if extra > 0 {
			size += uvarintLen(extra)
		}
	})
	run := make([]byte, 0, size)
	eachStretch(keys, func(gap, extra uint64) {
		if extra == 0 {
			run = appendUvarint(run, gap<<1)
		} else {
			run = appendUvarint(run, gap<<1|1)
			run = appendUvarint(run, extra)
		}
	})
	p.runs = append(p.runs, run)
	p.buf = p.buf[:0]
}

// finish merges the runs into the list's final encoding.
func (p *parser) finish() *List {
	p.flush()
	p.buf = nil // the buffer is not needed for the merge: free it first
	l := &List{gridset: p.g.Name, lay: p.lay, lines: p.lines, dropped: p.dropped}
	w := newWriter(l)
	merge(p.runs, w.tile)
	p.runs = nil
	w.close()
	return l
}

// A run encodes its sorted distinct keys as stretches of consecutive
// keys: uvarint(gap<<1 | more) where gap is the first key's distance from
// the previous stretch's last key (from 0 for the first), then, when the
// low bit is set, uvarint(extra), the number of keys after the first.
// Derived children fill whole metatiles, whose keys are consecutive, so a
// stretch costs two or three bytes for up to 256 keys; a lone key costs no
// more than a plain delta would, as gaps of random keys rarely sit just
// under a 7-bit boundary.
func eachStretch(keys []uint64, fn func(gap, extra uint64)) {
	var prev uint64
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j] == keys[j-1]+1 {
			j++
		}
		fn(keys[i]-prev, uint64(j-i-1))
		prev = keys[j-1]
		i = j
	}
}

// runCursor walks one run's keys.
type runCursor struct {
	data []byte
	off  int
	cur  uint64
	more uint64 // keys left in the current stretch
}

func (c *runCursor) next() bool {
	if c.more > 0 {
		c.more--
		c.cur++
		return true
	}
	if c.off >= len(c.data) {
		return false
	}
	d, n := uvarint(c.data[c.off:])
	c.off += n
	c.cur += d >> 1
	if d&1 != 0 {
		c.more, n = uvarint(c.data[c.off:])
		c.off += n
	}
	return true
}

// merge calls fn with the distinct keys of all runs in ascending order,
// using a binary min-heap of run cursors.
func merge(runs [][]byte, fn func(uint64)) {
	h := make([]*runCursor, 0, len(runs))
	for _, r := range runs {
		c := &runCursor{data: r}
		if c.next() {
			h = append(h, c)
		}
	}
	down := func(i int) {
		for {
			m := i
			if l := 2*i + 1; l < len(h) && h[l].cur < h[m].cur {
				m = l
			}
			if r := 2*i + 2; r < len(h) && h[r].cur < h[m].cur {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	first := true
	var last uint64
	for len(h) > 0 {
		k := h[0].cur
		if first || k != last {
			fn(k)
			last, first = k, false
		}
		if !h[0].next() {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
	}
}

// writer groups ascending distinct tile keys into units and encodes them.
type writer struct {
	l     *List
	slots uint64
	uk    uint64 // the unit being gathered
	mask  [4]uint64
	have  bool
	prev  uint64 // key of the last unit written
	cur   []byte // the block being written
}

func newWriter(l *List) *writer {
	l.minZ, l.maxZ = -1, -1
	return &writer{l: l, slots: uint64(l.lay.slots)}
}

func (w *writer) tile(k uint64) {
	uk, s := k/w.slots, k%w.slots
	if w.have && uk != w.uk {
		w.emit()
	}
	if !w.have {
		w.uk, w.mask, w.have = uk, [4]uint64{}, true
	}
	w.mask[s/64] |= 1 << (s % 64)
	w.l.tiles++
}

func (w *writer) emit() {
	l := w.l
	if cap(w.cur)-len(w.cur) < maxUnitBytes {
		w.newBlock()
	}
	if l.units%indexEvery == 0 {
		l.index = append(l.index, mark{block: int32(len(l.blocks)), off: int32(len(w.cur)), prev: w.prev})
	}
	w.cur = appendUnit(w.cur, w.uk-w.prev, w.mask, int(w.slots), l.lay.maskBytes())
	z := l.lay.level(w.uk, l.maxZ)
	if l.minZ < 0 {
		l.minZ = z
	}
	l.maxZ = z
	w.prev = w.uk
	l.units++
	w.have = false
}

// newBlock retires the current block (trimmed to its length, so the spare
// capacity is not kept) and starts another.
func (w *writer) newBlock() {
	if w.cur != nil {
		w.l.blocks = append(w.l.blocks, slices.Clip(w.cur))
	}
	w.cur = make([]byte, 0, blockSize)
}

func (w *writer) close() {
	if w.have {
		w.emit()
	}
	if len(w.cur) > 0 {
		// Copy the last block to its length: it is usually far from full.
		w.l.blocks = append(w.l.blocks, slices.Clone(w.cur))
	}
	w.cur = nil
}

// appendUnit encodes a unit: the delta of its key from the previous unit's,
// then (for metatiles of more than one tile) its tile count less one and
// the tiles, as slot numbers or a bitmask, whichever is shorter, or
// nothing when every slot is set.
func appendUnit(b []byte, delta uint64, mask [4]uint64, slots, maskBytes int) []byte {
	b = appendUvarint(b, delta)
	if slots == 1 {
		return b
	}
	cnt := 0
	for _, m := range mask {
		cnt += popcount(m)
	}
	b = append(b, byte(cnt-1))
	switch {
	case cnt == slots:
	case cnt < maskBytes:
		for wi, m := range mask {
			for ; m != 0; m &= m - 1 {
				b = append(b, byte(wi*64+trailingZeros(m)))
			}
		}
	default:
		for i := range maskBytes {
			b = append(b, byte(mask[i/8]>>(8*(i%8))))
		}
	}
	return b
}
