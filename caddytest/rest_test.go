package caddytest

// GeoWebCache's REST interface for seeding, truncating and mass truncating,
// as docs/rest.md documents it, through a real Caddy:
// tile_cache_admin under handle_path /geowebcache/* behind basic_auth, with
// tile_cache serving the same site's public tiles.

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"mime/multipart"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

const (
	formCT    = "application/x-www-form-urlencoded"
	tinySeedJ = `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0}}`
	tinySeedX = `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>0</zoomStop></seedRequest>`
	truncA    = `<truncateLayer><layerName>test:a</layerName></truncateLayer>`
)

// Every method of every REST resource, and HEAD and PATCH,
// which no resource allows. A 405 names exactly the allowed methods and does
// nothing: no task, no kill, no truncation.
func TestRESTMethodTable(t *testing.T) {
	e := newREST(t, "workers 2", "")
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Fatalf("first tile %s", r)
	}
	e.f.set("", 300*time.Millisecond)
	slow := e.slowTask("test:a")
	slowID := taskID(t, slow)

	type row struct {
		method, path, ct, body string
		allow                  []string
	}
	var rows []row
	for _, p := range []string{"/rest/seed/test:a.json", "/rest/seed/test:a.xml"} {
		body, ct := tinySeedJ, "application/json"
		if strings.HasSuffix(p, ".xml") {
			body, ct = tinySeedX, "text/xml"
		}
		for _, m := range []string{"PUT", "DELETE", "HEAD", "PATCH"} {
			rows = append(rows, row{m, p, ct, body, []string{"GET", "POST"}})
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "HEAD", "PATCH"} {
		rows = append(rows, row{m, "/rest/seed.json", "application/json", tinySeedJ, []string{"GET"}})
	}
	for _, p := range []string{"/rest/seed", "/rest/seed/test:a"} {
		for _, m := range []string{"GET", "PUT", "DELETE", "HEAD", "PATCH"} {
			rows = append(rows, row{m, p + "?kill_all=all", formCT, "kill_all=all", []string{"POST"}})
		}
	}
	for _, m := range []string{"PUT", "DELETE", "HEAD", "PATCH"} {
		rows = append(rows, row{m, "/rest/masstruncate", "text/xml", truncA, []string{"GET", "POST"}})
	}
	for _, r := range rows {
		a := e.rest(r.method, r.path, r.ct, r.body)
		what := r.method + " " + r.path
		if a.status != 405 {
			t.Errorf("%s: status %d, want 405 (body %q)", what, a.status, truncate(a.body))
			continue
		}
		if got := allowSet(a.header); !reflect.DeepEqual(got, r.allow) {
			t.Errorf("%s: Allow %q, want exactly %v", what, a.header.Values("Allow"), r.allow)
		}
		if r.method != "HEAD" {
			mustPlain(t, what, a, 405)
		}
	}
	// Nothing of it happened: the slow task alone is listed (not killed),
	// no task was created after it, the tile is still cached.
	if got := ids(listing(t, "/rest/seed.json")); !reflect.DeepEqual(got, []int64{slowID}) {
		t.Errorf("after the 405s the listing holds %v, want [%d]", got, slowID)
	}
	if a := rest(t, "GET", fmt.Sprintf("/rest/tasks/%d.json", slowID+1), "", ""); a.status != 404 {
		t.Errorf("a 405 created task %d: %d %s", slowID+1, a.status, a.body)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Errorf("after a 405 on masstruncate the tile is %s, want HIT", r)
	}

	// The allowed methods answer 200.
	ok := []row{
		{"GET", "/rest/seed/test:a.json", "", "", nil},
		{"GET", "/rest/seed/test:a.xml", "", "", nil},
		{"GET", "/rest/seed.json", "", "", nil},
		{"GET", "/rest/masstruncate", "", "", nil},
		{"POST", "/rest/seed/test:a", formCT, "kill_all=all", nil},
		{"POST", "/rest/seed", formCT, "kill_all=all", nil},
		{"POST", "/rest/seed/test:a.json", "application/json", tinySeedJ, nil},
		{"POST", "/rest/seed/test:a.xml", "text/xml", tinySeedX, nil},
		{"POST", "/rest/masstruncate", "text/xml", truncA, nil},
	}
	for _, r := range ok {
		if r.method == "POST" && strings.HasPrefix(r.path, "/rest/seed/test:a.") {
			e.f.set("", 0)
		}
		if a := e.rest(r.method, r.path, r.ct, r.body); a.status != 200 {
			t.Errorf("%s %s: status %d, want 200 (body %q)", r.method, r.path, a.status, truncate(a.body))
		}
	}
}

// Authentication: without the right credentials
// nothing is answered or done; tiles stay public on the same site.
func TestRESTAuth(t *testing.T) {
	e := newREST(t, "workers 1", "")
	// Tiles are public.
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Fatalf("public tile: %s", r)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Fatalf("public tile again: %s", r)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	bad := map[string][]string{
		"no credentials":     nil,
		"wrong password":     {"Authorization", "Basic " + b64(adminUser+":wrong")},
		"empty password":     {"Authorization", "Basic " + b64(adminUser+":")},
		"unknown user":       {"Authorization", "Basic " + b64("nobody:"+adminPass)},
		"no colon":           {"Authorization", "Basic " + b64(adminUser+adminPass)},
		"not base64":         {"Authorization", "Basic !!!"},
		"bearer":             {"Authorization", "Bearer x"},
		"empty basic":        {"Authorization", "Basic "},
		"password only":      {"Authorization", "Basic " + b64(":"+adminPass)},
		"right, wrong case":  {"Authorization", "Basic " + b64("ADMIN:"+adminPass)},
		"right, wrong caseP": {"Authorization", "Basic " + b64(adminUser+":GEOSERVER")},
	}
	try := func(what, method, path, ct, body string) {
		t.Helper()
		for name, hdr := range bad {
			h := append([]string(nil), hdr...)
			if ct != "" {
				h = append(h, "Content-Type", ct)
			}
			a := rawREST(t, method, path, body, h...)
			if a.status != 401 {
				t.Errorf("%s, %s: status %d, want 401 (body %q)", what, name, a.status, truncate(a.body))
				continue
			}
			if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("%s, %s: WWW-Authenticate %q", what, name, a.header.Get("WWW-Authenticate"))
			}
			if strings.Contains(string(a.body), "long-array") || strings.Contains(string(a.body), "massTruncate") {
				t.Errorf("%s, %s: 401 body gives the resource away: %q", what, name, a.body)
			}
		}
	}
	try("GET listing", "GET", "/rest/seed.json", "", "")
	try("GET layer listing", "GET", "/rest/seed/test:a.json", "", "")
	try("GET masstruncate", "GET", "/rest/masstruncate", "", "")
	try("POST json seed", "POST", "/rest/seed/test:a.json", "application/json", tinySeedJ)
	try("POST xml seed", "POST", "/rest/seed/test:a.xml", "text/xml", tinySeedX)
	try("PUT (405 with auth)", "PUT", "/rest/seed.json", "", "")
	try("GET task", "GET", "/rest/tasks/1.json", "", "")
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("unauthenticated seed POSTs created tasks: %v", got)
	}
	if a := rest(t, "GET", "/rest/tasks/1.json", "", ""); a.status != 404 {
		t.Errorf("unauthenticated seed POSTs created task 1: %d %s", a.status, a.body)
	}
	if n := e.f.getMaps.Load(); n != 1 {
		t.Errorf("unauthenticated seed POSTs made %d GetMaps", n-1)
	}
	// A running task survives unauthenticated kills; the layer survives
	// unauthenticated mass truncation.
	e.f.set("", 300*time.Millisecond)
	slow := e.slowTask("test:a")
	try("POST kill", "POST", "/rest/seed", formCT, "kill_all=all")
	try("POST layer kill", "POST", "/rest/seed/test:a", formCT, "kill_all=all")
	try("POST kill (query)", "POST", "/rest/seed?kill_all=all", "", "")
	try("POST masstruncate", "POST", "/rest/masstruncate", "text/xml", truncA)
	if got := ids(listing(t, "/rest/seed.json")); !reflect.DeepEqual(got, []int64{taskID(t, slow)}) {
		t.Errorf("after unauthenticated kills the listing is %v", got)
	}
	if st := e.task(slow).Status; st != 1 {
		t.Errorf("after unauthenticated kills the task's status is %d", st)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Errorf("after an unauthenticated mass truncate the tile is %s", r)
	}
	// The right credentials work.
	for _, p := range []string{"/rest/seed.json", "/rest/seed/test:a.json", "/rest/masstruncate"} {
		if a := rest(t, "GET", p, "", ""); a.status != 200 {
			t.Errorf("GET %s with credentials: %d %q", p, a.status, a.body)
		}
	}
	if a := e.kill("", "all"); a.status != 200 {
		t.Errorf("kill with credentials: %d", a.status)
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("after an authenticated kill: %v", got)
	}
}

// Paths: <layer> is URL-decoded; the last .json/.xml is the
// format; an unknown layer in any path is 404 text/plain.
func TestRESTLayerPaths(t *testing.T) {
	e := newREST(t, "workers 2", "")
	for _, c := range []struct{ path, ext, layer string }{
		{"test%3Aa", "json", "test:a"},
		{"test%3aa", "xml", "test:a"},
		{"test:mock.layer.name", "json", "test:mock.layer.name"},
		{"test:mock.layer.name", "xml", "test:mock.layer.name"},
		{"test%3Amock.layer.name", "json", "test:mock.layer.name"},
		{"test%3Amock%2Elayer%2Ename", "xml", "test:mock.layer.name"},
	} {
		body := tinySeedJ
		if c.ext == "xml" {
			body = tinySeedX
		}
		p := e.submit(c.path, c.ext, body)
		if ti := e.task(p); ti.Layer != c.layer || ti.Total != 2 {
			t.Errorf("POST /rest/seed/%s.%s: task of layer %q (%d tiles), want %q", c.path, c.ext, ti.Layer, ti.Total, c.layer)
		}
		waitTask(t, p)
	}
	for _, p := range []string{
		"/rest/seed/test%3Aa.json", "/rest/seed/test:mock.layer.name.json", "/rest/seed/test%3Amock.layer.name.json",
	} {
		listing(t, p)
	}
	for _, p := range []string{"/rest/seed/test:mock.layer.name.xml", "/rest/seed/test%3Amock.layer.name.xml"} {
		a := rest(t, "GET", p, "", "")
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/xml") ||
			strings.TrimSpace(string(a.body)) != "<long-array-array></long-array-array>" {
			t.Errorf("GET %s: %d %q %q", p, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	for _, p := range []string{"/rest/seed/test:mock.layer.name", "/rest/seed/test%3Amock.layer.name", "/rest/seed/test%3Aa"} {
		mustKillPage(t, e.rest("POST", p, formCT, "kill_all=all"))
	}

	// Unknown layers, whatever the resource.
	// The last .json is the format: a layer "test:mock.layer.name.json"
	// does not exist.
	mustPlain(t, "GET test:mock.layer.name.json.json", e.rest("GET", "/rest/seed/test:mock.layer.name.json.json", "", ""), 404)
	mustPlain(t, "POST test:mock.layer.name.json.xml", e.rest("POST", "/rest/seed/test:mock.layer.name.json.xml", "text/xml", tinySeedX), 404)
	for _, layer := range []string{"nope:x", "nope%3Ax", "test:mock.layer", "test:b", "test:A", "test:a%20", "a%0Ab", "a%0D%0Ab"} {
		for _, c := range []struct{ method, path, ct, body string }{
			{"GET", "/rest/seed/" + layer + ".json", "", ""},
			{"GET", "/rest/seed/" + layer + ".xml", "", ""},
			{"POST", "/rest/seed/" + layer + ".json", "application/json", tinySeedJ},
			{"POST", "/rest/seed/" + layer + ".xml", "text/xml", tinySeedX},
			{"POST", "/rest/seed/" + layer, formCT, "kill_all=all"},
		} {
			mustPlain(t, c.method+" "+c.path, e.rest(c.method, c.path, c.ct, c.body), 404)
		}
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("unknown-layer requests left tasks: %v", got)
	}
}

// Seed request: the XML form, GWC's JSON form with its
// variants, the extension choosing the parser, the layer from the URL.
// Every request below asks the same thing.
func TestRESTSeedRequestForms(t *testing.T) {
	e := newREST(t, "workers 2", "")
	const xmlFull = `<?xml version="1.0" encoding="UTF-8"?>
<seedRequest>
  <name>test:mock.layer.name</name>
  <bounds><coords><double>-180.0</double><double>-90.0</double><double>0.0</double><double>90.0</double></coords></bounds>
  <gridSetId>EPSG:4326</gridSetId>
  <zoomStart>1</zoomStart>
  <zoomStop>2</zoomStop>
  <format>image/jpeg</format>
  <type>reseed</type>
  <threadCount>2</threadCount>
  <parameters>
    <entry><string>STYLES</string><string>population</string></entry>
  </parameters>
  <someFutureField>ignored</someFutureField>
</seedRequest>`
	const jsonHead = `{"seedRequest":{"name":"nope:x","bounds":{"coords":{"double":[-180,-90,0,90]}},"gridSetId":"EPSG:4326","zoomStart":1,"zoomStop":2,"format":"image/jpeg","type":"reseed","threadCount":2,`
	bodies := []struct{ what, ext, ct, body string }{
		{"XML", "xml", "text/xml", xmlFull},
		{"XML as application/xml", "xml", "application/xml", xmlFull},
		{"XML sent as JSON", "xml", "application/json", xmlFull},
		{"XML without Content-Type", "xml", "", xmlFull},
		{"JSON, entry array", "json", "application/json", jsonHead + `"parameters":{"entry":[{"string":["STYLES","population"]}]}}}`},
		{"JSON sent as XML", "json", "text/xml", jsonHead + `"parameters":{"entry":[{"string":["STYLES","population"]}]}}}`},
		{"JSON without Content-Type", "json", "", jsonHead + `"parameters":{"entry":[{"string":["STYLES","population"]}]}}}`},
		{"JSON, single entry", "json", "application/json", jsonHead + `"parameters":{"entry":{"string":["STYLES","population"]}}}}`},
		{"JSON, plain map", "json", "application/json", jsonHead + `"parameters":{"STYLES":"population"}}}`},
		{"JSON, numbers as strings", "json", "application/json", `{"seedRequest":{"name":"test:a","bounds":{"coords":{"double":["-180.0","-90.0","0","90.0"]}},"gridSetId":"EPSG:4326","zoomStart":"1","zoomStop":"2","format":"image\/jpeg","type":"reseed","threadCount":"2","parameters":{"entry":[{"string":["STYLES","population"]}]}}}`},
	}
	// Levels 1..2 of the west half: 2×2 + 4×4 tiles.
	want := restTask{Layer: "test:a", Type: "RESEED", Gridset: "EPSG:4326", Format: "image/jpeg",
		Parameters: [][2]string{{"STYLES", "population"}}, ZoomStart: 1, ZoomStop: 2,
		Bounds: [4]float64{-180, -90, 0, 90}, Threads: 2, Total: 20}
	var last string
	for _, b := range bodies {
		a := e.rest("POST", "/rest/seed/test:a."+b.ext, b.ct, b.body)
		if a.status != 200 || len(a.body) != 0 || a.header.Get("Location") == "" {
			t.Errorf("%s: %d %q, Location %q", b.what, a.status, a.body, a.header.Get("Location"))
			continue
		}
		last = strings.TrimPrefix(a.header.Get("Location"), restURL(""))
		got := e.task(last)
		// Compare what the request decided; progress and times vary.
		got.ID, got.State, got.Status, got.Processed, got.Remaining = 0, "", 0, 0, 0
		got.FailedTiles, got.Failures, got.LastError, got.Reason, got.TilesPerSec = 0, 0, "", "", 0
		got.Created, got.Started, got.Finished = time.Time{}, nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: task\n %+v, want\n %+v", b.what, got, want)
		}
		waitTask(t, last)
	}
	// srs instead of gridSetId, in both forms.
	for _, c := range []struct{ ext, body string }{
		{"xml", `<seedRequest><srs><number>900913</number></srs><zoomStart>0</zoomStart><zoomStop>1</zoomStop></seedRequest>`},
		{"json", `{"seedRequest":{"srs":{"number":3857},"zoomStart":0,"zoomStop":1}}`},
		{"json", `{"seedRequest":{"srs":{"number":"102100"},"zoomStart":0,"zoomStop":1}}`},
	} {
		p := e.submit("test:a", c.ext, c.body)
		if ti := e.task(p); ti.Gridset != "EPSG:900913" || ti.Total != 5 {
			t.Errorf("%s: gridset %s, %d tiles; want EPSG:900913, 5", c.body, ti.Gridset, ti.Total)
		}
	}
	// The parameters went through the layer's filter as a tile request's
	// do: the seeded tiles are the ones requests for that style hit.
	if last == "" {
		t.FailNow()
	}
	for _, idx := range []gridset.Index{{X: 0, Y: 0, Z: 1}, {X: 1, Y: 1, Z: 1}, {X: 3, Y: 3, Z: 2}} {
		if r := tileResult(t, "test:a", "EPSG:4326", idx.X, idx.Y, idx.Z, "STYLES", "population", "FORMAT", "image/jpeg"); r != "HIT" {
			t.Errorf("seeded tile %v (population, jpeg) is %s, want HIT", idx, r)
		}
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1, "FORMAT", "image/jpeg"); r != "MISS" {
		t.Errorf("a tile of the default style was %s, but only population was seeded", r)
	}
	// (Level 2 has two 4×4 metatiles: the east one was not seeded.)
	if r := tileResult(t, "test:a", "EPSG:4326", 4, 0, 2, "STYLES", "population", "FORMAT", "image/jpeg"); r != "MISS" {
		t.Errorf("a tile east of the bounds was %s, but only the west was seeded", r)
	}
}

// Defaults: type, threadCount (clamped), format, gridset,
// bounds (the layer's coverage).
func TestRESTSeedDefaults(t *testing.T) {
	e := newREST(t, "workers 3", `
		layer test:d {
			gridsets EPSG:900913 EPSG:4326
			formats image/jpeg image/png
			extent 10 10 80 40
		}`)
	// In EPSG:900913 the extent is one tile per level 0..2; in EPSG:4326
	// 1, 1 and 2 tiles. Without the extent it would be 21 and 42.
	check := func(body string, want restTask) {
		t.Helper()
		p := e.submit("test:d", "json", body)
		got := e.task(p)
		if got.Type != want.Type || got.Threads != want.Threads || got.Format != want.Format ||
			got.Gridset != want.Gridset || got.Total != want.Total || got.ZoomStart != 0 || got.ZoomStop != 2 {
			t.Errorf("%s:\n got  type %s, threads %d, format %s, gridset %s, %d tiles\n want type %s, threads %d, format %s, gridset %s, %d tiles",
				body, got.Type, got.Threads, got.Format, got.Gridset, got.Total,
				want.Type, want.Threads, want.Format, want.Gridset, want.Total)
		}
		waitTask(t, p)
	}
	def := restTask{Type: "SEED", Threads: 1, Format: "image/jpeg", Gridset: "EPSG:900913", Total: 3}
	with := func(f func(*restTask)) restTask { r := def; f(&r); return r }
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2}}`, def)
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"threadCount":0}}`, def)
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"threadCount":-4}}`, def)
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"threadCount":2}}`, with(func(r *restTask) { r.Threads = 2 }))
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"threadCount":3}}`, with(func(r *restTask) { r.Threads = 3 }))
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"threadCount":99}}`, with(func(r *restTask) { r.Threads = 3 }))
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"type":"truncate","threadCount":3}}`, with(func(r *restTask) { r.Type = "TRUNCATE" }))
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"type":"reseed"}}`, with(func(r *restTask) { r.Type = "RESEED" }))
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/png"}}`, with(func(r *restTask) { r.Format = "image/png" }))
	in4326 := with(func(r *restTask) { r.Gridset, r.Total = "EPSG:4326", 4 })
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"gridSetId":"EPSG:4326"}}`, in4326)
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"srs":{"number":4326}}}`, in4326)
	for _, srs := range []int{900913, 3857, 102113, 102100} {
		check(fmt.Sprintf(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"srs":{"number":%d}}}`, srs), def)
	}
	// gridSetId wins over srs.
	check(`{"seedRequest":{"zoomStart":0,"zoomStop":2,"gridSetId":"EPSG:4326","srs":{"number":900913}}}`, in4326)
}

// Bounds: minx, miny, maxx, maxy in the gridset's units.
func TestRESTSeedBoundsOrder(t *testing.T) {
	e := newREST(t, "workers 2", "")
	// In EPSG:4326, level 2 has 45° tiles: lon -170..-100 is columns 0..1,
	// lat -80..10 rows 0..2 (6 tiles); level 3 has 22.5° tiles: columns
	// 0..3, rows 0..4 (20 tiles). Read in any other order it is not 26.
	for i, c := range []struct{ ext, body string }{
		{"json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":2,"zoomStop":3,"bounds":{"coords":{"double":[-170,-80,-100,10]}}}}`},
		{"xml", `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>2</zoomStart><zoomStop>3</zoomStop><bounds><coords><double>-170</double><double>-80</double><double>-100</double><double>10</double></coords></bounds></seedRequest>`},
	} {
		p := e.submit("test:a", c.ext, c.body)
		ti := waitTask(t, p)
		full := e.task(p)
		if ti.Total != 26 || ti.Processed != 26 || full.Bounds != [4]float64{-170, -80, -100, 10} {
			t.Errorf("%s: %d tiles (%d processed), bounds %v; want 26 in [-170 -80 -100 10]", c.ext, ti.Total, ti.Processed, full.Bounds)
		}
		// The first fetched one 4×4 metatile on level 2 and two on level 3
		// (rows 0..3 and 4..7 of columns 0..3); the second, none.
		if n := e.f.getMaps.Load(); i == 0 && n != 3 || i == 1 && n != 3 {
			t.Errorf("after the %s request: %d GetMaps, want 3", c.ext, n)
		}
	}
	// Exactly those metatiles are cached: one tile of each metatile of
	// levels 2 and 3 (a miss fetches the whole metatile, so one only).
	for _, c := range []struct {
		x, y int64
		z    int
		want string
	}{
		{1, 1, 2, "HIT"}, {4, 0, 2, "MISS"},
		{0, 0, 3, "HIT"}, {3, 4, 3, "HIT"}, {4, 0, 3, "MISS"}, {4, 4, 3, "MISS"}, {8, 0, 3, "MISS"}, {12, 4, 3, "MISS"},
	} {
		if r := tileResult(t, "test:a", "EPSG:4326", c.x, c.y, c.z); r != c.want {
			t.Errorf("tile %d/%d/%d is %s, want %s", c.z, c.x, c.y, r, c.want)
		}
	}
}

// An srs matching two of the layer's gridsets is ambiguous.
func TestRESTSeedSRSAmbiguity(t *testing.T) {
	e := newREST(t, "workers 2", `
		gridset My4326 {
			srs EPSG:4326
			extent -180 -90 180 90
			resolutions 0.703125 0.3515625 0.17578125
		}
		layer test:amb {
			gridsets EPSG:4326 My4326
		}`)
	for _, srs := range []string{"4326", `"4326"`} {
		mustPlain(t, "srs "+srs, e.rest("POST", "/rest/seed/test:amb.json", "application/json",
			`{"seedRequest":{"srs":{"number":`+srs+`},"zoomStart":0,"zoomStop":1}}`), 400)
	}
	mustPlain(t, "srs 4326 (xml)", e.rest("POST", "/rest/seed/test:amb.xml", "text/xml",
		`<seedRequest><srs><number>4326</number></srs><zoomStart>0</zoomStart><zoomStop>1</zoomStop></seedRequest>`), 400)
	mustPlain(t, "srs 900913", e.rest("POST", "/rest/seed/test:amb.json", "application/json",
		`{"seedRequest":{"srs":{"number":900913},"zoomStart":0,"zoomStop":1}}`), 400)
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("rejected requests left tasks: %v", got)
	}
	for body, gs := range map[string]string{
		`{"seedRequest":{"gridSetId":"My4326","zoomStart":0,"zoomStop":2}}`:    "My4326",
		`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2}}`: "EPSG:4326",
		`{"seedRequest":{"zoomStart":0,"zoomStop":2}}`:                         "EPSG:4326",
	} {
		if ti := e.task(e.submit("test:amb", "json", body)); ti.Gridset != gs || ti.Total != 2+8+32 {
			t.Errorf("%s: gridset %s, %d tiles; want %s, 42", body, ti.Gridset, ti.Total, gs)
		}
	}
}

// Every bad seed request is a 400 with one line of
// text/plain, and creates nothing.
func TestRESTSeedBadRequests(t *testing.T) {
	e := newREST(t, "workers 2", "")
	j := func(fields string) string { return `{"seedRequest":{` + fields + `}}` }
	x := func(fields string) string { return `<seedRequest>` + fields + `</seedRequest>` }
	const zj = `"zoomStart":0,"zoomStop":1`
	const zx = `<zoomStart>0</zoomStart><zoomStop>1</zoomStop>`
	bounds := func(c string) string { return `"bounds":{"coords":{"double":[` + c + `]}},` + zj }
	xbounds := func(c ...string) string {
		s := "<bounds><coords>"
		for _, v := range c {
			s += "<double>" + v + "</double>"
		}
		return s + "</coords></bounds>" + zx
	}
	cases := []struct{ what, layer, ext, body string }{
		{"malformed XML", "test:a", "xml", `<seedRequest><zoomStart>0</zoomStart>`},
		{"not XML", "test:a", "xml", `zoomStart=0&zoomStop=1`},
		{"JSON to .xml", "test:a", "xml", j(zj)},
		{"malformed JSON", "test:a", "json", `{"seedRequest":`},
		{"not JSON", "test:a", "json", x(zx)},
		{"JSON array", "test:a", "json", `[` + j(zj) + `]`},
		{"JSON null", "test:a", "json", `null`},
		{"JSON seedRequest null", "test:a", "json", `{"seedRequest":null}`},
		{"JSON seedRequest array", "test:a", "json", `{"seedRequest":[]}`},
		{"XML wrong root", "test:a", "xml", `<seedTask>` + zx + `</seedTask>`},
		{"JSON wrong root", "test:a", "json", `{"seedTask":{` + zj + `}}`},
		{"XML empty body", "test:a", "xml", ``},
		{"JSON empty body", "test:a", "json", ``},
		{"XML blank body", "test:a", "xml", " \n\t"},
		{"JSON blank body", "test:a", "json", " \n\t"},
		{"XML empty root", "test:a", "xml", `<seedRequest/>`},
		{"JSON empty object", "test:a", "json", `{"seedRequest":{}}`},
		{"no zoomStart", "test:a", "json", j(`"zoomStop":1`)},
		{"no zoomStop", "test:a", "json", j(`"zoomStart":0`)},
		{"no zoomStart (xml)", "test:a", "xml", x(`<zoomStop>1</zoomStop>`)},
		{"no zoomStop (xml)", "test:a", "xml", x(`<zoomStart>0</zoomStart>`)},
		{"zoom not a number", "test:a", "json", j(`"zoomStart":"zero","zoomStop":1`)},
		{"zoom not an integer", "test:a", "json", j(`"zoomStart":0.5,"zoomStop":1`)},
		{"zoom boolean", "test:a", "json", j(`"zoomStart":true,"zoomStop":1`)},
		{"zoom not a number (xml)", "test:a", "xml", x(`<zoomStart>zero</zoomStart><zoomStop>1</zoomStop>`)},
		{"zoomStart > zoomStop", "test:a", "json", j(`"zoomStart":3,"zoomStop":2`)},
		{"zoomStart > zoomStop (xml)", "test:a", "xml", x(`<zoomStart>3</zoomStart><zoomStop>2</zoomStop>`)},
		{"zoomStart < 0", "test:a", "json", j(`"zoomStart":-1,"zoomStop":1`)},
		{"zoomStop past the gridset", "test:a", "json", j(`"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":22`)},
		{"zoomStop past the gridset (900913)", "test:a", "json", j(`"gridSetId":"EPSG:900913","zoomStart":31,"zoomStop":31`)},
		{"unknown type", "test:a", "json", j(zj + `,"type":"purge"`)},
		{"empty type", "test:a", "json", j(zj + `,"type":""`)},
		{"unknown type (xml)", "test:a", "xml", x(zx + `<type>purge</type>`)},
		{"threadCount not a number", "test:a", "json", j(zj + `,"threadCount":"many"`)},
		{"format not served", "test:a", "json", j(zj + `,"format":"image/gif"`)},
		{"format not an image", "test:a", "json", j(zj + `,"format":"text/html"`)},
		{"format not served (xml)", "test:mock.layer.name", "xml", x(zx + `<format>image/webp</format>`)},
		{"unknown gridset", "test:a", "json", j(zj + `,"gridSetId":"EPSG:9999"`)},
		{"gridset not on the layer", "test:mock.layer.name", "json", j(zj + `,"gridSetId":"EPSG:900913"`)},
		{"unknown gridset (xml)", "test:a", "xml", x(zx + `<gridSetId>GoogleMapsCompatible</gridSetId>`)},
		{"unknown srs", "test:a", "json", j(zj + `,"srs":{"number":2056}`)},
		{"srs not on the layer", "test:mock.layer.name", "json", j(zj + `,"srs":{"number":3857}`)},
		{"srs not a number", "test:a", "json", j(zj + `,"srs":{"number":"EPSG:4326"}`)},
		{"srs without number", "test:a", "json", j(zj + `,"srs":{}`)},
		{"unknown srs (xml)", "test:a", "xml", x(zx + `<srs><number>2056</number></srs>`)},
		{"3 bounds", "test:a", "json", j(bounds(`-10,-10,10`))},
		{"5 bounds", "test:a", "json", j(bounds(`-10,-10,10,10,10`))},
		{"no bounds", "test:a", "json", j(bounds(``))},
		{"bounds not numbers", "test:a", "json", j(bounds(`"a","b","c","d"`))},
		{"bounds NaN", "test:a", "json", j(bounds(`"NaN",-10,10,10`))},
		{"bounds Infinity", "test:a", "json", j(bounds(`-10,-10,"Infinity",10`))},
		{"bounds -Inf", "test:a", "json", j(bounds(`"-Inf",-10,10,10`))},
		{"bounds minx > maxx", "test:a", "json", j(bounds(`10,-10,-10,10`))},
		{"bounds miny > maxy", "test:a", "json", j(bounds(`-10,10,10,-10`))},
		{"bounds minx = maxx", "test:a", "json", j(bounds(`10,-10,10,10`))},
		{"bounds not an object", "test:a", "json", j(`"bounds":"-10,-10,10,10",` + zj)},
		{"3 bounds (xml)", "test:a", "xml", x(xbounds("-10", "-10", "10"))},
		{"bounds not numbers (xml)", "test:a", "xml", x(xbounds("-10", "-10", "10", "ten"))},
		{"bounds NaN (xml)", "test:a", "xml", x(xbounds("NaN", "-10", "10", "10"))},
		{"bounds min > max (xml)", "test:a", "xml", x(xbounds("10", "10", "-10", "-10"))},
		{"parameter without a filter", "test:a", "json", j(zj + `,"parameters":{"entry":[{"string":["CQL_FILTER","pop > 1"]}]}`)},
		{"parameter without a filter (map)", "test:a", "json", j(zj + `,"parameters":{"CQL_FILTER":"pop > 1"}`)},
		{"parameter without a filter (xml)", "test:a", "xml", x(zx + `<parameters><entry><string>CQL_FILTER</string><string>x</string></entry></parameters>`)},
		{"parameter on a layer without filters", "test:mock.layer.name", "json", j(zj + `,"parameters":{"STYLES":"population"}`)},
		{"value the filter rejects", "test:a", "json", j(zj + `,"parameters":{"entry":{"string":["STYLES","bogus"]}}`)},
		{"value the filter rejects (xml)", "test:a", "xml", x(zx + `<parameters><entry><string>STYLES</string><string>bogus</string></entry></parameters>`)},
		{"entry with one string", "test:a", "json", j(zj + `,"parameters":{"entry":[{"string":["STYLES"]}]}`)},
		{"entry with one string (xml)", "test:a", "xml", x(zx + `<parameters><entry><string>STYLES</string></entry></parameters>`)},
		{"DOCTYPE", "test:a", "xml", `<?xml version="1.0"?><!DOCTYPE seedRequest>` + x(zx)},
		{"DOCTYPE with entities", "test:a", "xml", `<?xml version="1.0"?><!DOCTYPE seedRequest [<!ENTITY z "0">]><seedRequest><zoomStart>&z;</zoomStart><zoomStop>1</zoomStop></seedRequest>`},
	}
	for _, c := range cases {
		a := e.rest("POST", "/rest/seed/"+c.layer+"."+c.ext, "", c.body)
		mustPlain(t, c.what, a, 400)
		if a.header.Get("Location") != "" {
			t.Errorf("%s: a 400 with Location %q", c.what, a.header.Get("Location"))
		}
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("rejected requests left tasks: %v", got)
	}
	if a := rest(t, "GET", "/rest/tasks/1.json", "", ""); a.status != 404 {
		t.Errorf("rejected requests created task 1: %d %s", a.status, a.body)
	}
	if n := e.f.getMaps.Load(); n != 0 {
		t.Errorf("rejected requests made %d GetMaps", n)
	}
	// The same requests without the mistake are accepted (so that the
	// 400s above are about the mistake, not the rest of the request).
	for _, c := range []struct{ layer, ext, body string }{
		{"test:a", "json", j(zj + `,"parameters":{"STYLES":"population"},"format":"image/jpeg","srs":{"number":4326},"type":"truncate"`)},
		{"test:a", "xml", x(xbounds("-10", "-10", "10", "10") + `<gridSetId>EPSG:900913</gridSetId><type>truncate</type>`)},
		{"test:a", "json", j(`"gridSetId":"EPSG:4326","zoomStart":21,"zoomStop":21,"type":"truncate","bounds":{"coords":{"double":[0,0,0.001,0.001]}}`)},
	} {
		waitTask(t, e.submit(c.layer, c.ext, c.body))
	}
}

// A body over max_body (8 MiB by default) is 413; 8 MiB exactly is fine.
func TestRESTBodyLimit(t *testing.T) {
	e := newREST(t, "workers 2", "")
	const limit = 8 << 20 // max_body's default
	pad := func(head, tail string, size int) string {
		return head + strings.Repeat(" ", size-len(head)-len(tail)) + tail
	}
	xHead := `<seedRequest><gridSetId>EPSG:4326</gridSetId><zoomStart>0</zoomStart><zoomStop>0</zoomStop><!--`
	for _, c := range []struct{ ext, head, tail string }{
		{"xml", xHead, `--></seedRequest>`},
		{"json", tinySeedJ, ``},
	} {
		body := pad(c.head, c.tail, limit)
		a := e.rest("POST", "/rest/seed/test:a."+c.ext, "", body)
		if a.status != 200 {
			t.Errorf("%s of exactly 8 MiB: %d %q", c.ext, a.status, truncate(a.body))
		}
		body = pad(c.head, c.tail, limit+1)
		mustPlain(t, c.ext+" over 8 MiB", e.rest("POST", "/rest/seed/test:a."+c.ext, "", body), 413)
		mustPlain(t, c.ext+" of 16 MiB", e.rest("POST", "/rest/seed/test:a."+c.ext, "", pad(c.head, c.tail, 2*limit)), 413)
	}
	mustPlain(t, "mass truncate over 8 MiB", e.rest("POST", "/rest/masstruncate", "text/xml",
		pad(`<truncateLayer><layerName>test:a</layerName><!--`, `--></truncateLayer>`, limit+1)), 413)
	mustPlain(t, "kill form over 8 MiB", e.rest("POST", "/rest/seed", formCT, pad("kill_all=all&x=", "", limit+1)), 413)
}

// Success is 200 with an empty body and a Location naming
// the task's own resource, which answers JSON.
func TestRESTSeedSuccessLocation(t *testing.T) {
	e := newREST(t, "workers 2", "")
	var prev int64
	for i, c := range []struct{ layer, ext, body string }{
		{"test:a", "json", tinySeedJ},
		{"test:a", "xml", tinySeedX},
		{"test:mock.layer.name", "json", tinySeedJ},
	} {
		a := e.rest("POST", "/rest/seed/"+c.layer+"."+c.ext, "", c.body)
		if a.status != 200 || len(a.body) != 0 {
			t.Fatalf("%d: %d %q", i, a.status, a.body)
		}
		loc := a.header.Get("Location")
		if !strings.HasPrefix(loc, "http://localhost:9080/geowebcache/rest/tasks/") {
			t.Fatalf("%d: Location %q", i, loc)
		}
		g := get(t, loc, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass)))
		if g.status != 200 || !strings.HasPrefix(g.header.Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d %q %q", loc, g.status, g.header.Get("Content-Type"), g.body)
		}
		var ti restTask
		if err := json.Unmarshal(g.body, &ti); err != nil {
			t.Fatalf("GET %s: %v %s", loc, err, g.body)
		}
		id := taskID(t, strings.TrimPrefix(loc, restURL("")))
		if ti.ID != id || id <= prev || ti.Layer != c.layer || ti.Total != 2 {
			t.Errorf("%d: %s is %+v (previous id %d)", i, loc, ti, prev)
		}
		prev = id
	}
	// The task resource is as protected as the rest.
	if a := rawREST(t, "GET", "/rest/tasks/1.json", ""); a.status != 401 {
		t.Errorf("task resource without credentials: %d", a.status)
	}
	mustPlain(t, "unknown task", rest(t, "GET", "/rest/tasks/999999.json", "", ""), 404)
}

// The task listing: its shape, order, states
// and scope, in JSON and XML.
func TestRESTListing(t *testing.T) {
	e := newREST(t, "workers 1", "")
	for _, p := range []string{"/rest/seed.json", "/rest/seed/test:a.json", "/rest/seed/test:mock.layer.name.json"} {
		a := rest(t, "GET", p, "", "")
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") ||
			strings.TrimSuffix(string(a.body), "\n") != `{"long-array-array":[]}` {
			t.Errorf("empty GET %s: %d %q %q", p, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	a := rest(t, "GET", "/rest/seed/test:a.xml", "", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/xml") ||
		strings.TrimSpace(string(a.body)) != "<long-array-array></long-array-array>" {
		t.Errorf("empty XML listing: %d %q %q", a.status, a.header.Get("Content-Type"), a.body)
	}

	// One worker: the first task runs, the others wait.
	e.f.set("", 300*time.Millisecond)
	run := e.slowTask("test:a")
	pendA := e.slowTask("test:a")
	pendM := e.submit("test:mock.layer.name", "json", `{"seedRequest":{"zoomStart":0,"zoomStop":2}}`)
	idR, idA, idM := taskID(t, run), taskID(t, pendA), taskID(t, pendM)
	if !(0 < idR && idR < idA && idA < idM) {
		t.Fatalf("task ids %d, %d, %d are not positive and increasing", idR, idA, idM)
	}
	all := listing(t, "/rest/seed.json")
	if len(all) != 3 || !reflect.DeepEqual(ids(all), []int64{idR, idA, idM}) {
		t.Fatalf("listing %v, want tasks %d, %d, %d in that order", all, idR, idA, idM)
	}
	r := all[0]
	if r[1] != slowTotal || r[0] < 0 || r[0] > r[1] || r[0]+r[2] != r[1] || r[4] != 1 {
		t.Errorf("running task's record %v, want [p, %d, %d-p, %d, 1]", r, slowTotal, slowTotal, idR)
	}
	if want := [5]int64{0, slowTotal, slowTotal, idA, 0}; all[1] != want {
		t.Errorf("pending task's record %v, want %v", all[1], want)
	}
	if want := [5]int64{0, 42, 42, idM, 0}; all[2] != want {
		t.Errorf("pending task's record %v, want %v", all[2], want)
	}
	// Per layer: that layer's tasks only.
	if got := listing(t, "/rest/seed/test:a.json"); !reflect.DeepEqual(ids(got), []int64{idR, idA}) {
		t.Errorf("test:a listing %v", got)
	}
	if got := listing(t, "/rest/seed/test:mock.layer.name.json"); !reflect.DeepEqual(got, [][5]int64{{0, 42, 42, idM, 0}}) {
		t.Errorf("test:mock.layer.name listing %v", got)
	}
	a = rest(t, "GET", "/rest/seed/test:mock.layer.name.xml", "", "")
	want := fmt.Sprintf("<long-array-array><long-array><long>0</long><long>42</long><long>42</long><long>%d</long><long>0</long></long-array></long-array-array>", idM)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/xml") || strings.TrimSpace(string(a.body)) != want {
		t.Errorf("XML listing: %d %q\n%s\nwant\n%s", a.status, a.header.Get("Content-Type"), a.body, want)
	}
	var x struct {
		XMLName xml.Name `xml:"long-array-array"`
		Arrays  []struct {
			Longs []int64 `xml:"long"`
		} `xml:"long-array"`
	}
	a = rest(t, "GET", "/rest/seed/test:a.xml", "", "")
	if err := xml.Unmarshal(a.body, &x); err != nil || len(x.Arrays) != 2 || len(x.Arrays[0].Longs) != 5 ||
		x.Arrays[0].Longs[3] != idR || x.Arrays[1].Longs[3] != idA || x.Arrays[1].Longs[4] != 0 {
		t.Errorf("test:a XML listing %q (%v)", a.body, err)
	}
	// Processing shows while running: processed grows, remaining shrinks.
	waitFor(t, "making progress", func() bool { return listing(t, "/rest/seed/test:a.json")[0][0] > 0 })
	r = listing(t, "/rest/seed/test:a.json")[0]
	if r[3] != idR || r[0]+r[2] != r[1] || r[0] > r[1] || r[4] != 1 {
		t.Errorf("running record %v", r)
	}

	// Finished tasks leave the listing: kill the slow ones, let the
	// small one run to DONE.
	e.kill("test:a", "all")
	e.f.set("", 0)
	if ti := waitTask(t, pendM); ti.Status != 2 || ti.Processed != 42 || ti.Remaining != 0 {
		t.Errorf("small task ended %+v", ti)
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("finished tasks still listed: %v", got)
	}
	// A later task gets a larger id.
	next := e.submit("test:a", "json", tinySeedJ)
	if id := taskID(t, next); id <= idM {
		t.Errorf("id %d after %d", id, idM)
	}
	if ti := waitTask(t, next); ti.Status != 2 {
		t.Errorf("tiny task %+v", ti)
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("finished task still listed: %v", got)
	}
}

// Every kill_all value, from a form or
// the query string.
func TestRESTKillValues(t *testing.T) {
	for _, c := range []struct {
		value, via    string
		running, pend bool // killed?
	}{
		{"running", "form", true, false},
		{"pending", "form", false, true},
		{"all", "form", true, true},
		{"1", "form", true, false},
		{"RUNNING", "form", true, false},
		{"All", "form", true, true},
		{"PenDing", "form", false, true},
		{"all", "query", true, true},
		{"running", "query", true, false},
		{"pending", "query", false, true},
		{"1", "query", true, false},
		{"all", "multipart", true, true},
		{"pending", "multipart", false, true},
	} {
		t.Run(c.value+"_"+c.via, func(t *testing.T) {
			e := newREST(t, "workers 1", "")
			e.f.set("", 300*time.Millisecond)
			run, pend := e.slowTask("test:a"), e.slowTask("test:a")
			idR, idP := taskID(t, run), taskID(t, pend)
			if got := listing(t, "/rest/seed.json"); len(got) != 2 || got[0][4] != 1 || got[1][4] != 0 {
				t.Fatalf("before: %v", got)
			}
			var a answer
			switch c.via {
			case "form":
				a = e.kill("", c.value)
			case "query":
				a = e.rest("POST", "/rest/seed?kill_all="+c.value, "", "")
			case "multipart": // curl -F kill_all=all
				ct, body := multipartForm("kill_all", c.value)
				a = e.rest("POST", "/rest/seed", ct, body)
			}
			page := mustKillPage(t, a)
			var left []int64
			for _, k := range []struct {
				id     int64
				path   string
				killed bool
			}{{idR, run, c.running}, {idP, pend, c.pend}} {
				ent, listed := page[k.id]
				if k.killed != listed {
					t.Errorf("task %d: killed %v, but the page lists it %v: %s", k.id, k.killed, listed, a.body)
				}
				if listed && (ent.layer != "test:a" || ent.typ != "SEED") {
					t.Errorf("task %d: page says %+v", k.id, ent)
				}
				if !k.killed {
					left = append(left, k.id)
				}
			}
			// Killed tasks leave the listing at once.
			if got := ids(listing(t, "/rest/seed.json")); !slices.Equal(got, left) {
				t.Errorf("after the kill the listing holds %v, want %v", got, left)
			}
			if c.pend {
				if ti := e.task(pend); ti.Status != -1 || ti.State != "ABORTED" {
					t.Errorf("killed pending task is %s (%d) at once, want ABORTED", ti.State, ti.Status)
				}
			}
			for _, k := range []struct {
				path   string
				killed bool
			}{{run, c.running}, {pend, c.pend}} {
				if k.killed {
					if ti := waitTask(t, k.path); ti.Status != -1 || ti.State != "ABORTED" {
						t.Errorf("killed task ended %s (%d), want ABORTED (-1)", ti.State, ti.Status)
					}
				} else if st := e.task(k.path).Status; st != 0 && st != 1 {
					t.Errorf("task that was not killed has status %d", st)
				}
			}
			if !c.running && c.pend {
				if st := e.task(run).Status; st != 1 {
					t.Errorf("running task not killed is now %d", st)
				}
			}
		})
	}
}

// DELETE on a task's resource kills that task and no other: 204, then 409
// once it has ended; 404 for an id never handed out. Both spellings of the
// resource work, with and without .json.
func TestRESTKillOneTask(t *testing.T) {
	e := newREST(t, "workers 1", "")
	e.f.set("", 300*time.Millisecond)
	// One worker: the first runs, the other two wait, all of one layer.
	run, pendA, pendB := e.slowTask("test:a"), e.slowTask("test:a"), e.slowTask("test:a")
	idR, idA, idB := taskID(t, run), taskID(t, pendA), taskID(t, pendB)
	if got := listing(t, "/rest/seed.json"); len(got) != 3 || got[0][4] != 1 || got[2][4] != 0 {
		t.Fatalf("before: %v", got)
	}
	// The second pending task only.
	if a := e.rest("DELETE", fmt.Sprintf("/rest/tasks/%d", idB), "", ""); a.status != 204 || len(a.body) != 0 {
		t.Fatalf("DELETE a pending task: %d %q, want 204 and no body", a.status, a.body)
	}
	if got := ids(listing(t, "/rest/seed.json")); !slices.Equal(got, []int64{idR, idA}) {
		t.Fatalf("after killing task %d the listing holds %v, want %v", idB, got, []int64{idR, idA})
	}
	if ti := e.task(pendB); ti.State != "ABORTED" || ti.Processed != 0 || ti.Reason != "killed" {
		t.Fatalf("killed pending task: %+v", ti)
	}
	// The running one, through the Location's spelling.
	if a := e.rest("DELETE", run, "", ""); a.status != 204 {
		t.Fatalf("DELETE the running task: %d %q", a.status, a.body)
	}
	if ti := waitTask(t, run); ti.State != "ABORTED" || ti.Processed >= ti.Total {
		t.Fatalf("killed running task: %+v", ti)
	}
	// The remaining one goes on: it now runs, and finishes.
	if ti := e.task(pendA); ti.State != "RUNNING" && ti.State != "PENDING" {
		t.Fatalf("the task nobody killed is %s", ti.State)
	}
	// Killing an ended task again: 409, and it stays as it was.
	for _, p := range []string{run, fmt.Sprintf("/rest/tasks/%d", idB)} {
		a := e.rest("DELETE", p, "", "")
		mustPlain(t, "DELETE "+p+" again", a, 409)
		if !strings.Contains(string(a.body), "already finished (ABORTED)") {
			t.Errorf("409 body %q", a.body)
		}
	}
	e.f.set("", 0)
	if ti := waitTask(t, pendA); ti.State != "DONE" || ti.Processed != ti.Total {
		t.Fatalf("the task nobody killed: %+v", ti)
	}
	a := e.rest("DELETE", pendA, "", "")
	mustPlain(t, "DELETE a DONE task", a, 409)
	if !strings.Contains(string(a.body), "(DONE)") {
		t.Errorf("409 body %q", a.body)
	}
	mustPlain(t, "DELETE an unknown task", e.rest("DELETE", "/rest/tasks/99999.json", "", ""), 404)
	// Only the task resource takes DELETE; the contract's resources stay 405.
	for _, p := range []string{"/rest/seed.json", "/rest/seed", "/rest/seed/test:a.json", "/rest/masstruncate"} {
		mustPlain(t, "DELETE "+p, e.rest("DELETE", p, "", ""), 405)
	}
	if a := e.rest("PUT", run, "", ""); a.status != 405 || a.header.Get("Allow") != "GET, DELETE" {
		t.Errorf("PUT on a task: %d, Allow %q", a.status, a.header.Get("Allow"))
	}
}

// A missing or unknown kill_all is a 400 and kills nothing.
func TestRESTKillBadValues(t *testing.T) {
	e := newREST(t, "workers 1", "")
	e.f.set("", 300*time.Millisecond)
	run, pend := e.slowTask("test:a"), e.slowTask("test:a")
	before := ids(listing(t, "/rest/seed.json"))
	for _, v := range []string{"bogus", "2", "0", "runningx", "all,pending", " all", "true"} {
		for _, via := range []string{"form", "query"} {
			var a answer
			if via == "form" {
				a = e.kill("", v)
			} else {
				a = e.rest("POST", "/rest/seed/test:a?kill_all="+strings.ReplaceAll(v, " ", "%20"), "", "")
			}
			mustPlain(t, "kill_all="+v, a, 400)
			want := "Unknown kill_all code: '" + v + "'. One of all|running|pending is expected."
			if got := strings.TrimSuffix(string(a.body), "\n"); got != want {
				t.Errorf("kill_all=%q (%s): body %q, want %q", v, via, got, want)
			}
		}
	}
	// Whatever the value, the answer is one line.
	for _, v := range []string{"x\ny", "x\r\ny", "\n"} {
		mustPlain(t, fmt.Sprintf("kill_all=%q", v), e.kill("", v), 400)
	}
	mpCT, mpBody := multipartForm("kill", "all")
	for what, c := range map[string]struct{ path, ct, body string }{
		"multipart without kill_all": {"/rest/seed", mpCT, mpBody},
		"no body":                    {"/rest/seed", "", ""},
		"empty form":                 {"/rest/seed", formCT, ""},
		"other field":                {"/rest/seed", formCT, "kill=all"},
		"other query field":          {"/rest/seed/test:a?kill=all", formCT, "x=1"},
		"JSON body":                  {"/rest/seed", "application/json", `{"kill_all":"all"}`},
	} {
		mustPlain(t, what, e.rest("POST", c.path, c.ct, c.body), 400)
	}
	if got := ids(listing(t, "/rest/seed.json")); !slices.Equal(got, before) {
		t.Errorf("bad kills changed the listing from %v to %v", before, got)
	}
	if st := e.task(run).Status; st != 1 {
		t.Errorf("running task is now %d", st)
	}
	if st := e.task(pend).Status; st != 0 {
		t.Errorf("pending task is now %d", st)
	}
}

// Per-layer kills touch that layer's tasks only; the page names
// each task's type, and lists the tasks that had already finished.
func TestRESTKillPerLayerAndPage(t *testing.T) {
	e := newREST(t, "workers 2", "")
	done := e.submit("test:mock.layer.name", "json", tinySeedJ)
	if ti := waitTask(t, done); ti.Status != 2 {
		t.Fatalf("first task %+v", ti)
	}
	idDone := taskID(t, done)
	e.f.set("", 300*time.Millisecond)
	a1 := e.slowTask("test:a")                                                                                               // running
	m1 := e.slowTask("test:mock.layer.name")                                                                                 // running
	a2 := e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":5,"type":"reseed"}}`) // pending
	m2 := e.submit("test:mock.layer.name", "xml", `<seedRequest><zoomStart>0</zoomStart><zoomStop>3</zoomStop><type>truncate</type></seedRequest>`)
	m3 := e.submit("test:mock.layer.name", "json", `{"seedRequest":{"zoomStart":0,"zoomStop":3,"type":"reseed"}}`)
	a3 := e.slowTask("test:a") // pending
	id := func(p string) int64 { return taskID(t, p) }
	if got := listing(t, "/rest/seed.json"); len(got) != 6 || got[0][4] != 1 || got[1][4] != 1 || got[2][4] != 0 || got[3][4] != 0 || got[4][4] != 0 || got[5][4] != 0 {
		t.Fatalf("before: %v", got)
	}

	page := mustKillPage(t, e.kill("test:mock.layer.name", "all"))
	for p, typ := range map[string]string{m1: "SEED", m2: "TRUNCATE", m3: "RESEED"} {
		if ent, ok := page[id(p)]; !ok || ent.layer != "test:mock.layer.name" || ent.typ != typ {
			t.Errorf("page entry of task %d: %+v (listed %v), want test:mock.layer.name, %s", id(p), ent, ok, typ)
		}
	}
	if ent, ok := page[idDone]; !ok || ent.state != "DONE" || ent.layer != "test:mock.layer.name" {
		t.Errorf("the page does not list finished task %d as DONE: %+v\n%s", idDone, ent, e.kill("test:mock.layer.name", "all").body)
	}
	for _, p := range []string{a1, a2, a3} {
		if _, ok := page[id(p)]; ok {
			t.Errorf("a kill of test:mock.layer.name lists test:a's task %d", id(p))
		}
	}
	if got := ids(listing(t, "/rest/seed.json")); !slices.Equal(got, []int64{id(a1), id(a2), id(a3)}) {
		t.Errorf("after the layer kill: %v, want [%d %d %d]", got, id(a1), id(a2), id(a3))
	}
	if got := listing(t, "/rest/seed/test:mock.layer.name.json"); len(got) != 0 {
		t.Errorf("layer listing after its kill: %v", got)
	}
	for _, p := range []string{m1, m2, m3} {
		if ti := waitTask(t, p); ti.Status != -1 {
			t.Errorf("killed %s ended %s", p, ti.State)
		}
	}
	// m1's worker, once free, goes to a2; a3 still waits. A pending kill
	// on test:a takes a3 only.
	waitFor(t, "a2 running", func() bool { return e.task(a2).Status == 1 })
	page = mustKillPage(t, e.kill("test:a", "pending"))
	if ent, ok := page[id(a3)]; !ok || ent.typ != "SEED" || ent.layer != "test:a" {
		t.Errorf("pending kill page: %v", page)
	}
	for _, p := range []string{a1, a2} {
		if _, ok := page[id(p)]; ok {
			t.Errorf("pending kill lists the running task %d", id(p))
		}
	}
	if got := ids(listing(t, "/rest/seed.json")); !slices.Equal(got, []int64{id(a1), id(a2)}) {
		t.Errorf("after the pending kill: %v", got)
	}
	// The global kill takes the rest.
	page = mustKillPage(t, e.kill("", "all"))
	if ent, ok := page[id(a1)]; !ok || ent.typ != "SEED" {
		t.Errorf("global kill page: %v", page)
	}
	if ent, ok := page[id(a2)]; !ok || ent.typ != "RESEED" {
		t.Errorf("global kill page: %v", page)
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("after the global kill: %v", got)
	}
	for _, p := range []string{a1, a2, a3} {
		if ti := waitTask(t, p); ti.Status != -1 {
			t.Errorf("%s ended %s", p, ti.State)
		}
	}
	// Killing nothing is still a 200 page.
	mustKillPage(t, e.kill("", "running"))
}

// The request list names the original URL.
func TestRESTMassTruncateList(t *testing.T) {
	newREST(t, "", "")
	a := rest(t, "GET", "/rest/masstruncate", "", "")
	want := `<massTruncateRequests href="http://localhost:9080/geowebcache/rest/masstruncate"><requestType>truncateLayer</requestType><requestType>truncateExtent</requestType></massTruncateRequests>`
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/xml") || strings.TrimSpace(string(a.body)) != want {
		t.Errorf("GET /rest/masstruncate: %d %q\n%s\nwant\n%s", a.status, a.header.Get("Content-Type"), a.body, want)
	}
	var l massList
	if err := xml.Unmarshal(a.body, &l); err != nil || l.Href != restURL("/rest/masstruncate") || len(l.Types) < 1 || l.Types[0] != "truncateLayer" {
		t.Errorf("mass truncate list %+v (%v)", l, err)
	}
}

// The original URL is the one the client used, whatever prefix
// handle_path stripped, also for the seed answer's Location.
func TestRESTDeepMount(t *testing.T) {
	f := newFakeWMS(t)
	name := fmt.Sprintf("rest%d", restSeq.Add(1))
	cfg := adminConfig(t, f, storageDir(t), "cache "+name, "name "+name+"\n"+restLayers)
	cfg = strings.Replace(cfg, "handle_path /geowebcache/*", "handle_path /geoserver/gwc/*", 1)
	load(t, cfg)
	base := "http://localhost:9080/geoserver/gwc"
	auth := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass))}
	a := get(t, base+"/rest/masstruncate", auth...)
	var l massList
	if err := xml.Unmarshal(a.body, &l); a.status != 200 || err != nil || l.Href != base+"/rest/masstruncate" {
		t.Errorf("GET %s/rest/masstruncate: %d %q", base, a.status, a.body)
	}
	req := do(t, "GET", base+"/rest/seed.json", auth...)
	if req.status != 200 || strings.TrimSpace(string(req.body)) != `{"long-array-array":[]}` {
		t.Errorf("listing under the deep mount: %d %q", req.status, req.body)
	}
	// The seed answer's Location, under the same mount.
	r := postAt(t, base+"/rest/seed/test:a.json", "application/json", tinySeedJ, auth...)
	loc := r.header.Get("Location")
	if r.status != 200 || !strings.HasPrefix(loc, base+"/rest/tasks/") {
		t.Fatalf("seed under the deep mount: %d %q, Location %q", r.status, r.body, loc)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := get(t, loc, auth...)
		var ti restTask
		if g.status != 200 || json.Unmarshal(g.body, &ti) != nil {
			t.Fatalf("GET %s: %d %q", loc, g.status, g.body)
		}
		if ti.Status == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %+v", loc, ti)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The old mount point is not the interface.
	if a := rest(t, "GET", "/rest/seed.json", "", ""); a.status == 200 && strings.Contains(string(a.body), "long-array-array") {
		t.Errorf("the REST interface answers under /geowebcache too")
	}
}

func postAt(t *testing.T, u, ct, body string, hdr ...string) answer {
	t.Helper()
	return doBody(t, "POST", u, body, append(hdr, "Content-Type", ct)...)
}

// TruncateLayer clears every gridset,
// format and parameter set of the layer, synchronously, and nothing else.
func TestRESTMassTruncateLayer(t *testing.T) {
	e := newREST(t, "workers 2", "")
	type tile struct {
		layer, gs string
		x, y      int64
		z         int
		extra     []string
	}
	mine := []tile{
		{"test:a", "EPSG:4326", 0, 0, 1, nil},
		{"test:a", "EPSG:4326", 0, 0, 1, []string{"STYLES", "population"}},
		{"test:a", "EPSG:4326", 0, 0, 1, []string{"FORMAT", "image/jpeg"}},
		{"test:a", "EPSG:4326", 12, 5, 4, []string{"STYLES", "population", "FORMAT", "image/jpeg"}},
		{"test:a", "EPSG:900913", 1, 1, 1, nil},
		{"test:a", "EPSG:900913", 1, 1, 1, []string{"STYLES", "population"}},
	}
	other := []tile{
		{"test:mock.layer.name", "EPSG:4326", 0, 0, 1, nil},
		{"test:mock.layer.name", "EPSG:4326", 0, 0, 1, []string{"FORMAT", "image/jpeg"}},
	}
	res := func(c tile) string { t.Helper(); return tileResult(t, c.layer, c.gs, c.x, c.y, c.z, c.extra...) }
	for _, c := range append(append([]tile(nil), mine...), other...) {
		if r := res(c); r != "MISS" {
			t.Fatalf("first %+v: %s", c, r)
		}
	}
	for _, ct := range []string{"text/xml", "application/xml", "text/xml; charset=utf-8", "application/xml;charset=UTF-8", ""} {
		for _, c := range append(append([]tile(nil), mine...), other...) {
			if r := res(c); r != "HIT" {
				t.Fatalf("before truncating (%q): %+v is %s", ct, c, r)
			}
		}
		a := e.rest("POST", "/rest/masstruncate", ct, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+truncA)
		if a.status != 200 || len(a.body) != 0 {
			t.Fatalf("truncateLayer as %q: %d %q", ct, a.status, a.body)
		}
		for _, c := range mine {
			if r := res(c); r != "MISS" {
				t.Errorf("after truncateLayer as %q: %+v is %s, want MISS", ct, c, r)
			}
		}
		for _, c := range other {
			if r := res(c); r != "HIT" {
				t.Errorf("after truncateLayer of test:a as %q: %+v is %s, want HIT", ct, c, r)
			}
		}
	}
	// And a seeded layer: after the 200, nothing of it is served.
	waitTask(t, e.submit("test:mock.layer.name", "json", `{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/jpeg"}}`))
	if a := e.rest("POST", "/rest/masstruncate", "text/xml", `<truncateLayer><layerName>test:mock.layer.name</layerName></truncateLayer>`); a.status != 200 {
		t.Fatalf("truncateLayer: %d %q", a.status, a.body)
	}
	if r := tileResult(t, "test:mock.layer.name", "EPSG:4326", 7, 3, 2, "FORMAT", "image/jpeg"); r != "MISS" {
		t.Errorf("seeded tile after truncateLayer: %s", r)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Errorf("other layer's tile after truncateLayer: %s", r)
	}
}

// Mass truncate: the errors, none of which truncates.
func TestRESTMassTruncateErrors(t *testing.T) {
	e := newREST(t, "workers 2", "")
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Fatalf("first tile %s", r)
	}
	for _, layer := range []string{"nope:x", "test:A", "test:mock.layer", " "} {
		body := `<truncateLayer><layerName>` + layer + `</layerName></truncateLayer>`
		a := e.rest("POST", "/rest/masstruncate", "text/xml", body)
		mustPlain(t, "unknown layer "+layer, a, 400)
		if strings.TrimSpace(layer) != "" {
			if got := strings.TrimSuffix(string(a.body), "\n"); got != "Could not find layer "+layer {
				t.Errorf("unknown layer %q: body %q, want %q", layer, got, "Could not find layer "+layer)
			}
		}
	}
	for _, ct := range []string{"application/json", "text/plain", formCT, "application/octet-stream", "text/html", "image/png", "not a media type"} {
		mustPlain(t, "Content-Type "+ct, e.rest("POST", "/rest/masstruncate", ct, truncA), 415)
	}
	for what, body := range map[string]string{
		"malformed XML":                    `<truncateLayer><layerName>test:a</layerName>`,
		"not XML":                          `layerName=test:a`,
		"JSON":                             `{"truncateLayer":{"layerName":"test:a"}}`,
		"empty body":                       ``,
		"unknown request":                  `<truncateEverything><layerName>test:a</layerName></truncateEverything>`,
		"truncateLayers":                   `<truncateLayers><layerName>test:a</layerName></truncateLayers>`,
		"missing layerName":                `<truncateLayer></truncateLayer>`,
		"empty layerName":                  `<truncateLayer><layerName></layerName></truncateLayer>`,
		"misspelt layerName":               `<truncateLayer><layername>test:a</layername></truncateLayer>`,
		"DOCTYPE":                          `<?xml version="1.0"?><!DOCTYPE truncateLayer>` + truncA,
		"DOCTYPE with entity":              `<?xml version="1.0"?><!DOCTYPE truncateLayer [<!ENTITY l "test:a">]><truncateLayer><layerName>&l;</layerName></truncateLayer>`,
		"extent without gridset":           `<truncateExtent><layerName>test:a</layerName><bounds><coords><double>-180</double><double>-90</double><double>0</double><double>90</double></coords></bounds></truncateExtent>`,
		"extent, unknown layer":            `<truncateExtent><layerName>nope:x</layerName><gridSetId>EPSG:4326</gridSetId></truncateExtent>`,
		"extent, no layerName":             `<truncateExtent><gridSetId>EPSG:4326</gridSetId></truncateExtent>`,
		"extent, gridset not on the layer": `<truncateExtent><layerName>test:mock.layer.name</layerName><gridSetId>EPSG:900913</gridSetId></truncateExtent>`,
		"extent, 3 bounds":                 `<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:4326</gridSetId><bounds><coords><double>-180</double><double>-90</double><double>0</double></coords></bounds></truncateExtent>`,
		"extent, min > max":                `<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:4326</gridSetId><bounds><coords><double>0</double><double>-90</double><double>-180</double><double>90</double></coords></bounds></truncateExtent>`,
		"extent, not numbers":              `<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:4326</gridSetId><bounds><coords><double>a</double><double>-90</double><double>0</double><double>90</double></coords></bounds></truncateExtent>`,
	} {
		mustPlain(t, what, e.rest("POST", "/rest/masstruncate", "text/xml", body), 400)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Errorf("after the rejected mass truncates the tile is %s", r)
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("rejected requests left tasks: %v", got)
	}
}

// The truncateExtent extension: exactly the tiles inside the bbox, in every
// format and parameter set, in that gridset only.
func TestRESTMassTruncateExtent(t *testing.T) {
	e := newREST(t, "workers 2", `
		layer test:e {
			gridsets EPSG:4326 EPSG:900913
			metatile 1 1
			zoom 0 2
			param STYLES {
				default ""
				values "" population
			}
		}
		layer test:f {
			gridsets EPSG:4326
			formats image/png image/jpeg
			metatile 1 1
			zoom 0 2
		}`)
	// One tile per metatile, so that each tile checked below is fetched on
	// its own: every tile of levels 0..2 in each set.
	for _, s := range []struct{ layer, body string }{
		{"test:e", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2}}`},
		{"test:e", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":2,"parameters":{"STYLES":"population"}}}`},
		{"test:e", `{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":2}}`},
		{"test:f", `{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/png"}}`},
		{"test:f", `{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/jpeg"}}`},
	} {
		if ti := waitTask(t, e.submit(s.layer, "json", s.body)); ti.Status != 2 {
			t.Fatalf("seeding %s: %+v", s.body, ti)
		}
	}
	extent := func(layer string, b [4]float64) {
		t.Helper()
		body := fmt.Sprintf(`<truncateExtent><layerName>%s</layerName><gridSetId>EPSG:4326</gridSetId><bounds><coords><double>%g</double><double>%g</double><double>%g</double><double>%g</double></coords></bounds></truncateExtent>`,
			layer, b[0], b[1], b[2], b[3])
		a := e.rest("POST", "/rest/masstruncate", "text/xml", body)
		if a.status != 200 || len(a.body) != 0 {
			t.Fatalf("truncateExtent %s %v: %d %q", layer, b, a.status, a.body)
		}
		if loc := a.header.Get("Location"); loc != "" {
			if ti := waitTask(t, strings.TrimPrefix(loc, restURL(""))); ti.Status != 2 {
				t.Fatalf("truncateExtent task %+v", ti)
			}
		}
	}
	// inside: does the EPSG:4326 tile lie inside the bbox?
	inside := func(b [4]float64, x, y int64, z int) bool {
		g, _ := gridset.Builtin("EPSG:4326")
		tb := g.TileBBox(gridset.Index{X: x, Y: y, Z: z})
		return tb.MinX >= b[0] && tb.MinY >= b[1] && tb.MaxX <= b[2] && tb.MaxY <= b[3]
	}
	overlaps := func(b [4]float64, x, y int64, z int) bool {
		g, _ := gridset.Builtin("EPSG:4326")
		tb := g.TileBBox(gridset.Index{X: x, Y: y, Z: z})
		return tb.MinX < b[2] && tb.MaxX > b[0] && tb.MinY < b[3] && tb.MaxY > b[1]
	}
	check := func(layer string, b [4]float64, sets [][]string) {
		t.Helper()
		for _, extra := range sets {
			for z := 0; z <= 2; z++ {
				for x := int64(0); x < 2<<z; x++ {
					for y := int64(0); y < 1<<z; y++ {
						want := "HIT"
						if inside(b, x, y, z) {
							want = "MISS"
						} else if overlaps(b, x, y, z) {
							continue // partly inside: not asserted
						}
						if r := tileResult(t, layer, "EPSG:4326", x, y, z, extra...); r != want {
							t.Errorf("%s %v tile %d/%d/%d after truncateExtent %v: %s, want %s", layer, extra, z, x, y, b, r, want)
						}
					}
				}
			}
		}
	}
	west := [4]float64{-180, -90, 0, 90}
	extent("test:e", west)
	check("test:e", west, [][]string{nil, {"STYLES", "population"}})
	// The other gridset is untouched.
	for _, idx := range []gridset.Index{{X: 0, Y: 0, Z: 0}, {X: 0, Y: 0, Z: 1}, {X: 1, Y: 2, Z: 2}} {
		if r := tileResult(t, "test:e", "EPSG:900913", idx.X, idx.Y, idx.Z); r != "HIT" {
			t.Errorf("EPSG:900913 tile %v after a truncateExtent in EPSG:4326: %s", idx, r)
		}
	}
	// A quarter aligned on level-1 tiles, in both formats.
	nw := [4]float64{-90, 0, 0, 90}
	extent("test:f", nw)
	check("test:f", nw, [][]string{{"FORMAT", "image/png"}, {"FORMAT", "image/jpeg"}})
}

// A truncateExtent, like a truncateLayer, must be usable on a layer with
// the default 22 levels of EPSG:4326: its cost is what is stored, not the
// area of the bbox at level 21.
func TestRESTMassTruncateExtentAllLevels(t *testing.T) {
	e := newREST(t, "workers 2", "")
	if r := tileResult(t, "test:mock.layer.name", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Fatalf("first tile %s", r)
	}
	a := e.rest("POST", "/rest/masstruncate", "text/xml", `<truncateExtent><layerName>test:mock.layer.name</layerName><gridSetId>EPSG:4326</gridSetId><bounds><coords><double>-180</double><double>-90</double><double>0</double><double>90</double></coords></bounds></truncateExtent>`)
	if a.status != 200 {
		t.Fatalf("truncateExtent: %d %q", a.status, a.body)
	}
	if loc := a.header.Get("Location"); loc != "" {
		p := strings.TrimPrefix(loc, restURL(""))
		deadline := time.Now().Add(10 * time.Second)
		for {
			ti := e.task(p)
			if ti.Status == 2 {
				break
			}
			if ti.Status == -1 || time.Now().After(deadline) {
				t.Fatalf("truncateExtent over the west half of a 22-level layer is still %s after 10s: %d of %d tiles processed "+
					"(the truncate task deletes metatile by metatile, so it has ~2^38 units to go; it should delete "+
					"each level's range with one store.DeleteRange, whose cost is what is stored)", ti.State, ti.Processed, ti.Total)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if r := tileResult(t, "test:mock.layer.name", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Errorf("tile inside the extent after truncateExtent: %s", r)
	}
}

// Paths under /rest/ that name no resource are 404 text/plain.
func TestRESTUnknownResources(t *testing.T) {
	e := newREST(t, "", "")
	for _, p := range []string{
		"/rest/", "/rest/foo", "/rest/seed/", "/rest/seed/test:a/x.json", "/rest/seed/test:a.json/",
		"/rest/masstruncate/x", "/rest/tasks/abc.json", "/rest/tasks/0.json", "/rest/tasks/-1.json", "/rest/tasks/1.xml",
		"/rest/seeds.json", "/rest/seed.txt",
	} {
		for _, m := range []string{"GET", "POST"} {
			mustPlain(t, m+" "+p, e.rest(m, p, formCT, "kill_all=all"), 404)
		}
	}
}

// Tasks: truncate deletes the range's tiles of that layer,
// gridset, format and parameter set, and no others.
func TestRESTTruncateTask(t *testing.T) {
	e := newREST(t, "workers 2", `
		layer test:t {
			gridsets EPSG:4326
			formats image/png image/jpeg
			metatile 1 1
			zoom 0 2
			param STYLES {
				default ""
				values "" population
			}
		}`)
	sets := [][]string{
		{"FORMAT", "image/png"},
		{"FORMAT", "image/png", "STYLES", "population"},
		{"FORMAT", "image/jpeg", "STYLES", "population"},
	}
	for _, body := range []string{
		`{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/png"}}`,
		`{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/png","parameters":{"STYLES":"population"}}}`,
		`{"seedRequest":{"zoomStart":0,"zoomStop":2,"format":"image/jpeg","parameters":{"STYLES":"population"}}}`,
	} {
		if ti := waitTask(t, e.submit("test:t", "json", body)); ti.Status != 2 || ti.Processed != 42 {
			t.Fatalf("seeding %s: %+v", body, ti)
		}
	}
	p := e.submit("test:t", "xml", `<seedRequest><type>truncate</type><zoomStart>1</zoomStart><zoomStop>2</zoomStop><format>image/png</format>
		<threadCount>4</threadCount>
		<bounds><coords><double>-180</double><double>-90</double><double>0</double><double>90</double></coords></bounds>
		<parameters><entry><string>STYLES</string><string>population</string></entry></parameters></seedRequest>`)
	if ti := waitTask(t, p); ti.Status != 2 || ti.Total != 20 || ti.Processed != 20 || ti.Threads != 1 {
		t.Fatalf("truncate task %+v, want DONE, 20 of 20 tiles, 1 thread", ti)
	}
	for i, extra := range sets {
		for z := 0; z <= 2; z++ {
			for x := int64(0); x < 2<<z; x++ {
				for y := int64(0); y < 1<<z; y++ {
					want := "HIT"
					if i == 1 && z >= 1 && x < 1<<z {
						want = "MISS"
					}
					if r := tileResult(t, "test:t", "EPSG:4326", x, y, z, extra...); r != want {
						t.Errorf("%v tile %d/%d/%d after the truncate: %s, want %s", extra, z, x, y, r, want)
					}
				}
			}
		}
	}
}

// Tasks: ids are never reused, also across restarts (the
// store is closed and opened again).
func TestRESTTaskIDsAcrossRestart(t *testing.T) {
	f := newFakeWMS(t)
	dir := storageDir(t)
	cfg := func(dir string) string {
		name := fmt.Sprintf("rest%d", restSeq.Add(1))
		return adminConfig(t, f, dir, "cache "+name, "name "+name+"\n"+restLayers)
	}
	load(t, cfg(dir))
	var last int64
	for i := 0; i < 3; i++ {
		p := submit(t, "test:a", "json", tinySeedJ)
		waitTask(t, p)
		last = taskID(t, p)
	}
	load(t, cfg(storageDir(t))) // the first store closes
	load(t, cfg(dir))           // and opens again
	p := submit(t, "test:a", "json", tinySeedJ)
	waitTask(t, p)
	if id := taskID(t, p); id <= last {
		t.Errorf("after a restart the store handed out task id %d again (last before: %d)", id, last)
	}
}

// multipartForm is a multipart/form-data body of one field.
func multipartForm(name, value string) (contentType, body string) {
	var b strings.Builder
	w := multipart.NewWriter(&b)
	w.WriteField(name, value)
	w.Close()
	return w.FormDataContentType(), b.String()
}

// Tasks: ids are never reused by the interface, also when a
// reload points the tile_cache at another storage directory: a client's
// task URL must never come to name another task.
func TestRESTTaskIDsAcrossStorageChange(t *testing.T) {
	f := newFakeWMS(t)
	name := fmt.Sprintf("rest%d", restSeq.Add(1))
	cfg := func(dir string) string { return adminConfig(t, f, dir, "cache "+name, "name "+name+"\n"+restLayers) }
	load(t, cfg(storageDir(t)))
	first := submit(t, "test:a", "json", tinySeedJ)
	waitTask(t, first)
	load(t, cfg(storageDir(t)))
	p := submit(t, "test:a", "json", tinySeedJ)
	waitTask(t, p)
	if taskID(t, p) <= taskID(t, first) {
		t.Errorf("after a reload onto another storage directory the interface handed out task id %d again, "+
			"so %s, which named the first task, now names another one: ids come from the new store's sequence "+
			"(seeder.Engine.Submit → store.NextID), which knows nothing of the ids the engine handed out before",
			taskID(t, p), first)
	}
}
