package tilecache

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
)

func ff(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// bboxStr formats a bbox as x,y order (WMS 1.1.1), or y,x when yx is set
// (WMS 1.3.0 with a lat/lon CRS).
func bboxStr(b gridset.BBox, yx bool) string {
	if yx {
		return ff(b.MinY) + "," + ff(b.MinX) + "," + ff(b.MaxY) + "," + ff(b.MaxX)
	}
	return ff(b.MinX) + "," + ff(b.MinY) + "," + ff(b.MaxX) + "," + ff(b.MaxY)
}

func tileBBox(t testing.TB, grid string, idx gridset.Index) gridset.BBox {
	t.Helper()
	g, ok := gridset.Builtin(grid)
	if !ok {
		t.Fatalf("no gridset %s", grid)
	}
	return g.TileBBox(idx)
}

// shift moves a bbox by frac of a tile in x and y.
func shift(b gridset.BBox, frac float64) gridset.BBox {
	dx, dy := (b.MaxX-b.MinX)*frac, (b.MaxY-b.MinY)*frac
	return gridset.BBox{MinX: b.MinX + dx, MinY: b.MinY + dy, MaxX: b.MaxX + dx, MaxY: b.MaxY + dy}
}

// getMap builds a query from key=value pairs, in order, without escaping.
func getMap(kv ...string) string {
	var sb strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(kv[i])
		sb.WriteByte('=')
		sb.WriteString(kv[i+1])
	}
	return sb.String()
}

// q111 is a WMS 1.1.1 tile GetMap for layer test:a with extra pairs
// appended (which may override nothing: duplicates are the caller's intent).
func q111(layer, srs, bbox string, extra ...string) string {
	base := getMap("SERVICE", "WMS", "VERSION", "1.1.1", "REQUEST", "GetMap",
		"LAYERS", layer, "STYLES", "", "FORMAT", "image/png",
		"SRS", srs, "BBOX", bbox, "WIDTH", "256", "HEIGHT", "256")
	if len(extra) > 0 {
		base += "&" + getMap(extra...)
	}
	return base
}

func TestMatchTile(t *testing.T) {
	h := newTestHandler(t)

	i4326 := gridset.Index{X: 5, Y: 2, Z: 3}
	b4326 := tileBBox(t, "EPSG:4326", i4326)
	i900913 := gridset.Index{X: 37, Y: 80, Z: 7}
	b900913 := tileBBox(t, "EPSG:900913", i900913)
	// test:b: lon 0..90, lat 0..45 at z3 (22.5° tiles) is x 8..11, y 4..5.
	iB := gridset.Index{X: 9, Y: 4, Z: 3}
	bB := tileBBox(t, "EPSG:4326", iB)

	s4326 := bboxStr(b4326, false)
	s900913 := bboxStr(b900913, false)

	type want struct {
		grid  string
		index gridset.Index
	}
	ok4326 := &want{"EPSG:4326", i4326}
	ok900913 := &want{"EPSG:900913", i900913}

	jpegB := func(bbox string, extra ...string) string {
		return getMap(append([]string{"SERVICE", "WMS", "VERSION", "1.1.1", "REQUEST", "GetMap",
			"LAYERS", "test:b", "STYLES", "", "FORMAT", "image/jpeg",
			"SRS", "EPSG:4326", "BBOX", bbox, "WIDTH", "256", "HEIGHT", "256"}, extra...)...)
	}
	v130 := func(crs, bbox string) string {
		return getMap("SERVICE", "WMS", "VERSION", "1.3.0", "REQUEST", "GetMap",
			"LAYERS", "test:a", "STYLES", "", "FORMAT", "image/png",
			"CRS", crs, "BBOX", bbox, "WIDTH", "256", "HEIGHT", "256")
	}

	tests := []struct {
		name   string
		query  string
		ok     *want  // the tile it must match
		reason string // or the reason it must not
	}{
		// valid tiles
		{"1.1.1 EPSG:4326", q111("test:a", "EPSG:4326", s4326), ok4326, ""},
		{"1.1.1 EPSG:900913", q111("test:a", "EPSG:900913", s900913), ok900913, ""},
		{"1.1.1 EPSG:3857 alias", q111("test:a", "EPSG:3857", s900913), ok900913, ""},
		{"1.1.1 EPSG:102113 alias", q111("test:a", "EPSG:102113", s900913), ok900913, ""},
		{"1.1.1 EPSG:102100 alias", q111("test:a", "EPSG:102100", s900913), ok900913, ""},
		{"1.1.1 lower-case epsg", q111("test:a", "epsg:4326", s4326), ok4326, ""},
		{"no VERSION means 1.1.1 rules", getMap("SERVICE", "WMS", "REQUEST", "GetMap", "LAYERS", "test:a",
			"FORMAT", "image/png", "SRS", "EPSG:4326", "BBOX", s4326, "WIDTH", "256", "HEIGHT", "256"), ok4326, ""},
		{"no SERVICE", getMap("VERSION", "1.1.1", "REQUEST", "GetMap", "LAYERS", "test:a",
			"FORMAT", "image/png", "SRS", "EPSG:4326", "BBOX", s4326, "WIDTH", "256", "HEIGHT", "256"), ok4326, ""},
		{"test:b jpeg", jpegB(bboxStr(bB, false)), &want{"EPSG:4326", iB}, ""},
		{"test:b image/jpg is not the configured name", strings.Replace(jpegB(bboxStr(bB, false)), "image/jpeg", "image/jpg", 1), nil, passFormat},
		{"format case-insensitive", strings.Replace(q111("test:a", "EPSG:4326", s4326), "image/png", "IMAGE/PNG", 1), ok4326, ""},

		// WMS 1.3.0 axis order
		{"1.3.0 EPSG:4326 lat,lon", v130("EPSG:4326", bboxStr(b4326, true)), ok4326, ""},
		{"1.3.0 EPSG:4326 lon,lat read as lat,lon is outside", v130("EPSG:4326", bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 12, Y: 2, Z: 3}), false)), nil, passBBox},
		{"1.3.0 EPSG:4326 lon,lat of a square tile is its mirror tile", v130("EPSG:4326", s4326), &want{"EPSG:4326", gridset.Index{X: 6, Y: 1, Z: 3}}, ""},
		{"1.3.0 urn EPSG::4326 lat,lon", v130("urn:ogc:def:crs:EPSG::4326", bboxStr(b4326, true)), ok4326, ""},
		{"1.3.0 CRS:84 lon,lat", v130("CRS:84", s4326), ok4326, ""},
		{"1.3.0 EPSG:3857 no swap", v130("EPSG:3857", s900913), ok900913, ""},
		{"1.3.0 EPSG:900913 no swap", v130("EPSG:900913", s900913), ok900913, ""},

		// tolerance: GWC's 10% of a tile
		{"shift 0.09 tile", q111("test:a", "EPSG:4326", bboxStr(shift(b4326, 0.09), false)), ok4326, ""},
		{"shift -0.09 tile", q111("test:a", "EPSG:4326", bboxStr(shift(b4326, -0.09), false)), ok4326, ""},
		{"shift 0.11 tile", q111("test:a", "EPSG:4326", bboxStr(shift(b4326, 0.11), false)), nil, passBBox},
		{"shift -0.11 tile", q111("test:a", "EPSG:4326", bboxStr(shift(b4326, -0.11), false)), nil, passBBox},
		{"900913 shift 0.09", q111("test:a", "EPSG:900913", bboxStr(shift(b900913, 0.09), false)), ok900913, ""},
		{"900913 shift 0.11", q111("test:a", "EPSG:900913", bboxStr(shift(b900913, 0.11), false)), nil, passBBox},
		{"OpenLayers' world extent", q111("test:a", "EPSG:900913",
			"-20037508.342789244,-20037508.342789244,20037508.342789244,20037508.342789244"), &want{"EPSG:900913", gridset.Index{Z: 0}}, ""},

		// parameter names and values
		{"lower-case names", getMap("service", "WMS", "version", "1.1.1", "request", "GetMap", "layers", "test:a", "styles", "",
			"format", "image/png", "srs", "EPSG:4326", "bbox", s4326, "width", "256", "height", "256"), ok4326, ""},
		{"mixed-case names", getMap("Service", "WMS", "Version", "1.1.1", "Request", "GetMap", "Layers", "test:a",
			"Styles", "", "Format", "image/png", "Srs", "EPSG:4326", "bBoX", s4326, "Width", "256", "Height", "256"), ok4326, ""},
		{"mixed-case values", getMap("SERVICE", "wms", "VERSION", "1.1.1", "REQUEST", "getmap", "LAYERS", "test:a",
			"FORMAT", "image/png", "SRS", "EPSG:4326", "BBOX", s4326, "WIDTH", "256", "HEIGHT", "256"), ok4326, ""},
		{"BBOX with %2C", q111("test:a", "EPSG:4326", strings.ReplaceAll(s4326, ",", "%2C")), ok4326, ""},
		{"BBOX with %2c", q111("test:a", "EPSG:4326", strings.ReplaceAll(s4326, ",", "%2c")), ok4326, ""},
		{"LAYERS test%3Aa", q111("test%3Aa", "EPSG:4326", s4326), ok4326, ""},
		{"SRS EPSG%3A4326", q111("test:a", "EPSG%3A4326", s4326), ok4326, ""},
		{"percent-encoded key", strings.Replace(q111("test:a", "EPSG:4326", s4326), "LAYERS=", "%4CAYERS=", 1), ok4326, ""},
		{"'+' is a space (BBOX 'a, b, c, d')", q111("test:a", "EPSG:4326", strings.ReplaceAll(s4326, ",", ",+")), ok4326, ""},
		{"'+' in FORMAT is a space", strings.Replace(q111("test:a", "EPSG:4326", s4326), "FORMAT=image/png", "FORMAT=image/png+", 1), nil, passFormat},
		{"empty pairs and a trailing &", "&&" + q111("test:a", "EPSG:4326", s4326) + "&&", ok4326, ""},

		// neutral parameters
		{"TILED=true", q111("test:a", "EPSG:4326", s4326, "TILED", "true"), ok4326, ""},
		{"tiled, transparent, exceptions, tilesorigin", q111("test:a", "EPSG:4326", s4326,
			"tiled", "true", "TRANSPARENT", "false", "EXCEPTIONS", "application/vnd.ogc.se_inimage", "TILESORIGIN", "-180,-90"), ok4326, ""},

		// standard parameters at the values tiles are rendered with
		{"what OWSLib always sends", q111("test:a", "EPSG:4326", s4326,
			"TRANSPARENT", "TRUE", "BGCOLOR", "0xFFFFFF", "EXCEPTIONS", "application/vnd.ogc.se_xml"), ok4326, ""},
		{"bgcolor lower case", q111("test:a", "EPSG:4326", s4326, "bgcolor", "0xffffff"), ok4326, ""},
		{"BGCOLOR black", q111("test:a", "EPSG:4326", s4326, "BGCOLOR", "0x000000"), nil, passUnknownParam},
		{"TRANSPARENT either way (GeoWebCache's rule)", q111("test:a", "EPSG:4326", s4326, "TRANSPARENT", "FALSE"), ok4326, ""},
		{"SLD_VERSION without an SLD", q111("test:a", "EPSG:4326", s4326, "SLD_VERSION", "1.1.0"), ok4326, ""},
		{"empty SLD_VERSION", q111("test:a", "EPSG:4326", s4326, "SLD_VERSION", ""), ok4326, ""},
		{"SLD is not a default", q111("test:a", "EPSG:4326", s4326, "SLD_VERSION", "1.1.0", "SLD", "http://x/s.sld"), nil, passUnknownParam},
		{"configured neutral FORMAT_OPTIONS", q111("test:a", "EPSG:4326", s4326, "format_options", "dpi:90"), ok4326, ""},
		{"neutral given twice is not a duplicate", q111("test:a", "EPSG:4326", s4326, "TILED", "true", "tiled", "false"), ok4326, ""},
		{"key without '=' (neutral)", q111("test:a", "EPSG:4326", s4326) + "&TILED", ok4326, ""},

		// STYLES filter
		{"STYLES=red allowed", strings.Replace(q111("test:a", "EPSG:4326", s4326), "STYLES=", "STYLES=red", 1), ok4326, ""},
		{"STYLES=blue not allowed", strings.Replace(q111("test:a", "EPSG:4326", s4326), "STYLES=", "STYLES=blue", 1), nil, passParam},
		{"STYLES on a layer without a STYLES filter", strings.Replace(jpegB(bboxStr(bB, false)), "STYLES=", "STYLES=red", 1), nil, passParam},

		// not-getmap
		{"GetCapabilities", "SERVICE=WMS&REQUEST=GetCapabilities", nil, passNotGetMap},
		{"GetFeatureInfo", strings.Replace(q111("test:a", "EPSG:4326", s4326), "GetMap", "GetFeatureInfo", 1), nil, passNotGetMap},
		{"SERVICE=WFS", strings.Replace(q111("test:a", "EPSG:4326", s4326), "SERVICE=WMS", "SERVICE=WFS", 1), nil, passNotGetMap},
		{"SERVICE empty", strings.Replace(q111("test:a", "EPSG:4326", s4326), "SERVICE=WMS", "SERVICE=", 1), nil, passNotGetMap},
		{"no REQUEST", strings.Replace(q111("test:a", "EPSG:4326", s4326), "REQUEST=GetMap&", "", 1), nil, passNotGetMap},
		{"empty query", "", nil, passNotGetMap},

		// unknown-layer
		{"unknown layer", q111("test:nope", "EPSG:4326", s4326), nil, passLayer},
		{"two layers", q111("test:a,test:b", "EPSG:4326", s4326), nil, passLayer},
		{"layer name case matters", q111("TEST:A", "EPSG:4326", s4326), nil, passLayer},
		{"no LAYERS", strings.Replace(q111("test:a", "EPSG:4326", s4326), "LAYERS=test:a&", "", 1), nil, passLayer},

		// format
		{"image/gif", strings.Replace(q111("test:a", "EPSG:4326", s4326), "image/png", "image/gif", 1), nil, passFormat},
		{"png on jpeg-only layer", strings.Replace(jpegB(bboxStr(bB, false)), "image/jpeg", "image/png", 1), nil, passFormat},
		{"png8 variant not configured", strings.Replace(q111("test:a", "EPSG:4326", s4326), "image/png", "image/png;+mode%3D8bit", 1), nil, passFormat},

		// srs
		{"unknown SRS code", q111("test:a", "EPSG:2056", s4326), nil, passSRS},
		{"SRS of a gridset the layer lacks", strings.Replace(jpegB(bboxStr(bB, false)), "EPSG:4326", "EPSG:3857", 1), nil, passSRS},
		{"malformed SRS", q111("test:a", "EPSG:abc", s4326), nil, passSRS},
		{"SRS without authority", q111("test:a", "4326", s4326), nil, passSRS},
		{"no SRS", strings.Replace(q111("test:a", "EPSG:4326", s4326), "SRS=EPSG:4326&", "", 1), nil, passSRS},
		{"1.3.0 no CRS", strings.Replace(v130("EPSG:4326", bboxStr(b4326, true)), "CRS=EPSG:4326&", "", 1), nil, passSRS},

		// size
		{"WIDTH not a number", strings.Replace(q111("test:a", "EPSG:4326", s4326), "WIDTH=256", "WIDTH=abc", 1), nil, passSize},
		{"HEIGHT empty", strings.Replace(q111("test:a", "EPSG:4326", s4326), "HEIGHT=256", "HEIGHT=", 1), nil, passSize},
		{"WIDTH 512", strings.Replace(q111("test:a", "EPSG:4326", s4326), "WIDTH=256", "WIDTH=512", 1), nil, passSize},
		{"512x512 with a bbox twice as large", strings.NewReplacer("WIDTH=256", "WIDTH=512", "HEIGHT=256", "HEIGHT=512").Replace(
			q111("test:a", "EPSG:4326", bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 2, Y: 1, Z: 2}), false))), nil, passSize},

		// bbox
		{"BBOX 3 numbers", q111("test:a", "EPSG:4326", "-45,0,-22.5"), nil, passBBox},
		{"BBOX 5 numbers", q111("test:a", "EPSG:4326", s4326+",1"), nil, passBBox},
		{"BBOX NaN", q111("test:a", "EPSG:4326", "NaN,0,-22.5,22.5"), nil, passBBox},
		{"BBOX Inf", q111("test:a", "EPSG:4326", "-45,0,Inf,22.5"), nil, passBBox},
		{"BBOX not numbers", q111("test:a", "EPSG:4326", "a,b,c,d"), nil, passBBox},
		{"BBOX empty", q111("test:a", "EPSG:4326", ""), nil, passBBox},
		{"BBOX inverted", q111("test:a", "EPSG:4326", ff(b4326.MaxX)+","+ff(b4326.MinY)+","+ff(b4326.MinX)+","+ff(b4326.MaxY)), nil, passBBox},
		{"BBOX misaligned by half a tile", q111("test:a", "EPSG:4326", bboxStr(shift(b4326, 0.5), false)), nil, passBBox},
		{"BBOX 1.5 tiles wide", q111("test:a", "EPSG:4326", ff(b4326.MinX)+","+ff(b4326.MinY)+","+ff(b4326.MaxX+11.25)+","+ff(b4326.MaxY)), nil, passBBox},
		{"BBOX left of the grid", q111("test:a", "EPSG:4326", "-202.5,0,-180,22.5"), nil, passBBox},
		{"BBOX above the grid", q111("test:a", "EPSG:4326", "0,90,22.5,112.5"), nil, passBBox},
		{"900913 BBOX outside the grid", q111("test:a", "EPSG:900913",
			ff(b900913.MinX+40075016.68)+","+ff(b900913.MinY)+","+ff(b900913.MaxX+40075016.68)+","+ff(b900913.MaxY)), nil, passBBox},
		{"1.3.0 EPSG:4326 lon,lat on the whole world", v130("EPSG:4326", "-180,-90,0,90"), nil, passBBox},

		// parameter / unknown-parameter
		{"unknown parameter", q111("test:a", "EPSG:4326", s4326, "CQL_FILTER", "a=1"), nil, passUnknownParam},
		{"unknown parameter with empty value", q111("test:a", "EPSG:4326", s4326, "BGCOLOR", ""), nil, passUnknownParam},
		{"unknown parameter without '='", q111("test:a", "EPSG:4326", s4326) + "&FOO", nil, passUnknownParam},

		// duplicate-parameter
		{"BBOX twice, different case", q111("test:a", "EPSG:4326", s4326, "bbox", s4326), nil, passDuplicate},
		{"LAYERS twice", q111("test:a", "EPSG:4326", s4326, "Layers", "test:a"), nil, passDuplicate},
		{"extra twice, different case", q111("test:a", "EPSG:4326", s4326, "FOO", "1", "foo", "1"), nil, passDuplicate},

		// zoom-not-cached, outside-extent
		{"test:b z1 below min_zoom", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 2, Y: 1, Z: 1}), false)), nil, passZoom},
		{"test:b z11 above max_zoom", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 2048, Y: 1024, Z: 11}), false)), nil, passZoom},
		{"test:b z10 at max_zoom", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 1030, Y: 600, Z: 10}), false)), &want{"EPSG:4326", gridset.Index{X: 1030, Y: 600, Z: 10}}, ""},
		{"test:b z2 at min_zoom", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 4, Y: 2, Z: 2}), false)), &want{"EPSG:4326", gridset.Index{X: 4, Y: 2, Z: 2}}, ""},
		{"test:b outside the extent (west)", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 7, Y: 4, Z: 3}), false)), nil, passCoverage},
		{"test:b outside the extent (north)", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 9, Y: 6, Z: 3}), false)), nil, passCoverage},
		{"test:b outside the extent (south)", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 9, Y: 3, Z: 3}), false)), nil, passCoverage},
		{"test:b last tile inside the extent", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 11, Y: 5, Z: 3}), false)), &want{"EPSG:4326", gridset.Index{X: 11, Y: 5, Z: 3}}, ""},
		{"test:b first tile east of the extent", jpegB(bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 12, Y: 5, Z: 3}), false)), nil, passCoverage},

		// malformed
		{"bad escape in a value", q111("test:a", "EPSG:4326", "-45%2,0,-22.5,22.5"), nil, passMalformed},
		{"bad escape in a key", "%ZZ=1&" + q111("test:a", "EPSG:4326", s4326), nil, passMalformed},
		{"truncated escape at the end", q111("test:a", "EPSG:4326", s4326) + "&TILED=%", nil, passMalformed},

		// version
		{"1.3.0 with SRS", strings.Replace(q111("test:a", "EPSG:4326", bboxStr(b4326, true)), "1.1.1", "1.3.0", 1), nil, passVersion},
		{"1.3.0 with SRS and CRS", v130("EPSG:4326", bboxStr(b4326, true)) + "&SRS=EPSG:4326", nil, passVersion},
		{"1.1.1 with CRS", strings.Replace(v130("EPSG:4326", s4326), "1.3.0", "1.1.1", 1), nil, passVersion},
		{"no VERSION with CRS", strings.Replace(v130("EPSG:4326", s4326), "VERSION=1.3.0&", "", 1), nil, passVersion},
		{"VERSION=2.0", strings.Replace(q111("test:a", "EPSG:4326", s4326), "1.1.1", "2.0", 1), nil, passVersion},
		{"VERSION=1.3", strings.Replace(v130("EPSG:4326", bboxStr(b4326, true)), "1.3.0", "1.3", 1), nil, passVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, reason := match(h, tc.query)
			if tc.ok == nil {
				if reason != tc.reason {
					t.Fatalf("reason %q, want %q (query %s)", reason, tc.reason, tc.query)
				}
				return
			}
			if reason != "" {
				t.Fatalf("not matched: %q (query %s)", reason, tc.query)
			}
			if tr.grid == nil || tr.grid.Name != tc.ok.grid || tr.index != tc.ok.index {
				name := "<nil>"
				if tr.grid != nil {
					name = tr.grid.Name
				}
				t.Fatalf("matched %s %v, want %s %v", name, tr.index, tc.ok.grid, tc.ok.index)
			}
			if tr.layer == nil || tr.format == nil {
				t.Fatalf("layer %v format %v", tr.layer, tr.format)
			}
		})
	}
}

// Every reason constant of wms.go, except passMethod (decided in
// ServeHTTP from the method), must come out of some input above; this
// catches a new reason that no test exercises.
func TestEveryReasonCovered(t *testing.T) {
	h := newTestHandler(t)
	b := bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 3}), false)
	bB := bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 1, Y: 1, Z: 3}), false)
	inputs := map[string]string{
		passNotGetMap:    "REQUEST=GetCapabilities",
		passLayer:        q111("nope", "EPSG:4326", b),
		passFormat:       strings.Replace(q111("test:a", "EPSG:4326", b), "image/png", "image/gif", 1),
		passSRS:          q111("test:a", "EPSG:31467", b),
		passSize:         strings.Replace(q111("test:a", "EPSG:4326", b), "WIDTH=256", "WIDTH=255", 1),
		passBBox:         q111("test:a", "EPSG:4326", "1,2,3"),
		passParam:        strings.Replace(q111("test:a", "EPSG:4326", b), "STYLES=", "STYLES=x", 1),
		passDuplicate:    q111("test:a", "EPSG:4326", b, "Srs", "EPSG:4326"),
		passZoom:         strings.Replace(strings.Replace(q111("test:b", "EPSG:4326", "-180,-90,0,90"), "image/png", "image/jpeg", 1), "STYLES=&", "", 1),
		passCoverage:     strings.Replace(strings.Replace(q111("test:b", "EPSG:4326", bB), "image/png", "image/jpeg", 1), "STYLES=&", "", 1),
		passMalformed:    "REQUEST=%G",
		passVersion:      "REQUEST=GetMap&VERSION=1.2.0",
		passUnknownParam: q111("test:a", "EPSG:4326", b, "ENV", "x:1"),
	}
	for want, q := range inputs {
		if _, got := match(h, q); got != want {
			t.Errorf("%s: got %q for %s", want, got, q)
		}
	}
}

// The same tile asked for by WMS 1.1.1 and 1.3.0 is the same tile, in each
// gridset, at several levels and positions (including the last row and
// column, where rounding would show).
func TestV130SameTileAsV111(t *testing.T) {
	h := newTestHandler(t)
	for _, grid := range []struct{ name, srs111, crs130 string }{
		{"EPSG:4326", "EPSG:4326", "EPSG:4326"},
		{"EPSG:900913", "EPSG:900913", "EPSG:3857"},
	} {
		g, _ := gridset.Builtin(grid.name)
		for z := 0; z < len(g.Levels); z += 4 {
			l := g.Levels[z]
			for _, idx := range []gridset.Index{{X: 0, Y: 0, Z: z}, {X: l.TilesWide - 1, Y: l.TilesHigh - 1, Z: z}, {X: l.TilesWide / 3, Y: l.TilesHigh / 2, Z: z}} {
				b := g.TileBBox(idx)
				tr1, r1 := match(h, q111("test:a", grid.srs111, bboxStr(b, false)))
				yx := g.YFirst
				q130 := getMap("SERVICE", "WMS", "VERSION", "1.3.0", "REQUEST", "GetMap", "LAYERS", "test:a",
					"FORMAT", "image/png", "CRS", grid.crs130, "BBOX", bboxStr(b, yx), "WIDTH", "256", "HEIGHT", "256")
				tr3, r3 := match(h, q130)
				if r1 != "" || r3 != "" || tr1.index != idx || tr3.index != idx || tr1.grid != tr3.grid {
					t.Errorf("%s %v: 1.1.1 %v %q, 1.3.0 %v %q", grid.name, idx, tr1.index, r1, tr3.index, r3)
				}
			}
		}
	}
}

// The parameter set a match carries is the layer's: defaults when the
// request sends no STYLES, the filter's value otherwise.
func TestMatchTileParams(t *testing.T) {
	h := newTestHandler(t)
	b := bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 3}), false)
	def, r := match(h, q111("test:a", "EPSG:4326", b))
	if r != "" {
		t.Fatal(r)
	}
	noStyles, r := match(h, strings.Replace(q111("test:a", "EPSG:4326", b), "STYLES=&", "", 1))
	if r != "" {
		t.Fatal(r)
	}
	red, r := match(h, strings.Replace(q111("test:a", "EPSG:4326", b), "STYLES=", "styles=red", 1))
	if r != "" {
		t.Fatal(r)
	}
	if def.params.Hash() != noStyles.params.Hash() {
		t.Errorf("STYLES= and no STYLES differ: %s vs %s", def.params.Canonical(), noStyles.params.Canonical())
	}
	if def.params.Hash() == red.params.Hash() {
		t.Errorf("STYLES=red shares the default's hash %s", red.params.Hash())
	}
	if got := red.params.Get("STYLES"); got != "red" {
		t.Errorf("STYLES = %q", got)
	}
}

// Extras up to the fixed array's size parse; one more is not a tile request.
func TestParseWMSManyExtras(t *testing.T) {
	h := newTestHandler(t)
	var req query
	q := "A=1&B=2&C=3&D=4&E=5&F=6&a=7"
	if r := h.scanWMS(q, &req); r != passDuplicate {
		t.Fatalf("got %q", r)
	}
	req = query{}
	if r := h.scanWMS("A=1&B=2&C=3&D=4&E=5&F=6", &req); r != "" || req.nExtra != 6 {
		t.Fatalf("got %q, %d extras", r, req.nExtra)
	}
	if req.extra[5] != (param{"F", "6"}) {
		t.Fatalf("extra %v", req.extra)
	}
	req = query{}
	if r := h.scanWMS("A=1&B=2&C=3&D=4&E=5&F=6&G=7&H=8&I=9", &req); r != passUnknownParam {
		t.Fatalf("9 extras: got %q", r)
	}
}

func TestParseWMSUnescapes(t *testing.T) {
	h := newTestHandler(t)
	var req query
	if r := h.scanWMS("LAYERS=a%3Ab+c&%42BOX=1%2C2&CQL_FILTER=x%3D%27a+b%27", &req); r != "" {
		t.Fatal(r)
	}
	if req.fields[fLayers] != "a:b c" || req.fields[fBBox] != "1,2" || !req.seen[fBBox] {
		t.Fatalf("fields %q", req.fields)
	}
	if req.nExtra != 1 || req.extra[0] != (param{"CQL_FILTER", "x='a b'"}) {
		t.Fatalf("extra %q", req.extra)
	}
}

func TestParseBBox(t *testing.T) {
	tests := []struct {
		in   string
		want gridset.BBox
		ok   bool
	}{
		{"1,2,3,4", gridset.BBox{MinX: 1, MinY: 2, MaxX: 3, MaxY: 4}, true},
		{"-180,-90,180,90", gridset.BBox{MinX: -180, MinY: -90, MaxX: 180, MaxY: 90}, true},
		{" 1 , 2 ,3,  4 ", gridset.BBox{MinX: 1, MinY: 2, MaxX: 3, MaxY: 4}, true},
		{"1e3,-2.5E-1,+3,4.", gridset.BBox{MinX: 1000, MinY: -0.25, MaxX: 3, MaxY: 4}, true},
		{"-20037508.342789244,0,0,20037508.342789244", gridset.BBox{MinX: -20037508.342789244, MaxY: 20037508.342789244}, true},
		// parseBBox reads numbers only; the order of min and max is Match's business
		{"3,4,1,2", gridset.BBox{MinX: 3, MinY: 4, MaxX: 1, MaxY: 2}, true},
		{"", gridset.BBox{}, false},
		{"1", gridset.BBox{}, false},
		{"1,2,3", gridset.BBox{}, false},
		{"1,2,3,", gridset.BBox{}, false},
		{",1,2,3", gridset.BBox{}, false},
		{"1,2,3,4,", gridset.BBox{}, false},
		{"1,2,3,4,5", gridset.BBox{}, false},
		{"1;2;3;4", gridset.BBox{}, false},
		{"1 2 3 4", gridset.BBox{}, false},
		{"a,2,3,4", gridset.BBox{}, false},
		{"1,2,3,4x", gridset.BBox{}, false},
		{"1e400,2,3,4", gridset.BBox{}, false}, // out of range
	}
	for _, tc := range tests {
		got, ok := parseBBox(tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseBBox(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	// NaN and Inf parse (ParseFloat accepts them); Match refuses them.
	for _, in := range []string{"NaN,0,1,1", "0,0,Inf,1", "-inf,0,1,1"} {
		b, ok := parseBBox(in)
		if !ok {
			t.Errorf("parseBBox(%q) refused", in)
			continue
		}
		if !math.IsNaN(b.MinX) && !math.IsInf(b.MinX, 0) && !math.IsInf(b.MaxX, 0) {
			t.Errorf("parseBBox(%q) = %v", in, b)
		}
	}
}

// Matching a plain tile request allocates nothing: it is the hit path.
func TestMatchTileAllocs(t *testing.T) {
	h := newTestHandler(t)
	q := q111("test:a", "EPSG:3857", bboxStr(tileBBox(t, "EPSG:900913", gridset.Index{X: 37, Y: 80, Z: 7}), false),
		"TILED", "true", "TRANSPARENT", "true")
	allocs := testing.AllocsPerRun(100, func() {
		if _, r := match(h, q); r != "" {
			t.Fatal(r)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per match", allocs)
	}
}

// A configured neutral parameter that a layer also filters would let the
// neutral list win, so the filter would never see the value and every
// CQL_FILTER would be answered with the unfiltered tiles: compiling refuses
// the combination, naming both.
func TestNeutralParamDoesNotBypassFilter(t *testing.T) {
	_, err := compile("x", Config{
		Upstream:      "http://a/wms",
		NeutralParams: []string{"cql_filter"},
		Layers: []LayerConfig{{
			Name:       "test:a",
			Parameters: []params.FilterConfig{{Key: "CQL_FILTER", Values: []string{"", "pop>1000"}}},
		}},
	})
	if err == nil || !strings.Contains(err.Error(), "neutral_params cql_filter") || !strings.Contains(err.Error(), `layer "test:a"`) {
		t.Fatalf("compile: %v, want the neutral_params/filter clash refused", err)
	}
	// A default neutral parameter simply yields to the filter.
	c := compileTest(t, Config{Upstream: "http://a/wms", Layers: []LayerConfig{{
		Name:       "test:a",
		Parameters: []params.FilterConfig{{Key: "TILED", Values: []string{"", "yes"}}},
	}}})
	b := bboxStr(tileBBox(t, "EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 3}), false)
	tr, r := match(c, q111("test:a", "EPSG:4326", b, "TILED", "yes"))
	if r != "" || tr.params.Get("TILED") != "yes" {
		t.Fatalf("TILED=yes with a TILED filter: %q, params %q", r, tr.params.Canonical())
	}
}
