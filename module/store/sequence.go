package store

import "github.com/dgraph-io/badger/v4"

// NextID returns the next number of the named sequence: positive,
// increasing, and never handed out twice, also across restarts (Badger
// leases numbers in blocks and a restart skips the rest of a block, so
// numbers may jump but never repeat).
func (s *Badger) NextID(name string) (uint64, error) {
	if !s.enter() {
		return 0, ErrClosed
	}
	defer s.leave()
	// GetSequence and a Next past the leased block write to the database.
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	seq, ok := s.seqs[name]
	if !ok {
		var err error
		seq, err = s.db.GetSequence(append([]byte{tagMeta}, "seq/"+name...), 64)
		if err != nil {
			return 0, err
		}
		if s.seqs == nil {
			s.seqs = map[string]*badger.Sequence{}
		}
		s.seqs[name] = seq
	}
	for {
		n, err := seq.Next()
		if err != nil || n > 0 { // Badger sequences start at 0; ids start at 1
			return n, err
		}
	}
}

// releaseSequences gives back the unused part of each leased block, so an
// orderly close wastes no numbers.
func (s *Badger) releaseSequences() {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	for _, seq := range s.seqs {
		seq.Release()
	}
	s.seqs = nil
}
