package store

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// ParamsRecorder is a store that remembers the parameter values of the
// tile sets it holds. A set is named by the hash of its values, which
// cannot be read back, and a reseed of "every stored parameter set" must
// request each set's tiles again with its values. The tile cache records
// a set's values once per process when it first stores a tile of it.
type ParamsRecorder interface {
	// RecordParams saves the canonical form of set's parameter values
	// (params.Values.Canonical).
	RecordParams(set Set, canonical string) error
	// RecordedParams reads it back; ok is false for a set never recorded
	// (stored by a version that did not record them).
	RecordedParams(set Set) (canonical string, ok bool, err error)
}

var _ ParamsRecorder = (*Badger)(nil)

// paramsKey: 'p' layer 0x00 gridset 0x00 format 0x00 params. Outside the
// layer's generations: the values of a hash never change, and a
// truncation does not make them wrong.
func paramsKey(set Set) []byte {
	k := []byte{tagParams}
	for _, s := range []string{set.Layer, set.Gridset, set.Format} {
		k = append(append(k, s...), 0)
	}
	return append(k, set.Params...)
}

// RecordParams implements ParamsRecorder.
func (s *Badger) RecordParams(set Set, canonical string) error {
	if err := checkSet(set); err != nil {
		return err
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	if err := s.space.reserve(int64(len(canonical)) + 128); err != nil {
		return err
	}
	return s.write(func(txn *badger.Txn) error { return txn.Set(paramsKey(set), []byte(canonical)) })
}

// RecordedParams implements ParamsRecorder.
func (s *Badger) RecordedParams(set Set) (string, bool, error) {
	if !s.enter() {
		return "", false, ErrClosed
	}
	defer s.leave()
	var out string
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(paramsKey(set))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { out = string(v); return nil })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false, nil
	}
	return out, err == nil, err
}
