package imaging

import (
	"bytes"
	"sync"
)

// Uniform tiles (open sea, empty land, transparent areas outside the data)
// are a large share of any seed. They are written in the smallest form PNG
// has, one bit per pixel, and the bytes are kept per colour and size so a
// seed full of sea encodes each such tile once.

// nrgba is a colour as PNG stores it: 8-bit, not premultiplied, packed
// R | G<<8 | B<<16 | A<<24. Fully transparent colours are all 0.
type nrgba uint32

func packNRGBA(r, g, b, a uint8) nrgba {
	if a == 0 {
		return 0
	}
	return nrgba(r) | nrgba(g)<<8 | nrgba(b)<<16 | nrgba(a)<<24
}

func (c nrgba) r() uint8 { return uint8(c) }
func (c nrgba) g() uint8 { return uint8(c >> 8) }
func (c nrgba) b() uint8 { return uint8(c >> 16) }
func (c nrgba) a() uint8 { return uint8(c >> 24) }

// unpremultiply converts a premultiplied 8-bit colour the way
// color.NRGBAModel does, so tiles decode to exactly what the source's At
// reports.
func unpremultiply(r, g, b, a uint8) nrgba {
	switch a {
	case 0:
		return 0
	case 0xff:
		return packNRGBA(r, g, b, a)
	}
	// 0x101 widens 8 to 16 bits; 0xffff/a undoes the premultiplication.
	const m = 0x101 * 0xffff
	a16 := uint32(a) * 0x101
	return packNRGBA(uint8(uint32(r)*m/a16>>8), uint8(uint32(g)*m/a16>>8), uint8(uint32(b)*m/a16>>8), a)
}

type uniformKey struct {
	c    nrgba
	w, h int
}

// uniformMemoMax bounds the memo: real seeds meet a handful of uniform
// colours; a pathological source cannot grow it past ~200 KB.
const uniformMemoMax = 1024

var uniformMemo struct {
	sync.RWMutex
	m map[uniformKey][]byte
}

// writeUniform appends a w×h PNG of colour c.
func writeUniform(dst *bytes.Buffer, c nrgba, w, h int) {
	k := uniformKey{c, w, h}
	uniformMemo.RLock()
	b, ok := uniformMemo.m[k]
	uniformMemo.RUnlock()
	if !ok {
		var buf bytes.Buffer
		encodeUniform(&buf, c, w, h)
		b = buf.Bytes()
		uniformMemo.Lock()
		if uniformMemo.m == nil || len(uniformMemo.m) >= uniformMemoMax {
			uniformMemo.m = make(map[uniformKey][]byte)
		}
		uniformMemo.m[k] = b
		uniformMemo.Unlock()
	}
	dst.Write(b)
}

// encodeUniform writes 1-bit pixels: gray where the colour is black, white
// or fully transparent (no palette needed: ~14 bytes less), else a
// one-entry palette.
func encodeUniform(dst *bytes.Buffer, c nrgba, w, h int) {
	var bit byte // every pixel's value: 0 or 1
	switch {
	case c == 0:
		writeHeader(dst, w, h, 1, ctGray)
		writeChunk(dst, "tRNS", []byte{0, 0}) // gray level 0 is transparent
	case c == packNRGBA(0, 0, 0, 0xff):
		writeHeader(dst, w, h, 1, ctGray)
	case c == packNRGBA(0xff, 0xff, 0xff, 0xff):
		writeHeader(dst, w, h, 1, ctGray)
		bit = 1
	default:
		writeHeader(dst, w, h, 1, ctPalette)
		writeChunk(dst, "PLTE", []byte{c.r(), c.g(), c.b()})
		if c.a() != 0xff {
			writeChunk(dst, "tRNS", []byte{c.a()})
		}
	}
	n := (w + 7) / 8
	raw := make([]byte, h*(n+1))
	if bit == 1 {
		for i := range raw {
			if i%(n+1) != 0 { // keep the filter bytes None
				raw[i] = 0xff
			}
		}
	}
	writeIDAT(dst, raw, 9) // once per colour and size: the best level is free
	writeEnd(dst)
}
