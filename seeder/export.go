package seeder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
	"github.com/tilecache/caddy-tilecache/module/offline/mbtiles"
	"github.com/tilecache/caddy-tilecache/module/offline/tilematrix"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
)

// An export task writes an area of a layer's tile set into one file, an
// MBTiles or a GeoPackage, to be downloaded. It runs in two phases:
//
//   - the seed phase is a seed of the area (skipping what is cached and
//     fresh, one upstream request per metatile), or with CachedOnly only
//     counts the area; it is checkpointed and resumed as any seed;
//   - the write phase, once every metatile is done, reads the area's
//     tiles from the store in the plan's order and writes the file under
//     its .partial name (sqlitefile), renamed when complete and checked.
//
// The task is DONE only when the file has its name. A restart in the
// write phase writes the file again from the start (the tiles are all
// cached by then, so that goes at the store's pace); a kill or a failure
// removes the .partial. Tiles missing at write time (CachedOnly, or
// failed in the seed phase) are left out of the file and counted.

// The file formats of an export.
const (
	ExportMBTiles    = "mbtiles"
	ExportGeoPackage = "gpkg"
)

// ExportSpec is what an export adds to a seed's spec.
type ExportSpec struct {
	// Kind is ExportMBTiles or ExportGeoPackage.
	Kind string `json:"kind"`
	// CachedOnly writes what the cache holds without seeding first.
	CachedOnly bool `json:"cachedOnly,omitempty"`
}

// Ext is the file name extension of the kind.
func (x *ExportSpec) Ext() string {
	if x.Kind == ExportGeoPackage {
		return ".gpkg"
	}
	return ".mbtiles"
}

// exportState is a task's write phase, guarded by the engine's mutex.
type exportState struct {
	writing bool  // the write phase runs
	written bool  // the file has its name: the task may be DONE
	tiles   int64 // tiles written so far
	bytes   int64
	missing int64 // tiles of the area not in the store
}

// ExportInfo is the export's part of a task's resource.
type ExportInfo struct {
	Kind       string `json:"kind"`
	CachedOnly bool   `json:"cachedOnly"`
	// Phase is "seed", "write" or "done".
	Phase   string `json:"phase"`
	Tiles   int64  `json:"tiles"`
	Bytes   int64  `json:"bytes"`
	Missing int64  `json:"missing"`
	// File is the file's name under rest/exports/, once written.
	File string `json:"file,omitempty"`
	// Node is, on a clustered cache, the node that writes (or wrote) the
	// file.
	Node string `json:"node,omitempty"`
}

// resolveExport checks that the layer's gridset and format can be written
// as x; it is called at submission.
func resolveExport(x *ExportSpec, g *tilecache.Grid, f *tilecache.Format) error {
	switch x.Kind {
	case ExportMBTiles:
		if err := tilematrix.CheckWebMercatorQuad(g.Gridset, g.TileWidth, g.TileHeight); err != nil {
			return bad("an MBTiles file holds the web mercator world grid only; gridset %s: %v (export a GeoPackage instead)", g.Name, err)
		}
		if _, err := mbtiles.FormatOf(f.MIME); err != nil {
			return bad("%v", err)
		}
	case ExportGeoPackage:
		if err := geopackage.Supports(g.Gridset); err != nil {
			return bad("%v", err)
		}
	default:
		return bad("export kind %q is not mbtiles or gpkg", x.Kind)
	}
	return nil
}

// exportName is the file of task id in the export directory.
func exportName(id int64, x *ExportSpec) string {
	return "task-" + strconv.FormatInt(id, 10) + x.Ext()
}

// ErrNoExport: the task is not a finished export, or its file is gone.
var ErrNoExport = errors.New("no such export file")

// ExportContent is a finished export's file, to be served. Close it.
type ExportContent struct {
	io.ReadSeeker
	Size    int64
	ModTime time.Time
	close   func() error
}

// Close releases the file.
func (c *ExportContent) Close() error { return c.close() }

// OpenExport opens the file of export task id named name (its resource's
// export.file): from this node's export directory, or on a clustered
// cache from the cluster's storage (sharedexport.go), where every node
// finds it. ErrNoExport if there is none.
func (e *Engine) OpenExport(id int64, name string) (*ExportContent, error) {
	if reg := e.shared(); reg != nil {
		return reg.openExport(id, name)
	}
	e.mu.Lock()
	t, ok := e.byID[id]
	dir := e.cfg.ExportDir
	done := ok && t.state == Done
	e.mu.Unlock()
	if !done || t.Spec.Export == nil || dir == "" || exportName(id, t.Spec.Export) != name {
		return nil, ErrNoExport
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, ErrNoExport
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &ExportContent{ReadSeeker: f, Size: st.Size(), ModTime: st.ModTime(), close: f.Close}, nil
}

// startWriteLocked begins the write phase of an export whose seed phase
// is over; e.mu is held.
func (e *Engine) startWriteLocked(t *Task) {
	t.exp.writing = true
	path := filepath.Join(e.cfg.ExportDir, exportName(t.ID, t.Spec.Export))
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		err := e.writeExport(t, path)
		e.mu.Lock()
		defer e.mu.Unlock()
		t.exp.writing = false
		switch {
		case err == nil:
			t.exp.written = true
			e.finishLocked(t)
		case t.stopped.Load() || e.ctx.Err() != nil && !t.killed.Load():
			// The engine stops: the task stays unfinished and writes its
			// file again when it resumes.
		default:
			if !t.killed.Load() {
				if t.reason == "" {
					t.reason = "writing the export: " + err.Error()
				}
				e.log.Warn("export failed", zap.Int64("id", t.ID), zap.Error(err))
				t.killed.Store(true) // ends ABORTED
			}
			e.finishLocked(t)
		}
	}()
}

// exportWriter is what the two file writers share.
type exportWriter struct {
	put   func(idx gridset.Index, data []byte) error
	close func() error
	abort func() error
}

// writeExport writes the task's file from the store, at path.
func (e *Engine) writeExport(t *Task, path string) error {
	c, err := e.current()
	if err != nil {
		return err
	}
	l, ok := c.Layer(t.Spec.Layer)
	if !ok {
		return fmt.Errorf("layer %q is no longer configured", t.Spec.Layer)
	}
	g, ok1 := l.Grid(t.Spec.Gridset)
	f, ok2 := l.Format(t.Spec.Format)
	if !ok1 || !ok2 {
		return fmt.Errorf("layer %q no longer has gridset %s and format %s", l.Name, t.Spec.Gridset, t.Spec.Format)
	}
	e.mu.Lock()
	t.exp.tiles, t.exp.bytes, t.exp.missing = 0, 0, 0
	e.mu.Unlock()
	if filepath.Dir(path) == "." {
		return errors.New("no export directory is configured")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	w, err := openExport(path, t, g, f, l)
	if err != nil {
		return err
	}
	set := store.Set{Layer: l.Name, Gridset: g.Name, Format: f.Name, Params: t.Spec.Params.Hash()}
	st := c.Store()
	p := newPlan(&t.Spec, int64(l.MetaWidth), int64(l.MetaHeight))
	var buf []byte
	stop := func() bool { return t.killed.Load() || t.stopped.Load() || e.ctx.Err() != nil }
	for !stop() {
		u, ok := p.next()
		if !ok {
			break
		}
		var werr error
		u.runs(func(y, x0, x1 int64) bool {
			for x := x0; x <= x1 && werr == nil; x++ {
				tile, err := st.Get(t.ctx, store.Key{Set: set, Z: u.z, X: x, Y: y}, buf[:0])
				if errors.Is(err, store.ErrNotFound) {
					e.mu.Lock()
					t.exp.missing++
					e.mu.Unlock()
					continue
				}
				if err != nil {
					werr = fmt.Errorf("reading tile %d/%d/%d: %w", u.z, x, y, err)
					break
				}
				buf = tile.Data
				if err := w.put(gridset.Index{Z: u.z, X: x, Y: y}, tile.Data); err != nil {
					werr = err
					break
				}
				e.mu.Lock()
				t.exp.tiles++
				t.exp.bytes += int64(len(tile.Data))
				e.mu.Unlock()
			}
			return werr == nil
		})
		if werr != nil {
			w.abort()
			return werr
		}
	}
	if stop() {
		w.abort()
		return context.Canceled
	}
	return w.close()
}

// openExport starts the file of the task's kind.
func openExport(path string, t *Task, g *tilecache.Grid, f *tilecache.Format, l *tilecache.Layer) (exportWriter, error) {
	switch t.Spec.Export.Kind {
	case ExportMBTiles:
		format, _ := mbtiles.FormatOf(f.MIME)
		typ := "baselayer"
		if f.Transparency() {
			typ = "overlay"
		}
		w, err := mbtiles.Create(path, g.Gridset, mbtiles.Metadata{Name: l.Name, Format: format, Type: typ})
		if err != nil {
			return exportWriter{}, err
		}
		return exportWriter{w.Put, w.Close, w.Abort}, nil
	case ExportGeoPackage:
		w, err := geopackage.Create(path, g.Gridset, geopackage.Options{Table: l.Name})
		if err != nil {
			return exportWriter{}, err
		}
		return exportWriter{w.Put, w.Close, w.Abort}, nil
	}
	return exportWriter{}, fmt.Errorf("unknown export kind %q", t.Spec.Export.Kind)
}

// exportInfo fills in an export's part of its resource; e.mu is held.
func (t *Task) exportInfo(state State) *ExportInfo {
	x := t.Spec.Export
	if x == nil {
		return nil
	}
	in := &ExportInfo{Kind: x.Kind, CachedOnly: x.CachedOnly, Phase: "seed",
		Tiles: t.exp.tiles, Bytes: t.exp.bytes, Missing: t.exp.missing}
	switch {
	case t.exp.written && state == Done:
		in.Phase, in.File = "done", exportName(t.ID, x)
	case t.exp.writing:
		in.Phase = "write"
	}
	return in
}
