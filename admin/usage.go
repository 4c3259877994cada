package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// GET rest/usage.json: what the cache's store holds, per layer, tile set
// and level (an extension; GeoWebCache has no such resource). It needs
// tile_cache's `usage` option, which keeps the counts in the same write
// as the tiles (package store, usage.go).
//
// With access tracking (a quota turns it on) each layer and tile set also
// has lastAccess, the latest use of any of its pages (RFC 3339, UTC;
// absent when unknown). A store that counts evictions gives each layer
// evicted {tiles, bytes} (so far, across restarts). With a quota, a layer
// with a quota of its own has quota (bytes), and the document has quota:
// the running quota (rest/diskquota changes it until the next config
// load).

type usageJSON struct {
	// Recounting: the first count after `usage` was turned on still runs,
	// and the figures are incomplete until it ends.
	Recounting bool         `json:"recounting"`
	Tiles      int64        `json:"tiles"`
	Bytes      int64        `json:"bytes"`
	Layers     []usageLayer `json:"layers"`
	// Quota is the cache's running quota; absent without one.
	Quota *usageQuota `json:"quota,omitempty"`
}

type usageQuota struct {
	// Enabled is false while eviction is paused (rest/diskquota).
	Enabled bool `json:"enabled"`
	// MaxSize is the global quota in bytes (0: only layers' own).
	MaxSize      int64   `json:"maxSize"`
	LowWatermark float64 `json:"lowWatermark"`
	Policy       string  `json:"policy"`
	KeepLevels   *[2]int `json:"keepLevels,omitempty"`
}

type usageLayer struct {
	Name  string `json:"name"`
	Tiles int64  `json:"tiles"`
	Bytes int64  `json:"bytes"`
	// Quota is the layer's own quota in bytes, absent without one.
	Quota      int64          `json:"quota,omitempty"`
	LastAccess string         `json:"lastAccess,omitempty"`
	Evicted    *usageEvicted  `json:"evicted,omitempty"`
	TileSets   []usageTileSet `json:"tileSets"`
}

type usageEvicted struct {
	Tiles int64 `json:"tiles"`
	Bytes int64 `json:"bytes"`
}

type usageTileSet struct {
	GridSetID string `json:"gridSetId"`
	Format    string `json:"format"`
	// ParametersID is the tile set's parameter hash; Parameters its values
	// as recorded when its first tile was stored (absent for the default
	// set, and for sets stored before values were recorded).
	ParametersID string       `json:"parametersId"`
	Parameters   *string      `json:"parameters,omitempty"`
	Tiles        int64        `json:"tiles"`
	Bytes        int64        `json:"bytes"`
	LastAccess   string       `json:"lastAccess,omitempty"`
	Levels       []usageLevel `json:"levels"`
}

type usageLevel struct {
	Zoom  int   `json:"zoom"`
	Tiles int64 `json:"tiles"`
	Bytes int64 `json:"bytes"`
}

func (h *Handler) usage(w http.ResponseWriter) error {
	c, err := h.cache()
	if err != nil {
		return httpx.Text(w, http.StatusServiceUnavailable, err.Error())
	}
	st := c.Store()
	ur, ok := st.(store.UsageReporter)
	if !ok {
		return httpx.Text(w, http.StatusNotFound, "usage is not counted with this storage (s3); it needs the Badger store and tile_cache's usage option")
	}
	levels, recounting, err := ur.Usage()
	switch {
	case errors.Is(err, store.ErrUsageOff):
		return httpx.Text(w, http.StatusNotFound, "usage is not counted: turn on tile_cache's usage option")
	case err != nil:
		h.log.Error("reading tile usage", zap.Error(err))
		return httpx.Text(w, http.StatusInternalServerError, "reading usage: "+err.Error())
	}
	rec, _ := st.(store.ParamsRecorder)
	out := usageJSON{Recounting: recounting, Layers: []usageLayer{}}
	// Usage comes sorted by set and level: consecutive levels of a set,
	// consecutive sets of a layer.
	for _, lv := range levels {
		if n := len(out.Layers); n == 0 || out.Layers[n-1].Name != lv.Set.Layer {
			out.Layers = append(out.Layers, usageLayer{Name: lv.Set.Layer, TileSets: []usageTileSet{}})
		}
		layer := &out.Layers[len(out.Layers)-1]
		ts := len(layer.TileSets) - 1
		if ts < 0 || layer.TileSets[ts].GridSetID != lv.Set.Gridset || layer.TileSets[ts].Format != lv.Set.Format ||
			layer.TileSets[ts].ParametersID != lv.Set.Params {
			set := usageTileSet{GridSetID: lv.Set.Gridset, Format: lv.Set.Format, ParametersID: lv.Set.Params, Levels: []usageLevel{}}
			if rec != nil {
				if values, found, err := rec.RecordedParams(lv.Set); err == nil && found {
					set.Parameters = &values
				}
			}
			layer.TileSets = append(layer.TileSets, set)
			ts++
		}
		set := &layer.TileSets[ts]
		set.Levels = append(set.Levels, usageLevel{Zoom: lv.Z, Tiles: lv.Tiles, Bytes: lv.Bytes})
		set.Tiles += lv.Tiles
		set.Bytes += lv.Bytes
		layer.Tiles += lv.Tiles
		layer.Bytes += lv.Bytes
		out.Tiles += lv.Tiles
		out.Bytes += lv.Bytes
	}
	h.usageExtras(c.Quota(), st, &out)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	return json.NewEncoder(w).Encode(out)
}

// pageLister is a store that tracks access by page (store.Badger).
type pageLister interface {
	Pages(layer string, fn func(store.PageStat) error) error
}

// evictionCounter is a store that counts evicted tiles (store.Badger).
type evictionCounter interface {
	Evicted() (map[string][2]int64, error)
}

// usageExtras adds last access, evictions and quotas to a usage document.
// The page records are read once, in one pass (there may be 100,000s).
// What cannot be read is left out and logged: the counts stand alone.
func (h *Handler) usageExtras(ev *quota.Evictor, st store.Store, out *usageJSON) {
	if pl, ok := st.(pageLister); ok && len(out.Layers) > 0 {
		last := map[store.Set]int64{}
		err := pl.Pages("", func(p store.PageStat) error {
			if p.Last > last[p.Set] {
				last[p.Set] = p.Last
			}
			return nil
		})
		if err != nil {
			h.log.Warn("reading page access records for rest/usage.json", zap.Error(err))
		} else {
			for i := range out.Layers {
				l := &out.Layers[i]
				var latest int64
				for j := range l.TileSets {
					ts := &l.TileSets[j]
					t := last[store.Set{Layer: l.Name, Gridset: ts.GridSetID, Format: ts.Format, Params: ts.ParametersID}]
					ts.LastAccess = rfc3339(t)
					latest = max(latest, t)
				}
				l.LastAccess = rfc3339(latest)
			}
		}
	}
	if ec, ok := st.(evictionCounter); ok {
		evicted, err := ec.Evicted()
		if err != nil {
			h.log.Warn("reading eviction counts for rest/usage.json", zap.Error(err))
		} else {
			for i := range out.Layers {
				e := evicted[out.Layers[i].Name]
				out.Layers[i].Evicted = &usageEvicted{Tiles: e[0], Bytes: e[1]}
			}
		}
	}
	if ev == nil {
		return
	}
	cfg := ev.Config()
	out.Quota = &usageQuota{Enabled: ev.Enabled(), MaxSize: cfg.MaxSize, LowWatermark: cfg.LowWatermark,
		Policy: string(cfg.Policy), KeepLevels: cfg.KeepLevels}
	for i := range out.Layers {
		if lq := cfg.Layers[out.Layers[i].Name]; lq != nil {
			out.Layers[i].Quota = lq.MaxSize
		}
	}
}

// rfc3339 is a Unix time in seconds as RFC 3339 UTC; "" for 0 (unknown).
func rfc3339(sec int64) string {
	if sec <= 0 {
		return ""
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}
