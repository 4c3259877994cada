package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// deleteChunk is how many keys one write batch deletes. Between chunks the
// deletion drops its read snapshot, because a Badger iterator pins every
// memtable and table it started with, and polls whether to stop. A
// variable so that tests can make chunks small enough to cross.
var deleteChunk = 10_000

var errCorruptKey = errors.New("store: malformed tile key")

// DeleteSet deletes every tile of one tile set (layer, gridset, format,
// parameter set) in the layer's current generation and reports how many it
// deleted. It reads keys only, never values, so its cost does not grow
// with the size of the images. The value-log space comes back only once
// compactions have met the deletions and told the value log (see
// truncate.go). To empty a whole layer, TruncateLayer is cheaper and gives
// the space back at once.
func (s *Badger) DeleteSet(set Set) (int64, error) {
	if err := checkSet(set); err != nil {
		return 0, err
	}
	return s.deletePrefix(setPrefix(nil, set, s.Generation(set.Layer)))
}

// DeleteRange deletes the tiles of set at level z whose column and row lie
// in r (bounds inclusive), in the layer's current generation, and reports
// how many it deleted: tiles actually stored, not the area of r.
//
// It visits only the stored keys of each column of r from row r.MinY to
// r.MaxY, and skips at once over runs of columns that hold nothing there,
// so a sparse rectangle costs what is stored, not its area. stop (may be
// nil) is polled before each column and after each chunk of deletes so
// that a cancelled truncation task ends promptly; it then returns what it
// has deleted so far and a nil error.
func (s *Badger) DeleteRange(set Set, z int, r gridset.Range, stop func() bool) (int64, error) {
	r, ok, err := checkRange(set, z, r)
	if err != nil || !ok {
		return 0, err
	}
	zp := zoomPrefix(nil, set, s.Generation(set.Layer), z)
	d := s.newDeleter(zp)
	defer d.release()
	seek := make([]byte, len(zp)+8)
	copy(seek, zp)
columns:
	for x := r.MinX; x <= r.MaxX; {
		if stop != nil && stop() {
			break
		}
		nextX, y := x+1, r.MinY
		for {
			putCell(seek, len(zp), x, y)
			it := d.iterator()
			full := false
			for it.Seek(seek); ; it.Next() {
				if !it.Valid() { // nothing stored further on at this level
					nextX = r.MaxX + 1
					break
				}
				k := it.Item().Key()
				kx, ky, ok := cellOf(k, len(zp))
				if !ok {
					return d.n, fmt.Errorf("%w: %q", errCorruptKey, k)
				}
				if kx != x { // the next stored column: skip to it
					nextX = kx
					break
				}
				if ky > r.MaxY {
					break
				}
				if d.add(k) {
					full, y = true, ky+1
					break
				}
			}
			if !full {
				break
			}
			if err := d.flush(); err != nil {
				return d.n, err
			}
			if y > r.MaxY {
				break
			}
			if stop != nil && stop() {
				break columns
			}
		}
		x = nextX
	}
	err = d.flush()
	return d.n, err
}

// CountRange counts the stored tiles of set at level z inside r (bounds
// inclusive) in the layer's current generation, reading keys only. The
// seeder uses it to skip what is already there, tests to check deletions.
func (s *Badger) CountRange(set Set, z int, r gridset.Range) (int64, error) {
	r, ok, err := checkRange(set, z, r)
	if err != nil || !ok {
		return 0, err
	}
	zp := zoomPrefix(nil, set, s.Generation(set.Layer), z)
	var n int64
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: zp})
		defer it.Close()
		seek := make([]byte, len(zp)+8)
		copy(seek, zp)
		for x := r.MinX; x <= r.MaxX; {
			putCell(seek, len(zp), x, r.MinY)
			nextX := x + 1
			for it.Seek(seek); ; it.Next() {
				if !it.Valid() {
					nextX = r.MaxX + 1
					break
				}
				k := it.Item().Key()
				kx, ky, ok := cellOf(k, len(zp))
				if !ok {
					return fmt.Errorf("%w: %q", errCorruptKey, k)
				}
				if kx != x {
					nextX = kx
					break
				}
				if ky > r.MaxY {
					break
				}
				n++
			}
			x = nextX
		}
		return nil
	})
	return n, err
}

// checkSet refuses names that would make a set's prefix match other sets'
// keys (a NUL inside a name) before anything is deleted under it.
func checkSet(set Set) error {
	for _, name := range [...]string{set.Layer, set.Gridset, set.Format, set.Params} {
		if err := CheckName(name); err != nil {
			return err
		}
	}
	return nil
}

// checkRange validates the arguments of the range operations and clips r
// to what keys can hold; ok is false when nothing is left.
func checkRange(set Set, z int, r gridset.Range) (gridset.Range, bool, error) {
	if err := checkSet(set); err != nil {
		return r, false, err
	}
	if z < 0 || z > MaxZoom {
		return r, false, fmt.Errorf("store: zoom level %d out of range 0..%d", z, MaxZoom)
	}
	r.MinX, r.MinY = max(r.MinX, 0), max(r.MinY, 0)
	r.MaxX, r.MaxY = min(r.MaxX, MaxIndex), min(r.MaxY, MaxIndex)
	return r, r.MinX <= r.MaxX && r.MinY <= r.MaxY, nil
}

func putCell(key []byte, at int, x, y int64) {
	binary.BigEndian.PutUint32(key[at:], uint32(x))
	binary.BigEndian.PutUint32(key[at+4:], uint32(y))
}

// cellOf reads column and row from a tile key whose zoom prefix is at
// bytes long.
func cellOf(k []byte, at int) (x, y int64, ok bool) {
	if len(k) != at+8 {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint32(k[at:])), int64(binary.BigEndian.Uint32(k[at+4:])), true
}

// deletePrefix deletes every key under prefix, chunk by chunk, and reports
// how many it deleted.
func (s *Badger) deletePrefix(prefix []byte) (int64, error) {
	d := s.newDeleter(prefix)
	defer d.release()
	from := prefix
	for {
		it := d.iterator()
		full := false
		for it.Seek(from); it.Valid(); it.Next() {
			if d.add(it.Item().Key()) {
				full = true
				// Resume just after the last key: seeking from the start
				// again would walk over the tombstones just written.
				last := d.keys[len(d.keys)-1]
				from = append(append(make([]byte, 0, len(last)+1), last...), 0)
				break
			}
		}
		if err := d.flush(); err != nil {
			return d.n, err
		}
		if !full {
			return d.n, nil
		}
	}
}

// deleter gathers keys found by key-only iteration and deletes them in
// write batches of deleteChunk keys.
type deleter struct {
	db     *badger.DB
	gate   *sync.RWMutex  // the store's mu, read-locked while writing
	usage  *atomic.Bool   // the store's: whether deletions are counted
	seq    *atomic.Uint64 // the store's: numbers delta records
	prefix []byte
	txn    *badger.Txn
	it     *badger.Iterator
	arena  []byte   // the gathered keys' bytes: one allocation, not one per key
	keys   [][]byte // slices of arena
	n      int64    // keys deleted so far
}

func (s *Badger) newDeleter(prefix []byte) *deleter {
	return &deleter{db: s.db, gate: &s.mu, usage: &s.usage, seq: &s.useq, prefix: prefix}
}

// iterator returns the current key-only iterator, opening one on a fresh
// snapshot after a flush.
func (d *deleter) iterator() *badger.Iterator {
	if d.it == nil {
		d.txn = d.db.NewTransaction(false)
		// PrefetchValues stays false: only keys are read, so values that
		// live in the value log are never touched.
		d.it = d.txn.NewIterator(badger.IteratorOptions{Prefix: d.prefix})
	}
	return d.it
}

// release closes the iterator and its snapshot.
func (d *deleter) release() {
	if d.it != nil {
		d.it.Close()
		d.txn.Discard()
		d.it, d.txn = nil, nil
	}
}

// add queues a copy of key for deletion and reports whether the chunk is
// full, in which case the caller must flush before going on.
func (d *deleter) add(key []byte) bool {
	if d.arena == nil {
		d.arena = make([]byte, 0, deleteChunk*(len(key)+8))
	}
	// Earlier keys keep pointing into the old array if append moves it.
	start := len(d.arena)
	d.arena = append(d.arena, key...)
	d.keys = append(d.keys, d.arena[start:len(d.arena):len(d.arena)])
	return len(d.keys) >= deleteChunk
}

// flush releases the snapshot and deletes the gathered keys.
func (d *deleter) flush() error {
	d.release()
	if len(d.keys) == 0 {
		return nil
	}
	d.gate.RLock()
	defer d.gate.RUnlock()
	if d.usage.Load() { // under the gate: usage changes under its write lock
		if err := d.deleteCounted(); err != nil {
			return err
		}
		d.keys, d.arena = d.keys[:0], nil
		return nil
	}
	wb := d.db.NewWriteBatch()
	for _, k := range d.keys {
		if err := wb.Delete(k); err != nil {
			wb.Cancel()
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	d.n += int64(len(d.keys))
	// A new arena rather than reuse: the write path may still refer to
	// the old keys' bytes for all this code knows.
	d.keys, d.arena = d.keys[:0], nil
	return nil
}

// deleteCounted deletes the gathered keys and writes what they held to
// the usage records, in one transaction: it reads each key again there,
// so a tile replaced or deleted since the iteration is counted as it is
// now (or conflicts, and the chunk is done again).
func (d *deleter) deleteCounted() error {
	return retryConflicts(func() error {
		n, err := d.deleteCountedOnce()
		d.n += n
		return err
	})
}

func (d *deleter) deleteCountedOnce() (deleted int64, err error) {
	keys := d.keys
	for len(keys) > 0 {
		went, n, err := d.deleteCountedTxn(keys)
		deleted += int64(n)
		if err != nil {
			return deleted, err
		}
		keys = keys[went:]
	}
	return deleted, nil
}

// deleteCountedTxn deletes as many of keys as one transaction holds, and
// reports how many keys it went through and how many of them it deleted
// (the others were gone already).
func (d *deleter) deleteCountedTxn(keys [][]byte) (went, deleted int, err error) {
	txn := d.db.NewTransaction(true)
	defer txn.Discard()
	delta := levelDelta{}
	// Room for the delta records of the levels a chunk spans.
	const reserve = 16
	for ; went < len(keys); went++ {
		k := keys[went]
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		size := item.ValueSize()
		if err := txn.Delete(k); errors.Is(err, badger.ErrTxnTooBig) && went > reserve {
			// Do fewer, leaving room for the delta records.
			txn.Discard()
			return d.deleteCountedTxn(keys[:went-reserve])
		} else if err != nil {
			return 0, 0, err
		}
		delta.add(usageLevelOf(k), -1, -size)
		deleted++
	}
	if err := delta.write(txn, d.seq); err != nil {
		return 0, 0, err
	}
	if err := txn.Commit(); err != nil {
		return 0, 0, err
	}
	return went, deleted, nil
}
