package sqlitefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
)

func TestFinishReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	if err := os.WriteFile(path, []byte("the previous file"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Create(path, TilePageSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Exec("CREATE TABLE t (v)"); err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		if err := b.Begin(); err != nil {
			t.Fatal(err)
		}
		if err := b.Exec("INSERT INTO t VALUES (randomblob(100))"); err != nil {
			t.Fatal(err)
		}
		if err := b.Added(100); err != nil {
			t.Fatal(i, err)
		}
	}
	if old, _ := os.ReadFile(path); string(old) != "the previous file" {
		t.Fatal("the previous file changed before Finish")
	}
	// A check that fails: the .partial goes, the previous file stays.
	if err := b.Finish(func(*sqlite3.Conn) error { return errors.New("short by one") }); err == nil || !strings.Contains(err.Error(), "short by one") {
		t.Fatalf("failed check: %v", err)
	}
	if old, _ := os.ReadFile(path); string(old) != "the previous file" {
		t.Error("a failed Finish touched the previous file")
	}
	if _, err := os.Stat(path + PartialSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Error("a failed Finish left the .partial")
	}

	b, err = Create(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Exec("CREATE TABLE t (v); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(nil); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.Prepare("PRAGMA journal_mode")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Step() || st.ColumnText(0) != "delete" {
		t.Errorf("journal_mode %q: not a normal rollback-journal file", st.ColumnText(0))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left beside the file: %v", ents)
	}
}

// TestDamaged: a file whose pages are overwritten in the middle fails in
// one line, on Open or when read, and never panics.
func TestDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	b, err := Create(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Exec("CREATE TABLE t (v); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(3000) FROM n"); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, at := range []int{4096, len(data) / 2} { // the schema's page, a page of rows
		bad := append([]byte(nil), data...)
		for i := at; i < at+4096; i++ {
			bad[i] = 0xA5
		}
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		err := func() error {
			c, err := Open(path)
			if err != nil {
				return err
			}
			defer c.Close()
			st, _, err := c.Prepare("SELECT length(v) FROM t")
			if err != nil {
				return err
			}
			defer st.Close()
			for st.Step() {
			}
			return st.Err()
		}()
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("damage at %d: %v", at, err)
		}
	}
}
