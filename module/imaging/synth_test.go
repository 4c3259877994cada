package imaging

import (
	"image"
	"math"
	"math/rand/v2"
)

// hillshade renders a deterministic shaded-relief map: fractal terrain,
// lit from the north-west, tinted by height. Nearly every pixel differs
// from its neighbours by a little, so a tile has thousands of colours and
// few repeats: the content where filtered rows beat unfiltered ones.
func hillshade(w, h int, seed uint64) *image.RGBA { return relief(w, h, seed, 1) }

// relief is hillshade at zoom: 4 shows the same kind of terrain four times
// closer, smoother from pixel to pixel.
func relief(w, h int, seed uint64, zoom int) *image.RGBA {
	rng := rand.New(rand.NewPCG(seed, 7))
	// Value noise: octaves of bilinearly interpolated random lattices.
	height := make([]float64, w*h)
	amp := 1.0
	for cell := 128 * zoom; cell >= 2*zoom; cell /= 2 {
		gw, gh := w/cell+2, h/cell+2
		grid := make([]float64, gw*gh)
		for i := range grid {
			grid[i] = rng.Float64()
		}
		for y := range h {
			gy, fy := y/cell, float64(y%cell)/float64(cell)
			fy = fy * fy * (3 - 2*fy)
			for x := range w {
				gx, fx := x/cell, float64(x%cell)/float64(cell)
				fx = fx * fx * (3 - 2*fx)
				a := grid[gy*gw+gx]*(1-fx) + grid[gy*gw+gx+1]*fx
				b := grid[(gy+1)*gw+gx]*(1-fx) + grid[(gy+1)*gw+gx+1]*fx
				height[y*w+x] += amp * (a*(1-fy) + b*fy)
			}
		}
		amp /= 2
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range height {
		lo, hi = min(lo, v), max(hi, v)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	lx, ly, lz := -1/math.Sqrt(3), -1/math.Sqrt(3), 1/math.Sqrt(3)
	exaggeration := 400.0 / float64(zoom)
	at := func(x, y int) float64 {
		return height[min(max(y, 0), h-1)*w+min(max(x, 0), w-1)]
	}
	for y := range h {
		for x := range w {
			dx := (at(x+1, y) - at(x-1, y)) * exaggeration / 2 / float64(w)
			dy := (at(x, y+1) - at(x, y-1)) * exaggeration / 2 / float64(w)
			nl := math.Sqrt(dx*dx + dy*dy + 1)
			shade := max(0, (-dx*lx-dy*ly+lz)/nl)
			t := (height[y*w+x] - lo) / (hi - lo)
			// green lowlands to brown hills to white peaks
			r := 90 + 150*t
			g := 140 + 80*t - 60*t*t
			b := 80 + 60*t*t
			o := img.PixOffset(x, y)
			img.Pix[o+0] = uint8(min(255, r*(0.35+0.75*shade)))
			img.Pix[o+1] = uint8(min(255, g*(0.35+0.75*shade)))
			img.Pix[o+2] = uint8(min(255, b*(0.35+0.75*shade)))
			img.Pix[o+3] = 255
		}
	}
	return img
}

// topoMap is a street map drawn over shaded relief: the relief shows
// where the map has plain land, flat fills and antialiased edges elsewhere,
// like a topographic map.
func topoMap(w, h int, seed uint64) *image.RGBA {
	m := renderMap(w, h, 4, seed)
	r := relief(w, h, seed, 2)
	for i := 0; i < len(m.Pix); i += 4 {
		if m.Pix[i] == 242 && m.Pix[i+1] == 239 && m.Pix[i+2] == 233 {
			copy(m.Pix[i:i+4], r.Pix[i:i+4])
		}
	}
	return m
}
