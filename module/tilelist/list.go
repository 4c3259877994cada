// Package tilelist reads tile expire lists (the "z/x/y" files osm2pgsql,
// imposm and mod_tile write after data edits) and turns them into the work
// units the seeder hands out: metatiles, each with the subset of its tiles
// that the list names.
//
// An expire list can hold tens of millions of lines, most of them
// duplicates clustered around a few edits, so the package never keeps a map
// of tiles. Each tile is packed into one uint64 key whose order is the
// seeder's order (level, metatile row bottom to top, metatile column, row
// in the metatile, column in the metatile). Keys are collected into a
// fixed-size buffer that is sorted, deduplicated and delta-varint encoded
// into a compressed run each time it fills; at the end the runs are merged
// into one compact byte encoding of the units, with a sparse index so that
// unit number i is found without decoding the units before it (cluster
// nodes claim ranges of unit numbers). The same encoding is what
// MarshalBinary saves, so a task resumes after a crash with its list.
package tilelist

import (
	"iter"
	"math/bits"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// indexEvery is the spacing of the sparse index: Unit(i) decodes at most
// this many units. 256 keeps a lookup to a few microseconds while the index
// costs 16 bytes per 256 units.
const indexEvery = 256

// blockSize is the size of the blocks the final encoding is written in.
// Writing into fixed blocks rather than one growing slice avoids the copy
// and the transient doubling that append would cost on a 30 MB encoding.
const blockSize = 1 << 20

// maxUnitBytes bounds one encoded unit: a 10-byte varint delta, a count
// byte and a 32-byte mask.
const maxUnitBytes = 10 + 1 + 32

// layout maps tiles to keys and back for one gridset and metatile size.
// A unit key numbers every metatile of every level: level z's metatiles
// come after those of the levels before it, row by row from the bottom.
// A tile key is unitKey*slots + slot, slot = row in metatile*metaW + column.
type layout struct {
	metaW, metaH int64
	slots        int64    // metaW*metaH, at most 256
	metaCols     []int64  // metatile columns per level
	unitBase     []uint64 // first unit key of each level
	wide, high   []int64  // the levels' TilesWide and TilesHigh, kept for the record
}

func newLayout(wide, high []int64, metaW, metaH int) (layout, bool) {
	l := layout{metaW: int64(metaW), metaH: int64(metaH), slots: int64(metaW * metaH),
		wide: wide, high: high}
	var base uint64
	for z := range wide {
		cols := (wide[z] + l.metaW - 1) / l.metaW
		rows := (high[z] + l.metaH - 1) / l.metaH
		l.metaCols = append(l.metaCols, cols)
		l.unitBase = append(l.unitBase, base)
		hi, n := bits.Mul64(uint64(cols), uint64(rows))
		if hi != 0 {
			return l, false
		}
		var carry uint64
		base, carry = bits.Add64(base, n, 0)
		if carry != 0 {
			return l, false
		}
	}
	// Every tile key must fit in 63 bits: runs shift gaps left by one.
	if hi, lo := bits.Mul64(base, uint64(l.slots)); hi != 0 || lo >= 1<<63 {
		return l, false
	}
	return l, true
}

// key packs a tile (native index) into its tile key.
func (l *layout) key(z int, x, y int64) uint64 {
	mx, my := x/l.metaW, y/l.metaH
	uk := l.unitBase[z] + uint64(my*l.metaCols[z]+mx)
	return uk*uint64(l.slots) + uint64((y-my*l.metaH)*l.metaW+(x-mx*l.metaW))
}

// level finds the level of a unit key, starting the search at z (units
// are decoded in order, so the level rarely changes).
func (l *layout) level(uk uint64, z int) int {
	if z < 0 || z >= len(l.unitBase) || uk < l.unitBase[z] {
		z = 0
	}
	for z+1 < len(l.unitBase) && uk >= l.unitBase[z+1] {
		z++
	}
	return z
}

// maskBytes is the size of a unit's tile bitmask in the encoding.
func (l *layout) maskBytes() int { return int(l.slots+7) / 8 }

// Unit is one metatile's share of the list: the listed (and derived) tiles
// that fall inside one metatile. The seeder fetches the metatile once and
// stores or truncates just these tiles.
type Unit struct {
	Seq          int64 // position in the list's order of units
	Z            int
	MetaX, MetaY int64 // the metatile's first column and row (native index, rows from the bottom)
	metaW, metaH int64
	// mask has bit row*metaW+col set for each tile of the unit, row and
	// col counted inside the metatile from its bottom-left tile.
	mask [4]uint64
}

// Metatile is the whole metatile's range, not clipped to the grid: a
// metatile on the grid's right or top edge may reach past it.
func (u Unit) Metatile() gridset.Range {
	return gridset.Range{MinX: u.MetaX, MinY: u.MetaY, MaxX: u.MetaX + u.metaW - 1, MaxY: u.MetaY + u.metaH - 1}
}

// Count is the number of tiles in the unit (at least one).
func (u Unit) Count() int {
	return bits.OnesCount64(u.mask[0]) + bits.OnesCount64(u.mask[1]) +
		bits.OnesCount64(u.mask[2]) + bits.OnesCount64(u.mask[3])
}

// Contains reports whether the tile at column x, row y (native) of the
// unit's level is one of the unit's tiles.
func (u Unit) Contains(x, y int64) bool {
	if !u.Metatile().Contains(x, y) {
		return false
	}
	s := (y-u.MetaY)*u.metaW + (x - u.MetaX)
	return u.mask[s/64]&(1<<(s%64)) != 0
}

// Bounds is the smallest range holding every tile of the unit.
func (u Unit) Bounds() gridset.Range {
	r := gridset.Range{MinX: u.MetaX + u.metaW, MinY: u.MetaY + u.metaH, MaxX: -1, MaxY: -1}
	for t := range u.All() {
		r.MinX, r.MaxX = min(r.MinX, t.X), max(r.MaxX, t.X)
		r.MinY, r.MaxY = min(r.MinY, t.Y), max(r.MaxY, t.Y)
	}
	return r
}

// All yields the unit's tiles, rows bottom to top, columns left to right.
func (u Unit) All() iter.Seq[gridset.Index] {
	return func(yield func(gridset.Index) bool) {
		for w, m := range u.mask {
			for ; m != 0; m &= m - 1 {
				s := int64(w*64 + bits.TrailingZeros64(m))
				if !yield(gridset.Index{X: u.MetaX + s%u.metaW, Y: u.MetaY + s/u.metaW, Z: u.Z}) {
					return
				}
			}
		}
	}
}

// Tiles returns the unit's tiles in the order of All.
func (u Unit) Tiles() []gridset.Index {
	out := make([]gridset.Index, 0, u.Count())
	for t := range u.All() {
		out = append(out, t)
	}
	return out
}

// List is a parsed expire list, grouped into units. It is immutable and
// safe for concurrent reads.
type List struct {
	gridset string
	lay     layout
	blocks  [][]byte // the encoded units; a unit never straddles two blocks
	index   []mark   // where every indexEvery-th unit starts
	units   int64
	tiles   int64
	dropped int64
	lines   int64
	minZ    int
	maxZ    int
}

// mark is a place in the encoding: the unit starting at blocks[block][off]
// and the key of the unit before it, which its delta is relative to.
type mark struct {
	block, off int32
	prev       uint64
}

// Units is the number of units (metatiles with at least one listed tile).
func (l *List) Units() int64 { return l.units }

// Tiles is the number of distinct tiles, derived ones included.
func (l *List) Tiles() int64 { return l.tiles }

// Dropped counts the tiles, listed or derived, that fell outside the
// layer's coverage. It counts occurrences: a tile outside coverage listed
// twice counts twice, since keeping dropped tiles to deduplicate them would
// cost the memory the list is built to save.
func (l *List) Dropped() int64 { return l.dropped }

// Lines is the number of tile lines read (blank and comment lines not
// counted), duplicates and dropped tiles included.
func (l *List) Lines() int64 { return l.lines }

// Levels is the lowest and highest level holding a unit; both are -1 for an
// empty list.
func (l *List) Levels() (lo, hi int) { return l.minZ, l.maxZ }

// Gridset is the name of the gridset the list was parsed against.
func (l *List) Gridset() string { return l.gridset }

// MetaSize is the metatile size the units were grouped by.
func (l *List) MetaSize() (w, h int) { return int(l.lay.metaW), int(l.lay.metaH) }

// cursor decodes units in order from a mark.
type cursor struct {
	l     *List
	block int
	off   int
	prev  uint64
	z     int
	seq   int64
}

// skip moves past one unit without building it.
func (c *cursor) skip() {
	b := c.l.blocks[c.block]
	d, n := uvarint(b[c.off:])
	c.off += n
	c.prev += d
	if c.l.lay.slots > 1 {
		cnt := int(b[c.off]) + 1
		c.off++
		c.off += payloadLen(cnt, int(c.l.lay.slots), c.l.lay.maskBytes())
	}
	c.seq++
	c.advance()
}

// advance steps to the next block when the current one is used up.
func (c *cursor) advance() {
	for c.block < len(c.l.blocks) && c.off >= len(c.l.blocks[c.block]) {
		c.block++
		c.off = 0
	}
}

// payloadLen is how many bytes follow a unit's count byte: nothing for a
// full metatile, the slot numbers when that is shorter than the bitmask,
// else the bitmask.
func payloadLen(cnt, slots, maskBytes int) int {
	switch {
	case cnt == slots:
		return 0
	case cnt < maskBytes:
		return cnt
	}
	return maskBytes
}

// next decodes one unit.
func (c *cursor) next() Unit {
	lay := &c.l.lay
	b := c.l.blocks[c.block]
	d, n := uvarint(b[c.off:])
	c.off += n
	uk := c.prev + d
	c.prev = uk
	u := Unit{Seq: c.seq, metaW: lay.metaW, metaH: lay.metaH}
	if lay.slots == 1 {
		u.mask[0] = 1
	} else {
		cnt := int(b[c.off]) + 1
		c.off++
		switch mb := lay.maskBytes(); {
		case cnt == int(lay.slots):
			for s := range int(lay.slots) {
				u.mask[s/64] |= 1 << (s % 64)
			}
		case cnt < mb:
			for _, s := range b[c.off : c.off+cnt] {
				u.mask[s/64] |= 1 << (s % 64)
			}
			c.off += cnt
		default:
			for i, v := range b[c.off : c.off+mb] {
				u.mask[i/8] |= uint64(v) << (8 * (i % 8))
			}
			c.off += mb
		}
	}
	c.z = lay.level(uk, c.z)
	u.Z = c.z
	within := int64(uk - lay.unitBase[c.z])
	cols := lay.metaCols[c.z]
	u.MetaX, u.MetaY = within%cols*lay.metaW, within/cols*lay.metaH
	c.seq++
	c.advance()
	return u
}

// Unit returns unit number i (0 ≤ i < Units()) by decoding from the
// nearest index mark; it panics when i is out of range, as a slice would.
func (l *List) Unit(i int64) Unit {
	if i < 0 || i >= l.units {
		panic("tilelist: unit number out of range")
	}
	var u Unit
	l.EachFrom(i, func(v Unit) bool { u = v; return false })
	return u
}

// Each calls fn with every unit in order until fn returns false.
func (l *List) Each(fn func(Unit) bool) { l.EachFrom(0, fn) }

// EachFrom calls fn with units from, from+1, ... until the list ends or fn
// returns false. A cluster node working through a claimed range of unit
// numbers uses it rather than Unit(i) per unit: it seeks once and then
// decodes sequentially.
func (l *List) EachFrom(from int64, fn func(Unit) bool) {
	if from >= l.units {
		return
	}
	from = max(from, 0)
	m := l.index[from/indexEvery]
	c := cursor{l: l, block: int(m.block), off: int(m.off), prev: m.prev, seq: from - from%indexEvery}
	for c.seq < from {
		c.skip()
	}
	for c.seq < l.units {
		if !fn(c.next()) {
			return
		}
	}
}

// uvarint is binary.Uvarint without its overflow checks, which the
// encoder's own output does not need; records read from disk are checked
// by a CRC and a full decode before use.
func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, len(b) + 1 // past the end: callers' bounds checks fire
}
