package area

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

var square = Polygon{{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {0, 0}}}
var squareWithHole = Polygon{
	{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {0, 0}},
	{{1, 1}, {1, 2}, {2, 2}, {2, 1}, {1, 1}},
}

func TestParseGeoJSONForms(t *testing.T) {
	poly := `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1,9],[1,2,9],[2,2,9],[2,1,9],[1,1,9]]]}`
	multi := `{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[1,2],[2,2],[2,1],[1,1]]]]}`
	for _, c := range []struct {
		name, in string
		want     Geometry
	}{
		{"Polygon with z ignored", poly, Geometry{squareWithHole}},
		{"MultiPolygon", multi, Geometry{square, squareWithHole}},
		{"Feature", `{"type":"Feature","properties":{"n":1},"geometry":` + poly + `}`, Geometry{squareWithHole}},
		{"FeatureCollection", `{"type":"FeatureCollection","features":[{"type":"Feature","geometry":` + poly + `},{"type":"Feature","geometry":` + multi + `}]}`,
			Geometry{squareWithHole, square, squareWithHole}},
	} {
		g, err := ParseGeoJSON([]byte(c.in), Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(g, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, g, c.want)
		}
	}
}

func TestParseGeoJSONErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,1]]]}`, "polygon 0 ring 0 is not closed: its last position must repeat its first"},
		{`{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[2,2],[1,1]]]]}`, "polygon 1 ring 1 has 3 positions; a ring needs at least 4 (the last repeating the first)"},
		{`{"type":"Polygon","coordinates":[[[0,0],[4,0],[8,0],[0,0]]]}`, "polygon 0 ring 0 has zero area"},
		{`{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[2,5],[0,0]]]}`, "geometry has 5 vertices, more than the limit of 4"},
		{`{"type":"Polygon","coordinates":[[0,0],[4,0]]}`, "GeoJSON: Polygon coordinates must be an array of rings of [x, y] positions"},
		{`{"type":"Polygon","coordinates":[[[0],[4,0],[4,4],[0,0]]]}`, "GeoJSON: polygon 0 ring 0 position 0 needs at least 2 numbers"},
		{`{"type":"Polygon"}`, "GeoJSON: Polygon has no coordinates"},
		{`{"type":"LineString","coordinates":[[0,0],[1,1]]}`, "GeoJSON: geometry type LineString is not supported; want Polygon or MultiPolygon"},
		{`{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[0,0]}}]}`, "GeoJSON feature 0: geometry type Point is not supported; want Polygon or MultiPolygon"},
		{`{"type":"Feature","geometry":null}`, "GeoJSON: Feature has no geometry"},
		{`{"type":"FeatureCollection","features":[]}`, "empty geometry"},
		{`{"coordinates":[]}`, `GeoJSON: missing "type"`},
		{`[1,2]`, "GeoJSON: json: cannot unmarshal array into Go value of type area.geoJSONObject"},
		{`{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,1e999],[0,0]]]}`, "GeoJSON: Polygon coordinates must be an array of rings of [x, y] positions"},
	} {
		lim := Limits{}
		if strings.Contains(c.want, "limit of 4") {
			lim.MaxVertices = 4
		}
		_, err := ParseGeoJSON([]byte(c.in), lim)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

func TestParseWKTForms(t *testing.T) {
	for _, c := range []struct {
		in   string
		srid int
		want Geometry
	}{
		{"POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,1 2,2 2,2 1,1 1))", 0, Geometry{squareWithHole}},
		{"  polygon (\n( 0 0 , 4 0,\t4 4, 0 4, 0 0 ) ) ", 0, Geometry{square}},
		{"SRID=3857;MultiPolygon(((0 0,4 0,4 4,0 4,0 0)),((0 0,4 0,4 4,0 4,0 0),(1 1,1 2,2 2,2 1,1 1)))", 3857, Geometry{square, squareWithHole}},
		{"srid=4326; POLYGON Z ((0 0 1,4 0 1,4 4 1,0 4 1,0 0 1))", 4326, Geometry{square}},
		{"POLYGON((0 0,4e0 0,4 4,0 4,-0 0))", 0, Geometry{{{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {math.Copysign(0, -1), 0}}}}},
	} {
		g, srid, err := ParseWKT(c.in, Limits{})
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if srid != c.srid || !reflect.DeepEqual(g, c.want) {
			t.Errorf("%q: got %v srid %d, want %v srid %d", c.in, g, srid, c.want, c.srid)
		}
	}
}

func TestParseWKTErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"POLYGON EMPTY", "WKT: empty geometry"},
		{"polygon z empty", "WKT: empty geometry"},
		{"POINT(1 2)", "WKT: geometry type POINT is not supported; want POLYGON or MULTIPOLYGON"},
		{"", "WKT at offset 0: want POLYGON or MULTIPOLYGON"},
		{"POLYGON((0 0,4 0,4 4,0 4,0 1))", "polygon 0 ring 0 is not closed: its last position must repeat its first"},
		{"POLYGON((0 0,4 0,0 0))", "polygon 0 ring 0 has 3 positions; a ring needs at least 4 (the last repeating the first)"},
		{"POLYGON((0 0,4 0,NaN 4,0 0))", "polygon 0 ring 0 position 2 has a NaN or infinite coordinate"},
		{"POLYGON((0 0,4 0,4 +Inf,0 0))", "polygon 0 ring 0 position 2 has a NaN or infinite coordinate"},
		{"POLYGON((0 0,1 1,2 2,0 0))", "polygon 0 ring 0 has zero area"},
		{"POLYGON((0 0,4 0,4 4,0 0)", "WKT at offset 25: want ')'"},
		{"POLYGON((0 0,4 0,4 x,0 0))", "WKT at offset 19: want a number"},
		{"POLYGON((0 0,4 0,4 4,0 0)) x", "WKT at offset 27: unexpected text after the geometry"},
		{"SRID=abc;POLYGON((0 0,4 0,4 4,0 0))", `WKT: SRID must be a positive integer, not "abc"`},
		{"MULTIPOLYGON(((0 0,4 0,4 4,0 0)),((0 0,4 0,4 4,0 0)))", "geometry has more than the limit of 5 vertices"},
	} {
		lim := Limits{}
		if strings.Contains(c.want, "limit of 5") {
			lim.MaxVertices = 5
		}
		_, _, err := ParseWKT(c.in, lim)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

// The vertex limit counts vertices: a ring's closing position repeats its
// first and is not one. A ring of exactly the limit's vertices is taken,
// in GeoJSON and in WKT; one more is refused.
func TestVertexLimitIsExact(t *testing.T) {
	for _, n := range []int{DefaultMaxVertices, DefaultMaxVertices + 1} {
		g := wavy(n, 10, 50, 20)
		var wkt strings.Builder
		wkt.WriteString("POLYGON((")
		for k, p := range g[0][0] {
			if k > 0 {
				wkt.WriteString(",")
			}
			fmt.Fprintf(&wkt, "%v %v", p.X, p.Y)
		}
		wkt.WriteString("))")
		want := ""
		if n > DefaultMaxVertices {
			want = fmt.Sprintf("geometry has %d vertices, more than the limit of %d", n, DefaultMaxVertices)
		}
		if _, err := ParseGeoJSON(g.GeoJSON(), Limits{}); fmt.Sprint(err) != cmp.Or(want, "<nil>") {
			t.Errorf("GeoJSON ring of %d vertices: %v", n, err)
		}
		if n > DefaultMaxVertices {
			want = fmt.Sprintf("geometry has more than the limit of %d vertices", DefaultMaxVertices)
		}
		if _, _, err := ParseWKT(wkt.String(), Limits{}); fmt.Sprint(err) != cmp.Or(want, "<nil>") {
			t.Errorf("WKT ring of %d vertices: %v", n, err)
		}
	}
	// Rings too short to be rings count one each, so a body of them is
	// refused by the limit before it is built.
	if _, _, err := ParseWKT("MULTIPOLYGON(((0 0)),((0 0)),((0 0)))", Limits{MaxVertices: 2}); err == nil ||
		err.Error() != "geometry has more than the limit of 2 vertices" {
		t.Errorf("empty rings: %v", err)
	}
}

func TestGeometryHelpers(t *testing.T) {
	g := Geometry{squareWithHole, {{{-1, 2}, {0, 5}, {1, 2}, {-1, 2}}}}
	if n := g.Vertices(); n != 11 { // closing positions are no vertices
		t.Errorf("Vertices = %d", n)
	}
	if b := g.Bounds(); b.MinX != -1 || b.MinY != 0 || b.MaxX != 4 || b.MaxY != 5 {
		t.Errorf("Bounds = %+v", b)
	}
	back, err := ParseGeoJSON(g.GeoJSON(), Limits{})
	if err != nil || !reflect.DeepEqual(back, g) {
		t.Errorf("GeoJSON round trip: %v %v\n%s", back, err, g.GeoJSON())
	}
}

func TestTransform(t *testing.T) {
	g := Geometry{{{{10, 50}, {11, 50}, {11, 51}, {10, 50}}}}
	m, err := g.Transform(4326, 3857)
	if err != nil {
		t.Fatal(err)
	}
	if p := m[0][0][0]; math.Abs(p.X-1113194.9079) > 1e-4 || math.Abs(p.Y-6446275.8410) > 1e-4 {
		t.Errorf("lon 10 lat 50 → %v", p)
	}
	back, err := m.Transform(102100, 4326)
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range back[0][0] {
		if q := g[0][0][k]; math.Abs(p.X-q.X) > 1e-9 || math.Abs(p.Y-q.Y) > 1e-9 {
			t.Errorf("round trip %v → %v", q, p)
		}
	}
	if same, err := g.Transform(900913, 3857); err != nil || &same[0] != &g[0] {
		t.Errorf("same CRS should be the identity: %v", err)
	}
	// No clamping: 88° lands at its own y, beyond the grid's edge.
	if p := toMercator(Point{0, 88}); math.Abs(p.Y-25819498.5135) > 1e-4 {
		t.Errorf("lat 88 → %v", p)
	}
	// A pole position becomes two, one on each neighbour's meridian, so
	// that its edges run north or south; positions between poles keep theirs.
	tri, err := (Geometry{{{{0, 60}, {10, 60}, {5, 90}, {0, 60}}}}).Transform(4326, 3857)
	if err != nil {
		t.Fatal(err)
	}
	x10, y60 := toMercator(Point{10, 60}).X, toMercator(Point{0, 60}).Y
	if want := (Ring{{0, y60}, {x10, y60}, {x10, poleY}, {0, poleY}, {0, y60}}); !reflect.DeepEqual(tri[0][0], want) {
		t.Errorf("triangle to the pole → %v, want %v", tri[0][0], want)
	}
	world := Geometry{{{{-180, -90}, {180, -90}, {180, 90}, {-180, 90}, {-180, -90}}}}
	w, err := world.Transform(4326, 900913)
	if err != nil {
		t.Fatal(err)
	}
	if b := w.Bounds(); b.MaxY != poleY || b.MinY != -poleY || math.Abs(b.MaxX-20037508.34) > 0.01 || len(w[0][0]) != 5 {
		t.Errorf("world %v bounds %+v", w, b)
	}
	// Pole positions that are one point on the sphere make no area.
	if _, err := (Geometry{{{{3, 89}, {10, 90}, {20, 90}, {3, 89}}}}).Transform(4326, 3857); err == nil ||
		err.Error() != "polygon 0 ring 0 has zero area in EPSG:3857 (its positions at a pole are one point)" {
		t.Errorf("degenerate at the pole: %v", err)
	}
	if _, err := g.Transform(4326, 2056); err == nil || err.Error() != "cannot convert EPSG:4326 to EPSG:2056" {
		t.Errorf("unknown pair: %v", err)
	}
}
