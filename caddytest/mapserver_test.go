package caddytest

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/upstream/mapservertest"
)

// The real upstream: MapServer from Debian's packages, started by the
// project's own scripts with data they generate. It is started once, on
// first use, and stopped when the test binary ends.
var (
	mapserverOnce sync.Once
	mapserverURL  string
	mapserverErr  error
)

func mapServer(t *testing.T) string {
	t.Helper()
	mapserverOnce.Do(func() {
		var stop func()
		mapserverURL, stop, mapserverErr = mapservertest.Start(filepath.Join(storageRoot, "mapserver"))
		if mapserverErr == nil {
			atExit = append(atExit, stop)
		}
	})
	if mapserverErr != nil {
		t.Fatal(mapserverErr)
	}
	return mapserverURL
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func mapserverConfig(upstream, storage, metatile string) string {
	return siteConfig{upstream: upstream, tiles: `
		upstream ` + upstream + `
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

func toNRGBA(img image.Image) *image.NRGBA {
	out := image.NewNRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out
}

func TestMapServerTilesInBothGridsets(t *testing.T) {
	up := mapServer(t)
	load(t, mapserverConfig(up, storageDir(t), "4 4"))
	for _, c := range []struct {
		gs  string
		idx gridset.Index
	}{
		{"EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 2}},
		{"EPSG:900913", gridset.Index{X: 2, Y: 2, Z: 2}},
	} {
		u := siteURL(tileQuery("test:polygons", c.gs, c.idx))
		miss := get(t, u)
		img := mustTile(t, miss, "MISS")
		if img.Bounds() != image.Rect(0, 0, 256, 256) {
			t.Fatalf("%s: tile %v", c.gs, img.Bounds())
		}
		// A rendered map, not a blank: more than one colour.
		n := toNRGBA(img)
		first := n.Pix[:4]
		uniform := true
		for i := 4; i < len(n.Pix); i += 4 {
			if !bytes.Equal(n.Pix[i:i+4], first) {
				uniform = false
				break
			}
		}
		if uniform {
			t.Errorf("%s: tile is one flat colour", c.gs)
		}
		hit := get(t, u)
		mustTile(t, hit, "HIT")
		if !bytes.Equal(hit.body, miss.body) {
			t.Errorf("%s: hit differs from miss", c.gs)
		}
		// Another tile of the same metatile is a hit with no further render.
		other := c.idx
		other.X ^= 1
		mustTile(t, get(t, siteURL(tileQuery("test:polygons", c.gs, other))), "HIT")
	}
	// The population style is its own tile set and renders differently.
	idx := gridset.Index{X: 5, Y: 2, Z: 2}
	def := get(t, siteURL(tileQuery("test:polygons", "EPSG:4326", idx)))
	pop := get(t, siteURL(tileQuery("test:polygons", "EPSG:4326", idx, "STYLES", "population")))
	mustTile(t, pop, "MISS")
	if bytes.Equal(def.body, pop.body) {
		t.Error("population style tile equals the default style tile")
	}
	// An unknown style is not a tile request; MapServer's exception passes
	// through to the client, and nothing is cached.
	bad := get(t, siteURL(tileQuery("test:polygons", "EPSG:4326", idx, "STYLES", "nope")))
	if bad.header.Get("Geowebcache-Miss-Reason") != "parameter" || !bytes.Contains(bad.body, []byte("StyleNotDefined")) {
		t.Errorf("unknown style: reason %q body %q", bad.header.Get("Geowebcache-Miss-Reason"), truncate(bad.body))
	}
}

// With 1×1 metatiles and no gutter, the upstream GetMap is exactly the
// tile's; the cached tile must then decode to the very pixels MapServer
// renders for that tile when asked directly.
func TestMapServerCachedTileHasTheUpstreamPixels(t *testing.T) {
	up := mapServer(t)
	load(t, mapserverConfig(up, storageDir(t), "1 1"))
	for _, c := range []struct {
		gs, srs string
		idx     gridset.Index
	}{
		{"EPSG:4326", "EPSG:4326", gridset.Index{X: 9, Y: 5, Z: 3}},
		{"EPSG:900913", "EPSG:3857", gridset.Index{X: 5, Y: 9, Z: 4}},
	} {
		cached := mustTile(t, get(t, siteURL(tileQuery("test:polygons", c.gs, c.idx))), "MISS")
		q := tileQuery("test:polygons", c.gs, c.idx, "SRS", c.srs, "STYLES", "default", "TRANSPARENT", "TRUE")
		direct := get(t, up+"?"+q.Encode())
		if direct.status != 200 {
			t.Fatalf("direct GetMap: %d %q", direct.status, truncate(direct.body))
		}
		want, _, err := image.Decode(bytes.NewReader(direct.body))
		if err != nil {
			t.Fatalf("direct GetMap does not decode: %v", err)
		}
		a, b := toNRGBA(cached), toNRGBA(want)
		if a.Bounds() != b.Bounds() || !bytes.Equal(a.Pix, b.Pix) {
			diff := 0
			for i := range a.Pix {
				if i < len(b.Pix) && a.Pix[i] != b.Pix[i] {
					diff++
				}
			}
			t.Errorf("%s: cached tile differs from the direct GetMap in %d of %d bytes", c.gs, diff, len(a.Pix))
		}
	}
}

// Seeding through the REST interface against the real MapServer: levels
// 0–4 of test:polygons in EPSG:4326 (2+8+32+128+512 = 682 tiles), after
// which every one of them is a HIT.
func TestMapServerSeedLevels0To4ThenAllHits(t *testing.T) {
	up := mapServer(t)
	cfg := siteConfig{admin: ptr("workers 2"), upstream: up, tiles: `
			upstream ` + up + `
			storage ` + storeLines(storageDir(t)) + `
			timeout 60s
			layer test:polygons {
				gridsets EPSG:4326 EPSG:900913
			}`}.String()
	load(t, cfg)
	ti := waitTask(t, submit(t, "test:polygons", "xml", `<seedRequest><name>test:polygons</name><srs><number>4326</number></srs><zoomStart>0</zoomStart><zoomStop>4</zoomStop><format>image/png</format><type>seed</type><threadCount>2</threadCount></seedRequest>`))
	if ti.State != "DONE" || ti.Total != 682 || ti.Processed != 682 || ti.FailedTiles != 0 {
		t.Fatalf("seed task %+v", ti)
	}
	g, _ := gridset.Builtin("EPSG:4326")
	for z := 0; z <= 4; z++ {
		l := g.Levels[z]
		for x := int64(0); x < l.TilesWide; x++ {
			for y := int64(0); y < l.TilesHigh; y++ {
				a := get(t, siteURL(tileQuery("test:polygons", "EPSG:4326", gridset.Index{X: x, Y: y, Z: z})))
				if a.status != 200 || a.header.Get("Geowebcache-Cache-Result") != "HIT" {
					t.Fatalf("tile %d/%d/%d: %d %s", z, x, y, a.status, a.header.Get("Geowebcache-Cache-Result"))
				}
			}
		}
	}
}

// Seeded through the REST interface with 4×4 metatiles, every tile equals,
// pixel for pixel, its area of the metatile MapServer renders for the same
// GetMap: the encoder is lossless on real maps. The population style has
// far more than 256 colours (RGB tiles), the default style fewer
// (paletted tiles). raw:polygons is the same layer with its metatiles
// asked for in MapServer's uncompressed PNG (upstream_format
// "image/png; mode=raw", the project's output format png_raw):
// its tiles too equal the image/png metatile's pixels.
func TestMapServerSeededTilesAreTheMetatilesPixels(t *testing.T) {
	up := mapServer(t)
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
	load(t, siteConfig{admin: ptr("workers 2"), upstream: up, tiles: `
		upstream ` + up + `
		storage ` + storeLines(storageDir(t)) + `
		timeout 60s` + layer("test:polygons", "") +
		layer("raw:polygons", "upstream_layers test:polygons\n\t\t\tupstream_format \"image/png; mode=raw\"")}.String())
	for _, c := range []struct{ layer, style string }{
		{"test:polygons", "population"}, {"test:polygons", "default"},
		{"raw:polygons", "population"}, {"raw:polygons", "default"},
	} {
		style := c.style
		path := submit(t, c.layer, "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":2,"zoomStop":2,"type":"seed",
			"parameters":{"STYLES":"`+style+`"}}}`)
		if ti := waitTask(t, path); ti.Status != 2 || ti.Processed != 32 || ti.FailedTiles != 0 {
			t.Fatalf("%s %s seed: %+v", c.layer, style, ti)
		}
		colours := map[[4]byte]bool{}
		for mx := int64(0); mx < 2; mx++ { // z2 is 8×4 tiles: two metatiles of 4×4
			q := tileQuery("test:polygons", "EPSG:4326", gridset.Index{}, "STYLES", style, "TRANSPARENT", "TRUE",
				"WIDTH", "1024", "HEIGHT", "1024", "BBOX", fmt.Sprintf("%d,-90,%d,90", -180+180*mx, 180*mx))
			direct := get(t, up+"?"+q.Encode())
			if direct.status != 200 {
				t.Fatalf("direct metatile: %d %q", direct.status, truncate(direct.body))
			}
			img, _, err := image.Decode(bytes.NewReader(direct.body))
			if err != nil {
				t.Fatalf("direct metatile does not decode: %v", err)
			}
			meta := toNRGBA(img)
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
		t.Logf("%s %s: 32 tiles equal to MapServer's metatiles, %d colours in all", c.layer, style, len(colours))
		if style == "population" && len(colours) <= 256 {
			t.Errorf("population style has %d colours: not the >256-colour case", len(colours))
		}
	}
}
