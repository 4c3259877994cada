package gridset

import (
	"errors"
	"fmt"
	"math"
)

// Tolerance is how far, as a fraction of one tile, each edge of a requested
// bounding box may lie from the edge of the tile it is matched to. It is
// GeoWebCache's figure: it absorbs the rounding of clients that compute the
// grid from a slightly different extent (OpenLayers' ±20037508.342789244 vs
// the gridset's ±20037508.34), and rejects anything a person would see as
// a different tile.
const Tolerance = 0.1

// Reasons a bounding box is not one tile of a gridset. Callers use them as
// the "why not cached" answer, so they are short and stable.
var (
	ErrTileSize   = errors.New("size is not the gridset's tile size")
	ErrResolution = errors.New("resolution matches no zoom level")
	ErrAlignment  = errors.New("bbox is not aligned to the tile grid")
	ErrOutside    = errors.New("bbox is outside the gridset")
	ErrBBox       = errors.New("bbox is empty or not finite")
)

// Match finds the tile whose area is b at a width×height pixel size.
func (g *Gridset) Match(b BBox, width, height int) (Index, error) {
	if width != g.TileWidth || height != g.TileHeight {
		return Index{}, ErrTileSize
	}
	if !b.valid() {
		return Index{}, ErrBBox
	}
	resX := (b.MaxX - b.MinX) / float64(width)
	z := g.closestLevel(resX)
	l := g.Levels[z]
	w := l.Resolution * float64(g.TileWidth)
	h := l.Resolution * float64(g.TileHeight)
	// Each edge in tile units; all four must be near whole numbers that
	// describe exactly one tile.
	fx0 := (b.MinX - g.Extent.MinX) / w
	fx1 := (b.MaxX - g.Extent.MinX) / w
	oy := g.originY(z)
	fy0 := (b.MinY - oy) / h
	fy1 := (b.MaxY - oy) / h
	x, y := math.Round(fx0), math.Round(fy0)
	if math.Abs(fx1-fx0-1) > Tolerance || math.Abs(fy1-fy0-1) > Tolerance {
		return Index{}, ErrResolution
	}
	if math.Abs(fx0-x) > Tolerance || math.Abs(fy0-y) > Tolerance ||
		math.Abs(fx1-x-1) > Tolerance || math.Abs(fy1-y-1) > Tolerance {
		return Index{}, ErrAlignment
	}
	if x < 0 || y < 0 || x >= float64(l.TilesWide) || y >= float64(l.TilesHigh) {
		return Index{}, ErrOutside
	}
	return Index{X: int64(x), Y: int64(y), Z: z}, nil
}

func (b BBox) valid() bool {
	for _, v := range [4]float64{b.MinX, b.MinY, b.MaxX, b.MaxY} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return b.MinX < b.MaxX && b.MinY < b.MaxY
}

// closestLevel is the level whose resolution is nearest res. Resolutions
// are strictly decreasing, so a binary search would do; the lists are short
// (≤ 31) and a linear scan is as fast and obviously right.
func (g *Gridset) closestLevel(res float64) int {
	best, bestErr := 0, math.Inf(1)
	for z, l := range g.Levels {
		if e := math.Abs(res - l.Resolution); e < bestErr {
			best, bestErr = z, e
		}
	}
	return best
}

// Meta is a metatile: the block of tiles fetched from the upstream with one
// GetMap, plus a gutter of extra pixels on the sides that do not touch the
// gridset's edge (labels and wide lines crossing tile edges then render the
// same in neighbouring metatiles).
type Meta struct {
	Z     int
	Tiles Range // the tiles it holds, inclusive
	// BBox is the area requested upstream, gutter included.
	BBox          BBox
	Width, Height int // pixels requested upstream, gutter included
	Gutter        struct{ Left, Top, Right, Bottom int }
}

// Cols and Rows are the metatile's size in tiles.
func (m Meta) Cols() int { return int(m.Tiles.MaxX - m.Tiles.MinX + 1) }
func (m Meta) Rows() int { return int(m.Tiles.MaxY - m.Tiles.MinY + 1) }

// TileAt is the tile at column c, row r of the metatile image, r counted
// from the top (image order).
func (m Meta) TileAt(c, r int) Index {
	return Index{X: m.Tiles.MinX + int64(c), Y: m.Tiles.MaxY - int64(r), Z: m.Z}
}

// Key identifies the metatile within its level: equal for every tile in
// it, so it can name a single upstream fetch.
func (m Meta) Key() Index { return Index{X: m.Tiles.MinX, Y: m.Tiles.MinY, Z: m.Z} }

// MetaTile returns the metatile of metaW×metaH tiles holding idx. Metatiles
// are aligned on multiples of their size counted from the grid origin (as
// GeoWebCache aligns them) and clipped to cover, the tiles the layer has at
// that level; idx must lie inside cover.
func (g *Gridset) MetaTile(idx Index, metaW, metaH, gutter int, cover Range) (Meta, error) {
	if !cover.Contains(idx.X, idx.Y) {
		return Meta{}, fmt.Errorf("tile %v outside coverage %v", idx, cover)
	}
	x0 := idx.X - idx.X%int64(metaW)
	y0 := idx.Y - idx.Y%int64(metaH)
	tiles := Range{x0, y0, x0 + int64(metaW) - 1, y0 + int64(metaH) - 1}.Intersect(cover)
	m := Meta{Z: idx.Z, Tiles: tiles}
	b := g.rectBBox(idx.Z, tiles.MinX, tiles.MinY, tiles.MaxX, tiles.MaxY)
	grid := g.GridRange(idx.Z)
	res := g.Levels[idx.Z].Resolution
	gu := float64(gutter) * res
	if gutter > 0 {
		if tiles.MinX > grid.MinX {
			m.Gutter.Left, b.MinX = gutter, b.MinX-gu
		}
		if tiles.MaxX < grid.MaxX {
			m.Gutter.Right, b.MaxX = gutter, b.MaxX+gu
		}
		if tiles.MinY > grid.MinY {
			m.Gutter.Bottom, b.MinY = gutter, b.MinY-gu
		}
		if tiles.MaxY < grid.MaxY {
			m.Gutter.Top, b.MaxY = gutter, b.MaxY+gu
		}
	}
	m.BBox = b
	m.Width = m.Cols()*g.TileWidth + m.Gutter.Left + m.Gutter.Right
	m.Height = m.Rows()*g.TileHeight + m.Gutter.Top + m.Gutter.Bottom
	return m, nil
}
