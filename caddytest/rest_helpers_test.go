package caddytest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"github.com/tilecache/caddy-tilecache/seeder"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// The REST tests each run against their own tile_cache (a unique `name`,
// with tile_cache_admin's `cache` pointing at it), so that each gets its own
// seeding engine: the engine of a cache name survives config reloads with
// its tasks, and a task left over from an earlier test must not show up in
// a later test's listing or hold one of its workers.

// restLayers are adminConfig's default layers.
const restLayers = `
		layer test:a {
			gridsets EPSG:4326 EPSG:900913
			param STYLES {
				default ""
				values "" population
			}
		}
		layer test:mock.layer.name {
			gridsets EPSG:4326
			formats image/png image/jpeg
		}`

var restSeq atomic.Int64

// restEnv is one REST test's Caddy config, fake upstream and tasks.
type restEnv struct {
	t    *testing.T
	f    *fakeWMS
	name string // the tile_cache's name
	dir  string // its storage directory

	mu    sync.Mutex
	tasks []string // task resource paths seen in Location headers
}

// newREST loads adminConfig with a tile_cache of the test's own, the given
// tile_cache_admin options and layers ("" for adminConfig's defaults). At
// the end of the test it kills every task and waits for them to stop.
func newREST(t *testing.T, adminOpts, layers string) *restEnv {
	t.Helper()
	f := newFakeWMS(t)
	e := &restEnv{t: t, f: f, name: fmt.Sprintf("rest%d", restSeq.Add(1)), dir: storageDir(t)}
	if layers == "" {
		layers = restLayers
	}
	load(t, adminConfig(t, f, e.dir, "cache "+e.name+"\n\t\t\t"+adminOpts, "name "+e.name+"\n"+layers))
	t.Cleanup(e.cleanup)
	return e
}

func (e *restEnv) cleanup() {
	e.f.set("", 0)
	a := restAs(e.t, adminUser, adminPass, "POST", "/rest/seed", "application/x-www-form-urlencoded", "kill_all=all")
	if a.status != 200 {
		e.t.Errorf("cleanup: kill_all=all answered %d %q", a.status, a.body)
		return
	}
	e.mu.Lock()
	tasks := append([]string(nil), e.tasks...)
	e.mu.Unlock()
	for _, p := range tasks {
		waitTask(e.t, p)
	}
}

func (e *restEnv) record(a answer) {
	if loc := a.header.Get("Location"); a.status == 200 && loc != "" {
		if p, ok := strings.CutPrefix(loc, restURL("")); ok {
			e.mu.Lock()
			e.tasks = append(e.tasks, p)
			e.mu.Unlock()
		}
	}
}

// rest is the authenticated request of admin_helpers_test.go, remembering
// any task it creates.
func (e *restEnv) rest(method, path, contentType, body string) answer {
	e.t.Helper()
	a := rest(e.t, method, path, contentType, body)
	e.record(a)
	return a
}

// submit is admin_helpers_test.go's submit, remembering the task.
func (e *restEnv) submit(layer, ext, body string) string {
	e.t.Helper()
	p := submit(e.t, layer, ext, body)
	e.mu.Lock()
	e.tasks = append(e.tasks, p)
	e.mu.Unlock()
	return p
}

// slow makes every GetMap take d, and a long task on layer (4326 levels
// 0..5: 2730 tiles, 172 metatiles of 4×4) that stays RUNNING, or PENDING
// behind others, for as long as the test looks at it.
func (e *restEnv) slowTask(layer string) string {
	e.t.Helper()
	return e.submit(layer, "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":5,"format":"image/png","type":"seed"}}`)
}

const slowTotal = 2 + 8 + 32 + 128 + 512 + 2048

// kill POSTs kill_all as a form to /rest/seed[/<layer>].
func (e *restEnv) kill(layer, value string) answer {
	e.t.Helper()
	p := "/rest/seed"
	if layer != "" {
		p += "/" + layer
	}
	return e.rest("POST", p, "application/x-www-form-urlencoded", "kill_all="+url.QueryEscape(value))
}

// restTask is the task resource's JSON: the seeder's own type.
type restTask = seeder.Info

func (e *restEnv) task(path string) restTask {
	e.t.Helper()
	a := rest(e.t, "GET", path, "", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		e.t.Fatalf("GET %s: %d %q %q", path, a.status, a.header.Get("Content-Type"), a.body)
	}
	var ti restTask
	if err := json.Unmarshal(a.body, &ti); err != nil {
		e.t.Fatalf("task JSON: %v: %s", err, a.body)
	}
	return ti
}

// taskID is the id in a task resource path /rest/tasks/<id>.json.
func taskID(t *testing.T, path string) int64 {
	t.Helper()
	s := strings.TrimSuffix(strings.TrimPrefix(path, "/rest/tasks/"), ".json")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("task path %q has no id", path)
	}
	return id
}

// ids lists the task ids of listing records.
func ids(recs [][5]int64) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r[3]
	}
	return out
}

// eventPatience bounds waitFor: long enough for a machine whose every core
// is busy with other work (the suite must pass there), so that only an
// event that never comes fails a test.
const eventPatience = 3 * time.Minute

// waitFor polls cond until it holds (bounded by eventPatience).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventPatience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, eventPatience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawREST sends a request to the REST interface with exactly the given
// headers (no credentials unless among them).
func rawREST(t *testing.T, method, path string, body string, hdr ...string) answer {
	t.Helper()
	return doBody(t, method, restURL(path), body, hdr...)
}

// mustPlain asserts an error answer: the status, and a body of one
// non-empty line of text/plain.
func mustPlain(t *testing.T, what string, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: status %d, want %d (body %q)", what, a.status, status, truncate(a.body))
		return
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("%s: Content-Type %q, want text/plain", what, ct)
	}
	line := strings.TrimSuffix(string(a.body), "\n")
	if strings.TrimSpace(line) == "" || strings.ContainsAny(line, "\r\n") {
		t.Errorf("%s: body %q is not one non-empty line", what, a.body)
	}
}

// allowSet is the set of methods of an Allow header, sorted.
func allowSet(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Allow") {
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// killEntry is one `[<id>: <layer>, <TYPE>, <state>]` of a kill answer.
type killEntry struct {
	layer, typ, state string
}

var killEntryRE = regexp.MustCompile(`\[(\d+): ([^,\]]+), (SEED|RESEED|TRUNCATE), ([A-Z]+)\]`)

// mustKillPage asserts a kill answer's form and returns its entries by id.
func mustKillPage(t *testing.T, a answer) map[int64]killEntry {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("kill: status %d, body %q", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("kill: Content-Type %q, want text/html; charset=utf-8", ct)
	}
	body := strings.TrimSpace(string(a.body))
	low := strings.ToLower(body)
	if !strings.HasPrefix(low, "<!doctype html>") || !strings.Contains(low, "<html") ||
		!strings.Contains(low, "<body") || !strings.Contains(low, "</body>") || !strings.HasSuffix(low, "</html>") {
		t.Errorf("kill: not a complete HTML document: %q", truncate(a.body))
	}
	out := map[int64]killEntry{}
	for _, m := range killEntryRE.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		out[id] = killEntry{m[2], m[3], m[4]}
	}
	return out
}

// massList is the mass truncate request list.
type massList struct {
	XMLName xml.Name `xml:"massTruncateRequests"`
	Href    string   `xml:"href,attr"`
	Types   []string `xml:"requestType"`
}

// tileResult fetches a tile (public, no credentials) and returns its
// cache result, failing unless it is a 200 image.
func tileResult(t *testing.T, layer, gs string, x, y int64, z int, extra ...string) string {
	t.Helper()
	a := get(t, siteURL(tileQuery(layer, gs, gridset.Index{X: x, Y: y, Z: z}, extra...)))
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "image/") {
		t.Fatalf("tile %s %s %d/%d/%d %v: %d %q", layer, gs, z, x, y, extra, a.status, truncate(a.body))
	}
	return a.header.Get("Geowebcache-Cache-Result")
}
