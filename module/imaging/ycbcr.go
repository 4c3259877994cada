package imaging

import (
	"image"
	"sync"
)

// ycbcrPool holds the 4:2:0 planes JPEG tiles are converted into.
var ycbcrPool = sync.Pool{New: func() any { return new(image.YCbCr) }}

// toYCbCr420 converts an opaque RGBA image of even width and height to
// 4:2:0 YCbCr for image/jpeg, which then takes the planes as they are.
// Each chroma sample is the mean of its four pixels' exact chroma,
// rounded once; image/jpeg itself (and libjpeg) rounds each pixel's
// chroma to 8 bits first and then the mean of four, which loses a little
// colour on every edge. Luma is rounded as color.RGBToYCbCr does. dst's
// planes are reused when big enough.
func toYCbCr420(dst *image.YCbCr, src *image.RGBA) *image.YCbCr {
	b := src.Rect
	w, h := b.Dx(), b.Dy()
	cw, ch := w/2, h/2
	dst.Y = grow(dst.Y, w*h)
	dst.Cb = grow(dst.Cb, cw*ch)
	dst.Cr = grow(dst.Cr, cw*ch)
	dst.YStride, dst.CStride = w, cw
	dst.SubsampleRatio = image.YCbCrSubsampleRatio420
	// At the origin: image.YCbCr pairs pixels by even coordinates, and a
	// tile's own origin may be odd. JPEG has no origin to keep.
	dst.Rect = image.Rect(0, 0, w, h)
	for cy := range ch {
		r0 := src.Pix[src.PixOffset(b.Min.X, b.Min.Y+2*cy):]
		r1 := r0[src.Stride:]
		y0 := dst.Y[2*cy*w:]
		y1 := y0[w:]
		cb := dst.Cb[cy*cw : (cy+1)*cw]
		cr := dst.Cr[cy*cw : (cy+1)*cw]
		for cx := range cw {
			var sb, sr int32
			for k, p := range [4][]uint8{r0[8*cx:], r0[8*cx+4:], r1[8*cx:], r1[8*cx+4:]} {
				r, g, bl := int32(p[0]), int32(p[1]), int32(p[2])
				// The coefficients of color.RGBToYCbCr (JFIF, 16.16).
				yy := uint8((19595*r + 38470*g + 7471*bl + 1<<15) >> 16)
				switch k {
				case 0:
					y0[2*cx] = yy
				case 1:
					y0[2*cx+1] = yy
				case 2:
					y1[2*cx] = yy
				default:
					y1[2*cx+1] = yy
				}
				sb += -11056*r - 21712*g + 32768*bl
				sr += 32768*r - 27440*g - 5328*bl
			}
			cb[cx] = clampChroma((sb + 4*(128<<16) + 1<<17) >> 18)
			cr[cx] = clampChroma((sr + 4*(128<<16) + 1<<17) >> 18)
		}
	}
	return dst
}

func clampChroma(v int32) uint8 {
	return uint8(min(max(v, 0), 255))
}
