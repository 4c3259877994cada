package tilelist

import (
	"encoding/binary"
	"math/bits"
)

// parseTile reads "z/x/y" or "z x y" with optional surrounding white space.
// ok is false with z == -1 for a blank or comment line, and with z == 0 for
// a line that is not a tile. Numbers too long for int64 saturate, so they
// are reported as outside the grid rather than wrapping into it.
func parseTile(b []byte) (z, x, y int64, ok bool) {
	b = trim(b)
	if len(b) == 0 || b[0] == '#' {
		return -1, 0, 0, false
	}
	var v [3]int64
	i := 0
	var sep byte // '/' or ' ' (a run of spaces and tabs), fixed by the first separator
	for n := range 3 {
		if n > 0 {
			if i >= len(b) {
				return 0, 0, 0, false
			}
			c := b[i]
			switch {
			case c == '/' && sep != ' ':
				sep = '/'
				i++
			case (c == ' ' || c == '\t') && sep != '/':
				sep = ' '
				for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
					i++
				}
			default:
				return 0, 0, 0, false
			}
		}
		start := i
		var acc int64
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if acc > (1<<62)/10 {
				acc = 1 << 62 // saturate: far outside any grid
			} else {
				acc = acc*10 + int64(b[i]-'0')
			}
			i++
		}
		if i == start {
			return 0, 0, 0, false
		}
		v[n] = acc
	}
	if i != len(b) {
		return 0, 0, 0, false
	}
	return v[0], v[1], v[2], true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

func trim(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// quote is the trimmed line for an error message, cut short so that a
// binary upload does not produce a 4 kB error.
func quote(b []byte) string {
	b = trim(b)
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func popcount(v uint64) int { return bits.OnesCount64(v) }

func trailingZeros(v uint64) int { return bits.TrailingZeros64(v) }
