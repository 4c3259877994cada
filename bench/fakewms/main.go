// Command fakewms is a WMS stand-in with a fixed render time, for the seeding
// benchmarks (bench/seeding.sh, bench/truncate.sh). Standard library only.
//
// Every GetMap is answered, after sleeping exactly -delay, with a PNG of
// exactly WIDTH×HEIGHT pixels. The PNG is map-like, not flat and not noise:
// either a crop of a real rendering (-source, e.g. a 1024×1024 MapServer
// metatile captured once, answered byte for byte for its own size; cropped,
// or wrapped around when a request is larger, and re-encoded), or,
// without -source, a synthetic map drawn once per size (jittered Voronoi
// regions with pastel fills and anti-aliased outlines, plus anti-aliased
// roads), much like MapServer's AGG output. Each size is encoded once (Go's
// png, default compression) and the bytes are kept, so answering costs
// next to no CPU: what a benchmark sees is the delay, not this program.
//
//	fakewms -addr 127.0.0.1:18090 -delay 20ms [-source meta.png] [-prerender 1024x1024,256x256]
//
// Endpoints:
//
//	GET /wms?REQUEST=GetMap&WIDTH=w&HEIGHT=h&...   the image (any other parameter is ignored)
//	GET /stats                                    {"getmap":n,"bytes":b,"others":m,"delay":"20ms"}
//	GET /control?delay=50ms[&reset=1]             change the delay; reset=1 zeroes the counters
//	GET /trace                                    "arrival end" (Unix ns) of every GetMap since the last reset
//
// Anything else, or a GetMap without a valid size, answers 400.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const maxSide = 8192

type server struct {
	delay  atomic.Int64 // nanoseconds
	getMap atomic.Int64
	bytes  atomic.Int64
	others atomic.Int64

	source    image.Image // nil: synthetic
	sourcePNG []byte      // the file itself, answered as is for its own size

	mu    sync.Mutex
	cache map[[2]int]*entry

	// trace holds every GetMap's arrival and end (Unix ns) since the last
	// reset, up to maxTrace: where a client leaves the upstream idle
	// between requests shows in the gaps (GET /trace).
	traceMu sync.Mutex
	trace   [][2]int64
}

const maxTrace = 1 << 16

type entry struct {
	once sync.Once
	png  []byte
	err  error
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address (loopback)")
	delay := flag.Duration("delay", 20*time.Millisecond, "fixed render time of every GetMap")
	source := flag.String("source", "", "PNG to crop answers from (default: a synthetic map)")
	pre := flag.String("prerender", "", "sizes to encode at start, e.g. 1024x1024,256x256")
	flag.Parse()

	s := &server{cache: map[[2]int]*entry{}}
	s.delay.Store(int64(*delay))
	if *source != "" {
		b, err := os.ReadFile(*source)
		if err != nil {
			log.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			log.Fatalf("decoding %s: %v", *source, err)
		}
		s.source, s.sourcePNG = img, b
	}
	for _, sz := range strings.Split(*pre, ",") {
		if sz = strings.TrimSpace(sz); sz == "" {
			continue
		}
		w, h, ok := strings.Cut(sz, "x")
		wi, err1 := strconv.Atoi(w)
		hi, err2 := strconv.Atoi(h)
		if !ok || err1 != nil || err2 != nil || wi < 1 || hi < 1 || wi > maxSide || hi > maxSide {
			log.Fatalf("bad -prerender size %q", sz)
		}
		if _, err := s.image(wi, hi); err != nil {
			log.Fatal(err)
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("fakewms listening on %s, delay %v, source %q", ln.Addr(), *delay, *source)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/stats":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"getmap": s.getMap.Load(), "bytes": s.bytes.Load(), "others": s.others.Load(),
			"delay": time.Duration(s.delay.Load()).String(),
		})
		return
	case "/trace":
		s.traceMu.Lock()
		defer s.traceMu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		for _, t := range s.trace {
			fmt.Fprintf(w, "%d %d\n", t[0], t[1])
		}
		return
	case "/control":
		q := r.URL.Query()
		if v := q.Get("delay"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				http.Error(w, "bad delay", http.StatusBadRequest)
				return
			}
			s.delay.Store(int64(d))
		}
		if q.Get("reset") == "1" {
			s.traceMu.Lock()
			s.trace = nil
			s.traceMu.Unlock()
			s.getMap.Store(0)
			s.bytes.Store(0)
			s.others.Store(0)
		}
		fmt.Fprintf(w, "delay %v\n", time.Duration(s.delay.Load()))
		return
	}
	q := map[string]string{}
	for k, v := range r.URL.Query() {
		q[strings.ToUpper(k)] = v[0]
	}
	if !strings.EqualFold(q["REQUEST"], "GetMap") {
		s.others.Add(1)
		http.Error(w, "fakewms serves GetMap only", http.StatusBadRequest)
		return
	}
	wi, err1 := strconv.Atoi(q["WIDTH"])
	hi, err2 := strconv.Atoi(q["HEIGHT"])
	if err1 != nil || err2 != nil || wi < 1 || hi < 1 || wi > maxSide || hi > maxSide {
		s.others.Add(1)
		http.Error(w, "bad WIDTH/HEIGHT", http.StatusBadRequest)
		return
	}
	start := time.Now()
	body, err := s.image(wi, hi)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// The render time is the delay, measured from the request's arrival:
	// the first request of a size also pays for drawing it, but no more.
	if d := time.Duration(s.delay.Load()) - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	s.getMap.Add(1)
	s.bytes.Add(int64(len(body)))
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
	end := time.Now()
	s.traceMu.Lock()
	if len(s.trace) < maxTrace {
		s.trace = append(s.trace, [2]int64{start.UnixNano(), end.UnixNano()})
	}
	s.traceMu.Unlock()
}

// image returns the encoded PNG of w×h, drawing and encoding it on first use.
func (s *server) image(w, h int) ([]byte, error) {
	s.mu.Lock()
	e, ok := s.cache[[2]int{w, h}]
	if !ok {
		e = &entry{}
		s.cache[[2]int{w, h}] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		if s.source != nil && s.source.Bounds().Dx() == w && s.source.Bounds().Dy() == h {
			e.png = s.sourcePNG // byte for byte what the real server sent
			return
		}
		var img image.Image
		if s.source != nil {
			img = crop(s.source, w, h)
		} else {
			img = synthetic(w, h)
		}
		var buf bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.DefaultCompression}
		if e.err = enc.Encode(&buf, img); e.err == nil {
			e.png = buf.Bytes()
		}
	})
	return e.png, e.err
}

// crop takes w×h pixels from the middle of src, wrapping around when the
// request is larger than src.
func crop(src image.Image, w, h int) image.Image {
	b := src.Bounds()
	out := image.NewNRGBA(image.Rect(0, 0, w, h))
	x0 := b.Min.X + max(0, (b.Dx()-w)/2)
	y0 := b.Min.Y + max(0, (b.Dy()-h)/2)
	for y := 0; y < h; y++ {
		sy := b.Min.Y + (y0-b.Min.Y+y)%b.Dy()
		for x := 0; x < w; x++ {
			sx := b.Min.X + (x0-b.Min.X+x)%b.Dx()
			out.Set(x, y, src.At(sx, sy))
		}
	}
	return out
}

// synthetic draws a map-like image: Voronoi regions (about 130 px across)
// with pastel fills and 1.2 px dark outlines, and a few roads, all
// anti-aliased; deterministic for a size.
func synthetic(w, h int) image.Image {
	const cell = 128.0
	rng := rand.New(rand.NewSource(int64(w)*100003 + int64(h)))
	cw, ch := int(math.Ceil(float64(w)/cell))+2, int(math.Ceil(float64(h)/cell))+2
	type site struct {
		x, y float64
		c    [3]float64
	}
	sites := make([]site, cw*ch)
	for j := 0; j < ch; j++ {
		for i := 0; i < cw; i++ {
			hue := rng.Float64() * 360
			r, g, b := hsl(hue, 0.45, 0.80)
			sites[j*cw+i] = site{
				x: (float64(i-1) + 0.15 + 0.7*rng.Float64()) * cell,
				y: (float64(j-1) + 0.15 + 0.7*rng.Float64()) * cell,
				c: [3]float64{r, g, b},
			}
		}
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	outline := [3]float64{70, 70, 80}
	const half = 0.6 // half the outline width, px
	for py := 0; py < h; py++ {
		for px := 0; px < w; px++ {
			x, y := float64(px)+0.5, float64(py)+0.5
			ci, cj := int(x/cell)+1, int(y/cell)+1
			best, second := -1, -1
			d1, d2 := math.Inf(1), math.Inf(1)
			for dj := -1; dj <= 1; dj++ {
				for di := -1; di <= 1; di++ {
					i, j := ci+di, cj+dj
					if i < 0 || j < 0 || i >= cw || j >= ch {
						continue
					}
					k := j*cw + i
					d := (sites[k].x-x)*(sites[k].x-x) + (sites[k].y-y)*(sites[k].y-y)
					if d < d1 {
						second, d2 = best, d1
						best, d1 = k, d
					} else if d < d2 {
						second, d2 = k, d
					}
				}
			}
			c := sites[best].c
			if second >= 0 {
				// Distance to the bisector of the two nearest sites.
				a, b := sites[best], sites[second]
				sep := math.Hypot(a.x-b.x, a.y-b.y)
				dist := (d2 - d1) / (2 * sep)
				cov := math.Min(1, math.Max(0, half+0.5-dist))
				for k := range c {
					c[k] = c[k]*(1-cov) + outline[k]*cov
				}
			}
			img.SetNRGBA(px, py, color.NRGBA{uint8(c[0] + 0.5), uint8(c[1] + 0.5), uint8(c[2] + 0.5), 255})
		}
	}
	// Roads: random walks drawn 2 px wide, anti-aliased.
	roads := max(2, w*h/(256*256)*3)
	for r := 0; r < roads; r++ {
		x, y := rng.Float64()*float64(w), rng.Float64()*float64(h)
		dir := rng.Float64() * 2 * math.Pi
		col := [3]float64{200, 90, 40}
		if r%3 == 0 {
			col = [3]float64{230, 180, 60}
		}
		for s := 0; s < 40; s++ {
			dir += (rng.Float64() - 0.5) * 0.8
			nx, ny := x+math.Cos(dir)*24, y+math.Sin(dir)*24
			segment(img, x, y, nx, ny, 1.0, col)
			x, y = nx, ny
		}
	}
	return img
}

// segment blends a line of half-width hw over img, coverage by distance.
func segment(img *image.NRGBA, x0, y0, x1, y1, hw float64, col [3]float64) {
	b := img.Bounds()
	minX := max(b.Min.X, int(math.Floor(math.Min(x0, x1)-hw-1)))
	maxX := min(b.Max.X-1, int(math.Ceil(math.Max(x0, x1)+hw+1)))
	minY := max(b.Min.Y, int(math.Floor(math.Min(y0, y1)-hw-1)))
	maxY := min(b.Max.Y-1, int(math.Ceil(math.Max(y0, y1)+hw+1)))
	dx, dy := x1-x0, y1-y0
	l2 := dx*dx + dy*dy
	for py := minY; py <= maxY; py++ {
		for px := minX; px <= maxX; px++ {
			x, y := float64(px)+0.5, float64(py)+0.5
			t := 0.0
			if l2 > 0 {
				t = math.Max(0, math.Min(1, ((x-x0)*dx+(y-y0)*dy)/l2))
			}
			d := math.Hypot(x-(x0+t*dx), y-(y0+t*dy))
			cov := math.Min(1, math.Max(0, hw+0.5-d))
			if cov <= 0 {
				continue
			}
			o := img.NRGBAAt(px, py)
			img.SetNRGBA(px, py, color.NRGBA{
				uint8(float64(o.R)*(1-cov) + col[0]*cov + 0.5),
				uint8(float64(o.G)*(1-cov) + col[1]*cov + 0.5),
				uint8(float64(o.B)*(1-cov) + col[2]*cov + 0.5),
				255,
			})
		}
	}
}

func hsl(h, s, l float64) (r, g, b float64) {
	c := (1 - math.Abs(2*l-1)) * s
	hp := h / 60
	x := c * (1 - math.Abs(math.Mod(hp, 2)-1))
	var r1, g1, b1 float64
	switch {
	case hp < 1:
		r1, g1 = c, x
	case hp < 2:
		r1, g1 = x, c
	case hp < 3:
		g1, b1 = c, x
	case hp < 4:
		g1, b1 = x, c
	case hp < 5:
		r1, b1 = x, c
	default:
		r1, b1 = c, x
	}
	m := l - c/2
	return (r1 + m) * 255, (g1 + m) * 255, (b1 + m) * 255
}
