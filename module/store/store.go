// Package store keeps a tile cache's tiles and its seeding tasks. Store is
// what the rest of the plugin uses; Badger, an embedded database per
// directory, is its implementation.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// ErrNotFound is returned by Get for a tile that is not stored.
var ErrNotFound = errors.New("store: tile not found")

// ErrUnavailable is wrapped by the errors of a store that refuses calls
// for a while because its storage is down (a remote store's breaker). A
// seed waits for it to come back rather than counting failures.
var ErrUnavailable = errors.New("store: storage unavailable")

// Store is everything the tile handler, the seeder and the REST interface
// ask of tile storage. Nothing outside this package names a concrete store,
// so another kind of storage plugs in here.
type Store interface {
	Tiles
	Tasks
	// Name identifies the storage (a directory) in logs, and tells the
	// seeder that a reload pointed a cache at other storage.
	Name() string
	// Release gives back this use of the store; the last use closes it.
	Release() error
}

// Tiles is the tile half of a Store.
type Tiles interface {
	// Get returns the tile under k, its image appended to dst[:0]. The key
	// is passed by value: a pointer through the interface would escape, and
	// cost the hit path an allocation. ctx is the visitor's request: a
	// remote store stops asking for a tile nobody waits for any more (a
	// flood of requests hung up on must not become a flood of requests
	// to S3); a local one may ignore it.
	Get(ctx context.Context, k Key, dst []byte) (Tile, error)
	// Put stores the entries atomically where it can (one metatile is one
	// batch), all stamped with the same time.
	Put(entries []Entry, at time.Time) error
	// Has reports which of the keys are stored no earlier than notBefore,
	// without reading their images.
	Has(keys []Key, notBefore time.Time) ([]bool, error)
	// DeleteRange deletes the tiles of set at level z inside r and reports
	// how many there were; stop (may be nil) is polled to end it early.
	DeleteRange(set Set, z int, r gridset.Range, stop func() bool) (int64, error)
	// TruncateLayer hides every tile of the layer at once, whatever their
	// number; their space is reclaimed later.
	TruncateLayer(layer string) error
	// SetsOf lists the tile sets (format, parameters) a layer has stored
	// in one gridset.
	SetsOf(layer, gridset string) ([]Set, error)
}

// Tasks is where the seeder keeps its tasks, so they survive restarts.
type Tasks interface {
	// NextID returns the next number of the named sequence: never one
	// handed out before, also across restarts.
	NextID(sequence string) (uint64, error)
	// PutTask saves a task's record under its id, replacing any earlier one.
	PutTask(id int64, record []byte) error
	// DeleteTask forgets a task's record and its data.
	DeleteTask(id int64) error
	// PutTaskData saves what a task needs besides its record and never
	// changes (a tile list): written once, not with every checkpoint.
	PutTaskData(id int64, data []byte) error
	// TaskData reads it back.
	TaskData(id int64) ([]byte, error)
	// Tasks calls fn with every saved task record, by id.
	Tasks(fn func(id int64, record []byte) error) error
}

var _ Store = (*Badger)(nil)

// UsageReporter is a store that counts what its tile sets hold (the
// Badger store opened with Options.Usage; usage.go).
type UsageReporter interface {
	// Usage returns every non-empty level of every tile set, and whether
	// the first count after accounting was turned on still runs (the
	// figures are then incomplete). ErrUsageOff: accounting is off.
	Usage() (levels []LevelUsage, recounting bool, err error)
	// UsageOn reports whether usage is counted, without reading it.
	UsageOn() bool
}

var _ UsageReporter = (*Badger)(nil)
