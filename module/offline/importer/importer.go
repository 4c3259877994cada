// Package importer loads tiles made elsewhere into one tile set of a
// cache without asking the upstream: an MBTiles file, a GeoPackage's tile
// table, or a TMS/XYZ directory tree (MapProxy's and MapCache's disk
// caches, gdal2tiles' output).
//
// An import reads its source twice. The first pass checks every tile (its
// place in the gridset, its pixel size, its image format against the tile
// set's format) and stores nothing; a source with one bad tile is refused
// whole, with that tile named. The second pass stores the tiles in
// batches. A fault in the second pass (a crash, a full disk) leaves a part
// of the source stored: importing the same source again stores every tile
// again over it, so a repeated import completes an interrupted one, and
// the store's usage counts each tile once.
package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
	"github.com/tilecache/caddy-tilecache/module/offline/mbtiles"
	"github.com/tilecache/caddy-tilecache/module/offline/tiledir"
	"github.com/tilecache/caddy-tilecache/module/offline/tileimage"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// The kinds of source.
const (
	MBTiles    = "mbtiles"
	GeoPackage = "gpkg"
	Directory  = "dir"
)

// Source is what to read.
type Source struct {
	Path string
	// Kind is MBTiles, GeoPackage or Directory; "" finds it out: a
	// directory is a tree, an SQLite file whose application id is GPKG a
	// GeoPackage, any other SQLite file MBTiles.
	Kind string
	// Table is a GeoPackage's tile table; "" for its only one.
	Table string
	// Dir is how a directory tree's paths are read.
	Dir tiledir.Options
}

// Target is the tile set the tiles go to.
type Target struct {
	Store   store.Store
	Set     store.Set
	Gridset *gridset.Gridset
	// Coverage is, per level of the gridset, the tiles the layer caches
	// (an empty range for a level it does not): tiles outside are not
	// stored, because the cache would never serve them.
	Coverage []gridset.Range
	// Kinds are the image kinds (tileimage) the set's format holds.
	Kinds []string
}

// KindsOf returns the image kinds a tile format (its MIME type) holds.
func KindsOf(mime string) []string {
	switch mime {
	case "image/png", "image/png8":
		return []string{tileimage.PNG}
	case "image/jpeg":
		return []string{tileimage.JPEG}
	case "image/vnd.jpeg-png", "image/vnd.jpeg-png8":
		return []string{tileimage.JPEG, tileimage.PNG}
	case "image/webp":
		return []string{tileimage.WebP}
	}
	return nil
}

// Result says what an import did.
type Result struct {
	Kind string `json:"source"`
	// Tiles were stored, Bytes their images' size; Outside were in the
	// source but outside the layer's coverage, and not stored.
	Tiles   int64 `json:"tiles"`
	Bytes   int64 `json:"bytes"`
	Outside int64 `json:"outside"`
	// Skipped counts a directory's files that are not tiles of the layout.
	Skipped int64 `json:"skipped,omitempty"`
	// MinZoom and MaxZoom are the levels of the stored tiles (-1 when none).
	MinZoom int `json:"minZoom"`
	MaxZoom int `json:"maxZoom"`
}

// BadSource is a source that cannot be imported as it is: not a tile
// file, another gridset, a tile of the wrong size or format. Its message
// is one line for the client.
type BadSource struct{ Msg string }

func (e *BadSource) Error() string { return e.Msg }

// batch is how many tiles go to the store at once: one Put, one Badger
// transaction, as a 4×4 metatile's 16 tiles would be, times 16.
const batch = 256

// Import checks the whole source, then stores it. progress, when not nil,
// is called with the tiles stored so far after each batch.
func Import(ctx context.Context, src Source, tgt Target, progress func(stored int64)) (Result, error) {
	r, kind, err := open(src, tgt.Gridset)
	if err != nil {
		return Result{}, err
	}
	defer r.close()
	res := Result{Kind: kind, MinZoom: -1, MaxZoom: -1}
	inside := func(idx gridset.Index) bool {
		return idx.Z < len(tgt.Coverage) && tgt.Coverage[idx.Z].Contains(idx.X, idx.Y)
	}
	// The first pass: every tile's image kind. The readers check each
	// tile's place in the gridset and its pixel size themselves.
	err = r.each(func(idx gridset.Index, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if k := tileimage.Kind(data); !slices.Contains(tgt.Kinds, k) {
			names := make([]string, len(tgt.Kinds))
			for i, k := range tgt.Kinds {
				names[i] = label(k)
			}
			return &BadSource{fmt.Sprintf("%s: tile %d/%d/%d is %s; tile set %s holds %s",
				src.Path, idx.Z, idx.X, idx.Y, kindName(k), tgt.Set.Format, strings.Join(names, " or "))}
		}
		return nil
	})
	if err != nil {
		return Result{}, sourceError(err)
	}
	// The second pass stores. A batch goes to the store while the next is
	// read: the reader (SQLite) and the store's commit (Badger's writes)
	// then use both cores instead of taking turns.
	puts := make(chan []store.Entry, 1)
	var putErr error
	var stored atomic.Int64
	failed := make(chan struct{})
	putter := make(chan struct{})
	go func() {
		defer close(putter)
		for b := range puts {
			if putErr != nil {
				continue // drain
			}
			if err := tgt.Store.Put(b, time.Now()); err != nil {
				putErr = &StoreError{err}
				close(failed)
				continue
			}
			n := stored.Add(int64(len(b)))
			if progress != nil {
				progress(n)
			}
		}
	}()
	entries := make([]store.Entry, 0, batch)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		select {
		case puts <- entries:
		case <-failed:
			return errStoreFailed
		}
		entries = make([]store.Entry, 0, batch)
		return nil
	}
	err = r.each(func(idx gridset.Index, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !inside(idx) {
			res.Outside++
			return nil
		}
		// The reader's buffer is its own until the next tile.
		entries = append(entries, store.Entry{
			Key:  store.Key{Set: tgt.Set, Z: idx.Z, X: idx.X, Y: idx.Y},
			Data: slices.Clone(data),
		})
		res.Tiles++
		res.Bytes += int64(len(data))
		if res.MinZoom < 0 || idx.Z < res.MinZoom {
			res.MinZoom = idx.Z
		}
		res.MaxZoom = max(res.MaxZoom, idx.Z)
		if len(entries) == batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	close(puts)
	<-putter // every batch handed over is stored (or failed) before Import returns
	if putErr != nil {
		err = putErr
	}
	res.Skipped = r.skipped()
	if err != nil {
		return res, sourceError(err)
	}
	return res, nil
}

// errStoreFailed stops the reading when the store has failed a batch;
// the store's error is the one returned.
var errStoreFailed = errors.New("the store failed")

// StoreError is a fault of the store during the second pass: the source
// is fine, and importing it again completes the import.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return "storing: " + e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

// sourceError turns a reader's complaint into a BadSource; store errors
// and a cancelled context stay what they are.
func sourceError(err error) error {
	var bs *BadSource
	var se *StoreError
	if errors.As(err, &bs) || errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &BadSource{err.Error()}
}

func kindName(k string) string {
	if k == "" {
		return "not a PNG, JPEG or WebP image"
	}
	return "a " + label(k) + " image"
}

func label(k string) string {
	switch k {
	case tileimage.JPEG:
		return "JPEG"
	case tileimage.WebP:
		return "WebP"
	}
	return strings.ToUpper(k)
}

// reader is what the three readers share.
type reader struct {
	each    func(fn func(idx gridset.Index, data []byte) error) error
	close   func() error
	skipped func() int64
}

func none() int64 { return 0 }

// open opens src for gridset g.
func open(src Source, g *gridset.Gridset) (reader, string, error) {
	kind := src.Kind
	if kind == "" {
		var err error
		if kind, err = Detect(src.Path); err != nil {
			return reader{}, "", err
		}
	}
	switch kind {
	case MBTiles:
		r, err := mbtiles.Open(src.Path, g)
		if err != nil {
			return reader{}, "", &BadSource{err.Error()}
		}
		return reader{r.Each, r.Close, none}, kind, nil
	case GeoPackage:
		r, err := geopackage.Open(src.Path, g, src.Table)
		if err != nil {
			return reader{}, "", &BadSource{err.Error()}
		}
		return reader{r.Each, r.Close, none}, kind, nil
	case Directory:
		r, err := tiledir.Open(src.Path, g, src.Dir)
		if err != nil {
			return reader{}, "", &BadSource{err.Error()}
		}
		return reader{r.Each, func() error { return nil }, r.Skipped}, kind, nil
	}
	return reader{}, "", &BadSource{fmt.Sprintf("unknown kind of source %q: one of mbtiles, gpkg, dir", kind)}
}

// Detect tells a source's kind from the file itself: a directory, or an
// SQLite file whose header's application id (offset 68) says GeoPackage
// or not.
func Detect(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &BadSource{err.Error()}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", &BadSource{err.Error()}
	}
	if st.IsDir() {
		return Directory, nil
	}
	var h [72]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:16]) != "SQLite format 3\x00" {
		return "", &BadSource{fmt.Sprintf("%s: neither MBTiles nor GeoPackage: not an SQLite file", path)}
	}
	if string(h[68:72]) == "GPKG" {
		return GeoPackage, nil
	}
	return MBTiles, nil
}
