package seeder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/cluster"
)

// An export on a clustered cache. Its seed phase is shared like any
// task's (work units, the registry's ledger). The claim that reports the
// last unit puts the record in its write phase (record.Write) instead of
// finishing it, and from then on:
//
//   - the first node whose poll sees the phase without a live writer
//     claims it (Write.Node, and a new generation Write.Gen), writes the
//     file in its own export directory, from the shared tile store;
//   - it copies the file into the cluster's storage in pieces of
//     pieceSize under exports/<id>/<gen>/<n>, so that every node can
//     serve it (a certmagic.Storage holds values, not streams: the pieces
//     bound what one call holds in memory);
//   - it records the file and finishes the task DONE in one locked write
//     of the record, and only if its claim still stands.
//
// A writer that stops (a reload, a shutdown) gives its claim back; one
// that goes silent for the lease (killed) loses it to the next node that
// polls, which writes the file again under the next generation: pieces of
// two claims never mix, and those of a lost claim are deleted when the
// file is recorded. The file goes with its task's record out of the
// history (registry.evict). A task killed during the write phase ends
// ABORTED like any other; its writer deletes its pieces when it sees.

// writePhase is an export's write phase in its record.
type writePhase struct {
	// Node holds the claim to write the file; "" when nobody does yet.
	Node string `json:"node,omitempty"`
	// Gen counts the claims: the pieces of claim Gen are under
	// exports/<id>/<Gen>/.
	Gen int64 `json:"gen"`
	// File is set with the task's DONE: the file's pieces and counts.
	File *sharedFile `json:"file,omitempty"`
}

// sharedFile is a written export in the cluster's storage.
type sharedFile struct {
	Size    int64     `json:"size"`
	Piece   int64     `json:"piece"` // bytes per piece, the last shorter
	Tiles   int64     `json:"tiles"`
	Bytes   int64     `json:"bytes"`
	Missing int64     `json:"missing"`
	Written time.Time `json:"written"`
}

// pieceSize is the bytes of one piece of a shared export file: a read or
// write of the storage holds one piece in memory.
const pieceSize = 4 << 20

func exportKey(id int64) string { return "exports/" + strconv.FormatInt(id, 10) }
func pieceKey(id, gen, n int64) string {
	return fmt.Sprintf("exports/%d/%d/%d", id, gen, n)
}

// errNotWriter: the write phase is not (or no longer) this node's to do.
var errNotWriter = errors.New("the export's write is not this node's")

// writable reports whether this node may claim the write phase of r: it
// has begun, and nobody alive holds it. A claim of this node's own that
// it is not acting on (its writer gave up) may be taken again.
func (reg *registry) writable(w *writePhase) bool {
	return w != nil && w.File == nil && (w.Node == "" || w.Node == reg.n.ID || !reg.n.Alive(w.Node))
}

// claimWrite takes the write phase of task id for this node and returns
// its generation; errNotWriter if another live node holds it.
func (reg *registry) claimWrite(id int64) (int64, error) {
	var gen int64
	_, err := reg.update(id, func(rec *record) error {
		if !rec.active() || !reg.writable(rec.Write) {
			return errNotWriter
		}
		if w := rec.Write; w.Node != "" && w.Node != reg.n.ID {
			reg.log.Info("taking over an export's write from a silent node", zap.Int64("task", id), zap.String("from", w.Node))
		}
		rec.Write.Node = reg.n.ID
		rec.Write.Gen++
		gen = rec.Write.Gen
		return nil
	})
	return gen, err
}

// releaseWrite gives back claim gen, so that another node writes at once.
func (reg *registry) releaseWrite(id, gen int64) {
	_, err := reg.update(id, func(rec *record) error {
		if w := rec.Write; w == nil || w.Node != reg.n.ID || w.Gen != gen {
			return errNotWriter
		}
		rec.Write.Node = ""
		return nil
	})
	if err != nil && !errors.Is(err, errNotWriter) && !errors.Is(err, errGone) {
		reg.log.Warn("giving back an export's write failed: another node takes it after the lease", zap.Int64("task", id), zap.Error(err))
	}
}

// finishWrite records the file of claim gen and finishes the task DONE.
func (reg *registry) finishWrite(id, gen int64, f *sharedFile) error {
	_, err := reg.update(id, func(rec *record) error {
		if w := rec.Write; w == nil || w.Node != reg.n.ID || w.Gen != gen {
			return errNotWriter
		}
		rec.Write.File = f
		rec.State, rec.Finished = Done, time.Now()
		return nil
	})
	return err
}

// dropClaim deletes the pieces claim gen of task id wrote.
func (reg *registry) dropClaim(id, gen int64) {
	reg.n.Delete(exportKey(id) + "/" + strconv.FormatInt(gen, 10))
}

// dropOthers deletes the pieces of task id's claims but keep's: those of
// claims that lost the write.
func (reg *registry) dropOthers(id, keep int64) {
	keys, err := reg.n.List(exportKey(id))
	if err != nil {
		return // they go with the task's record
	}
	for _, k := range keys {
		if gen := path.Base(k); gen != strconv.FormatInt(keep, 10) {
			reg.n.Delete(exportKey(id) + "/" + gen)
		}
	}
}

// startSharedWrites claims, for each export in recs whose write phase
// has no live writer and whose share this node runs, the write and
// writes the file. e.mu is not held.
func (e *Engine) startSharedWrites(reg *registry, recs []*record) {
	for _, r := range recs {
		if !r.active() || !reg.writable(r.Write) {
			continue
		}
		e.mu.Lock()
		t, ok := e.byID[r.ID]
		if !ok || t.cl == nil || t.exp.writing || t.killed.Load() || t.stopped.Load() || e.cl != reg {
			e.mu.Unlock()
			continue
		}
		t.exp.writing = true // one writer per task on this node
		e.running.Add(1)
		e.mu.Unlock()
		go func() {
			defer e.running.Done()
			e.writeShared(reg, t)
			e.mu.Lock()
			t.exp.writing = false
			e.mu.Unlock()
		}()
	}
}

// writeShared claims and does the write phase of t.
func (e *Engine) writeShared(reg *registry, t *Task) {
	gen, err := reg.claimWrite(t.ID)
	if err != nil {
		if !errors.Is(err, errNotWriter) && !errors.Is(err, errGone) {
			e.log.Warn("claiming an export's write failed", zap.Int64("id", t.ID), zap.Error(err))
		}
		return
	}
	e.mu.Lock()
	dir := e.cfg.ExportDir
	e.mu.Unlock()
	log := e.log.With(zap.Int64("id", t.ID), zap.Int64("claim", gen))
	log.Info("writing a cluster export's file")
	p := filepath.Join(dir, "cluster", fmt.Sprintf("task-%d.%d%s", t.ID, gen, t.Spec.Export.Ext()))
	err = e.writeExport(t, p)
	var f *sharedFile
	if err == nil {
		f, err = e.uploadExport(reg, t, gen, p)
	}
	os.Remove(p)
	if err == nil {
		err = reg.finishWrite(t.ID, gen, f)
	}
	halted := t.killed.Load() || t.stopped.Load() || e.ctx.Err() != nil
	switch {
	case err == nil:
		reg.dropOthers(t.ID, gen) // a lost claim's
		log.Info("cluster export written", zap.Int64("tiles", f.Tiles), zap.Int64("size", f.Size))
	case errors.Is(err, errNotWriter), errors.Is(err, errGone):
		// Another node took the write over (this one was judged silent),
		// or the task was killed: its pieces are not the file.
		reg.dropClaim(t.ID, gen)
		log.Info("cluster export's write ended elsewhere", zap.Error(err))
	case halted:
		reg.dropClaim(t.ID, gen)
		if !t.killed.Load() {
			reg.releaseWrite(t.ID, gen) // this node stops: another writes now
		}
	case errors.Is(err, cluster.ErrStorage):
		// The shared storage failed: the task is not lost, the next
		// poll (here or elsewhere) writes again.
		reg.dropClaim(t.ID, gen)
		reg.releaseWrite(t.ID, gen)
		e.setLastErr(t, err.Error())
		log.Warn("copying a cluster export's file into the storage failed: writing it again", zap.Error(err))
	default:
		// What ends a single node's export ends this one (the tile
		// store unreadable, the disk full).
		reg.dropClaim(t.ID, gen)
		e.abort(t, "writing the export: "+err.Error())
	}
}

// uploadExport copies the written file at p into the storage as claim
// gen's pieces.
func (e *Engine) uploadExport(reg *registry, t *Task, gen int64, p string) (*sharedFile, error) {
	file, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, pieceSize)
	for n := int64(0); n*pieceSize < st.Size(); n++ {
		if t.killed.Load() || t.stopped.Load() || e.ctx.Err() != nil {
			return nil, context.Canceled
		}
		k, err := io.ReadFull(file, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		if err := reg.n.Store(pieceKey(t.ID, gen, n), buf[:k]); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	f := &sharedFile{Size: st.Size(), Piece: pieceSize, Tiles: t.exp.tiles, Bytes: t.exp.bytes,
		Missing: t.exp.missing, Written: time.Now().UTC()}
	e.mu.Unlock()
	return f, nil
}

// exportInfo is the export's part of the record's task resource.
func (r *record) exportInfo() *ExportInfo {
	x := r.Export
	if x == nil {
		return nil
	}
	in := &ExportInfo{Kind: x.Kind, CachedOnly: x.CachedOnly, Phase: "seed"}
	if w := r.Write; w != nil {
		in.Phase, in.Node = "write", w.Node
		if f := w.File; f != nil {
			in.Tiles, in.Bytes, in.Missing = f.Tiles, f.Bytes, f.Missing
			if r.State == Done {
				in.Phase, in.File = "done", exportName(r.ID, x)
			}
		}
	}
	return in
}

// openExport opens a finished clustered export's file from its pieces.
func (reg *registry) openExport(id int64, name string) (*ExportContent, error) {
	r, err := reg.lookup(id)
	if errors.Is(err, ErrNoTask) {
		return nil, ErrNoExport
	}
	if err != nil {
		return nil, err
	}
	if r.State != Done || r.Export == nil || r.Write == nil || r.Write.File == nil || exportName(id, r.Export) != name {
		return nil, ErrNoExport
	}
	f := r.Write.File
	pr := &pieceReader{reg: reg, id: id, gen: r.Write.Gen, size: f.Size, piece: f.Piece, cur: -1}
	return &ExportContent{ReadSeeker: pr, Size: f.Size, ModTime: f.Written, close: func() error { return nil }}, nil
}

// pieceReader reads a shared export file, one piece in memory at a time.
type pieceReader struct {
	reg                  *registry
	id, gen, size, piece int64
	off                  int64
	cur                  int64 // the piece in buf, -1 none
	buf                  []byte
}

func (p *pieceReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := p.off / p.piece
	if n != p.cur {
		data, err := p.reg.n.Load(pieceKey(p.id, p.gen, n))
		if cluster.IsNotExist(err) {
			return 0, ErrNoExport // deleted with its task meanwhile
		}
		if err != nil {
			return 0, err
		}
		if want := min(p.piece, p.size-n*p.piece); int64(len(data)) != want {
			return 0, fmt.Errorf("piece %d of export %d holds %d bytes, not %d", n, p.id, len(data), want)
		}
		p.buf, p.cur = data, n
	}
	k := copy(b, p.buf[p.off-n*p.piece:])
	p.off += int64(k)
	return k, nil
}

func (p *pieceReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += p.off
	case io.SeekEnd:
		offset += p.size
	}
	if offset < 0 {
		return 0, errors.New("seek before the start of the file")
	}
	p.off = offset
	return offset, nil
}
