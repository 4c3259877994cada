// Command quotadisk measures a quota on a real Badger store (module/store
// with the options Caddy uses, module/quota's evictor): it seeds random,
// incompressible tiles (like PNGs) several times the quota, in metatiles
// of 4×4, while the evictor runs, and reads tiles all along.
//
//	go run ./bench/quotadisk [-quota 300] [-times 3] [-min 15000] [-max 25000] [-policy lru] [-rate 10] [-dir D]
//
// It prints the directory's allocated size (what du reports) against the
// quota, at its peak from 60 s after usage first crossed the quota and at
// the end; each eviction pass (tiles, bytes, how long it took and the disk
// reclaim in it), so the eviction rate; how long usage stayed over the
// quota each time it crossed it; the p99 of reads (hits) while no pass
// runs, while one evicts and while one reclaims; and usage as recorded
// against a recount of the tiles at the end.
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io/fs"
	"log"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
)

func main() {
	quotaMiB := flag.Int64("quota", 300, "quota, MiB")
	times := flag.Float64("times", 3, "seed this many times the quota")
	minSize := flag.Int("min", 15000, "smallest tile, bytes")
	maxSize := flag.Int("max", 25000, "largest tile, bytes")
	policy := flag.String("policy", "lru", "lru or lfu")
	vlog := flag.Int64("vlog", 0, "value-log file size, MiB (default: what tile_cache picks for the quota)")
	rate := flag.Float64("rate", 10, "seed at most this many MB/s (a MapServer on two cores renders 2–8 MB/s of tiles)")
	dirFlag := flag.String("dir", "", "store directory (default: a new temporary one, removed afterwards)")
	flag.Parse()

	dir := *dirFlag
	if dir == "" {
		d, err := os.MkdirTemp("", "quotadisk-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	q := *quotaMiB << 20
	vl := quota.ValueLogFileSize(q)
	if *vlog > 0 {
		vl = *vlog << 20
	}
	st, err := store.Open(dir, store.Options{Usage: true, ValueLogFileSize: vl})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Release()
	if err := st.SetTracking(true); err != nil {
		log.Fatal(err)
	}
	cfg := &quota.Config{MaxSize: q, Policy: quota.Policy(*policy)}
	if err := cfg.Validate(); err != nil {
		log.Fatal(err)
	}
	quota.CheckEvery = time.Hour // this program runs the passes, to time them
	ev, err := quota.Acquire(st, cfg, zap.NewNop())
	if err != nil {
		log.Fatal(err)
	}
	defer ev.Release()
	fmt.Printf("quota %d MiB, value-log files %d MiB, seeding %.1f× the quota, tiles %d–%d B, policy %s\n",
		*quotaMiB, vl>>20, *times, *minSize, *maxSize, cfg.Policy)

	set := store.Set{Layer: "big", Gridset: "EPSG:4326", Format: "image/png", Params: "default"}
	var written atomic.Int64
	var keysMu sync.Mutex
	var keys []store.Key // written, for the reader
	var evicting atomic.Bool
	var stopAll atomic.Bool

	// Reads: a tile among the last 2,000 written, all along.
	type sample struct {
		d        time.Duration
		evicting bool
		at       time.Duration
	}
	var samples []sample
	start := time.Now()
	var rd sync.WaitGroup
	rd.Add(1)
	go func() {
		defer rd.Done()
		var buf []byte
		for !stopAll.Load() {
			keysMu.Lock()
			n := len(keys)
			var k store.Key
			if n > 0 {
				k = keys[max(0, n-2000)+mrand.IntN(min(n, 2000))]
			}
			keysMu.Unlock()
			if n == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			e := evicting.Load()
			t0 := time.Now()
			t, err := st.Get(nil, k, buf)
			d := time.Since(t0)
			if err == nil {
				buf = t.Data
			}
			samples = append(samples, sample{d, e && evicting.Load(), t0.Sub(start)})
			time.Sleep(200 * time.Microsecond)
		}
	}()

	// du, all along.
	type point struct {
		at    time.Duration
		du    int64
		usage int64
	}
	var pts []point
	var ptsMu sync.Mutex
	go func() {
		for !stopAll.Load() {
			u := usageOf(st)
			ptsMu.Lock()
			pts = append(pts, point{time.Since(start), du(dir), u})
			ptsMu.Unlock()
			time.Sleep(250 * time.Millisecond)
		}
	}()

	// Passes, every 500 ms like the evictor's own loop.
	var passes []quota.Pass
	var passAt []time.Duration // when each pass began
	passDone := make(chan struct{})
	go func() {
		defer close(passDone)
		for !stopAll.Load() {
			at := time.Since(start)
			evicting.Store(true)
			p, err := ev.Enforce()
			evicting.Store(false)
			if err != nil {
				log.Fatal(err)
			}
			if p.Pages > 0 {
				passes = append(passes, p)
				passAt = append(passAt, at)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()

	// Seed: metatiles of 4×4 along rows of level 14, like a seed task.
	target := int64(float64(q) * *times)
	z := 14
	var x, y int64
	for written.Load() < target {
		entries := make([]store.Entry, 0, 16)
		for dy := int64(0); dy < 4; dy++ {
			for dx := int64(0); dx < 4; dx++ {
				data := make([]byte, *minSize+mrand.IntN(*maxSize-*minSize+1))
				rand.Read(data)
				entries = append(entries, store.Entry{Key: store.Key{Set: set, Z: z, X: x + dx, Y: y + dy}, Data: data})
				written.Add(int64(len(data)))
			}
		}
		if ahead := time.Duration(float64(written.Load())/(*rate*1e6)*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
		if err := st.Put(entries, time.Now()); err != nil {
			log.Fatal(err)
		}
		keysMu.Lock()
		for _, e := range entries {
			keys = append(keys, e.Key)
		}
		keysMu.Unlock()
		x += 4
		if x >= 1<<14 {
			x, y = 0, y+4
		}
	}
	seedTook := time.Since(start)
	fmt.Printf("seeded %d MiB in %.1f s\n", written.Load()>>20, seedTook.Seconds())
	// Let the last passes and the disk settle.
	time.Sleep(15 * time.Second)
	stopAll.Store(true)
	<-passDone
	rd.Wait()

	// Passes.
	var tiles, bytes int64
	var took, reclaim time.Duration
	for _, p := range passes {
		tiles += p.Tiles
		bytes += p.Bytes
		took += p.Took
		reclaim += p.Reclaim
	}
	fmt.Printf("passes %d: %d tiles, %d MiB evicted in %.2f s of passes (%.2f s of it giving the disk back): %.0f tiles/s with the reclaim, %.0f without\n",
		len(passes), tiles, bytes>>20, took.Seconds(), reclaim.Seconds(),
		float64(tiles)/took.Seconds(), float64(tiles)/(took-reclaim).Seconds())
	var maxTook time.Duration
	for _, p := range passes {
		maxTook = max(maxTook, p.Took)
	}
	fmt.Printf("longest pass %.3f s\n", maxTook.Seconds())

	// Over the quota: from a sample over it to the next at or under the watermark.
	ptsMu.Lock()
	defer ptsMu.Unlock()
	var firstCross time.Duration = -1
	var overFor, maxOver time.Duration
	var overSince time.Duration = -1
	for _, p := range pts {
		if p.usage > q {
			if firstCross < 0 {
				firstCross = p.at
			}
			if overSince < 0 {
				overSince = p.at
			}
		} else if overSince >= 0 {
			overFor = p.at - overSince
			maxOver = max(maxOver, overFor)
			overSince = -1
		}
	}
	fmt.Printf("usage first over the quota at %.1f s; longest time over it %.2f s (samples every 250 ms)\n", firstCross.Seconds(), maxOver.Seconds())
	var peak, peakUsage int64
	var peakAt time.Duration
	for _, p := range pts {
		if firstCross >= 0 && p.at >= firstCross+60*time.Second && p.du > peak {
			peak, peakAt, peakUsage = p.du, p.at, p.usage
		}
	}
	last := pts[len(pts)-1]
	fmt.Printf("du from 60 s after the first crossing: peak %d MiB (%.3f× the quota) at %.0f s, usage then %d MiB\n",
		peak>>20, float64(peak)/float64(q), peakAt.Seconds(), peakUsage>>20)
	var peakAll int64
	for _, p := range pts {
		peakAll = max(peakAll, p.du)
	}
	fmt.Printf("du peak over the whole run %d MiB (%.3f×); at the end %d MiB (%.3f×), usage %d MiB\n",
		peakAll>>20, float64(peakAll)/float64(q), last.du>>20, float64(last.du)/float64(q), last.usage>>20)

	// Reads.
	// A read during a pass is during its reclaim when it began in the
	// pass's last Reclaim.
	inReclaim := func(at time.Duration) bool {
		for i, p := range passes {
			end := passAt[i] + p.Took
			if p.Reclaim > 0 && at >= end-p.Reclaim && at <= end {
				return true
			}
		}
		return false
	}
	var idle, evict, reclaimR []time.Duration
	for _, s := range samples {
		switch {
		case !s.evicting:
			idle = append(idle, s.d)
		case inReclaim(s.at):
			reclaimR = append(reclaimR, s.d)
		default:
			evict = append(evict, s.d)
		}
	}
	fmt.Printf("reads: p99 %.0f µs with no pass running (%d reads); during passes %.0f µs while evicting (%d reads), %.0f µs while giving the disk back (%d reads)\n",
		p99(idle), len(idle), p99(evict), len(evict), p99(reclaimR), len(reclaimR))
	var all []time.Duration
	for _, s := range samples {
		all = append(all, s.d)
	}
	fmt.Printf("reads over the whole run: p99 %.0f µs, p99.9 %.0f µs, max %.0f µs\n", p99(all), pct(all, 999), pct(all, 1000))

	// Recorded usage against a recount.
	var n, b int64
	levels, _, _ := st.Usage()
	for _, lv := range levels {
		n += lv.Tiles
		b += lv.Bytes
	}
	counted, err := st.CountRange(set, z, gridset.Range{MinX: 0, MinY: 0, MaxX: 1<<14 - 1, MaxY: 1<<14 - 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("usage records %d tiles, %d bytes; tiles counted in the store %d\n", n, b, counted)
}

func usageOf(st *store.Badger) int64 {
	levels, _, err := st.Usage()
	if err != nil {
		return 0
	}
	var b int64
	for _, lv := range levels {
		b += lv.Bytes
	}
	return b
}

func p99(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[len(d)*99/100].Microseconds())
}

func pct(d []time.Duration, permille int) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[min(len(d)-1, len(d)*permille/1000)].Microseconds())
}

// du is the directory's allocated size, as du reports it.
func du(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}
