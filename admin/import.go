package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/offline/importer"
	"github.com/tilecache/caddy-tilecache/module/offline/tiledir"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// importAnswer is the JSON answer of an import: where the tiles went and
// what the importer did.
type importAnswer struct {
	Layer   string `json:"layer"`
	Gridset string `json:"gridSetId"`
	Format  string `json:"format"`
	importer.Result
}

// importTiles loads a file or directory tree into one tile set of a layer
// (an extension: rest/import/<layer>). The file is the request body, or,
// with from=, a path under import_root on the server (the only way to
// name a directory tree). The query names the tile set (gridSetId,
// format) and how to read the source (kind, table, layout, rowsFromTop).
// One import runs at a time; the answer comes when it is done.
func (h *Handler) importTiles(w http.ResponseWriter, r *http.Request, rt route) error {
	c, err := h.cache()
	if err != nil {
		return httpx.Text(w, http.StatusServiceUnavailable, err.Error())
	}
	l, _ := c.Layer(rt.layer)
	q := r.URL.Query()
	for k, v := range q {
		switch k {
		case "gridSetId", "format", "kind", "table", "layout", "rowsFromTop", "from":
		default:
			return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("unknown import parameter %q: gridSetId, format, kind, table, layout, rowsFromTop, from are known", truncated(k)))
		}
		if len(v) > 1 {
			return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("import parameter %s is given %d times: once is expected", k, len(v)))
		}
	}
	g := l.Grids[0]
	if name := q.Get("gridSetId"); name != "" {
		var ok bool
		if g, ok = l.Grid(name); !ok {
			return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("layer %s has no gridset %q", l.Name, truncated(name)))
		}
	}
	f := &l.Formats[0]
	if name := q.Get("format"); name != "" {
		var ok bool
		if f, ok = l.Format(name); !ok {
			return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("layer %s is not cached in format %q", l.Name, truncated(name)))
		}
	}
	src := importer.Source{Kind: q.Get("kind"), Table: q.Get("table"), Dir: tiledir.Options{Layout: q.Get("layout")}}
	switch src.Kind {
	case "", importer.MBTiles, importer.GeoPackage, importer.Directory:
	default:
		return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("kind %q is not mbtiles, gpkg or dir", truncated(src.Kind)))
	}
	if v := q.Get("rowsFromTop"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("rowsFromTop %q is not true or false", truncated(v)))
		}
		src.Dir.RowsFromTop = &b
	}
	p, err := l.Params.Normalize(nil)
	if err != nil {
		return h.failed(w, err)
	}
	set := store.Set{Layer: l.Name, Gridset: g.Name, Format: f.Name, Params: p.Hash()}

	if !h.imports.TryLock() {
		w.Header().Set("Retry-After", "10")
		return httpx.Text(w, http.StatusTooManyRequests, "another import is running: one at a time")
	}
	defer h.imports.Unlock()

	// shown is what a message may say of the source: the name under
	// import_root, or "the uploaded file", never the server's own paths.
	var shown string
	if from := q.Get("from"); from != "" {
		if src.Path, err = h.importPath(from); err != nil {
			return httpx.Text(w, http.StatusBadRequest, err.Error())
		}
		shown = from
	} else {
		if src.Kind == importer.Directory {
			return httpx.Text(w, http.StatusBadRequest, "a directory tree is imported from the server's import_root (from=), not uploaded")
		}
		spool, status, msg := h.spoolUpload(w, r)
		if status != 0 {
			return httpx.Text(w, status, msg)
		}
		defer os.Remove(spool)
		src.Path, shown = spool, "the uploaded file"
	}
	tgt := importer.Target{Store: c.Store(), Set: set, Gridset: g.Gridset, Coverage: g.Coverage, Kinds: importer.KindsOf(f.MIME)}
	res, err := importer.Import(r.Context(), src, tgt, nil)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), src.Path, shown)
		var bs *importer.BadSource
		switch {
		case errors.As(err, &bs):
			return httpx.Text(w, http.StatusBadRequest, msg)
		case errors.Is(err, store.ErrDiskFull):
			h.log.Warn("import stopped: disk full", zap.String("layer", l.Name), zap.Int64("stored", res.Tiles))
			return httpx.Text(w, http.StatusInsufficientStorage, msg+" (the tiles stored so far stay; import the same file again to complete it)")
		case errors.Is(err, store.ErrUnavailable):
			w.Header().Set("Retry-After", "30")
			return httpx.Text(w, http.StatusServiceUnavailable, msg+" (import the same file again to complete it)")
		case r.Context().Err() != nil:
			h.log.Info("import ended: the client went away", zap.String("layer", l.Name), zap.Int64("stored", res.Tiles))
			return nil
		}
		return h.failed(w, err)
	}
	h.log.Info("tiles imported", zap.String("layer", l.Name), zap.String("gridset", g.Name), zap.String("format", f.Name),
		zap.String("source", res.Kind), zap.Int64("tiles", res.Tiles), zap.Int64("bytes", res.Bytes), zap.Int64("outside", res.Outside))
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(importAnswer{Layer: l.Name, Gridset: g.Name, Format: f.Name, Result: res})
}

// importPath resolves a from= path under import_root, refusing any that
// leads outside it (.., an absolute path, a symbolic link out).
func (h *Handler) importPath(from string) (string, error) {
	if h.ImportRoot == "" {
		return "", errors.New("server-side imports are off: set import_root in tile_cache_admin, or upload the file as the request body")
	}
	if filepath.IsAbs(from) || !filepath.IsLocal(from) {
		return "", fmt.Errorf("from %q must be a relative path inside import_root", truncated(from))
	}
	root, err := filepath.EvalSymlinks(h.ImportRoot)
	if err != nil {
		return "", fmt.Errorf("import_root is not readable: %v", err)
	}
	p, err := filepath.EvalSymlinks(filepath.Join(root, from))
	if err != nil {
		return "", fmt.Errorf("from %q: no such file or directory under import_root", truncated(from))
	}
	if rel, err := filepath.Rel(root, p); err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", fmt.Errorf("from %q leads outside import_root", truncated(from))
	}
	return p, nil
}

// spoolUpload copies the request body into a file under offline_dir, for
// SQLite to read; it answers a status and message when it cannot.
func (h *Handler) spoolUpload(w http.ResponseWriter, r *http.Request) (path string, status int, msg string) {
	dir := filepath.Join(h.OfflineDir, "uploads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		h.log.Error("import: the upload directory cannot be made", zap.Error(err))
		return "", http.StatusInternalServerError, "the upload directory cannot be made: " + err.Error()
	}
	f, err := os.CreateTemp(dir, "import-*.sqlite")
	if err != nil {
		return "", http.StatusInternalServerError, "the upload cannot be stored: " + err.Error()
	}
	body := http.MaxBytesReader(w, r.Body, h.MaxImport)
	n, err := io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return "", http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is larger than max_import (%d bytes)", h.MaxImport)
		case errors.Is(err, syscall.ENOSPC):
			return "", http.StatusInsufficientStorage, "no space left for the upload in offline_dir"
		}
		return "", http.StatusBadRequest, "the upload ended early: " + err.Error()
	}
	if n == 0 {
		os.Remove(f.Name())
		return "", http.StatusBadRequest, "empty request body: an MBTiles or GeoPackage file is expected (or from= a path under import_root)"
	}
	return f.Name(), 0, ""
}
