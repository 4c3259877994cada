package caddytest

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// A browser attaches cached Basic credentials to a form posted from any
// web site. State-changing requests that a browser marks as cross-site, or
// whose Origin is not the interface's own, are refused with 403 and change
// nothing; GeoWebCache's curl commands (no Origin, no Sec-Fetch-Site) and
// same-origin requests (the task page) go through.
func TestRESTRefusesCrossSiteRequests(t *testing.T) {
	e := newREST(t, "workers 2", "")
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass))
	own := fmt.Sprintf("http://localhost:%d", httpPort)
	crossSite := [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://evil.example"},
		{"Origin", "null"},
	}
	// A tile to lose, and a task to kill.
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 1}))), "MISS")
	e.f.set("", 200*time.Millisecond) // the task stays running
	running := e.slowTask("test:a")
	for _, h := range crossSite {
		for _, req := range []struct{ path, ct, body string }{
			// A form can send text/plain: the seed resource reads JSON whatever the type.
			{"/rest/seed/test:a.json", "text/plain", `{"seedRequest":{"zoomStart":0,"zoomStop":1,"type":"truncate"}}`},
			{"/rest/seed", "application/x-www-form-urlencoded", "kill_all=all"},
			{"/rest/seed/test:a", "application/x-www-form-urlencoded", "kill_all=running"},
			{"/rest/masstruncate", "text/xml", "<truncateLayer><layerName>test:a</layerName></truncateLayer>"},
		} {
			a := rawREST(t, "POST", req.path, req.body, "Authorization", auth, "Content-Type", req.ct, h[0], h[1])
			mustPlain(t, fmt.Sprintf("POST %s with %s: %s", req.path, h[0], h[1]), a, 403)
			if !strings.Contains(string(a.body), "cross-origin request refused") {
				t.Errorf("403 body %q", a.body)
			}
		}
	}
	if ti := e.task(running); ti.Status != 1 && ti.Status != 0 {
		t.Fatalf("a cross-site kill stopped the task: %+v", ti)
	}
	if l := listing(t, "/rest/seed.json"); len(l) != 1 {
		t.Fatalf("listing %v: a cross-site seed request created a task", l)
	}
	mustTile(t, get(t, siteURL(tileQuery("test:a", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 1}))), "HIT")
	// Reading stays allowed from anywhere (GET is safe).
	if a := rawREST(t, "GET", "/rest/seed.json", "", "Authorization", auth, "Sec-Fetch-Site", "cross-site"); a.status != 200 {
		t.Errorf("cross-site GET: %d", a.status)
	}
	// Same origin (the task page) and no browser headers at all (curl) work.
	a := rawREST(t, "POST", "/rest/seed/test:a", "kill_all=running", "Authorization", auth,
		"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin", "Origin", own)
	if a.status != 200 {
		t.Fatalf("same-origin kill: %d %q", a.status, a.body)
	}
	p := e.submit("test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0,"type":"truncate"}}`)
	if ti := waitTask(t, p); ti.Status != 2 {
		t.Fatalf("curl-style truncate: %+v", ti)
	}
}

// Every path under the interface's mount point is its own: an unknown one
// is a 404 from the interface, never passed on to the upstream with the
// credentials.
func TestRESTUnknownPathsStayInTheInterface(t *testing.T) {
	e := newREST(t, "", "")
	before := e.f.others.Load()
	for _, p := range []string{"/foo?SERVICE=WMS&REQUEST=GetCapabilities", "/rest", "/restx/seed.json", "/wms?REQUEST=GetMap"} {
		mustPlain(t, "GET "+p, rest(t, "GET", p, "", ""), 404)
	}
	if n := e.f.others.Load() - before; n != 0 {
		t.Fatalf("%d admin requests reached the upstream", n)
	}
}

// tileFailureRetryWaitTime is bounded: near int64's limit it used to
// overflow into a negative wait (immediate retries).
func TestRESTRetryWaitIsBounded(t *testing.T) {
	e := newREST(t, "", "")
	for _, wait := range []string{"3600001", "9223372036854775807"} {
		a := e.rest("POST", "/rest/seed/test:a.json", "application/json",
			`{"seedRequest":{"zoomStart":0,"zoomStop":0,"tileFailureRetryWaitTime":`+wait+`}}`)
		mustPlain(t, "retry wait "+wait, a, 400)
		if !strings.Contains(string(a.body), "tileFailureRetryWaitTime") {
			t.Errorf("400 body %q", a.body)
		}
	}
	if l := listing(t, "/rest/seed.json"); len(l) != 0 {
		t.Fatalf("listing %v after refused requests", l)
	}
	p := e.submit("test:a", "json", `{"seedRequest":{"zoomStart":0,"zoomStop":0,"tileFailureRetryWaitTime":3600000}}`)
	if ti := waitTask(t, p); ti.Status != 2 {
		t.Fatalf("an hour's wait is accepted: %+v", ti)
	}
}
