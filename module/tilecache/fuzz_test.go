package tilecache

import (
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// knownReasons are every answer matching may give besides "".
var knownReasons = map[string]bool{
	passNotGetMap: true, passLayer: true, passFormat: true, passSRS: true, passSize: true,
	passBBox: true, passParam: true, passDuplicate: true, passZoom: true, passCoverage: true,
	passMalformed: true, passVersion: true, passMethod: true, passUnknownParam: true,
}

// FuzzMatchWMS feeds arbitrary query strings to the WMS-C matcher: it must
// never panic, must answer with one of its known reasons, and a tile it
// accepts must really be a tile of the layer's coverage.
func FuzzMatchWMS(f *testing.F) {
	for _, seed := range []string{
		"SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=test:a&STYLES=&SRS=EPSG:4326&BBOX=-180,-90,0,90&WIDTH=256&HEIGHT=256&FORMAT=image/png",
		"service=wms&version=1.3.0&request=getmap&layers=test%3Aa&styles=red&crs=EPSG%3A4326&bbox=0%2C90%2C90%2C180&width=256&height=256&format=image%2Fpng",
		"REQUEST=GetMap&LAYERS=test:b&SRS=EPSG:4326&BBOX=0,0,45,45&WIDTH=256&HEIGHT=256&FORMAT=image/jpeg&TILED=true",
		"REQUEST=GetMap&LAYERS=test:a&SRS=EPSG:3857&BBOX=-20037508.34,-20037508.34,20037508.34,20037508.34&WIDTH=256&HEIGHT=256&FORMAT=image/png",
		"REQUEST=GetMap&BBOX=NaN,1,2,3&BBOX=1,2,3,4",
		"%zz=1&&&=&a==b",
		"REQUEST=GetCapabilities",
	} {
		f.Add(seed)
	}
	h := newTestHandler(f)
	f.Fuzz(func(t *testing.T, q string) {
		tr, reason := match(h, q)
		if reason == "" {
			cov := tr.grid.Coverage[tr.index.Z]
			if !cov.Contains(tr.index.X, tr.index.Y) || tr.index.Z < tr.grid.MinZoom || tr.index.Z > tr.grid.MaxZoom {
				t.Fatalf("%q matched tile %v outside the layer's coverage", q, tr.index)
			}
			if _, err := tr.grid.MetaTile(tr.index, tr.layer.MetaWidth, tr.layer.MetaHeight, tr.layer.Gutter, cov); err != nil {
				t.Fatalf("%q matched tile %v with no metatile: %v", q, tr.index, err)
			}
			return
		}
		if !knownReasons[reason] {
			t.Fatalf("%q: unknown reason %q", q, reason)
		}
	})
}

// FuzzGridsetMatch: whatever the box, Match either rejects it or returns a
// tile whose own box is within tolerance of it.
func FuzzGridsetMatch(f *testing.F) {
	f.Add(-180.0, -90.0, 0.0, 90.0, 256, 256)
	f.Add(0.0, 0.0, 1e-300, 1e-300, 256, 256)
	f.Add(-20037508.34, 0.0, 0.0, 20037508.34, 256, 256)
	g, _ := gridset.Builtin("EPSG:4326")
	f.Fuzz(func(t *testing.T, minx, miny, maxx, maxy float64, w, h int) {
		b := gridset.BBox{MinX: minx, MinY: miny, MaxX: maxx, MaxY: maxy}
		idx, err := g.Match(b, w, h)
		if err != nil {
			return
		}
		tb := g.TileBBox(idx)
		span := tb.MaxX - tb.MinX
		for _, d := range []float64{b.MinX - tb.MinX, b.MaxX - tb.MaxX, b.MinY - tb.MinY, b.MaxY - tb.MaxY} {
			if d < -gridset.Tolerance*span*1.0001 || d > gridset.Tolerance*span*1.0001 {
				t.Fatalf("%v matched %v (%v): edge off by %v of a %v tile", b, idx, tb, d, span)
			}
		}
	})
}
