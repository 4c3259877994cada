package sqlitefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ncruces/go-sqlite3"
)

// The SQLite file header (https://sqlite.org/fileformat2.html): 100 bytes
// that start every database file.
const (
	headerSize  = 100
	magic       = "SQLite format 3\x00"
	offPageSize = 16 // big-endian uint16; 1 means 65536
	offChange   = 24 // file change counter
	offPages    = 28 // database size in pages, valid if offValidFor == offChange
	offValidFor = 92
)

// Open opens a file that claims to be SQLite, read-only, after checking
// what can be checked without SQLite: that it exists, is not empty, starts
// with SQLite's header and is as long as the header says. A file cut short
// (a download that stopped) is caught here rather than as "malformed" in
// the middle of an import. Every error is one line naming the file.
func Open(path string) (*sqlite3.Conn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError: one line with the name
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not an SQLite file", path)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("%s: empty file, not an SQLite file", path)
	}
	var h [headerSize]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:len(magic)]) != magic {
		return nil, fmt.Errorf("%s: not an SQLite file (no SQLite header)", path)
	}
	pageSize := int64(binary.BigEndian.Uint16(h[offPageSize:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(h[offPages:]))
	if binary.BigEndian.Uint32(h[offValidFor:]) == binary.BigEndian.Uint32(h[offChange:]) && pages > 0 {
		if want := pages * pageSize; st.Size() < want {
			return nil, fmt.Errorf("%s: truncated SQLite file: %d bytes of the %d its header gives", path, st.Size(), want)
		}
	}
	if st.Size()%pageSize != 0 {
		return nil, fmt.Errorf("%s: truncated SQLite file: %d bytes is not a whole number of %d-byte pages", path, st.Size(), pageSize)
	}
	conn, err := sqlite3.OpenFlags(path, sqlite3.OPEN_READONLY)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, oneLine(err))
	}
	// Reading the schema is the first thing SQLite does with a file; a
	// damaged one fails here.
	if _, err := Tables(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %s", path, oneLine(err))
	}
	return conn, nil
}

// Tables lists the tables and views of the database, name → "table" or
// "view".
func Tables(conn *sqlite3.Conn) (map[string]string, error) {
	st, _, err := conn.Prepare("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := map[string]string{}
	for st.Step() {
		out[st.ColumnText(0)] = st.ColumnText(1)
	}
	return out, st.Err()
}

// Columns lists a table's or view's column names in lower case.
func Columns(conn *sqlite3.Conn, table string) (map[string]bool, error) {
	st, _, err := conn.Prepare("SELECT name FROM pragma_table_info(?)")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := st.BindText(1, table); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for st.Step() {
		out[strings.ToLower(st.ColumnText(0))] = true
	}
	return out, st.Err()
}

// Missing names the columns of want that have is lacks, or "".
func Missing(have map[string]bool, want ...string) string {
	var miss []string
	for _, c := range want {
		if !have[c] {
			miss = append(miss, c)
		}
	}
	return strings.Join(miss, ", ")
}

// oneLine keeps an error on one line: the readers' errors end up in a
// task's status and a command's last line.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// OneLine is oneLine for the format packages' errors from SQLite.
func OneLine(err error) error {
	if err == nil {
		return nil
	}
	if s := oneLine(err); s != err.Error() {
		return errors.New(s)
	}
	return err
}
