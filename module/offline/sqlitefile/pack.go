package sqlitefile

// Leaf packing: the order in which a window of rows goes into a rowid
// table decides how full its b-tree leaf pages are.
//
// SQLite appends a row with a larger rowid than any before it to the last
// leaf page if its cell fits there, and otherwise starts a new leaf page
// with that cell alone (balance_quick in btree.c): the page left behind
// keeps whatever room the cell did not fit in. Rows in the order they
// come therefore fill leaf pages "next fit", and a tile's cell (the whole
// tile when it fits in the page, else a head of a few hundred bytes to a
// page, the rest in overflow pages) is large against a page: a rendered
// map's mix of tile sizes left 4 % of a 4 KB-page file empty.
//
// A Packer instead packs a window of cells into pages "first fit
// decreasing", the open last page first, and hands the rows back page by
// page. Inserted in that order, every cell lands where the packing put
// it: a cell of a later page did not fit in any earlier page's room when
// it was placed (first fit tried them first), and rooms only shrink. The
// cell sizes come from SQLite's file format
// (https://sqlite.org/fileformat2.html, "B-tree Pages" and "Record
// Format"); a wrong prediction costs room, never correctness.

import (
	"encoding/binary"
	"slices"
)

// Packer plans the order of rows for one rowid table of a file with pages
// of pageSize bytes. Rowids must be appended in increasing order, as
// INTEGER PRIMARY KEY rows inserted without an id or with the next one
// are.
type Packer struct {
	usable, maxLocal, minLocal int
	capacity                   int // room of a leaf page for cells and their pointers
	tail                       int // room left in the table's last leaf page; 0 before the first
	bins                       []int
	order                      []int
}

// NewPacker plans for a table with pages of pageSize bytes and no
// reserved bytes at the end of a page.
func NewPacker(pageSize int) *Packer {
	u := pageSize
	return &Packer{
		usable:   u,
		maxLocal: u - 35,
		minLocal: (u-12)*32/255 - 23,
		capacity: u - 8, // the leaf page's header
	}
}

// CellSize is the room a row takes in a table leaf page: its cell
// (payload length, rowid, the payload or its head, the first overflow
// page's number) and the cell's 2-byte pointer. payload is the record's
// length (RecordSize).
func (p *Packer) CellSize(payload int, rowid int64) int {
	n := uvarintLen(uint64(payload)) + uvarintLen(uint64(rowid))
	if payload <= p.maxLocal {
		n += payload
	} else {
		local := p.minLocal + (payload-p.minLocal)%(p.usable-4)
		if local > p.maxLocal {
			local = p.minLocal
		}
		n += local + 4
	}
	return max(n, 4) + 2
}

// Order returns the order in which to insert the rows whose cells take
// sizes (CellSize) so that they fill leaf pages: the indexes of sizes,
// page by page, the table's open last page first. It remembers the room
// left in the last page for the next window. The returned slice is
// reused by the next call.
func (p *Packer) Order(sizes []int) []int {
	idx := p.order[:0]
	for i := range sizes {
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int { return sizes[b] - sizes[a] })
	// bins[k] is the room left in page k; page 0 is the open last page.
	bins := append(p.bins[:0], p.tail)
	place := make([]int, len(sizes)) // page of each row
	for _, i := range idx {
		k := 0
		for k < len(bins) && bins[k] < sizes[i] {
			k++
		}
		if k == len(bins) {
			bins = append(bins, p.capacity)
		}
		bins[k] -= sizes[i]
		place[i] = k
	}
	// Rows page by page; within a page, any order fits.
	slices.SortStableFunc(idx, func(a, b int) int { return place[a] - place[b] })
	if len(sizes) > 0 {
		p.tail = bins[len(bins)-1]
	}
	p.bins, p.order = bins, idx
	return idx
}

// RecordSize is the length of a record (a row's payload) whose columns
// are described by serial types: the header (its own length and a
// varint per column) and the values.
func RecordSize(cols ...Column) int {
	hdr, body := 0, 0
	for _, c := range cols {
		hdr += uvarintLen(c.serialType)
		body += c.n
	}
	// The header's length counts its own varint.
	h := hdr + 1
	if uvarintLen(uint64(h)) > 1 {
		h = hdr + uvarintLen(uint64(hdr+2))
	}
	return h + body
}

// Column is a value of a record: its serial type and its length.
type Column struct {
	serialType uint64
	n          int
}

// Null is a NULL column, which is also how a rowid table stores its
// INTEGER PRIMARY KEY.
var Null = Column{0, 0}

// Int is an integer column of value v, in the smallest serial type that
// holds it (0 and 1 take no bytes: schema format 4, SQLite's default).
func Int(v int64) Column {
	switch {
	case v == 0:
		return Column{8, 0}
	case v == 1:
		return Column{9, 0}
	case v >= -128 && v <= 127:
		return Column{1, 1}
	case v >= -32768 && v <= 32767:
		return Column{2, 2}
	case v >= -8388608 && v <= 8388607:
		return Column{3, 3}
	case v >= -2147483648 && v <= 2147483647:
		return Column{4, 4}
	case v >= -140737488355328 && v <= 140737488355327:
		return Column{5, 6}
	}
	return Column{6, 8}
}

// Blob is a BLOB column of n bytes.
func Blob(n int) Column { return Column{uint64(n)*2 + 12, n} }

func uvarintLen(v uint64) int {
	// SQLite's varints are big-endian 7 bits a byte, with a 9th byte of
	// 8 bits; for the values here (lengths, rowids below 2^56) that is
	// the same count as Go's.
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// Window limits: rows are held in memory until this many, or this many
// bytes of blobs, are waiting. First fit decreasing packs a few hundred
// cells as tightly as a few thousand, and the bytes bound the memory a
// writer holds.
const (
	windowRows  = 1024
	windowBytes = 4 << 20
)

// A Window holds the blobs of rows waiting to be inserted in packed order
// (a copy: callers' buffers are theirs again when Add returns), with each
// row's record length. Writers keep the rest of a row beside it, by the
// index Add returns.
type Window struct {
	packer   *Packer
	arena    []byte
	ends     []int
	payloads []int
	sizes    []int
}

// NewWindow holds rows for a table of pages of pageSize bytes.
func NewWindow(pageSize int) *Window { return &Window{packer: NewPacker(pageSize)} }

// Add holds a row whose blob is blob and whose record is payload bytes
// long, and returns its index in the window.
func (w *Window) Add(blob []byte, payload int) int {
	if w.arena == nil {
		// One allocation for the life of the writer, unless a tile is
		// larger than the slack.
		w.arena = make([]byte, 0, windowBytes+256<<10)
	}
	w.arena = append(w.arena, blob...)
	w.ends = append(w.ends, len(w.arena))
	w.payloads = append(w.payloads, payload)
	return len(w.ends) - 1
}

// Len is the number of rows held.
func (w *Window) Len() int { return len(w.ends) }

// Full reports whether the window should be written out now.
func (w *Window) Full() bool { return len(w.ends) >= windowRows || len(w.arena) >= windowBytes }

// Blob is row i's blob, valid until Reset.
func (w *Window) Blob(i int) []byte {
	start := 0
	if i > 0 {
		start = w.ends[i-1]
	}
	return w.arena[start:w.ends[i]:w.ends[i]]
}

// Order is the order in which to insert the rows (indexes from Add),
// their rowids being assigned from firstRowid up in that order.
func (w *Window) Order(firstRowid int64) []int {
	// Every row is sized with the largest rowid of the window: a rowid's
	// varint grows at 2^7, 2^14, 2^21…, so a window that straddles one
	// overstates some cells by a byte.
	last := firstRowid + int64(len(w.ends)) - 1
	w.sizes = w.sizes[:0]
	for _, p := range w.payloads {
		w.sizes = append(w.sizes, w.packer.CellSize(p, last))
	}
	return w.packer.Order(w.sizes)
}

// Reset empties the window, keeping its memory for the next rows and the
// packer's knowledge of the table's last page.
func (w *Window) Reset() {
	w.arena, w.ends, w.payloads = w.arena[:0], w.ends[:0], w.payloads[:0]
}
