package imaging

import (
	"fmt"
	"image"
	"image/color"
)

// Gutter is the margin, in pixels, around the tiles of a metatile image. A
// side at the edge of the grid usually has none.
type Gutter struct{ Left, Top, Right, Bottom int }

// maxSide bounds the metatile size so the size arithmetic cannot overflow;
// no WMS serves images anywhere near this.
const maxSide = 1 << 20

// Slice returns the tiles of a metatile image holding cols×rows tiles of
// tileW×tileH pixels inside gutter g, row-major from the top-left:
// tiles[r*cols+c] is column c, row r counted from the top of the image.
// The tiles share img's pixels and keep its coordinates, so their
// Bounds().Min is generally not (0,0).
func Slice(img image.Image, cols, rows, tileW, tileH int, g Gutter) ([]image.Image, error) {
	if img == nil {
		return nil, fmt.Errorf("imaging: slice: nil image")
	}
	if cols <= 0 || rows <= 0 || tileW <= 0 || tileH <= 0 {
		return nil, fmt.Errorf("imaging: slice: bad layout %dx%d tiles of %dx%d px", cols, rows, tileW, tileH)
	}
	if g.Left < 0 || g.Top < 0 || g.Right < 0 || g.Bottom < 0 {
		return nil, fmt.Errorf("imaging: slice: negative gutter %+v", g)
	}
	if cols > maxSide/tileW || rows > maxSide/tileH || g.Left > maxSide || g.Right > maxSide ||
		g.Top > maxSide || g.Bottom > maxSide {
		return nil, fmt.Errorf("imaging: slice: metatile %dx%d tiles of %dx%d px is too large", cols, rows, tileW, tileH)
	}
	wantW := cols*tileW + g.Left + g.Right
	wantH := rows*tileH + g.Top + g.Bottom
	b := img.Bounds()
	if b.Dx() != wantW || b.Dy() != wantH {
		return nil, fmt.Errorf("imaging: slice: image is %dx%d, want %dx%d (%dx%d tiles of %dx%d px, gutter %+v)",
			b.Dx(), b.Dy(), wantW, wantH, cols, rows, tileW, tileH, g)
	}

	sub, canSub := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	tiles := make([]image.Image, 0, cols*rows)
	for r := range rows {
		for c := range cols {
			min := image.Pt(b.Min.X+g.Left+c*tileW, b.Min.Y+g.Top+r*tileH)
			rect := image.Rectangle{Min: min, Max: min.Add(image.Pt(tileW, tileH))}
			if canSub {
				tiles = append(tiles, sub.SubImage(rect))
			} else {
				tiles = append(tiles, &view{img: img, rect: rect})
			}
		}
	}
	return tiles, nil
}

// view is a window on an image that has no SubImage method; it still avoids
// a copy, at the price of the encoders' slow per-pixel path.
type view struct {
	img  image.Image
	rect image.Rectangle
}

func (v *view) ColorModel() color.Model { return v.img.ColorModel() }
func (v *view) Bounds() image.Rectangle { return v.rect }
func (v *view) At(x, y int) color.Color {
	if !(image.Point{x, y}.In(v.rect)) {
		return color.Transparent
	}
	return v.img.At(x, y)
}
