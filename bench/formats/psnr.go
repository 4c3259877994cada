package main

import (
	"image"

	"github.com/tilecache/caddy-tilecache/module/imaging"
)

// psnr is imaging.PSNR: the PSNR of b against a in dB over non-premultiplied
// R, G, B and A, peak 255, +Inf when identical, fully transparent pixels
// equal whatever their colour bytes, NaN when the sizes differ.
func psnr(a, b *image.NRGBA) float64 { return imaging.PSNR(a, b) }
