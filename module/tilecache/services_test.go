package tilecache

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"fmt"
	"github.com/tilecache/caddy-tilecache/module/httpx"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/ogc"
	"github.com/tilecache/caddy-tilecache/module/params"
)

// newServicesHandler is newTestHandler's two layers (test:a: both built-in
// gridsets, PNG and JPEG, STYLES "" or "red"; test:b: EPSG:4326, JPEG,
// levels 2..10, lon 0..90 lat 0..45) with every service on.
func newServicesHandler(t *testing.T) *services {
	t.Helper()
	return servicesOf(t, newTestHandler(t), &ServicesConfig{WMTS: "/wmts", TMS: "/tms/", XYZ: "/xyz", Demo: "/demo"})
}

func servicesOf(t *testing.T, c *Cache, cfg *ServicesConfig) *services {
	t.Helper()
	s, err := compileServices(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// routeWMTSKVP routes a KVP query as a request to the WMTS prefix would be.
func (s *services) routeKVP(raw string) (tileRequest, bool, *svcError) {
	return s.routeWMTS(wmtsReq("/wmts?"+raw), nil)
}

// --- reading documents back, namespace-aware ---

type owsText struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

type capsDoc struct {
	XMLName xml.Name `xml:"http://www.opengis.net/wmts/1.0 Capabilities"`
	Version string   `xml:"version,attr"`
	Ops     []struct {
		Name string `xml:"name,attr"`
		Gets []struct {
			Href      string   `xml:"http://www.w3.org/1999/xlink href,attr"`
			Encodings []string `xml:"http://www.opengis.net/ows/1.1 Constraint>AllowedValues>Value"`
		} `xml:"http://www.opengis.net/ows/1.1 DCP>HTTP>Get"`
	} `xml:"http://www.opengis.net/ows/1.1 OperationsMetadata>Operation"`
	Layers []struct {
		Identifier owsText `xml:"http://www.opengis.net/ows/1.1 Identifier"`
		WGS84      struct {
			Lower string `xml:"http://www.opengis.net/ows/1.1 LowerCorner"`
			Upper string `xml:"http://www.opengis.net/ows/1.1 UpperCorner"`
		} `xml:"http://www.opengis.net/ows/1.1 WGS84BoundingBox"`
		BBoxes []struct {
			CRS   string `xml:"crs,attr"`
			Lower string `xml:"http://www.opengis.net/ows/1.1 LowerCorner"`
			Upper string `xml:"http://www.opengis.net/ows/1.1 UpperCorner"`
		} `xml:"http://www.opengis.net/ows/1.1 BoundingBox"`
		Styles []struct {
			IsDefault  bool   `xml:"isDefault,attr"`
			Identifier string `xml:"http://www.opengis.net/ows/1.1 Identifier"`
		} `xml:"http://www.opengis.net/wmts/1.0 Style"`
		Formats []string `xml:"http://www.opengis.net/wmts/1.0 Format"`
		Links   []struct {
			Set    string `xml:"http://www.opengis.net/wmts/1.0 TileMatrixSet"`
			Limits []struct {
				Matrix     string `xml:"TileMatrix"`
				MinRow     int64  `xml:"MinTileRow"`
				MaxTileRow int64
				MinTileCol int64
				MaxTileCol int64
			} `xml:"http://www.opengis.net/wmts/1.0 TileMatrixSetLimits>TileMatrixLimits"`
		} `xml:"http://www.opengis.net/wmts/1.0 TileMatrixSetLink"`
		Resources []struct {
			Format   string `xml:"format,attr"`
			Type     string `xml:"resourceType,attr"`
			Template string `xml:"template,attr"`
		} `xml:"http://www.opengis.net/wmts/1.0 ResourceURL"`
	} `xml:"http://www.opengis.net/wmts/1.0 Contents>Layer"`
	Sets []struct {
		Identifier owsText `xml:"http://www.opengis.net/ows/1.1 Identifier"`
		CRS        string  `xml:"http://www.opengis.net/ows/1.1 SupportedCRS"`
		Matrices   []struct {
			Identifier   string `xml:"http://www.opengis.net/ows/1.1 Identifier"`
			Scale        string `xml:"ScaleDenominator"`
			TopLeft      string `xml:"TopLeftCorner"`
			TileWidth    int
			TileHeight   int
			MatrixWidth  int64
			MatrixHeight int64
		} `xml:"http://www.opengis.net/wmts/1.0 TileMatrix"`
	} `xml:"http://www.opengis.net/wmts/1.0 Contents>TileMatrixSet"`
	ServiceMetadataURL struct {
		Href string `xml:"http://www.w3.org/1999/xlink href,attr"`
	} `xml:"ServiceMetadataURL"`
}

func readCaps(t *testing.T, c *ogc.Capabilities) capsDoc {
	t.Helper()
	b, err := ogc.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var d capsDoc
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatalf("capabilities do not parse: %v\n%s", err, b)
	}
	return d
}

func TestWMTSCapabilitiesTileMatrixSetsAreTheGridsets(t *testing.T) {
	h := newServicesHandler(t)
	d := readCaps(t, h.wmtsCapabilities("http://example.org/geo/wmts"))
	// EPSG:900913 is offered a second time as EPSG:3857, for clients that
	// tell the two apart.
	if d.Version != "1.0.0" || len(d.Sets) != 3 || d.Sets[2].Identifier.Value != "EPSG:3857" {
		t.Fatalf("version %q, %d tile matrix sets", d.Version, len(d.Sets))
	}
	corners := map[string]string{"EPSG:4326": "90 -180", "EPSG:900913": "-20037508.34 20037508.34", "EPSG:3857": "-20037508.34 20037508.34"}
	crs := map[string]string{"EPSG:4326": "urn:ogc:def:crs:EPSG::4326", "EPSG:900913": "urn:ogc:def:crs:EPSG::900913",
		"EPSG:3857": "urn:ogc:def:crs:EPSG::3857"}
	for _, set := range d.Sets {
		name := set.Identifier.Value
		g, ok := gridset.Builtin(name)
		if name == "EPSG:3857" {
			g, ok = gridset.Builtin("EPSG:900913")
		}
		if !ok || set.Identifier.XMLName.Space != ogc.NSOWS {
			t.Fatalf("tile matrix set %v", set.Identifier)
		}
		if set.CRS != crs[name] {
			t.Errorf("%s: SupportedCRS %q", name, set.CRS)
		}
		if len(set.Matrices) != len(g.Levels) {
			t.Fatalf("%s: %d tile matrices, gridset has %d levels", name, len(set.Matrices), len(g.Levels))
		}
		for z, m := range set.Matrices {
			lv := g.Levels[z]
			scale, err := strconv.ParseFloat(m.Scale, 64)
			if err != nil || scale != lv.ScaleDenominator {
				t.Errorf("%s: ScaleDenominator %q, gridset %v", lv.Name, m.Scale, lv.ScaleDenominator)
			}
			if m.Identifier != fmt.Sprintf("%s:%d", name, z) || m.TopLeft != corners[name] ||
				m.TileWidth != 256 || m.TileHeight != 256 || m.MatrixWidth != lv.TilesWide || m.MatrixHeight != lv.TilesHigh {
				t.Errorf("%s level %d: %+v", name, z, m)
			}
		}
	}
	if got := d.Sets[0].Matrices[3]; got.MatrixWidth != 16 || got.MatrixHeight != 8 {
		t.Errorf("EPSG:4326:3 is %dx%d tiles, want 16x8", got.MatrixWidth, got.MatrixHeight)
	}
}

func TestWMTSCapabilitiesLayers(t *testing.T) {
	h := newServicesHandler(t)
	base := "http://example.org/geo/wmts"
	d := readCaps(t, h.wmtsCapabilities(base))
	if len(d.Ops) != 2 || d.Ops[0].Name != "GetCapabilities" || d.Ops[1].Name != "GetTile" {
		t.Fatalf("operations %+v", d.Ops)
	}
	for _, op := range d.Ops {
		if len(op.Gets) != 1 || op.Gets[0].Href != base+"?" || len(op.Gets[0].Encodings) != 1 || op.Gets[0].Encodings[0] != "KVP" {
			t.Errorf("%s: %+v", op.Name, op.Gets)
		}
	}
	if d.ServiceMetadataURL.Href != base+"/1.0.0/WMTSCapabilities.xml" {
		t.Errorf("ServiceMetadataURL %q", d.ServiceMetadataURL.Href)
	}
	if len(d.Layers) != 2 {
		t.Fatalf("%d layers", len(d.Layers))
	}
	a, b := d.Layers[0], d.Layers[1]
	if a.Identifier.Value != "test:a" || b.Identifier.Value != "test:b" {
		t.Fatalf("layers %q %q", a.Identifier.Value, b.Identifier.Value)
	}
	// Styles: the STYLES filter's values, the empty default as "default".
	if len(a.Styles) != 2 || a.Styles[0].Identifier != "default" || !a.Styles[0].IsDefault ||
		a.Styles[1].Identifier != "red" || a.Styles[1].IsDefault {
		t.Errorf("test:a styles %+v", a.Styles)
	}
	if len(b.Styles) != 1 || b.Styles[0].Identifier != "default" || !b.Styles[0].IsDefault {
		t.Errorf("test:b styles %+v", b.Styles)
	}
	if strings.Join(a.Formats, ",") != "image/png,image/jpeg" || strings.Join(b.Formats, ",") != "image/jpeg" {
		t.Errorf("formats %v %v", a.Formats, b.Formats)
	}
	if a.WGS84.Lower != "-180 -90" || a.WGS84.Upper != "180 90" || b.WGS84.Lower != "0 0" || b.WGS84.Upper != "90 45" {
		t.Errorf("WGS84 boxes %+v %+v", a.WGS84, b.WGS84)
	}
	tmpl := base + "/1.0.0/test:a/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}."
	if len(a.Resources) != 2 || a.Resources[0].Template != tmpl+"png" || a.Resources[0].Format != "image/png" ||
		a.Resources[1].Template != tmpl+"jpeg" || a.Resources[1].Format != "image/jpeg" || a.Resources[0].Type != "tile" {
		t.Errorf("test:a resources %+v", a.Resources)
	}
	if len(a.Links) != 3 || a.Links[0].Set != "EPSG:4326" || a.Links[1].Set != "EPSG:900913" || a.Links[2].Set != "EPSG:3857" ||
		len(a.Links[0].Limits) != 22 || len(a.Links[1].Limits) != 31 || len(a.Links[2].Limits) != 31 {
		t.Fatalf("test:a links %d", len(a.Links))
	}
	for i, lim := range a.Links[2].Limits {
		if lim.Matrix != fmt.Sprintf("EPSG:3857:%d", i) || lim.MaxTileCol != a.Links[1].Limits[i].MaxTileCol {
			t.Errorf("test:a 3857 limits %d: %+v", i, lim)
		}
	}
	// The area in each matrix set's CRS, in its axis order: what GDAL
	// takes the dataset's extent from.
	wantBoxes := []string{
		"urn:ogc:def:crs:EPSG::4326 -90 -180 90 180",
		"urn:ogc:def:crs:EPSG::900913 -20037508.34 -20037508.34 20037508.34 20037508.34",
		"urn:ogc:def:crs:EPSG::3857 -20037508.34 -20037508.34 20037508.34 20037508.34",
	}
	var boxes []string
	for _, bb := range a.BBoxes {
		boxes = append(boxes, bb.CRS+" "+bb.Lower+" "+bb.Upper)
	}
	if !slices.Equal(boxes, wantBoxes) {
		t.Errorf("test:a BoundingBoxes\n%q\nwant\n%q", boxes, wantBoxes)
	}
	if len(b.BBoxes) != 1 || b.BBoxes[0].CRS != "urn:ogc:def:crs:EPSG::4326" || b.BBoxes[0].Lower != "0 0" || b.BBoxes[0].Upper != "45 90" {
		t.Errorf("test:b BoundingBoxes %+v", b.BBoxes)
	}
	// test:a covers the world: every tile of every level.
	for i, lim := range a.Links[1].Limits {
		n := int64(1) << i
		if lim.Matrix != fmt.Sprintf("EPSG:900913:%d", i) || lim.MinRow != 0 || lim.MaxTileRow != n-1 || lim.MinTileCol != 0 || lim.MaxTileCol != n-1 {
			t.Errorf("test:a 900913 limits %d: %+v", i, lim)
		}
	}
	// test:b: levels 2..10 only, lon 0..90 lat 0..45, rows from the top.
	if len(b.Links) != 1 || b.Links[0].Set != "EPSG:4326" || len(b.Links[0].Limits) != 9 {
		t.Fatalf("test:b links %+v", b.Links)
	}
	for i, lim := range b.Links[0].Limits {
		z := i + 2
		deg := 180 / math.Exp2(float64(z)) // tile size in degrees
		want := [4]int64{
			int64((90 - 45) / deg), int64((90-0)/deg) - 1, // rows: lat 45 down to lat 0, from the top (lat 90)
			int64((0 + 180) / deg), int64((90+180)/deg) - 1, // columns: lon 0 to 90, from lon -180
		}
		got := [4]int64{lim.MinRow, lim.MaxTileRow, lim.MinTileCol, lim.MaxTileCol}
		if lim.Matrix != fmt.Sprintf("EPSG:4326:%d", z) || got != want {
			t.Errorf("test:b limits at %d: %s %v, want %v", z, lim.Matrix, got, want)
		}
	}
}

// Custom gridsets: a top-aligned one's corner is its extent's top left; a
// bottom-aligned one whose extent is not whole tiles tops out above the
// extent, where its rows start. Either way WMTS row r is the tile whose
// top is corner - r*tileheight.
func TestWMTSCornersOfCustomGridsets(t *testing.T) {
	for _, c := range []struct {
		origin string
		yFirst bool
		corner string
	}{
		{"top_left", false, "1000 1700"},
		{"bottom_left", false, "1000 1768"},
		{"bottom_left", true, "1768 1000"},
	} {
		h := servicesOf(t, compileTest(t, Config{
			Upstream: "http://127.0.0.1:1/wms",
			Gridsets: []gridset.Config{{Name: "local", SRS: "EPSG:2056", Extent: [4]float64{1000, 1000, 2000, 1700},
				Resolutions: []float64{2, 1}, Origin: c.origin, YFirst: c.yFirst}},
			Layers: []LayerConfig{{Name: "l", Gridsets: []string{"local"}}},
		}), &ServicesConfig{WMTS: "/wmts"})
		d := readCaps(t, h.wmtsCapabilities("http://h/wmts"))
		m := d.Sets[0].Matrices[1] // 1 unit/px: 4x3 tiles of 256
		if m.TopLeft != c.corner || m.MatrixWidth != 4 || m.MatrixHeight != 3 {
			t.Errorf("%s yfirst=%v: %+v, want corner %q", c.origin, c.yFirst, m, c.corner)
		}
		g := h.cache.layers["l"].Grids[0]
		_, top := topLeftCorner(g.Gridset, 1)
		for row := int64(0); row < 3; row++ {
			tr, _, e := h.routeKVP("REQUEST=GetTile&LAYER=l&TILEMATRIXSET=local&TILEMATRIX=local:1&TILEROW=" +
				strconv.FormatInt(row, 10) + "&TILECOL=0&FORMAT=image/png")
			if e != nil {
				t.Fatalf("%s row %d: %v", c.origin, row, e)
			}
			if b := g.TileBBox(tr.index); math.Abs(b.MaxY-(top-256*float64(row))) > 1e-6 {
				t.Errorf("%s row %d: tile %v spans y %v..%v, want top %v", c.origin, row, tr.index, b.MinY, b.MaxY, top-256*float64(row))
			}
		}
	}
}

// A bottom-aligned grid whose whole tiles end on the extent's top is given
// that top, not the float sum (3 × 0.1 = 0.30000000000000004).
func TestWMTSCornerSnapsToTheExtent(t *testing.T) {
	g, err := gridset.New(gridset.Config{Name: "tiny", SRS: "EPSG:4326", Extent: [4]float64{0, 0, 0.3, 0.3},
		Resolutions: []float64{0.1 / 256}})
	if err != nil {
		t.Fatal(err)
	}
	if h := g.Levels[0].Resolution * 256; h*3 == 0.3 {
		t.Fatal("test setup: no rounding to snap")
	}
	if x, y := topLeftCorner(g, 0); x != 0 || y != 0.3 || g.Levels[0].TilesHigh != 3 {
		t.Errorf("corner %v %v", x, y)
	}
}

// --- WMTS requests ---

// wmsHash is the parameter hash WMS-C gives a GetMap of the same tile with
// the given STYLES: WMTS must land in the same tile set.
func wmsHash(t *testing.T, s *services, styles string) string {
	t.Helper()
	b := tileBBox(t, "EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 2})
	tr, reason := match(s.cache, "SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=test:a&SRS=EPSG:4326&WIDTH=256&HEIGHT=256&FORMAT=image/png&STYLES="+
		url.QueryEscape(styles)+"&BBOX="+bboxStr(b, false))
	if reason != "" {
		t.Fatalf("WMS-C: %s", reason)
	}
	return tr.params.Hash()
}

type wantErr struct {
	status  int
	code    string
	locator string
}

func TestWMTSKVP(t *testing.T) {
	h := newServicesHandler(t)
	defHash, redHash := wmsHash(t, h, ""), wmsHash(t, h, "red")
	if defHash == redHash {
		t.Fatal("test setup: default and red share a hash")
	}
	const tile = "SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=test:a&STYLE=default&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=1&TILECOL=5&FORMAT=image/png"
	with := func(k, v string) string {
		q, _ := url.ParseQuery(tile)
		if v == "-" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return q.Encode()
	}
	ok := []struct {
		name, q string
		idx     gridset.Index
		hash    string
		format  string
	}{
		// row 1 from the top of 4 rows is y 2 from the bottom
		{"tile", tile, gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"lower-case names", "service=WMTS&request=GetTile&version=1.0.0&layer=test:a&style=default&tilematrixset=EPSG:4326&tilematrix=EPSG:4326:2&tilerow=1&tilecol=5&format=image/png",
			gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"empty style", with("STYLE", ""), gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"no style", with("STYLE", "-"), gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"style red", with("STYLE", "red"), gridset.Index{X: 5, Y: 2, Z: 2}, redHash, "image/png"},
		{"no version", with("VERSION", "-"), gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"no service", with("SERVICE", "-"), gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"neutral parameter", tile + "&TILED=true", gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"jpeg", with("FORMAT", "image/jpeg"), gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/jpeg"},
		{"top row", with("TILEROW", "0"), gridset.Index{X: 5, Y: 3, Z: 2}, defHash, "image/png"},
		// row 0 of 4 at level 2 is the top one: y 3
		{"mercator", "REQUEST=GetTile&LAYER=test:a&TILEMATRIXSET=EPSG:900913&TILEMATRIX=EPSG:900913:2&TILEROW=0&TILECOL=3&FORMAT=image/png",
			gridset.Index{X: 3, Y: 3, Z: 2}, defHash, "image/png"},
	}
	for _, c := range ok {
		tr, caps, e := h.routeKVP(c.q)
		if e != nil || caps {
			t.Errorf("%s: error %v caps %v", c.name, e, caps)
			continue
		}
		if tr.index != c.idx || tr.params.Hash() != c.hash || tr.format.Name != c.format || tr.layer.Name != "test:a" {
			t.Errorf("%s: %v %s %s, want %v %s", c.name, tr.index, tr.params.Hash(), tr.format.Name, c.idx, c.format)
		}
	}
	if _, caps, e := h.routeKVP("service=wmts&request=getcapabilities&acceptversions=1.0.0"); !caps || e != nil {
		t.Errorf("GetCapabilities: caps %v, error %v", caps, e)
	}

	bad := []struct {
		name, q string
		want    wantErr
	}{
		{"no request", "SERVICE=WMTS", wantErr{400, "MissingParameterValue", "Request"}},
		{"nothing", "", wantErr{400, "MissingParameterValue", "Request"}},
		{"WMS", with("SERVICE", "WMS"), wantErr{400, "InvalidParameterValue", "Service"}},
		{"GetFeatureInfo", with("REQUEST", "GetFeatureInfo"), wantErr{501, "OperationNotSupported", "Request"}},
		{"version", with("VERSION", "2.0.0"), wantErr{400, "InvalidParameterValue", "Version"}},
		{"no layer", with("LAYER", "-"), wantErr{400, "MissingParameterValue", "Layer"}},
		{"no matrix set", with("TILEMATRIXSET", "-"), wantErr{400, "MissingParameterValue", "TileMatrixSet"}},
		{"no matrix", with("TILEMATRIX", ""), wantErr{400, "MissingParameterValue", "TileMatrix"}},
		{"no row", with("TILEROW", "-"), wantErr{400, "MissingParameterValue", "TileRow"}},
		{"no col", with("TILECOL", "-"), wantErr{400, "MissingParameterValue", "TileCol"}},
		{"no format", with("FORMAT", "-"), wantErr{400, "MissingParameterValue", "Format"}},
		{"unknown layer", with("LAYER", "test:nope"), wantErr{400, "InvalidParameterValue", "Layer"}},
		{"unknown style", with("STYLE", "blue"), wantErr{400, "InvalidParameterValue", "Style"}},
		{"STYLES instead of STYLE", tile + "&STYLES=red", wantErr{400, "InvalidParameterValue", "STYLES"}},
		{"unknown parameter", tile + "&CQL_FILTER=a=1", wantErr{400, "InvalidParameterValue", "CQL_FILTER"}},
		{"format", with("FORMAT", "image/gif"), wantErr{400, "InvalidParameterValue", "Format"}},
		{"matrix set", with("TILEMATRIXSET", "EPSG:2056"), wantErr{400, "InvalidParameterValue", "TileMatrixSet"}},
		{"matrix of another set", with("TILEMATRIX", "EPSG:900913:2"), wantErr{400, "InvalidParameterValue", "TileMatrix"}},
		{"bare level number", with("TILEMATRIX", "2"), wantErr{400, "InvalidParameterValue", "TileMatrix"}},
		{"level past the gridset", with("TILEMATRIX", "EPSG:4326:22"), wantErr{400, "InvalidParameterValue", "TileMatrix"}},
		{"row not a number", with("TILEROW", "one"), wantErr{400, "InvalidParameterValue", "TileRow"}},
		{"negative row", with("TILEROW", "-1"), wantErr{400, "InvalidParameterValue", "TileRow"}},
		{"col not a number", with("TILECOL", "5.0"), wantErr{400, "InvalidParameterValue", "TileCol"}},
		{"row past the matrix", with("TILEROW", "4"), wantErr{400, "TileOutOfRange", "TileRow"}},
		{"huge row", with("TILEROW", "999999999999999999"), wantErr{400, "TileOutOfRange", "TileRow"}},
		{"col past the matrix", with("TILECOL", "8"), wantErr{400, "TileOutOfRange", "TileCol"}},
		{"duplicate", tile + "&tilerow=2", wantErr{400, "InvalidParameterValue", "tilerow"}},
		{"malformed", tile + "&x=%zz", wantErr{400, "InvalidParameterValue", ""}},
		// test:b: levels 2..10, lon 0..90 lat 0..45: at level 2 (45° tiles) row 1 col 4 only.
		{"level not cached", "REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:1&TILEROW=0&TILECOL=2&FORMAT=image/jpeg",
			wantErr{400, "TileOutOfRange", "TileMatrix"}},
		{"level past cached", "REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:11&TILEROW=0&TILECOL=2&FORMAT=image/jpeg",
			wantErr{400, "TileOutOfRange", "TileMatrix"}},
		{"row outside coverage", "REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=2&TILECOL=4&FORMAT=image/jpeg",
			wantErr{400, "TileOutOfRange", "TileRow"}},
		{"col outside coverage", "REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=1&TILECOL=3&FORMAT=image/jpeg",
			wantErr{400, "TileOutOfRange", "TileCol"}},
		{"test:b has no png", "REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=1&TILECOL=4&FORMAT=image/png",
			wantErr{400, "InvalidParameterValue", "Format"}},
		{"test:b has no mercator", "REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:900913&TILEMATRIX=EPSG:900913:2&TILEROW=1&TILECOL=2&FORMAT=image/jpeg",
			wantErr{400, "InvalidParameterValue", "TileMatrixSet"}},
		{"test:b has no style red", "REQUEST=GetTile&LAYER=test:b&STYLE=red&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=1&TILECOL=4&FORMAT=image/jpeg",
			wantErr{400, "InvalidParameterValue", "Style"}},
	}
	for _, c := range bad {
		_, caps, e := h.routeKVP(c.q)
		if e == nil || caps {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if (wantErr{e.status, e.code, e.locator}) != c.want || e.msg == "" {
			t.Errorf("%s: %d %s %s (%s), want %+v", c.name, e.status, e.code, e.locator, e.msg, c.want)
		}
	}
	// The one test:b tile at level 2 is there.
	tr, _, e := h.routeKVP("REQUEST=GetTile&LAYER=test:b&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=1&TILECOL=4&FORMAT=image/jpeg")
	if e != nil || tr.index != (gridset.Index{X: 4, Y: 2, Z: 2}) {
		t.Errorf("test:b tile: %v %v", tr.index, e)
	}
}

func wmtsReq(path string) *http.Request { return httptest.NewRequest("GET", "http://h"+path, nil) }

func TestWMTSREST(t *testing.T) {
	h := newServicesHandler(t)
	defHash, redHash := wmsHash(t, h, ""), wmsHash(t, h, "red")
	route := func(path string) (tileRequest, bool, *svcError) {
		r := wmtsReq(path)
		return h.routeWMTS(r, pathSegments(r, "/wmts"))
	}
	// QGIS asks the plain WMTS URL for WMS capabilities first.
	for _, p := range []string{"/wmts/1.0.0/WMTSCapabilities.xml", "/wmts?SERVICE=WMTS&REQUEST=GetCapabilities", "/wmts/?request=GetCapabilities",
		"/wmts?SERVICE=WMS&REQUEST=GetCapabilities", "/wmts?service=wms&version=1.3.0&request=GetCapabilities"} {
		if _, caps, e := route(p); !caps || e != nil {
			t.Errorf("%s: caps %v error %v", p, caps, e)
		}
	}
	ok := []struct {
		path string
		idx  gridset.Index
		hash string
		mime string
	}{
		// EPSG:3857 is EPSG:900913 under another name: the same tiles.
		{"/wmts/1.0.0/test:a/default/EPSG:3857/EPSG:3857:3/2/6.png", gridset.Index{X: 6, Y: 5, Z: 3}, defHash, "image/png"},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.png", gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"/wmts/1.0.0/test:a/red/EPSG:4326/EPSG:4326:2/1/5.png", gridset.Index{X: 5, Y: 2, Z: 2}, redHash, "image/png"},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.jpg", gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/jpeg"},
		{"/wmts/1.0.0/test%3Aa/default/EPSG%3A900913/EPSG%3A900913%3A3/2/6.jpeg?TILED=true", gridset.Index{X: 6, Y: 5, Z: 3}, defHash, "image/jpeg"},
	}
	for _, c := range ok {
		tr, caps, e := route(c.path)
		if e != nil || caps || tr.index != c.idx || tr.params.Hash() != c.hash || tr.format.MIME != c.mime ||
			tr.grid.SRS != map[bool]int{true: 4326, false: 900913}[strings.Contains(c.path, "EPSG:4326") || strings.Contains(c.path, "EPSG%3A4326")] {
			t.Errorf("%s: %v %v %v %s", c.path, e, caps, tr.index, tr.params.Hash())
		}
	}
	bad := []struct {
		path string
		want wantErr
	}{
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5", wantErr{404, "NoApplicableCode", ""}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1", wantErr{404, "NoApplicableCode", ""}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.png/x", wantErr{404, "NoApplicableCode", ""}},
		{"/wmts/2.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.png", wantErr{404, "NoApplicableCode", ""}},
		{"/wmts/WMTSCapabilities.xml", wantErr{404, "NoApplicableCode", ""}},
		{"/wmts/1.0.0/nope/default/EPSG:4326/EPSG:4326:2/1/5.png", wantErr{400, "InvalidParameterValue", "Layer"}},
		{"/wmts/1.0.0/test:a/blue/EPSG:4326/EPSG:4326:2/1/5.png", wantErr{400, "InvalidParameterValue", "Style"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.gif", wantErr{400, "InvalidParameterValue", "Format"}},
		{"/wmts/1.0.0/test:a/default/EPSG:2056/EPSG:4326:2/1/5.png", wantErr{400, "InvalidParameterValue", "TileMatrixSet"}},
		{"/wmts/1.0.0/test:a/default/EPSG:3857/EPSG:900913:2/1/2.png", wantErr{400, "InvalidParameterValue", "TileMatrix"}},
		{"/wmts/1.0.0/test:b/default/EPSG:3857/EPSG:3857:2/1/2.jpeg", wantErr{400, "InvalidParameterValue", "TileMatrixSet"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/3/1/5.png", wantErr{400, "InvalidParameterValue", "TileMatrix"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/x/5.png", wantErr{400, "InvalidParameterValue", "TileRow"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/4/5.png", wantErr{400, "TileOutOfRange", "TileRow"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/8.png", wantErr{400, "TileOutOfRange", "TileCol"}},
		{"/wmts/1.0.0/test:b/default/EPSG:4326/EPSG:4326:12/1/5.jpeg", wantErr{400, "TileOutOfRange", "TileMatrix"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.png?STYLES=red", wantErr{400, "InvalidParameterValue", "STYLES"}},
		{"/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:2/1/5.png?ENV=x", wantErr{400, "InvalidParameterValue", "ENV"}},
	}
	for _, c := range bad {
		_, caps, e := route(c.path)
		if e == nil || caps {
			t.Errorf("%s: no error", c.path)
			continue
		}
		if (wantErr{e.status, e.code, e.locator}) != c.want {
			t.Errorf("%s: %d %s %s (%s), want %+v", c.path, e.status, e.code, e.locator, e.msg, c.want)
		}
	}
}

// A STYLES filter that has "default" among its values: the WMTS style
// "default" is that value, and the empty value is not advertised.
func TestWMTSStyleNamedDefault(t *testing.T) {
	h := servicesOf(t, compileTest(t, Config{
		Upstream: "http://127.0.0.1:1/wms",
		Layers: []LayerConfig{{Name: "l", Parameters: []params.FilterConfig{
			{Key: "styles", Default: "pop", Values: []string{"", "default", "pop"}}}}},
	}), &ServicesConfig{WMTS: "/wmts"})
	d := readCaps(t, h.wmtsCapabilities("http://h/wmts"))
	st := d.Layers[0].Styles
	if len(st) != 2 || st[0].Identifier != "pop" || !st[0].IsDefault || st[1].Identifier != "default" || st[1].IsDefault {
		t.Errorf("styles %+v", st)
	}
	l := h.cache.layers["l"]
	for style, want := range map[string]string{"default": "default", "": "pop", "pop": "pop"} {
		styles, e := l.styleValue(style)
		if e != nil {
			t.Errorf("style %q: %v", style, e)
			continue
		}
		v, pe := l.filter(styles, nil)
		if pe != nil || v.Get("STYLES") != want {
			t.Errorf("style %q: %q %v, want %q", style, v.Get("STYLES"), pe, want)
		}
	}
}

// --- TMS ---

func TestTMSRoutes(t *testing.T) {
	h := newServicesHandler(t)
	defHash, redHash := wmsHash(t, h, ""), wmsHash(t, h, "red")
	bHash := h.cache.layers["test:b"].Params.Defaults().Hash() // no filters
	route := func(path string) (tmsAnswer, *svcError) {
		r := wmtsReq(path)
		return h.routeTMS(r, pathSegments(r, "/tms"))
	}
	for _, c := range []struct{ path, doc string }{
		{"/tms", "*ogc.TMSRoot"}, {"/tms/", "*ogc.TMSRoot"},
		{"/tms/1.0.0", "*ogc.TileMapService"}, {"/tms/1.0.0/", "*ogc.TileMapService"},
		{"/tms/1.0.0/test:a@EPSG:4326@png", "*ogc.TileMap"}, {"/tms/1.0.0/test:b@EPSG:4326@jpeg/", "*ogc.TileMap"},
	} {
		a, e := route(c.path)
		if e != nil || a.doc == nil || fmt.Sprintf("%T", a.doc("http://h/tms")) != c.doc {
			t.Errorf("%s: %v, want %s", c.path, e, c.doc)
		}
	}
	for _, c := range []struct {
		path string
		idx  gridset.Index
		hash string
		mime string
	}{
		// TMS y counts from the bottom: it is GeoWebCache's y.
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2.png", gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2.png?STYLES=red", gridset.Index{X: 5, Y: 2, Z: 2}, redHash, "image/png"},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2.png?styles=", gridset.Index{X: 5, Y: 2, Z: 2}, defHash, "image/png"},
		{"/tms/1.0.0/test:a@EPSG:900913@jpeg/3/6/2.jpg", gridset.Index{X: 6, Y: 2, Z: 3}, defHash, "image/jpeg"},
		{"/tms/1.0.0/test:b@EPSG:4326@jpeg/2/4/2.jpeg", gridset.Index{X: 4, Y: 2, Z: 2}, bHash, "image/jpeg"},
	} {
		a, e := route(c.path)
		if e != nil || a.doc != nil || a.tile.index != c.idx || a.tile.params.Hash() != c.hash || a.tile.format.MIME != c.mime {
			t.Errorf("%s: %v %v %s", c.path, e, a.tile.index, a.tile.params.Hash())
		}
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/tms/2.0.0/", 404},
		{"/tms/1.0.0/test:a", 404},
		{"/tms/1.0.0/test:a@EPSG:4326", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@gif", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@jpg", 404}, // one name per tile map: jpeg
		{"/tms/1.0.0/test:b@EPSG:900913@jpeg", 404},
		{"/tms/1.0.0/nope@EPSG:4326@png", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2.jpeg", 404}, // another tile map's format
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/x/2.png", 400},
		{"/tms/1.0.0/test:a@EPSG:4326@png/-1/0/0.png", 400},
		{"/tms/1.0.0/test:a@EPSG:4326@png/22/0/0.png", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/8/0.png", 404},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/0/4.png", 404},
		{"/tms/1.0.0/test:b@EPSG:4326@jpeg/1/2/1.jpeg", 404}, // level not cached
		{"/tms/1.0.0/test:b@EPSG:4326@jpeg/2/4/1.jpeg", 404}, // outside the extent
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2.png?STYLES=blue", 400},
		{"/tms/1.0.0/test:a@EPSG:4326@png/2/5/2.png?CQL_FILTER=x", 400},
	} {
		_, e := route(c.path)
		if e == nil || e.status != c.status || e.msg == "" {
			t.Errorf("%s: %v, want %d", c.path, e, c.status)
		}
	}
}

func TestTMSDocuments(t *testing.T) {
	h := newServicesHandler(t)
	s := h
	base := "https://example.org/geo/tms"

	var root struct {
		Services []struct {
			Version string `xml:"version,attr"`
			Href    string `xml:"href,attr"`
		} `xml:"TileMapService"`
	}
	unmarshal(t, s.tmsRoot(base), &root)
	if len(root.Services) != 1 || root.Services[0].Version != "1.0.0" || root.Services[0].Href != base+"/1.0.0/" {
		t.Errorf("root %+v", root)
	}

	var svc struct {
		XMLName  xml.Name
		Services string `xml:"services,attr"`
		TileMaps []struct {
			Title   string `xml:"title,attr"`
			SRS     string `xml:"srs,attr"`
			Profile string `xml:"profile,attr"`
			Href    string `xml:"href,attr"`
		} `xml:"TileMaps>TileMap"`
	}
	unmarshal(t, s.tileMapService(base), &svc)
	var got []string
	for _, m := range svc.TileMaps {
		got = append(got, fmt.Sprintf("%s %s %s %s", m.Title, m.SRS, m.Profile, strings.TrimPrefix(m.Href, base+"/1.0.0/")))
	}
	want := []string{
		"test:a EPSG:4326 global-geodetic test:a@EPSG:4326@png",
		"test:a EPSG:4326 global-geodetic test:a@EPSG:4326@jpeg",
		"test:a EPSG:900913 global-mercator test:a@EPSG:900913@png",
		"test:a EPSG:900913 global-mercator test:a@EPSG:900913@jpeg",
		"test:b EPSG:4326 global-geodetic test:b@EPSG:4326@jpeg",
	}
	if svc.XMLName.Local != "TileMapService" || svc.Services != base+"/" || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("TileMapService %s:\n%s", svc.Services, strings.Join(got, "\n"))
	}

	type tileMap struct {
		TileMapService string `xml:"tilemapservice,attr"`
		SRS            string
		BoundingBox    struct{ MinX, MinY, MaxX, MaxY float64 } `xml:"BoundingBox"`
		Origin         struct{ X, Y float64 }
		TileFormat     struct {
			Width     int    `xml:"width,attr"`
			Height    int    `xml:"height,attr"`
			MIME      string `xml:"mime-type,attr"`
			Extension string `xml:"extension,attr"`
		}
		TileSets struct {
			Profile string `xml:"profile,attr"`
			Sets    []struct {
				Href          string  `xml:"href,attr"`
				UnitsPerPixel float64 `xml:"units-per-pixel,attr"`
				Order         int     `xml:"order,attr"`
			} `xml:"TileSet"`
		}
	}
	// encoding/xml matches attribute names exactly: read the box and origin by hand.
	readTileMap := func(doc any) tileMap {
		b, _ := ogc.Marshal(doc)
		var m tileMap
		if err := xml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var raw struct {
			BB struct {
				MinX float64 `xml:"minx,attr"`
				MinY float64 `xml:"miny,attr"`
				MaxX float64 `xml:"maxx,attr"`
				MaxY float64 `xml:"maxy,attr"`
			} `xml:"BoundingBox"`
			O struct {
				X float64 `xml:"x,attr"`
				Y float64 `xml:"y,attr"`
			} `xml:"Origin"`
		}
		xml.Unmarshal(b, &raw)
		m.BoundingBox = struct{ MinX, MinY, MaxX, MaxY float64 }{raw.BB.MinX, raw.BB.MinY, raw.BB.MaxX, raw.BB.MaxY}
		m.Origin = struct{ X, Y float64 }{raw.O.X, raw.O.Y}
		return m
	}
	lb := s.cache.layers["test:b"]
	m := readTileMap(s.tmsTileMap(base, lb, lb.Grids[0], &lb.Formats[0]))
	if m.TileMapService != base+"/1.0.0/" || m.SRS != "EPSG:4326" ||
		m.BoundingBox != (struct{ MinX, MinY, MaxX, MaxY float64 }{0, 0, 90, 45}) ||
		m.Origin != (struct{ X, Y float64 }{-180, -90}) ||
		m.TileFormat.Width != 256 || m.TileFormat.Height != 256 || m.TileFormat.MIME != "image/jpeg" || m.TileFormat.Extension != "jpeg" ||
		m.TileSets.Profile != "global-geodetic" || len(m.TileSets.Sets) != 9 {
		t.Fatalf("test:b tile map %+v", m)
	}
	g, _ := gridset.Builtin("EPSG:4326")
	for i, ts := range m.TileSets.Sets {
		z := i + 2
		if ts.Order != z || ts.UnitsPerPixel != g.Levels[z].Resolution || ts.Href != fmt.Sprintf("%s/1.0.0/test:b@EPSG:4326@jpeg/%d", base, z) {
			t.Errorf("tile set %d: %+v", z, ts)
		}
	}
	la := s.cache.layers["test:a"]
	m = readTileMap(s.tmsTileMap(base, la, la.Grids[1], &la.Formats[0]))
	e := gridset.WebMercatorExtent
	if m.SRS != "EPSG:900913" || m.Origin.X != -e || m.Origin.Y != -e || m.BoundingBox.MaxY != e || len(m.TileSets.Sets) != 31 ||
		m.TileSets.Sets[30].UnitsPerPixel != 156543.03390625/math.Exp2(30) || m.TileSets.Profile != "global-mercator" {
		t.Errorf("test:a mercator tile map %+v", m)
	}
}

func unmarshal(t *testing.T, doc, into any) {
	t.Helper()
	b, err := ogc.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, into); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
}

// --- XYZ ---

func TestXYZRoutes(t *testing.T) {
	h := newServicesHandler(t)
	defHash, redHash := wmsHash(t, h, ""), wmsHash(t, h, "red")
	bHash := h.cache.layers["test:b"].Params.Defaults().Hash() // no filters
	route := func(path string) (tileRequest, *svcError) {
		r := wmtsReq(path)
		return h.routeXYZ(r, pathSegments(r, "/xyz"))
	}
	for _, c := range []struct {
		path string
		idx  gridset.Index
		hash string
	}{
		// XYZ y counts from the top: y 1 of 4 rows is GeoWebCache's y 2.
		{"/xyz/test:a/EPSG:4326/2/5/1.png", gridset.Index{X: 5, Y: 2, Z: 2}, defHash},
		{"/xyz/test:a/EPSG:4326/2/5/1.png?STYLES=red", gridset.Index{X: 5, Y: 2, Z: 2}, redHash},
		{"/xyz/test:a/EPSG:900913/3/6/2.png", gridset.Index{X: 6, Y: 5, Z: 3}, defHash},
		{"/xyz/test:a/EPSG:3857/3/6/2.jpeg", gridset.Index{X: 6, Y: 5, Z: 3}, defHash},
		{"/xyz/test:a/EPSG:900913/0/0/0.png?TILED=true", gridset.Index{X: 0, Y: 0, Z: 0}, defHash},
		{"/xyz/test:b/EPSG:4326/2/4/1.jpg", gridset.Index{X: 4, Y: 2, Z: 2}, bHash},
	} {
		tr, e := route(c.path)
		if e != nil || tr.index != c.idx || tr.params.Hash() != c.hash {
			t.Errorf("%s: %v %v %s", c.path, e, tr.index, tr.params.Hash())
		}
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/xyz", 404},
		{"/xyz/test:a/EPSG:4326/2/5", 404},
		{"/xyz/test:a/EPSG:4326/2/5/1.png/x", 404},
		{"/xyz/nope/EPSG:4326/2/5/1.png", 404},
		{"/xyz/test:a/EPSG:2056/2/5/1.png", 404},
		{"/xyz/test:b/EPSG:3857/2/5/1.jpeg", 404},
		{"/xyz/test:a/EPSG:4326/2/5/1.gif", 404},
		{"/xyz/test:a/EPSG:4326/2/5/1", 404},
		{"/xyz/test:a/EPSG:4326/2/5/y.png", 400},
		{"/xyz/test:a/EPSG:4326/z/5/1.png", 400},
		{"/xyz/test:a/EPSG:4326/22/0/0.png", 404},
		{"/xyz/test:a/EPSG:4326/2/8/0.png", 404},
		{"/xyz/test:a/EPSG:4326/2/0/4.png", 404},
		{"/xyz/test:b/EPSG:4326/11/0/0.jpeg", 404},
		{"/xyz/test:b/EPSG:4326/2/4/2.jpeg", 404}, // y from the top: 2 is lat -45..0, outside
		{"/xyz/test:a/EPSG:4326/2/5/1.png?STYLES=blue", 400},
		{"/xyz/test:a/EPSG:4326/2/5/1.png?STYLES=red&styles=red", 400},
		{"/xyz/test:a/EPSG:4326/2/5/1.png?FOO=1", 400},
		{"/xyz/test:b/EPSG:4326/2/4/1.jpeg?STYLES=red", 400},
	} {
		_, e := route(c.path)
		if e == nil || e.status != c.status {
			t.Errorf("%s: %v, want %d", c.path, e, c.status)
		}
	}
	// Parameters longer than WMS-C takes (max_param_length) are refused.
	if _, e := route("/xyz/test:a/EPSG:4326/2/5/1.png?STYLES=" + strings.Repeat("r", DefaultMaxParamLength+1)); e == nil ||
		e.status != 400 || !strings.Contains(e.msg, "longer than") {
		t.Errorf("long parameter: %v", e)
	}
	// An empty STYLES is no style, as in WMS-C, also for a layer without a filter.
	if _, e := route("/xyz/test:b/EPSG:4326/2/4/1.jpeg?STYLES="); e != nil {
		t.Errorf("empty STYLES: %v", e)
	}
}

// --- dispatch, answers, configuration ---

func TestServeServicesAnswers(t *testing.T) {
	h := newServicesHandler(t)
	serve := func(method, target string) (bool, *httptest.ResponseRecorder) {
		r := httptest.NewRequest(method, target, nil)
		w := httptest.NewRecorder()
		handled, err := h.serve(w, r)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		return handled, w
	}
	for _, p := range []string{"/wms?SERVICE=WMS", "/", "/wmtsx", "/tmsfoo/1.0.0/", "/xy"} {
		if handled, _ := serve("GET", p); handled {
			t.Errorf("%s was taken by the services", p)
		}
	}
	// WMTS errors: an OWS exception report.
	handled, w := serve("GET", "http://h/wmts?SERVICE=WMTS&REQUEST=GetTile&LAYER=test:a&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:2&TILEROW=9&TILECOL=0&FORMAT=image/png")
	var rep struct {
		XMLName   xml.Name `xml:"http://www.opengis.net/ows/1.1 ExceptionReport"`
		Exception struct {
			Code    string `xml:"exceptionCode,attr"`
			Locator string `xml:"locator,attr"`
		} `xml:"http://www.opengis.net/ows/1.1 Exception"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &rep); !handled || err != nil || w.Code != 400 ||
		rep.Exception.Code != "TileOutOfRange" || rep.Exception.Locator != "TileRow" ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), "application/xml") {
		t.Errorf("WMTS out of range: %d %q %v %s", w.Code, w.Header().Get("Content-Type"), err, w.Body)
	}
	// Capabilities with absolute URLs from the request.
	_, w = serve("GET", "http://maps.example.org/wmts/1.0.0/WMTSCapabilities.xml")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `template="http://maps.example.org/wmts/1.0.0/test:a/{Style}/`) {
		t.Errorf("REST capabilities: %d %.300s", w.Code, w.Body)
	}
	_, w = serve("HEAD", "http://maps.example.org/wmts?REQUEST=GetCapabilities&SERVICE=WMTS")
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD capabilities: %d, %d bytes", w.Code, w.Body.Len())
	}
	// TMS and XYZ errors: one line of text.
	for _, c := range []struct {
		target string
		status int
	}{
		{"http://h/tms/1.0.0/test:a@EPSG:4326@png/2/9/0.png", 404},
		{"http://h/xyz/test:a/EPSG:4326/2/x/0.png", 400},
		{"http://h/xyz/nope/EPSG:4326/2/0/0.png", 404},
	} {
		_, w := serve("GET", c.target)
		body := w.Body.String()
		if w.Code != c.status || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" ||
			strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") || len(body) < 10 {
			t.Errorf("%s: %d %q %q", c.target, w.Code, w.Header().Get("Content-Type"), body)
		}
	}
	_, w = serve("GET", "http://h/tms/1.0.0/")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `href="http://h/tms/1.0.0/test:b@EPSG:4326@jpeg"`) {
		t.Errorf("TileMapService: %d %s", w.Code, w.Body)
	}
	for _, p := range []string{"/wmts", "/tms/1.0.0/", "/xyz/test:a/EPSG:4326/0/0/0.png"} {
		handled, w := serve("POST", p)
		if !handled || w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %v %d %q", p, handled, w.Code, w.Header().Get("Allow"))
		}
	}
}

func TestExternalBaseUsesTheOriginalPath(t *testing.T) {
	r := httptest.NewRequest("GET", "http://maps.example.org/geo/wmts/1.0.0/WMTSCapabilities.xml", nil)
	orig := *r
	u := *r.URL
	orig.URL = &u
	// handle_path /geo/* stripped the prefix from the request's path.
	r.URL.Path = "/wmts/1.0.0/WMTSCapabilities.xml"
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, orig))
	if got := serviceURL(r, "/wmts"); got != "http://maps.example.org/geo/wmts" {
		t.Errorf("serviceURL %q", got)
	}
	r.TLS = &tls.ConnectionState{}
	if got := httpx.MountURL(r); got != "https://maps.example.org/geo" {
		t.Errorf("TLS base %q", got)
	}
	plain := httptest.NewRequest("GET", "http://h:8080/wmts", nil)
	if got := serviceURL(plain, "/wmts"); got != "http://h:8080/wmts" {
		t.Errorf("plain %q", got)
	}
}

func TestPathSegments(t *testing.T) {
	for _, c := range []struct {
		target, prefix string
		want           []string
	}{
		{"/wmts", "/wmts", nil},
		{"/wmts/", "/wmts", []string{""}},
		{"/a/b/x/y", "/a/b", []string{"x", "y"}},
		{"/xyz/l/a%2Fb/0/0/0.png", "/xyz", []string{"l", "a/b", "0", "0", "0.png"}},
		{"/xyz/test%3Aa/EPSG:4326", "/xyz", []string{"test:a", "EPSG:4326"}},
	} {
		got := pathSegments(httptest.NewRequest("GET", "http://h"+c.target, nil), c.prefix)
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
			t.Errorf("%s: %q, want %q", c.target, got, c.want)
		}
	}
}

func TestServicesConfiguration(t *testing.T) {
	for _, c := range []struct {
		wmts, tms, xyz string
		err            string
	}{
		{"wmts", "", "", "must start with /"},
		{"", "/", "", "every request"},
		{"", "/t/", "/t", "share the prefix"},
		{"", "", "/t?x", "plain path"},
	} {
		if _, err := compileServices(&ServicesConfig{WMTS: c.wmts, TMS: c.tms, XYZ: c.xyz}, newTestHandler(t)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q %q %q: %v, want %q", c.wmts, c.tms, c.xyz, err, c.err)
		}
	}
	// Nested prefixes: the longer wins.
	h := servicesOf(t, newTestHandler(t), &ServicesConfig{TMS: "/tiles", XYZ: "/tiles/xyz"})
	w := httptest.NewRecorder()
	h.serve(w, httptest.NewRequest("GET", "/tiles/xyz/test:a/EPSG:4326/0/9/0.png", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), "outside layer") {
		t.Errorf("nested prefix: %d %s", w.Code, w.Body)
	}

	// The Caddyfile block.
	var th Handler
	d := caddyfile.NewTestDispenser(`tile_cache http://u/wms {
		services {
			wmts /wmts
			tms /tms
			xyz /maps/xyz
			demo /demo
		}
	}`)
	if err := th.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if s := th.Services; s == nil || s.WMTS != "/wmts" || s.TMS != "/tms" || s.XYZ != "/maps/xyz" || s.Demo != "/demo" {
		t.Errorf("parsed %+v", th.Services)
	}
	for _, bad := range []string{
		"services {\n wms /wms\n}", "services {\n wmts\n}", "services {\n wmts /a /b\n}",
		"services {\n tms tms\n}", "services {\n xyz /\n}", "services x {\n}",
	} {
		var th Handler
		if err := th.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tile_cache http://u/wms {\n" + bad + "\n}")); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDemoInfo(t *testing.T) {
	h := newServicesHandler(t)
	info := h.demoInfo()
	if info.WMSURL != "../wms" || info.WMTSURL != "../wmts" || info.TMSURL != "../tms" || info.XYZURL != "../xyz" {
		t.Errorf("URLs %q %q %q %q", info.WMSURL, info.WMTSURL, info.TMSURL, info.XYZURL)
	}
	if len(info.Layers) != 2 || info.Layers[0].Name != "test:a" || len(info.Layers[0].Gridsets) != 2 ||
		fmt.Sprint(info.Layers[0].Styles) != "[ red]" || fmt.Sprint(info.Layers[0].Formats) != "[image/png image/jpeg]" {
		t.Fatalf("layers %+v", info.Layers)
	}
	b := info.Layers[1].Gridsets[0]
	if b.Name != "EPSG:4326" || b.SRS != "EPSG:4326" || b.Extent != [4]float64{-180, -90, 180, 90} ||
		b.Coverage != [4]float64{0, 0, 90, 45} || len(b.Resolutions) != 22 || b.Resolutions[0] != 0.703125 ||
		b.MinZoom != 2 || b.MaxZoom != 10 || b.TopLeft || b.TileWidth != 256 {
		t.Errorf("test:b gridset %+v", b)
	}
	m := info.Layers[0].Gridsets[1]
	if m.SRS != "EPSG:900913" || m.MaxZoom != 30 || m.Coverage[3] != gridset.WebMercatorExtent {
		t.Errorf("test:a mercator %+v", m)
	}

	for _, c := range []struct{ dir, target, want string }{
		{"/demo/", "/wmts", "../wmts"},
		{"/demo/", "/demo/x", "x"},
		{"/a/demo/", "/a/tms", "../tms"},
		{"/a/demo/", "/b/c", "../../b/c"},
		{"/demo/", "/", "../"},
		{"/demo/", "/EPSG:4326", "../EPSG:4326"},
		{"/", "/EPSG:x", "./EPSG:x"},
		{"/", "/wms", "wms"},
	} {
		if got := relativePath(c.dir, c.target); got != c.want {
			t.Errorf("relativePath(%q, %q) = %q, want %q", c.dir, c.target, got, c.want)
		}
	}
}
