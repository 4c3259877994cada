package gridset

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func near(a, b, relTol float64) bool {
	return math.Abs(a-b) <= relTol*math.Max(math.Abs(a), math.Abs(b))
}

// The figures GeoWebCache publishes for its built-in gridsets (its gridset
// pages and WMTS capabilities): level counts, level-0 resolution and scale,
// and tile counts per level.
func TestBuiltinEPSG4326MatchesGeoWebCache(t *testing.T) {
	g, ok := Builtin("EPSG:4326")
	if !ok {
		t.Fatal("no EPSG:4326")
	}
	if len(g.Levels) != 22 || g.SRS != 4326 || !g.YFirst || g.TopLeft {
		t.Fatalf("levels=%d srs=%d yfirst=%v topleft=%v", len(g.Levels), g.SRS, g.YFirst, g.TopLeft)
	}
	if g.Extent != (BBox{-180, -90, 180, 90}) {
		t.Fatalf("extent %v", g.Extent)
	}
	for z, l := range g.Levels {
		wantRes := 0.703125 / math.Exp2(float64(z))
		if !near(l.Resolution, wantRes, 1e-12) {
			t.Errorf("z%d res %v want %v", z, l.Resolution, wantRes)
		}
		wantScale := 279541132.0143589 / math.Exp2(float64(z))
		if !near(l.ScaleDenominator, wantScale, 1e-9) {
			t.Errorf("z%d scale %v want %v", z, l.ScaleDenominator, wantScale)
		}
		if l.TilesWide != 1<<(z+1) || l.TilesHigh != 1<<z {
			t.Errorf("z%d tiles %dx%d", z, l.TilesWide, l.TilesHigh)
		}
		if l.Name != "EPSG:4326:"+strconv.Itoa(z) {
			t.Errorf("z%d name %q", z, l.Name)
		}
	}
}

func TestBuiltinEPSG900913MatchesGeoWebCache(t *testing.T) {
	g, _ := Builtin("EPSG:900913")
	if len(g.Levels) != 31 || g.SRS != 900913 || g.YFirst {
		t.Fatalf("levels=%d srs=%d yfirst=%v", len(g.Levels), g.SRS, g.YFirst)
	}
	for z, l := range g.Levels {
		if !near(l.Resolution, 156543.03390625/math.Exp2(float64(z)), 1e-12) {
			t.Errorf("z%d res %v", z, l.Resolution)
		}
		if !near(l.ScaleDenominator, 559082264.0287178/math.Exp2(float64(z)), 1e-9) {
			t.Errorf("z%d scale %v", z, l.ScaleDenominator)
		}
		if l.TilesWide != 1<<z || l.TilesHigh != 1<<z {
			t.Errorf("z%d tiles %dx%d", z, l.TilesWide, l.TilesHigh)
		}
	}
}

func TestTileBBoxAndMatchRoundTrip(t *testing.T) {
	for _, name := range BuiltinNames() {
		g, _ := Builtin(name)
		for z := 0; z < len(g.Levels); z += 3 {
			l := g.Levels[z]
			for _, idx := range []Index{{0, 0, z}, {l.TilesWide - 1, l.TilesHigh - 1, z}, {l.TilesWide / 2, l.TilesHigh / 3, z}} {
				got, err := g.Match(g.TileBBox(idx), 256, 256)
				if err != nil || got != idx {
					t.Errorf("%s %v: got %v, %v", name, idx, got, err)
				}
			}
		}
	}
}

func TestKnownTiles(t *testing.T) {
	g, _ := Builtin("EPSG:4326")
	// Level 0: two tiles, the western one is x=0.
	if b := g.TileBBox(Index{0, 0, 0}); b != (BBox{-180, -90, 0, 90}) {
		t.Errorf("4326 0/0/0 = %v", b)
	}
	// y counts from the bottom: at level 1 row 1 is the northern half.
	if b := g.TileBBox(Index{3, 1, 1}); b != (BBox{90, 0, 180, 90}) {
		t.Errorf("4326 3/1/1 = %v", b)
	}
	m, _ := Builtin("EPSG:900913")
	b := m.TileBBox(Index{1, 1, 1})
	if b.MinX != 0 || b.MinY != 0 || !near(b.MaxX, WebMercatorExtent, 1e-9) || !near(b.MaxY, WebMercatorExtent, 1e-9) {
		t.Errorf("900913 1/1/1 = %v", b)
	}
}

// OpenLayers computes the Mercator grid from ±20037508.342789244; tiles
// must still match at every level GWC would match them.
func TestOpenLayersMercatorExtentMatches(t *testing.T) {
	g, _ := Builtin("EPSG:900913")
	const ol = 20037508.342789244
	for z := 0; z <= 24; z++ {
		n := math.Exp2(float64(z))
		span := 2 * ol / n
		x, y := int64(n)-1-int64(n)/3, int64(n)/3
		b := BBox{-ol + span*float64(x), -ol + span*float64(y), -ol + span*float64(x+1), -ol + span*float64(y+1)}
		got, err := g.Match(b, 256, 256)
		if err != nil || got != (Index{x, y, z}) {
			t.Errorf("z%d: got %v %v", z, got, err)
		}
	}
}

func TestMatchToleranceEdges(t *testing.T) {
	g, _ := Builtin("EPSG:4326")
	idx := Index{5, 3, 3}
	b := g.TileBBox(idx)
	span := b.MaxX - b.MinX
	shift := func(f float64) BBox { return BBox{b.MinX + f*span, b.MinY, b.MaxX + f*span, b.MaxY} }
	shiftY := func(f float64) BBox { return BBox{b.MinX, b.MinY + f*span, b.MaxX, b.MaxY + f*span} }
	for _, c := range []struct {
		name string
		b    BBox
		want error
	}{
		{"x +0.099", shift(0.099), nil},
		{"x -0.099", shift(-0.099), nil},
		{"x +0.101", shift(0.101), ErrAlignment},
		{"x -0.101", shift(-0.101), ErrAlignment},
		{"y +0.099", shiftY(0.099), nil},
		{"y -0.101", shiftY(-0.101), ErrAlignment},
		{"half tile", shift(0.5), ErrAlignment},
		{"stretched", BBox{b.MinX, b.MinY, b.MaxX + 0.2*span, b.MaxY}, ErrResolution},
		{"between levels", BBox{b.MinX, b.MinY, b.MinX + 1.5*span, b.MinY + 1.5*span}, ErrResolution},
		{"empty", BBox{b.MinX, b.MinY, b.MinX, b.MaxY}, ErrBBox},
		{"nan", BBox{math.NaN(), b.MinY, b.MaxX, b.MaxY}, ErrBBox},
		{"outside", BBox{b.MinX - 100*span, b.MinY, b.MaxX - 100*span, b.MaxY}, ErrOutside},
	} {
		got, err := g.Match(c.b, 256, 256)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v want %v", c.name, err, c.want)
		}
		if c.want == nil && got != idx {
			t.Errorf("%s: got %v want %v", c.name, got, idx)
		}
	}
	if _, err := g.Match(b, 512, 256); !errors.Is(err, ErrTileSize) {
		t.Errorf("size: %v", err)
	}
}

func TestCustomGridsetTopLeftAndScales(t *testing.T) {
	// A Swiss-style grid: top-left origin, given by scale denominators.
	g, err := New(Config{
		Name: "swiss", SRS: "EPSG:2056",
		Extent:            [4]float64{2420000, 1030000, 2900000, 1350000},
		ScaleDenominators: []float64{4000000, 2000000, 1000000},
		Origin:            "top_left",
	})
	if err != nil {
		t.Fatal(err)
	}
	// res = 0.00028 * scale / 1
	if !near(g.Levels[0].Resolution, 1120, 1e-12) || !near(g.Levels[2].Resolution, 280, 1e-12) {
		t.Fatalf("res %v %v", g.Levels[0].Resolution, g.Levels[2].Resolution)
	}
	// Level 0: 480000/(1120*256)=1.67 → 2 wide; 320000/286720=1.12 → 2 high.
	if g.Levels[0].TilesWide != 2 || g.Levels[0].TilesHigh != 2 {
		t.Fatalf("tiles %d x %d", g.Levels[0].TilesWide, g.Levels[0].TilesHigh)
	}
	// The top row (y = TilesHigh-1, counted from the bottom) starts at the extent's top.
	top := g.TileBBox(Index{0, 1, 0})
	if top.MaxY != 1350000 || top.MinX != 2420000 {
		t.Errorf("top-left tile %v", top)
	}
	got, err := g.Match(top, 256, 256)
	if err != nil || got != (Index{0, 1, 0}) {
		t.Errorf("match %v %v", got, err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	base := Config{Name: "g", SRS: "EPSG:3006", Extent: [4]float64{0, 0, 100, 100}, Resolutions: []float64{1, 0.5}}
	bad := map[string]func(c *Config){
		"no name":         func(c *Config) { c.Name = "" },
		"bad srs":         func(c *Config) { c.SRS = "foo" },
		"empty extent":    func(c *Config) { c.Extent = [4]float64{0, 0, 0, 100} },
		"increasing res":  func(c *Config) { c.Resolutions = []float64{1, 2} },
		"res and scales":  func(c *Config) { c.ScaleDenominators = []float64{1} },
		"nothing":         func(c *Config) { c.Resolutions = nil },
		"bad origin":      func(c *Config) { c.Origin = "middle" },
		"negative tile":   func(c *Config) { c.TileWidth = -1 },
		"zero resolution": func(c *Config) { c.Resolutions = []float64{1, 0} },
	}
	for name, mod := range bad {
		c := base
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(base); err != nil {
		t.Errorf("base rejected: %v", err)
	}
}

func TestParseSRS(t *testing.T) {
	for in, want := range map[string]int{
		"EPSG:4326": 4326, "epsg:3857": 3857, "urn:ogc:def:crs:EPSG::4326": 4326,
		"http://www.opengis.net/def/crs/EPSG/0/900913": 900913, "CRS:84": 4326,
	} {
		got, _, err := ParseSRS(in)
		if err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	if _, xy, _ := ParseSRS("CRS:84"); !xy {
		t.Error("CRS:84 must force x,y order")
	}
	for _, in := range []string{"", "EPSG:", "EPSG:abc", "EPSG:-1", "WGS84"} {
		if _, _, err := ParseSRS(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	for _, c := range []int{3857, 102113, 102100, 900913} {
		if !SameSRS(c, 900913) {
			t.Errorf("%d not an alias of 900913", c)
		}
	}
	if SameSRS(4326, 900913) {
		t.Error("4326 ≡ 900913")
	}
}

func TestCover(t *testing.T) {
	g, _ := Builtin("EPSG:4326")
	cov := g.Cover(BBox{-180, -90, 180, 90})
	for z, r := range cov {
		if r != g.GridRange(z) {
			t.Errorf("z%d full cover %v", z, r)
		}
	}
	// An extent on a tile boundary does not pull in the neighbours.
	cov = g.Cover(BBox{0, 0, 90, 90})
	if cov[1] != (Range{2, 1, 2, 1}) {
		t.Errorf("z1 %v", cov[1])
	}
	if cov[2] != (Range{4, 2, 5, 3}) || cov[2].Count() != 4 {
		t.Errorf("z2 %v", cov[2])
	}
	// Partly outside the grid: clipped.
	cov = g.Cover(BBox{170, 80, 200, 100})
	if cov[0] != (Range{1, 0, 1, 0}) {
		t.Errorf("clip %v", cov[0])
	}
	// Far outside (a polygon's pole lies at 1e100): clipped, not overflowed.
	cov = g.Cover(BBox{-1e300, 80, 1e300, 1e100})
	if cov[3] != (Range{0, 7, 15, 7}) {
		t.Errorf("far off %v", cov[3])
	}
}

// A box takes every tile it overlaps, however thinly, as GeoWebCache's
// closestRectangle does and as a polygon would; only an overlap thinner
// than rounding (a millionth of a tile) is none.
func TestCoverSlivers(t *testing.T) {
	for _, name := range BuiltinNames() {
		g, _ := Builtin(name)
		const z = 10
		tile := g.TileBBox(Index{X: 300, Y: 200, Z: z})
		w, h := tile.MaxX-tile.MinX, tile.MaxY-tile.MinY
		// 0.5 % of the next tile to the east and north, and of the one
		// before to the west and south: all four neighbours' rows and
		// columns are in.
		b := BBox{tile.MinX - 0.005*w, tile.MinY - 0.005*h, tile.MaxX + 0.005*w, tile.MaxY + 0.005*h}
		if got := g.Cover(b)[z]; got != (Range{299, 199, 301, 201}) {
			t.Errorf("%s: 0.5 %% slivers: %v", name, got)
		}
		// A box on the tile's edges, off by rounding (a few units in the
		// last place), is the tile alone.
		off := BBox{math.Nextafter(tile.MinX, math.Inf(-1)), math.Nextafter(tile.MinY, math.Inf(-1)),
			tile.MaxX + 4*(math.Nextafter(tile.MaxX, math.Inf(1))-tile.MaxX), math.Nextafter(tile.MaxY, math.Inf(1))}
		if got := g.Cover(off)[z]; got != (Range{300, 200, 300, 200}) {
			t.Errorf("%s: rounding off the edges: %v", name, got)
		}
	}
}

func TestMetaTileAlignmentGutterAndEdges(t *testing.T) {
	g, _ := Builtin("EPSG:900913")
	z := 4 // 16×16 tiles
	full := g.GridRange(z)
	// Interior metatile: aligned to multiples of 4, gutter on every side.
	m, err := g.MetaTile(Index{6, 9, z}, 4, 4, 10, full)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tiles != (Range{4, 8, 7, 11}) || m.Width != 4*256+20 || m.Height != 4*256+20 {
		t.Fatalf("interior %+v", m)
	}
	res := g.Levels[z].Resolution
	inner := g.rectBBox(z, 4, 8, 7, 11)
	if !near(m.BBox.MinX, inner.MinX-10*res, 1e-12) || !near(m.BBox.MaxY, inner.MaxY+10*res, 1e-12) {
		t.Errorf("gutter bbox %v inner %v", m.BBox, inner)
	}
	// Image row 0 is the top: the top-left tile of the image is the highest row.
	if m.TileAt(0, 0) != (Index{4, 11, z}) || m.TileAt(3, 3) != (Index{7, 8, z}) {
		t.Errorf("TileAt %v %v", m.TileAt(0, 0), m.TileAt(3, 3))
	}
	// Corner metatile at the grid's origin: no gutter left and bottom.
	m, _ = g.MetaTile(Index{1, 1, z}, 4, 4, 10, full)
	if m.Gutter.Left != 0 || m.Gutter.Bottom != 0 || m.Gutter.Right != 10 || m.Gutter.Top != 10 {
		t.Errorf("origin corner gutter %+v", m.Gutter)
	}
	// Levels smaller than a metatile are clipped to the grid.
	m, _ = g.MetaTile(Index{1, 0, 1}, 4, 4, 10, g.GridRange(1))
	if m.Tiles != (Range{0, 0, 1, 1}) || m.Width != 512 || m.Height != 512 || m.Gutter != (struct{ Left, Top, Right, Bottom int }{}) {
		t.Errorf("small level %+v", m)
	}
	// EPSG:4326 level 0 is 2×1 tiles.
	w, _ := Builtin("EPSG:4326")
	m, _ = w.MetaTile(Index{1, 0, 0}, 4, 4, 0, w.GridRange(0))
	if m.Cols() != 2 || m.Rows() != 1 || m.BBox != (BBox{-180, -90, 180, 90}) {
		t.Errorf("4326 z0 %+v", m)
	}
	// Clipped to a layer's coverage, and every tile in it shares the key.
	cov := Range{5, 5, 9, 9}
	a, _ := g.MetaTile(Index{5, 5, z}, 4, 4, 0, cov)
	b, _ := g.MetaTile(Index{7, 7, z}, 4, 4, 0, cov)
	if a.Tiles != (Range{5, 5, 7, 7}) || a.Key() != b.Key() {
		t.Errorf("coverage clip %v %v", a.Tiles, b.Tiles)
	}
	if _, err := g.MetaTile(Index{0, 0, z}, 4, 4, 0, cov); err == nil {
		t.Error("tile outside coverage accepted")
	}
}

func TestFromLonLat(t *testing.T) {
	g, _ := Builtin("EPSG:900913")
	b, ok := g.FromLonLat(BBox{-180, -85.0511287798066, 180, 85.0511287798066})
	if !ok || !near(b.MaxX, 20037508.342789244, 1e-12) || !near(b.MaxY, 20037508.342789244, 1e-9) {
		t.Errorf("%v %v", b, ok)
	}
	c, _ := New(Config{Name: "c", SRS: "EPSG:2056", Extent: [4]float64{0, 0, 1, 1}, Levels: 1})
	if _, ok := c.FromLonLat(BBox{0, 0, 1, 1}); ok {
		t.Error("projected an unknown CRS")
	}
}
