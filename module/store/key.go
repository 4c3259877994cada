// Package store keeps tiles in Badger.
//
// Key layout (every integer big-endian, so that byte order is numeric order):
//
//	'g' layer                                        → generation of the layer (uint64)
//	't' layer 0x00 gen(8) gridset 0x00 format 0x00 params 0x00 z(1) x(4) y(4)  → tile
//	'd' layer 0x00 gen(8)                            → pending reclaim of a truncated generation (empty)
//	'k' id(8)                                        → a seeding task's record (the seeder's own encoding)
//	'k' id(8) 'D'                                    → what a task keeps beside its record (a polygon, a tile list)
//	'p' layer 0x00 gridset 0x00 format 0x00 params   → the parameter values of a tile set (params.go)
//
// Everything a truncation names is a key prefix or a key range:
//   - a whole layer: 't' layer 0x00 (all generations), or made invisible
//     at once by moving the layer to a new generation, which no reader of
//     the old one's keys will ever ask for again;
//   - one tile set (layer, gridset, format, parameter set): the prefix up
//     to and including params 0x00;
//   - one zoom level: that prefix plus z;
//   - a rectangle: for each column x, the range y0..y1 under prefix+z+x.
//
// Names never contain 0x00 (the caller's layer, gridset and format names are
// checked), so no name's prefix is another name's.
package store

import (
	"encoding/binary"
	"errors"
	"strings"
)

// Set names one tile set: the tiles of one layer in one gridset, image
// format and normalised parameter set (Params is its hash).
type Set struct {
	Layer, Gridset, Format, Params string
}

// Key names one tile of a set.
type Key struct {
	Set
	Z    int
	X, Y int64
}

const (
	tagGeneration = 'g'
	tagTile       = 't'
	tagMeta       = 'm'
	tagDrop       = 'd'
	tagTask       = 'k'
	tagParams     = 'p'
)

// ErrBadName is returned for names that would break the key layout.
var ErrBadName = errors.New("store: names must be non-empty and free of NUL bytes")

// CheckName validates a layer, gridset, format or parameter-hash name.
func CheckName(s string) error {
	if s == "" || strings.IndexByte(s, 0) >= 0 {
		return ErrBadName
	}
	return nil
}

func layerPrefix(dst []byte, layer string) []byte {
	dst = append(dst, tagTile)
	dst = append(dst, layer...)
	return append(dst, 0)
}

func generationPrefix(dst []byte, layer string, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(layerPrefix(dst, layer), gen)
}

func setPrefix(dst []byte, s Set, gen uint64) []byte {
	dst = generationPrefix(dst, s.Layer, gen)
	dst = append(dst, s.Gridset...)
	dst = append(dst, 0)
	dst = append(dst, s.Format...)
	dst = append(dst, 0)
	dst = append(dst, s.Params...)
	return append(dst, 0)
}

func zoomPrefix(dst []byte, s Set, gen uint64, z int) []byte {
	return append(setPrefix(dst, s, gen), byte(z))
}

func columnPrefix(dst []byte, s Set, gen uint64, z int, x int64) []byte {
	return binary.BigEndian.AppendUint32(zoomPrefix(dst, s, gen, z), uint32(x))
}

func tileKey(dst []byte, k *Key, gen uint64) []byte {
	return binary.BigEndian.AppendUint32(columnPrefix(dst, k.Set, gen, k.Z, k.X), uint32(k.Y))
}

func generationKey(layer string) []byte {
	return append([]byte{tagGeneration}, layer...)
}

// dropKey records that generation gen of layer is truncated but its tiles
// may not all be deleted yet. It is written in the same transaction that
// moves the layer to gen+1, so a crash can never leave an invisible
// generation that nothing will reclaim.
func dropKey(layer string, gen uint64) []byte {
	dst := append([]byte{tagDrop}, layer...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, gen)
}

// parseDropKey is the inverse of dropKey.
func parseDropKey(k []byte) (layer string, gen uint64, ok bool) {
	if len(k) < 1+1+1+8 || k[0] != tagDrop || k[len(k)-9] != 0 {
		return "", 0, false
	}
	return string(k[1 : len(k)-9]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// MaxZoom and MaxIndex bound what the key layout can hold: one byte of
// level, four bytes of column and row.
const (
	MaxZoom  = 255
	MaxIndex = 1<<32 - 1
)
