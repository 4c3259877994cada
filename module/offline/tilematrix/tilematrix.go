// Package tilematrix sees a gridset the way tile files describe a tile
// pyramid: one bounding box for every level, tile (0, 0) of each level at
// its top-left corner, rows counted downwards (GeoPackage, WMTS), or from
// the bottom (MBTiles, TMS). The cache's own indexes count rows from the
// bottom whatever the gridset's origin (GeoWebCache's rule, package
// gridset), so this is where rows are turned over, and where a file's tile
// matrices are compared with a gridset before its tiles are imported.
package tilematrix

import (
	"fmt"
	"math"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// Set is a gridset as a tile matrix set.
type Set struct {
	Gridset *gridset.Gridset
	// EPSG is the code files use for the gridset's CRS: 3857 for the
	// spherical Mercator that GeoWebCache calls 900913.
	EPSG int
	// BBox is the area every level's matrix covers: the gridset's extent
	// rounded out to whole tiles on the side away from its origin.
	BBox gridset.BBox
}

// Matrix is one level.
type Matrix struct {
	Width, Height         int64 // tiles
	TileWidth, TileHeight int   // pixels
	PixelX, PixelY        float64
}

// New describes g as a tile matrix set. A file format that gives every
// level the same bounding box (GeoPackage requires it) cannot hold a
// gridset whose levels cover different areas, which a gridset with
// resolutions that do not divide its extent has: that is an error naming
// the first such level.
func New(g *gridset.Gridset) (*Set, error) {
	s := &Set{Gridset: g, EPSG: EPSG(g.SRS), BBox: levelBBox(g, 0)}
	for z := 1; z < len(g.Levels); z++ {
		b := levelBBox(g, z)
		tol := 0.01 * g.Levels[z].Resolution // a hundredth of a pixel
		if math.Abs(b.MinX-s.BBox.MinX) > tol || math.Abs(b.MaxX-s.BBox.MaxX) > tol ||
			math.Abs(b.MinY-s.BBox.MinY) > tol || math.Abs(b.MaxY-s.BBox.MaxY) > tol {
			return nil, fmt.Errorf("gridset %s: level %d covers %v, level 0 covers %v: a tile matrix set needs one extent for all levels", g.Name, z, b, s.BBox)
		}
	}
	return s, nil
}

// levelBBox is the area level z's tiles cover, anchored at the gridset's
// origin corner.
func levelBBox(g *gridset.Gridset, z int) gridset.BBox {
	l := g.Levels[z]
	w := l.Resolution * float64(g.TileWidth) * float64(l.TilesWide)
	h := l.Resolution * float64(g.TileHeight) * float64(l.TilesHigh)
	b := gridset.BBox{MinX: g.Extent.MinX, MaxX: g.Extent.MinX + w}
	if g.TopLeft {
		b.MaxY, b.MinY = g.Extent.MaxY, g.Extent.MaxY-h
	} else {
		b.MinY, b.MaxY = g.Extent.MinY, g.Extent.MinY+h
	}
	return b
}

// EPSG is the code files use for a gridset's SRS.
func EPSG(srs int) int {
	if gridset.CanonicalSRS(srs) == 900913 {
		return 3857
	}
	return srs
}

// Level is level z's matrix.
func (s *Set) Level(z int) Matrix {
	g := s.Gridset
	l := g.Levels[z]
	return Matrix{
		Width: l.TilesWide, Height: l.TilesHigh,
		TileWidth: g.TileWidth, TileHeight: g.TileHeight,
		PixelX: l.Resolution, PixelY: l.Resolution,
	}
}

// TopRow is the tile's row counted from the top, as GeoPackage counts.
func (s *Set) TopRow(idx gridset.Index) int64 {
	return s.Gridset.Levels[idx.Z].TilesHigh - 1 - idx.Y
}

// FromTopRow is the tile at column x, row counted from the top, of level z.
func (s *Set) FromTopRow(z int, x, row int64) gridset.Index {
	return gridset.Index{Z: z, X: x, Y: s.Gridset.Levels[z].TilesHigh - 1 - row}
}

// Contains reports whether idx is a tile of the gridset.
func (s *Set) Contains(idx gridset.Index) bool {
	if idx.Z < 0 || idx.Z >= len(s.Gridset.Levels) {
		return false
	}
	return s.Gridset.GridRange(idx.Z).Contains(idx.X, idx.Y)
}

// Found is what a file says of its tile matrix set.
type Found struct {
	EPSG   int // 0: the file names no EPSG code
	SRS    string
	BBox   gridset.BBox
	Levels []FoundLevel
}

// FoundLevel is one level of a file's tile matrix set.
type FoundLevel struct {
	Zoom                  int // the file's level number
	Width, Height         int64
	TileWidth, TileHeight int
	PixelX, PixelY        float64
}

// Match compares a file's tile matrix set with the gridset and returns,
// for each of the file's levels, the gridset level it is. The error is one
// line naming the first thing that differs.
func (s *Set) Match(f Found) (map[int]int, error) {
	g := s.Gridset
	if f.EPSG == 0 || !gridset.SameSRS(f.EPSG, g.SRS) {
		return nil, fmt.Errorf("SRS %s is not gridset %s's EPSG:%d", f.SRS, g.Name, s.EPSG)
	}
	// The origin is what places every tile; a tenth of the finest pixel
	// absorbs the digits writers round the web mercator extent to
	// (20037508.34 here, 20037508.342789244 in GDAL). A file without
	// levels (an empty tile set) is held to the gridset's finest.
	finest := g.Levels[len(g.Levels)-1].Resolution
	if len(f.Levels) > 0 {
		finest = math.Inf(1)
	}
	for _, l := range f.Levels {
		finest = math.Min(finest, math.Min(l.PixelX, l.PixelY))
	}
	tol := 0.1 * finest
	if math.Abs(f.BBox.MinX-s.BBox.MinX) > tol || math.Abs(f.BBox.MaxY-s.BBox.MaxY) > tol {
		return nil, fmt.Errorf("tile matrix origin (%g, %g) is not gridset %s's top-left corner (%g, %g)",
			f.BBox.MinX, f.BBox.MaxY, g.Name, s.BBox.MinX, s.BBox.MaxY)
	}
	out := make(map[int]int, len(f.Levels))
	for _, l := range f.Levels {
		if l.TileWidth != g.TileWidth || l.TileHeight != g.TileHeight {
			return nil, fmt.Errorf("level %d: tile size %d×%d is not gridset %s's %d×%d",
				l.Zoom, l.TileWidth, l.TileHeight, g.Name, g.TileWidth, g.TileHeight)
		}
		z := -1
		for i, gl := range g.Levels {
			if closeTo(l.PixelX, gl.Resolution) && closeTo(l.PixelY, gl.Resolution) {
				z = i
				break
			}
		}
		if z < 0 {
			return nil, fmt.Errorf("level %d: pixel size %g×%g is no level of gridset %s", l.Zoom, l.PixelX, l.PixelY, g.Name)
		}
		m := s.Level(z)
		if l.Width != m.Width || l.Height != m.Height {
			return nil, fmt.Errorf("level %d: %d×%d tiles, gridset %s's level %d has %d×%d",
				l.Zoom, l.Width, l.Height, g.Name, z, m.Width, m.Height)
		}
		out[l.Zoom] = z
	}
	return out, nil
}

// closeTo compares resolutions: a millionth apart is rounding in a file
// (a resolution printed with fewer digits), not another level, whose
// resolution differs by far more.
func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(a, b) }

// CheckWebMercatorQuad checks that g is the grid an MBTiles file assumes:
// spherical Mercator over the whole world, 2^z × 2^z tiles at level z, of
// the given pixel size (MBTiles 1.3 does not fix one; the tiles say it).
func CheckWebMercatorQuad(g *gridset.Gridset, tileW, tileH int) error {
	if gridset.CanonicalSRS(g.SRS) != 900913 {
		return fmt.Errorf("MBTiles holds web mercator (EPSG:3857) tiles, gridset %s is EPSG:%d", g.Name, g.SRS)
	}
	if tileW != g.TileWidth || tileH != g.TileHeight {
		return fmt.Errorf("tile size %d×%d is not gridset %s's %d×%d", tileW, tileH, g.Name, g.TileWidth, g.TileHeight)
	}
	const world = gridset.WebMercatorExtent
	tol := 1.0 // metres: writers round the extent to a few millimetres
	e := g.Extent
	if math.Abs(e.MinX+world) > tol || math.Abs(e.MaxX-world) > tol || math.Abs(e.MinY+world) > tol || math.Abs(e.MaxY-world) > tol {
		return fmt.Errorf("MBTiles covers the web mercator world, gridset %s's extent is %v", g.Name, e)
	}
	for z, l := range g.Levels {
		n := int64(1) << z
		if l.TilesWide != n || l.TilesHigh != n {
			return fmt.Errorf("MBTiles zoom %d has %d×%d tiles, gridset %s's level %d has %d×%d", z, n, n, g.Name, z, l.TilesWide, l.TilesHigh)
		}
		if z >= 62 {
			break
		}
	}
	return nil
}
