// Command hitlat measures the latency a visitor sees: GET requests sent one
// at a time (never two in flight), with a pause between them, cycling
// through a list of URLs; it reports percentiles of the time from sending
// the request to having read the whole answer. bench/hits-while-seeding.sh
// uses it on tiles a cache already holds, with and without a seed running
// beside it. Standard library only.
//
//	hitlat -urls FILE [-n 1000] [-interval 10ms] [-max 60s] [-keepalive]
//	       [-header NAME=VALUE] [-out FILE]
//
// One line of key=value pairs on stdout:
//
//	requests ok wall_s p50_ms p90_ms p99_ms max_ms mean_ms bytes_mean [header_mismatch]
//
// -out writes every latency (ms, one a line, in order) for a closer look.
// Without -keepalive every request opens a new connection, as curl run once
// per request does. The run ends after -n requests or -max, whichever comes
// first. Exit status 1 when any answer is not HTTP 200 (or lacks the
// header value), or when fewer than -n requests were made.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	urlsFile := flag.String("urls", "", "file with one URL per line, used in order, cycled")
	n := flag.Int("n", 1000, "requests")
	interval := flag.Duration("interval", 10*time.Millisecond, "pause after each answer (so the client is not itself a CPU load)")
	maxDur := flag.Duration("max", 60*time.Second, "stop after this long whatever -n")
	keepAlive := flag.Bool("keepalive", false, "reuse one connection (default: a new connection per request)")
	header := flag.String("header", "", "NAME=VALUE every answer must carry")
	outFile := flag.String("out", "", "write each latency in ms, one a line")
	timeout := flag.Duration("timeout", 10*time.Second, "per request")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("hitlat: ")

	urls, err := readLines(*urlsFile)
	if err != nil {
		log.Fatal(err)
	}
	if len(urls) == 0 || *n < 1 {
		log.Fatal("need -urls with at least one URL and -n >= 1")
	}
	hName, hValue, _ := strings.Cut(*header, "=")
	client := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			DisableKeepAlives:   !*keepAlive,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 1,
		},
	}

	lat := make([]time.Duration, 0, *n)
	var ok, mismatch int
	var bytesTotal int64
	var failures []string
	start := time.Now()
	for i := 0; i < *n && time.Since(start) < *maxDur; i++ {
		u := urls[i%len(urls)]
		t0 := time.Now()
		resp, err := client.Get(u)
		if err != nil {
			failures = append(failures, err.Error())
			lat = append(lat, time.Since(t0))
			continue
		}
		nb, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		lat = append(lat, d)
		switch {
		case err != nil || resp.StatusCode != http.StatusOK:
			failures = append(failures, fmt.Sprintf("%s: HTTP %d %v", u, resp.StatusCode, err))
		case hName != "" && resp.Header.Get(hName) != hValue:
			mismatch++
			failures = append(failures, fmt.Sprintf("%s: %s: %q", u, hName, resp.Header.Get(hName)))
		default:
			ok++
			bytesTotal += nb
		}
		time.Sleep(*interval)
	}
	wall := time.Since(start)

	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	pct := func(p float64) float64 {
		// nearest rank: the smallest value with at least p of them at or below it
		k := int(p*float64(len(sorted))+0.999999) - 1
		return ms(sorted[max(0, min(len(sorted)-1, k))])
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	fmt.Printf("requests=%d ok=%d wall_s=%.3f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f mean_ms=%.3f bytes_mean=%.1f",
		len(lat), ok, wall.Seconds(), pct(0.5), pct(0.9), pct(0.99), pct(1), ms(sum)/float64(max(1, len(lat))),
		float64(bytesTotal)/float64(max(1, ok)))
	if hName != "" {
		fmt.Printf(" header_mismatch=%d", mismatch)
	}
	fmt.Println()

	if *outFile != "" {
		var b strings.Builder
		for _, d := range lat {
			fmt.Fprintf(&b, "%.3f\n", ms(d))
		}
		if err := os.WriteFile(*outFile, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if len(failures) > 0 || len(lat) < *n {
		for i, f := range failures {
			if i == 5 {
				log.Printf("... %d more", len(failures)-5)
				break
			}
			log.Print(f)
		}
		if len(lat) < *n {
			log.Printf("only %d of %d requests within -max %v", len(lat), *n, *maxDur)
		}
		os.Exit(1)
	}
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}
