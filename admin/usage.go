package admin

import (
	"encoding/json"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// GET rest/usage.json: what the cache's store holds, per layer, tile set
// and level (an extension; GeoWebCache has no such resource). It needs
// tile_cache's `usage` option, which keeps the counts in the same write
// as the tiles (package store, usage.go).

type usageJSON struct {
	// Recounting: the first count after `usage` was turned on still runs,
	// and the figures are incomplete until it ends.
	Recounting bool         `json:"recounting"`
	Tiles      int64        `json:"tiles"`
	Bytes      int64        `json:"bytes"`
	Layers     []usageLayer `json:"layers"`
}

type usageLayer struct {
	Name     string         `json:"name"`
	Tiles    int64          `json:"tiles"`
	Bytes    int64          `json:"bytes"`
	TileSets []usageTileSet `json:"tileSets"`
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	return json.NewEncoder(w).Encode(out)
}
