package s3quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"time"

	"github.com/caddyserver/certmagic"
)

// Shared is where the nodes of a cluster meet: Caddy's configured storage
// (certmagic.Storage), under Prefix (tile_cache/<cluster>/quota). Every
// node writes only records named after its own ID; the listing, the
// evicted totals and the holder record are written only by the node that
// holds the evict lock.
type Shared struct {
	St     certmagic.Storage
	Prefix string
	ID     string
}

// opTimeout bounds one storage call.
const opTimeout = 10 * time.Second

func (s *Shared) key(k string) string { return path.Join(s.Prefix, k) }

func (s *Shared) load(k string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return s.St.Load(ctx, s.key(k))
}

func (s *Shared) store(k string, v []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return s.St.Store(ctx, s.key(k), v)
}

// list returns the names (last path element) of the keys right under
// sub. certmagic's file_system storage fails a listing with not-exist
// when a file it walks is renamed away meanwhile (another node writing
// its record): such a listing is done again, as module/cluster does.
func (s *Shared) list(sub string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	full := s.key(sub)
	for try := 1; ; try++ {
		keys, err := s.St.List(ctx, full, false)
		if err == nil {
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = path.Base(k)
			}
			return out, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if _, serr := s.St.Stat(ctx, full); errors.Is(serr, fs.ErrNotExist) {
			return nil, nil
		}
		if try == 8 {
			return nil, fmt.Errorf("listing %s: keys went while listed, 8 times in a row: %w", sub, err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(5 * time.Millisecond))))
	}
}

// tryLock takes the storage's lock name if it is free now (within
// lockTry), and reports whether it did.
func (s *Shared) tryLock(name string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lockTry)
	defer cancel()
	err := s.St.Lock(ctx, s.key(name))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false, nil
	}
	return false, err
}

func (s *Shared) unlock(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := s.St.Unlock(ctx, s.key(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// lockTry is how long one attempt at the evict lock waits.
const lockTry = 100 * time.Millisecond
