package sqlitefile

import (
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ncruces/go-sqlite3"
)

// TestCellSizeIsSQLites checks CellSize against SQLite itself: a row of
// blob n and a filler row whose cell takes exactly the rest of a leaf
// page stay in one page, and a filler one byte larger splits it. A cell
// size off by a byte either way fails one of the two.
func TestCellSizeIsSQLites(t *testing.T) {
	for _, pageSize := range []int{1024, 4096, 65536} {
		p := NewPacker(pageSize)
		sizes := []int{0, 1, 100, 900, 1000, 2000, 3000, 3500, 4000, 4100, 5000, 7000, 8500, 12000, 30000, 60000, 70000, 200000}
		for _, n := range sizes {
			cell := p.CellSize(RecordSize(Null, Blob(n)), 1)
			rest := p.capacity - cell
			if rest < 8 {
				continue
			}
			m := fillerFor(p, rest)
			if m < 0 {
				continue
			}
			fits := pageCount(t, pageSize, n, m)
			over := pageCount(t, pageSize, n, m+1)
			// One leaf more and the root above them: two pages.
			if over-fits != 2 {
				t.Errorf("pages of %d bytes, a blob of %d (cell %d) and a filler of %d filling the page: %d pages, a filler a byte larger: %d (want 2 more)",
					pageSize, n, cell, m, fits, over)
			}
		}
	}
}

// fillerFor is the blob length whose row (rowid 2) takes exactly room,
// or -1.
func fillerFor(p *Packer, room int) int {
	for m := 0; m < room; m++ {
		if c := p.CellSize(RecordSize(Null, Blob(m)), 2); c == room {
			return m
		} else if c > room {
			return -1
		}
	}
	return -1
}

// pageCount writes two rows into a new file and returns its pages.
func pageCount(t *testing.T, pageSize, n, m int) int {
	t.Helper()
	c, err := sqlite3.Open(filepath.Join(t.TempDir(), "cells.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec("PRAGMA page_size=" + strconv.Itoa(pageSize) + "; CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec("INSERT INTO t (b) VALUES (zeroblob(" + strconv.Itoa(n) + ")); INSERT INTO t (b) VALUES (zeroblob(" + strconv.Itoa(m) + "))"); err != nil {
		t.Fatal(err)
	}
	st, _, err := c.Prepare("PRAGMA page_count")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Step()
	return st.ColumnInt(0)
}

// TestPackerOrderFillsPages: inserted in the packer's order, window after
// window, cells fill pages as SQLite does ("next fit": a cell that does
// not fit in the last page starts a new one) into as many pages as the
// packer planned, and far fewer than in the order they came.
func TestPackerOrderFillsPages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := NewPacker(4096)
	var all []int
	seqPages, seqRoom := 0, 0
	packedPages, packedRoom := 0, 0
	for range 20 {
		sizes := make([]int, 300)
		for i := range sizes {
			n := 100
			if r.IntN(5) != 0 {
				n = 5000 + r.IntN(25000)
			}
			sizes[i] = p.CellSize(RecordSize(Null, Blob(n)), 100000)
		}
		all = append(all, sizes...)
		order := p.Order(sizes)
		seen := make([]bool, len(sizes))
		for _, i := range order {
			if seen[i] {
				t.Fatalf("row %d twice in the order", i)
			}
			seen[i] = true
			packedPages, packedRoom = nextFit(packedPages, packedRoom, p.capacity, sizes[i])
		}
		if len(order) != len(sizes) {
			t.Fatalf("order of %d rows for %d", len(order), len(sizes))
		}
		if packedRoom != p.tail {
			t.Fatalf("the last page has %d bytes of room, the packer thinks %d", packedRoom, p.tail)
		}
	}
	for _, s := range all {
		seqPages, seqRoom = nextFit(seqPages, seqRoom, p.capacity, s)
	}
	used := 0
	for _, s := range all {
		used += s
	}
	minPages := (used + p.capacity - 1) / p.capacity
	t.Logf("%d cells, %d bytes: %d pages in order, %d packed, at least %d", len(all), used, seqPages, packedPages, minPages)
	if packedPages > minPages+minPages/50 {
		t.Errorf("packed into %d pages, over 1 %% more than the %d the cells need", packedPages, minPages)
	}
	if packedPages >= seqPages {
		t.Errorf("packed %d pages, in order %d", packedPages, seqPages)
	}
}

func nextFit(pages, room, capacity, size int) (int, int) {
	if size > room {
		return pages + 1, capacity - size
	}
	return pages, room - size
}
