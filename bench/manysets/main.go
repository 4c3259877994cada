// Command manysets measures what a store with many tile sets (parameter
// values: GeoWebCache takes minutes to start with thousands of them) costs
// a Caddy start with a quota: it fills a real Badger store (module/store,
// Caddy's options) with -sets tile sets of one metatile each, with usage
// and access tracking on as a quota keeps them, closes it, and then times
// what provisioning a tile_cache with a quota does before the first
// request is served (open the store, turn usage and tracking on, start the
// evictor), then the evictor's first pass (reading usage and every page),
// and a first hit.
//
//	go run ./bench/manysets [-sets 10000] [-runs 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
)

func main() {
	sets := flag.Int("sets", 10000, "tile sets (parameter values)")
	runs := flag.Int("runs", 3, "timed starts")
	flag.Parse()
	dir, err := os.MkdirTemp("", "manysets-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := &quota.Config{MaxSize: 100 << 30}
	if err := cfg.Validate(); err != nil {
		log.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{Usage: true, ValueLogFileSize: quota.ValueLogFileSize(cfg.MaxSize)})
	if err != nil {
		log.Fatal(err)
	}
	if err := st.SetTracking(true); err != nil {
		log.Fatal(err)
	}
	t0 := time.Now()
	data := make([]byte, 2000)
	for i := range *sets {
		set := store.Set{Layer: "layer", Gridset: "EPSG:3857", Format: "image/png", Params: fmt.Sprintf("%016x", i)}
		var b []store.Entry
		for j := range 16 {
			b = append(b, store.Entry{Key: store.Key{Set: set, Z: 10, X: 512 + int64(j%4), Y: 300 + int64(j/4)}, Data: data})
		}
		if err := st.Put(b, time.Now()); err != nil {
			log.Fatal(err)
		}
	}
	if err := st.Release(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("filled %d tile sets × 16 tiles in %.1f s\n", *sets, time.Since(t0).Seconds())

	for r := range *runs {
		start := time.Now()
		st, err := store.Open(dir, store.Options{Usage: true, ValueLogFileSize: quota.ValueLogFileSize(cfg.MaxSize)})
		if err != nil {
			log.Fatal(err)
		}
		if err := st.SetUsage(true); err != nil {
			log.Fatal(err)
		}
		if err := st.SetTracking(true); err != nil {
			log.Fatal(err)
		}
		quota.CheckEvery = time.Hour
		ev, err := quota.Acquire(st, cfg, zap.NewNop())
		if err != nil {
			log.Fatal(err)
		}
		ready := time.Since(start)
		k := store.Key{Set: store.Set{Layer: "layer", Gridset: "EPSG:3857", Format: "image/png", Params: fmt.Sprintf("%016x", *sets/2)}, Z: 10, X: 513, Y: 301}
		if _, err := st.Get(context.Background(), k, nil); err != nil {
			log.Fatal(err)
		}
		hit := time.Since(start)
		p0 := time.Now()
		p, err := ev.Enforce()
		if err != nil || p.Pages != 0 {
			log.Fatalf("first pass: %+v %v", p, err)
		}
		pass := time.Since(p0)
		levels, recounting, _ := st.Usage()
		fmt.Printf("start %d: store open with usage, tracking and the evictor in %.0f ms, first hit at %.0f ms; first pass (usage of %d levels, every page) %.0f ms; recounting %v, indexing %v\n",
			r+1, ms(ready), ms(hit), len(levels), ms(pass), recounting, st.Indexing())
		ev.Release()
		st.Release()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
