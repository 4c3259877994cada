package store

import (
	"bytes"

	"github.com/dgraph-io/badger/v4"
)

// SetsOf lists the tile sets (format and parameter hash) a layer has stored
// in one gridset, in its current generation. Parameter values are not
// enumerable from a regex filter, so a truncation "of every parameter set"
// must ask the store what exists. It reads keys only and skips over each
// set once found, so the cost is one seek per set, not one step per tile.
func (s *Badger) SetsOf(layer, gs string) ([]Set, error) {
	gen := s.Generation(layer)
	prefix := generationPrefix(nil, layer, gen)
	prefix = append(append(prefix, gs...), 0)
	var out []Set
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); {
			rest := it.Item().Key()[len(prefix):]
			format, after, ok1 := bytes.Cut(rest, []byte{0})
			params, _, ok2 := bytes.Cut(after, []byte{0})
			if !ok1 || !ok2 {
				it.Next()
				continue
			}
			set := Set{Layer: layer, Gridset: gs, Format: string(format), Params: string(params)}
			out = append(out, set)
			// Jump past every key of this set: its prefix followed by 0xFF
			// sorts after all of them (a level byte is at most 0xFF and is
			// followed by more bytes).
			skip := setPrefix(nil, set, gen)
			it.Seek(append(skip, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF))
		}
		return nil
	})
	return out, err
}
