package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/tilecache/caddy-tilecache/seeder"
)

// The limits' defaults (docs/operations.md, "Limits").
const (
	// A seed request is a few hundred bytes; one with a polygon of
	// area's 100,000 vertices (its limit) about 4 MB of GeoJSON.
	defaultMaxBody = 8 << 20
	// Pending and running tasks of one cache.
	defaultMaxTasks = 1000
	// Tiles of one seed or reseed task: 10^8 tiles are days of rendering
	// and hundreds of GB; EPSG:900913 to level 30 is 1.5·10^18.
	defaultMaxTilesPerTask = 100_000_000
	// Lines of a tile list: osm2pgsql's expire lists after a day of
	// minutely diffs are a few million.
	defaultMaxListLines = 50_000_000
	// A parameter's name or value in a seed request, in bytes.
	defaultMaxParamLength = 1024
	// An uploaded file for rest/import: a country's MBTiles to level 16
	// is a few GB, a continent's tens.
	defaultMaxImport = 64 << 30
	// A layer name in a path or a mass truncate request, in bytes.
	maxLayerNameLength = 1024
)

// validateLimits rejects negative limits (0 is the default).
func (h *Handler) validateLimits() error {
	if h.MaxBody < 0 || h.MaxTasks < 0 || h.MaxTilesPerTask < 0 || h.MaxParamLength < 0 || h.MaxListLines < 0 || h.MaxImport < 0 {
		return errors.New("tile_cache_admin: max_body, max_tasks, max_tiles_per_task, max_param_length, max_list_lines and max_import must not be negative")
	}
	return nil
}

// checkParams bounds a seed request's parameter names and values.
func (h *Handler) checkParams(p map[string]string) error {
	limit := h.MaxParamLength
	for k, v := range p {
		if len(k) > limit || len(v) > limit {
			return badBody("parameter names and values are limited to %d bytes (max_param_length)", limit)
		}
	}
	return nil
}

// submitMu makes counting the tasks and submitting one a single step, so
// that concurrent requests cannot all slip under max_tasks.
var submitMu sync.Mutex

// submitLimited submits spec unless it is over max_tiles_per_task (400)
// or max_tasks tasks are pending or running already (429). A truncate
// deletes by key range: its cost follows what is stored, not its tile
// count, so max_tiles_per_task does not apply to it.
func (h *Handler) submitLimited(spec seeder.Spec) (t *seeder.Task, status int, msg string, err error) {
	if spec.Type != seeder.Truncate {
		total := spec.Tiles()
		if spec.AllParams {
			total *= int64(len(spec.Sets))
		}
		if limit := h.MaxTilesPerTask; total > limit {
			return nil, http.StatusBadRequest, fmt.Sprintf("the task has %d tiles, more than the %d a task may have (max_tiles_per_task): split it by zoom levels or bounds", total, limit), nil
		}
	}
	submitMu.Lock()
	defer submitMu.Unlock()
	active, err := h.engine.List("")
	if err != nil {
		return nil, 0, "", err
	}
	if n, limit := len(active), h.MaxTasks; n >= limit {
		return nil, http.StatusTooManyRequests, fmt.Sprintf("%d tasks are pending or running, the most there may be (max_tasks): wait for some to finish or kill them", n), nil
	}
	t, err = h.engine.Submit(spec)
	return t, 0, "", err
}

// oddRESTPath says whether a path addressed to the REST interface (it has
// a /rest/ segment) has a segment that is or decodes to "." or "..", or
// holds an encoded slash or backslash. Caddy cleans paths when handle_path
// strips its prefix, decoding as it goes: .../seed/%2e would become
// .../seed (the kill form), .../seed/..%2f..%2fx.json would leave the
// interface. Such a request is refused whole instead; GeoWebCache clients
// never send one.
func oddRESTPath(escaped string) bool {
	if !strings.Contains(escaped, "/rest/") {
		return false
	}
	for _, seg := range strings.Split(escaped, "/") {
		d, err := url.PathUnescape(seg)
		if err != nil {
			continue // a bad escape: parsePath's 404
		}
		if d == "." || d == ".." || strings.ContainsAny(d, "/\\") {
			return true
		}
	}
	return false
}
