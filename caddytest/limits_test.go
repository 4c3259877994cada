package caddytest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// docs/operations.md "Limits": max_tasks pending and running tasks; one more is 429
// with a one-line message, whatever makes the task (seed, reseed,
// truncate, mass truncateExtent). truncateLayer is no task: never refused.
func TestLimitsMaxTasks(t *testing.T) {
	e := newREST(t, "workers 1\n\t\t\tmax_tasks 3", "")
	e.f.set("", 300*time.Millisecond)
	var paths []string
	for i := 0; i < 3; i++ {
		paths = append(paths, e.slowTask("test:a"))
	}
	for what, r := range map[string]struct{ path, ct, body string }{
		"JSON seed":      {"/rest/seed/test:a.json", "application/json", tinySeedJ},
		"XML seed":       {"/rest/seed/test:mock.layer.name.xml", "text/xml", tinySeedX},
		"truncate":       {"/rest/seed/test:a.json", "application/json", `{"seedRequest":{"zoomStart":0,"zoomStop":0,"type":"truncate"}}`},
		"truncateExtent": {"/rest/masstruncate", "text/xml", `<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:4326</gridSetId></truncateExtent>`},
	} {
		a := e.rest("POST", r.path, r.ct, r.body)
		mustPlain(t, what+" beyond max_tasks", a, http.StatusTooManyRequests)
		if !strings.Contains(string(a.body), "max_tasks") {
			t.Errorf("%s: %q does not say which limit", what, a.body)
		}
	}
	if got := ids(listing(t, "/rest/seed.json")); len(got) != 3 {
		t.Fatalf("listing %v, want the 3 first tasks", got)
	}
	if a := e.rest("POST", "/rest/masstruncate", "text/xml", truncA); a.status != 200 {
		t.Errorf("truncateLayer with max_tasks reached: %d %q", a.status, a.body)
	}
	// Room again once some are killed.
	mustKillPage(t, e.kill("", "pending"))
	e.f.set("", 0)
	waitTask(t, e.submit("test:a", "json", tinySeedJ))
}

// max_tiles_per_task bounds seeds and reseeds (400); truncates delete by
// key range and are not bounded. The default is 100,000,000.
func TestLimitsMaxTilesPerTask(t *testing.T) {
	e := newREST(t, "workers 2\n\t\t\tmax_tiles_per_task 1000", "")
	seed := func(typ string, z1, z2 int) string {
		return fmt.Sprintf(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":%d,"zoomStop":%d,"type":"%s"}}`, z1, z2, typ)
	}
	// EPSG:4326 levels 0..4: 2+8+32+128+512 = 682 tiles; 0..5: 2730.
	if ti := waitTask(t, e.submit("test:a", "json", seed("seed", 0, 4))); ti.State != "DONE" || ti.Total != 682 {
		t.Errorf("682 tiles: %+v", ti)
	}
	for _, typ := range []string{"seed", "reseed"} {
		a := e.rest("POST", "/rest/seed/test:a.json", "application/json", seed(typ, 0, 5))
		mustPlain(t, typ+" of 2730 tiles", a, 400)
		if !strings.Contains(string(a.body), "max_tiles_per_task") || !strings.Contains(string(a.body), "2730") {
			t.Errorf("%s: %q", typ, a.body)
		}
	}
	waitTask(t, e.submit("test:a", "json", seed("truncate", 0, 21)))
	if a := e.rest("POST", "/rest/masstruncate", "text/xml",
		`<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:900913</gridSetId></truncateExtent>`); a.status != 200 {
		t.Errorf("truncateExtent over 31 levels: %d %q", a.status, a.body)
	}

}

// The default max_tiles_per_task: EPSG:4326 to level 13 is 1.8·10^8
// tiles, EPSG:900913 to 30 is 1.5·10^18 (an int64 still).
func TestLimitsMaxTilesPerTaskDefault(t *testing.T) {
	e := newREST(t, "workers 1", "")
	for _, body := range []string{
		`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":13}}`,
		`{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":0,"zoomStop":30}}`,
		`{"seedRequest":{"gridSetId":"EPSG:900913","zoomStart":30,"zoomStop":30}}`,
	} {
		a := e.rest("POST", "/rest/seed/test:a.json", "application/json", body)
		mustPlain(t, body, a, 400)
		if !strings.Contains(string(a.body), "100000000") {
			t.Errorf("%s: %q", body, a.body)
		}
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("refused tasks listed: %v", got)
	}
}

// max_body: the seed, kill and mass truncate bodies; 413 beyond.
func TestLimitsMaxBody(t *testing.T) {
	e := newREST(t, "workers 2\n\t\t\tmax_body 1KiB", "")
	pad := func(head, tail string, size int) string {
		return head + strings.Repeat(" ", size-len(head)-len(tail)) + tail
	}
	if a := e.rest("POST", "/rest/seed/test:a.json", "", pad(tinySeedJ, "", 1024)); a.status != 200 {
		t.Errorf("1 KiB seed: %d %q", a.status, a.body)
	}
	a := e.rest("POST", "/rest/seed/test:a.json", "", pad(tinySeedJ, "", 1025))
	mustPlain(t, "seed of 1025 bytes", a, 413)
	if !strings.Contains(string(a.body), "1024") {
		t.Errorf("413 body %q", a.body)
	}
	mustPlain(t, "mass truncate of 1025 bytes", e.rest("POST", "/rest/masstruncate", "text/xml",
		pad(`<truncateLayer><layerName>test:a</layerName><!--`, `--></truncateLayer>`, 1025)), 413)
	mustPlain(t, "kill form of 1025 bytes", e.rest("POST", "/rest/seed", formCT, pad("kill_all=all&x=", "", 1025)), 413)
	mustKillPage(t, e.rest("POST", "/rest/seed", formCT, pad("kill_all=all&x=", "", 1024)))
}

// Parameter values: a tile request's longer than max_param_length (1024
// by default) is no tile request ("malformed", passed through); a seed
// request's is 400.
func TestLimitsParamLength(t *testing.T) {
	e := newREST(t, "workers 2", `
		layer test:q {
			gridsets EPSG:4326
			param CQL_FILTER {
				default INCLUDE
				regex .*
			}
		}`)
	long := func(n int) string { return strings.Repeat("a", n) }
	q := func(v string) string {
		return siteURL(tileQuery("test:q", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 1}, "CQL_FILTER", v))
	}
	mustTile(t, get(t, q(long(1024))), "MISS")
	a := get(t, q(long(1025)))
	if got := a.header.Get("Geowebcache-Miss-Reason"); got != "malformed" || a.header.Get("Geowebcache-Cache-Result") != "" {
		t.Errorf("1025-byte value: miss reason %q, result %q", got, a.header.Get("Geowebcache-Cache-Result"))
	}
	before := e.f.getMaps.Load()
	get(t, q(long(100000)))
	if e.f.getMaps.Load() != before {
		t.Errorf("a 100 kB parameter value made a metatile fetch")
	}
	seed := func(v string) string {
		return `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0,"parameters":{"CQL_FILTER":"` + v + `"}}}`
	}
	waitTask(t, e.submit("test:q", "json", seed(long(1024))))
	for what, body := range map[string]string{
		"JSON value": seed(long(1025)),
		"JSON name":  `{"seedRequest":{"zoomStart":0,"zoomStop":0,"parameters":{"` + long(1025) + `":"x"}}}`,
		"XML value": `<seedRequest><zoomStart>0</zoomStart><zoomStop>0</zoomStop><parameters><entry><string>CQL_FILTER</string><string>` +
			long(5000) + `</string></entry></parameters></seedRequest>`,
	} {
		ext := "json"
		if strings.HasPrefix(body, "<") {
			ext = "xml"
		}
		a := e.rest("POST", "/rest/seed/test:q."+ext, "", body)
		mustPlain(t, what, a, 400)
		if !strings.Contains(string(a.body), "max_param_length") {
			t.Errorf("%s: %q", what, a.body)
		}
	}
}

// Both parameter length limits are configurable.
func TestLimitsParamLengthConfigured(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	q := func(v string) string {
		return siteURL(tileQuery("test:q", "EPSG:4326", gridset.Index{X: 1, Y: 0, Z: 1}, "CQL_FILTER", v))
	}
	seed := func(v string) string {
		return `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":0,"parameters":{"CQL_FILTER":"` + v + `"}}}`
	}
	e2 := newREST(t, "workers 2\n\t\t\tmax_param_length 2000", `
		max_param_length 2000
		layer test:q {
			gridsets EPSG:4326
			param CQL_FILTER {
				default INCLUDE
				regex .*
			}
		}`)
	mustTile(t, get(t, q(long(2000))), "MISS")
	if a := get(t, q(long(2001))); a.header.Get("Geowebcache-Miss-Reason") != "malformed" {
		t.Errorf("max_param_length 2000, 2001 bytes: %q", a.header.Get("Geowebcache-Miss-Reason"))
	}
	waitTask(t, e2.submit("test:q", "json", seed(long(2000))))
	mustPlain(t, "2001 bytes", e2.rest("POST", "/rest/seed/test:q.json", "", seed(long(2001))), 400)
}

// XML with a DTD, entities or other tricks never reaches a mass
// truncate or a seed: 400, nothing done.
func TestLimitsHostileXML(t *testing.T) {
	e := newREST(t, "workers 2", "")
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Fatalf("first tile %s", r)
	}
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">` +
		`<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">` +
		`<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>`
	for what, body := range map[string]string{
		"billion laughs":         laughs + `<truncateLayer><layerName>&lol4;</layerName></truncateLayer>`,
		"external entity":        `<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><truncateLayer><layerName>&x;</layerName></truncateLayer>`,
		"external DTD":           `<?xml version="1.0"?><!DOCTYPE truncateLayer SYSTEM "http://127.0.0.1:1/evil.dtd">` + truncA,
		"parameter entity":       `<?xml version="1.0"?><!DOCTYPE t [<!ENTITY % p SYSTEM "http://127.0.0.1:1/p"> %p;]>` + truncA,
		"DOCTYPE inside":         `<truncateLayer><!DOCTYPE x><layerName>test:a</layerName></truncateLayer>`,
		"DOCTYPE after the root": truncA + `<!DOCTYPE x [<!ENTITY y "z">]>`,
		"undefined entity":       `<truncateLayer><layerName>&xxe;</layerName></truncateLayer>`,
		"UTF-16 declared":        `<?xml version="1.0" encoding="UTF-16"?>` + truncA,
		"two roots":              truncA + truncA,
		"XInclude":               `<truncateLayer xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="file:///etc/passwd"/></truncateLayer>`,
		"deep nesting":           strings.Repeat("<a>", 50000) + strings.Repeat("</a>", 50000),
	} {
		mustPlain(t, "mass truncate, "+what, e.rest("POST", "/rest/masstruncate", "text/xml", body), 400)
		seedBody := strings.ReplaceAll(strings.ReplaceAll(body, "truncateLayer", "seedRequest"), "layerName", "zoomStart")
		mustPlain(t, "seed, "+what, e.rest("POST", "/rest/seed/test:a.xml", "text/xml", seedBody), 400)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Errorf("after the rejected requests the tile is %s", r)
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("rejected requests left tasks: %v", got)
	}
}

// rawRequest sends one HTTP/1.1 request with exactly the given target
// (however odd its encoding: the Go client would refuse or clean some),
// with the admin credentials, and reads the answer.
func rawRequest(t *testing.T, method, target, ct, body string) answer {
	t.Helper()
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("localhost:%d", httpPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	auth := base64.StdEncoding.EncodeToString([]byte(adminUser + ":" + adminPass))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: localhost:%d\r\nAuthorization: Basic %s\r\nConnection: close\r\nContent-Length: %d\r\n",
		method, target, httpPort, auth, len(body))
	if ct != "" {
		req += "Content-Type: " + ct + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n" + body)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %.100s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// Layer names in paths: traversal, NUL, double and overlong encodings and
// very long names are 404 (or 400), never 5xx, and create nothing.
func TestLimitsOddLayerPaths(t *testing.T) {
	e := newREST(t, "workers 2", "")
	for _, layer := range []string{
		"..%2f..%2fetc%2fpasswd", "..%2F..%2Fetc%2Fpasswd", "..%252f..%252fetc%252fpasswd", "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
		"..%5c..%5cetc%5cpasswd", `..\..\etc\passwd`, "%2e%2e", "%2e", "test:a%00", "%00", "test%3Aa%2500", "test:a%2500",
		"%c0%ae%c0%ae%c0%af", "%ff%fe", "%25", "%", "%zz", "test:a%0a", "test:a%0d%0aX-Injected:%201", "test:a%u0000",
		"test:a;x", "test:a%3Bjsessionid=1", strings.Repeat("x", 5000), strings.Repeat("%41", 5000),
		"test:a" + strings.Repeat("%20", 3000),
	} {
		for _, c := range []struct{ method, path, ct, body string }{
			{"GET", "/rest/seed/" + layer + ".json", "", ""},
			{"GET", "/rest/seed/" + layer + ".xml", "", ""},
			{"POST", "/rest/seed/" + layer + ".json", "application/json", tinySeedJ},
			{"POST", "/rest/seed/" + layer + ".xml", "text/xml", tinySeedX},
			{"POST", "/rest/seed/" + layer, formCT, "kill_all=all"},
		} {
			a := rawRequest(t, c.method, "/geowebcache"+c.path, c.ct, c.body)
			what := c.method + " " + c.path
			if len(what) > 100 {
				what = what[:100] + "…"
			}
			if a.status != 404 && a.status != 400 {
				t.Errorf("%s: %d, want 404 or 400 (%q)", what, a.status, truncate(a.body))
				continue
			}
			mustPlain(t, what, a, a.status)
			if len(a.body) > 2000 {
				t.Errorf("%s: %d bytes of error message", what, len(a.body))
			}
			if a.header.Get("X-Injected") != "" {
				t.Errorf("%s: header injected", what)
			}
		}
	}
	for _, p := range []string{"/rest/tasks/..%2f1.json", "/rest/tasks/1%00.json", "/rest/tasks/%31.json", "/rest/masstruncate%2f..",
		"/rest/seed.json%00", "/rest/tasks/" + strings.Repeat("9", 100) + ".json", "/rest/seed/%2e%2e/seed.json"} {
		for _, m := range []string{"GET", "POST"} {
			if a := rawRequest(t, m, "/geowebcache"+p, formCT, "kill_all=all"); a.status != 404 && a.status != 400 {
				t.Errorf("%s %s: %d %q", m, p, a.status, truncate(a.body))
			}
		}
	}
	// Paths that climb out of the mount point, encoded or not: Caddy's
	// path matchers resolve the dot segments first, so they are not the
	// interface's at all (here they go to the site's reverse_proxy). Nothing
	// breaks, nothing leaks, nothing is done.
	for _, p := range []string{"/geowebcache/rest/seed/../../../../etc/passwd.json", "/geowebcache/../../etc/passwd",
		"/geowebcache/rest/seed/" + strings.Repeat("%2e%2e%2f", 200) + "etc%2fpasswd.json",
		"/geowebcache/rest/../rest/seed/test:a.json"} {
		for _, m := range []string{"GET", "POST"} {
			a := rawRequest(t, m, p, "application/json", tinySeedJ)
			if a.status >= 500 || strings.Contains(string(a.body), "root:") {
				t.Errorf("%s %s: %d %q", m, p, a.status, truncate(a.body))
			}
		}
	}
	if got := listing(t, "/rest/seed.json"); len(got) != 0 {
		t.Errorf("odd paths created tasks: %v", got)
	}
	if n := e.f.getMaps.Load(); n != 0 {
		t.Errorf("odd paths made %d GetMaps", n)
	}
	if matches, _ := filepath.Glob(filepath.Join(storageRoot, "*passwd*")); len(matches) > 0 {
		t.Errorf("files created: %v", matches)
	}
}

// The admin interface with malformed or wrong Authorization headers: 401,
// nothing done. (TestRESTAuth has missing and wrong credentials; these
// are the malformed ones it lacks, and the remaining endpoints.)
func TestLimitsAuthMalformedHeaders(t *testing.T) {
	e := newREST(t, "workers 1", "")
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "MISS" {
		t.Fatalf("first tile %s", r)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	right := b64(adminUser + ":" + adminPass)
	bad := map[string][]string{
		"Basic, no credentials":     {"Authorization", "Basic"},
		"Basic, two spaces":         {"Authorization", "Basic  " + right},
		"Basic, tab":                {"Authorization", "Basic\t" + right},
		"credentials, no scheme":    {"Authorization", right},
		"Basic with trailing junk":  {"Authorization", "Basic " + right + " junk"},
		"Basic with trailing comma": {"Authorization", "Basic " + right + ","},
		"URL-safe base64":           {"Authorization", "Basic " + base64.URLEncoding.EncodeToString([]byte(adminUser+":"+adminPass+"??>"))},
		"unpadded base64":           {"Authorization", "Basic " + strings.TrimRight(b64(adminUser+":"+adminPass+"x"), "=")},
		"Basic =":                   {"Authorization", "Basic ="},
		"NUL in the password":       {"Authorization", "Basic " + b64(adminUser+":"+adminPass+"\x00")},
		"newline in the password":   {"Authorization", "Basic " + b64(adminUser+":"+adminPass+"\n")},
		"password with a space":     {"Authorization", "Basic " + b64(adminUser+": "+adminPass)},
		"user with a space":         {"Authorization", "Basic " + b64(adminUser+" :"+adminPass)},
		"Latin-1 bytes":             {"Authorization", "Basic " + b64("\xe9\xff:\xfe")},
		"8 KB of credentials":       {"Authorization", "Basic " + b64(adminUser+":"+strings.Repeat("p", 6000))},
		"Digest":                    {"Authorization", `Digest username="admin", realm="restricted", response="x"`},
		"Proxy-Authorization only":  {"Proxy-Authorization", "Basic " + right},
		"X-Forwarded-User":          {"X-Forwarded-User", adminUser, "X-Remote-User", adminUser},
	}
	try := func(what, method, path, ct, body string) {
		t.Helper()
		for name, hdr := range bad {
			h := append([]string(nil), hdr...)
			if ct != "" {
				h = append(h, "Content-Type", ct)
			}
			a := rawREST(t, method, path, body, h...)
			if a.status != 401 || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("%s, %s: %d, WWW-Authenticate %q (body %q)", what, name, a.status, a.header.Get("WWW-Authenticate"), truncate(a.body))
			}
		}
		// Two Authorization headers, the first wrong: the first counts.
		req, _ := http.NewRequest(method, restURL(path), strings.NewReader(body))
		req.Header.Add("Authorization", "Basic "+b64(adminUser+":wrong"))
		req.Header.Add("Authorization", "Basic "+right)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s, wrong then right Authorization: %d", what, resp.StatusCode)
		}
	}
	e.f.set("", 300*time.Millisecond)
	slow := e.slowTask("test:a")
	try("GET task", "GET", "/rest/tasks/1.json", "", "")
	try("POST seed", "POST", "/rest/seed/test:a.json", "application/json", tinySeedJ)
	try("POST truncate", "POST", "/rest/seed/test:a.xml", "text/xml", `<seedRequest><zoomStart>1</zoomStart><zoomStop>1</zoomStop><type>truncate</type></seedRequest>`)
	try("POST kill", "POST", "/rest/seed", formCT, "kill_all=all")
	try("POST layer kill", "POST", "/rest/seed/test:a", formCT, "kill_all=all")
	try("POST truncateLayer", "POST", "/rest/masstruncate", "text/xml", truncA)
	try("POST truncateExtent", "POST", "/rest/masstruncate", "text/xml", `<truncateExtent><layerName>test:a</layerName><gridSetId>EPSG:4326</gridSetId></truncateExtent>`)
	try("DELETE", "DELETE", "/rest/seed/test:a.json", "", "")
	try("PUT", "PUT", "/rest/masstruncate", "text/xml", truncA)
	if got := ids(listing(t, "/rest/seed.json")); !reflect.DeepEqual(got, []int64{taskID(t, slow)}) {
		t.Errorf("after the unauthenticated requests the listing is %v", got)
	}
	if st := e.task(slow).Status; st != 1 {
		t.Errorf("the running task's status is %d", st)
	}
	if r := tileResult(t, "test:a", "EPSG:4326", 0, 0, 1); r != "HIT" {
		t.Errorf("after the unauthenticated truncates the tile is %s", r)
	}
	// The scheme is case-insensitive (RFC 9110): lowercase basic with the
	// right credentials is let in.
	a := rawREST(t, "GET", "/rest/seed.json", "", "Authorization", "basic "+right)
	if a.status != 200 {
		t.Errorf("lowercase basic, right credentials: %d", a.status)
	}
}
