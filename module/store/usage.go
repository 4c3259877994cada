package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Usage accounting: how many tiles and bytes each level of each tile set
// holds, always right, also right after kill -9, with no rebuild on start.
//
// Every write that adds, replaces or deletes tiles writes, in the same
// transaction, a delta record per level it changed:
//
//	'v' layer 0 gen(8) gridset 0 format 0 params 0 z(1) seq(8) → tiles, bytes (varints)
//
// so the tiles and their accounting commit together or not at all. A
// background fold adds the deltas into one total per level,
//
//	'u' layer 0 gen(8) gridset 0 format 0 params 0 z(1) → tiles, bytes (varints)
//
// and deletes them, in one transaction. Writers only ever write new delta
// keys, never read or rewrite a total, so concurrent writers never
// conflict on it; only the fold (one goroutine) rewrites totals. The
// usage of a level is its total plus its pending deltas, read in one
// snapshot. Both records carry the layer's generation, so a truncated
// generation's usage goes with its tiles (one DropPrefix each).
//
// A tile's bytes are its stored value (image and header) as Badger's
// Item.ValueSize reports it, which is what deletions and the recount can
// learn without reading the value; a Put computes the same figure for the
// value it writes (valueSize). A replaced tile counts the difference.
//
// The records are right only if every write since they were started kept
// them. Opened without usage, the store deletes the marker that says so;
// opened with usage and no marker (or an older one), it recounts every
// level from its tiles in the background (Recounting says when that is
// done) and then writes the marker.

const (
	tagUsage      = 'u'
	tagUsageDelta = 'v'
	// usageVersion changes when the records' meaning changes; records of
	// another version are recounted.
	usageVersion = 1
)

var usageMarkerKey = []byte{tagMeta, 'u', 's', 'a', 'g', 'e'}

// LevelUsage is what one level of one tile set holds.
type LevelUsage struct {
	Set   Set
	Z     int
	Tiles int64
	Bytes int64
}

// valueSize is what Badger's Item.ValueSize will report for a value of
// valueLen bytes under a key of keyLen bytes, expiring at expiresAt (Unix
// seconds, 0: never): the length itself for a value kept in the LSM tree
// (shorter than the threshold), and for one in the value log the entry's
// length less the key, the checksum and a header Badger assumes to be 6
// bytes, whereas it is 2 bytes and three varints (key length with its
// 8-byte version, value length, expiry). TestUsageValueSize checks this
// against Badger.
func valueSize(keyLen, valueLen int, threshold int64, expiresAt uint64) int64 {
	if int64(valueLen) < threshold {
		return int64(valueLen)
	}
	uv := func(n int) int {
		var b [binary.MaxVarintLen64]byte
		return binary.PutUvarint(b[:], uint64(n))
	}
	var b [binary.MaxVarintLen64]byte
	header := 2 + uv(keyLen+8) + uv(valueLen) + binary.PutUvarint(b[:], expiresAt)
	return int64(header + valueLen - 6)
}

// usageKey is the total record of a level: its tiles' zoom prefix under
// another tag.
func usageKey(tag byte, set Set, gen uint64, z int) []byte {
	k := zoomPrefix(nil, set, gen, z)
	k[0] = tag
	return k
}

// usageLevelOf returns the part of a tile key that names its level (the
// zoom prefix), or nil for a malformed key.
func usageLevelOf(tileKey []byte) []byte {
	if len(tileKey) < 1+8+8 {
		return nil
	}
	return tileKey[:len(tileKey)-8]
}

// levelDelta accumulates one transaction's change to the levels it
// touches, keyed by the level's zoom prefix.
type levelDelta map[string]*[2]int64

func (d levelDelta) add(level []byte, tiles, bytes int64) {
	e := d[string(level)]
	if e == nil {
		e = new([2]int64)
		d[string(level)] = e
	}
	e[0] += tiles
	e[1] += bytes
}

// write adds the delta records to txn.
func (d levelDelta) write(txn *badger.Txn, seq *atomic.Uint64) error {
	for level, e := range d {
		if e[0] == 0 && e[1] == 0 {
			continue
		}
		k := make([]byte, 0, len(level)+8)
		k = append(k, level...)
		k[0] = tagUsageDelta
		k = binary.BigEndian.AppendUint64(k, seq.Add(1))
		if err := txn.Set(k, encodeUsage(e[0], e[1])); err != nil {
			return err
		}
	}
	return nil
}

func encodeUsage(tiles, bytes int64) []byte {
	b := binary.AppendVarint(nil, tiles)
	return binary.AppendVarint(b, bytes)
}

func decodeUsage(v []byte) (tiles, bytes int64, err error) {
	tiles, n := binary.Varint(v)
	if n <= 0 {
		return 0, 0, errors.New("store: bad usage record")
	}
	bytes, m := binary.Varint(v[n:])
	if m <= 0 || n+m != len(v) {
		return 0, 0, errors.New("store: bad usage record")
	}
	return tiles, bytes, nil
}

// parseLevel splits a usage key (total, or delta without its seq) into its
// set, generation and level.
func parseLevel(k []byte) (set Set, gen uint64, z int, ok bool) {
	rest := k[1:]
	i := indexZero(rest)
	if i < 0 || len(rest) < i+1+8 {
		return Set{}, 0, 0, false
	}
	set.Layer = string(rest[:i])
	gen = binary.BigEndian.Uint64(rest[i+1:])
	rest = rest[i+1+8:]
	var parts [3]string
	for j := range parts {
		i = indexZero(rest)
		if i < 0 {
			return Set{}, 0, 0, false
		}
		parts[j] = string(rest[:i])
		rest = rest[i+1:]
	}
	if len(rest) != 1 {
		return Set{}, 0, 0, false
	}
	set.Gridset, set.Format, set.Params = parts[0], parts[1], parts[2]
	return set, gen, int(rest[0]), true
}

func indexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// retryConflicts runs fn until it does not fail with a transaction
// conflict: another writer committed a key fn read. Each retry reads
// afresh, and someone made progress each time; the pauses only spread
// writers that keep colliding on the same few tiles.
func retryConflicts(fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if !errors.Is(err, badger.ErrConflict) || attempt == 100 {
			return err
		}
		if attempt >= 2 {
			time.Sleep(time.Duration(rand.IntN(attempt*100)) * time.Microsecond)
		}
	}
}

// ttlRecountEvery is the shortest time between the recounts of a store
// with a tile TTL (a variable for tests).
var ttlRecountEvery = time.Minute

// usageFoldEvery is how often pending deltas are folded into totals.
const usageFoldEvery = time.Second

// usageFoldChunk bounds the deltas one fold transaction takes.
const usageFoldChunk = 2000

// startUsage runs at Open. With usage on, deltas left by an earlier run
// (kill -9) are folded, and the levels are recounted in the background if
// the records cannot be trusted; with usage off, the marker that vouches
// for the records goes, since writes will not keep them.
func (s *Badger) startUsage(on bool) error {
	if !on {
		return s.dropUsageMarker()
	}
	s.usage.Store(true)
	if err := s.foldAll(); err != nil {
		return err
	}
	trusted, err := s.usageTrusted()
	if err != nil || trusted {
		return err
	}
	// With no tile stored there is nothing to recount: the records are
	// right from the start (a new store, or one emptied).
	empty, err := s.holdsNoTiles()
	if err != nil {
		return err
	}
	if empty {
		return s.db.Update(func(txn *badger.Txn) error {
			return txn.Set(usageMarkerKey, []byte{usageVersion})
		})
	}
	s.askRecount()
	return nil
}

// SetUsage turns usage accounting on or off in an open store: a config
// reload finds the store open, as the configuration it replaces left it.
// Under the write lock no write is in flight, so every write after it is
// counted, and the recount's snapshot, taken later, holds every write
// before it.
func (s *Badger) SetUsage(on bool) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usage.Load() == on {
		return nil
	}
	s.usage.Store(on)
	if !on {
		s.recounting.Store(false)
		return s.dropUsageMarker()
	}
	s.askRecount()
	return nil
}

func (s *Badger) askRecount() {
	s.recounting.Store(true)
	select {
	case s.recountCh <- struct{}{}:
	default: // one is asked for already
	}
}

func (s *Badger) usageTrusted() (bool, error) {
	var version []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(usageMarkerKey)
		if err != nil {
			return err
		}
		version, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil && len(version) == 1 && version[0] == usageVersion, err
}

// holdsNoTiles reports whether the store has no tile and no usage record.
func (s *Badger) holdsNoTiles() (bool, error) {
	empty := true
	err := s.db.View(func(txn *badger.Txn) error {
		for _, tag := range []byte{tagTile, tagUsage, tagUsageDelta} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tag}})
			it.Rewind()
			if it.Valid() {
				empty = false
			}
			it.Close()
		}
		return nil
	})
	return empty, err
}

func (s *Badger) dropUsageMarker() error {
	return s.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(usageMarkerKey); errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		return txn.Delete(usageMarkerKey)
	})
}

// usageLoop folds deltas every second and recounts when asked, until the
// store closes, and folds once more then.
func (s *Badger) usageLoop() {
	defer s.done.Done()
	t := time.NewTicker(usageFoldEvery)
	defer t.Stop()
	// With a tile TTL, tiles expire without a write: recount every TTL
	// (at least a minute) to bring the figures back to what is there.
	var expiry <-chan time.Time
	if s.tileTTL > 0 {
		r := time.NewTicker(max(s.tileTTL, ttlRecountEvery))
		defer r.Stop()
		expiry = r.C
	}
	for {
		select {
		case <-expiry:
			if s.usage.Load() {
				s.askRecount()
			}
		case <-s.stop:
			if err := s.foldAll(); err != nil {
				s.log.Warn("folding tile usage at close", zap.Error(err))
			}
			return
		case <-s.recountCh:
			start := time.Now()
			n, err := s.recount()
			switch {
			case errors.Is(err, errStopped):
				return
			case err != nil:
				s.log.Error("recounting tile usage failed; usage stays incomplete", zap.Error(err))
			case !s.recounting.Load() && s.tileTTL > 0:
				s.log.Debug("tile usage recounted after expiries", zap.Int("levels", n), zap.Duration("took", time.Since(start)))
			case !s.recounting.Load():
				s.log.Info("tile usage recounted", zap.Int("levels", n), zap.Duration("took", time.Since(start)))
			}
		case <-t.C:
			if err := s.foldAll(); err != nil {
				s.log.Warn("folding tile usage", zap.Error(err))
			}
		}
	}
}

// foldUsage adds every pending delta into its level's total and deletes
// it, a chunk per transaction. Deltas of a generation that is no longer
// the layer's current one are deleted without a trace: its usage went
// with its truncation.
func (s *Badger) foldUsage() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	return s.foldAll()
}

// foldAll is foldUsage for the store's own goroutines, which Destruct
// waits for before it closes the database.
func (s *Badger) foldAll() error {
	for {
		more, err := s.foldChunk()
		if err != nil || !more {
			return err
		}
	}
}

func (s *Badger) foldChunk() (more bool, err error) {
	// Under the read lock: no generation changes meanwhile, and no
	// DropPrefix fails the commit.
	s.mu.RLock()
	defer s.mu.RUnlock()
	err = retryConflicts(func() (err error) {
		more, err = s.foldOnce()
		return err
	})
	return more, err
}

func (s *Badger) foldOnce() (more bool, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	sums := levelDelta{}
	n := 0
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tagUsageDelta}, PrefetchValues: false})
	var deltas [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		if n == usageFoldChunk {
			more = true
			break
		}
		item := it.Item()
		k := item.KeyCopy(nil)
		v, err := item.ValueCopy(nil)
		if err != nil {
			it.Close()
			return false, err
		}
		tiles, bytes, err := decodeUsage(v)
		if err != nil {
			it.Close()
			return false, fmt.Errorf("%w: %q", err, k)
		}
		deltas = append(deltas, k)
		n++
		level := k[:len(k)-8]
		set, gen, _, ok := parseLevel(level)
		if !ok {
			it.Close()
			return false, fmt.Errorf("%w: %q", errCorruptKey, k)
		}
		if gen != s.Generation(set.Layer) {
			continue // a truncated generation's: dropped below
		}
		total := append([]byte(nil), level...)
		total[0] = tagUsage
		sums.add(total, tiles, bytes)
	}
	it.Close()
	if n == 0 {
		return false, nil
	}
	for total, e := range sums {
		var tiles, bytes int64
		item, err := txn.Get([]byte(total))
		switch {
		case err == nil:
			v, err := item.ValueCopy(nil)
			if err != nil {
				return false, err
			}
			if tiles, bytes, err = decodeUsage(v); err != nil {
				return false, fmt.Errorf("%w: %q", err, total)
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return false, err
		}
		tiles, bytes = tiles+e[0], bytes+e[1]
		if tiles == 0 && bytes == 0 {
			err = txn.Delete([]byte(total))
		} else {
			err = txn.Set([]byte(total), encodeUsage(tiles, bytes))
		}
		if err != nil {
			return false, err
		}
	}
	for _, k := range deltas {
		if err := txn.Delete(k); err != nil {
			return false, err
		}
	}
	return more, txn.Commit()
}

// recount sets every level's total of the current generations from its
// tiles and writes the marker; it returns the levels it counted.
//
// Each level is counted in a transaction that also deletes the level's
// pending deltas and writes its total: the count is the level at that
// transaction's snapshot, which already holds the effect of every delta
// it sees, and deltas committed later are not seen, stay, and are folded
// on top. A fold that takes one of the seen deltas first makes the
// commit conflict, and the level is counted again.
func (s *Badger) recount() (int, error) {
	levels, err := s.storedLevels()
	if err != nil {
		return 0, err
	}
	for _, lv := range levels {
		if s.stopping() {
			return 0, errStopped
		}
		if !s.usage.Load() {
			return 0, nil // turned off meanwhile
		}
		if err := retryConflicts(func() error { return s.recountLevel(lv) }); err != nil {
			return 0, err
		}
	}
	// Under the read lock, so that usage is not turned off and on again
	// between the check and the marker.
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.usage.Load() || len(s.recountCh) > 0 {
		return len(levels), nil // turned off, or off and on again: not this count's to vouch for
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(usageMarkerKey, []byte{usageVersion})
	})
	if err == nil {
		s.recounting.Store(false)
	}
	return len(levels), err
}

// storedLevels lists the zoom prefixes (tile-key form) that hold tiles of
// a layer's current generation, and also those with a total or deltas, so
// that a level emptied meanwhile is set to zero.
func (s *Badger) storedLevels() ([][]byte, error) {
	seen := map[string]bool{}
	var out [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tagTile}})
		defer it.Close()
		it.Rewind()
		for it.Valid() {
			level := usageLevelOf(it.Item().Key())
			if level == nil {
				return fmt.Errorf("%w: %q", errCorruptKey, it.Item().Key())
			}
			level = append([]byte(nil), level...)
			if !seen[string(level)] {
				seen[string(level)] = true
				out = append(out, level)
			}
			// Skip to the next level: its prefix plus one.
			next := append(append([]byte(nil), level...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
			it.Seek(next)
		}
		for _, tag := range []byte{tagUsage, tagUsageDelta} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tag}})
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				if tag == tagUsageDelta {
					k = k[:len(k)-8]
				}
				level := append([]byte{tagTile}, k[1:]...)
				if !seen[string(level)] {
					seen[string(level)] = true
					out = append(out, level)
				}
			}
			it.Close()
		}
		return nil
	})
	return out, err
}

// recountLevel counts one level (a zoom prefix in tile-key form).
func (s *Badger) recountLevel(level []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	set, gen, z, ok := parseLevel(level)
	if !ok {
		return fmt.Errorf("%w: %q", errCorruptKey, level)
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	total := usageKey(tagUsage, set, gen, z)
	if gen != s.Generation(set.Layer) {
		// A truncated generation waiting for its reclaim: nothing to count.
		return nil
	}
	var tiles, bytes int64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: level})
	for it.Rewind(); it.Valid(); it.Next() {
		tiles++
		bytes += it.Item().ValueSize()
	}
	it.Close()
	dp := usageKey(tagUsageDelta, set, gen, z)
	it = txn.NewIterator(badger.IteratorOptions{Prefix: dp})
	var deltas [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		deltas = append(deltas, it.Item().KeyCopy(nil))
	}
	it.Close()
	// Read the total too, so that a fold committing meanwhile conflicts.
	if _, err := txn.Get(total); err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		return err
	}
	for _, k := range deltas {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	var err error
	if tiles == 0 {
		err = txn.Delete(total)
	} else {
		err = txn.Set(total, encodeUsage(tiles, bytes))
	}
	if err != nil {
		return err
	}
	return txn.Commit()
}

// UsageOn reports whether the store counts usage, without reading it.
func (s *Badger) UsageOn() bool { return s.usage.Load() }

// ErrUsageOff is returned by Usage for a store opened without usage
// accounting.
var ErrUsageOff = errors.New("store: usage accounting is off")

// Usage returns what every level of every tile set of the layers' current
// generations holds, sorted by set and level, read in one snapshot:
// totals plus pending deltas. recounting is true while the first count
// after usage was turned on still runs; the figures are then incomplete.
func (s *Badger) Usage() (levels []LevelUsage, recounting bool, err error) {
	if !s.usage.Load() {
		return nil, false, ErrUsageOff
	}
	if !s.enter() {
		return nil, false, ErrClosed
	}
	defer s.leave()
	byLevel := map[string]*LevelUsage{}
	err = s.db.View(func(txn *badger.Txn) error {
		for _, tag := range []byte{tagUsage, tagUsageDelta} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tag}, PrefetchValues: false})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				k := item.Key()
				if tag == tagUsageDelta {
					k = k[:len(k)-8]
				}
				set, gen, z, ok := parseLevel(k)
				if !ok {
					it.Close()
					return fmt.Errorf("%w: %q", errCorruptKey, item.Key())
				}
				if gen != s.Generation(set.Layer) {
					continue
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				tiles, bytes, err := decodeUsage(v)
				if err != nil {
					it.Close()
					return err
				}
				lu := byLevel[string(k[1:])]
				if lu == nil {
					lu = &LevelUsage{Set: set, Z: z}
					byLevel[string(k[1:])] = lu
				}
				lu.Tiles += tiles
				lu.Bytes += bytes
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	for _, lu := range byLevel {
		if lu.Tiles != 0 || lu.Bytes != 0 {
			levels = append(levels, *lu)
		}
	}
	sort.Slice(levels, func(i, j int) bool {
		a, b := levels[i], levels[j]
		if a.Set != b.Set {
			return a.Set.Layer+"\x00"+a.Set.Gridset+"\x00"+a.Set.Format+"\x00"+a.Set.Params <
				b.Set.Layer+"\x00"+b.Set.Gridset+"\x00"+b.Set.Format+"\x00"+b.Set.Params
		}
		return a.Z < b.Z
	})
	return levels, s.recounting.Load(), nil
}
