package tilecache

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/ogc"
)

// wmscDoc reads back what tiled WMS clients read of the document.
type wmscDoc struct {
	XMLName    xml.Name `xml:"WMT_MS_Capabilities"`
	Version    string   `xml:"version,attr"`
	Capability struct {
		GetMap struct {
			Formats []string `xml:"Format"`
			Get     struct {
				Href string `xml:"http://www.w3.org/1999/xlink href,attr"`
			} `xml:"DCPType>HTTP>Get>OnlineResource"`
		} `xml:"Request>GetMap"`
		TileSets []struct {
			SRS  string
			BBox struct {
				SRS  string  `xml:"SRS,attr"`
				MinX float64 `xml:"minx,attr"`
				MinY float64 `xml:"miny,attr"`
				MaxX float64 `xml:"maxx,attr"`
				MaxY float64 `xml:"maxy,attr"`
			} `xml:"BoundingBox"`
			Resolutions   string
			Width, Height int
			Format        string
			Layers        string
			Styles        string
		} `xml:"VendorSpecificCapabilities>TileSet"`
		Layer struct {
			Layers []struct {
				Opaque int    `xml:"opaque,attr"`
				Name   string `xml:"Name"`
				SRS    []string
				BBoxes []struct {
					SRS string `xml:"SRS,attr"`
				} `xml:"BoundingBox"`
			} `xml:"Layer"`
		} `xml:"Layer"`
	}
}

func TestTiledCapabilitiesListEveryTileSet(t *testing.T) {
	c := newTestHandler(t)
	b, err := ogc.MarshalWMS(c.tiledCapabilities("http://example.org/maps/wms?"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<!DOCTYPE WMT_MS_Capabilities") {
		t.Error("no DOCTYPE declaring the WMS-C elements")
	}
	var d wmscDoc
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatalf("does not parse: %v\n%s", err, b)
	}
	if d.Version != "1.1.1" || d.Capability.GetMap.Get.Href != "http://example.org/maps/wms?" {
		t.Errorf("version %q, GetMap at %q", d.Version, d.Capability.GetMap.Get.Href)
	}
	if strings.Join(d.Capability.GetMap.Formats, ",") != "image/png,image/jpeg" {
		t.Errorf("GetMap formats %v", d.Capability.GetMap.Formats)
	}
	// test:a: 2 formats × 2 styles × (EPSG:4326, EPSG:900913, EPSG:3857);
	// test:b: 1 format × 1 style × EPSG:4326.
	var got []string
	for _, ts := range d.Capability.TileSets {
		got = append(got, fmt.Sprintf("%s %s %s %q", ts.Layers, ts.SRS, ts.Format, ts.Styles))
		if ts.BBox.SRS != ts.SRS || ts.Width != 256 || ts.Height != 256 {
			t.Errorf("tile set %+v", ts)
		}
		g, _ := gridset.Builtin(map[bool]string{true: "EPSG:4326", false: "EPSG:900913"}[ts.SRS == "EPSG:4326"])
		// Tiles count from the gridset's corners, not the layer's area.
		if ts.BBox.MinX != g.Extent.MinX || ts.BBox.MinY != g.Extent.MinY || ts.BBox.MaxX != g.Extent.MaxX || ts.BBox.MaxY != g.Extent.MaxY {
			t.Errorf("%s %s box %+v, want the gridset's extent %+v", ts.Layers, ts.SRS, ts.BBox, g.Extent)
		}
		res := strings.Fields(ts.Resolutions)
		first, last := 0, len(g.Levels)-1
		if ts.Layers == "test:b" {
			first, last = 2, 10 // the cached levels only
		}
		if len(res) != last-first+1 {
			t.Fatalf("%s %s: %d resolutions", ts.Layers, ts.SRS, len(res))
		}
		for i, s := range res {
			if v, err := strconv.ParseFloat(s, 64); err != nil || v != g.Levels[first+i].Resolution {
				t.Errorf("%s %s resolution %d: %s, want %v", ts.Layers, ts.SRS, i, s, g.Levels[first+i].Resolution)
			}
		}
	}
	want := []string{
		`test:a EPSG:4326 image/png ""`, `test:a EPSG:4326 image/png "red"`, `test:a EPSG:4326 image/jpeg ""`, `test:a EPSG:4326 image/jpeg "red"`,
		`test:a EPSG:900913 image/png ""`, `test:a EPSG:900913 image/png "red"`, `test:a EPSG:900913 image/jpeg ""`, `test:a EPSG:900913 image/jpeg "red"`,
		`test:a EPSG:3857 image/png ""`, `test:a EPSG:3857 image/png "red"`, `test:a EPSG:3857 image/jpeg ""`, `test:a EPSG:3857 image/jpeg "red"`,
		`test:b EPSG:4326 image/jpeg ""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tile sets\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// GDAL pairs a tile set with the layer of that name and the SRS of the
	// layer's first BoundingBox.
	ls := d.Capability.Layer.Layers
	if len(ls) != 2 || ls[0].Name != "test:a" || strings.Join(ls[0].SRS, " ") != "EPSG:4326 EPSG:900913 EPSG:3857" ||
		len(ls[0].BBoxes) != 3 || ls[0].BBoxes[0].SRS != "EPSG:4326" || ls[0].Opaque != 0 {
		t.Errorf("layers %+v", ls)
	}
}

func TestTiledCapabilitiesAreAskedForWithTILED(t *testing.T) {
	c := newTestHandler(t)
	for raw, want := range map[string]bool{
		"SERVICE=WMS&VERSION=1.1.1&REQUEST=GetCapabilities&TILED=true": true,
		"service=wms&request=getcapabilities&tiled=TRUE":               true,
		"REQUEST=GetCapabilities&TILED=true":                           true,
		"SERVICE=WMS&REQUEST=GetCapabilities":                          false, // the upstream's
		"SERVICE=WMS&REQUEST=GetCapabilities&TILED=false":              false,
		"SERVICE=WFS&REQUEST=GetCapabilities&TILED=true":               false,
		"SERVICE=WMS&REQUEST=GetMap&TILED=true":                        false,
	} {
		var q query
		if reason := c.scanWMS(raw, &q); reason != "" {
			t.Fatalf("%s: %s", raw, reason)
		}
		if got := isTiledCapabilities(&q, raw); got != want {
			t.Errorf("%s: tiled capabilities %v, want %v", raw, got, want)
		}
	}
}
