package sqlitebench

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	ncruces "github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver" // database/sql "sqlite3"
	_ "modernc.org/sqlite"                   // database/sql "sqlite"
	zombie "zombiezen.com/go/sqlite"
)

// The workload: what an export of a seeded cache writes. Rendered map
// tiles are either tiny (a flat colour: open sea, empty land, ~100 bytes
// as PNG) or a few to tens of kilobytes; a fifth small is a land-heavy
// area. The bytes are random: SQLite does not compress, so only the sizes
// matter.
const (
	tileCount = 100_000
	batch     = 1000 // rows per transaction
)

type tile struct {
	z, x, y int
	data    []byte
}

// tiles makes the workload once; every driver gets the same bytes.
var tiles = func() []tile {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]tile, tileCount)
	side := 512 // 512×512 tiles a level is 262,144: the 100k fit in one
	for i := range out {
		n := 100
		if r.IntN(5) != 0 {
			n = 5_000 + r.IntN(25_000)
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		out[i] = tile{z: 9, x: i / side, y: i % side, data: b}
	}
	return out
}()

func totalBytes() int64 {
	var n int64
	for _, t := range tiles {
		n += int64(len(t.data))
	}
	return n
}

const schema = `CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row)`

// Build-time pragmas, as the writers use them: the file is a .partial
// thrown away on any failure, so neither a journal on disk nor fsyncs buy
// anything while it is being built.
var pragmas = []string{"PRAGMA journal_mode=MEMORY", "PRAGMA synchronous=OFF"}

const insertSQL = `INSERT INTO tiles VALUES (?, ?, ?, ?)`
const scanSQL = `SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles`

// driver is one way of talking to SQLite: create and fill a file, scan it.
type driver struct {
	name  string
	write func(b *testing.B, path string)
	read  func(b *testing.B, path string) int64 // bytes read
}

var drivers = []driver{
	{"modernc-databasesql", sqlWrite("sqlite"), sqlRead("sqlite")},
	{"ncruces-databasesql", sqlWrite("sqlite3"), sqlRead("sqlite3")},
	{"ncruces-direct", ncrucesWrite, ncrucesRead},
	{"zombiezen-direct", zombieWrite, zombieRead},
}

func BenchmarkInsert(b *testing.B) {
	for _, d := range drivers {
		b.Run(d.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				path := filepath.Join(b.TempDir(), "t.db")
				c0 := cpuTime()
				d.write(b, path)
				cpu += cpuTime() - c0
			}
			report(b, cpu)
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, d := range drivers {
		b.Run(d.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "t.db")
			d.write(b, path)
			var cpu time.Duration
			want := totalBytes()
			for b.Loop() {
				c0 := cpuTime()
				if got := d.read(b, path); got != want {
					b.Fatalf("read %d bytes, want %d", got, want)
				}
				cpu += cpuTime() - c0
			}
			report(b, cpu)
		})
	}
}

// report gives per-tile rates: wall time (which the machine's other load
// stretches) and this process's CPU time (which it stretches far less).
func report(b *testing.B, cpu time.Duration) {
	b.StopTimer()
	n := float64(b.N) * tileCount
	b.ReportMetric(n/b.Elapsed().Seconds(), "tiles/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/tile")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the user+system time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func sqlWrite(name string) func(*testing.B, string) {
	return func(b *testing.B, path string) {
		db, err := sql.Open(name, "file:"+path)
		must(b, err)
		defer db.Close()
		db.SetMaxOpenConns(1) // pragmas are per connection
		for _, p := range pragmas {
			_, err := db.Exec(p)
			must(b, err)
		}
		_, err = db.Exec(schema)
		must(b, err)
		for i := 0; i < len(tiles); i += batch {
			tx, err := db.Begin()
			must(b, err)
			st, err := tx.Prepare(insertSQL)
			must(b, err)
			for _, t := range tiles[i:min(i+batch, len(tiles))] {
				_, err := st.Exec(t.z, t.x, t.y, t.data)
				must(b, err)
			}
			must(b, st.Close())
			must(b, tx.Commit())
		}
	}
}

func sqlRead(name string) func(*testing.B, string) int64 {
	return func(b *testing.B, path string) int64 {
		db, err := sql.Open(name, "file:"+path+"?mode=ro")
		must(b, err)
		defer db.Close()
		rows, err := db.Query(scanSQL)
		must(b, err)
		var n int64
		var z, x, y int
		var data sql.RawBytes
		for rows.Next() {
			must(b, rows.Scan(&z, &x, &y, &data))
			n += int64(len(data))
		}
		must(b, rows.Err())
		return n
	}
}

func ncrucesWrite(b *testing.B, path string) {
	c, err := ncruces.Open(path)
	must(b, err)
	defer c.Close()
	for _, p := range pragmas {
		must(b, c.Exec(p))
	}
	must(b, c.Exec(schema))
	st, _, err := c.Prepare(insertSQL)
	must(b, err)
	defer st.Close()
	for i := 0; i < len(tiles); i += batch {
		must(b, c.Exec("BEGIN"))
		for _, t := range tiles[i:min(i+batch, len(tiles))] {
			must(b, st.BindInt(1, t.z))
			must(b, st.BindInt(2, t.x))
			must(b, st.BindInt(3, t.y))
			must(b, st.BindBlob(4, t.data))
			must(b, st.Exec())
		}
		must(b, c.Exec("COMMIT"))
	}
}

func ncrucesRead(b *testing.B, path string) int64 {
	c, err := ncruces.OpenFlags(path, ncruces.OPEN_READONLY)
	must(b, err)
	defer c.Close()
	st, _, err := c.Prepare(scanSQL)
	must(b, err)
	defer st.Close()
	var n int64
	for st.Step() {
		n += int64(len(st.ColumnRawBlob(3)))
	}
	must(b, st.Err())
	return n
}

func zombieWrite(b *testing.B, path string) {
	c, err := zombie.OpenConn(path, zombie.OpenReadWrite|zombie.OpenCreate)
	must(b, err)
	defer c.Close()
	exec := func(q string) {
		st, _, err := c.PrepareTransient(q)
		must(b, err)
		_, err = st.Step()
		must(b, err)
		must(b, st.Finalize())
	}
	for _, p := range pragmas {
		exec(p)
	}
	exec("CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)")
	exec("CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row)")
	st, err := c.Prepare(insertSQL)
	must(b, err)
	for i := 0; i < len(tiles); i += batch {
		exec("BEGIN")
		for _, t := range tiles[i:min(i+batch, len(tiles))] {
			st.BindInt64(1, int64(t.z))
			st.BindInt64(2, int64(t.x))
			st.BindInt64(3, int64(t.y))
			st.BindBytes(4, t.data)
			_, err := st.Step()
			must(b, err)
			must(b, st.Reset())
		}
		exec("COMMIT")
	}
}

func zombieRead(b *testing.B, path string) int64 {
	c, err := zombie.OpenConn(path, zombie.OpenReadOnly)
	must(b, err)
	defer c.Close()
	st, err := c.Prepare(scanSQL)
	must(b, err)
	var n int64
	for {
		row, err := st.Step()
		must(b, err)
		if !row {
			break
		}
		n += int64(st.ColumnLen(3))
	}
	return n
}

var _ = fmt.Sprint
