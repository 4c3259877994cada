package caddytest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/demo"
	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The WMTS, TMS and XYZ services (tile_cache's services block) serve the
// WMS-C tiles: same store, same headers. In these tests the fake WMS
// renders each metatile as a gradient keyed on its bbox, so a tile's bytes
// tell which tile it is.

const servicesBlock = `services {
			wmts /wmts
			tms /tms
			xyz /xyz
			demo /demo
		}`

func servicesConfig(t *testing.T, f *fakeWMS, extra string) string {
	return fakeConfig(t, f, storageDir(t), servicesBlock+"\n"+extra)
}

func site(path string) string { return fmt.Sprintf("http://localhost:%d%s", httpPort, path) }

// wmtsRow is the WMTS / XYZ row of a tile: counted from the top.
func wmtsRow(gs string, idx gridset.Index) int64 {
	g, _ := gridset.Builtin(gs)
	return g.Levels[idx.Z].TilesHigh - 1 - idx.Y
}

// The URL of one tile of test:a in each protocol (y is GeoWebCache's, from the bottom).
func tileURL(proto, layer, style, gs string, idx gridset.Index, ext string) string {
	row := wmtsRow(gs, idx)
	switch proto {
	case "wmts-kvp":
		q := url.Values{"SERVICE": {"WMTS"}, "REQUEST": {"GetTile"}, "VERSION": {"1.0.0"}, "LAYER": {layer}, "STYLE": {style},
			"TILEMATRIXSET": {gs}, "TILEMATRIX": {fmt.Sprintf("%s:%d", gs, idx.Z)},
			"TILEROW": {fmt.Sprint(row)}, "TILECOL": {fmt.Sprint(idx.X)}, "FORMAT": {"image/" + ext}}
		return site("/wmts?" + q.Encode())
	case "wmts-rest":
		return site(fmt.Sprintf("/wmts/1.0.0/%s/%s/%s/%s:%d/%d/%d.%s", layer, style, gs, gs, idx.Z, row, idx.X, ext))
	case "tms":
		return site(fmt.Sprintf("/tms/1.0.0/%s@%s@%s/%d/%d/%d.%s", layer, gs, ext, idx.Z, idx.X, idx.Y, ext))
	case "xyz":
		return site(fmt.Sprintf("/xyz/%s/%s/%d/%d/%d.%s", layer, gs, idx.Z, idx.X, row, ext))
	}
	panic(proto)
}

var protocols = []string{"wmts-kvp", "wmts-rest", "tms", "xyz"}

func TestServicesServeTheWMSCTiles(t *testing.T) {
	f := newFakeWMS(t)
	load(t, servicesConfig(t, f, ""))
	// One tile per protocol and gridset, each in its own metatile, each
	// with a row from the top different from its y from the bottom.
	tiles := map[string][]gridset.Index{
		"EPSG:4326":   {{X: 1, Y: 2, Z: 3}, {X: 5, Y: 2, Z: 3}, {X: 9, Y: 2, Z: 3}, {X: 13, Y: 2, Z: 3}},
		"EPSG:900913": {{X: 1, Y: 1, Z: 3}, {X: 5, Y: 2, Z: 3}, {X: 2, Y: 5, Z: 3}, {X: 6, Y: 6, Z: 3}},
	}
	for gs, idxs := range tiles {
		for i, proto := range protocols {
			idx := idxs[i]
			name := fmt.Sprintf("%s %s %v", proto, gs, idx)
			if wmtsRow(gs, idx) == idx.Y {
				t.Fatalf("%s: test tile does not tell the rows apart", name)
			}
			u := tileURL(proto, "test:a", "default", gs, idx, "png")
			before := f.getMaps.Load()
			first := get(t, u)
			mustTile(t, first, "MISS")
			if n := f.getMaps.Load() - before; n != 1 {
				t.Errorf("%s: %d upstream GetMaps for the miss", name, n)
			}
			// The WMS-C request for the same tile finds what the protocol stored.
			wmsc := get(t, siteURL(tileQuery("test:a", gs, idx)))
			mustTile(t, wmsc, "HIT")
			second := get(t, u)
			mustTile(t, second, "HIT")
			if !bytes.Equal(first.body, wmsc.body) || !bytes.Equal(second.body, wmsc.body) {
				t.Errorf("%s: body differs from the WMS-C tile", name)
			}
			wantIndex := fmt.Sprintf("[%d, %d, %d]", idx.X, idx.Y, idx.Z)
			for k, want := range map[string]string{
				"Content-Type":           "image/png",
				"Cache-Control":          "public, max-age=3600",
				"Cache-Status":           "tile_cache; hit",
				"Geowebcache-Tile-Index": wantIndex,
				"Geowebcache-Gridset":    gs,
				"Geowebcache-Crs":        gs,
				"Etag":                   wmsc.header.Get("Etag"),
				"Last-Modified":          wmsc.header.Get("Last-Modified"),
				"Content-Length":         fmt.Sprint(len(wmsc.body)),
			} {
				if got := second.header.Get(k); got != want || want == "" {
					t.Errorf("%s: %s = %q, want %q", name, k, got, want)
				}
			}
			if got := first.header.Get("Geowebcache-Tile-Index"); got != wantIndex {
				t.Errorf("%s: miss tile index %s, want %s", name, got, wantIndex)
			}
			// Conditional requests and HEAD, as on WMS-C.
			etag := second.header.Get("Etag")
			nm := get(t, u, "If-None-Match", etag)
			if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("Etag") != etag {
				t.Errorf("%s: If-None-Match: %d, %d bytes, etag %q", name, nm.status, len(nm.body), nm.header.Get("Etag"))
			}
			if a := get(t, u, "If-None-Match", `"0123"`); a.status != 200 || !bytes.Equal(a.body, wmsc.body) {
				t.Errorf("%s: other etag: %d", name, a.status)
			}
			if a := get(t, u, "If-Modified-Since", second.header.Get("Last-Modified")); a.status != 304 {
				t.Errorf("%s: If-Modified-Since: %d", name, a.status)
			}
			head := do(t, "HEAD", u)
			if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Length") != fmt.Sprint(len(wmsc.body)) ||
				head.header.Get("Geowebcache-Cache-Result") != "HIT" {
				t.Errorf("%s: HEAD %d, %d bytes, length %q", name, head.status, len(head.body), head.header.Get("Content-Length"))
			}
		}
	}
	// JPEG through each protocol: test:b is JPEG only.
	idx := gridset.Index{X: 4, Y: 1, Z: 2}
	ref := get(t, siteURL(tileQuery("test:b", "EPSG:4326", idx, "FORMAT", "image/jpeg")))
	mustTile(t, ref, "MISS")
	for _, proto := range protocols {
		a := get(t, tileURL(proto, "test:b", "default", "EPSG:4326", idx, "jpeg"))
		mustTile(t, a, "HIT")
		if a.header.Get("Content-Type") != "image/jpeg" || !bytes.Equal(a.body, ref.body) {
			t.Errorf("%s jpeg: %q, same body %v", proto, a.header.Get("Content-Type"), bytes.Equal(a.body, ref.body))
		}
	}
}

func TestServicesParameterFiltersShareTheWMSCTileSet(t *testing.T) {
	f := newFakeWMS(t)
	load(t, servicesConfig(t, f, ""))
	idx := gridset.Index{X: 5, Y: 2, Z: 2} // row 1 from the top
	pop := get(t, siteURL(tileQuery("test:a", "EPSG:4326", idx, "STYLES", "population")))
	mustTile(t, pop, "MISS")
	if q, _ := url.ParseQuery(f.lastGetMap()); q.Get("STYLES") != "population" {
		t.Fatalf("upstream STYLES %q", q.Get("STYLES"))
	}
	for _, u := range []string{
		tileURL("wmts-kvp", "test:a", "population", "EPSG:4326", idx, "png"),
		tileURL("wmts-rest", "test:a", "population", "EPSG:4326", idx, "png"),
		tileURL("xyz", "test:a", "", "EPSG:4326", idx, "png") + "?STYLES=population",
		tileURL("xyz", "test:a", "", "EPSG:4326", idx, "png") + "?styles=population",
		tileURL("tms", "test:a", "", "EPSG:4326", idx, "png") + "?STYLES=population",
	} {
		a := get(t, u)
		mustTile(t, a, "HIT")
		if !bytes.Equal(a.body, pop.body) {
			t.Errorf("%s: not the WMS-C population tile", u)
		}
	}
	if n := f.getMaps.Load(); n != 1 {
		t.Fatalf("%d upstream GetMaps for one tile set", n)
	}
	// The default style is the other tile set, shared with WMS-C's STYLES=.
	def := get(t, tileURL("wmts-kvp", "test:a", "default", "EPSG:4326", idx, "png"))
	mustTile(t, def, "MISS")
	if bytes.Equal(def.body, pop.body) {
		t.Fatal("default and population tiles are the same")
	}
	if q, _ := url.ParseQuery(f.lastGetMap()); q.Get("STYLES") != "" {
		t.Errorf("upstream STYLES %q for the default style", q.Get("STYLES"))
	}
	for _, u := range []string{
		siteURL(tileQuery("test:a", "EPSG:4326", idx)),
		tileURL("wmts-rest", "test:a", "default", "EPSG:4326", idx, "png"),
		tileURL("wmts-kvp", "test:a", "", "EPSG:4326", idx, "png"),
		tileURL("xyz", "test:a", "", "EPSG:4326", idx, "png"),
		tileURL("xyz", "test:a", "", "EPSG:4326", idx, "png") + "?STYLES=",
	} {
		a := get(t, u)
		mustTile(t, a, "HIT")
		if !bytes.Equal(a.body, def.body) {
			t.Errorf("%s: not the default tile", u)
		}
	}
	if n := f.getMaps.Load(); n != 2 {
		t.Errorf("%d upstream GetMaps for two tile sets", n)
	}
}

type owsException struct {
	XMLName   xml.Name `xml:"http://www.opengis.net/ows/1.1 ExceptionReport"`
	Exception struct {
		Code    string `xml:"exceptionCode,attr"`
		Locator string `xml:"locator,attr"`
		Text    string `xml:"http://www.opengis.net/ows/1.1 ExceptionText"`
	} `xml:"http://www.opengis.net/ows/1.1 Exception"`
}

func TestServicesRejectWithoutAskingTheUpstream(t *testing.T) {
	f := newFakeWMS(t)
	load(t, servicesConfig(t, f, `layer test:z {
			gridsets EPSG:900913
			zoom 2 4
			extent 0 0 90 45
		}`))
	kvp := func(extra string) string {
		return site("/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=test:a&STYLE=default&TILEMATRIXSET=EPSG:4326&FORMAT=image/png&" + extra)
	}
	wmts := []struct {
		u       string
		status  int
		code    string
		locator string
	}{
		{kvp("TILEMATRIX=EPSG:4326:3&TILEROW=8&TILECOL=0"), 400, "TileOutOfRange", "TileRow"},
		{kvp("TILEMATRIX=EPSG:4326:3&TILEROW=0&TILECOL=16"), 400, "TileOutOfRange", "TileCol"},
		{kvp("TILEMATRIX=EPSG:4326:22&TILEROW=0&TILECOL=0"), 400, "InvalidParameterValue", "TileMatrix"},
		{kvp("TILEMATRIX=EPSG:4326:3&TILEROW=0"), 400, "MissingParameterValue", "TileCol"},
		{kvp("TILEMATRIX=EPSG:4326:3&TILEROW=x&TILECOL=0"), 400, "InvalidParameterValue", "TileRow"},
		{kvp("TILEMATRIX=EPSG:4326:3&TILEROW=0&TILECOL=0&STYLE=nope"), 400, "InvalidParameterValue", "STYLE"},
		{kvp("TILEMATRIX=EPSG:4326:3&TILEROW=0&TILECOL=0&CQL_FILTER=a%3D1"), 400, "InvalidParameterValue", "CQL_FILTER"},
		{site("/wmts?SERVICE=WMTS&REQUEST=GetTile&LAYER=test:nope&TILEMATRIXSET=EPSG:4326&TILEMATRIX=EPSG:4326:0&TILEROW=0&TILECOL=0&FORMAT=image/png"),
			400, "InvalidParameterValue", "Layer"},
		{site("/wmts?SERVICE=WMTS&REQUEST=GetMap"), 501, "OperationNotSupported", "Request"},
		{site("/wmts?SERVICE=WMTS"), 400, "MissingParameterValue", "Request"},
		{site("/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:3/0/0.gif"), 400, "InvalidParameterValue", "Format"},
		{site("/wmts/1.0.0/test:b/default/EPSG:900913/EPSG:900913:3/0/0.jpeg"), 400, "InvalidParameterValue", "TileMatrixSet"},
		{site("/wmts/1.0.0/test:z/default/EPSG:900913/EPSG:900913:5/0/0.png"), 400, "TileOutOfRange", "TileMatrix"},
		{site("/wmts/1.0.0/test:z/default/EPSG:900913/EPSG:900913:1/0/0.png"), 400, "TileOutOfRange", "TileMatrix"},
		// test:z at level 2 (4×4) is the one tile x 2, row 1.
		{site("/wmts/1.0.0/test:z/default/EPSG:900913/EPSG:900913:2/2/2.png"), 400, "TileOutOfRange", "TileRow"},
		{site("/wmts/1.0.0/test:z/default/EPSG:900913/EPSG:900913:2/1/1.png"), 400, "TileOutOfRange", "TileCol"},
		{site("/wmts/1.0.0/test:a/default/EPSG:4326/EPSG:4326:3/0"), 404, "NoApplicableCode", ""},
		{site("/wmts/other"), 404, "NoApplicableCode", ""},
	}
	for _, c := range wmts {
		before := f.getMaps.Load() + f.others.Load()
		a := get(t, c.u)
		var rep owsException
		err := xml.Unmarshal(a.body, &rep)
		if a.status != c.status || err != nil || rep.Exception.Code != c.code ||
			!strings.EqualFold(rep.Exception.Locator, c.locator) || rep.Exception.Text == "" ||
			!strings.HasPrefix(a.header.Get("Content-Type"), "application/xml") {
			t.Errorf("%s: %d %v %+v", c.u, a.status, err, rep.Exception)
		}
		if after := f.getMaps.Load() + f.others.Load(); after != before {
			t.Errorf("%s: the upstream saw %d requests", c.u, after-before)
		}
	}
	text := []struct {
		u      string
		status int
	}{
		{site("/tms/1.0.0/test:a@EPSG:4326@png/3/16/0.png"), 404},
		{site("/tms/1.0.0/test:a@EPSG:4326@png/3/0/8.png"), 404},
		{site("/tms/1.0.0/test:a@EPSG:4326@png/22/0/0.png"), 404},
		{site("/tms/1.0.0/test:a@EPSG:4326@gif/0/0/0.gif"), 404},
		{site("/tms/1.0.0/test:nope@EPSG:4326@png/0/0/0.png"), 404},
		{site("/tms/1.0.0/test:a@EPSG:4326@png/0/0/x.png"), 400},
		{site("/tms/1.0.0/test:z@EPSG:900913@png/5/0/0.png"), 404},
		{site("/tms/1.0.0/test:z@EPSG:900913@png/2/2/1.png"), 404}, // y from the bottom: 1 is south of the equator
		{site("/tms/2.0.0/"), 404},
		{site("/xyz/test:a/EPSG:900913/3/0/8.png"), 404},
		{site("/xyz/test:a/EPSG:900913/31/0/0.png"), 404},
		{site("/xyz/test:nope/EPSG:900913/0/0/0.png"), 404},
		{site("/xyz/test:a/EPSG:2056/0/0/0.png"), 404},
		{site("/xyz/test:a/EPSG:900913/0/0/0.png?STYLES=nope"), 400},
		{site("/xyz/test:a/EPSG:900913/0/0/0.png?ENV=x"), 400},
		{site("/xyz/test:z/EPSG:900913/2/2/2.png"), 404}, // y from the top: 2 is south of the equator
		{site("/xyz/test:z/EPSG:900913/1/1/0.png"), 404},
		{site("/xyz/test:a/EPSG:900913/0/0"), 404},
	}
	for _, c := range text {
		before := f.getMaps.Load() + f.others.Load()
		a := get(t, c.u)
		if a.status != c.status || a.header.Get("Content-Type") != "text/plain; charset=utf-8" ||
			bytes.Count(a.body, []byte("\n")) != 1 || !bytes.HasPrefix(a.body, []byte("tile_cache: ")) {
			t.Errorf("%s: %d %q %q", c.u, a.status, a.header.Get("Content-Type"), a.body)
		}
		if after := f.getMaps.Load() + f.others.Load(); after != before {
			t.Errorf("%s: the upstream saw %d requests", c.u, after-before)
		}
	}
	// Only GET and HEAD.
	for _, u := range []string{site("/wmts"), site("/tms/1.0.0/"), site("/xyz/test:a/EPSG:900913/0/0/0.png")} {
		a := do(t, "POST", u)
		if a.status != 405 || a.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d, Allow %q", u, a.status, a.header.Get("Allow"))
		}
	}
	if n := f.getMaps.Load() + f.others.Load(); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
	// test:z's own tiles are there: level 2, x 2, XYZ row 1 = TMS y 2.
	mustTile(t, get(t, site("/xyz/test:z/EPSG:900913/2/2/1.png")), "MISS")
	mustTile(t, get(t, site("/tms/1.0.0/test:z@EPSG:900913@png/2/2/2.png")), "HIT")
}

// The capabilities' URLs are absolute, built from the request and the path
// before handle_path stripped it; a client that follows them gets the tiles.
func TestServicesDocumentsLeadToTheTiles(t *testing.T) {
	f := newFakeWMS(t)
	load(t, siteConfig{mount: "/geo", upstream: f.URL, tiles: `
			upstream ` + f.URL + `/wms
			storage ` + storeLines(storageDir(t)) + `
			layer test:a {
				gridsets EPSG:4326 EPSG:900913
				param STYLES {
					default ""
					values "" population
				}
			}
			` + servicesBlock}.String())
	base := site("/geo")

	caps := get(t, base+"/wmts?service=WMTS&request=GetCapabilities")
	if caps.status != 200 || !strings.HasPrefix(caps.header.Get("Content-Type"), "application/xml") {
		t.Fatalf("GetCapabilities: %d %q %s", caps.status, caps.header.Get("Content-Type"), truncate(caps.body))
	}
	if rest := get(t, base+"/wmts/1.0.0/WMTSCapabilities.xml"); rest.status != 200 || !bytes.Equal(rest.body, caps.body) {
		t.Errorf("REST capabilities: %d, same as KVP %v", rest.status, bytes.Equal(rest.body, caps.body))
	}
	var doc struct {
		Ops []struct {
			Name string `xml:"name,attr"`
			Get  struct {
				Href string `xml:"http://www.w3.org/1999/xlink href,attr"`
			} `xml:"http://www.opengis.net/ows/1.1 DCP>HTTP>Get"`
		} `xml:"http://www.opengis.net/ows/1.1 OperationsMetadata>Operation"`
		Layers []struct {
			Identifier string   `xml:"http://www.opengis.net/ows/1.1 Identifier"`
			Styles     []string `xml:"Style>Identifier"`
			Resources  []struct {
				Format   string `xml:"format,attr"`
				Template string `xml:"template,attr"`
			} `xml:"ResourceURL"`
		} `xml:"Contents>Layer"`
		Sets []struct {
			Identifier string `xml:"http://www.opengis.net/ows/1.1 Identifier"`
			Matrices   []struct {
				Identifier string `xml:"http://www.opengis.net/ows/1.1 Identifier"`
				TopLeft    string `xml:"TopLeftCorner"`
			} `xml:"TileMatrix"`
		} `xml:"Contents>TileMatrixSet"`
	}
	if err := xml.Unmarshal(caps.body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Ops) != 2 || doc.Ops[1].Name != "GetTile" || doc.Ops[1].Get.Href != base+"/wmts?" {
		t.Fatalf("operations %+v", doc.Ops)
	}
	if len(doc.Layers) != 1 || doc.Layers[0].Identifier != "test:a" || strings.Join(doc.Layers[0].Styles, ",") != "default,population" ||
		len(doc.Layers[0].Resources) != 2 || len(doc.Sets) != 3 || doc.Sets[0].Matrices[0].TopLeft != "90 -180" ||
		doc.Sets[1].Matrices[0].TopLeft != "-20037508.34 20037508.34" ||
		doc.Sets[2].Identifier != "EPSG:3857" || doc.Sets[2].Matrices[0].TopLeft != "-20037508.34 20037508.34" {
		t.Fatalf("capabilities %+v", doc)
	}
	tmpl := doc.Layers[0].Resources[0].Template
	if tmpl != base+"/wmts/1.0.0/test:a/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}.png" {
		t.Fatalf("template %q", tmpl)
	}
	// A REST client fills the template (rows from the top) ...
	idx := gridset.Index{X: 1, Y: 3, Z: 2}
	r := strings.NewReplacer("{Style}", "population", "{TileMatrixSet}", "EPSG:900913", "{TileMatrix}", "EPSG:900913:2",
		"{TileRow}", fmt.Sprint(wmtsRow("EPSG:900913", idx)), "{TileCol}", fmt.Sprint(idx.X))
	a := get(t, r.Replace(tmpl))
	mustTile(t, a, "MISS")
	if a.header.Get("Geowebcache-Tile-Index") != "[1, 3, 2]" {
		t.Errorf("REST tile index %s", a.header.Get("Geowebcache-Tile-Index"))
	}
	// ... a KVP client appends to the operation's address ...
	kvp := doc.Ops[1].Get.Href + "SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=test:a&STYLE=population&FORMAT=image/png" +
		"&TILEMATRIXSET=EPSG:900913&TILEMATRIX=EPSG:900913:2&TILEROW=0&TILECOL=1"
	b := get(t, kvp)
	mustTile(t, b, "HIT")
	if !bytes.Equal(a.body, b.body) {
		t.Error("KVP and REST tiles differ")
	}
	// ... and WMS-C under the same mount has it too.
	w := get(t, base+"/wms?"+tileQuery("test:a", "EPSG:900913", idx, "STYLES", "population").Encode())
	mustTile(t, w, "HIT")
	if !bytes.Equal(a.body, w.body) {
		t.Error("WMS-C tile differs")
	}

	// TMS: the service lists the tile maps, a tile map its levels.
	var svc struct {
		TileMaps []struct {
			Href string `xml:"href,attr"`
		} `xml:"TileMaps>TileMap"`
	}
	list := get(t, base+"/tms/1.0.0/")
	if err := xml.Unmarshal(list.body, &svc); err != nil || list.status != 200 || len(svc.TileMaps) != 4 {
		t.Fatalf("TileMapService: %d %v %s", list.status, err, truncate(list.body))
	}
	var mapURL string
	for _, m := range svc.TileMaps {
		if m.Href == base+"/tms/1.0.0/test:a@EPSG:900913@png" {
			mapURL = m.Href
		}
	}
	if mapURL == "" {
		t.Fatalf("no test:a@EPSG:900913@png in %+v", svc.TileMaps)
	}
	var tm struct {
		SRS    string
		Origin struct {
			X string `xml:"x,attr"`
			Y string `xml:"y,attr"`
		}
		Sets []struct {
			Href  string `xml:"href,attr"`
			Order int    `xml:"order,attr"`
		} `xml:"TileSets>TileSet"`
	}
	m := get(t, mapURL)
	if err := xml.Unmarshal(m.body, &tm); err != nil || tm.SRS != "EPSG:900913" || tm.Origin.X != "-20037508.34" ||
		tm.Origin.Y != "-20037508.34" || len(tm.Sets) != 31 || tm.Sets[2].Order != 2 {
		t.Fatalf("TileMap: %v %+v", err, tm)
	}
	c := get(t, fmt.Sprintf("%s/%d/%d.png?STYLES=population", tm.Sets[2].Href, idx.X, idx.Y))
	mustTile(t, c, "HIT")
	if !bytes.Equal(a.body, c.body) {
		t.Error("TMS tile differs")
	}
	d := get(t, fmt.Sprintf("%s/xyz/test:a/EPSG:3857/2/%d/%d.png?STYLES=population", base, idx.X, wmtsRow("EPSG:900913", idx)))
	mustTile(t, d, "HIT")
	if !bytes.Equal(a.body, d.body) {
		t.Error("XYZ tile differs")
	}
	if n := f.getMaps.Load(); n != 1 {
		t.Errorf("%d upstream GetMaps", n)
	}
}

// The services in Caddy's JSON config, and the demo page's description of
// the layers and services.
func TestServicesJSONConfigAndDemoInfo(t *testing.T) {
	f := newFakeWMS(t)
	u, _ := url.Parse(f.URL)
	cfg := fmt.Sprintf(`{
	"admin": {"listen": %q},
	"apps": {"http": {"http_port": %d, "servers": {"tiles": {
		"listen": [":%d"],
		"automatic_https": {"disable": true},
		"routes": [{"handle": [
			{"handler": "tile_cache", "upstream": %q, %s,
			 "layers": [{"name": "test:j", "gridsets": ["EPSG:900913"], "formats": ["image/png"],
			             "parameters": [{"key": "STYLES", "default": "", "values": ["", "dark"]}]}],
			 "services": {"wmts": "/ogc/wmts", "xyz": "/tiles", "demo": "/ogc/demo"}},
			{"handler": "reverse_proxy", "upstreams": [{"dial": %q}]}
		]}]
	}}}}
}`, adminAddr, httpPort, httpPort, f.URL+"/wms", storeJSON(storageDir(t)), u.Host)
	newJSONTester(t, cfg)
	a := get(t, site("/ogc/wmts?SERVICE=WMTS&REQUEST=GetCapabilities"))
	if a.status != 200 || !bytes.Contains(a.body, []byte(`template="`+site("/ogc/wmts/1.0.0/test:j/{Style}/"))) {
		t.Errorf("capabilities: %d %s", a.status, truncate(a.body))
	}
	mustTile(t, get(t, site("/tiles/test:j/EPSG:900913/1/0/0.png")), "MISS")
	// TMS is off: its usual path is a WMS request like any other.
	if a := get(t, site("/tms/1.0.0/")); a.header.Get("Geowebcache-Miss-Reason") != "not-getmap" {
		t.Errorf("/tms with TMS off: %d, reason %q", a.status, a.header.Get("Geowebcache-Miss-Reason"))
	}

	info := get(t, site("/ogc/demo/info.json"))
	var di demo.Info
	if err := json.Unmarshal(info.body, &di); err != nil || info.status != 200 {
		t.Fatalf("info.json: %d %v %s", info.status, err, truncate(info.body))
	}
	if di.WMSURL != "../../wms" || di.WMTSURL != "../wmts" || di.TMSURL != "" || di.XYZURL != "../../tiles" ||
		len(di.Layers) != 1 || di.Layers[0].Name != "test:j" || fmt.Sprint(di.Layers[0].Styles) != "[ dark]" ||
		len(di.Layers[0].Gridsets) != 1 || di.Layers[0].Gridsets[0].SRS != "EPSG:900913" || len(di.Layers[0].Gridsets[0].Resolutions) != 31 {
		t.Errorf("demo info %+v", di)
	}
	// The relative URLs resolve, from the page, to the services.
	page, _ := url.Parse(site("/ogc/demo/"))
	for rel, want := range map[string]string{di.WMTSURL: "/ogc/wmts", di.XYZURL: "/tiles", di.WMSURL: "/wms"} {
		if r, _ := page.Parse(rel); r.Path != want {
			t.Errorf("%q resolves to %s, want %s", rel, r.Path, want)
		}
	}
}
