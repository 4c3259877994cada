package store

import (
	"errors"
	"sync"
	"syscall"
	"time"
)

// ErrDiskFull is returned for a write the store refuses because its disk
// is (nearly) full.
var ErrDiskFull = errors.New("store: too little free disk space; write refused")

// DefaultMinFreeSpace is the free space a store keeps on its disk.
const DefaultMinFreeSpace = 256 << 20

// Badger writes through memory-mapped files (value log, memtables): on a
// full disk such a write is not an error but a SIGBUS that kills the whole
// Caddy process. So the store refuses writes while the disk's free space
// is under a margin, and the cache goes on answering from the upstream.

// freeSpace reports the bytes available to us on dir's filesystem; tests
// replace it.
var freeSpace = func(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// spaceGuard caches the free-space reading briefly (a statfs per write
// would cost more than the write) and counts down what was written since.
type spaceGuard struct {
	mu      sync.Mutex
	dir     string
	minFree int64
	free    int64
	at      time.Time
}

func (g *spaceGuard) reserve(n int64) error {
	if g.minFree <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.at) > 200*time.Millisecond || g.free-n < g.minFree {
		f, err := freeSpace(g.dir)
		if err != nil {
			return nil // cannot tell: do not refuse on a failed statfs
		}
		g.free, g.at = f, time.Now()
	}
	if g.free-n < g.minFree {
		return ErrDiskFull
	}
	g.free -= n
	return nil
}
