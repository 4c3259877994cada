package caddytest

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/upstream/upstreamtest"
)

// The real upstreams: MapServer and QGIS Server from Debian's packages,
// each behind its own lighttpd, started by the project's own scripts
// (upstream/, upstream/qgis/) with the same generated data and the same
// layer names. Each is started once, on first use, and stopped when the
// test binary ends. The end-to-end tests below run against both.
type realUpstream struct {
	name  string // the subtest's name
	start func(t *testing.T) string
	// forward is its forwarded-headers recipe (docs/upstreams.md).
	forward forwarding
	// layerError is what it says about a layer it does not know
	// (test:polygns), in its own words.
	layerError string
	// resolution is the GetMap parameter that sets its rendering
	// resolution: MapServer reads MAP_RESOLUTION, QGIS Server 3.22 DPI
	// (MAP_RESOLUTION and FORMAT_OPTIONS=dpi:N left its render as it was).
	resolution string
}

func realUpstreams() []realUpstream {
	return []realUpstream{
		{name: "MapServer", start: mapServer, forward: forwardMapServer,
			layerError: "LayerNotDefined: msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter.",
			resolution: "MAP_RESOLUTION"},
		{name: "QGIS", start: qgisServer, forward: forwardQGIS,
			layerError: "LayerNotDefined: The layer 'test:polygns' does not exist.",
			resolution: "DPI"},
	}
}

// eachUpstream runs fn as a subtest per real upstream, with its WMS URL.
func eachUpstream(t *testing.T, fn func(t *testing.T, u realUpstream, wms string)) {
	for _, u := range realUpstreams() {
		t.Run(u.name, func(t *testing.T) { fn(t, u, u.start(t)) })
	}
}

var (
	mapserverOnce sync.Once
	mapserverURL  string
	mapserverErr  error
	qgisOnce      sync.Once
	qgisURL       string
	qgisErr       error
)

func mapServer(t *testing.T) string {
	t.Helper()
	mapserverOnce.Do(func() {
		var stop func()
		mapserverURL, stop, mapserverErr = upstreamtest.MapServer(filepath.Join(storageRoot, "mapserver"))
		if mapserverErr == nil {
			atExit = append(atExit, stop)
		}
	})
	if mapserverErr != nil {
		t.Fatal(mapserverErr)
	}
	return mapserverURL
}

func qgisServer(t *testing.T) string {
	t.Helper()
	qgisOnce.Do(func() {
		var stop func()
		qgisURL, stop, qgisErr = upstreamtest.QGIS(filepath.Join(storageRoot, "qgis"))
		if qgisErr == nil {
			atExit = append(atExit, stop)
		}
	})
	if qgisErr != nil {
		t.Fatal(qgisErr)
	}
	return qgisURL
}

// counter passes requests on to an upstream and keeps the query of each
// GetMap: an exact count of what the cache sends, at the moment it is sent
// (lighttpd's access log is written up to a second late).
type counter struct {
	URL string // the WMS URL to give the cache
	mu  sync.Mutex
	got []string
}

func countGetMaps(t *testing.T, wms string) *counter {
	t.Helper()
	target, err := url.Parse(wms)
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.URL.Query().Get("REQUEST"), "GetMap") {
			c.mu.Lock()
			c.got = append(c.got, r.URL.RawQuery)
			c.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + target.Path
	return c
}

// getMaps are the GetMaps' queries so far, in order.
func (c *counter) getMaps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// upstreamConfig is a site in front of the upstream, proxied with its
// recipe, caching test:polygons in both built-in gridsets with two styles.
func upstreamConfig(u realUpstream, wms, storage, metatile string) string {
	return siteConfig{upstream: wms, forward: u.forward, tiles: `
		upstream ` + wms + `
		storage ` + storeLines(storage) + `
		timeout 60s
		layer test:polygons {
			gridsets EPSG:4326 EPSG:900913
			metatile ` + metatile + `
			param STYLES {
				default default
				values default population
			}
		}`}.String()
}

// mapserverConfig is upstreamConfig for MapServer (clients_test.go).
func mapserverConfig(wms, storage, metatile string) string {
	return upstreamConfig(realUpstreams()[0], wms, storage, metatile)
}

func toNRGBA(img image.Image) *image.NRGBA {
	out := image.NewNRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out
}

// directImage asks the upstream itself for q and decodes its answer.
func directImage(t *testing.T, wms string, q url.Values) *image.NRGBA {
	t.Helper()
	a := get(t, wms+"?"+q.Encode())
	if a.status != 200 {
		t.Fatalf("direct GetMap: %d %q", a.status, truncate(a.body))
	}
	img, _, err := image.Decode(bytes.NewReader(a.body))
	if err != nil {
		t.Fatalf("direct GetMap does not decode: %v", err)
	}
	return toNRGBA(img)
}

func TestRealUpstreamTilesInBothGridsets(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		cnt := countGetMaps(t, up)
		load(t, upstreamConfig(u, cnt.URL, storageDir(t), "4 4"))
		for _, c := range []struct {
			gs  string
			idx gridset.Index
		}{
			{"EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 2}},
			{"EPSG:900913", gridset.Index{X: 2, Y: 2, Z: 2}},
		} {
			q := tileQuery("test:polygons", c.gs, c.idx)
			before := len(cnt.getMaps())
			miss := get(t, siteURL(q))
			img := mustTile(t, miss, "MISS")
			if img.Bounds() != image.Rect(0, 0, 256, 256) {
				t.Fatalf("%s: tile %v", c.gs, img.Bounds())
			}
			// One GetMap for the metatile, in a CRS the upstream knows
			// (EPSG:900913 goes as EPSG:3857), 1024 pixels wide.
			sent := cnt.getMaps()[before:]
			if len(sent) != 1 || !strings.Contains(sent[0], "WIDTH=1024") ||
				(c.gs == "EPSG:900913") != strings.Contains(sent[0], "SRS=EPSG%3A3857") {
				t.Errorf("%s: the upstream got %q", c.gs, sent)
			}
			// A rendered map, not a blank: more than one colour.
			n := toNRGBA(img)
			uniform := true
			for i := 4; i < len(n.Pix); i += 4 {
				if !bytes.Equal(n.Pix[i:i+4], n.Pix[:4]) {
					uniform = false
					break
				}
			}
			if uniform {
				t.Errorf("%s: tile is one flat colour", c.gs)
			}
			hit := get(t, siteURL(q))
			mustTile(t, hit, "HIT")
			if !bytes.Equal(hit.body, miss.body) {
				t.Errorf("%s: hit differs from miss", c.gs)
			}
			// Another tile of the same metatile is a hit with no further render.
			other := c.idx
			other.X ^= 1
			mustTile(t, get(t, siteURL(tileQuery("test:polygons", c.gs, other))), "HIT")
			if n := len(cnt.getMaps()) - before; n != 1 {
				t.Errorf("%s: %d GetMaps for one metatile", c.gs, n)
			}
		}
		// The population style is its own tile set and renders differently.
		idx := gridset.Index{X: 5, Y: 2, Z: 2}
		def := get(t, siteURL(tileQuery("test:polygons", "EPSG:4326", idx)))
		pop := get(t, siteURL(tileQuery("test:polygons", "EPSG:4326", idx, "STYLES", "population")))
		mustTile(t, pop, "MISS")
		if bytes.Equal(def.body, pop.body) {
			t.Error("population style tile equals the default style tile")
		}
		// Requests the cache does not serve reach the upstream, whose
		// exceptions pass through to the client (MapServer answers them
		// with HTTP 200, QGIS Server with 400), twice: nothing is cached.
		for _, c := range []struct{ name, reason, code string }{
			{"unknown style", "parameter", "StyleNotDefined"},
			{"unknown layer", "unknown-layer", "LayerNotDefined"},
		} {
			q := tileQuery("test:polygons", "EPSG:4326", idx, "STYLES", "nope")
			if c.name == "unknown layer" {
				q = tileQuery("test:nope", "EPSG:4326", idx)
			}
			for i := 0; i < 2; i++ {
				bad := get(t, siteURL(q))
				if bad.header.Get("Geowebcache-Miss-Reason") != c.reason || !bytes.Contains(bad.body, []byte(c.code)) ||
					bad.header.Get("Geowebcache-Cache-Result") != "" {
					t.Errorf("%s #%d: %d reason %q body %q", c.name, i, bad.status, bad.header.Get("Geowebcache-Miss-Reason"), truncate(bad.body))
				}
			}
		}
	})
}

// With 1×1 metatiles and no gutter, the upstream GetMap is exactly the
// tile's; the cached tile must then decode to the very pixels the upstream
// renders for that tile when asked directly.
func TestRealUpstreamCachedTileHasTheUpstreamPixels(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		load(t, upstreamConfig(u, up, storageDir(t), "1 1"))
		for _, c := range []struct {
			gs, srs string
			idx     gridset.Index
		}{
			{"EPSG:4326", "EPSG:4326", gridset.Index{X: 9, Y: 5, Z: 3}},
			{"EPSG:900913", "EPSG:3857", gridset.Index{X: 5, Y: 9, Z: 4}},
		} {
			a := toNRGBA(mustTile(t, get(t, siteURL(tileQuery("test:polygons", c.gs, c.idx))), "MISS"))
			b := directImage(t, up, tileQuery("test:polygons", c.gs, c.idx, "SRS", c.srs, "STYLES", "default", "TRANSPARENT", "TRUE"))
			if a.Bounds() != b.Bounds() || !bytes.Equal(a.Pix, b.Pix) {
				t.Errorf("%s: cached tile differs from the direct GetMap in %d of %d bytes", c.gs, diffBytes(a.Pix, b.Pix), len(a.Pix))
			}
		}
	})
}

func diffBytes(a, b []byte) int {
	n := 0
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			n++
		}
	}
	return n
}

// Seeding through the REST interface: levels 0–4 of test:polygons in both
// built-in gridsets (682 + 341 = 1,023 tiles), with 4×4 metatiles. The
// upstream's own access log shows one GetMap per metatile (44 + 23 = 67),
// and every tile is a HIT afterwards. The seed's time is logged next to
// the time the upstream alone takes for the same 67 GetMaps.
func TestRealUpstreamSeedOneGetMapPerMetatile(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		cnt := countGetMaps(t, up)
		load(t, siteConfig{admin: ptr("workers 2"), upstream: up, forward: u.forward, tiles: `
			upstream ` + cnt.URL + `
			storage ` + storeLines(storageDir(t)) + `
			timeout 60s
			layer test:polygons {
				gridsets EPSG:4326 EPSG:900913
			}`}.String())
		start := time.Now()
		wantTiles, wantMetas := 0, 0
		for _, gs := range []string{"EPSG:4326", "EPSG:900913"} {
			g, _ := gridset.Builtin(gs)
			tiles, metas := 0, 0
			for z := 0; z <= 4; z++ {
				l := g.Levels[z]
				tiles += int(l.TilesWide * l.TilesHigh)
				metas += int(((l.TilesWide + 3) / 4) * ((l.TilesHigh + 3) / 4))
			}
			ti := waitTask(t, submit(t, "test:polygons", "json", `{"seedRequest":{"gridSetId":"`+gs+`","zoomStart":0,"zoomStop":4,"type":"seed","threadCount":2}}`))
			if ti.State != "DONE" || ti.Total != int64(tiles) || ti.Processed != int64(tiles) || ti.FailedTiles != 0 {
				t.Fatalf("%s seed task %+v", gs, ti)
			}
			wantTiles += tiles
			wantMetas += metas
		}
		seed := time.Since(start)
		sent := cnt.getMaps()
		if wantTiles != 1023 || len(sent) != wantMetas || wantMetas != 67 || len(slices.Compact(slices.Sorted(slices.Values(sent)))) != len(sent) {
			t.Fatalf("%d tiles seeded with %d GetMaps, want %d (one per metatile)", wantTiles, len(sent), wantMetas)
		}
		for _, gs := range []string{"EPSG:4326", "EPSG:900913"} {
			g, _ := gridset.Builtin(gs)
			for z := 0; z <= 4; z++ {
				l := g.Levels[z]
				for x := int64(0); x < l.TilesWide; x++ {
					for y := int64(0); y < l.TilesHigh; y++ {
						a := get(t, siteURL(tileQuery("test:polygons", gs, gridset.Index{X: x, Y: y, Z: z})))
						if a.status != 200 || a.header.Get("Geowebcache-Cache-Result") != "HIT" {
							t.Fatalf("%s tile %d/%d/%d: %d %s", gs, z, x, y, a.status, a.header.Get("Geowebcache-Cache-Result"))
						}
					}
				}
			}
		}
		// The same GetMaps straight to the upstream, two at a time as the
		// seed sent them: what the upstream alone costs.
		direct := replayGetMaps(t, up, sent, 2)
		t.Logf("%s: seed of %d tiles (%d metatiles) took %v; the same GetMaps straight to the upstream %v (%.2f×)",
			u.name, wantTiles, wantMetas, seed.Round(time.Millisecond), direct.Round(time.Millisecond), seed.Seconds()/direct.Seconds())
	})
}

// replayGetMaps sends the GetMaps (their queries) to the upstream again,
// workers at a time, and returns how long that took.
func replayGetMaps(t *testing.T, wms string, queries []string, workers int) time.Duration {
	t.Helper()
	next := make(chan string, len(queries))
	for _, q := range queries {
		next <- wms + "?" + q
	}
	close(next)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				resp, err := client.Get(u)
				if err != nil {
					t.Error(err)
					return
				}
				var b bytes.Buffer
				b.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("replayed GetMap: %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// Seeded through the REST interface with 4×4 metatiles, every tile equals,
// pixel for pixel, its area of the metatile the upstream renders for the
// same GetMap: the encoder is lossless on real maps. The population style
// has far more than 256 colours (RGB tiles). For MapServer, raw:polygons
// is the same layer with its metatiles asked for in MapServer's
// uncompressed PNG (upstream_format "image/png; mode=raw", the project's
// output format png_raw): its tiles too equal the image/png metatile's
// pixels.
func TestRealUpstreamSeededTilesAreTheMetatilesPixels(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		layer := func(name, extra string) string {
			return `
		layer ` + name + ` {
			` + extra + `
			gridsets EPSG:4326
			metatile 4 4
			param STYLES {
				default default
				values default population
			}
		}`
		}
		cases := []struct{ layer, style string }{{"test:polygons", "population"}, {"test:polygons", "default"}}
		layers := layer("test:polygons", "")
		if u.name == "MapServer" {
			layers += layer("raw:polygons", "upstream_layers test:polygons\n\t\t\tupstream_format \"image/png; mode=raw\"")
			cases = append(cases, struct{ layer, style string }{"raw:polygons", "population"}, struct{ layer, style string }{"raw:polygons", "default"})
		}
		load(t, siteConfig{admin: ptr("workers 2"), upstream: up, forward: u.forward, tiles: `
		upstream ` + up + `
		storage ` + storeLines(storageDir(t)) + `
		timeout 60s` + layers}.String())
		for _, c := range cases {
			style := c.style
			path := submit(t, c.layer, "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":2,"zoomStop":2,"type":"seed",
			"parameters":{"STYLES":"`+style+`"}}}`)
			if ti := waitTask(t, path); ti.Status != 2 || ti.Processed != 32 || ti.FailedTiles != 0 {
				t.Fatalf("%s %s seed: %+v", c.layer, style, ti)
			}
			colours := map[[4]byte]bool{}
			for mx := int64(0); mx < 2; mx++ { // z2 is 8×4 tiles: two metatiles of 4×4
				meta := directImage(t, up, tileQuery("test:polygons", "EPSG:4326", gridset.Index{}, "STYLES", style, "TRANSPARENT", "TRUE",
					"WIDTH", "1024", "HEIGHT", "1024", "BBOX", fmt.Sprintf("%d,-90,%d,90", -180+180*mx, 180*mx)))
				for ty := int64(0); ty < 4; ty++ {
					for tx := int64(0); tx < 4; tx++ {
						idx := gridset.Index{X: 4*mx + tx, Y: ty, Z: 2}
						tile := toNRGBA(mustTile(t, get(t, siteURL(tileQuery(c.layer, "EPSG:4326", idx, "STYLES", style))), "HIT"))
						area := meta.SubImage(image.Rect(int(tx)*256, int(3-ty)*256, int(tx+1)*256, int(4-ty)*256)).(*image.NRGBA)
						for y := 0; y < 256; y++ {
							got := tile.Pix[y*tile.Stride : y*tile.Stride+256*4]
							want := area.Pix[y*area.Stride : y*area.Stride+256*4]
							if !bytes.Equal(got, want) {
								t.Fatalf("%s %s tile %v row %d differs from the metatile's", c.layer, style, idx, y)
							}
							for i := 0; i < len(got); i += 4 {
								colours[[4]byte(got[i:i+4])] = true
							}
						}
					}
				}
			}
			t.Logf("%s %s: 32 tiles equal to the upstream's metatiles, %d colours in all", c.layer, style, len(colours))
			if style == "population" && len(colours) <= 256 {
				t.Errorf("population style has %d colours: not the >256-colour case", len(colours))
			}
		}
	})
}

// WMTS in front of the real upstream: capabilities list the layer in both
// gridsets, and GetTile, KVP and REST, is a MISS with one GetMap, then a
// HIT, with the very bytes the WMS-C request for the tile gets.
func TestRealUpstreamWMTS(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		cnt := countGetMaps(t, up)
		load(t, siteConfig{upstream: up, forward: u.forward, tiles: `
			upstream ` + cnt.URL + `
			storage ` + storeLines(storageDir(t)) + `
			timeout 60s
			layer test:polygons {
				gridsets EPSG:4326 EPSG:900913
				param STYLES {
					default default
					values default population
				}
			}
			services {
				wmts /wmts
			}`}.String())
		caps := get(t, site("/wmts?SERVICE=WMTS&REQUEST=GetCapabilities&VERSION=1.0.0"))
		for _, want := range []string{"<ows:Identifier>test:polygons</ows:Identifier>", "<TileMatrixSet>EPSG:4326</TileMatrixSet>",
			"<TileMatrixSet>EPSG:900913</TileMatrixSet>", "<ows:Identifier>population</ows:Identifier>"} {
			if caps.status != 200 || !bytes.Contains(caps.body, []byte(want)) {
				t.Errorf("WMTS capabilities (%d) lack %s", caps.status, want)
			}
		}
		for i, c := range []struct {
			proto, gs string
			idx       gridset.Index
		}{
			{"wmts-kvp", "EPSG:4326", gridset.Index{X: 9, Y: 2, Z: 3}},
			{"wmts-rest", "EPSG:900913", gridset.Index{X: 5, Y: 2, Z: 3}},
		} {
			u := tileURL(c.proto, "test:polygons", "population", c.gs, c.idx, "png")
			first := get(t, u)
			mustTile(t, first, "MISS")
			if n := len(cnt.getMaps()); n != i+1 {
				t.Errorf("%s: %d GetMaps in all, want %d", c.proto, n, i+1)
			}
			mustTile(t, get(t, u), "HIT")
			wmsc := get(t, siteURL(tileQuery("test:polygons", c.gs, c.idx, "STYLES", "population")))
			mustTile(t, wmsc, "HIT")
			if !bytes.Equal(first.body, wmsc.body) {
				t.Errorf("%s: GetTile differs from the WMS-C tile", c.proto)
			}
		}
	})
}

// The resolution parameters clients add (QGIS desktop sends DPI,
// MAP_RESOLUTION and FORMAT_OPTIONS=dpi:N): as neutral_params they are
// ignored, and the tile is the same HIT; as a parameter filter (of the
// parameter the upstream honours) each value is a tile set of its own,
// rendered by the upstream at that resolution: pixel for pixel its own
// render with that parameter.
func TestRealUpstreamDPIParameters(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		idx := gridset.Index{X: 9, Y: 5, Z: 3}
		layer := `
			layer test:places {
				gridsets EPSG:4326
				metatile 1 1
				%s
			}`
		load(t, siteConfig{upstream: up, forward: u.forward, tiles: `
			upstream ` + up + `
			storage ` + storeLines(storageDir(t)) + `
			neutral_params DPI MAP_RESOLUTION FORMAT_OPTIONS
			` + fmt.Sprintf(layer, "")}.String())
		plain := get(t, siteURL(tileQuery("test:places", "EPSG:4326", idx)))
		mustTile(t, plain, "MISS")
		hidpi := get(t, siteURL(tileQuery("test:places", "EPSG:4326", idx, "DPI", "180", "MAP_RESOLUTION", "180", "FORMAT_OPTIONS", "dpi:180")))
		mustTile(t, hidpi, "HIT")
		if !bytes.Equal(plain.body, hidpi.body) {
			t.Error("neutral DPI parameters: a different tile")
		}

		load(t, siteConfig{upstream: up, forward: u.forward, tiles: `
			upstream ` + up + `
			storage ` + storeLines(storageDir(t)) + `
			` + fmt.Sprintf(layer, `param `+u.resolution+` {
					default 72
					values 72 144
				}`)}.String())
		var tiles [2]*image.NRGBA
		for i, res := range []string{"72", "144"} {
			q := tileQuery("test:places", "EPSG:4326", idx, u.resolution, res)
			tiles[i] = toNRGBA(mustTile(t, get(t, siteURL(q)), "MISS"))
			mustTile(t, get(t, siteURL(q)), "HIT")
			q.Set("TRANSPARENT", "TRUE")
			if want := directImage(t, up, q); !bytes.Equal(tiles[i].Pix, want.Pix) {
				t.Errorf("%s=%s: the tile differs from the upstream's render in %d bytes", u.resolution, res, diffBytes(tiles[i].Pix, want.Pix))
			}
		}
		if bytes.Equal(tiles[0].Pix, tiles[1].Pix) {
			t.Errorf("%s=144 renders as 72 does: the parameter did not reach the upstream", u.resolution)
		}
	})
}

// A label cut at a tile edge is what users notice first. The places'
// labels along the edge between two 4×4 metatiles (EPSG:4326 level 4, the
// edge at lon −45, lat 0…45) are compared with one render of the upstream
// in which that edge is 512 pixels from any border: in a band of 64 pixels
// either side of the edge, a pixel is broken when it is label or symbol
// (alpha ≥ 128) in one image and background (alpha < 32) in the other.
// Without a gutter, QGIS Server truncates labels at the metatile's border
// and MapServer (PARTIALS FALSE) drops them, and neither draws what
// belongs to a point across the border: broken pixels by the hundred.
// With a gutter of 128 pixels, wider than any label, both metatiles draw
// every label near the edge whole, in the same place: none. (That takes
// labels placed the same way whatever else a metatile shows: one position
// each, drawn even where they overlap; both upstreams' data do so, and
// docs/upstreams.md says why.)
func TestRealUpstreamGutterKeepsLabelsWhole(t *testing.T) {
	const z, band = 4, 64
	g, _ := gridset.Builtin("EPSG:4326")
	lo, hi := g.TileBBox(gridset.Index{X: 10, Y: 7, Z: z}), g.TileBBox(gridset.Index{X: 13, Y: 12, Z: z})
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		// Tiles x 10…13, y 7…12: the pairs (11, y) | (12, y), y 8…11,
		// are 256 pixels or more inside it.
		ref := directImage(t, up, tileQuery("test:places", "EPSG:4326", gridset.Index{}, "TRANSPARENT", "TRUE",
			"WIDTH", "1024", "HEIGHT", "1536", "BBOX", fmt.Sprintf("%s,%s,%s,%s", fmtF(lo.MinX), fmtF(lo.MinY), fmtF(hi.MaxX), fmtF(hi.MaxY))))
		broken := map[int]int{}
		for _, gutter := range []int{0, 128} {
			load(t, siteConfig{upstream: up, forward: u.forward, tiles: `
			upstream ` + up + `
			storage ` + storeLines(storageDir(t)) + `
			timeout 60s
			layer test:places {
				gridsets EPSG:4326
				metatile 4 4
				gutter ` + fmt.Sprint(gutter) + `
			}`}.String())
			for y := int64(8); y <= 11; y++ {
				for x := int64(11); x <= 12; x++ {
					a := get(t, siteURL(tileQuery("test:places", "EPSG:4326", gridset.Index{X: x, Y: y, Z: z})))
					if a.status != 200 || a.header.Get("Geowebcache-Cache-Result") == "" {
						t.Fatalf("tile %d/%d: %d %q", x, y, a.status, truncate(a.body))
					}
					img, _, err := image.Decode(bytes.NewReader(a.body))
					if err != nil {
						t.Fatal(err)
					}
					tile := toNRGBA(img)
					ox, oy := int(x-10)*256, int(12-y)*256 // the tile's place in ref
					cols := [2]int{0, band}                // tile 12: the band's right half
					if x == 11 {
						cols = [2]int{256 - band, 256}
					}
					for py := 0; py < 256; py++ {
						for px := cols[0]; px < cols[1]; px++ {
							ta := int(tile.Pix[py*tile.Stride+px*4+3])
							ra := int(ref.Pix[(oy+py)*ref.Stride+(ox+px)*4+3])
							if (ta >= 128 && ra < 32) || (ra >= 128 && ta < 32) {
								broken[gutter]++
							}
						}
					}
				}
			}
		}
		t.Logf("%s: broken pixels along the metatile edge: %d without a gutter, %d with gutter 128", u.name, broken[0], broken[128])
		if broken[0] < 100 {
			t.Errorf("without a gutter only %d broken pixels: no label crosses the edge, the test shows nothing", broken[0])
		}
		if broken[128] != 0 {
			t.Errorf("with gutter 128, %d broken pixels along the metatile edge", broken[128])
		}
	})
}
