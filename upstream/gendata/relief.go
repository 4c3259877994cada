package main

// The relief: a shaded, hypsometrically tinted elevation model of a made-up
// planet, as an RGB raster covering lon -180..180, lat -90..90. It is the
// upstream's photo-like layer (test:relief): every pixel differs a little
// from its neighbours, so its tiles have thousands of colours, unlike the
// flat fills of the vector layers. It exists so that tile encoders and caches
// are measured on data that is not only easy.
//
// Output: OUTDIR/relief.bil (8-bit RGB, band-interleaved by pixel, rows from
// the north) and OUTDIR/relief.hdr (its ESRI .hdr header), which GDAL reads
// as is; upstream/generate.sh turns them into a tiled GeoTIFF with
// overviews.
//
// Elevation is fractal gradient noise (fBm), periodic in longitude so that
// the antimeridian has no seam. Shading is the usual hillshade (light from
// the north-west, 45° up) from the elevation's slope in metres; the tint
// follows the elevation through a colour ramp, bathymetry included, so the
// sea has gradients and relief too.

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

const (
	reliefRes     = 0.05 // degrees per pixel: 7200 x 3600
	reliefCells   = 6    // noise cells across 360° at the coarsest octave
	reliefOctaves = 10   // until a noise cell is about a pixel
	reliefZ       = 40.0 // vertical exaggeration of the shading
	reliefGain    = 0.55 // amplitude ratio of successive octaves: rougher above 0.5
)

// noise2 is 2D gradient noise on a lattice that wraps every period cells in
// x. Gradients come from a hash of the lattice point and the key, so the
// field depends only on the seed.
type noise2 struct {
	key    uint64
	period int
}

// gradients: 64 unit vectors, evenly spread.
var gradients = func() (g [64][2]float64) {
	for i := range g {
		a := 2 * math.Pi * float64(i) / float64(len(g))
		g[i] = [2]float64{math.Cos(a), math.Sin(a)}
	}
	return
}()

func mix64(x uint64) uint64 { // splitmix64's finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (n noise2) grad(ix, iy int) [2]float64 {
	ix %= n.period
	if ix < 0 {
		ix += n.period
	}
	h := mix64(n.key ^ uint64(uint32(ix)) ^ uint64(uint32(iy))<<32)
	return gradients[h&63]
}

func fade(t float64) float64 { return t * t * t * (t*(t*6-15) + 10) }

// at returns the noise at (x, y) in lattice units, roughly in -0.7..0.7.
func (n noise2) at(x, y float64) float64 {
	fx, fy := math.Floor(x), math.Floor(y)
	ix, iy := int(fx), int(fy)
	dx, dy := x-fx, y-fy
	dot := func(cx, cy int, ox, oy float64) float64 {
		g := n.grad(ix+cx, iy+cy)
		return g[0]*ox + g[1]*oy
	}
	u, v := fade(dx), fade(dy)
	a := dot(0, 0, dx, dy) + u*(dot(1, 0, dx-1, dy)-dot(0, 0, dx, dy))
	b := dot(0, 1, dx, dy-1) + u*(dot(1, 1, dx-1, dy-1)-dot(0, 1, dx, dy-1))
	return a + v*(b-a)
}

// elevation in metres at lon, lat: fBm whose coarse octaves make continents
// and fine ones ridges and valleys; the fine octaves weigh more on high land,
// so mountains are rough and plains and the deep sea smooth.
func elevation(oct []noise2, lon, lat float64) float64 {
	x := (lon + 180) / 360 * reliefCells
	y := (lat + 90) / 360 * reliefCells
	var sum, amp, freq float64 = 0, 1, 1
	var base float64
	for i, n := range oct {
		v := n.at(x*freq, y*freq)
		if i >= 3 {
			// rugged where high: scale detail by how far above sea level
			v *= 0.35 + math.Min(1.5, math.Max(0, base*3))
		}
		sum += v * amp
		if i == 2 {
			base = sum
		}
		amp *= reliefGain
		freq *= 2
	}
	// Shift so that a bit under half the planet is sea.
	return (sum + 0.04) * 7000
}

// tint is the colour ramp by elevation (metres): bathymetry blues, then
// greens, ochres, browns, greys and snow.
var tintStops = []struct {
	z       float64
	r, g, b float64
}{
	{-7000, 8, 20, 70},
	{-3000, 25, 70, 140},
	{-200, 90, 160, 210},
	{0, 150, 200, 225},
	{1, 70, 130, 70},
	{300, 120, 170, 90},
	{900, 200, 195, 120},
	{1800, 170, 120, 70},
	{2800, 130, 105, 90},
	{3600, 200, 200, 200},
	{4500, 250, 250, 250},
}

func tint(z float64) (r, g, b float64) {
	s := tintStops
	if z <= s[0].z {
		return s[0].r, s[0].g, s[0].b
	}
	for i := 1; i < len(s); i++ {
		if z <= s[i].z {
			t := (z - s[i-1].z) / (s[i].z - s[i-1].z)
			return s[i-1].r + t*(s[i].r-s[i-1].r), s[i-1].g + t*(s[i].g-s[i-1].g), s[i-1].b + t*(s[i].b-s[i-1].b)
		}
	}
	l := s[len(s)-1]
	return l.r, l.g, l.b
}

func writeRelief(dir string, r *rand.Rand) error {
	w := int(math.Round(360 / reliefRes))
	h := int(math.Round(180 / reliefRes))
	oct := make([]noise2, reliefOctaves)
	for i := range oct {
		oct[i] = noise2{key: r.Uint64(), period: reliefCells << i}
	}

	// Elevation at pixel centres, with one extra row above and below for
	// the slope at the edges; columns wrap.
	elev := make([]float32, w*(h+2))
	parallelRows(h+2, func(j int) {
		lat := 90 - (float64(j-1)+0.5)*reliefRes
		lat = math.Max(-90, math.Min(90, lat))
		row := elev[j*w : (j+1)*w]
		for i := range row {
			row[i] = float32(elevation(oct, -180+(float64(i)+0.5)*reliefRes, lat))
		}
	})

	// Hillshade: light from azimuth 315°, altitude 45°.
	const az, alt = 315 * math.Pi / 180, 45 * math.Pi / 180
	lx, ly, lz := math.Sin(az)*math.Cos(alt), math.Cos(az)*math.Cos(alt), math.Sin(alt)
	const mPerDeg = 111320.0
	rgb := make([]byte, w*h*3)
	parallelRows(h, func(j int) {
		lat := 90 - (float64(j)+0.5)*reliefRes
		cx := 2 * reliefRes * mPerDeg * math.Max(0.05, math.Cos(lat*math.Pi/180))
		cy := 2 * reliefRes * mPerDeg
		up, mid, down := elev[j*w:(j+1)*w], elev[(j+1)*w:(j+2)*w], elev[(j+2)*w:(j+3)*w]
		out := rgb[j*w*3 : (j+1)*w*3]
		for i := 0; i < w; i++ {
			z := float64(mid[i])
			dzdx := float64(mid[(i+1)%w]-mid[(i+w-1)%w]) / cx * reliefZ
			dzdy := float64(up[i]-down[i]) / cy * reliefZ // north minus south
			// Surface normal (-dz/dx, -dz/dy, 1), normalised, dotted with the light.
			nl := math.Sqrt(dzdx*dzdx + dzdy*dzdy + 1)
			shade := (-dzdx*lx - dzdy*ly + lz) / nl
			shade = math.Max(0, shade)
			k := 0.35 + 0.9*shade // 0.35..1.25: dark slopes, bright slopes
			if z < 0 {
				k = 0.75 + 0.35*shade // the sea floor, softly
			}
			r, g, b := tint(z)
			out[3*i] = clamp8(r * k)
			out[3*i+1] = clamp8(g * k)
			out[3*i+2] = clamp8(b * k)
		}
	})

	f, err := os.Create(filepath.Join(dir, "relief.bil"))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := bw.Write(rgb); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// ULXMAP/ULYMAP are the centre of the upper-left pixel.
	hdr := fmt.Sprintf("BYTEORDER I\nLAYOUT BIP\nNROWS %d\nNCOLS %d\nNBANDS 3\nNBITS 8\n"+
		"BANDROWBYTES %d\nTOTALROWBYTES %d\nULXMAP %.10g\nULYMAP %.10g\nXDIM %g\nYDIM %g\n",
		h, w, w, 3*w, -180+reliefRes/2, 90-reliefRes/2, reliefRes, reliefRes)
	return os.WriteFile(filepath.Join(dir, "relief.hdr"), []byte(hdr), 0o644)
}

func clamp8(v float64) byte {
	return byte(math.Max(0, math.Min(255, math.Round(v))))
}

// parallelRows calls fn for every row 0..n-1 on all cores. fn must only
// write its own row, so the result does not depend on the scheduling.
func parallelRows(n int, fn func(j int)) {
	var next sync.Mutex
	j := 0
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				row := j
				j++
				next.Unlock()
				if row >= n {
					return
				}
				fn(row)
			}
		}()
	}
	wg.Wait()
}
