package caddytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Polygons, tile lists and every stored parameter set, through the REST
// interface of a real Caddy, against the fake WMS (which counts GetMaps)
// and the real store (whose tiles are read back).

// storedTiles is every stored tile of set at levels zs..ze.
func storedTiles(t *testing.T, dir string, set store.Set, g *gridset.Gridset, zs, ze int) map[gridset.Index]bool {
	t.Helper()
	out := map[gridset.Index]bool{}
	if onSuiteS3() {
		for _, k := range currentTileKeys(t, dir, set.Layer) {
			parts := strings.Split(k, "/")
			if len(parts) != 9 || parts[3] != set.Gridset || parts[4] != "png" || parts[5] != set.Params {
				continue
			}
			z, _ := strconv.Atoi(parts[6])
			x, _ := strconv.ParseInt(parts[7], 10, 64)
			y, _ := strconv.ParseInt(strings.TrimSuffix(parts[8], ".png"), 10, 64)
			if z >= zs && z <= ze {
				out[gridset.Index{X: x, Y: y, Z: z}] = true
			}
		}
		return out
	}
	b := openBadger(t, dir)
	for z := zs; z <= ze; z++ {
		r := g.GridRange(z)
		for y := r.MinY; y <= r.MaxY; y++ {
			for x := r.MinX; x <= r.MaxX; x++ {
				n, err := b.CountRange(set, z, gridset.Range{MinX: x, MinY: y, MaxX: x, MaxY: y})
				if err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					out[gridset.Index{X: x, Y: y, Z: z}] = true
				}
			}
		}
	}
	return out
}

// selected is the brute-force answer: every tile of levels zs..ze that
// the polygon selects (tile by tile), and the 4×4 metatiles holding them.
func selected(g *gridset.Gridset, geom area.Geometry, buffer float64, zs, ze int) (tiles, metatiles map[gridset.Index]bool) {
	c := area.NewCover(g, geom, buffer)
	tiles, metatiles = map[gridset.Index]bool{}, map[gridset.Index]bool{}
	for z := zs; z <= ze; z++ {
		r := g.GridRange(z)
		for y := r.MinY; y <= r.MaxY; y++ {
			for x := r.MinX; x <= r.MaxX; x++ {
				if idx := (gridset.Index{X: x, Y: y, Z: z}); c.Contains(idx) {
					tiles[idx] = true
					metatiles[gridset.Index{X: x / 4, Y: y / 4, Z: z}] = true
				}
			}
		}
	}
	return tiles, metatiles
}

// ofMetatiles is every tile of the given 4×4 metatiles (clipped to the grid).
func ofMetatiles(g *gridset.Gridset, metas map[gridset.Index]bool) map[gridset.Index]bool {
	out := map[gridset.Index]bool{}
	for m := range metas {
		r := g.GridRange(m.Z)
		for y := m.Y * 4; y < m.Y*4+4; y++ {
			for x := m.X * 4; x < m.X*4+4; x++ {
				if r.Contains(x, y) {
					out[gridset.Index{X: x, Y: y, Z: m.Z}] = true
				}
			}
		}
	}
	return out
}

func sameTiles(t *testing.T, what string, got, want map[gridset.Index]bool) {
	t.Helper()
	var extra, missing []gridset.Index
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	if len(extra)+len(missing) > 0 {
		t.Fatalf("%s: %d tiles too many (%v…), %d missing (%v…) of %d", what, len(extra), head(extra), len(missing), head(missing), len(want))
	}
}

func head(s []gridset.Index) []gridset.Index { return s[:min(len(s), 5)] }

// A polygon with a hole, in EPSG:4326 (lon/lat), diagonal across the world.
const worldTriangle = `{"type":"Polygon","coordinates":[[[-170,-70],[150,-20],[-60,80],[-170,-70]],[[-60,-10],[-20,-10],[-20,20],[-60,20],[-60,-10]]]}`

// A polygon seed fetches exactly the metatiles holding a tile of the
// polygon (one GetMap each) and its total is the polygon's exact count;
// a polygon truncation then deletes exactly that polygon's tiles, in
// EPSG:900913 with the polygon given in lon/lat and a buffer.
func TestPolygonSeedAndTruncate(t *testing.T) {
	e := newREST(t, "workers 2", "")
	g, _ := gridset.Builtin("EPSG:4326")
	geom, err := area.ParseGeoJSON([]byte(worldTriangle), area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tiles, metas := selected(g, geom, 0, 0, 5)
	all := 0
	for z := 0; z <= 5; z++ {
		all += int(g.GridRange(z).Count())
	}
	if len(tiles) == 0 || len(tiles) > all*3/4 {
		t.Fatalf("the test polygon selects %d of %d tiles: not a useful polygon", len(tiles), all)
	}
	p := e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":5,"type":"seed","threadCount":2,"geometry":`+worldTriangle+`}}`)
	ti := waitTask(t, p)
	if ti.State != "DONE" || ti.Total != int64(len(tiles)) || ti.Processed != ti.Total || ti.FailedTiles != 0 {
		t.Fatalf("polygon seed %+v; the polygon has %d tiles", ti, len(tiles))
	}
	if got := e.f.getMaps.Load(); got != int64(len(metas)) {
		t.Fatalf("%d GetMaps for %d metatiles", got, len(metas))
	}
	// (One GetMap per metatile: as many as there are metatiles, and every
	// one of them was fetched, as the stored tiles below show.)
	var shown map[string]any
	if err := json.Unmarshal(ti.Geometry, &shown); err != nil || shown["type"] != "MultiPolygon" {
		t.Fatalf("the task's geometry %s: %v", ti.Geometry, err)
	}
	set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: paramsHash(t, e.name, "test:a", nil)}
	before := storedTiles(t, e.dir, set, g, 0, 5)
	sameTiles(t, "stored after the polygon seed", before, ofMetatiles(g, metas))

	// Truncate a smaller polygon in WKT, given in web mercator, with a
	// buffer: exactly its tiles go.
	wkt := "SRID=3857;POLYGON((-8000000 -3000000, 9000000 -2000000, 0 9000000, -8000000 -3000000))"
	merc, _, err := area.ParseWKT(wkt, area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	lonlat, err := merc.Transform(3857, 4326)
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := selected(g, lonlat, 2.5, 0, 5)
	// (In XML this time: the same extension, as elements.)
	tt := waitTask(t, e.submit("test:a", "xml", `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart>`+
		`<zoomStop>5</zoomStop><type>truncate</type><geometry>`+wkt+`</geometry><buffer>2.5</buffer></seedRequest>`))
	if tt.State != "DONE" || tt.Total != int64(len(gone)) || tt.Processed != tt.Total || tt.Buffer != 2.5 {
		t.Fatalf("polygon truncate %+v; the polygon has %d tiles", tt, len(gone))
	}
	want := map[gridset.Index]bool{}
	for k := range before {
		if !gone[k] {
			want[k] = true
		}
	}
	sameTiles(t, "stored after the polygon truncate", storedTiles(t, e.dir, set, g, 0, 5), want)
}

func unique(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// paramsHash is the hash of the named cache's layer's parameter set.
func paramsHash(t *testing.T, cache, layer string, raw map[string]string) string {
	t.Helper()
	l, ok := currentCache(t, cache).Layer(layer)
	if !ok {
		t.Fatalf("no layer %s", layer)
	}
	v, err := l.Params.Normalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v.Hash()
}

// A tile list: duplicates and tiles of one metatile make one GetMap per
// metatile; the total is the distinct tiles; a reseed of the same list
// fetches exactly those metatiles again; parents are derived.
func TestTileListSeedAndReseed(t *testing.T) {
	e := newREST(t, "workers 2", "")
	g, _ := gridset.Builtin("EPSG:900913")
	var lines strings.Builder
	tiles, metas := map[gridset.Index]bool{}, map[gridset.Index]bool{}
	add := func(z int, x, yTop int64) {
		fmt.Fprintf(&lines, "%d/%d/%d\n", z, x, yTop)
		idx := gridset.Index{X: x, Y: (int64(1) << z) - 1 - yTop, Z: z}
		tiles[idx] = true
		metas[gridset.Index{X: idx.X / 4, Y: idx.Y / 4, Z: z}] = true
	}
	for x := int64(100); x < 110; x++ { // a row of z8 crossing three metatiles
		add(8, x, 90)
	}
	add(8, 100, 90) // a duplicate
	lines.WriteString("8 101 91\n# a comment\n\n")
	add(8, 101, 91)
	add(10, 500, 300)
	add(10, 900, 1000)
	post := func(query, body string) string {
		a := e.rest("POST", "/rest/seed/test:a/tiles?"+query, "text/plain", body)
		if a.status != 200 {
			t.Fatalf("tile list POST %s: %d %q", query, a.status, a.body)
		}
		return strings.TrimPrefix(a.header.Get("Location"), restURL(""))
	}
	ti := waitTask(t, post("type=seed&gridSetId=EPSG:900913&threadCount=2", lines.String()))
	if ti.State != "DONE" || ti.Total != int64(len(tiles)) || ti.Processed != ti.Total || ti.ListTiles != int64(len(tiles)) {
		t.Fatalf("list seed %+v; %d distinct tiles", ti, len(tiles))
	}
	if got := e.f.getMaps.Load(); got != int64(len(metas)) {
		t.Fatalf("%d GetMaps for %d distinct metatiles", got, len(metas))
	}
	first := unique(e.f.arrivals())
	ti = waitTask(t, post("type=reseed&gridSetId=EPSG:900913", lines.String()))
	if ti.State != "DONE" || ti.Processed != int64(len(tiles)) {
		t.Fatalf("list reseed %+v", ti)
	}
	bb := e.f.arrivals()
	again := unique(bb[len(first):])
	if len(bb)-len(first) != len(metas) || len(again) != len(first) {
		t.Fatalf("the reseed made %d GetMaps (%d distinct), the seed %d", len(bb)-len(first), len(again), len(first))
	}
	for b := range again {
		if !first[b] {
			t.Fatalf("the reseed fetched %s, which the list's seed did not", b)
		}
	}
	set := store.Set{Layer: "test:a", Gridset: "EPSG:900913", Format: "image/png", Params: paramsHash(t, e.name, "test:a", nil)}
	sameTiles(t, "stored after the list seed", storedTiles(t, e.dir, set, g, 0, 8), ofMetatiles(g, filterZ(metas, 0, 8)))

	// Parents: the z10 tiles' parents up to level 7, in TMS rows.
	n0 := e.f.getMaps.Load()
	ti = waitTask(t, post("type=seed&gridSetId=EPSG:900913&scheme=tms&parents=7", "10 4 6\n10 5 7\n"))
	// (4,6) and (5,7) at z10; parents (2,3) at z9, (1,1) at z8, (0,0) at z7:
	// 2 + 1 + 1 + 1 tiles in 4 metatiles, of which z8's was seeded above
	// only if it is one of the list's (it is not: seed fetches it).
	if ti.Total != 5 || ti.ZoomStart != 7 || ti.ZoomStop != 10 {
		t.Fatalf("list with parents %+v", ti)
	}
	if got := e.f.getMaps.Load() - n0; got != 4 {
		t.Fatalf("%d GetMaps for 4 metatiles of the list and its parents", got)
	}
}

func filterZ(m map[gridset.Index]bool, zs, ze int) map[gridset.Index]bool {
	out := map[gridset.Index]bool{}
	for k := range m {
		if k.Z >= zs && k.Z <= ze {
			out[k] = true
		}
	}
	return out
}

// allParameters: one truncate request deletes a polygon's tiles from every
// stored parameter set, leaving other areas and layers; one reseed request
// fetches the polygon's metatiles once per stored set, with each set's own
// values, including a value that is not the filter's default.
func TestAllParameterSets(t *testing.T) {
	e := newREST(t, "workers 2", "")
	g, _ := gridset.Builtin("EPSG:4326")
	for _, style := range []string{"", "population"} {
		waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"type":"seed","parameters":{"STYLES":"`+style+`"}}}`))
	}
	waitTask(t, e.submit("test:mock.layer.name", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"type":"seed"}}`))
	sets := []store.Set{
		{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: paramsHash(t, e.name, "test:a", nil)},
		{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: paramsHash(t, e.name, "test:a", map[string]string{"STYLES": "population"})},
	}
	other := store.Set{Layer: "test:mock.layer.name", Gridset: "EPSG:4326", Format: "image/png", Params: paramsHash(t, e.name, "test:mock.layer.name", nil)}
	full := storedTiles(t, e.dir, sets[0], g, 0, 3)
	if len(full) != 2+8+32+128 {
		t.Fatalf("%d tiles seeded", len(full))
	}
	geom, _ := area.ParseGeoJSON([]byte(worldTriangle), area.Limits{})
	tiles, metas := selected(g, geom, 0, 0, 3)

	n0 := e.f.getMaps.Load()
	styles0 := e.f.stylesSeen()
	ti := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"type":"reseed","allParameters":true,"geometry":`+worldTriangle+`}}`))
	if ti.State != "DONE" || ti.Total != 2*int64(len(tiles)) || ti.ParameterSets != 2 || !ti.AllParameters {
		t.Fatalf("reseed of every set %+v; %d tiles in the polygon", ti, len(tiles))
	}
	if got := e.f.getMaps.Load() - n0; got != 2*int64(len(metas)) {
		t.Fatalf("%d GetMaps for %d metatiles in 2 sets", got, len(metas))
	}
	if got := e.f.stylesSeen()[len(styles0):]; count(got, "population") != len(metas) {
		t.Fatalf("the reseed asked for STYLES=population %d times, want %d", count(got, "population"), len(metas))
	}

	tt := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"type":"truncate","allParameters":true,"geometry":`+worldTriangle+`}}`))
	if tt.State != "DONE" || tt.Total != 2*int64(len(tiles)) || tt.ParameterSets != 2 {
		t.Fatalf("truncate of every set %+v", tt)
	}
	want := map[gridset.Index]bool{}
	for k := range full {
		if !tiles[k] {
			want[k] = true
		}
	}
	for _, set := range sets {
		sameTiles(t, "set "+set.Params+" after truncating every set", storedTiles(t, e.dir, set, g, 0, 3), want)
	}
	sameTiles(t, "the other layer", storedTiles(t, e.dir, other, g, 0, 3), full)

	// A tile list and a box, each truncated in every set at once.
	a := e.rest("POST", "/rest/seed/test:a/tiles?type=truncate&gridSetId=EPSG:4326&allParameters=true&scheme=tms", "text/plain", "3 15 7\n3 14 7\n")
	if a.status != 200 {
		t.Fatalf("tile list truncate of every set: %d %q", a.status, a.body)
	}
	lt := waitTask(t, strings.TrimPrefix(a.header.Get("Location"), restURL("")))
	bt := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0,"type":"truncate","allParameters":true}}`))
	if lt.State != "DONE" || lt.Total != 2*2 || bt.State != "DONE" || bt.Total != 2*2 || bt.ParameterSets != 2 {
		t.Fatalf("list truncate %+v, box truncate %+v: want 2 tiles × 2 sets each", lt, bt)
	}
	for _, idx := range []gridset.Index{{X: 15, Y: 7, Z: 3}, {X: 14, Y: 7, Z: 3}, {X: 0, Y: 0, Z: 0}, {X: 1, Y: 0, Z: 0}} {
		delete(want, idx)
	}
	for _, set := range sets {
		sameTiles(t, "set "+set.Params+" after the list and box truncations of every set", storedTiles(t, e.dir, set, g, 0, 3), want)
	}
}

func count(ss []string, v string) int {
	n := 0
	for _, s := range ss {
		if s == v {
			n++
		}
	}
	return n
}

// Bad areas are a 400 with one line, and start nothing.
func TestBadAreasStartNothing(t *testing.T) {
	e := newREST(t, "max_list_lines 5", "")
	seed := func(extra string) string {
		return `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":3,"type":"seed",` + extra + `}}`
	}
	many := make([]string, 0, 100_002)
	for i := range 100_001 {
		many = append(many, fmt.Sprintf("[%g,%g]", -100+float64(i)*0.001, float64(i%7)))
	}
	many = append(many, many[0])
	for _, c := range []struct{ name, path, body, want string }{
		{"unclosed ring", "/rest/seed/test:a.json", seed(`"geometry":{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10]]]}`), "not closed"},
		{"NaN in WKT", "/rest/seed/test:a.json", seed(`"geometry":"POLYGON((0 0, NaN 1, 1 1, 0 0))"`), "NaN"},
		{"outside the gridset", "/rest/seed/test:a.json", seed(`"geometry":{"type":"Polygon","coordinates":[[[200,0],[250,0],[250,10],[200,0]]]}`), "outside gridset"},
		{"unknown CRS", "/rest/seed/test:a.json", seed(`"geometry":"POLYGON((0 0, 1 0, 1 1, 0 0))","geometrySrs":"EPSG:2154"`), "cannot convert"},
		{"negative buffer", "/rest/seed/test:a.json", seed(`"geometry":"POLYGON((0 0, 1 0, 1 1, 0 0))","buffer":-1`), "buffer"},
		{"too many vertices", "/rest/seed/test:a.json", seed(`"geometry":{"type":"Polygon","coordinates":[[` + strings.Join(many, ",") + `]]}`), "limit"},
		{"all sets in a seed", "/rest/seed/test:a.json", seed(`"allParameters":true`), "allParameters"},
		{"bad list line", "/rest/seed/test:a/tiles?type=seed&gridSetId=EPSG:900913", "3/1/1\n3/x/2\n", "line 2"},
		{"list over max_list_lines", "/rest/seed/test:a/tiles?type=seed&gridSetId=EPSG:900913", strings.Repeat("3/1/1\n", 6), "5"},
		{"list tile outside its level", "/rest/seed/test:a/tiles?type=seed&gridSetId=EPSG:900913", "3/8/1\n", "line 1"},
		{"unknown list option", "/rest/seed/test:a/tiles?type=seed&zoom=3", "3/1/1\n", "unknown query parameter"},
		{"empty list", "/rest/seed/test:a/tiles?type=seed&gridSetId=EPSG:900913", "\n# nothing\n", "empty tile list"},
	} {
		a := e.rest("POST", c.path, "application/json", c.body)
		mustPlain(t, c.name, a, http.StatusBadRequest)
		if !strings.Contains(string(a.body), c.want) {
			t.Errorf("%s: %q does not say %q", c.name, a.body, c.want)
		}
	}
	if recs := listing(t, "/rest/seed.json"); len(recs) != 0 || e.f.getMaps.Load() != 0 {
		t.Fatalf("bad requests started %d tasks and %d GetMaps", len(recs), e.f.getMaps.Load())
	}
}

// Against the real MapServer, through the REST interface: a polygon seed
// (lon/lat polygon, web mercator gridset) leaves exactly the polygon's
// metatiles cached, one GetMap each; a tile list reseed refetches exactly
// its metatiles; a polygon truncation of every stored parameter set
// leaves the other areas, and the other layer, cached.
func TestRealMapServerAreas(t *testing.T) {
	up := mapServer(t)
	cnt := countGetMaps(t, up)
	dir := storageDir(t)
	name := fmt.Sprintf("areas%d", restSeq.Add(1))
	load(t, siteConfig{admin: ptr("cache " + name + "\nworkers 2"), upstream: up, forward: forwardMapServer, tiles: `
		name ` + name + `
		upstream ` + cnt.URL + `
		storage ` + storeLines(dir) + `
		timeout 60s
		layer test:polygons {
			gridsets EPSG:900913
			param STYLES {
				default default
				values default population
			}
		}
		layer test:roads {
			gridsets EPSG:900913
		}`}.String())
	g, _ := gridset.Builtin("EPSG:900913")
	// Europe-ish, in lon/lat, with a hole.
	const europe = `{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[-10,35],[30,35],[40,60],[0,70],[-10,35]],[[5,45],[15,45],[15,50],[5,50],[5,45]]]}}`
	geom, err := area.ParseGeoJSON([]byte(europe), area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	merc, _ := geom.Transform(4326, 900913)
	tiles, metas := selected(g, merc, 0, 0, 6)
	var paths []string
	for _, style := range []string{"default", "population"} {
		paths = append(paths, submit(t, "test:polygons", "json", `{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":6,"type":"seed","threadCount":2,"parameters":{"STYLES":"`+style+`"},"geometry":`+europe+`}}`))
	}
	paths = append(paths, submit(t, "test:roads", "json", `{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":6,"type":"seed","threadCount":2,"geometry":`+europe+`}}`))
	for _, p := range paths {
		if ti := waitTask(t, p); ti.State != "DONE" || ti.Total != int64(len(tiles)) || ti.Processed != ti.Total || ti.FailedTiles != 0 {
			t.Fatalf("polygon seed %+v; the polygon has %d tiles", ti, len(tiles))
		}
	}
	if got := len(cnt.getMaps()); got != 3*len(metas) {
		t.Fatalf("%d GetMaps for 3 × %d metatiles", got, len(metas))
	}
	sets := map[string]store.Set{}
	for _, style := range []string{"default", "population"} {
		sets[style] = store.Set{Layer: "test:polygons", Gridset: "EPSG:900913", Format: "image/png", Params: paramsHash(t, name, "test:polygons", map[string]string{"STYLES": style})}
	}
	roads := store.Set{Layer: "test:roads", Gridset: "EPSG:900913", Format: "image/png", Params: paramsHash(t, name, "test:roads", nil)}
	seeded := ofMetatiles(g, metas)
	for style, set := range sets {
		sameTiles(t, "stored after the "+style+" polygon seed", storedTiles(t, dir, set, g, 0, 6), seeded)
	}

	// A tile list (XYZ rows, as osm2pgsql writes them) of z6 tiles inside
	// the polygon, reseeded: exactly its metatiles are fetched again.
	var lines strings.Builder
	listMetas := map[gridset.Index]bool{}
	n := 0
	for idx := range tiles {
		if idx.Z == 6 && n < 40 {
			fmt.Fprintf(&lines, "6/%d/%d\n", idx.X, 63-idx.Y)
			listMetas[gridset.Index{X: idx.X / 4, Y: idx.Y / 4, Z: 6}] = true
			n++
		}
	}
	before := len(cnt.getMaps())
	a := rest(t, "POST", "/rest/seed/test:polygons/tiles?type=reseed&gridSetId=EPSG:900913&parameter_STYLES=population", "text/plain", lines.String())
	if a.status != 200 {
		t.Fatalf("tile list: %d %q", a.status, a.body)
	}
	if ti := waitTask(t, strings.TrimPrefix(a.header.Get("Location"), restURL(""))); ti.State != "DONE" || ti.Processed != int64(n) {
		t.Fatalf("list reseed %+v, %d tiles listed", ti, n)
	}
	sent := cnt.getMaps()[before:]
	if len(sent) != len(listMetas) {
		t.Fatalf("the list's reseed made %d GetMaps for %d metatiles", len(sent), len(listMetas))
	}
	for _, q := range sent {
		v, _ := url.ParseQuery(q)
		bb := strings.Split(v.Get("BBOX"), ",")
		x0, _ := strconv.ParseFloat(bb[0], 64)
		y0, _ := strconv.ParseFloat(bb[1], 64)
		l := g.Levels[6]
		size := l.Resolution * float64(g.TileWidth)
		m := gridset.Index{X: int64((x0-g.Extent.MinX)/size+0.5) / 4, Y: int64((y0-g.Extent.MinY)/size+0.5) / 4, Z: 6}
		if !listMetas[m] || v.Get("STYLES") != "population" {
			t.Fatalf("the reseed fetched %s (metatile %v, STYLES %q), not one of the list's", v.Get("BBOX"), m, v.Get("STYLES"))
		}
	}

	// Truncate a smaller polygon in every stored parameter set.
	const spain = `POLYGON((-10 36, 3 36, 3 44, -10 44, -10 36))`
	sg, _, _ := area.ParseWKT(spain, area.Limits{})
	sm, _ := sg.Transform(4326, 900913)
	gone, _ := selected(g, sm, 0, 0, 6)
	tt := waitTask(t, submit(t, "test:polygons", "json", `{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":6,"type":"truncate","allParameters":true,"geometry":"`+spain+`"}}`))
	if tt.State != "DONE" || tt.ParameterSets != 2 || tt.Total != 2*int64(len(gone)) {
		t.Fatalf("truncate of every set %+v; %d tiles in the polygon", tt, len(gone))
	}
	left := map[gridset.Index]bool{}
	for k := range seeded {
		if !gone[k] {
			left[k] = true
		}
	}
	for style, set := range sets {
		sameTiles(t, "stored in "+style+" after truncating every set", storedTiles(t, dir, set, g, 0, 6), left)
	}
	sameTiles(t, "the other layer after the truncation", storedTiles(t, dir, roads, g, 0, 6), seeded)
}

// One truncate request, one task, for a polygon across 200 stored
// parameter sets whose values no filter lists (a regex filter): each set
// loses exactly the polygon's tiles.
func TestTruncatePolygonAcross200ParameterSets(t *testing.T) {
	e := newREST(t, "workers 2", `
		layer test:a {
			gridsets EPSG:4326
			param TIME {
				default t0
				regex "t[0-9]+"
			}
		}`)
	g, _ := gridset.Builtin("EPSG:4326")
	const sets = 200
	for i := range sets {
		// A visitor's miss stores the z2 metatile (all 16 tiles of z2) in
		// the set of TIME=t<i>.
		a := get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 1, Z: 2}, "TIME", fmt.Sprintf("t%d", i))))
		if a.status != 200 {
			t.Fatalf("tile with TIME=t%d: %d %q", i, a.status, truncate(a.body))
		}
	}
	// The south-western quarter: 2×2 tiles of z2.
	const quarter = `POLYGON((-180 -90, -90 -90, -90 0, -180 0, -180 -90))`
	ti := waitTask(t, e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":2,"zoomStop":2,"type":"truncate","allParameters":true,"geometry":"`+quarter+`"}}`))
	if ti.State != "DONE" || ti.ParameterSets != sets || ti.Total != 4*sets || ti.Processed != ti.Total {
		t.Fatalf("truncate of every set: %+v", ti)
	}
	check := sets
	if onSuiteS3() {
		check = 10 // each count lists the bucket
	}
	for i := range check {
		set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png",
			Params: paramsHash(t, e.name, "test:a", map[string]string{"TIME": fmt.Sprintf("t%d", i)})}
		if all, in := countTiles(t, e.dir, set, 2, g.GridRange(2)), countTiles(t, e.dir, set, 2, gridset.Range{MinX: 0, MinY: 0, MaxX: 1, MaxY: 1}); all != 12 || in != 0 {
			t.Fatalf("TIME=t%d: %d tiles left at z2, %d of them in the polygon; want 12 and 0", i, all, in)
		}
	}
}
