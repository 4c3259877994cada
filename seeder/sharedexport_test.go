package seeder

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// An export's record after its last unit: in its write phase, not DONE.
// The write is one node's while it lives; a node that leaves loses it to
// the next claim, whose generation is new; the loser can neither finish
// the task nor have its pieces read as the file.
func TestRegistryExportWriteClaims(t *testing.T) {
	regs := testRegistries(t, 3)
	a, b, c := regs[0], regs[1], regs[2]
	rec := testRecord(7, 2, 1)
	rec.Type, rec.Export = Export, &ExportSpec{Kind: ExportGeoPackage}
	if err := a.submit(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := a.claimWrite(7); !errors.Is(err, errNotWriter) {
		t.Fatalf("a write claimed before the seed phase ended: %v", err)
	}
	got, _, err := a.claim(7, 2, report{})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v %v", got, err)
	}
	_, r, err := a.claim(7, 2, report{done: []doneUnit{{Unit: 0, Processed: 16}, {Unit: 1, Processed: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != Running || r.Write == nil || r.Write.Node != "" || r.Processed != 32 {
		t.Fatalf("after the last unit: state %v, write %+v, processed %d; want RUNNING in its write phase", r.State, r.Write, r.Processed)
	}
	if in := r.exportInfo(); in.Phase != "write" || in.File != "" {
		t.Fatalf("export info %+v, want phase write and no file", in)
	}
	gen, err := b.claimWrite(7)
	if err != nil || gen != 1 {
		t.Fatalf("b's claim: gen %d, %v", gen, err)
	}
	if _, err := c.claimWrite(7); !errors.Is(err, errNotWriter) {
		t.Fatalf("c claimed the write b holds and lives: %v", err)
	}
	// b's pieces of claim 1, then b leaves (as a killed node's lease runs
	// out, only sooner).
	if err := b.n.Store(pieceKey(7, 1, 0), []byte("stale")); err != nil {
		t.Fatal(err)
	}
	b.n.Destruct()
	deadline := time.Now().Add(30 * time.Second)
	for c.n.Alive(b.n.ID) {
		if time.Now().After(deadline) {
			t.Fatal("c still counts b alive 30 s after it left")
		}
		time.Sleep(20 * time.Millisecond)
	}
	gen2, err := c.claimWrite(7)
	if err != nil || gen2 != 2 {
		t.Fatalf("c's claim after b left: gen %d, %v", gen2, err)
	}
	// A claim that is not the standing one finishes nothing: an older
	// generation (b's, were it alive and late), or another node.
	if err := c.finishWrite(7, 1, &sharedFile{Size: 5, Piece: 5}); !errors.Is(err, errNotWriter) {
		t.Fatalf("the lost claim 1 finished the task: %v", err)
	}
	if err := a.finishWrite(7, 2, &sharedFile{Size: 5, Piece: 5}); !errors.Is(err, errNotWriter) {
		t.Fatalf("a finished the task c's claim holds: %v", err)
	}
	// c's file: 11 bytes in pieces of 4.
	want := []byte("hello world")
	for n := int64(0); n*4 < int64(len(want)); n++ {
		if err := c.n.Store(pieceKey(7, 2, n), want[n*4:min(n*4+4, int64(len(want)))]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.openExport(7, "task-7.gpkg"); !errors.Is(err, ErrNoExport) {
		t.Fatalf("a file opened before the task was DONE: %v", err)
	}
	if err := c.finishWrite(7, 2, &sharedFile{Size: int64(len(want)), Piece: 4, Tiles: 3}); err != nil {
		t.Fatal(err)
	}
	c.dropOthers(7, 2)
	if _, err := a.n.Load(pieceKey(7, 1, 0)); err == nil {
		t.Error("the lost claim's piece is still stored")
	}
	done, err := a.lookup(7)
	if err != nil || done.State != Done || done.Write.File == nil {
		t.Fatalf("after c's write: %+v, %v", done, err)
	}
	if in := done.exportInfo(); in.Phase != "done" || in.File != "task-7.gpkg" || in.Tiles != 3 || in.Node != c.n.ID {
		t.Fatalf("export info %+v", in)
	}
	// Every node reads the file, whole and from any offset.
	f, err := a.openExport(7, "task-7.gpkg")
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(all, want) || f.Size != int64(len(want)) {
		t.Fatalf("read %q, %v; size %d", all, err, f.Size)
	}
	for off := int64(0); off <= int64(len(want)); off++ {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(rest, want[off:]) {
			t.Fatalf("from %d: %q, %v", off, rest, err)
		}
	}
	if _, err := a.openExport(7, "task-7.mbtiles"); !errors.Is(err, ErrNoExport) {
		t.Errorf("the file opened under another kind's name: %v", err)
	}
	// Out of the history (3 kept), the file goes too.
	for id := int64(8); id <= 11; id++ {
		r := testRecord(id, 1, 1)
		if err := a.submit(r); err != nil {
			t.Fatal(err)
		}
		if _, err := a.end(id, "killed"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.lookup(7); !errors.Is(err, ErrNoTask) {
		t.Fatalf("task 7 still known after 4 newer finished: %v", err)
	}
	if keys, _ := a.n.List(exportKey(7)); len(keys) > 0 {
		t.Errorf("pieces left after the task left the history: %v", keys)
	}
	if _, err := a.openExport(7, "task-7.gpkg"); !errors.Is(err, ErrNoExport) {
		t.Errorf("an evicted export opened: %v", err)
	}
}

// A piece that is not the size the record says fails the read in one
// line instead of serving a file of the wrong bytes.
func TestSharedExportDamagedPiece(t *testing.T) {
	regs := testRegistries(t, 1)
	r := regs[0]
	rec := testRecord(3, 0, 1)
	rec.Type, rec.Export = Export, &ExportSpec{Kind: ExportMBTiles}
	rec.State, rec.Write = Done, &writePhase{Node: r.n.ID, Gen: 1, File: &sharedFile{Size: 8, Piece: 4}}
	if err := r.submit(rec); err != nil {
		t.Fatal(err)
	}
	r.n.Store(pieceKey(3, 1, 0), []byte("abcd"))
	r.n.Store(pieceKey(3, 1, 1), []byte("ef"))
	f, err := r.openExport(3, "task-3.mbtiles")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err == nil || string(b) != "abcd" {
		t.Fatalf("read %q, %v; want abcd and an error", b, err)
	}
	t.Log(err)
}
