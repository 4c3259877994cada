package offlinetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
)

// BenchCount is the number of tiles a benchmark writes:
// OFFLINE_BENCH_TILES, or 20,000 (enough for a rate; the memory figures
// in docs/offline.md were taken with 1,000,000).
func BenchCount() int {
	if n, err := strconv.Atoi(os.Getenv("OFFLINE_BENCH_TILES")); err == nil && n > 0 {
		return n
	}
	return 20_000
}

// BenchTiles makes tiles of a realistic size (size bytes: a rendered
// 256×256 map tile is a few KB) cheaply: a real PNG signature and header,
// so that the readers' checks pass, then random bytes that start with
// the tile's number, so that no two tiles are alike and deduplication
// does not flatter the file size.
type BenchTiles struct {
	pool [][]byte
	buf  []byte
}

// NewBenchTiles prepares tiles of size bytes; size 0 mixes sizes as a
// rendered map does: a fifth of 100 bytes (flat colour), the rest 5–30 KB.
func NewBenchTiles(size int) *BenchTiles {
	var hdr bytes.Buffer
	png.Encode(&hdr, image.NewGray(image.Rect(0, 0, 256, 256)))
	head := hdr.Bytes()[:33] // signature and IHDR chunk
	r := rand.New(rand.NewPCG(7, 8))
	bt := &BenchTiles{}
	for range 256 {
		n := size
		if size == 0 {
			n = 100
			if r.IntN(5) != 0 {
				n = 5_000 + r.IntN(25_000)
			}
		}
		b := make([]byte, n)
		copy(b, head)
		for i := 33; i < n; i++ {
			b[i] = byte(r.Uint32())
		}
		bt.pool = append(bt.pool, b)
	}
	bt.buf = make([]byte, 30_000)
	return bt
}

// RenderedBenchTiles makes tiles of the sizes the cache stores for what
// a real WMS renders: the PNG files under OFFLINE_BENCH_RENDERED
// (bench/offline.sh fetches them from the MapServer upstream), decoded
// and encoded in format (a MIME type) by the cache's own encoder, each
// made distinct as NewBenchTiles's are. Without that directory the
// benchmark is skipped, saying so.
func RenderedBenchTiles(b *testing.B, format string) *BenchTiles {
	f, err := imaging.ParseFormat(format)
	if err != nil {
		b.Fatal(err)
	}
	dir := os.Getenv("OFFLINE_BENCH_RENDERED")
	if dir == "" {
		b.Skip("OFFLINE_BENCH_RENDERED is not set: bench/offline.sh fetches rendered tiles")
	}
	bt := &BenchTiles{}
	longest := 0
	var enc imaging.Encoder
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".png" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var tile bytes.Buffer
		if err := enc.Encode(&tile, img, f); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if data = tile.Bytes(); len(data) < 41 {
			return fmt.Errorf("%s: a tile of %d bytes is too short to be made distinct", path, len(data))
		}
		bt.pool = append(bt.pool, data)
		longest = max(longest, len(data))
		return nil
	})
	if err == nil && len(bt.pool) == 0 {
		err = fmt.Errorf("no .png under %s", dir)
	}
	if err != nil {
		b.Fatal(err)
	}
	bt.buf = make([]byte, longest)
	return bt
}

// Tile i, valid until the next call, and its place: level 12, column by
// column, as the cache's keys come out of the store.
func (bt *BenchTiles) Tile(i int) (gridset.Index, []byte) {
	src := bt.pool[i%len(bt.pool)]
	buf := bt.buf[:len(src)]
	copy(buf, src)
	binary.BigEndian.PutUint64(buf[33:], uint64(i))
	return gridset.Index{Z: 12, X: int64(i / 4096), Y: int64(i % 4096)}, buf
}

// Meter reports a benchmark's rate, CPU time and peak memory.
type Meter struct {
	cpu0 time.Duration
}

// StartMeter starts measuring CPU time.
func StartMeter() Meter { return Meter{cpu0: cpuTime()} }

// Report adds tiles/s (wall clock, stretched by whatever else runs on
// the machine), cpu-µs/tile (this process's own CPU time, stretched far
// less), the peak RSS of the process and the heap in use now.
func (m Meter) Report(b *testing.B, tiles int) {
	b.StopTimer()
	cpu := cpuTime() - m.cpu0
	n := float64(tiles)
	b.ReportMetric(n/b.Elapsed().Seconds(), "tiles/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/tile")
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
	b.ReportMetric(0, "ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
