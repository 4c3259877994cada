package imaging

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zlib"
)

// The PNG container, written by hand because image/png chooses the row
// filters itself and offers no other deflate. Only what tiles need:
// 8-bit (or fewer bits, paletted and gray) non-interlaced images.

// PNG colour types (IHDR).
const (
	ctGray    = 0
	ctRGB     = 2
	ctPalette = 3
	ctRGBA    = 6
)

// writeChunk appends one chunk: length, type, data, CRC of type and data.
// The CRC is taken over dst's copy: passing the stack arrays to crc32
// would move them to the heap.
func writeChunk(dst *bytes.Buffer, typ string, data []byte) {
	start := dst.Len()
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
	copy(hdr[4:], typ)
	dst.Write(hdr[:])
	dst.Write(data)
	binary.BigEndian.PutUint32(hdr[:4], crc32.ChecksumIEEE(dst.Bytes()[start+4:]))
	dst.Write(hdr[:4])
}

// writeHeader appends the signature and IHDR.
func writeHeader(dst *bytes.Buffer, w, h int, depth, colorType uint8) {
	dst.Write(pngMagic)
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = depth, colorType
	// ihdr[10:13]: deflate, adaptive filtering method 0, no interlace.
	writeChunk(dst, "IHDR", ihdr[:])
}

func writeEnd(dst *bytes.Buffer) { writeChunk(dst, "IEND", nil) }

// zlibWriters pools deflate state per level (1..9): a writer costs from
// tens of KB (fast levels) to over a MB (level 9) to set up.
var zlibWriters [10]sync.Pool

// writeIDAT appends one IDAT chunk holding raw (the filtered scanlines)
// deflated at level. It compresses straight into dst and patches the
// length afterwards, so the compressed data is never copied.
func writeIDAT(dst *bytes.Buffer, raw []byte, level int) {
	start := dst.Len()
	dst.Write([]byte{0, 0, 0, 0, 'I', 'D', 'A', 'T'})
	zw, _ := zlibWriters[level].Get().(*zlib.Writer)
	if zw == nil {
		var err error
		if zw, err = zlib.NewWriterLevel(dst, level); err != nil {
			panic(err) // level is one of ours, always valid
		}
	} else {
		zw.Reset(dst)
	}
	// Writes to a bytes.Buffer cannot fail (it panics when out of memory).
	zw.Write(raw)
	zw.Close()
	zw.Reset(nil) // do not keep dst alive from the pool
	zlibWriters[level].Put(zw)

	chunk := dst.Bytes()[start:]
	binary.BigEndian.PutUint32(chunk, uint32(len(chunk)-8))
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.ChecksumIEEE(chunk[4:]))
	dst.Write(crc[:])
}
