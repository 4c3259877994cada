package s3store

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// What a quota over the bucket needs (package quota/s3quota): the tiles
// with their sizes from listings (ListObjectsV2 answers 1,000 keys with
// their sizes per request: no request per tile), deletions in batches,
// and the bytes this process PUT since a moment, counted in memory.

// WrapTransport, when set before Open, wraps the store's HTTP transport
// (tests count the requests the store makes by method).
var WrapTransport func(http.RoundTripper) http.RoundTripper

// PutCounts counts the tiles and bytes PUT per layer, cumulatively, in
// memory. A PUT counts whether it created an object or replaced one (S3
// does not say which without a request more). Several stores may share
// one (a config reload opens a new store; the quota keeps its counts).
type PutCounts struct {
	mu sync.RWMutex
	m  map[string]*putCount
	// removals counts truncations and range deletions: after one, a
	// quota's figures are stale until the next listing.
	removals atomic.Int64
}

type putCount struct{ tiles, bytes atomic.Int64 }

// NewPutCounts returns empty counts.
func NewPutCounts() *PutCounts { return &PutCounts{m: map[string]*putCount{}} }

func (c *PutCounts) add(layer string, n int64) {
	c.mu.RLock()
	pc := c.m[layer]
	c.mu.RUnlock()
	if pc == nil {
		c.mu.Lock()
		if pc = c.m[layer]; pc == nil {
			pc = &putCount{}
			c.m[layer] = pc
		}
		c.mu.Unlock()
	}
	pc.tiles.Add(1)
	pc.bytes.Add(n)
}

// Snapshot returns the cumulative [tiles, bytes] PUT per layer.
func (c *PutCounts) Snapshot() map[string][2]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string][2]int64, len(c.m))
	for l, pc := range c.m {
		out[l] = [2]int64{pc.tiles.Load(), pc.bytes.Load()}
	}
	return out
}

// Removals is how many truncations and range deletions the stores made.
func (c *PutCounts) Removals() int64 { return c.removals.Load() }

// PutCounts is where the store counts its PUTs.
func (s *Store) PutCounts() *PutCounts { return s.puts.Load() }

// SetPutCounts makes the store count its PUTs into c from now on.
func (s *Store) SetPutCounts(c *PutCounts) { s.puts.Store(c) }

func (s *Store) countRemoval() {
	if c := s.puts.Load(); c != nil {
		c.removals.Add(1)
	}
}

func (s *Store) countPut(layer string, n int) {
	if c := s.puts.Load(); c != nil {
		c.add(layer, int64(n))
	}
}

// Layers lists the layers that have objects under the prefix.
func (s *Store) Layers() ([]string, error) { return s.children(s.prefix) }

// ListTiles calls fn with every tile of the current generation of layer
// (of every layer under the prefix when layer is ""), its size and its
// Last-Modified, from ListObjectsV2: one request per 1,000 tiles, no
// request per tile. ctx bounds the whole listing.
func (s *Store) ListTiles(ctx context.Context, layer string, fn func(k store.Key, size int64, modified time.Time) error) error {
	layers := []string{layer}
	if layer == "" {
		var err error
		if layers, err = s.Layers(); err != nil {
			return err
		}
	}
	for _, l := range layers {
		gen, err := s.generation(l)
		if err != nil {
			return err
		}
		gp := s.genPrefix(l, gen)
		err = s.callCtx(ctx, "list", func(context.Context) error {
			// The whole listing may take longer than one request's timeout.
			lctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for obj := range s.client.ListObjects(lctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: gp, Recursive: true, MaxKeys: 1000}) {
				if obj.Err != nil {
					return obj.Err
				}
				k, ok := parseTileKey(l, strings.TrimPrefix(obj.Key, gp))
				if !ok {
					continue
				}
				if err := fn(k, obj.Size, obj.LastModified); err != nil {
					return &fnError{err}
				}
			}
			return nil
		})
		var fe *fnError
		if errors.As(err, &fe) {
			return fe.err
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fnError carries the callback's error through callCtx, which would
// count it as a failure of S3.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// parseTileKey reads "<gridset>/<format>/<params>/<z>/<x>/<y>.<ext>".
func parseTileKey(layer, rest string) (store.Key, bool) {
	parts := strings.Split(rest, "/")
	if len(parts) < 6 {
		return store.Key{}, false
	}
	n := len(parts)
	z, err := strconv.Atoi(parts[n-3])
	if err != nil {
		return store.Key{}, false
	}
	x, y, ok := parseTail(parts[n-2] + "/" + parts[n-1])
	if !ok {
		return store.Key{}, false
	}
	format, err := formatName(parts[n-5])
	if err != nil {
		return store.Key{}, false
	}
	return store.Key{Set: store.Set{Layer: layer, Gridset: strings.Join(parts[:n-5], "/"), Format: format, Params: parts[n-4]},
		Z: z, X: x, Y: y}, true
}

// DeleteTiles deletes the tiles under keys (of their layers' current
// generations) with multi-object deletes, 1,000 keys per request, and
// reports how many keys it sent (S3 does not tell a deleted object from
// one that was not there).
func (s *Store) DeleteTiles(ctx context.Context, keys []store.Key) (int64, error) {
	names := make([]string, 0, len(keys))
	for i := range keys {
		gen, err := s.generation(keys[i].Layer)
		if err != nil {
			return 0, err
		}
		names = append(names, s.tileKey(&keys[i], gen))
	}
	return s.deleteKeys(names, func() bool { return ctx.Err() != nil })
}
