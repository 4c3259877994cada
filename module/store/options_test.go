package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// The options a store opens Badger with (see badgerOptions and BENCHMARKS.md,
// "Memory while seeding a million tiles"): Badger's defaults let a seeding
// Caddy's anonymous memory reach 1.2 GB.
func TestBadgerOptions(t *testing.T) {
	s := openT(t, t.TempDir())
	o := s.db.Opts()
	if o.Compression != options.None {
		t.Errorf("Compression = %v, want None: tiles are PNG/JPEG already", o.Compression)
	}
	if o.BlockCacheSize != 0 || s.db.BlockCacheMetrics() != nil {
		t.Errorf("BlockCacheSize = %d (metrics %v), want no block cache", o.BlockCacheSize, s.db.BlockCacheMetrics())
	}
	if o.IndexCacheSize != 0 {
		t.Errorf("IndexCacheSize = %d, want 0 (indexes read from the mapped tables)", o.IndexCacheSize)
	}
	if o.MemTableSize != 8<<20 || o.NumMemtables != 3 {
		t.Errorf("memtables %d × %d MiB, want 3 × 8", o.NumMemtables, o.MemTableSize>>20)
	}
	if o.NumLevelZeroTables != 10 || o.NumLevelZeroTablesStall != 20 {
		t.Errorf("L0 tables: compacted from %d, stall at %d; want 10 and 20", o.NumLevelZeroTables, o.NumLevelZeroTablesStall)
	}
	if o.BaseTableSize != 2<<20 || o.TableSizeMultiplier != 1 {
		t.Errorf("tables %d MiB × %d per level, want 2 MiB on every level", o.BaseTableSize>>20, o.TableSizeMultiplier)
	}
	if o.NumCompactors != 2 {
		t.Errorf("NumCompactors = %d, want 2", o.NumCompactors)
	}
	if o.ValueThreshold != 512 || o.ValueLogFileSize != 256<<20 {
		t.Errorf("ValueThreshold %d, ValueLogFileSize %d: want 512 and 256 MiB", o.ValueThreshold, o.ValueLogFileSize)
	}
}

// Tables are written uncompressed: highly compressible values (which Snappy
// would shrink twentyfold) take at least their own size on disk.
func TestBadgerTablesUncompressed(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	set := Set{Layer: "l", Gridset: "g", Format: "image/png", Params: ""}
	blank := make([]byte, 400) // under the value threshold: inline in the LSM tree
	var batch []Entry
	for i := range 4000 {
		batch = append(batch, Entry{Key: Key{Set: set, Z: 12, X: int64(i / 64), Y: int64(i % 64)}, Data: blank})
		if len(batch) == 200 {
			if err := s.Put(batch, time.Now()); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	release(t, s) // Close flushes the memtable into a level-0 table
	s = openT(t, dir)
	tables := s.db.Tables()
	disk, raw := tableBytes(t, dir, tables)
	if len(tables) == 0 || raw < 4000*400 {
		t.Fatalf("%d tables holding %d bytes, want the 1.6 MB written", len(tables), raw)
	}
	if disk < raw {
		t.Errorf("tables take %d bytes on disk for %d bytes of blocks: compressed", disk, raw)
	}
}

// A store written with Badger's defaults (Snappy-compressed tables, as
// every store was before) still reads after reopening without a block
// cache: each table keeps the compression its manifest entry records.
func TestBadgerReadsSnappyTables(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(512))
	if err != nil {
		t.Fatal(err)
	}
	set := Set{Layer: "l", Gridset: "g", Format: "image/png", Params: ""}
	small := bytes.Repeat([]byte("tiny"), 20)    // inline in a table
	large := bytes.Repeat([]byte("large"), 1000) // in the value log
	at := time.Unix(1_700_000_000, 0)
	err = db.Update(func(txn *badger.Txn) error {
		for i := range 4000 {
			data := small
			if i%2 == 1 {
				data = large
			}
			k := Key{Set: set, Z: 5, X: int64(i), Y: 1}
			if err := txn.Set(tileKey(nil, &k, 0), encodeValue(data, at)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // flushes the memtable: a Snappy table
		t.Fatal(err)
	}

	s := openT(t, dir)
	disk, raw := tableBytes(t, dir, s.db.Tables())
	if raw == 0 || disk >= raw {
		t.Fatalf("the default-options database wrote %d bytes of blocks in %d bytes: not compressed", raw, disk)
	}
	for i := range 4000 {
		want := small
		if i%2 == 1 {
			want = large
		}
		tile, err := s.Get(context.Background(), Key{Set: set, Z: 5, X: int64(i), Y: 1}, nil)
		if err != nil {
			t.Fatalf("tile %d: %v", i, err)
		}
		if !bytes.Equal(tile.Data, want) || !tile.StoredAt.Equal(at) {
			t.Fatalf("tile %d: %d bytes stored at %v", i, len(tile.Data), tile.StoredAt)
		}
	}
}

// tableBytes is the size of the tables' files on disk and the sum of their
// blocks' uncompressed sizes. (TableInfo.OnDiskSize counts the values in
// the value log too.)
func tableBytes(t *testing.T, dir string, tables []badger.TableInfo) (disk, raw int64) {
	t.Helper()
	for _, ti := range tables {
		fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%06d.sst", ti.ID)))
		if err != nil {
			t.Fatal(err)
		}
		disk += fi.Size()
		raw += int64(ti.UncompressedSize)
	}
	return disk, raw
}
