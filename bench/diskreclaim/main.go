// Command diskreclaim measures how much disk a tile store gives back after a
// layer is truncated: it fills a real Badger store (module/store, the
// options Caddy uses) with random, incompressible tiles, truncates the
// layer, waits for the old generation's reclaim, and then prints the
// directory's allocated size (what du reports) every few seconds while the
// store's value-log GC runs at -gc.
//
//	go run ./bench/diskreclaim [-tiles 43690] [-min 3000] [-max 5000] [-gc 5s] [-watch 60s] [-dir D]
//
// Output, one line per step: the step, the directory's allocated MB, the
// value-log files' MB and the number of files. The store directory is a
// new temporary one (removed at the end) unless -dir is given.
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tilecache/caddy-tilecache/module/store"
)

func main() {
	tiles := flag.Int("tiles", 43690, "tiles to store (levels 0–7 of a 1×1 root hold 21,845)")
	minSize := flag.Int("min", 3000, "smallest tile, bytes")
	maxSize := flag.Int("max", 5000, "largest tile, bytes")
	gc := flag.Duration("gc", 5*time.Second, "the store's value-log GC interval (Caddy: 5m)")
	watch := flag.Duration("watch", 60*time.Second, "how long to watch the directory after the reclaim")
	dirFlag := flag.String("dir", "", "store directory (default: a new temporary one, removed afterwards)")
	flag.Parse()
	if *minSize < 1 || *maxSize < *minSize || *tiles < 1 {
		log.Fatal("diskreclaim: want 1 ≤ -min ≤ -max and -tiles ≥ 1")
	}

	dir := *dirFlag
	if dir == "" {
		d, err := os.MkdirTemp("", "diskreclaim-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	s, err := store.Open(dir, store.Options{GCInterval: *gc})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release()

	set := store.Set{Layer: "big", Gridset: "EPSG:4326", Format: "image/png"}
	start := time.Now()
	n := 0
	for z := 0; n < *tiles; z++ {
		side := int64(1) << z
		for x := int64(0); x < side && n < *tiles; x++ {
			var entries []store.Entry
			for y := int64(0); y < side && n < *tiles; y++ {
				size := *minSize
				if *maxSize > *minSize {
					r, _ := rand.Int(rand.Reader, big.NewInt(int64(*maxSize-*minSize+1)))
					size += int(r.Int64())
				}
				data := make([]byte, size)
				rand.Read(data) // incompressible, like PNG
				entries = append(entries, store.Entry{Key: store.Key{Set: set, Z: z, X: x, Y: y}, Data: data})
				n++
			}
			if err := s.Put(entries, time.Now()); err != nil {
				log.Fatal(err)
			}
		}
	}
	report(dir, fmt.Sprintf("stored %d tiles in %v", n, time.Since(start).Round(time.Millisecond)))

	start = time.Now()
	if err := s.TruncateLayerWait("big"); err != nil {
		log.Fatal(err)
	}
	report(dir, fmt.Sprintf("truncated and reclaimed in %v", time.Since(start).Round(time.Millisecond)))

	step := *watch / 12
	if step < time.Second {
		step = time.Second
	}
	for t := step; t <= *watch; t += step {
		time.Sleep(step)
		report(dir, fmt.Sprintf("%v after the reclaim", t.Round(time.Second)))
	}
}

// report prints the directory's allocated size, in all and in value-log
// files.
func report(dir, step string) {
	var all, vlog int64
	var vlogs int
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // a file Badger removed meanwhile
		}
		b := fi.Sys().(*syscall.Stat_t).Blocks * 512
		all += b
		if strings.HasSuffix(p, ".vlog") {
			vlog += b
			vlogs++
		}
		return nil
	})
	fmt.Printf("%-36s du %6.1f MB  value log %6.1f MB in %d files\n", step+":", mb(all), mb(vlog), vlogs)
}

func mb(b int64) float64 { return float64(b) / 1e6 }
