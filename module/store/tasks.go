package store

import (
	"encoding/binary"

	"github.com/dgraph-io/badger/v4"
)

// Task records let seeding tasks outlive a restart: the seeder writes each
// task's state and checkpoint here, in its own encoding, and reads them
// back when it starts on this store.

func taskKey(id int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagTask}, uint64(id))
}

// PutTask writes the record of task id, replacing any earlier one. It is
// synced to disk before it returns: a checkpoint that is not on disk
// protects nothing from a crash.
func (s *Badger) PutTask(id int64, record []byte) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	if err := s.space.reserve(int64(len(record)) + 64); err != nil {
		return err
	}
	err := s.write(func(txn *badger.Txn) error {
		return txn.Set(taskKey(id), record)
	})
	if err != nil {
		return err
	}
	return s.db.Sync()
}

// taskDataKey is the task's record key and a suffix: Tasks, which reads
// keys of exactly the record's length, passes it by.
func taskDataKey(id int64) []byte { return append(taskKey(id), 'D') }

// DeleteTask removes the record of task id and its data.
func (s *Badger) DeleteTask(id int64) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	return s.write(func(txn *badger.Txn) error {
		if err := txn.Delete(taskDataKey(id)); err != nil {
			return err
		}
		return txn.Delete(taskKey(id))
	})
}

// PutTaskData saves task id's unchanging data, synced like a record.
func (s *Badger) PutTaskData(id int64, data []byte) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	if err := s.space.reserve(int64(len(data)) + 64); err != nil {
		return err
	}
	if err := s.write(func(txn *badger.Txn) error { return txn.Set(taskDataKey(id), data) }); err != nil {
		return err
	}
	return s.db.Sync()
}

// TaskData reads task id's data.
func (s *Badger) TaskData(id int64) ([]byte, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(taskDataKey(id))
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}

// Tasks calls fn with every task record, by increasing id.
func (s *Badger) Tasks(fn func(id int64, record []byte) error) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte{tagTask}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != 9 {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(int64(binary.BigEndian.Uint64(k[1:])), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// EachTile calls fn with the image of every stored tile of every
// generation, for checks that nothing stored is broken.
func (s *Badger) EachTile(fn func(data []byte) error) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte{tagTile}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				t, err := decodeValue(v, nil)
				if err != nil {
					return err
				}
				return fn(t.Data)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}
