package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestOpenAfterAnUnstartedValueLog: a kill -9 can leave the newest value
// log file created but shorter than its 20-byte header: empty (Badger
// alone refuses to open the directory then; the store removes the file)
// or cut inside it (Badger repairs it). The store opens, and every tile
// stored before is still there.
func TestOpenAfterAnUnstartedValueLog(t *testing.T) {
	for _, size := range []int{0, 7} {
		t.Run(fmt.Sprintf("%d-bytes", size), func(t *testing.T) {
			dir := t.TempDir()
			set := Set{Layer: "l", Gridset: "g", Format: "png", Params: "p"}
			s := openT(t, dir)
			// Values over the threshold, so that they live in the value log.
			n := fill(t, s, set, 3, 0, 0, 8, 8, 2048)
			release(t, s)

			logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
			if err != nil || len(logs) == 0 {
				t.Fatalf("no value log files in %s: %v", dir, err)
			}
			slices.Sort(logs)
			var fid int
			if _, err := fmt.Sscanf(filepath.Base(logs[len(logs)-1]), "%06d.vlog", &fid); err != nil {
				t.Fatal(err)
			}
			unstarted := filepath.Join(dir, fmt.Sprintf("%06d.vlog", fid+1))
			if err := os.WriteFile(unstarted, make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
			if size == 0 {
				// What the store guards against: Badger by itself does not open it.
				if db, err := badger.Open(badgerOptions(dir, 512).WithLogger(nil)); err == nil {
					db.Close()
					t.Fatal("Badger opened a directory with an empty value log; removeEmptyValueLogs may no longer be needed")
				}
				if err := os.Truncate(unstarted, 0); err != nil { // Badger's attempt initialised it
					t.Fatal(err)
				}
			}

			s = openT(t, dir)
			// Badger starts a value log of that number for new writes: if it
			// is there, it has its header.
			if fi, err := os.Stat(unstarted); err == nil && fi.Size() < 20 {
				t.Errorf("%s is %d bytes after opening", unstarted, fi.Size())
			}
			got := 0
			for x := range int64(8) {
				for y := range int64(8) {
					tile, err := s.Get(context.Background(), Key{Set: set, Z: 3, X: x, Y: y}, nil)
					if err != nil {
						t.Fatalf("tile 3/%d/%d: %v", x, y, err)
					}
					if len(tile.Data) == 2048 {
						got++
					}
				}
			}
			if int64(got) != n {
				t.Errorf("%d of %d tiles read back", got, n)
			}
		})
	}
}
