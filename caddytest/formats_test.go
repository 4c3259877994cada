package caddytest

// Issue 31's tile formats through a real Caddy in front of the project's
// MapServer: every protocol in every format, seeding in one, the WMTS
// capabilities; web maps (Leaflet, and OpenLayers on the demo page) in
// headless Chromium; GDAL and QGIS (testdata/clients/formats.py).

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/image/webp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
)

// allTileFormats are the formats of issue 31, image/png first (the format
// a client that picks none gets).
const allTileFormats = "image/png image/png8 image/jpeg image/vnd.jpeg-png image/vnd.jpeg-png8 image/webp"

// formatsLayers is test:polygons in every format (flat fills with
// antialiased outlines; a few seam pixels partly transparent in most tiles,
// the polar band above 85° transparent), test:relief (MapServer's shaded
// relief, opaque, thousands of colours: the mixed formats' JPEG tiles) and
// test:lossy, that relief cached as lossy WebP at quality 80 (lossy WebP
// is for imagery-like layers).
const formatsLayers = `
		layer test:polygons {
			gridsets EPSG:4326 EPSG:900913
			formats ` + allTileFormats + `
		}
		layer test:relief {
			gridsets EPSG:4326 EPSG:900913
			formats image/png image/png8 image/vnd.jpeg-png image/vnd.jpeg-png8 image/webp
		}
		layer test:lossy {
			upstream_layers test:relief
			gridsets EPSG:4326 EPSG:900913
			formats image/webp
			format image/webp {
				quality 80
			}
		}`

// formatCase is one tile set: a layer in a format, with how close its
// tiles must come to MapServer's lossless render.
type formatCase struct {
	layer, format, ext string
	upstream           string // the MapServer layer
	// jpegFloor bounds a JPEG tile's PSNR (or any tile's, for lossy
	// WebP); pngFloor a PNG tile's (+Inf: exact). jpegFloor 0: no JPEG
	// tile may be answered.
	jpegFloor, pngFloor float64
	// mixed: opaque tiles of many colours are JPEG, the others PNG.
	mixed bool
	// colors: a PNG tile has at most this many colours (0: any).
	colors int
}

var exactly = math.Inf(1)

// PSNR floors against MapServer's lossless render. For scale, on
// test:polygons (flat fills, antialiased outlines) the measured values
// are logged by each test; the floors leave room for another libjpeg or
// quantizer tuning, not for a broken encoder (which gives < 20 dB).
var formatCases = []formatCase{
	{layer: "test:polygons", format: "image/png", ext: "png", pngFloor: exactly},
	{layer: "test:polygons", format: "image/png8", ext: "png8", pngFloor: 40, colors: 256},
	{layer: "test:polygons", format: "image/jpeg", ext: "jpeg", jpegFloor: 32},
	{layer: "test:polygons", format: "image/vnd.jpeg-png", ext: "jpeg-png", jpegFloor: 32, pngFloor: exactly, mixed: true},
	{layer: "test:polygons", format: "image/vnd.jpeg-png8", ext: "jpeg-png8", jpegFloor: 32, pngFloor: 40, mixed: true, colors: 256},
	{layer: "test:polygons", format: "image/webp", ext: "webp", pngFloor: exactly},
	{layer: "test:relief", format: "image/vnd.jpeg-png", ext: "jpeg-png", jpegFloor: 32, pngFloor: exactly, mixed: true},
	{layer: "test:relief", format: "image/vnd.jpeg-png8", ext: "jpeg-png8", jpegFloor: 32, pngFloor: 40, mixed: true, colors: 256},
	{layer: "test:relief", format: "image/webp", ext: "webp", pngFloor: exactly},
	{layer: "test:lossy", upstream: "test:relief", format: "image/webp", ext: "webp", pngFloor: 28},
}

// upstreamLayer is the MapServer layer the case's tiles are rendered from.
func (c formatCase) upstreamLayer() string {
	if c.upstream != "" {
		return c.upstream
	}
	return c.layer
}

// answeredAs is the Content-Type a tile of the case is answered with when
// it is not mixed.
func (c formatCase) answeredAs() string {
	switch c.format {
	case "image/jpeg":
		return "image/jpeg"
	case "image/webp":
		return "image/webp"
	}
	return "image/png"
}

func (c formatCase) String() string { return c.layer + " " + c.format }

// decodeTile decodes a tile by its Content-Type, which must be what its
// bytes are.
func decodeTile(t *testing.T, what string, ctype string, body []byte) image.Image {
	t.Helper()
	if sniffed := http.DetectContentType(body); sniffed != ctype {
		t.Fatalf("%s: answered as %s, its bytes are %s", what, ctype, sniffed)
	}
	var img image.Image
	var err error
	switch ctype {
	case "image/png":
		img, err = png.Decode(bytes.NewReader(body))
	case "image/jpeg":
		img, err = jpeg.Decode(bytes.NewReader(body))
	case "image/webp":
		img, err = webp.Decode(bytes.NewReader(body))
	default:
		t.Fatalf("%s: Content-Type %q", what, ctype)
	}
	if err != nil {
		t.Fatalf("%s: %s does not decode: %v", what, ctype, err)
	}
	if img.Bounds().Dx() != 256 || img.Bounds().Dy() != 256 {
		t.Fatalf("%s: %v, not a 256×256 tile", what, img.Bounds())
	}
	return img
}

// colorCount is the number of distinct non-premultiplied colours, every
// fully transparent pixel counted as one.
func colorCount(img image.Image) int {
	n := toNRGBA(img)
	seen := map[[4]byte]bool{}
	for i := 0; i < len(n.Pix); i += 4 {
		p := [4]byte(n.Pix[i : i+4])
		if p[3] == 0 {
			p = [4]byte{}
		}
		seen[p] = true
	}
	return len(seen)
}

// mapServerTile is MapServer's own lossless render of a tile: the PNG of
// the 4×4 metatile the cache asks for (as the cache asks it: STYLES empty,
// TRANSPARENT as given), cut at the tile.
func mapServerTile(t *testing.T, wms, layer, gs string, idx gridset.Index, transparent bool) *image.NRGBA {
	t.Helper()
	g, _ := gridset.Builtin(gs)
	m, err := g.MetaTile(idx, 4, 4, 0, g.GridRange(idx.Z))
	if err != nil {
		t.Fatal(err)
	}
	srs := gs
	if gs == "EPSG:900913" {
		srs = "EPSG:3857"
	}
	b := m.BBox
	q := url.Values{
		"SERVICE": {"WMS"}, "VERSION": {"1.1.1"}, "REQUEST": {"GetMap"}, "LAYERS": {layer}, "STYLES": {""},
		"SRS": {srs}, "BBOX": {fmtF(b.MinX) + "," + fmtF(b.MinY) + "," + fmtF(b.MaxX) + "," + fmtF(b.MaxY)},
		"WIDTH": {fmt.Sprint(m.Width)}, "HEIGHT": {fmt.Sprint(m.Height)}, "FORMAT": {"image/png"},
		"TRANSPARENT": {strings.ToUpper(fmt.Sprint(transparent))},
	}
	meta := directImage(t, wms, q)
	c, r := int(idx.X-m.Tiles.MinX), int(m.Tiles.MaxY-idx.Y)
	out := image.NewNRGBA(image.Rect(0, 0, 256, 256))
	draw.Draw(out, out.Bounds(), meta, image.Pt(c*256, r*256), draw.Src)
	return out
}

// wmtsCapabilities is what the tests read of the WMTS capabilities.
type wmtsCapabilities struct {
	Layers []struct {
		Identifier   string   `xml:"Identifier"`
		Formats      []string `xml:"Format"`
		ResourceURLs []struct {
			Format   string `xml:"format,attr"`
			Type     string `xml:"resourceType,attr"`
			Template string `xml:"template,attr"`
		} `xml:"ResourceURL"`
	} `xml:"Contents>Layer"`
}

// Every protocol in every format, through Caddy in front of MapServer:
// two tiles of level 2 in EPSG:4326 (x5 y2, and x5 y3 with the polar
// band) of test:polygons in each format, of test:relief in the mixed
// formats and WebP, and of test:lossy (lossy WebP), each through WMS-C,
// WMTS KVP, WMTS REST (the capabilities' template), TMS and XYZ. Each
// answer is 200 with the format's Content-Type (a mixed tile's own: JPEG
// where MapServer's render is opaque and of more than one colour, PNG
// elsewhere), the bytes are what the
// Content-Type says and decode, every protocol gets the very same bytes,
// the first request of the tile set is its only MISS, the upstream is
// asked once per metatile (lossless PNG, JPEG for image/jpeg only), and
// the pixels equal MapServer's lossless render (png, lossless WebP, a
// mixed format's PNG tiles) or come above a PSNR floor (png8, JPEG, lossy
// WebP). Then a seed of image/webp through REST stores tiles that are
// HITs, and a seed in a format the layer is not cached in is a one-line 400.
func TestFormatsEveryProtocol(t *testing.T) {
	up := mapServer(t)
	cnt := countGetMaps(t, up)
	name := fmt.Sprintf("formats%d", restSeq.Add(1))
	load(t, siteConfig{admin: ptr("cache " + name + "\nworkers 2"), upstream: up, tiles: `
		name ` + name + `
		upstream ` + cnt.URL + `
		storage ` + storeLines(storageDir(t)) + `
		timeout 60s
		services {
			wmts /wmts
			tms /tms
			xyz /xyz
		}
		` + formatsLayers}.String())
	origin := fmt.Sprintf("http://localhost:%d", httpPort)

	// The capabilities: each format listed with its ResourceURL.
	a := get(t, origin+"/wmts?SERVICE=WMTS&REQUEST=GetCapabilities")
	if a.status != 200 {
		t.Fatalf("WMTS capabilities: %d %q", a.status, truncate(a.body))
	}
	var caps wmtsCapabilities
	if err := xml.Unmarshal(a.body, &caps); err != nil {
		t.Fatalf("WMTS capabilities: %v", err)
	}
	templates := map[string]string{} // layer + " " + format → template
	for _, l := range caps.Layers {
		var want []string
		switch l.Identifier {
		case "test:polygons":
			want = strings.Fields(allTileFormats)
		case "test:relief":
			want = []string{"image/png", "image/png8", "image/vnd.jpeg-png", "image/vnd.jpeg-png8", "image/webp"}
		case "test:lossy":
			want = []string{"image/webp"}
		default:
			t.Errorf("capabilities list layer %q", l.Identifier)
			continue
		}
		if strings.Join(l.Formats, " ") != strings.Join(want, " ") {
			t.Errorf("%s: <Format>s %q, want %q", l.Identifier, l.Formats, want)
		}
		for _, r := range l.ResourceURLs {
			if r.Type == "tile" {
				if _, dup := templates[l.Identifier+" "+r.Format]; dup {
					t.Errorf("%s: two tile ResourceURLs for %s", l.Identifier, r.Format)
				}
				templates[l.Identifier+" "+r.Format] = r.Template
			}
		}
	}
	for _, c := range formatCases {
		tpl := templates[c.String()]
		want := origin + "/wmts/1.0.0/" + c.layer + "/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}." + c.ext
		if tpl != want && tpl != strings.Replace(want, c.layer, url.PathEscape(c.layer), 1) {
			t.Errorf("%s: ResourceURL %q, want %q", c, tpl, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	const gs = "EPSG:4326"
	g, _ := gridset.Builtin(gs)
	// Two tiles of one metatile: x5 y2 (lat 0°–45°) and x5 y3 (45°–90°,
	// with the polar band). MapServer's lossless renders, and those on its
	// white (TRANSPARENT=FALSE: what the upstream's JPEG shows).
	tiles := []gridset.Index{{X: 5, Y: 2, Z: 2}, {X: 5, Y: 3, Z: 2}}
	type refKey struct {
		layer string
		idx   gridset.Index
	}
	ref, flat := map[refKey]*image.NRGBA{}, map[refKey]*image.NRGBA{}
	for _, layer := range []string{"test:polygons", "test:relief"} {
		for _, idx := range tiles {
			ref[refKey{layer, idx}] = mapServerTile(t, up, layer, gs, idx, true)
			flat[refKey{layer, idx}] = mapServerTile(t, up, layer, gs, idx, false)
		}
	}
	// The mixed formats' rule, on MapServer's render: JPEG for a fully
	// opaque tile of more than one colour. test:polygons has partly
	// transparent seam pixels in most tiles and the polar band: PNG;
	// test:relief is opaque: JPEG. The test needs both kinds.
	jpegTile := func(k refKey) bool { return ref[k].Opaque() && colorCount(ref[k]) > 1 }
	if jpegTile(refKey{"test:polygons", tiles[1]}) || !jpegTile(refKey{"test:relief", tiles[0]}) || !jpegTile(refKey{"test:relief", tiles[1]}) {
		t.Fatalf("MapServer's tiles are not the opaque and transparent ones this test needs")
	}
	for _, c := range formatCases {
		t.Run(strings.NewReplacer(":", "_", "/", "_").Replace(c.String()), func(t *testing.T) {
			before := len(cnt.getMaps())
			first := true
			for _, idx := range tiles {
				k := refKey{c.upstreamLayer(), idx}
				row := g.Levels[idx.Z].TilesHigh - 1 - idx.Y
				matrix := fmt.Sprintf("%s:%d", gs, idx.Z)
				rest := strings.NewReplacer("{Style}", "default", "{TileMatrixSet}", gs, "{TileMatrix}", matrix,
					"{TileRow}", fmt.Sprint(row), "{TileCol}", fmt.Sprint(idx.X)).Replace(templates[c.String()])
				kvp := url.Values{"SERVICE": {"WMTS"}, "REQUEST": {"GetTile"}, "VERSION": {"1.0.0"}, "LAYER": {c.layer},
					"STYLE": {""}, "TILEMATRIXSET": {gs}, "TILEMATRIX": {matrix}, "TILEROW": {fmt.Sprint(row)},
					"TILECOL": {fmt.Sprint(idx.X)}, "FORMAT": {c.format}}
				protocols := []struct{ name, url string }{
					{"WMS-C", siteURL(tileQuery(c.layer, gs, idx, "FORMAT", c.format))},
					{"WMTS KVP", origin + "/wmts?" + kvp.Encode()},
					{"WMTS REST", rest},
					{"TMS", fmt.Sprintf("%s/tms/1.0.0/%s@%s@%s/%d/%d/%d.%s", origin, c.layer, gs, c.ext, idx.Z, idx.X, idx.Y, c.ext)},
					{"XYZ", fmt.Sprintf("%s/xyz/%s/%s/%d/%d/%d.%s", origin, c.layer, gs, idx.Z, idx.X, row, c.ext)},
				}
				var body []byte
				var ctype string
				for _, p := range protocols {
					what := fmt.Sprintf("%s tile %d/%d/%d", p.name, idx.Z, idx.X, idx.Y)
					a := get(t, p.url)
					result := "HIT"
					if first {
						result = "MISS"
					}
					if a.status != 200 || a.header.Get("Geowebcache-Cache-Result") != result {
						t.Fatalf("%s: %d, cache result %q (want %s), miss reason %q, body %q", what, a.status,
							a.header.Get("Geowebcache-Cache-Result"), result, a.header.Get("Geowebcache-Miss-Reason"), truncate(a.body))
					}
					first = false
					if body == nil {
						body, ctype = a.body, a.header.Get("Content-Type")
					} else if !bytes.Equal(a.body, body) || a.header.Get("Content-Type") != ctype {
						t.Errorf("%s: %d bytes of %s, the WMS-C tile %d bytes of %s", what, len(a.body),
							a.header.Get("Content-Type"), len(body), ctype)
					}
				}
				what := fmt.Sprintf("tile %d/%d/%d", idx.Z, idx.X, idx.Y)
				want := c.answeredAs()
				if c.mixed {
					want = map[bool]string{true: "image/jpeg", false: "image/png"}[jpegTile(k)]
				}
				if ctype != want {
					t.Errorf("%s: Content-Type %s, want %s", what, ctype, want)
				}
				img := decodeTile(t, what, ctype, body)
				if c.colors > 0 && ctype == "image/png" {
					if n := colorCount(img); n > c.colors {
						t.Errorf("%s: %d colours, at most %d", what, n, c.colors)
					}
				}
				floor, against := c.pngFloor, ref[k]
				if ctype == "image/jpeg" {
					floor = c.jpegFloor
					if c.format == "image/jpeg" {
						// The upstream's JPEG: the map on MapServer's white.
						against = flat[k]
					}
				}
				p := imaging.PSNR(img, against)
				if floor == 0 {
					t.Errorf("%s: a %s tile in %s", what, ctype, c.format)
				} else if p < floor {
					t.Errorf("%s (%s, %d bytes): PSNR %.2f dB against MapServer's lossless render, want ≥ %.1f", what, ctype, len(body), p, floor)
				}
				t.Logf("%s: %s, %d bytes, PSNR %.2f dB against MapServer's lossless render, %d colours", what, ctype, len(body), p, colorCount(img))
			}
			// Both tiles are of one metatile: one GetMap, lossless unless the
			// tiles are the upstream's JPEG.
			sent := cnt.getMaps()[before:]
			wantFormat := "image%2Fpng"
			if c.format == "image/jpeg" {
				wantFormat = "image%2Fjpeg"
			}
			if len(sent) != 1 || !strings.Contains(sent[0], "FORMAT="+wantFormat+"&") {
				t.Errorf("the upstream got %q, want one GetMap with FORMAT=%s", sent, wantFormat)
			}
		})
	}

	// A seed of image/webp through REST: levels 0-3 of EPSG:900913
	// (1+4+16+64 tiles); afterwards each is a HIT in WebP, while a PNG
	// tile of the same gridset, not seeded, is still a MISS.
	path := submit(t, "test:polygons", "json", `{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":3,"format":"image/webp","type":"seed","threadCount":2}}`)
	ti := waitTask(t, path)
	if ti.State != "DONE" || ti.Total != 85 || ti.Processed != 85 || ti.FailedTiles != 0 {
		t.Fatalf("webp seed task %+v", ti)
	}
	before := len(cnt.getMaps())
	for z := 0; z <= 3; z++ {
		for x := 0; x < 1<<z; x++ {
			for y := 0; y < 1<<z; y++ {
				u := fmt.Sprintf("%s/xyz/test:polygons/EPSG:900913/%d/%d/%d.webp", origin, z, x, y)
				a := get(t, u)
				if a.status != 200 || a.header.Get("Geowebcache-Cache-Result") != "HIT" || a.header.Get("Content-Type") != "image/webp" {
					t.Fatalf("%s after the seed: %d %q %q", u, a.status, a.header.Get("Geowebcache-Cache-Result"), a.header.Get("Content-Type"))
				}
				decodeTile(t, u, "image/webp", a.body)
			}
		}
	}
	if n := len(cnt.getMaps()) - before; n != 0 {
		t.Errorf("%d GetMaps for seeded tiles", n)
	}
	a = get(t, origin+"/xyz/test:polygons/EPSG:900913/3/2/2.png")
	if a.header.Get("Geowebcache-Cache-Result") != "MISS" {
		t.Errorf("a PNG tile after a WebP seed: %d %q, want a MISS", a.status, a.header.Get("Geowebcache-Cache-Result"))
	}
	// Formats the layer is not cached in: a one-line 400 each, no task.
	for _, bad := range []struct{ layer, format string }{
		{"test:polygons", "image/gif"},
		{"test:lossy", "image/png8"},
		{"test:lossy", "image/png"},
	} {
		a := rest(t, "POST", "/rest/seed/"+bad.layer+".json", "application/json",
			`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"format":"`+bad.format+`","type":"seed"}}`)
		mustPlain(t, "seed of "+bad.layer+" in "+bad.format, a, 400)
		if loc := a.header.Get("Location"); loc != "" {
			t.Errorf("seed of %s in %s made a task: %s", bad.layer, bad.format, loc)
		}
		t.Logf("seed of %s in %s: %d %q", bad.layer, bad.format, a.status, strings.TrimSpace(string(a.body)))
	}
	// A GetMap in a format the layer is not cached in is not the cache's:
	// it passes through to MapServer, which answers it itself.
	a = get(t, siteURL(tileQuery("test:lossy", gs, tiles[0], "FORMAT", "image/png8")))
	if a.header.Get("Geowebcache-Cache-Result") != "" || a.header.Get("Geowebcache-Miss-Reason") == "" {
		t.Errorf("a GetMap of test:lossy in image/png8: %d, result %q, miss reason %q", a.status,
			a.header.Get("Geowebcache-Cache-Result"), a.header.Get("Geowebcache-Miss-Reason"))
	}
}

// --- GIS clients ---

// TestFormatsGIS runs testdata/clients/formats.py with Debian's Python:
// GDAL reads the WMTS in each format (its service description's <Format>
// picks the format's ResourceURL) and QGIS draws the layer in each format
// from WMTS and XYZ, compared with the lossless PNG read (see the script).
func TestFormatsGIS(t *testing.T) {
	clientsOnce(t)
	runClientScript(t, "testdata/clients/formats.py", "import osgeo.gdal, qgis.core, numpy", formatsLayers, 60)
}
