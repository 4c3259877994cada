package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"go.uber.org/zap"
)

// Badger is a tile store in one Badger database directory.
type Badger struct {
	db   *badger.DB
	dir  string
	log  *zap.Logger
	stop chan struct{}
	done sync.WaitGroup
	// mu serialises generation changes and DropPrefix (write lock)
	// against every write (read lock): a Put that read the old generation
	// must commit before the generation moves on, or its tiles would land
	// in a generation whose reclaim may already have gone past them, and
	// leak for ever; and DropPrefix fails any write made while it runs.
	mu     sync.RWMutex
	gens   sync.Map // layer → *atomic.Uint64
	closed atomic.Bool
	// life admits operations (read lock) until the store closes: Badger's
	// calls on a closed database panic or block for ever, and a task's
	// final save may still be running when the last user lets go.
	life sync.RWMutex

	// Pending reclaims of truncated generations, oldest first; the
	// reclaimer goroutine works through them (see truncate.go).
	dropMu       sync.Mutex
	drops        []*drop
	kick         chan struct{} // capacity 1: wakes the reclaimer
	pauseReclaim atomic.Bool   // test hook: leave old generations in place

	space spaceGuard // refuses writes on a full disk (space.go)

	seqMu sync.Mutex // guards seqs (sequence.go)
	seqs  map[string]*badger.Sequence

	tileTTL time.Duration

	// Usage accounting (usage.go): on when opened with Options.Usage.
	usage      atomic.Bool   // changed only under mu's write lock
	recounting atomic.Bool   // the first count after usage was turned on runs
	recountCh  chan struct{} // capacity 1: asks the usage loop to recount
	useq       atomic.Uint64 // numbers delta records within this run

	valueThreshold int64 // Options.ValueThreshold, for valueSize

	// Access tracking (access.go): nil when off, which is all the hit
	// path pays without a quota.
	access   atomic.Pointer[accessTracker]
	indexing atomic.Bool   // pages of untracked tiles are being found
	indexCh  chan struct{} // capacity 1: asks the access loop to index
}

// Options tune a store. Zero values take the defaults.
type Options struct {
	// GCInterval is how often the value log is garbage-collected.
	GCInterval time.Duration
	// ValueThreshold: values larger than this go to the value log, which is
	// where tiles belong (1–100 KB); keys and tiny blank tiles stay in the LSM tree.
	ValueThreshold int64
	// MinFreeSpace: writes are refused (ErrDiskFull) while the disk has
	// less free space than this. Default DefaultMinFreeSpace; negative: off.
	MinFreeSpace int64
	// TileTTL, when set, makes every tile written expire after it: for a
	// local tier in front of shared storage, whose tiles may be truncated
	// by another node. Zero: tiles stay until deleted.
	TileTTL time.Duration

	// Usage keeps, in the same transaction as every tile written or
	// deleted, how many tiles and bytes each level of each tile set holds
	// (usage.go). Off, nothing is kept and writes cost what they did. With
	// TileTTL, expired tiles leave without a write, so the figures run
	// high until the next recount, which such a store runs every TTL (at
	// least every minute): right for bounding a local tier, not exact.
	Usage bool

	// ValueLogFileSize replaces the 256 MiB value-log files (at least
	// 1 MiB). Badger never collects the file being written, so with a
	// quota the files are a small share of it (package quota); tests use
	// it to see several files with a few MB of tiles. It takes effect when
	// the directory is opened, not on a reload of an open store.
	ValueLogFileSize int64
}

// pool shares one open database per directory within the process, so a
// Caddy config reload, which provisions the new handlers before it cleans
// up the old ones, neither opens a directory twice (Badger forbids it) nor
// closes it under requests still running.
var pool = caddy.NewUsagePool()

// opens counts databases opened in this process: a config reload must not
// add to it (exported as a metric; tests check it).
var opens atomic.Uint64

// Opens is how many times a store directory was opened in this process.
func Opens() uint64 { return opens.Load() }

// Open returns the store for dir, opening it on first use with opts; a
// later Open of an open store shares it as it is (SetUsage changes usage
// accounting then). Each Open must be paired with one Release.
func Open(dir string, opts Options) (*Badger, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	v, _, err := pool.LoadOrNew(abs, func() (caddy.Destructor, error) {
		return open(abs, opts)
	})
	if err != nil {
		return nil, err
	}
	return v.(*Badger), nil
}

// Release gives back one use of the store; the last one closes it.
func (s *Badger) Release() error {
	_, err := pool.Delete(s.dir)
	return err
}

// Dir is the store's absolute directory.
func (s *Badger) Dir() string { return s.dir }

// Name implements Store: the directory identifies a Badger store.
func (s *Badger) Name() string { return s.dir }

func open(dir string, o Options) (*Badger, error) {
	if o.GCInterval <= 0 {
		o.GCInterval = 5 * time.Minute
	}
	if o.ValueThreshold <= 0 {
		o.ValueThreshold = 512
	}
	if o.MinFreeSpace == 0 {
		o.MinFreeSpace = DefaultMinFreeSpace
	}
	log := caddy.Log().Named("tile_cache.store").With(zap.String("dir", dir))
	bo := badgerOptions(dir, o.ValueThreshold)
	if o.ValueLogFileSize > 0 {
		bo = bo.WithValueLogFileSize(max(o.ValueLogFileSize, 1<<20))
	}
	if err := removeEmptyValueLogs(dir, log); err != nil {
		return nil, fmt.Errorf("opening tile store %s: %w", dir, err)
	}
	db, err := badger.Open(bo.WithLogger(badgerLogger{log.Sugar()}))
	if err != nil {
		return nil, fmt.Errorf("opening tile store %s: %w", dir, err)
	}
	opens.Add(1)
	s := &Badger{db: db, dir: dir, log: log, stop: make(chan struct{}), kick: make(chan struct{}, 1),
		space: spaceGuard{dir: dir, minFree: o.MinFreeSpace}, tileTTL: o.TileTTL, valueThreshold: o.ValueThreshold}
	if err := s.loadGenerations(); err != nil {
		db.Close()
		return nil, err
	}
	// Truncations whose reclaim a shutdown or crash interrupted resume now,
	// in the background like any other.
	if err := s.loadDrops(); err != nil {
		db.Close()
		return nil, err
	}
	s.recountCh = make(chan struct{}, 1)
	s.indexCh = make(chan struct{}, 1)
	if err := s.startUsage(o.Usage); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening tile store %s: usage records: %w", dir, err)
	}
	s.done.Add(4)
	go s.usageLoop()
	go s.accessLoop()
	go s.gcLoop(o.GCInterval)
	go s.reclaimLoop()
	log.Info("tile store opened")
	return s, nil
}

// removeEmptyValueLogs deletes empty value log files. Badger creates a
// value log file, sizes it and then writes its header; a kill -9 between
// the first two steps leaves an empty file that holds no value (nothing
// refers to it), but which Badger 4.9 will not open again: it initialises
// the file and then returns that as the error "Open existing file: …
// Create a new file", so the cache would never start again. Seen on a
// loaded machine after one of the kill -9s of caddytest's
// TestQuotaSurvivesKills. (A file cut inside its header Badger opens and
// repairs itself.)
func removeEmptyValueLogs(dir string, log *zap.Logger) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return err
	}
	for _, p := range logs {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Size() != 0 {
			continue
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		log.Warn("removed an empty value log file a crash left", zap.String("file", filepath.Base(p)))
	}
	return nil
}

// badgerOptions are the Badger options of a tile store in dir. Badger's
// defaults suit a database of small, compressible records with memory to
// spare; a tile store holds images that are already compressed, inside a
// Caddy process. With the defaults, seeding 4 million tiny tiles (16 px,
// ~70 bytes, inline in the LSM tree) took Caddy's anonymous memory to
// 1.26–1.54 GB; with these, 253–261 MB, and 1 million 64-px tiles (in
// the value log) 105 instead of 535–563 MB. Each number below comes from
// bench/truncate.sh; see BENCHMARKS.md, "Memory while seeding".
//
// Where the memory went (heap profiles during the seeds): almost all of it
// is Go heap that Badger allocates in big slices. Each memtable is an arena
// allocated whole; every table written (memtable flushes, compactions) is
// built in a z.Allocator whose buffers double as the table grows, and
// Badger keeps up to 8 used allocators in a pool that only gives one back
// after 2 s without any table being built, which never happens while
// seeding. Go's GC then lets the heap grow to twice what is live.
// MemTableSize is the size of Badger's memtables here (see
// badgerOptions). Each has a log on disk that Badger sizes at twice this
// when it opens it: space a directory's apparent size (du -b) counts and
// its allocated size (du) does not, until written.
const MemTableSize = 8 << 20

func badgerOptions(dir string, valueThreshold int64) badger.Options {
	bo := badger.DefaultOptions(dir).
		// Values over 512 bytes (every real tile) go to the value log and
		// leave 12-byte pointers in the LSM tree; blank and tiny tiles stay
		// inline. Left as it was: with the options below even a store of
		// only inline tiles (16 px) stayed under 300 MB while seeding, and
		// a lower threshold would cost each hit on a tiny tile a read from
		// the value log.
		WithValueThreshold(valueThreshold).
		// Smaller value-log files let GC reclaim space from truncated
		// layers sooner; tiles are small, so 256 MiB still holds thousands.
		WithValueLogFileSize(256 << 20).
		// No compression. PNG and JPEG do not compress again; the keys and
		// the fixed PNG headers of tiny inline tiles do (Snappy halved the
		// LSM tree of 4 M 16-px tiles: 376 MB on disk against 720 MB), but
		// with Snappy and a 32 MiB block cache the same seed kept a median
		// of 462 MB of anonymous memory (max 580) against ~190 (max 240):
		// each builder compresses on 2×NumCPU goroutines of its own, and
		// every block a compaction reads is decompressed into a new buffer.
		// For real tiles (value log) the store's size on disk is the same
		// either way. Existing tables keep the compression their manifest
		// entry records and are read as before until compactions rewrite
		// them (TestBadgerReadsSnappyTables).
		WithCompression(options.None).
		// No block cache: without compression or encryption Badger reads a
		// table block straight from the memory-mapped file, the kernel's page
		// cache, so the cache (default 256 MiB of Go heap) would only copy
		// it. Badger requires one only with compression or encryption.
		// Indexes and bloom filters are read from the mapped files as well
		// (IndexCacheSize 0, the default).
		WithBlockCacheSize(0).
		// Memtables of 8 MiB, not 64. An arena is MemTableSize + 30 %,
		// allocated whole, and a flush builds the L0 table in an allocator
		// of about twice the memtable (buffers of 4 + 8 + 16 MiB for a
		// 16 MiB one, in the profiles) that then stays in Badger's pool:
		// ~120 MiB per pooled allocator at 64 MiB. 4 M tiny tiles: 16 MiB
		// memtables kept a median of 261 MB and peaked at 430; 8 MiB 176–190,
		// peaks 237–259. A transaction may hold 15 % of a memtable (1.2 MiB,
		// count 13,000 entries): the store's largest, a 16×16 metatile, is
		// 256 entries of at most ~600 bytes (tiles in the value log count
		// their 12-byte pointer).
		WithMemTableSize(MemTableSize).
		// Three memtables (one taking writes, two waiting to be flushed)
		// instead of five: flushing 8 MiB takes a fraction of a second.
		WithNumMemtables(3).
		// Two compactors (Badger's minimum: compactor 0 serves L0) instead of
		// four: at most two compactions' builders at once, on a machine whose
		// cores also encode tiles and answer visitors.
		WithNumCompactors(2).
		// Small memtables make small L0 tables, and each L0 → base-level
		// compaction rewrites the overlapping base-level tables (a seed
		// writes all over the key range: keys run by column, metatiles by
		// row). Letting 10 tables (80 MiB) gather before compacting them,
		// rather than 5, batches that work: 4 M tiny tiles seeded at
		// 58,300–63,700 tiles/s instead of 55,900 on a quiet machine,
		// memory the same (Badger's defaults: 75,600, but still compacting
		// long after). Writes stall at 20 L0 tables (default 15). Reads
		// check one bloom filter per L0 table, in mapped memory.
		WithNumLevelZeroTables(10).
		WithNumLevelZeroTablesStall(20)
	// Every table of every level 2 MiB (BaseTableSize, the default), not
	// doubling per level below the base level (8 MiB at the last level for
	// a million tiny tiles, 16 and more as the store grows). A compaction
	// builds each table in an allocator of twice the table's size and may
	// have 8 + (up to 5 splits) of them in flight, and those allocators
	// feed the pool; 2 MiB tables bound that at ~50 MiB per compaction, at
	// the price of more, smaller table files (~500 per GB of LSM tree).
	bo.TableSizeMultiplier = 1
	return bo
}

// Destruct closes the database; the usage pool calls it after the last Release.
func (s *Badger) Destruct() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	s.done.Wait()
	s.life.Lock() // every admitted operation has finished; none is admitted now
	defer s.life.Unlock()
	s.releaseSequences()
	err := s.db.Close()
	s.log.Info("tile store closed", zap.Error(err))
	return err
}

// enter admits an operation on the database unless the store is closed;
// the caller calls leave when done.
func (s *Badger) enter() bool {
	s.life.RLock()
	if s.closed.Load() {
		s.life.RUnlock()
		return false
	}
	return true
}

func (s *Badger) leave() { s.life.RUnlock() }

// gcLoop reclaims value-log space: every rewrite of a tile and every
// truncation leaves garbage there that Badger only frees on request.
func (s *Badger) gcLoop(every time.Duration) {
	defer s.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if n := s.collectGarbage(); n > 0 {
				s.log.Debug("value log GC", zap.Int("files_rewritten", n))
			}
		}
	}
}

// maxGCRounds bounds one collection: each round rewrites one value-log
// file (up to 256 MiB), and the store may be closing.
const maxGCRounds = 64

// collectGarbage rewrites the value-log files that are at least half
// garbage, one after another, until none is left or the store closes, and
// reports how many it rewrote. Badger never rewrites the file being
// written, so up to one file of garbage stays.
func (s *Badger) collectGarbage() int {
	n := 0
	for n < maxGCRounds && !s.stopping() && s.db.RunValueLogGC(0.5) == nil {
		n++
	}
	return n
}

// write runs fn in a read-write transaction, under the read lock of s.mu
// that a DropPrefix's write lock excludes (see truncate.go).
func (s *Badger) write(fn func(txn *badger.Txn) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.Update(fn)
}

func (s *Badger) loadGenerations() error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tagGeneration}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			layer := string(item.Key()[1:])
			err := item.Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("store: bad generation record for layer %q", layer)
				}
				g := new(atomic.Uint64)
				g.Store(binary.BigEndian.Uint64(v))
				s.gens.Store(layer, g)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Generation is the layer's current generation: the only one whose tiles
// are visible.
func (s *Badger) Generation(layer string) uint64 {
	if g, ok := s.gens.Load(layer); ok {
		return g.(*atomic.Uint64).Load()
	}
	return 0
}

// Get implements Store.
// ctx is ignored: a local read takes microseconds.
func (s *Badger) Get(_ context.Context, k Key, dst []byte) (Tile, error) {
	if !s.enter() {
		return Tile{}, ErrClosed
	}
	defer s.leave()
	var kb [128]byte
	key := tileKey(kb[:0], &k, s.Generation(k.Layer))
	var t Tile
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var err error
			t, err = decodeValue(v, dst)
			return err
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Tile{}, ErrNotFound
	}
	if a := s.access.Load(); a != nil && err == nil {
		a.touch(k)
	}
	return t, err
}

// Put implements Store: one transaction when the batch fits in one, which
// a metatile always does, so a metatile is stored whole or not at all.
func (s *Badger) Put(entries []Entry, at time.Time) error {
	if len(entries) == 0 {
		return nil
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	var size int64
	for i := range entries {
		size += int64(len(entries[i].Data)) + headerLen + 128
	}
	if err := s.space.reserve(size); err != nil {
		return err
	}
	s.mu.RLock() // no generation change between reading it and committing
	defer s.mu.RUnlock()
	gen := s.Generation(entries[0].Key.Layer)
	// With usage, a Put reads the tiles it replaces; another Put of the
	// same tiles committing first is a conflict, and this one reads them
	// again.
	return retryConflicts(func() error { return s.put(entries, at, gen) })
}

func (s *Badger) put(entries []Entry, at time.Time, gen uint64) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	var delta levelDelta
	var inBatch map[string]int64 // counted size of each key written so far
	// One expiry for the batch, set here rather than by Entry.WithTTL so
	// that the size counted for each tile is the one Badger will report.
	var expires uint64
	if s.tileTTL > 0 {
		expires = uint64(time.Now().Add(s.tileTTL).Unix())
	}
	if s.usage.Load() {
		delta = levelDelta{}
		inBatch = make(map[string]int64, len(entries))
	}
	for i := range entries {
		e := &entries[i]
		if e.Key.Layer != entries[0].Key.Layer {
			return errors.New("store: one batch holds one layer")
		}
		key := tileKey(nil, &e.Key, gen)
		value := encodeValue(e.Data, at)
		if delta != nil {
			size := valueSize(len(key), len(value), s.valueThreshold, expires)
			tiles, bytes := int64(1), size
			// A key twice in one batch: Badger reports no size for a
			// write pending in the transaction.
			if prev, twice := inBatch[string(key)]; twice {
				tiles, bytes = 0, size-prev
			} else if item, err := txn.Get(key); err == nil {
				tiles, bytes = 0, size-item.ValueSize()
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			inBatch[string(key)] = size
			delta.add(usageLevelOf(key), tiles, bytes)
		}
		entry := badger.NewEntry(key, value)
		entry.ExpiresAt = expires
		if err := txn.SetEntry(entry); err != nil {
			return err
		}
	}
	if delta != nil {
		if err := delta.write(txn, &s.useq); err != nil {
			return err
		}
	}
	if s.access.Load() != nil {
		if err := touchPages(txn, entries, gen, at.Unix()); err != nil {
			return err
		}
	}
	return txn.Commit()
}

// Size is the database's size on disk (LSM tree and value log), as Badger
// last measured it (about once a minute).
func (s *Badger) Size() int64 {
	if !s.enter() {
		return 0
	}
	defer s.leave()
	lsm, vlog := s.db.Size()
	return lsm + vlog
}

// Has implements Store.
func (s *Badger) Has(keys []Key, notBefore time.Time) ([]bool, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	out := make([]bool, len(keys))
	err := s.db.View(func(txn *badger.Txn) error {
		var kb [128]byte
		for i := range keys {
			item, err := txn.Get(tileKey(kb[:0], &keys[i], s.Generation(keys[i].Layer)))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			// The stamp sits in the value's header, so read the value; the
			// header is what is needed, yet Badger hands the whole value.
			err = item.Value(func(v []byte) error {
				if len(v) < headerLen {
					return errCorrupt
				}
				out[i] = !time.Unix(0, int64(binary.BigEndian.Uint64(v[1:]))).Before(notBefore)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// badgerLogger sends Badger's own log lines to Caddy's logger. Badger is
// chatty at INFO about routine compactions, so those go to DEBUG.
type badgerLogger struct{ l *zap.SugaredLogger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Errorf(f, a...) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warnf(f, a...) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debugf(f, a...) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Debugf(f, a...) }
