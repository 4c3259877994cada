// Package gridset describes tile grids the way GeoWebCache does: an SRS, an
// extent, an origin corner and a list of resolutions, one per zoom level.
// It maps bounding boxes to tile indexes and back, and computes the metatile
// a tile belongs to. Tile indexes follow GeoWebCache: x counts from the left,
// y counts from the bottom, whatever the gridset's origin corner.
package gridset

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// BBox is an axis-aligned rectangle in the gridset's CRS units, always in
// x/y (easting/northing, lon/lat) order, whatever the CRS's axis order.
type BBox struct{ MinX, MinY, MaxX, MaxY float64 }

// Index names one tile: column X from the left, row Y from the bottom, level Z.
type Index struct {
	X, Y int64
	Z    int
}

// Level is one zoom level (GeoWebCache's "Grid").
type Level struct {
	Name             string  // "EPSG:4326:0"
	Resolution       float64 // CRS units per pixel
	ScaleDenominator float64
	TilesWide        int64 // tiles covering the gridset extent at this level
	TilesHigh        int64
}

// Gridset is immutable once built.
type Gridset struct {
	Name          string
	SRS           int  // EPSG code, e.g. 4326, 900913
	Extent        BBox // the (possibly adjusted) gridset extent
	TopLeft       bool // origin at the top-left corner (GWC alignTopLeft)
	YFirst        bool // CRS axis order is y,x (WMS 1.3.0 BBOX/CRS, WMTS corners)
	TileWidth     int
	TileHeight    int
	MetersPerUnit float64
	PixelSize     float64 // metres per pixel for scale computations, 0.00028
	Levels        []Level
}

// Range is an inclusive rectangle of tile indexes at one level.
type Range struct {
	MinX, MinY, MaxX, MaxY int64
}

// Contains reports whether the column/row lies inside r.
func (r Range) Contains(x, y int64) bool {
	return x >= r.MinX && x <= r.MaxX && y >= r.MinY && y <= r.MaxY
}

// Empty reports whether r holds no tile.
func (r Range) Empty() bool { return r.MaxX < r.MinX || r.MaxY < r.MinY }

// Count is the number of tiles in r.
func (r Range) Count() int64 {
	if r.Empty() {
		return 0
	}
	return (r.MaxX - r.MinX + 1) * (r.MaxY - r.MinY + 1)
}

// Intersect returns the overlap of r and o (possibly empty).
func (r Range) Intersect(o Range) Range {
	return Range{max(r.MinX, o.MinX), max(r.MinY, o.MinY), min(r.MaxX, o.MaxX), min(r.MaxY, o.MaxY)}
}

// TileBBox returns the area a tile covers.
func (g *Gridset) TileBBox(idx Index) BBox {
	return g.rectBBox(idx.Z, idx.X, idx.Y, idx.X, idx.Y)
}

// rectBBox is the area of the tiles minX..maxX × minY..maxY at level z.
// Coordinates are computed from the origin corner, as GeoWebCache does, so
// that tiles line up with what GWC clients compute.
func (g *Gridset) rectBBox(z int, minX, minY, maxX, maxY int64) BBox {
	l := g.Levels[z]
	w := l.Resolution * float64(g.TileWidth)
	h := l.Resolution * float64(g.TileHeight)
	b := BBox{
		MinX: g.Extent.MinX + w*float64(minX),
		MaxX: g.Extent.MinX + w*float64(maxX+1),
	}
	if g.TopLeft {
		b.MinY = g.Extent.MaxY - h*float64(l.TilesHigh-minY)
		b.MaxY = g.Extent.MaxY - h*float64(l.TilesHigh-maxY-1)
	} else {
		b.MinY = g.Extent.MinY + h*float64(minY)
		b.MaxY = g.Extent.MinY + h*float64(maxY+1)
	}
	return b
}

// originY is the y coordinate that row 0 counts from at level z.
func (g *Gridset) originY(z int) float64 {
	if g.TopLeft {
		l := g.Levels[z]
		return g.Extent.MaxY - l.Resolution*float64(g.TileHeight)*float64(l.TilesHigh)
	}
	return g.Extent.MinY
}

// GridRange is every tile of level z.
func (g *Gridset) GridRange(z int) Range {
	l := g.Levels[z]
	return Range{0, 0, l.TilesWide - 1, l.TilesHigh - 1}
}

// coverSliver is the overlap, as a fraction of a tile's width or height,
// below which Cover leaves a tile out: floating-point rounding, not area.
// A millionth of a tile (a 4000th of a pixel of a 256-pixel tile) is far
// above the rounding of tile edges a client computes another way (a unit
// in the last place of a coordinate is 10⁻⁷ of a tile at web mercator's
// level 30, whose tiles are 3.7 cm wide) and far below anything a map shows.
const coverSliver = 1e-6

// Cover returns, for every level, the tiles that b overlaps (clipped to
// the grid): every tile it overlaps by a positive area, as GeoWebCache's
// GridSet.closestRectangle takes them, except that an overlap thinner than
// coverSliver of a tile is rounding, so that a box on tile boundaries
// written out by another program does not pull in the neighbours.
func (g *Gridset) Cover(b BBox) []Range {
	out := make([]Range, len(g.Levels))
	for z, l := range g.Levels {
		w := l.Resolution * float64(g.TileWidth)
		h := l.Resolution * float64(g.TileHeight)
		oy := g.originY(z)
		r := Range{
			MinX: tileIndex(math.Floor((b.MinX-g.Extent.MinX)/w+coverSliver), l.TilesWide),
			MinY: tileIndex(math.Floor((b.MinY-oy)/h+coverSliver), l.TilesHigh),
			MaxX: tileIndex(math.Ceil((b.MaxX-g.Extent.MinX)/w-coverSliver), l.TilesWide) - 1,
			MaxY: tileIndex(math.Ceil((b.MaxY-oy)/h-coverSliver), l.TilesHigh) - 1,
		}
		out[z] = r.Intersect(g.GridRange(z))
	}
	return out
}

// tileIndex converts a whole number of tiles from the origin to an index,
// held within -1..n+1 first: far-off coordinates (a polygon's pole, a box
// of ±1e300) would overflow int64, and anything outside the grid is
// clipped anyway.
func tileIndex(v float64, n int64) int64 {
	return int64(max(-1, min(v, float64(n)+1)))
}

// GeoWebCache's constants, so that level numbers, resolutions and scale
// denominators are the ones GWC clients and WMTS documents expect.
const (
	DefaultPixelSize = 0.00028 // metres per pixel: OGC's standardised 90.7 DPI
	DefaultLevels    = 22
	// Metres per degree on the equator of the WGS84 ellipsoid's major axis.
	EPSG4326MetersPerUnit = 6378137.0 * 2.0 * math.Pi / 360.0
	// Half the width of the spherical Mercator world, as GWC rounds it.
	WebMercatorExtent = 20037508.34
)

// Config is a gridset as configured (Caddyfile `gridset` block, JSON
// "gridsets"). Give either Resolutions, ScaleDenominators, or Levels (the
// resolutions are then derived from the extent as GWC does: the coarsest
// level covers the extent with one tile on its shorter side, each next
// level halves the resolution).
type Config struct {
	Name              string     `json:"name"`
	SRS               string     `json:"srs"`    // "EPSG:2056"
	Extent            [4]float64 `json:"extent"` // minx, miny, maxx, maxy in CRS units
	Resolutions       []float64  `json:"resolutions,omitempty"`
	ScaleDenominators []float64  `json:"scale_denominators,omitempty"`
	Levels            int        `json:"levels,omitempty"`
	TileWidth         int        `json:"tile_width,omitempty"`  // default 256
	TileHeight        int        `json:"tile_height,omitempty"` // default 256
	// Origin is "bottom_left" (default, as GWC's alignTopLeft=false) or "top_left".
	Origin        string  `json:"origin,omitempty"`
	MetersPerUnit float64 `json:"meters_per_unit,omitempty"` // default: 4326 → degrees, else 1
	PixelSize     float64 `json:"pixel_size,omitempty"`      // default 0.00028
	// YFirst marks a CRS whose axis order is northing/latitude first, which
	// matters for WMS 1.3.0 BBOX and WMTS corners. EPSG:4326 is always so.
	YFirst bool `json:"y_first,omitempty"`
}

// New builds a gridset from its configuration, checking it.
func New(c Config) (*Gridset, error) {
	if c.Name == "" {
		return nil, errors.New("gridset: name is required")
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("gridset %s: %s", c.Name, fmt.Sprintf(format, a...))
	}
	srs, _, err := ParseSRS(c.SRS)
	if err != nil {
		return nil, fail("%v", err)
	}
	ext := BBox{c.Extent[0], c.Extent[1], c.Extent[2], c.Extent[3]}
	if !ext.valid() {
		return nil, fail("extent must be minx miny maxx maxy with min < max")
	}
	g := &Gridset{
		Name: c.Name, SRS: srs, Extent: ext,
		TileWidth: c.TileWidth, TileHeight: c.TileHeight,
		MetersPerUnit: c.MetersPerUnit, PixelSize: c.PixelSize,
		YFirst: c.YFirst || srs == 4326,
	}
	switch c.Origin {
	case "", "bottom_left":
	case "top_left":
		g.TopLeft = true
	default:
		return nil, fail("origin must be bottom_left or top_left, not %q", c.Origin)
	}
	if g.TileWidth == 0 {
		g.TileWidth = 256
	}
	if g.TileHeight == 0 {
		g.TileHeight = 256
	}
	if g.TileWidth < 1 || g.TileHeight < 1 || g.TileWidth > 4096 || g.TileHeight > 4096 {
		return nil, fail("tile size must be 1..4096 pixels")
	}
	if g.PixelSize == 0 {
		g.PixelSize = DefaultPixelSize
	}
	if g.MetersPerUnit == 0 {
		g.MetersPerUnit = 1
		if srs == 4326 {
			g.MetersPerUnit = EPSG4326MetersPerUnit
		}
	}
	if g.PixelSize < 0 || g.MetersPerUnit < 0 {
		return nil, fail("pixel_size and meters_per_unit must be positive")
	}
	set := 0
	for _, given := range []bool{len(c.Resolutions) > 0, len(c.ScaleDenominators) > 0, c.Levels > 0} {
		if given {
			set++
		}
	}
	if set != 1 {
		return nil, fail("give exactly one of resolutions, scale_denominators or levels")
	}
	res := c.Resolutions
	switch {
	case len(c.ScaleDenominators) > 0:
		res = make([]float64, len(c.ScaleDenominators))
		for i, s := range c.ScaleDenominators {
			res[i] = g.PixelSize * s / g.MetersPerUnit
		}
	case c.Levels > 0:
		res = g.levelResolutions(c.Levels)
	}
	if len(res) > 64 {
		return nil, fail("at most 64 levels")
	}
	for i, r := range res {
		if !(r > 0) || math.IsInf(r, 0) || (i > 0 && r >= res[i-1]) {
			return nil, fail("resolutions must be positive and strictly decreasing (level %d)", i)
		}
	}
	g.Levels = make([]Level, len(res))
	for i, r := range res {
		w := r * float64(g.TileWidth)
		h := r * float64(g.TileHeight)
		l := Level{
			Name:       g.Name + ":" + strconv.Itoa(i),
			Resolution: r,
			// GWC counts a sliver under 1% of a tile as no tile.
			TilesWide: int64(math.Ceil((g.Extent.MaxX - g.Extent.MinX - 0.01*w) / w)),
			TilesHigh: int64(math.Ceil((g.Extent.MaxY - g.Extent.MinY - 0.01*h) / h)),
		}
		if len(c.ScaleDenominators) > 0 {
			l.ScaleDenominator = c.ScaleDenominators[i]
		} else {
			// GWC uses the default pixel size here whatever the gridset's.
			l.ScaleDenominator = r * g.MetersPerUnit / DefaultPixelSize
		}
		g.Levels[i] = l
	}
	return g, nil
}

// levelResolutions derives n halving resolutions from the extent, the way
// GWC's GridSetFactory does for its built-in EPSG:4326 gridset, and
// stretches the extent to a whole number of tiles at level 0.
func (g *Gridset) levelResolutions(n int) []float64 {
	w, h := g.Extent.MaxX-g.Extent.MinX, g.Extent.MaxY-g.Extent.MinY
	resX, resY := w/float64(g.TileWidth), h/float64(g.TileHeight)
	tilesWide, tilesHigh := 1.0, 1.0
	if resX <= resY {
		tilesHigh = math.Round(resY / resX)
		resY /= tilesHigh
	} else {
		tilesWide = math.Round(resX / resY)
		resX /= tilesWide
	}
	r := math.Max(resX, resY)
	g.Extent.MaxX = g.Extent.MinX + tilesWide*float64(g.TileWidth)*r
	if g.TopLeft {
		g.Extent.MinY = g.Extent.MaxY - tilesHigh*float64(g.TileHeight)*r
	} else {
		g.Extent.MaxY = g.Extent.MinY + tilesHigh*float64(g.TileHeight)*r
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = r / math.Exp2(float64(i))
	}
	return out
}

// Builtin returns GeoWebCache's built-in gridsets by name: "EPSG:4326" and
// "EPSG:900913". Each call returns the same shared, immutable value.
func Builtin(name string) (*Gridset, bool) {
	g, ok := builtins[name]
	return g, ok
}

// BuiltinNames lists the built-in gridsets.
func BuiltinNames() []string { return []string{"EPSG:4326", "EPSG:900913"} }

var builtins = func() map[string]*Gridset {
	wgs84, err := New(Config{
		Name: "EPSG:4326", SRS: "EPSG:4326",
		Extent: [4]float64{-180, -90, 180, 90}, Levels: DefaultLevels,
	})
	if err != nil {
		panic(err)
	}
	res := make([]float64, 31)
	for i := range res {
		res[i] = 156543.03390625 / math.Exp2(float64(i))
	}
	mercator, err := New(Config{
		Name: "EPSG:900913", SRS: "EPSG:900913",
		Extent:      [4]float64{-WebMercatorExtent, -WebMercatorExtent, WebMercatorExtent, WebMercatorExtent},
		Resolutions: res, MetersPerUnit: 1,
	})
	if err != nil {
		panic(err)
	}
	return map[string]*Gridset{wgs84.Name: wgs84, mercator.Name: mercator}
}()

// ParseSRS reads an SRS or CRS parameter: "EPSG:4326", "epsg:3857",
// "urn:ogc:def:crs:EPSG::4326", "http://www.opengis.net/def/crs/EPSG/0/4326"
// or "CRS:84". It returns the EPSG code and whether the axis order is
// forced to x,y (CRS:84 is lon/lat where EPSG:4326 is lat/lon).
func ParseSRS(s string) (code int, xy bool, err error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	var num string
	switch {
	case u == "CRS:84" || u == "URN:OGC:DEF:CRS:OGC:1.3:CRS84" || u == "HTTP://WWW.OPENGIS.NET/DEF/CRS/OGC/1.3/CRS84":
		return 4326, true, nil
	case strings.HasPrefix(u, "EPSG:"):
		num = u[len("EPSG:"):]
	case strings.HasPrefix(u, "URN:OGC:DEF:CRS:EPSG:"):
		num = u[strings.LastIndexByte(u, ':')+1:]
	case strings.HasPrefix(u, "HTTP://WWW.OPENGIS.NET/DEF/CRS/EPSG/"):
		num = u[strings.LastIndexByte(u, '/')+1:]
	default:
		return 0, false, fmt.Errorf("unknown SRS %q", s)
	}
	code, err = strconv.Atoi(num)
	if err != nil || code <= 0 {
		return 0, false, fmt.Errorf("unknown SRS %q", s)
	}
	return code, false, nil
}

// CanonicalSRS folds the codes GWC treats as one: 3857, 102113 and 102100
// are the spherical Mercator that GWC calls 900913.
func CanonicalSRS(code int) int {
	switch code {
	case 3857, 102113, 102100:
		return 900913
	}
	return code
}

// SameSRS reports whether two EPSG codes name the same CRS for tiling.
func SameSRS(a, b int) bool { return CanonicalSRS(a) == CanonicalSRS(b) }

// FromLonLat converts a WGS84 lon/lat box into the gridset's CRS, for the
// CRSs this package knows how to project (geographic 4326 and spherical
// Mercator). ok is false for any other CRS: the caller must then be given
// the extent in the gridset's own units.
func (g *Gridset) FromLonLat(b BBox) (out BBox, ok bool) {
	switch CanonicalSRS(g.SRS) {
	case 4326:
		return b, true
	case 900913:
		const r = 6378137.0
		merc := func(lon, lat float64) (float64, float64) {
			lat = math.Max(-85.0511287798066, math.Min(85.0511287798066, lat))
			return r * lon * math.Pi / 180, r * math.Log(math.Tan(math.Pi/4+lat*math.Pi/360))
		}
		out.MinX, out.MinY = merc(b.MinX, b.MinY)
		out.MaxX, out.MaxY = merc(b.MaxX, b.MaxY)
		return out, true
	}
	return BBox{}, false
}

// ToLonLat unprojects a box of a geographic or spherical Mercator gridset
// into WGS84 lon/lat; ok is false for any other CRS, which this package
// cannot unproject.
func (g *Gridset) ToLonLat(b BBox) (out BBox, ok bool) {
	switch CanonicalSRS(g.SRS) {
	case 4326:
		return b, true
	case 900913:
		const r = 6378137.0
		lon := func(x float64) float64 { return x / r * 180 / math.Pi }
		lat := func(y float64) float64 { return (2*math.Atan(math.Exp(y/r)) - math.Pi/2) * 180 / math.Pi }
		return BBox{MinX: lon(b.MinX), MinY: lat(b.MinY), MaxX: lon(b.MaxX), MaxY: lat(b.MaxY)}, true
	}
	return BBox{}, false
}

// Intersect is the part of b inside o; it is inverted (min > max) when
// they do not overlap.
func (b BBox) Intersect(o BBox) BBox {
	return BBox{MinX: math.Max(b.MinX, o.MinX), MinY: math.Max(b.MinY, o.MinY),
		MaxX: math.Min(b.MaxX, o.MaxX), MaxY: math.Min(b.MaxY, o.MaxY)}
}

// Union is the smallest box holding both b and o.
func (b BBox) Union(o BBox) BBox {
	return BBox{MinX: math.Min(b.MinX, o.MinX), MinY: math.Min(b.MinY, o.MinY),
		MaxX: math.Max(b.MaxX, o.MaxX), MaxY: math.Max(b.MaxY, o.MaxY)}
}
