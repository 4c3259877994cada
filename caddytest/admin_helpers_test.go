package caddytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/tilecache/caddy-tilecache/seeder"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const (
	adminUser = "admin"
	adminPass = "geoserver"
)

// adminHash is a bcrypt hash of adminPass at a low cost: the tests make
// hundreds of authenticated requests.
var adminHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(adminPass), 4)
	if err != nil {
		panic(err)
	}
	return string(h)
})

// adminConfig is a site with the REST interface under /geowebcache behind
// basic_auth (handle_path strips the prefix), and public tiles elsewhere.
// Its upstream timeout is far beyond any fake WMS delay: beside CPU hogs a
// metatile took over 2 s, timed out, and its retry was one GetMap more
// than a test counting them expects. (The fault tests have 500 ms.)
func adminConfig(t *testing.T, f *fakeWMS, storage, adminOpts, layers string) string {
	if layers == "" {
		layers = `
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
	}
	return siteConfig{admin: ptr(adminOpts), upstream: f.URL, tiles: `
		upstream ` + f.URL + `/wms
		storage ` + storeLines(storage) + `
		timeout 30s
		` + layers}.String()
}

func restURL(path string) string {
	return fmt.Sprintf("http://localhost:%d/geowebcache%s", httpPort, path)
}

// rest sends an authenticated request to the REST interface.
func rest(t *testing.T, method, path, contentType, body string) answer {
	t.Helper()
	return restAs(t, adminUser, adminPass, method, path, contentType, body)
}

func restAs(t *testing.T, user, pass, method, path, contentType, body string) answer {
	t.Helper()
	var hdr []string
	if user != "" {
		hdr = append(hdr, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	}
	if contentType != "" {
		hdr = append(hdr, "Content-Type", contentType)
	}
	return rawREST(t, method, path, body, hdr...)
}

// taskInfo is the task resource's JSON: the seeder's own type.
type taskInfo = seeder.Info

// submit POSTs a seed request and returns the task's resource path.
func submit(t *testing.T, layer, ext, body string) string {
	t.Helper()
	ct := "application/json"
	if ext == "xml" {
		ct = "text/xml"
	}
	a := rest(t, "POST", "/rest/seed/"+layer+"."+ext, ct, body)
	if a.status != 200 || len(a.body) != 0 {
		t.Fatalf("seed POST: %d %q", a.status, a.body)
	}
	loc := a.header.Get("Location")
	prefix := restURL("")
	if !strings.HasPrefix(loc, prefix+"/rest/tasks/") {
		t.Fatalf("Location %q does not name a task under %s", loc, prefix)
	}
	return strings.TrimPrefix(loc, prefix)
}

func task(t *testing.T, path string) taskInfo {
	t.Helper()
	a := rest(t, "GET", path, "", "")
	if a.status != 200 {
		t.Fatalf("GET %s: %d %q", path, a.status, a.body)
	}
	var ti taskInfo
	if err := json.Unmarshal(a.body, &ti); err != nil {
		t.Fatalf("task JSON: %v: %s", err, a.body)
	}
	return ti
}

// waitTask polls a task until it reaches a final state. The bound is
// only there to end a test that hangs: a seed of a few thousand tiles takes
// seconds on a quiet machine and has taken over a minute beside CPU hogs
// (58 tiles/s), so it is five minutes, not a speed.
func waitTask(t *testing.T, path string) taskInfo {
	t.Helper()
	deadline := time.Now().Add(taskPatience)
	for {
		ti := task(t, path)
		if ti.Status == 2 || ti.Status == -1 {
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after %v: %+v", path, ti.State, taskPatience, ti)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// taskPatience bounds waitTask.
const taskPatience = 5 * time.Minute

// listing GETs a task listing and decodes it.
func listing(t *testing.T, path string) [][5]int64 {
	t.Helper()
	a := rest(t, "GET", path, "", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %q %q", path, a.status, a.header.Get("Content-Type"), a.body)
	}
	var l struct {
		L [][5]int64 `json:"long-array-array"`
	}
	if err := json.Unmarshal(a.body, &l); err != nil || l.L == nil {
		t.Fatalf("listing JSON %q: %v", a.body, err)
	}
	return l.L
}
