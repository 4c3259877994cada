package tilelist

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/tilelist/internal/gen"
)

// The benchmarks parse 10 M line files written by internal/gen (the same
// generator as cmd/tilelistgen) and report lines/s, the peak heap the parse
// added (sampled from runtime.MemStats every few milliseconds, garbage not
// yet collected included, since that is memory the process holds) and the
// size of the result. Run them with -benchtime=1x: one parse is seconds.
//
//	go test -run '^$' -bench . -benchtime 1x ./module/tilelist/

const benchLines = 10_000_000

func BenchmarkRealistic10M(b *testing.B) {
	benchParse(b, func(w io.Writer) error { return gen.Realistic(w, benchLines, 15, 1) }, 4, 4)
}

func BenchmarkRandomZ18Meta1x1(b *testing.B) {
	benchParse(b, func(w io.Writer) error { return gen.Random(w, benchLines, 18, 1) }, 1, 1)
}

func BenchmarkRandomZ18Meta4x4(b *testing.B) {
	benchParse(b, func(w io.Writer) error { return gen.Random(w, benchLines, 18, 1) }, 4, 4)
}

func benchParse(b *testing.B, write func(io.Writer) error, mw, mh int) {
	path := filepath.Join(b.TempDir(), "expire.list")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := write(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	o := opts(mercator(b))
	o.MetaW, o.MetaH = mw, mh
	var peak uint64
	var l *List
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		l = nil
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		stop, seen := sampleHeap()
		b.StartTimer()
		l, err = Parse(f, o)
		b.StopTimer()
		stop()
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if p := seen.Load(); p > base {
			peak = max(peak, p-base)
		}
		b.StartTimer()
	}
	b.StopTimer()
	rec, _ := l.MarshalBinary()
	b.ReportMetric(float64(benchLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(l.Tiles()), "tiles")
	b.ReportMetric(float64(l.Units()), "units")
	b.ReportMetric(float64(len(rec))/(1<<20), "record-MB")
	b.ReportMetric(float64(len(rec))/float64(max(l.Tiles(), 1)), "record-B/tile")
}

// sampleHeap polls HeapAlloc until stop is called and keeps the largest.
func sampleHeap() (stop func(), peak *atomic.Uint64) {
	peak = new(atomic.Uint64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	read := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > peak.Load() {
			peak.Store(ms.HeapAlloc)
		}
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() { close(done); wg.Wait(); read() }, peak
}

// BenchmarkUnitAt is the cost of a random-access lookup (a cluster node
// starting on a claimed range) in a 10 M unit list.
func BenchmarkUnitAt(b *testing.B) {
	l := randomList(b)
	b.ResetTimer()
	var i int64
	for range b.N {
		_ = l.Unit(i)
		i = (i + 7919*indexEvery + 131) % l.Units()
	}
}

// BenchmarkUnmarshal10M is the cost of resuming a task: checking and
// decoding a 10 M unit record and rebuilding its index.
func BenchmarkUnmarshal10M(b *testing.B) {
	rec, err := randomList(b).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		var l List
		if err := l.UnmarshalBinary(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rec))/(1<<20), "record-MB")
}

var (
	randomOnce sync.Once
	randomL    *List
)

func randomList(b *testing.B) *List {
	randomOnce.Do(func() {
		r, w := io.Pipe()
		go func() { w.CloseWithError(gen.Random(w, benchLines, 18, 1)) }()
		var err error
		if randomL, err = Parse(r, opts(mercator(b))); err != nil {
			b.Fatal(err)
		}
	})
	return randomL
}

// BenchmarkChildrenZ15to18 derives children: 1 M distinct random z15 tiles,
// each with its 4+16+64 children down to z18 (85 M tiles), the heaviest
// derivation the default MaxTiles allows at this size.
func BenchmarkChildrenZ15to18(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), "z15.list")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := gen.Random(f, n, 15, 2); err != nil {
		b.Fatal(err)
	}
	f.Close()
	o := opts(mercator(b))
	o.MetaW, o.MetaH, o.Children = 4, 4, 18
	var peak uint64
	var l *List
	for range b.N {
		f, _ := os.Open(path)
		l = nil
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		stop, seen := sampleHeap()
		l, err = Parse(f, o)
		stop()
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, seen.Load()-ms.HeapAlloc)
	}
	b.ReportMetric(float64(l.Tiles())*float64(b.N)/b.Elapsed().Seconds(), "tiles/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(l.Tiles()), "tiles")
	rec, _ := l.MarshalBinary()
	b.ReportMetric(float64(len(rec))/(1<<20), "record-MB")
}
