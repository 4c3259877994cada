package tilelist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The record is: magic "TLST", a version byte, then uvarints (metatile
// width and height, level count, each level's TilesWide and TilesHigh, the
// gridset name's length and bytes, lines, dropped, tiles, units, the
// encoding's length) and the unit encoding itself, then a CRC-32C of all
// that. The levels' sizes are kept because a unit key only means something
// with them: a resumed task whose gridset changed must not decode garbage.
const (
	magic         = "TLST"
	recordVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrRecord is wrapped by every error of UnmarshalBinary.
var ErrRecord = errors.New("tilelist: bad record")

// MarshalBinary saves the list. The sparse index is not saved: it is
// rebuilt while the record is checked on reading.
func (l *List) MarshalBinary() ([]byte, error) {
	var size int
	for _, b := range l.blocks {
		size += len(b)
	}
	out := make([]byte, 0, size+64+20*len(l.lay.wide)+len(l.gridset))
	out = append(out, magic...)
	out = append(out, recordVersion)
	out = binary.AppendUvarint(out, uint64(l.lay.metaW))
	out = binary.AppendUvarint(out, uint64(l.lay.metaH))
	out = binary.AppendUvarint(out, uint64(len(l.lay.wide)))
	for z := range l.lay.wide {
		out = binary.AppendUvarint(out, uint64(l.lay.wide[z]))
		out = binary.AppendUvarint(out, uint64(l.lay.high[z]))
	}
	out = binary.AppendUvarint(out, uint64(len(l.gridset)))
	out = append(out, l.gridset...)
	for _, v := range []int64{l.lines, l.dropped, l.tiles, l.units, int64(size)} {
		out = binary.AppendUvarint(out, uint64(v))
	}
	for _, b := range l.blocks {
		out = append(out, b...)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// UnmarshalBinary restores a list saved by MarshalBinary. A truncated or
// altered record is an error (the CRC and the counts are checked, and the
// whole encoding is decoded), never a shorter list.
func (l *List) UnmarshalBinary(data []byte) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrRecord, fmt.Sprintf(format, a...))
	}
	if len(data) < len(magic)+1+4 || string(data[:len(magic)]) != magic {
		return bad("not a tile list record")
	}
	if v := data[len(magic)]; v != recordVersion {
		return bad("version %d, this build reads version %d", v, recordVersion)
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return bad("checksum mismatch (truncated or damaged)")
	}
	r := body[len(magic)+1:]
	var err error
	next := func() uint64 {
		if err != nil {
			return 0
		}
		v, n := binary.Uvarint(r)
		if n <= 0 {
			err = bad("truncated header")
			return 0
		}
		r = r[n:]
		return v
	}
	mw, mh, nz := next(), next(), next()
	if err == nil && (mw < 1 || mw > 16 || mh < 1 || mh > 16 || nz < 1 || nz > 64) {
		err = bad("metatile %dx%d or %d levels out of range", mw, mh, nz)
	}
	if err != nil {
		return err
	}
	wide, high := make([]int64, nz), make([]int64, nz)
	for z := range wide {
		wide[z], high[z] = int64(next()), int64(next())
		if err == nil && (wide[z] < 1 || high[z] < 1) {
			err = bad("level %d has no tiles", z)
		}
	}
	nameLen := next()
	if err == nil && nameLen > uint64(len(r)) {
		err = bad("truncated header")
	}
	if err != nil {
		return err
	}
	name := string(r[:nameLen])
	r = r[nameLen:]
	lines, dropped, tiles, units, size := next(), next(), next(), next(), next()
	if err != nil {
		return err
	}
	if size != uint64(len(r)) {
		return bad("encoding is %d bytes, header says %d", len(r), size)
	}
	lay, ok := newLayout(wide, high, int(mw), int(mh))
	if !ok {
		return bad("levels too large")
	}
	n := &List{gridset: name, lay: lay, lines: int64(lines), dropped: int64(dropped), minZ: -1, maxZ: -1}
	if len(r) > 0 {
		n.blocks = [][]byte{append([]byte(nil), r...)}
	}
	if err := n.check(int64(units), int64(tiles)); err != nil {
		return bad("%v", err)
	}
	*l = *n
	return nil
}

// check decodes the whole encoding with full bounds checks, rebuilding the
// sparse index and the level span, and compares the counts with the
// header's.
func (l *List) check(units, tiles int64) error {
	lay := &l.lay
	var end uint64
	for z := range lay.unitBase {
		end = lay.unitBase[z] + uint64(lay.metaCols[z]*((lay.high[z]+lay.metaH-1)/lay.metaH))
	}
	var prev uint64
	var nu, nt int64
	z := 0
	for bi, b := range l.blocks {
		for off := 0; off < len(b); {
			if nu%indexEvery == 0 {
				l.index = append(l.index, mark{block: int32(bi), off: int32(off), prev: prev})
			}
			d, n := binary.Uvarint(b[off:])
			if n <= 0 || (nu > 0 && d == 0) || d >= end-prev {
				return fmt.Errorf("unit %d: bad key", nu)
			}
			off += n
			prev += d
			cnt := 1
			if lay.slots > 1 {
				if off >= len(b) {
					return fmt.Errorf("unit %d: truncated", nu)
				}
				cnt = int(b[off]) + 1
				off++
				if cnt > int(lay.slots) {
					return fmt.Errorf("unit %d: %d tiles in a %d-tile metatile", nu, cnt, lay.slots)
				}
				pl := payloadLen(cnt, int(lay.slots), lay.maskBytes())
				if off+pl > len(b) {
					return fmt.Errorf("unit %d: truncated", nu)
				}
				if err := checkPayload(b[off:off+pl], cnt, int(lay.slots), lay.maskBytes()); err != nil {
					return fmt.Errorf("unit %d: %v", nu, err)
				}
				off += pl
			}
			z = lay.level(prev, z)
			if l.minZ < 0 {
				l.minZ = z
			}
			l.maxZ = z
			nu++
			nt += int64(cnt)
		}
	}
	if nu != units || nt != tiles {
		return fmt.Errorf("%d units and %d tiles decoded, header says %d and %d", nu, nt, units, tiles)
	}
	l.units, l.tiles = nu, nt
	return nil
}

// checkPayload makes sure a unit's tiles are inside its metatile, so that
// a damaged record that passed the CRC by chance cannot name tiles of a
// neighbouring metatile: slot numbers strictly ascending and below the
// slot count, or a bitmask with the stated count and no bit past the slots.
func checkPayload(p []byte, cnt, slots, maskBytes int) error {
	switch {
	case cnt == slots:
	case cnt < maskBytes:
		for i, s := range p {
			if int(s) >= slots || (i > 0 && s <= p[i-1]) {
				return fmt.Errorf("bad tile slot %d", s)
			}
		}
	default:
		c := 0
		for i, v := range p {
			c += popcount(uint64(v))
			if hi := slots - 8*i; hi < 8 && v>>hi != 0 {
				return fmt.Errorf("bitmask names a tile outside the metatile")
			}
		}
		if c != cnt {
			return fmt.Errorf("bitmask holds %d tiles, count says %d", c, cnt)
		}
	}
	return nil
}
