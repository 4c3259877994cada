// Package sqlitefile builds SQLite files that must never look complete
// before they are, and opens SQLite files of unknown origin with one-line
// errors. MBTiles and GeoPackage are both SQLite files; this is what their
// writers and readers share.
//
// A file is built under <name>.partial with the fastest settings SQLite
// has (no journal on disk, no fsync), because a file that is thrown away on
// any failure needs neither. Only Finish, after the last commit and
// SQLite's own consistency check, switches it to the ordinary rollback
// journal, syncs it and renames it to <name>. A process killed at any
// moment (kill -9, a power cut) therefore leaves either the previous
// <name> untouched or a <name>.partial, never a <name> that is cut short.
//
// The driver is github.com/ncruces/go-sqlite3: SQLite translated to Go
// (wasm2go), no cgo. docs/offline.md has the measurements that chose it.
package sqlitefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ncruces/go-sqlite3"
)

// PartialSuffix is appended to a file's name while it is being built.
const PartialSuffix = ".partial"

// Batch limits: a transaction is committed after this many rows or bytes
// of blobs, whichever comes first. Larger batches buy nothing once the
// per-commit cost is spread over a few thousand rows, and smaller ones keep
// the journal (in memory) and a failed batch small.
const (
	batchRows  = 4096
	batchBytes = 32 << 20
)

// TilePageSize is the page size of tile files: SQLite's default, which
// measured best over a rendered map's mix of tile sizes once the writers
// pack their rows (pack.go). Measured (docs/offline.md), the file over
// its tiles' bytes, 5 KB tiles / a mix of 100 B and 5–30 KB, packed:
// 4 KB pages 2.8–3.0 % / 0.75–0.84 %; 1 KB 3.1 % / 0.86 %; 8 KB 65 % /
// 1.6 %; 16 KB 9.9 % / 3.7 %; 64 KB 2.1 % / 1.3 %, and a reader then
// reads 64 KB for every tile it looks up.
const TilePageSize = 4096

// Builder is a SQLite file being written. It is not safe for concurrent
// use: one goroutine writes a file.
type Builder struct {
	conn           *sqlite3.Conn
	final, partial string
	inTx           bool
	rows, bytes    int
	done           bool
	scratch        bool // a scratch database is attached
}

// Create starts a new file that will be called path once Finish succeeds.
// A stale path.partial (from a process killed earlier) is removed: one
// writer per final name is the caller's rule. pageSize 0 keeps SQLite's
// default.
func Create(path string, pageSize int) (*Builder, error) {
	partial := path + PartialSuffix
	for _, p := range []string{partial, partial + "-journal", partial + "-wal", partial + "-shm", partial + scratchSuffix, partial + scratchSuffix + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	conn, err := sqlite3.OpenFlags(partial, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", partial, err)
	}
	b := &Builder{conn: conn, final: path, partial: partial}
	pragmas := []string{
		// The rollback journal lives in memory: appending tiles only
		// journals the few b-tree pages a batch rewrites, and a crash
		// leaves a .partial that nothing will read.
		"PRAGMA journal_mode=MEMORY",
		// No fsync while building; Finish syncs once at the end.
		"PRAGMA synchronous=OFF",
		// Only this process touches the .partial.
		"PRAGMA locking_mode=EXCLUSIVE",
	}
	if pageSize > 0 {
		// Must come before the first table.
		pragmas = append([]string{fmt.Sprintf("PRAGMA page_size=%d", pageSize)}, pragmas...)
	}
	for _, p := range pragmas {
		if err := conn.Exec(p); err != nil {
			b.Abort()
			return nil, fmt.Errorf("%s: %s: %w", partial, p, err)
		}
	}
	return b, nil
}

// Conn is the connection, for the caller's schema and statements.
func (b *Builder) Conn() *sqlite3.Conn { return b.conn }

// PartialPath is where the file is while it is being built.
func (b *Builder) PartialPath() string { return b.partial }

// Exec runs statements outside any prepared statement (schema, metadata).
func (b *Builder) Exec(sql string) error {
	if err := b.conn.Exec(sql); err != nil {
		return fmt.Errorf("%s: %w", b.partial, err)
	}
	return nil
}

// Begin opens the batch transaction if none is open. Callers call it
// before each row's statements, then Added after them.
func (b *Builder) Begin() error {
	if b.inTx {
		return nil
	}
	if err := b.conn.Exec("BEGIN"); err != nil {
		return fmt.Errorf("%s: begin: %w", b.partial, err)
	}
	b.inTx = true
	return nil
}

// Added counts a row of n blob bytes and commits the batch when it is full.
func (b *Builder) Added(n int) error {
	b.rows++
	b.bytes += n
	if b.rows < batchRows && b.bytes < batchBytes {
		return nil
	}
	return b.commit()
}

func (b *Builder) commit() error {
	b.rows, b.bytes = 0, 0
	if !b.inTx {
		return nil
	}
	b.inTx = false
	if err := b.conn.Exec("COMMIT"); err != nil {
		return fmt.Errorf("%s: commit: %w", b.partial, err)
	}
	return nil
}

// Finish commits the last batch, runs check (the format's own checks, such
// as counting rows; nil for none) and SQLite's quick_check, returns the
// file to the ordinary rollback journal so that any SQLite opens it as a
// normal portable file, syncs it, and renames it to its final name. On any
// error the .partial is removed and the final name is left as it was.
func (b *Builder) Finish(check func(*sqlite3.Conn) error) error {
	if b.done {
		return errors.New("sqlitefile: finished twice")
	}
	err := b.finish(check)
	if err != nil {
		b.Abort()
		return err
	}
	b.done = true
	return nil
}

func (b *Builder) finish(check func(*sqlite3.Conn) error) error {
	if err := b.commit(); err != nil {
		return err
	}
	if err := b.dropScratch(); err != nil {
		return err
	}
	if check != nil {
		if err := check(b.conn); err != nil {
			return fmt.Errorf("%s: %w", b.partial, err)
		}
	}
	if v, err := b.pragma("quick_check"); err != nil || v != "ok" {
		return fmt.Errorf("%s: quick_check: %q %v", b.partial, v, err)
	}
	// Leaving exclusive locking mode takes effect at the next access,
	// which the journal_mode change is.
	if err := b.conn.Exec("PRAGMA locking_mode=NORMAL"); err != nil {
		return fmt.Errorf("%s: %w", b.partial, err)
	}
	if v, err := b.pragma("journal_mode=DELETE"); err != nil || v != "delete" {
		return fmt.Errorf("%s: journal_mode=DELETE gave %q %v", b.partial, v, err)
	}
	if err := b.conn.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", b.partial, err)
	}
	b.conn = nil
	if err := syncFile(b.partial); err != nil {
		return err
	}
	if err := os.Rename(b.partial, b.final); err != nil {
		return err
	}
	// The rename itself is durable only once the directory is synced.
	return syncFile(filepath.Dir(b.final))
}

// pragma runs a PRAGMA that answers one value.
func (b *Builder) pragma(p string) (string, error) {
	st, _, err := b.conn.Prepare("PRAGMA " + p)
	if err != nil {
		return "", err
	}
	defer st.Close()
	if !st.Step() {
		if err := st.Err(); err != nil {
			return "", err
		}
		return "", errors.New("no answer")
	}
	return st.ColumnText(0), nil
}

// Abort closes the file and removes it: nothing is left under either name.
// It is safe to call after Finish failed or more than once.
func (b *Builder) Abort() error {
	if b.done {
		return nil
	}
	b.done = true
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	err := os.Remove(b.partial)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if b.scratch {
		os.Remove(b.partial + scratchSuffix)
	}
	return err
}

// scratchSuffix names the scratch database beside the .partial.
const scratchSuffix = "-scratch"

// AttachScratch attaches a database named "scratch" that lives beside the
// .partial for the build only: what the writer needs to look up while
// writing (MBTiles' image hashes) and the finished file does not. It has
// pages of pageSize bytes and a page cache of cacheKiB: random lookups in
// a large index are cheaper in small pages, and the cache bounds the
// memory it takes. Finish and Abort remove it.
func (b *Builder) AttachScratch(pageSize, cacheKiB int, schema string) error {
	st, _, err := b.conn.Prepare("ATTACH DATABASE ? AS scratch")
	if err != nil {
		return err
	}
	defer st.Close()
	st.BindText(1, b.partial+scratchSuffix)
	if err := st.Exec(); err != nil {
		return fmt.Errorf("%s: %w", b.partial+scratchSuffix, err)
	}
	b.scratch = true
	return b.Exec(fmt.Sprintf("PRAGMA scratch.page_size=%d; PRAGMA scratch.journal_mode=MEMORY; PRAGMA scratch.synchronous=OFF; PRAGMA scratch.cache_size=-%d; %s",
		pageSize, cacheKiB, schema))
}

// dropScratch detaches and removes the scratch database.
func (b *Builder) dropScratch() error {
	if !b.scratch {
		return nil
	}
	if err := b.Exec("DETACH DATABASE scratch"); err != nil {
		return err
	}
	b.scratch = false
	return os.Remove(b.partial + scratchSuffix)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Quote makes a name usable as an SQL identifier: a GeoPackage's tile
// table is named by whoever made the file.
func Quote(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
