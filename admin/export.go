package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/seeder"
)

// exportFile serves a finished export's file (an extension):
// rest/exports/task-<id>.mbtiles or .gpkg, the name its task's resource
// gives once it is DONE. On a clustered cache every node serves it from
// the cluster's storage. Range requests resume a download; the file does
// not change once written, so its modification time validates.
func (h *Handler) exportFile(w http.ResponseWriter, r *http.Request, rt route) error {
	f, err := h.engine.OpenExport(rt.id, rt.name)
	if errors.Is(err, seeder.ErrNoExport) {
		return httpx.Text(w, http.StatusNotFound, fmt.Sprintf("no export file %s: the task is not a finished export, or its file is gone", truncated(rt.name)))
	}
	if err != nil {
		return h.failed(w, err)
	}
	defer f.Close()
	ct := "application/vnd.sqlite3"
	if strings.HasSuffix(rt.name, ".gpkg") {
		ct = "application/geopackage+sqlite3" // OGC's registration
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", `attachment; filename="`+rt.name+`"`)
	w.Header().Set("Cache-Control", "private, no-transform")
	http.ServeContent(w, r, rt.name, f.ModTime, f)
	return nil
}

// parseExportName reads task-<id>.mbtiles or task-<id>.gpkg.
func parseExportName(name string) (int64, bool) {
	base, ok := strings.CutPrefix(name, "task-")
	if !ok {
		return 0, false
	}
	for _, ext := range []string{".mbtiles", ".gpkg"} {
		if idText, ok := strings.CutSuffix(base, ext); ok {
			id, err := strconv.ParseInt(idText, 10, 64)
			if err != nil || id <= 0 || strings.ContainsAny(idText, "+-") {
				return 0, false
			}
			return id, true
		}
	}
	return 0, false
}
