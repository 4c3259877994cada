// Command formats compares sets of the same map tiles in different
// formats, for the tile-format benchmark (bench/formats.sh, issue 31): a
// reference set (lossless PNG) and one or more candidate sets (8-bit PNG,
// mixed JPEG/PNG, WebP, ...) of the same tiles, matched by z/x/y.
//
//	formats -ref SRC [-cand [LABEL=]SRC]... [-levels 4|3-5] [-grid EPSG:4326] [-c 4] [-kv]
//
// SRC is one of
//
//	mapcache:DIR   a MapCache disk cache, DIR = <base>/<tileset>/<grid>
//	dir:DIR        DIR/z/x/y.<ext>, y from the bottom (TMS)
//	xyzdir:DIR     DIR/z/x/y.<ext>, y from the top (XYZ)
//	URL            an http(s) URL template with {z}, {x} and {y} (row from
//	               the top: XYZ, e.g. a caddy-tilecache .../xyz/LAYER/EPSG:4326/{z}/{x}/{y}.png)
//	               or {-y} (row from the bottom: TMS, .../tms/1.0.0/LAYER@EPSG:4326@png/{z}/{x}/{-y}.png)
//
// The tiles compared are every tile of -levels in -grid when -levels is
// given, else every tile the directory sources hold (a URL source cannot
// be listed: give -levels). A tile one set lacks (no file, HTTP 404) is
// counted as missing for that set, never dropped silently.
//
// For each set it prints the tiles present and missing, the mean bytes
// (and the ratio to the reference's mean, over the tiles both hold), the
// tile types found (PNG colour types, JPEG, WebP lossless/lossy), and for
// each candidate the PSNR against the reference tile (imaging.PSNR: over
// the non-premultiplied R, G, B and A of every pixel, peak 255, +Inf when
// identical, fully transparent pixels equal whatever their colour bytes);
// median (the lower middle value) and worst tile (with its z/x/y, "-"
// when every tile is identical), the pooled PSNR (of the mean squared
// error over all pairs), and how many tiles are pixel-identical to the
// reference. -kv prints one line of key=value pairs per set instead of
// the table.
//
// Exit status 1 on a tile that does not decode, a size mismatch, or a
// source error (an HTTP status other than 200 and 404, or, with -header,
// an answer without that header value).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
)

type candFlag []string

func (c *candFlag) String() string     { return strings.Join(*c, " ") }
func (c *candFlag) Set(s string) error { *c = append(*c, s); return nil }

// set is one tile source and what was measured on it.
type set struct {
	label string
	src   source

	present, missing int
	bytes            int64
	types            map[string]int

	// candidates only: against the reference
	pairs     int   // tiles both hold
	pairBytes int64 // this set's bytes over those tiles
	refBytes  int64 // the reference's bytes over those tiles
	psnrs     []float64
	sumMSE    float64 // over the pairs (tiles of one size: pooled MSE = mean)
	identical int
	worst     key
	worstDB   float64
}

func main() {
	ref := flag.String("ref", "", "the reference (lossless) tile set: SRC")
	var cands candFlag
	flag.Var(&cands, "cand", "a candidate tile set: [LABEL=]SRC (repeatable)")
	levels := flag.String("levels", "", "levels to compare: N or A-B (all tiles of the grid's levels); default: the tiles the directories hold")
	gridName := flag.String("grid", "EPSG:4326", "gridset of the tiles (EPSG:4326: 2x1 tiles at level 0; EPSG:900913/EPSG:3857: 1x1)")
	conc := flag.Int("c", runtime.NumCPU()*2, "tiles in flight")
	header := flag.String("header", "", "NAME=VALUE every HTTP answer must carry (e.g. geowebcache-cache-result=HIT)")
	kv := flag.Bool("kv", false, "print key=value lines instead of the table")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("formats: ")
	if *ref == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	g, ok := grids[*gridName]
	if !ok {
		log.Fatalf("unknown -grid %q (EPSG:4326, EPSG:900913, EPSG:3857)", *gridName)
	}
	lv, err := parseLevels(*levels)
	if err != nil {
		log.Fatal(err)
	}

	var sets []*set
	add := func(label, spec string) {
		src, err := parseSource(spec, g, *header)
		if err != nil {
			log.Fatal(err)
		}
		sets = append(sets, &set{label: label, src: src, types: map[string]int{}, worstDB: math.Inf(1)})
	}
	add("ref", *ref)
	for _, c := range cands {
		label, spec := fmt.Sprintf("cand%d", len(sets)), c
		if l, s, ok := strings.Cut(c, "="); ok && !strings.Contains(l, "/") && !strings.Contains(l, ":") {
			label, spec = l, s
		}
		add(label, spec)
	}

	keys, err := tileKeys(sets, g, lv)
	if err != nil {
		log.Fatal(err)
	}
	if len(keys) == 0 {
		log.Fatal("no tiles to compare")
	}
	if err := compare(context.Background(), sets, keys, *conc); err != nil {
		log.Fatal(err)
	}
	if *kv {
		printKV(os.Stdout, sets, len(keys))
	} else {
		printTable(os.Stdout, sets, len(keys))
	}
}

// parseLevels reads "", "4" or "3-5" into a set of levels (nil: any).
func parseLevels(s string) (map[int]bool, error) {
	if s == "" {
		return nil, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || lo < 0 || hi < lo || hi > 30 {
		return nil, fmt.Errorf("-levels %q: want N or A-B", s)
	}
	m := map[int]bool{}
	for z := lo; z <= hi; z++ {
		m[z] = true
	}
	return m, nil
}

// tileKeys is every tile of the levels in the grid when levels are given
// (plus, as a check, nothing outside them), else the union of what the
// listable sources hold.
func tileKeys(sets []*set, g grid, levels map[int]bool) ([]key, error) {
	seen := map[key]bool{}
	if levels != nil {
		for z := range levels {
			for x := range g.cols(z) {
				for y := range g.rows(z) {
					seen[key{z, x, y}] = true
				}
			}
		}
	}
	listed := false
	for _, s := range sets {
		ks, ok, err := s.src.list(levels)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", s.src, err)
		}
		listed = listed || ok
		for _, k := range ks {
			if levels != nil && !seen[k] {
				return nil, fmt.Errorf("%s holds tile %v, outside the grid %s", s.src, k, g.name)
			}
			seen[k] = true
		}
	}
	if !listed && levels == nil {
		return nil, errors.New("no source can be listed (URLs): give -levels")
	}
	keys := make([]key, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.z != b.z {
			return a.z - b.z
		}
		if a.x != b.x {
			return a.x - b.x
		}
		return a.y - b.y
	})
	return keys, nil
}

// compare fetches each tile from every set, decodes the candidates and the
// reference and accumulates the figures.
func compare(ctx context.Context, sets []*set, keys []key, conc int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	work := make(chan key)
	var wg sync.WaitGroup
	for range max(conc, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if err := one(ctx, sets, k, &mu); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		work <- k
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

func one(ctx context.Context, sets []*set, k key, mu *sync.Mutex) error {
	raw := make([][]byte, len(sets))
	for i, s := range sets {
		b, err := s.src.get(ctx, k)
		if errors.Is(err, errMissing) {
			continue
		}
		if err != nil {
			return err
		}
		raw[i] = b
	}
	var ref []byte = raw[0]
	psnrs := make([]float64, len(sets))
	compared := make([]bool, len(sets))
	if ref != nil {
		refImg, err := decode(ref)
		if err != nil {
			return fmt.Errorf("%s tile %v: %w", sets[0].src, k, err)
		}
		for i := 1; i < len(sets); i++ {
			if raw[i] == nil {
				continue
			}
			img, err := decode(raw[i])
			if err != nil {
				return fmt.Errorf("%s tile %v: %w", sets[i].src, k, err)
			}
			p := psnr(refImg, img)
			if math.IsNaN(p) {
				return fmt.Errorf("%s tile %v: %v, the reference's %v", sets[i].src, k, img.Rect.Size(), refImg.Rect.Size())
			}
			psnrs[i], compared[i] = p, true
		}
	} else {
		// Nothing to compare with, but a candidate that does not
		// decode is still an error.
		for i := 1; i < len(sets); i++ {
			if raw[i] != nil {
				if _, err := decode(raw[i]); err != nil {
					return fmt.Errorf("%s tile %v: %w", sets[i].src, k, err)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, s := range sets {
		b := raw[i]
		if b == nil {
			s.missing++
			continue
		}
		s.present++
		s.bytes += int64(len(b))
		s.types[kind(b)]++
		if compared[i] {
			s.pairs++
			s.pairBytes += int64(len(b))
			s.refBytes += int64(len(ref))
			db := psnrs[i]
			s.psnrs = append(s.psnrs, db)
			s.sumMSE += mseOf(db)
			if math.IsInf(db, 1) {
				s.identical++
			}
			if db < s.worstDB || s.pairs == 1 {
				s.worstDB, s.worst = db, k
			}
		}
	}
	return nil
}

// median is the lower middle value (so that an even count with +Inf
// above the middle does not report +Inf).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

func (s *set) meanBytes() float64 {
	if s.present == 0 {
		return math.NaN()
	}
	return float64(s.bytes) / float64(s.present)
}

func (s *set) typeList() string {
	var names []string
	for t := range s.types {
		names = append(names, t)
	}
	sort.Strings(names)
	var parts []string
	for _, t := range names {
		parts = append(parts, fmt.Sprintf("%s:%d", t, s.types[t]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func db(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "inf"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func ratio(s *set) string {
	if s.refBytes == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(s.pairBytes)/float64(s.refBytes), 'f', 3, 64)
}

func printKV(w *os.File, sets []*set, total int) {
	for i, s := range sets {
		fmt.Fprintf(w, "set=%s tiles=%d present=%d missing=%d mean_bytes=%.1f types=%s", s.label, total, s.present, s.missing, s.meanBytes(), s.typeList())
		if i > 0 {
			worst := s.worstTile()
			fmt.Fprintf(w, " pairs=%d ratio=%s psnr_median=%s psnr_worst=%s worst_tile=%s psnr_pooled=%s identical=%d",
				s.pairs, ratio(s), db(median(s.psnrs)), db(s.worstDBOrNaN()), worst, db(s.pooled()), s.identical)
		}
		fmt.Fprintf(w, " src=%s\n", s.src)
	}
}

// worstTile names the tile of the lowest PSNR, "-" when none differs.
func (s *set) worstTile() string {
	if s.pairs == 0 || math.IsInf(s.worstDB, 1) {
		return "-"
	}
	return s.worst.String()
}

func (s *set) worstDBOrNaN() float64 {
	if s.pairs == 0 {
		return math.NaN()
	}
	return s.worstDB
}

func (s *set) pooled() float64 {
	if s.pairs == 0 {
		return math.NaN()
	}
	return psnrOfMSE(s.sumMSE / float64(s.pairs))
}

func printTable(w *os.File, sets []*set, total int) {
	fmt.Fprintf(w, "%d tiles compared; PSNR in dB against the reference tile (R,G,B,A, peak 255; inf = identical)\n", total)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "set\tpresent\tmissing\tmean_B\tx_ref\tpsnr_med\tpsnr_worst\tworst_tile\tpooled\tidentical\ttypes\t")
	for i, s := range sets {
		if i == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t-\t-\t-\t-\t-\t-\t%s\t\n", s.label, s.present, s.missing, s.meanBytes(), s.typeList())
			continue
		}
		worst := s.worstTile()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", s.label, s.present, s.missing, s.meanBytes(),
			ratio(s), db(median(s.psnrs)), db(s.worstDBOrNaN()), worst, db(s.pooled()), s.identical, s.typeList())
	}
	tw.Flush()
	for _, s := range sets {
		fmt.Fprintf(w, "%s = %s\n", s.label, s.src)
	}
}
