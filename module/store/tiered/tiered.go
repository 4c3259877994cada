// Package tiered makes one store.Store of shared tile storage (S3), an
// optional local tier of hot tiles in front of it, and the node's own
// task records: what a cache uses when its tiles live in object storage.
package tiered

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Remote is the shared tier.
type Remote interface {
	store.Tiles
	Name() string
	Close() error
	// Version names what a layer's tiles are now; it changes when any
	// node truncates the layer or deletes a range of it, and is answered
	// from memory (s3store re-reads it every 2 s).
	Version(layer string) (string, error)
}

// Store answers from the local tier when it has the tile, else from the
// remote one, keeping what it read there locally. Writes go to both.
type Store struct {
	remote Remote
	// local is the node's Badger: its tasks always, its hot tiles when
	// hot is set.
	local *store.Badger
	hot   bool
	log   *zap.Logger
	// touch, when set, is told of every tile read (from either tier) or
	// stored: a quota over the remote tier counts uses per page with it.
	touch atomic.Pointer[func(store.Key)]
}

// SetTouch makes the store call fn with the key of every tile it reads or
// stores from now on (nil: no more). fn is on the hit path: it must be
// cheap and must not keep the key's strings beyond the call's need.
func (s *Store) SetTouch(fn func(store.Key)) {
	if fn == nil {
		s.touch.Store(nil)
		return
	}
	s.touch.Store(&fn)
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.ParamsRecorder = (*Store)(nil)
)

// Options of the local tier.
type Options struct {
	// Hot keeps tiles in the local Badger too. Its size is bounded by a
	// quota on that Badger (package quota; the cache sets it up), which
	// evicts its coldest tiles; the remote tier still has them.
	Hot bool
}

// New joins the tiers. The Store owns both: Release closes the remote
// store and gives back the Badger.
func New(remote Remote, local *store.Badger, o Options, log *zap.Logger) *Store {
	return &Store{remote: remote, local: local, hot: o.Hot, log: log}
}

// Name is the remote store's: it is what all nodes share.
func (s *Store) Name() string { return s.remote.Name() }

// Remote is the shared tier.
func (s *Store) Remote() Remote { return s.remote }

// Release closes both tiers.
func (s *Store) Release() error {
	return errors.Join(s.remote.Close(), s.local.Release())
}

// localKey is the key of k's copy in the local tier: its parameter set
// prefixed with the layer's remote version. When any node truncates the
// layer or deletes a range of it, the version changes and every node's
// copies of the layer stop being found at once (they expire by their ttl
// or go with the size bound). ok is false while the version is unknown (S3
// down before this node ever read the layer): the local tier is skipped.
func (s *Store) localKey(k store.Key) (store.Key, bool) {
	v, err := s.remote.Version(k.Layer)
	if err != nil {
		return k, false
	}
	return versioned(k, v), true
}

func versioned(k store.Key, version string) store.Key {
	k.Params = version + "/" + k.Params
	return k
}

// Get implements store.Tiles.
func (s *Store) Get(ctx context.Context, k store.Key, dst []byte) (store.Tile, error) {
	var lk store.Key
	hot := false
	if s.hot {
		lk, hot = s.localKey(k)
	}
	if hot {
		t, err := s.local.Get(ctx, lk, dst)
		if err == nil {
			if fn := s.touch.Load(); fn != nil {
				(*fn)(k)
			}
			return t, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("local tier read failed", zap.Error(err))
		}
	}
	t, err := s.remote.Get(ctx, k, dst)
	if err == nil {
		if fn := s.touch.Load(); fn != nil {
			(*fn)(k)
		}
	}
	if err != nil || !hot {
		return t, err
	}
	// The local copy keeps the remote stamp, so both tiers answer with the
	// same Last-Modified and ETag.
	if err := s.local.Put([]store.Entry{{Key: lk, Data: t.Data}}, t.StoredAt); err != nil {
		s.log.Debug("local tier write failed", zap.Error(err))
	}
	return t, nil
}

// Put implements store.Tiles. The local tier keeps the tiles even when the
// remote one fails, so this node serves them meanwhile; the remote error
// is returned, so the response says the tiles were not stored and a seed
// tries again.
func (s *Store) Put(entries []store.Entry, at time.Time) error {
	err := s.remote.Put(entries, at)
	if fn := s.touch.Load(); fn != nil {
		for i := range entries {
			(*fn)(entries[i].Key)
		}
	}
	if s.hot && len(entries) > 0 {
		// A batch is one layer's: one version for all.
		v, verr := s.remote.Version(entries[0].Key.Layer)
		if verr != nil {
			return err
		}
		local := make([]store.Entry, len(entries))
		for i, e := range entries {
			local[i] = store.Entry{Key: versioned(e.Key, v), Data: e.Data}
		}
		if lerr := s.local.Put(local, at); lerr != nil {
			s.log.Debug("local tier write failed", zap.Error(lerr))
		}
	}
	return err
}

// Has implements store.Tiles from the remote tier, which all nodes share.
func (s *Store) Has(keys []store.Key, notBefore time.Time) ([]bool, error) {
	return s.remote.Has(keys, notBefore)
}

// DeleteRange implements store.Tiles on both tiers; the count is the
// remote tier's.
func (s *Store) DeleteRange(set store.Set, z int, r gridset.Range, stop func() bool) (int64, error) {
	if s.hot {
		if lk, ok := s.localKey(store.Key{Set: set}); ok {
			if _, err := s.local.DeleteRange(lk.Set, z, r, stop); err != nil {
				return 0, err
			}
		}
	}
	// The remote deletion also changes the layer's version, which hides
	// the copies other nodes keep of these tiles.
	return s.remote.DeleteRange(set, z, r, stop)
}

// TruncateLayer implements store.Tiles on both tiers.
func (s *Store) TruncateLayer(layer string) error {
	if s.hot {
		if err := s.local.TruncateLayer(layer); err != nil {
			return err
		}
	}
	return s.remote.TruncateLayer(layer)
}

// SetsOf implements store.Tiles from the remote tier.
func (s *Store) SetsOf(layer, gridset string) ([]store.Set, error) {
	return s.remote.SetsOf(layer, gridset)
}

// NextID implements store.Tasks: task records stay on the node.
func (s *Store) NextID(sequence string) (uint64, error) { return s.local.NextID(sequence) }

// PutTask implements store.Tasks.
func (s *Store) PutTask(id int64, record []byte) error { return s.local.PutTask(id, record) }

// DeleteTask implements store.Tasks.
func (s *Store) DeleteTask(id int64) error { return s.local.DeleteTask(id) }

// PutTaskData implements store.Tasks.
func (s *Store) PutTaskData(id int64, data []byte) error { return s.local.PutTaskData(id, data) }

// TaskData implements store.Tasks.
func (s *Store) TaskData(id int64) ([]byte, error) { return s.local.TaskData(id) }

// Tasks implements store.Tasks.
func (s *Store) Tasks(fn func(id int64, record []byte) error) error { return s.local.Tasks(fn) }

// RecordParams implements store.ParamsRecorder in the remote tier, where
// every node finds them.
func (s *Store) RecordParams(set store.Set, canonical string) error {
	if r, ok := s.remote.(store.ParamsRecorder); ok {
		return r.RecordParams(set, canonical)
	}
	return nil
}

// RecordedParams implements store.ParamsRecorder.
func (s *Store) RecordedParams(set store.Set) (string, bool, error) {
	if r, ok := s.remote.(store.ParamsRecorder); ok {
		return r.RecordedParams(set)
	}
	return "", false, nil
}
