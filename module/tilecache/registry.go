package tilecache

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// DefaultName is the name of a tile_cache that is given none.
const DefaultName = "default"

// The seeder and the admin interface work on a tile_cache of the same Caddy,
// found by name. During a config reload Caddy provisions the new handlers
// before it cleans up the old ones, and a failed reload cleans up the new
// ones and keeps the old: so each name maps to a stack of live instances,
// and the newest live one answers.
var registry = struct {
	sync.RWMutex
	byName map[string][]*Handler
}{byName: map[string][]*Handler{}}

func register(h *Handler) {
	registry.Lock()
	registry.byName[h.Name] = append(registry.byName[h.Name], h)
	registry.Unlock()
}

func unregister(h *Handler) {
	registry.Lock()
	defer registry.Unlock()
	s := registry.byName[h.Name]
	if i := slices.Index(s, h); i >= 0 {
		s = slices.Delete(s, i, i+1)
	}
	if len(s) == 0 {
		delete(registry.byName, h.Name)
	} else {
		registry.byName[h.Name] = s
	}
}

// Lookup returns the current tile_cache named name.
func Lookup(name string) (*Handler, error) {
	registry.RLock()
	defer registry.RUnlock()
	s := registry.byName[name]
	if len(s) == 0 {
		return nil, fmt.Errorf("no tile_cache named %q in this Caddy", name)
	}
	return s[len(s)-1], nil
}

// Layer returns the configured layer named name.
func (h *Handler) Layer(name string) (*Layer, bool) {
	l, ok := h.layers[name]
	return l, ok
}

// LayerNames lists the configured layers, sorted.
func (h *Handler) LayerNames() []string {
	names := make([]string, 0, len(h.layers))
	for n := range h.layers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Store is the handler's tile store.
func (h *Handler) Store() *store.Badger { return h.store }

// FetchMeta fetches, slices and stores one metatile through the same
// single flight and upstream limit as visitors' misses.
func (h *Handler) FetchMeta(ctx context.Context, m *MetaRequest, p Priority) (*MetaResult, error) {
	return h.fetcher.Fetch(ctx, m, p)
}

// FetchMetaNotify is FetchMeta that calls fetched as soon as the upstream
// has answered, while decoding, slicing, encoding and storing go on: a
// seeder uses it to put its next request on the wire meanwhile.
func (h *Handler) FetchMetaNotify(ctx context.Context, m *MetaRequest, p Priority, fetched func()) (*MetaResult, error) {
	return h.fetcher.FetchNotify(ctx, m, p, fetched)
}

// Set is the store's name for a layer's tiles in one gridset, format and
// parameter set.
func (m *MetaRequest) Set() store.Set { return m.set() }

// NewMetaRequest names the metatile holding tile idx of the layer.
func (l *Layer) NewMetaRequest(g *Grid, f *Format, p ParamValues, idx gridset.Index) (*MetaRequest, error) {
	meta, err := g.MetaTile(idx, l.MetaWidth, l.MetaHeight, l.Gutter, g.Coverage[idx.Z])
	if err != nil {
		return nil, err
	}
	return &MetaRequest{Layer: l, Grid: g, Format: f, Params: p, Meta: meta}, nil
}
