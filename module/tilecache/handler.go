// Package tilecache is the tile_cache app and its HTTP handler. The app
// (app.go) owns named caches (cache.go): compiled layers, a store and a
// fetch path whose upstream state outlives config reloads (upstream.go).
// The handler, http.handlers.tile_cache, answers WMS-C tile requests
// (GetMaps that hit exactly one tile of a gridset) and the same tiles
// through WMTS, TMS and XYZ from a cache, fetching whole metatiles from
// the upstream WMS on a miss, and passes every other request on.
package tilecache

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/store"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the tile_cache HTTP handler: it serves one cache of the
// tile_cache app.
type Handler struct {
	// Name is the cache served. Default "default".
	Name string `json:"name,omitempty"`
	// Config defines the cache right here. Left out entirely, the handler
	// serves the cache of that name defined elsewhere: in the tile_cache
	// app, or by another handler. Defined in two places, the settings must
	// be the same.
	Config
	// Services serves the same tiles through WMTS, TMS and XYZ, and the
	// demo page, each under its own path (services.go).
	Services *ServicesConfig `json:"services,omitempty"`

	app   *App
	log   *zap.Logger
	bound *lazy[binding]
}

// lazy is a value set once, possibly late: a module's binding to a cache
// that is defined after the module is provisioned. A pointer in the
// module, so the module itself stays copyable.
type lazy[T any] struct {
	mu sync.Mutex // serialises setting it
	v  atomic.Pointer[T]
}

// get returns the value, setting it with set on first use.
func (l *lazy[T]) get(set func() (*T, error)) (*T, error) {
	if v := l.v.Load(); v != nil {
		return v, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.v.Load(); v != nil {
		return v, nil
	}
	v, err := set()
	if err != nil {
		return nil, err
	}
	l.v.Store(v)
	return v, nil
}

// binding is what a handler serves once it knows its cache.
type binding struct {
	cache *Cache
	svc   *services // nil: no services configured
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tile_cache",
		New: func() caddy.Module { return new(Handler) },
	}
}

// defines reports whether the handler's configuration defines its cache.
func (h *Handler) defines() bool { return !reflect.ValueOf(h.Config).IsZero() }

// Provision defines the handler's cache in the app, or finds the one it
// names; a cache defined by a handler provisioned later is found at Start.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	h.bound = new(lazy[binding])
	if h.Name == "" {
		h.Name = DefaultName
	}
	app, err := AppOf(ctx)
	if err != nil {
		return err
	}
	h.app = app
	if h.defines() {
		c, err := app.define(h.Name, h.Config, "a tile_cache handler")
		if err != nil {
			return err
		}
		return h.bind(c)
	}
	if c, err := app.Cache(h.Name); err == nil {
		return h.bind(c)
	}
	app.OnStart(func() error {
		_, err := h.resolve()
		return err
	})
	return nil
}

// bind attaches the handler to its cache and compiles its services.
func (h *Handler) bind(c *Cache) error {
	_, err := h.bound.get(func() (*binding, error) { return h.binding(c) })
	return err
}

func (h *Handler) binding(c *Cache) (*binding, error) {
	b := &binding{cache: c}
	if h.Services != nil {
		svc, err := compileServices(h.Services, c)
		if err != nil {
			return nil, fmt.Errorf("tile_cache %q: %w", c.name, err)
		}
		b.svc = svc
	}
	return b, nil
}

// resolve returns the handler's binding, binding it now if the cache it
// names was defined after it was provisioned: at Start, or on a request
// that came in before the app started.
func (h *Handler) resolve() (*binding, error) {
	if b := h.bound.v.Load(); b != nil {
		return b, nil // the hit path: no closure to allocate
	}
	return h.bound.get(func() (*binding, error) {
		c, err := h.app.Cache(h.Name)
		if err != nil {
			return nil, fmt.Errorf("tile_cache handler: %w", err)
		}
		return h.binding(c)
	})
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	b, err := h.resolve()
	if err != nil {
		return caddyhttp.Error(http.StatusServiceUnavailable, err)
	}
	if b.svc != nil {
		if handled, err := b.svc.serve(w, r); handled {
			return err
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return pass(w, r, next, passMethod)
	}
	c := b.cache
	var q query
	if reason := c.scanWMS(r.URL.RawQuery, &q); reason != "" {
		return pass(w, r, next, reason)
	}
	if isTiledCapabilities(&q, r.URL.RawQuery) {
		return c.serveTiledCapabilities(w, r)
	}
	var tr tileRequest
	if reason := c.matchTile(&q, &tr); reason != "" {
		return pass(w, r, next, reason)
	}
	return c.serveTile(w, r, &tr)
}

// pass hands a request that is not a cacheable tile to the next handler,
// saying why in a header (GeoWebCache's own header name, for operators who
// know it) and in Cache-Status.
func pass(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, reason string) error {
	metrics().passthrough.WithLabelValues(reason).Inc()
	hd := w.Header()
	hd.Set("Geowebcache-Miss-Reason", reason)
	hd.Set("Cache-Status", "tile_cache; fwd=bypass; detail="+reason)
	return next.ServeHTTP(w, r)
}

// serveTile answers a tile request from the store, or fetches its metatile.
func (c *Cache) serveTile(w http.ResponseWriter, r *http.Request, tr *tileRequest) error {
	seedCPU.visited() // seeding leaves visitors a core (seedcpu.go)
	l := tr.layer
	key := store.Key{
		Set: store.Set{Layer: l.Name, Gridset: tr.grid.Name, Format: tr.format.Name, Params: tr.params.Hash()},
		Z:   tr.index.Z, X: tr.index.X, Y: tr.index.Y,
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	t, err := c.store.Get(r.Context(), key, *bp)
	var stale *store.Tile
	switch {
	case err != nil && r.Context().Err() != nil:
		return nil // the client left while the store was asked
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
		c.failLog.Error("reading tile failed", zap.String("layer", l.Name), zap.Error(err))
	}
	l.misses.Inc()
	meta, err := tr.grid.MetaTile(tr.index, l.MetaWidth, l.MetaHeight, l.Gutter, tr.grid.Coverage[tr.index.Z])
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	client := clientKey(r)
	if !c.fetch.shared.enter(client, c.cfg.MaxMissesPerClient) {
		metrics().refused.WithLabelValues(c.name, "client-limit").Inc()
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Cache-Status", "tile_cache; fwd=miss; fwd-status=429")
		return httpx.Text(w, http.StatusTooManyRequests,
			fmt.Sprintf("tile_cache: more than %d of your tile requests wait for the upstream; retry shortly", c.cfg.MaxMissesPerClient))
	}
	res, err := c.fetch.fetch(r.Context(), &MetaRequest{Layer: l, Grid: tr.grid, Format: tr.format, Params: tr.params, Meta: meta}, PriorityUser, nil)
	c.fetch.shared.exit(client, c.cfg.MaxMissesPerClient)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client left; nothing to answer
		}
		if stale != nil {
			l.stale.Inc()
			c.failLog.Warn("serving expired tile: refresh failed", zap.String("layer", l.Name), zap.Error(err))
			writeTile(w, r, tr, *stale, statusStale, resultHit)
			return nil
		}
		if errors.Is(err, ErrUpstreamBusy) {
			// Not the upstream's fault: too many misses wait for it.
			metrics().refused.WithLabelValues(c.name, "busy").Inc()
			c.failLog.Warn("miss refused: the upstream is busy", zap.String("layer", l.Name), zap.Error(err))
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Cache-Status", "tile_cache; fwd=miss; fwd-status=503")
			return httpx.Text(w, http.StatusServiceUnavailable, "tile_cache: "+shortError(err)+"; retry shortly")
		}
		msg := "the upstream WMS failed for this tile: " + shortError(err)
		if bo, refused := refusal(err); refused {
			// The circuit breaker answered without asking the upstream.
			msg = bo.Error()
		} else {
			fields := []zap.Field{zap.String("layer", l.Name),
				zap.Int("z", tr.index.Z), zap.Int64("x", tr.index.X), zap.Int64("y", tr.index.Y), zap.Error(err)}
			var ae *answerError
			if errors.As(err, &ae) {
				// Also as fields of their own, for log queries: a typo in
				// a layer name shows as the upstream's LayerNotDefined.
				fields = append(fields, zap.Int("upstream_status", ae.status), zap.String("upstream_reason", ae.reason))
			}
			c.failLog.Error("metatile fetch failed", fields...)
		}
		var bo *BreakerOpenError
		if errors.As(err, &bo) {
			w.Header().Set("Retry-After", strconv.Itoa(bo.RetrySeconds()))
		}
		w.Header().Set("Cache-Status", "tile_cache; fwd=miss; fwd-status=502")
		return httpx.Text(w, http.StatusBadGateway, "tile_cache: "+msg)
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

// clientKey names the client for max_misses_per_client: its IP as Caddy
// determined it (trusted_proxies respected), else the connection's.
func clientKey(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// shortError keeps error text to one short line for a response body. The
// upstream's own words (answerError) are already one line of bounded
// length: they get room of their own after the cache's message.
func shortError(err error) string {
	s := err.Error()
	limit := 200
	var ae *answerError
	if errors.As(err, &ae) {
		limit += len(ae.reason)
	}
	if len(s) > limit {
		i := limit
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
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
