package imaging

import (
	"image"
	"math"
)

// PSNR is the peak signal-to-noise ratio of b against a, in dB: 10·log10
// of 255² over the mean squared difference of their non-premultiplied
// 8-bit R, G, B and A channels, over every pixel and all four channels.
// Higher is closer; identical images give +Inf. Pixels are paired by their
// offset from each image's Bounds().Min, so a tile and its quantized copy
// compare whatever their origins. Every fully transparent pixel counts as
// the same colour whatever its colour bytes: it looks the same, and the PNG
// encoder stores it so. Images of different sizes give NaN (which fails any
// comparison), empty ones +Inf.
//
// For scale, on a dense antialiased map: MapCache's 256-colour quantizer
// gives about 52 dB against the lossless tile, Pillow's median cut 49 dB;
// lossy WebP at quality 80, 34 dB.
func PSNR(a, b image.Image) float64 {
	ba, bb := a.Bounds(), b.Bounds()
	if ba.Size() != bb.Size() {
		return math.NaN()
	}
	w, h := ba.Dx(), ba.Dy()
	if w <= 0 || h <= 0 {
		return math.Inf(1)
	}
	var ra, rb pixelReader
	ra.reset(a)
	rb.reset(b)
	rowA, rowB := make([]nrgba, w), make([]nrgba, w)
	var sum uint64
	for y := range h {
		ra.row(rowA, ba.Min.Y+y)
		rb.row(rowB, bb.Min.Y+y)
		for x, p := range rowA {
			if p != rowB[x] {
				sum += uint64(sqDiff(p, rowB[x]))
			}
		}
	}
	if sum == 0 {
		return math.Inf(1)
	}
	mse := float64(sum) / float64(4*w*h)
	return 10 * math.Log10(255*255/mse)
}

// sqDiff is the squared difference of two colours, summed over channels.
func sqDiff(p, q nrgba) int32 {
	return dist4(colourOf(p), colourOf(q))
}
