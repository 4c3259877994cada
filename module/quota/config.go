// Package quota gives a tile store a size: a quota for the whole cache and
// per layer, enforced by evicting the coldest pages of tiles (least
// recently or least frequently used) down to a low watermark, never
// touching the levels an operator keeps.
//
// The store keeps what eviction needs in the same transactions as the
// tiles (package store: usage.go counts tiles and bytes per level,
// access.go keeps one access record per page); this package decides what
// goes and when, on a goroutine of its own per store, so that visitors'
// hits and misses never wait for it.
package quota

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// Policy names how the coldest pages are chosen.
type Policy string

const (
	// LRU evicts the pages used least recently first.
	LRU Policy = "lru"
	// LFU evicts the pages used least often first: hits per hour since
	// the page was first stored (GeoWebCache's frequency of use), the
	// least recently used first among equals.
	LFU Policy = "lfu"
)

// DefaultLowWatermark is the share of a quota that eviction brings usage
// back to once usage went over it: room for a few seconds of misses
// before the next pass, and value-log space to collect.
const DefaultLowWatermark = 0.9

// Config is a tile_cache's quota (JSON "quota").
type Config struct {
	// MaxSize bounds the bytes of tiles of the whole store (all layers).
	// 0: no global bound, only the layers' own.
	MaxSize int64 `json:"max_size,omitempty"`
	// LowWatermark is the share of a quota (0.5–0.99) that eviction
	// brings usage back to. Default 0.9.
	LowWatermark float64 `json:"low_watermark,omitempty"`
	// Policy is "lru" (default) or "lfu".
	Policy Policy `json:"policy,omitempty"`
	// KeepLevels [min, max]: tiles of these levels (inclusive) are never
	// evicted, e.g. [0, 8] for levels seeded once and for all. They count
	// in usage all the same.
	KeepLevels *[2]int `json:"keep_levels,omitempty"`
	// Layers are per-layer quotas, by layer name.
	Layers map[string]*LayerConfig `json:"layers,omitempty"`
}

// LayerConfig is one layer's quota. Its zero fields take the cache's.
type LayerConfig struct {
	// MaxSize bounds the bytes of this layer's tiles; 0: only the global
	// quota applies to it.
	MaxSize    int64   `json:"max_size,omitempty"`
	Policy     Policy  `json:"policy,omitempty"`
	KeepLevels *[2]int `json:"keep_levels,omitempty"`
}

// Validate checks a configuration and fills in its defaults. Every error
// is one line naming the field.
func (c *Config) Validate() error {
	if c.MaxSize < 0 {
		return errors.New("quota: max_size must not be negative")
	}
	if c.LowWatermark == 0 {
		c.LowWatermark = DefaultLowWatermark
	}
	if c.LowWatermark < 0.5 || c.LowWatermark > 0.99 {
		return fmt.Errorf("quota: low_watermark %g is outside 0.5–0.99", c.LowWatermark)
	}
	if c.Policy == "" {
		c.Policy = LRU
	}
	if err := c.Policy.check(); err != nil {
		return err
	}
	if err := checkLevels(c.KeepLevels); err != nil {
		return err
	}
	bounded := c.MaxSize > 0
	for _, name := range c.layerNames() {
		l := c.Layers[name]
		if l == nil {
			return fmt.Errorf("quota: layer %q has no settings", name)
		}
		if l.MaxSize < 0 {
			return fmt.Errorf("quota: layer %q: max_size must not be negative", name)
		}
		if l.Policy != "" {
			if err := l.Policy.check(); err != nil {
				return fmt.Errorf("quota: layer %q: %w", name, err)
			}
		}
		if err := checkLevels(l.KeepLevels); err != nil {
			return fmt.Errorf("quota: layer %q: %w", name, err)
		}
		bounded = bounded || l.MaxSize > 0
	}
	if !bounded {
		return errors.New("quota: set max_size for the cache or for a layer")
	}
	return nil
}

func (p Policy) check() error {
	if p != LRU && p != LFU {
		return fmt.Errorf("quota: policy %q is neither lru nor lfu", string(p))
	}
	return nil
}

func checkLevels(l *[2]int) error {
	if l == nil {
		return nil
	}
	if l[0] < 0 || l[1] < l[0] || l[1] > 255 {
		return fmt.Errorf("quota: keep_levels %d %d must be 0 ≤ min ≤ max ≤ 255", l[0], l[1])
	}
	return nil
}

func (c *Config) layerNames() []string {
	names := make([]string, 0, len(c.Layers))
	for n := range c.Layers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// policyOf is the policy that applies to a layer's pages.
func (c *Config) policyOf(layer string) Policy {
	if l := c.Layers[layer]; l != nil && l.Policy != "" {
		return l.Policy
	}
	return c.Policy
}

// kept reports whether level z of layer is never evicted.
func (c *Config) kept(layer string, z int) bool {
	keep := c.KeepLevels
	if l := c.Layers[layer]; l != nil && l.KeepLevels != nil {
		keep = l.KeepLevels
	}
	return keep != nil && z >= keep[0] && z <= keep[1]
}

// String is the configuration in a line, for logs.
func (c *Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "max_size=%d low_watermark=%g policy=%s", c.MaxSize, c.LowWatermark, c.Policy)
	if c.KeepLevels != nil {
		fmt.Fprintf(&b, " keep_levels=%d-%d", c.KeepLevels[0], c.KeepLevels[1])
	}
	for _, n := range c.layerNames() {
		fmt.Fprintf(&b, " layer[%s].max_size=%d", n, c.Layers[n].MaxSize)
	}
	return b.String()
}

// DiskBound is what the directory of a store with a global quota of
// maxSize bytes takes on disk once eviction and its reclaim have caught up,
// also after a crash (docs/quota.md, "The disk follows"): its allocated
// blocks (du) at most 10 % over the quota; its apparent size (du -b, ls)
// more by what Badger reserves for the files it writes and has not written
// yet: the memtable's log (twice the memtable) and the value-log file being
// written (twice its size). While a burst of writes has memtables waiting
// to be flushed, each has a log of its own (up to two more).
func DiskBound(maxSize int64) (allocated, apparent int64) {
	allocated = maxSize + maxSize/10
	return allocated, allocated + 2*store.MemTableSize + 2*ValueLogFileSize(maxSize)
}

// ValueLogFileSize is the size of value-log files a store with a global
// quota of maxSize bytes gets: Badger never collects the file being
// written, so it is a thirty-second of the quota (a margin the disk may
// exceed it by), between 4 and 256 MiB (Badger's default). With a
// sixteenth, bench/quotadisk measured the directory at 1.035–1.104× a
// 300 MiB quota; with a thirty-second, 1.002 (LRU).
func ValueLogFileSize(maxSize int64) int64 {
	if maxSize <= 0 {
		return 0
	}
	return min(max(maxSize/32, 4<<20), 256<<20)
}
