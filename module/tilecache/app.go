package tilecache

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the tile_cache app. It owns the named caches of a config: those
// defined in the app itself (the Caddyfile's global options) and those a
// tile_cache handler defines inline. Handlers serve a cache and
// tile_cache_admin drives its seeding by name, through the app, so two
// sites can share one cache and no handler can take another's name by
// accident.
type App struct {
	// Caches are defined here once, by name, and served by tile_cache
	// handlers that name them.
	Caches map[string]*Config `json:"caches,omitempty"`

	log     *zap.Logger
	storage certmagic.Storage // Caddy's configured storage, for clustered caches
	mu      *sync.Mutex       // a pointer: Caddy copies module values
	caches  map[string]*Cache
	origin  map[string]string // where each cache was defined, for error messages
	onStart []func() error
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tile_cache",
		New: func() caddy.Module { return new(App) },
	}
}

// AppOf returns the tile_cache app of ctx's config, provisioning it on
// first use: the handlers need it whether or not it is configured.
func AppOf(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("tile_cache")
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// Provision opens the caches the app defines and registers the metrics.
func (a *App) Provision(ctx caddy.Context) error {
	a.log = ctx.Logger()
	a.storage = ctx.Storage()
	a.mu = new(sync.Mutex)
	a.caches = make(map[string]*Cache)
	a.origin = make(map[string]string)
	if err := metrics().register(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	names := make([]string, 0, len(a.Caches))
	for n := range a.Caches {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if a.Caches[n] == nil {
			return fmt.Errorf("tile_cache: cache %q has no settings", n)
		}
		if _, err := a.define(n, *a.Caches[n], "the tile_cache app"); err != nil {
			return err
		}
	}
	return nil
}

// define returns the cache named name built from cfg, opening it on first
// definition. A second definition of the name must have the same
// settings; it then shares the first's cache.
func (a *App) define(name string, cfg Config, where string) (*Cache, error) {
	c, err := compile(name, cfg)
	if err != nil {
		return nil, fmt.Errorf("tile_cache %q (%s): %w", name, where, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if have, ok := a.caches[name]; ok {
		if !sameConfig(&have.cfg, &c.cfg) {
			hint := "give one of them another name"
			if name == DefaultName {
				hint = "a tile_cache without a name is named " + DefaultName + ": give each its own name"
			}
			places := "in " + a.origin[name] + " and in " + where
			if a.origin[name] == where {
				places = "in two " + strings.TrimPrefix(where, "a ") + "s"
			}
			return nil, fmt.Errorf("tile_cache: two caches are named %q with different settings (%s): %s",
				name, places, hint)
		}
		return have, nil
	}
	if err := c.open(a.log.Named(name), nil, a.storage); err != nil {
		return nil, fmt.Errorf("tile_cache %q: %w", name, err)
	}
	a.caches[name] = c
	a.origin[name] = where
	a.log.Info("tile cache ready", zap.String("name", name), zap.String("storage", c.store.Name()),
		zap.Int("layers", len(c.order)), zap.String("defined_in", where))
	return c, nil
}

// Cache returns the cache named name. Every cache of the config is known
// once all its modules are provisioned, that is from Start on.
func (a *App) Cache(name string) (*Cache, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.caches[name]
	if !ok {
		return nil, fmt.Errorf("no tile_cache named %q in this config", name)
	}
	return c, nil
}

// OnStart runs fn when the config starts, after every module has been
// provisioned: the handlers that use a cache defined elsewhere bind to it
// then, whatever order Caddy provisioned them in. An error stops the config.
func (a *App) OnStart(fn func() error) {
	a.mu.Lock()
	a.onStart = append(a.onStart, fn)
	a.mu.Unlock()
}

// Start binds the handlers registered with OnStart.
func (a *App) Start() error {
	a.mu.Lock()
	fns := a.onStart
	a.mu.Unlock()
	for _, fn := range fns {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// Stop implements caddy.App; the caches close in Cleanup.
func (a *App) Stop() error { return nil }

// Cleanup gives back the app's use of its caches; a cache a seeding engine
// still works with closes when the engine lets it go.
func (a *App) Cleanup() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, c := range a.caches {
		if err := c.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	a.caches = nil
	if len(errs) > 0 {
		return fmt.Errorf("tile_cache: closing caches: %v", errs)
	}
	return nil
}

// configJSON is a configuration's canonical form, for comparing two.
func configJSON(c *Config) string {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("%p", c) // unmarshalable: equal to nothing else
	}
	return string(b)
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
