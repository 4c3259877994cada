package tilematrix

import (
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

func builtin(name string) *gridset.Gridset {
	g, _ := gridset.Builtin(name)
	return g
}

func TestNew(t *testing.T) {
	s, err := New(builtin("EPSG:4326"))
	if err != nil {
		t.Fatal(err)
	}
	if s.EPSG != 4326 || s.BBox != (gridset.BBox{MinX: -180, MinY: -90, MaxX: 180, MaxY: 90}) {
		t.Errorf("EPSG:4326: %d %v", s.EPSG, s.BBox)
	}
	if m := s.Level(3); m.Width != 16 || m.Height != 8 || m.TileWidth != 256 || m.PixelX != 180.0/256/8 {
		t.Errorf("level 3: %+v", m)
	}
	idx := gridset.Index{Z: 3, X: 5, Y: 1}
	if r := s.TopRow(idx); r != 6 {
		t.Errorf("top row of %v: %d", idx, r)
	}
	if back := s.FromTopRow(3, 5, 6); back != idx {
		t.Errorf("FromTopRow: %v", back)
	}
	m, err := New(builtin("EPSG:900913"))
	if err != nil || m.EPSG != 3857 {
		t.Errorf("EPSG:900913: %v %v", m, err)
	}
	// Levels that cover different areas cannot share a tile matrix set.
	g, err := gridset.New(gridset.Config{Name: "odd", SRS: "EPSG:2056", Extent: [4]float64{0, 0, 1000, 1000}, Resolutions: []float64{3, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(g); err == nil || !strings.Contains(err.Error(), "level 1 covers") {
		t.Errorf("inconsistent levels: %v", err)
	}
}

func TestMatch(t *testing.T) {
	s, _ := New(builtin("EPSG:900913"))
	gdal := 20037508.342789244
	level := func(z int, size int, w int64) FoundLevel {
		res := 156543.03390625 / float64(int(1)<<z)
		return FoundLevel{Zoom: z, Width: w, Height: w, TileWidth: size, TileHeight: size, PixelX: res, PixelY: res}
	}
	ok := Found{EPSG: 3857, SRS: "EPSG:3857", BBox: gridset.BBox{MinX: -gdal, MinY: -gdal, MaxX: gdal, MaxY: gdal},
		Levels: []FoundLevel{level(2, 256, 4), level(3, 256, 8)}}
	zooms, err := s.Match(ok)
	if err != nil || zooms[2] != 2 || zooms[3] != 3 {
		t.Fatalf("GDAL's GoogleMapsCompatible: %v %v", zooms, err)
	}
	for name, c := range map[string]struct {
		f    func(Found) Found
		want string
	}{
		"srs":       {func(f Found) Found { f.EPSG, f.SRS = 4326, "EPSG:4326"; return f }, "SRS EPSG:4326 is not gridset EPSG:900913's EPSG:3857"},
		"no epsg":   {func(f Found) Found { f.EPSG, f.SRS = 0, "NONE:-1"; return f }, "SRS NONE:-1 is not"},
		"origin":    {func(f Found) Found { f.BBox.MinX += 5000; return f }, "tile matrix origin"},
		"tile size": {func(f Found) Found { f.Levels = []FoundLevel{level(2, 512, 4)}; return f }, "level 2: tile size 512×512"},
		"matrix":    {func(f Found) Found { f.Levels = []FoundLevel{level(2, 256, 3)}; return f }, "level 2: 3×3 tiles, gridset EPSG:900913's level 2 has 4×4"},
		"resolution": {func(f Found) Found {
			l := level(2, 256, 4)
			l.PixelX *= 1.5
			f.Levels = []FoundLevel{l}
			return f
		}, "is no level of gridset"},
		"no levels, origin": {func(f Found) Found { f.Levels = nil; f.BBox.MaxY -= 1; return f }, "tile matrix origin"},
	} {
		_, err := s.Match(c.f(ok))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func TestCheckWebMercatorQuad(t *testing.T) {
	if err := CheckWebMercatorQuad(builtin("EPSG:900913"), 256, 256); err != nil {
		t.Error(err)
	}
	if err := CheckWebMercatorQuad(builtin("EPSG:4326"), 256, 256); err == nil {
		t.Error("EPSG:4326 passed")
	}
	if err := CheckWebMercatorQuad(builtin("EPSG:900913"), 512, 512); err == nil || !strings.Contains(err.Error(), "tile size 512×512") {
		t.Errorf("512: %v", err)
	}
	e := gridset.WebMercatorExtent
	half, _ := gridset.New(gridset.Config{Name: "half", SRS: "EPSG:3857", Extent: [4]float64{-e, 0, e, e}, Resolutions: []float64{156543.03390625}})
	if err := CheckWebMercatorQuad(half, 256, 256); err == nil || !strings.Contains(err.Error(), "extent") {
		t.Errorf("half world: %v", err)
	}
}
