// Package tilecache is the Caddy HTTP handler http.handlers.tile_cache: it
// answers WMS-C tile requests (GetMaps that hit exactly one tile of a
// gridset) from a Badger store, fetching whole metatiles from the upstream
// WMS on a miss, and passes every other request to the next handler.
package tilecache

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/store"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the tile_cache HTTP handler.
type Handler struct {
	// Name identifies this cache to tile_cache_admin. Default "default".
	Name string `json:"name,omitempty"`
	// Upstream is the WMS GetMap URL. It may carry a query of its own
	// (MapServer's ?map=...), kept on every upstream request.
	Upstream string `json:"upstream"`
	// Timeout bounds one upstream metatile request. Default 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// UpstreamConcurrency caps simultaneous upstream requests. Default 4.
	UpstreamConcurrency int `json:"upstream_concurrency,omitempty"`
	// Storage is the Badger directory. Default: tile_cache in Caddy's data directory.
	Storage string `json:"storage,omitempty"`
	// Gridsets are custom gridsets, beside the built-in EPSG:4326 and EPSG:900913.
	Gridsets []gridset.Config `json:"gridsets,omitempty"`
	// Layers are the cached layers.
	Layers []LayerConfig `json:"layers"`
	// NeutralParams are extra request parameters that do not change the
	// image (besides TILED, TRANSPARENT, EXCEPTIONS, TILESORIGIN), so tile
	// requests carrying them are still served from the cache.
	NeutralParams []string `json:"neutral_params,omitempty"`
	// JPEGQuality for JPEG tiles, 1–100. Default 85.
	JPEGQuality int `json:"jpeg_quality,omitempty"`
	// Services serves the same tiles through WMTS, TMS and XYZ, and the
	// demo page, each under its own path (services.go).
	Services *ServicesConfig `json:"services,omitempty"`
	// BreakerFailures upstream failures in a row (no answer, a timeout,
	// HTTP 5xx or 429) open the circuit breaker: misses then get 502 at
	// once for BreakerCooldown, then one probe request goes upstream.
	// Default 5; 0 turns the breaker off. Default cooldown 30s (breaker.go).
	BreakerFailures *int           `json:"breaker_failures,omitempty"`
	BreakerCooldown caddy.Duration `json:"breaker_cooldown,omitempty"`
	// MaxParamLength: a request whose parameter name or value is longer
	// (in bytes, unescaped) is not a tile request ("malformed"). Default 1024.
	MaxParamLength int `json:"max_param_length,omitempty"`

	layers  map[string]*Layer
	grids   map[string]*gridset.Gridset
	neutral []string
	store   *store.Badger
	fetcher *fetcher
	log     *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tile_cache",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets the handler up: layers and gridsets compiled, the store
// opened (or shared with the previous config), metrics registered.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	if h.Name == "" {
		h.Name = DefaultName
	}
	if h.Timeout == 0 {
		h.Timeout = caddy.Duration(30 * time.Second)
	}
	if h.UpstreamConcurrency == 0 {
		h.UpstreamConcurrency = 4
	}
	if h.JPEGQuality == 0 {
		h.JPEGQuality = 85
	}
	if h.Storage == "" {
		h.Storage = filepath.Join(caddy.AppDataDir(), "tile_cache")
	}
	if err := h.compile(); err != nil {
		return err
	}
	if err := h.provisionServices(); err != nil {
		return err
	}
	m := metrics()
	if err := m.register(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	up, err := url.Parse(h.Upstream)
	if err != nil {
		return fmt.Errorf("tile_cache: upstream: %v", err)
	}
	brk, err := h.buildBreaker(ctx.GetMetricsRegistry())
	if err != nil {
		return err
	}
	st, err := store.Open(h.Storage, store.Options{})
	if err != nil {
		return err
	}
	h.store = st
	h.fetcher = &fetcher{
		upstream: up,
		client: &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: h.UpstreamConcurrency,
			IdleConnTimeout:     90 * time.Second,
		}},
		timeout: time.Duration(h.Timeout),
		limit:   newLimiter(h.UpstreamConcurrency),
		store:   st,
		enc:     imaging.Encoder{JPEGQuality: h.JPEGQuality},
		log:     h.log,
		flights: make(map[flightKey]*flight),
		breaker: brk,
	}
	register(h)
	h.log.Info("tile cache ready", zap.String("name", h.Name), zap.String("upstream", h.Upstream),
		zap.String("storage", st.Dir()), zap.Int("layers", len(h.layers)))
	return nil
}

// compile checks the configuration and builds layers and gridsets; it
// needs no I/O, so Validate-time errors come out before the store opens.
func (h *Handler) compile() error {
	h.grids = make(map[string]*gridset.Gridset)
	for _, name := range gridset.BuiltinNames() {
		h.grids[name], _ = gridset.Builtin(name)
	}
	for _, c := range h.Gridsets {
		if _, dup := h.grids[c.Name]; dup {
			return fmt.Errorf("tile_cache: gridset %q defined twice (or shadows a built-in)", c.Name)
		}
		g, err := gridset.New(c)
		if err != nil {
			return fmt.Errorf("tile_cache: %v", err)
		}
		if err := checkIndexRange(g); err != nil {
			return fmt.Errorf("tile_cache: %v", err)
		}
		h.grids[c.Name] = g
	}
	if len(h.Layers) == 0 {
		return errors.New("tile_cache: no layers configured")
	}
	h.layers = make(map[string]*Layer, len(h.Layers))
	for _, c := range h.Layers {
		if _, dup := h.layers[c.Name]; dup {
			return fmt.Errorf("tile_cache: layer %q defined twice", c.Name)
		}
		l, err := h.compileLayer(c, h.grids)
		if err != nil {
			return fmt.Errorf("tile_cache: %v", err)
		}
		h.layers[c.Name] = l
	}
	// A parameter a layer filters is part of its cache key and can never
	// be neutral: an explicit neutral_params entry that clashes is an
	// error, a default one simply yields to the filter.
	h.neutral = nil
	for _, n := range defaultNeutral {
		if h.filtered(n) == "" {
			h.neutral = append(h.neutral, n)
		}
	}
	for _, n := range h.NeutralParams {
		if l := h.filtered(n); l != "" {
			return fmt.Errorf("tile_cache: neutral_params %s is a parameter filter of layer %q: remove one of them", n, l)
		}
		h.neutral = append(h.neutral, n)
	}
	return nil
}

// filtered names a layer that has a parameter filter for key, or "".
func (h *Handler) filtered(key string) string {
	for name, l := range h.layers {
		if l.Params.Has(key) {
			return name
		}
	}
	return ""
}

// checkIndexRange rejects gridsets the store's key layout cannot hold.
func checkIndexRange(g *gridset.Gridset) error {
	if len(g.Levels) > store.MaxZoom+1 {
		return fmt.Errorf("gridset %s: too many levels", g.Name)
	}
	for _, l := range g.Levels {
		if l.TilesWide > store.MaxIndex || l.TilesHigh > store.MaxIndex {
			return fmt.Errorf("gridset %s: level %s has too many tiles", g.Name, l.Name)
		}
	}
	return nil
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	u, err := url.Parse(h.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tile_cache: upstream must be an absolute http(s) URL, got %q", h.Upstream)
	}
	if h.UpstreamConcurrency < 1 {
		return errors.New("tile_cache: upstream_concurrency must be at least 1")
	}
	if h.JPEGQuality < 1 || h.JPEGQuality > 100 {
		return errors.New("tile_cache: jpeg_quality must be 1..100")
	}
	if h.BreakerFailures != nil && *h.BreakerFailures < 0 || h.BreakerCooldown < 0 || h.MaxParamLength < 0 {
		return errors.New("tile_cache: breaker_failures, breaker_cooldown and max_param_length must not be negative")
	}
	return nil
}

// Cleanup releases the store; the last config using it closes it.
func (h *Handler) Cleanup() error {
	unregister(h)
	if h.store != nil {
		return h.store.Release()
	}
	return nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.Services != nil {
		if handled, err := h.serveServices(w, r); handled {
			return err
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return h.pass(w, r, next, passMethod)
	}
	var req wmsRequest
	if reason := h.parseWMS(r.URL.RawQuery, &req); reason != "" {
		return h.pass(w, r, next, reason)
	}
	var tr tileRequest
	if reason := h.matchTile(&req, &tr); reason != "" {
		return h.pass(w, r, next, reason)
	}
	return h.serveTile(w, r, &tr)
}

// pass hands a request that is not a cacheable tile to the next handler,
// saying why in a header (GeoWebCache's own header name, for operators who
// know it) and in Cache-Status.
func (h *Handler) pass(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, reason string) error {
	metrics().passthrough.WithLabelValues(reason).Inc()
	hd := w.Header()
	hd.Set("Geowebcache-Miss-Reason", reason)
	hd.Set("Cache-Status", "tile_cache; fwd=bypass; detail="+reason)
	return next.ServeHTTP(w, r)
}

func (h *Handler) serveTile(w http.ResponseWriter, r *http.Request, tr *tileRequest) error {
	l := tr.layer
	key := store.Key{
		Set: store.Set{Layer: l.Name, Gridset: tr.grid.Name, Format: tr.format.Name, Params: tr.params.Hash()},
		Z:   tr.index.Z, X: tr.index.X, Y: tr.index.Y,
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	t, err := h.store.Get(&key, *bp)
	var stale *store.Tile
	switch {
	case err == nil:
		*bp = t.Data[:0] // keep the grown buffer for the next request
		if l.ServerExpiry == 0 || time.Since(t.StoredAt) < l.ServerExpiry {
			l.hits.Inc()
			writeTile(w, r, tr, t, statusHit, resultHit)
			return nil
		}
		stale = &t
	case errors.Is(err, store.ErrNotFound):
	default:
		// A store that cannot be read must not take the map down: fetch.
		metrics().storeErrors.Inc()
		h.log.Error("reading tile failed", zap.String("layer", l.Name), zap.Error(err))
	}
	l.misses.Inc()
	meta, err := tr.grid.MetaTile(tr.index, l.MetaWidth, l.MetaHeight, l.Gutter, tr.grid.Coverage[tr.index.Z])
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	res, err := h.fetcher.Fetch(r.Context(), &MetaRequest{Layer: l, Grid: tr.grid, Format: tr.format, Params: tr.params, Meta: meta}, PriorityUser)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client left; nothing to answer
		}
		if stale != nil {
			l.stale.Inc()
			h.log.Warn("serving expired tile: refresh failed", zap.String("layer", l.Name), zap.Error(err))
			writeTile(w, r, tr, *stale, statusStale, resultHit)
			return nil
		}
		msg := "the upstream WMS failed for this tile: " + shortError(err)
		if bo, refused := refusal(err); refused {
			// The circuit breaker answered without asking the upstream.
			msg = bo.Error()
		} else {
			h.log.Error("metatile fetch failed", zap.String("layer", l.Name),
				zap.Int("z", tr.index.Z), zap.Int64("x", tr.index.X), zap.Int64("y", tr.index.Y), zap.Error(err))
		}
		var bo *BreakerOpenError
		if errors.As(err, &bo) {
			w.Header().Set("Retry-After", strconv.Itoa(bo.RetrySeconds()))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Status", "tile_cache; fwd=miss; fwd-status=502")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "tile_cache: %s\n", msg)
		return nil
	}
	data, ok := res.Tile(tr.index)
	if !ok {
		return caddyhttp.Error(http.StatusInternalServerError, errors.New("tile_cache: metatile lacks the requested tile"))
	}
	status := statusMiss
	if res.StoreErr != nil {
		status = statusNoStore
	}
	writeTile(w, r, tr, store.Tile{StoredAt: res.StoredAt, ETag: store.ETagOf(data), Data: data}, status, resultMiss)
	return nil
}

// shortError keeps error text to one short line for a response body.
func shortError(err error) string {
	s := err.Error()
	if len(s) > 200 {
		i := 200
		for i > 0 && !utf8.RuneStart(s[i]) {
			i-- // never cut a character in two
		}
		s = s[:i] + "…"
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return s[:i]
		}
	}
	return s
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
