// Package admin is the Caddy HTTP handler http.handlers.tile_cache_admin:
// GeoWebCache's REST interface for seeding, reseeding, truncating and
// mass-truncating the tiles of a tile_cache: GeoWebCache's resources,
// methods and task records, with a clear one-line 4xx wherever GeoWebCache
// would answer bad input with a 500 or fail silently.
package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/tilecache"
	"github.com/tilecache/caddy-tilecache/seeder"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler serves the REST interface under whatever path it is mounted at.
type Handler struct {
	// Cache names the tile_cache this interface works on. Default "default".
	Cache string `json:"cache,omitempty"`
	// Workers is the size of the seeding worker pool shared by all tasks. Default 2.
	Workers int `json:"workers,omitempty"`
	// RetryCount, RetryWait and MaxFailures are the defaults for a seed
	// request's tileFailureRetryCount, tileFailureRetryWaitTime and
	// totalFailuresBeforeAborting. Defaults 3, 1s, 1000.
	RetryCount  *int           `json:"retry_count,omitempty"`
	RetryWait   caddy.Duration `json:"retry_wait,omitempty"`
	MaxFailures *int64         `json:"max_failures,omitempty"`
	// History is how many finished tasks stay reachable. Default 100.
	History int `json:"history,omitempty"`
	// CheckpointInterval is how often running tasks' progress is saved in
	// the store, to resume from after a restart or crash. Default 2s.
	CheckpointInterval caddy.Duration `json:"checkpoint_interval,omitempty"`
	// Limits (limits.go; 0 is the default): request body bytes (8 MiB,
	// else 413), pending and running tasks (1000, else 429), tiles of a
	// seed or reseed task (100000000, else 400), bytes of a seed request's
	// parameter name or value (1024, else 400).
	MaxBody         int64 `json:"max_body,omitempty"`
	MaxTasks        int   `json:"max_tasks,omitempty"`
	MaxTilesPerTask int64 `json:"max_tiles_per_task,omitempty"`
	MaxParamLength  int   `json:"max_param_length,omitempty"`
	// MaxListLines bounds the tile lines of a tile list (rest/seed/<layer>/tiles),
	// else 400; blank and # comment lines do not count (they have a bound
	// of their own, as many again). Default 50000000 (about 700 MB of
	// z/x/y lines).
	MaxListLines int64 `json:"max_list_lines,omitempty"`
	// TrustedOrigins may send state-changing requests from a browser on
	// another origin (scheme://host[:port]); every other cross-origin
	// POST is refused with 403.
	TrustedOrigins []string `json:"trusted_origins,omitempty"`
	// OfflineDir is where uploaded files wait while they are imported
	// (rest/import). Default: tile_cache/offline/<cache> in Caddy's data
	// directory.
	OfflineDir string `json:"offline_dir,omitempty"`
	// ImportRoot is the server directory whose files and directory trees
	// an import may name (from=); unset, only uploads are imported.
	ImportRoot string `json:"import_root,omitempty"`
	// MaxImport bounds the bytes of an uploaded file (else 413). Default
	// 64 GiB.
	MaxImport int64 `json:"max_import,omitempty"`

	engine  *seeder.Engine
	imports *sync.Mutex // one import at a time
	app     *tilecache.App
	log     *zap.Logger
	bound   *bound // the cache, once known; a pointer so the module stays copyable
	csrf    *http.CrossOriginProtection
}

// bound is the cache the interface works on, set once.
type bound struct {
	mu sync.Mutex // serialises binding
	c  atomic.Pointer[tilecache.Cache]
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tile_cache_admin",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision attaches to the named cache's seeding engine, which survives
// config reloads with its tasks.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	h.setDefaults()
	if err := h.Validate(); err != nil {
		return err // before the engine is acquired
	}
	h.csrf = http.NewCrossOriginProtection()
	h.imports = new(sync.Mutex)
	for _, o := range h.TrustedOrigins {
		if err := h.csrf.AddTrustedOrigin(o); err != nil {
			return fmt.Errorf("tile_cache_admin: trusted_origins: %v", err)
		}
	}
	retry := seeder.RetryPolicy{Retries: 3, Wait: time.Second, MaxFailures: 1000}
	if h.RetryCount != nil {
		retry.Retries = *h.RetryCount
	}
	if h.RetryWait != 0 {
		retry.Wait = time.Duration(h.RetryWait)
	}
	if h.MaxFailures != nil {
		retry.MaxFailures = *h.MaxFailures
	}
	app, err := tilecache.AppOf(ctx)
	if err != nil {
		return err
	}
	h.app = app
	h.bound = new(bound)
	e, err := seeder.Acquire(h.Cache, seeder.Config{Workers: h.Workers, Retry: retry, History: h.History,
		CheckpointInterval: time.Duration(h.CheckpointInterval), ExportDir: filepath.Join(h.OfflineDir, "exports")},
		caddy.Log().Named("tile_cache.seeder").With(zap.String("cache", h.Cache)))
	if err != nil {
		return err
	}
	h.engine = e
	// The cache may be defined by a tile_cache handler Caddy provisions
	// after this one: it is looked up when the config starts.
	app.OnStart(func() error {
		_, err := h.cache()
		return err
	})
	return nil
}

// cache returns the cache the interface works on, binding the seeding
// engine to it on first use: at Start, or on a request that came in
// before the tile_cache app started.
func (h *Handler) cache() (*tilecache.Cache, error) {
	b := h.bound
	if c := b.c.Load(); c != nil {
		return c, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.c.Load(); c != nil {
		return c, nil
	}
	c, err := h.app.Cache(h.Cache)
	if err != nil {
		return nil, fmt.Errorf("tile_cache_admin: %w", err)
	}
	h.engine.Attach(c)
	b.c.Store(c)
	return c, nil
}

// setDefaults fills in every unset setting, once, at provisioning.
func (h *Handler) setDefaults() {
	if h.Cache == "" {
		h.Cache = tilecache.DefaultName
	}
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&h.Workers, 2)
	set(&h.History, 100)
	set(&h.MaxTasks, defaultMaxTasks)
	set(&h.MaxParamLength, defaultMaxParamLength)
	if h.MaxBody == 0 {
		h.MaxBody = defaultMaxBody
	}
	if h.MaxListLines == 0 {
		h.MaxListLines = defaultMaxListLines
	}
	if h.MaxTilesPerTask == 0 {
		h.MaxTilesPerTask = defaultMaxTilesPerTask
	}
	if h.MaxImport == 0 {
		h.MaxImport = defaultMaxImport
	}
	if h.OfflineDir == "" {
		h.OfflineDir = filepath.Join(caddy.AppDataDir(), "tile_cache", "offline", h.Cache)
	}
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	if h.Workers < 1 || h.History < 1 {
		return errors.New("tile_cache_admin: workers and history must be at least 1")
	}
	if h.RetryCount != nil && *h.RetryCount < 0 || h.MaxFailures != nil && *h.MaxFailures < 0 || h.RetryWait < 0 {
		return errors.New("tile_cache_admin: retry_count, retry_wait and max_failures must not be negative")
	}
	if err := h.validateLimits(); err != nil {
		return err
	}
	return nil
}

// Cleanup releases the engine (the last config using it stops it, saving
// its tasks), then lets go of the cache.
func (h *Handler) Cleanup() error {
	if h.engine == nil {
		return nil
	}
	err := h.engine.Release()
	if c := h.bound.c.Load(); c != nil {
		h.engine.Detach(c)
	}
	return err
}

// route is where a request goes under /rest/.
type route struct {
	name   string // an export file's name
	kind   string // "listing", "seed", "tilelist", "kill", "masstruncate", "task", "layers", "usage", "diskquota", "import"
	layer  string // "" for all layers
	format string // "json" or "xml" where the path has one
	id     int64
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. Every path under the
// mount point is the interface's: what it does not serve is a 404 here,
// never passed on (to a proxy that would forward the credentials).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if oddRESTPath(httpx.OriginalPath(r)) { // limits.go
		return httpx.Text(w, http.StatusNotFound, "no such resource: dot segments and encoded slashes are not accepted in REST paths")
	}
	// Browsers send cached Basic credentials with a form posted from any
	// site: a state-changing request from another origin is refused.
	// GeoWebCache's curl commands send neither Sec-Fetch-Site nor Origin,
	// and the task page is same-origin; both pass.
	if err := h.csrf.Check(r); err != nil {
		return httpx.Text(w, http.StatusForbidden, "cross-origin request refused: "+r.Method+" from another site may not change tiles or tasks")
	}
	if _, err := h.cache(); err != nil {
		return httpx.Text(w, http.StatusServiceUnavailable, err.Error())
	}
	rt, ok, err := parsePath(r.URL.EscapedPath())
	if !ok {
		if isPagePath(r.URL.Path) { // the task page (page.go)
			return h.page(w, r)
		}
		return httpx.Text(w, http.StatusNotFound, "no such resource: the REST interface is under rest/, the task page at tasks")
	}
	if err != nil {
		return httpx.Text(w, http.StatusNotFound, err.Error())
	}
	switch rt.kind {
	case "listing":
		if !allow(w, r, http.MethodGet) {
			return nil
		}
		return h.listing(w, rt)
	case "layer": // /rest/seed/<layer>.<xml|json>
		if !allow(w, r, http.MethodGet, http.MethodPost) {
			return nil
		}
		if !h.knownLayer(w, rt.layer) {
			return nil
		}
		if r.Method == http.MethodGet {
			return h.listing(w, rt)
		}
		return h.seed(w, r, rt)
	case "tilelist":
		if !allow(w, r, http.MethodPost) {
			return nil
		}
		if !h.knownLayer(w, rt.layer) {
			return nil
		}
		return h.tileList(w, r, rt)
	case "kill":
		if !allow(w, r, http.MethodPost) {
			return nil
		}
		if rt.layer != "" && !h.knownLayer(w, rt.layer) {
			return nil
		}
		return h.kill(w, r, rt)
	case "masstruncate":
		if !allow(w, r, http.MethodGet, http.MethodPost) {
			return nil
		}
		if r.Method == http.MethodGet {
			return h.massTruncateList(w, r)
		}
		return h.massTruncate(w, r)
	case "task":
		if !allow(w, r, http.MethodGet, http.MethodDelete) {
			return nil
		}
		if r.Method == http.MethodDelete {
			return h.killTask(w, rt)
		}
		return h.task(w, rt)
	case "layers": // an extension for the task page (page.go)
		if !allow(w, r, http.MethodGet) {
			return nil
		}
		return h.layers(w)
	case "usage": // an extension (usage.go)
		if !allow(w, r, http.MethodGet) {
			return nil
		}
		return h.usage(w)
	case "export": // an extension (export.go)
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return nil
		}
		return h.exportFile(w, r, rt)
	case "import": // an extension (import.go)
		if !allow(w, r, http.MethodPost, http.MethodPut) {
			return nil
		}
		if !h.knownLayer(w, rt.layer) {
			return nil
		}
		return h.importTiles(w, r, rt)
	case "diskquota": // diskquota.go
		if !allow(w, r, http.MethodGet, http.MethodPut) {
			return nil
		}
		return h.diskQuota(w, r, rt)
	}
	return httpx.Text(w, http.StatusNotFound, "no such resource")
}

// parsePath finds the resource under the last "/rest/" of the path:
// whatever comes before it is the mount point. Layer names cannot contain
// a slash, so the last "/rest/" is always the interface's own.
func parsePath(escaped string) (route, bool, error) {
	i := strings.LastIndex(escaped, "/rest/")
	if i < 0 {
		return route{}, false, nil
	}
	rest := escaped[i+len("/rest/"):]
	switch {
	case rest == "seed.json" || rest == "seed.xml":
		return route{kind: "listing", format: strings.TrimPrefix(rest, "seed.")}, true, nil
	case rest == "seed":
		return route{kind: "kill"}, true, nil
	case rest == "masstruncate":
		return route{kind: "masstruncate"}, true, nil
	case rest == "layers.json":
		return route{kind: "layers"}, true, nil
	case rest == "usage.json":
		return route{kind: "usage"}, true, nil
	case rest == "diskquota" || rest == "diskquota.xml" || rest == "diskquota.json":
		return route{kind: "diskquota", format: strings.TrimPrefix(strings.TrimPrefix(rest, "diskquota"), ".")}, true, nil
	case strings.HasPrefix(rest, "exports/"):
		name := strings.TrimPrefix(rest, "exports/")
		id, ok := parseExportName(name)
		if !ok {
			return route{}, true, errors.New("no such export file: rest/exports/task-<id>.mbtiles or .gpkg, as the task's resource names it")
		}
		return route{kind: "export", id: id, name: name}, true, nil
	case strings.HasPrefix(rest, "import/"):
		seg := strings.TrimPrefix(rest, "import/")
		name, err := url.PathUnescape(seg)
		if err != nil || name == "" || strings.ContainsAny(name, "/\x00") {
			return route{}, true, fmt.Errorf("bad layer name %q", truncated(seg))
		}
		if len(name) > maxLayerNameLength {
			return route{}, true, fmt.Errorf("no such layer: the name is longer than %d bytes", maxLayerNameLength)
		}
		return route{kind: "import", layer: name}, true, nil
	case strings.HasPrefix(rest, "tasks/"):
		// tasks/<id>.json, as the seed POST's Location names it, or
		// tasks/<id>: one resource.
		idText := strings.TrimSuffix(strings.TrimPrefix(rest, "tasks/"), ".json")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || id <= 0 || strings.ContainsAny(idText, "+-") {
			return route{}, true, errors.New("no such task")
		}
		return route{kind: "task", id: id}, true, nil
	case strings.HasPrefix(rest, "seed/") && strings.HasSuffix(rest, "/tiles"):
		// seed/<layer>/tiles: a tile list (an extension, tilelist.go).
		seg := strings.TrimSuffix(strings.TrimPrefix(rest, "seed/"), "/tiles")
		name, err := url.PathUnescape(seg)
		if err != nil || name == "" || strings.ContainsAny(name, "/\x00") {
			return route{}, true, fmt.Errorf("bad layer name %q", truncated(seg))
		}
		if len(name) > maxLayerNameLength {
			return route{}, true, fmt.Errorf("no such layer: the name is longer than %d bytes", maxLayerNameLength)
		}
		return route{kind: "tilelist", layer: name}, true, nil
	case strings.HasPrefix(rest, "seed/"):
		seg := strings.TrimPrefix(rest, "seed/")
		if seg == "" || strings.Contains(seg, "/") {
			return route{}, true, errors.New("no such resource")
		}
		name, err := url.PathUnescape(seg)
		if err != nil || name == "" || strings.ContainsAny(name, "/\x00") {
			return route{}, true, fmt.Errorf("bad layer name %q", truncated(seg))
		}
		if len(name) > maxLayerNameLength+len(".json") {
			return route{}, true, fmt.Errorf("no such layer: the name is longer than %d bytes", maxLayerNameLength)
		}
		// The last .json or .xml is the format: test:mock.layer.name.json
		// is the layer test:mock.layer.name.
		for _, ext := range []string{"json", "xml"} {
			if layer, ok := strings.CutSuffix(name, "."+ext); ok && layer != "" {
				return route{kind: "layer", layer: layer, format: ext}, true, nil
			}
		}
		return route{kind: "kill", layer: name}, true, nil
	}
	return route{}, true, errors.New("no such resource")
}

// allow answers 405 with an Allow header unless r uses one of the methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	httpx.Text(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; allowed: %s", r.Method, strings.Join(methods, ", ")))
	return false
}

func (h *Handler) knownLayer(w http.ResponseWriter, layer string) bool {
	c, err := h.cache()
	if err != nil {
		httpx.Text(w, http.StatusServiceUnavailable, err.Error())
		return false
	}
	if _, ok := c.Layer(layer); !ok {
		httpx.Text(w, http.StatusNotFound, fmt.Sprintf("Unknown layer: %s", layer))
		return false
	}
	return true
}

// restBase is the interface's mount point as the client addressed it:
// scheme, host and the original path up to /rest/ (before handle_path
// stripped anything).
func restBase(r *http.Request) string {
	p := httpx.OriginalPath(r)
	if i := strings.LastIndex(p, "/rest/"); i >= 0 {
		p = p[:i]
	}
	return httpx.Origin(r) + p
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
