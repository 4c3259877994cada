// Command replay sends a list of GET URLs, N at a time, in list order, and
// reports the wall time and the sizes of the answers. Standard library only.
// bench/seeding.sh uses it twice: to replay the seeder's metatile GetMaps
// straight at MapServer (with -slice, which also re-encodes the metatiles'
// tiles with Go's png encoder), and to fetch every seeded tile back through
// the cache (with -header to check they were all hits). bench/peers.sh
// also saves the answers (-save) to read the stored tiles' sizes and types.
//
//	replay -urls FILE [-c 2] [-slice 256x256] [-header geowebcache-cache-result=HIT] [-save DIR]
//
// It prints one line of key=value pairs:
//
//	requests ok wall_s req_per_s bytes mean_bytes p50_ms p90_ms max_ms
//	[header_mismatch] [tiles go_png_bytes go_png_mean]
//
// and exits 1 when any answer is not HTTP 200 (or, with -header, lacks the
// header value). The -slice work happens after the timed part.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	urlsFile := flag.String("urls", "", "file with one URL per line")
	conc := flag.Int("c", 2, "requests in flight")
	slice := flag.String("slice", "", "WxH: cut every answer into tiles of WxH and encode each with Go's png (default compression)")
	header := flag.String("header", "", "NAME=VALUE every answer must carry")
	timeout := flag.Duration("timeout", 120*time.Second, "per request")
	agent := flag.String("agent", "tilecache-bench-replay", "User-Agent sent (tells replayed requests apart in access logs)")
	save := flag.String("save", "", "DIR: write answer i (from 1, in list order) to DIR/i.png, after the timed part")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("replay: ")

	f, err := os.Open(*urlsFile)
	if err != nil {
		log.Fatal(err)
	}
	var urls []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if u := strings.TrimSpace(sc.Text()); u != "" {
			urls = append(urls, u)
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	if len(urls) == 0 {
		log.Fatal("no URLs")
	}
	var tw, th int
	if *slice != "" {
		w, h, ok := strings.Cut(*slice, "x")
		tw, _ = strconv.Atoi(w)
		th, _ = strconv.Atoi(h)
		if !ok || tw < 1 || th < 1 {
			log.Fatalf("bad -slice %q", *slice)
		}
	}
	hName, hValue, _ := strings.Cut(*header, "=")

	client := &http.Client{
		Timeout:   *timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: *conc, DisableCompression: true},
	}
	bodies := make([][]byte, len(urls))
	lat := make([]time.Duration, len(urls))
	var next, ok, mismatch, bytesTotal atomic.Int64
	var failMu sync.Mutex
	var failures []string
	fail := func(s string) {
		failMu.Lock()
		if len(failures) < 5 {
			failures = append(failures, s)
		}
		failMu.Unlock()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(urls) {
					return
				}
				t0 := time.Now()
				req, err := http.NewRequest(http.MethodGet, urls[i], nil)
				if err != nil {
					fail(err.Error())
					continue
				}
				req.Header.Set("User-Agent", *agent)
				resp, err := client.Do(req)
				if err != nil {
					fail(err.Error())
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusOK {
					fail(fmt.Sprintf("%s: HTTP %d %v", urls[i], resp.StatusCode, err))
					continue
				}
				if hName != "" && resp.Header.Get(hName) != hValue {
					mismatch.Add(1)
					fail(fmt.Sprintf("%s: %s: %q", urls[i], hName, resp.Header.Get(hName)))
				}
				ok.Add(1)
				bytesTotal.Add(int64(len(body)))
				if tw > 0 || *save != "" {
					bodies[i] = body
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)

	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	pct := func(p float64) float64 {
		return float64(sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]) / 1e6
	}
	n := len(urls)
	fmt.Printf("requests=%d ok=%d wall_s=%.3f req_per_s=%.2f bytes=%d mean_bytes=%.1f p50_ms=%.1f p90_ms=%.1f max_ms=%.1f",
		n, ok.Load(), wall.Seconds(), float64(n)/wall.Seconds(), bytesTotal.Load(),
		float64(bytesTotal.Load())/float64(max(1, ok.Load())), pct(0.5), pct(0.9), pct(1))
	if hName != "" {
		fmt.Printf(" header_mismatch=%d", mismatch.Load())
	}
	if tw > 0 {
		tiles, total, err := reencode(bodies, tw, th)
		if err != nil {
			fmt.Println()
			log.Fatal(err)
		}
		fmt.Printf(" tiles=%d go_png_bytes=%d go_png_mean=%.1f", tiles, total, float64(total)/float64(max(1, tiles)))
	}
	fmt.Println()
	if *save != "" {
		if err := os.MkdirAll(*save, 0o755); err != nil {
			log.Fatal(err)
		}
		for i, b := range bodies {
			if b != nil {
				if err := os.WriteFile(fmt.Sprintf("%s/%d.png", *save, i+1), b, 0o644); err != nil {
					log.Fatal(err)
				}
			}
		}
	}
	if ok.Load() != int64(n) || mismatch.Load() > 0 {
		for _, f := range failures {
			log.Print(f)
		}
		os.Exit(1)
	}
}

// reencode decodes every metatile, cuts it into tw×th tiles and encodes
// each with Go's png encoder at zlib's default compression, as a tile
// cache would that does nothing clever; it returns the count and total size.
func reencode(bodies [][]byte, tw, th int) (int, int64, error) {
	enc := png.Encoder{CompressionLevel: png.DefaultCompression}
	var tiles int
	var total int64
	var buf bytes.Buffer
	for i, b := range bodies {
		if b == nil {
			continue
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			return 0, 0, fmt.Errorf("answer %d: %w", i+1, err)
		}
		r := img.Bounds()
		if r.Dx()%tw != 0 || r.Dy()%th != 0 {
			return 0, 0, fmt.Errorf("answer %d is %dx%d, not a multiple of %dx%d", i+1, r.Dx(), r.Dy(), tw, th)
		}
		sub := img.(interface {
			SubImage(image.Rectangle) image.Image
		})
		for y := r.Min.Y; y < r.Max.Y; y += th {
			for x := r.Min.X; x < r.Max.X; x += tw {
				buf.Reset()
				if err := enc.Encode(&buf, sub.SubImage(image.Rect(x, y, x+tw, y+th))); err != nil {
					return 0, 0, err
				}
				tiles++
				total += int64(buf.Len())
			}
		}
	}
	return tiles, total, nil
}
