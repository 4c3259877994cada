package admin

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/quota/s3quota"
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
//
// Over S3 (with a quota, which keeps the figures: module/quota/s3quota)
// the figures per tile set and level are the last listing's, less the
// evictions since; listedAt says when that listing ended, and each layer's
// unlisted {tiles, bytes} is what every node PUT since (an overwrite
// counts again), included in the layer's and the document's totals but in
// no tile set. estimate is true; recounting is true until the first
// listing.

type usageJSON struct {
	// Recounting: the first count after `usage` was turned on still runs,
	// and the figures are incomplete until it ends.
	Recounting bool `json:"recounting"`
	// Estimate: the figures are a quota's estimate over S3, not counts
	// kept with every write.
	Estimate bool `json:"estimate,omitempty"`
	// ListedAt is when the figures' listing of the bucket ended (S3
	// only; RFC 3339, UTC).
	ListedAt string       `json:"listedAt,omitempty"`
	Tiles    int64        `json:"tiles"`
	Bytes    int64        `json:"bytes"`
	Layers   []usageLayer `json:"layers"`
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
	Quota      int64         `json:"quota,omitempty"`
	LastAccess string        `json:"lastAccess,omitempty"`
	Evicted    *usageEvicted `json:"evicted,omitempty"`
	// Unlisted is what was PUT since the last listing (S3 only).
	Unlisted *usageEvicted  `json:"unlisted,omitempty"`
	TileSets []usageTileSet `json:"tileSets"`
}

// usageEvicted is a count of tiles and bytes.
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
	if sq := c.S3Quota(); sq != nil {
		return writeUsage(w, h.s3Usage(sq.Report(), st, c.Quota()))
	}
	ur, ok := st.(store.UsageReporter)
	if !ok {
		return httpx.Text(w, http.StatusNotFound, "usage over s3 is kept by a quota: add quota to tile_cache")
	}
	levels, recounting, err := ur.Usage()
	switch {
	case errors.Is(err, store.ErrUsageOff):
		return httpx.Text(w, http.StatusNotFound, "usage is not counted: turn on tile_cache's usage option")
	case err != nil:
		h.log.Error("reading tile usage", zap.Error(err))
		return httpx.Text(w, http.StatusInternalServerError, "reading usage: "+err.Error())
	}
	out := usageJSON{Recounting: recounting, Layers: []usageLayer{}}
	addLevels(&out, levels, st)
	h.usageExtras(c.Quota(), st, &out)
	return writeUsage(w, out)
}

func writeUsage(w http.ResponseWriter, out usageJSON) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	return json.NewEncoder(w).Encode(out)
}

// s3Usage is the usage document of a quota over S3: no request to the
// bucket, the figures the quota keeps.
func (h *Handler) s3Usage(r s3quota.Report, st store.Store, ev *quota.Evictor) usageJSON {
	out := usageJSON{Recounting: !r.Listed, Estimate: true, Layers: []usageLayer{}}
	if r.Listed {
		out.ListedAt = r.ListedAt.UTC().Format(time.RFC3339)
	}
	addLevels(&out, r.Levels, st)
	for _, name := range slices.Sorted(maps.Keys(r.Unlisted)) {
		u := r.Unlisted[name]
		i := slices.IndexFunc(out.Layers, func(l usageLayer) bool { return l.Name == name })
		if i < 0 {
			out.Layers = append(out.Layers, usageLayer{Name: name, TileSets: []usageTileSet{}})
			i = len(out.Layers) - 1
		}
		l := &out.Layers[i]
		l.Unlisted = &usageEvicted{Tiles: u[0], Bytes: u[1]}
		l.Tiles += u[0]
		l.Bytes += u[1]
		out.Tiles += u[0]
		out.Bytes += u[1]
	}
	slices.SortFunc(out.Layers, func(a, b usageLayer) int { return strings.Compare(a.Name, b.Name) })
	for i := range out.Layers {
		l := &out.Layers[i]
		var latest int64
		for j := range l.TileSets {
			ts := &l.TileSets[j]
			t := r.LastAccess[store.Set{Layer: l.Name, Gridset: ts.GridSetID, Format: ts.Format, Params: ts.ParametersID}]
			ts.LastAccess = rfc3339(t)
			latest = max(latest, t)
		}
		for set, t := range r.LastAccess {
			if set.Layer == l.Name {
				latest = max(latest, t) // a set used but not listed yet
			}
		}
		l.LastAccess = rfc3339(latest)
		e := r.Evicted[l.Name]
		l.Evicted = &usageEvicted{Tiles: e[0], Bytes: e[1]}
	}
	h.usageExtras(ev, nil, &out)
	return out
}

// addLevels adds usage figures, sorted by set and level, to a document:
// consecutive levels of a set, consecutive sets of a layer.
func addLevels(out *usageJSON, levels []store.LevelUsage, st store.Store) {
	rec, _ := st.(store.ParamsRecorder)
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
