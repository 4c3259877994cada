package caddytest

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// A layer name the cache has and the upstream does not (a typo in
// upstream_layers): the operator sees the upstream's own words in the 502
// after the cache's message, in the failure's log line, and in the seed
// task's lastError. The answer is never cached: every request asks again.
func TestRealUpstreamReasonReachesTheOperator(t *testing.T) {
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		cnt := countGetMaps(t, up)
		logFile := filepath.Join(storageDir(t), "caddy.log")
		loadWhole(t, globalOptions(`log failures {
		output file `+logFile+`
		format json
		level ERROR
	}`)+siteConfig{admin: ptr("workers 1"), upstream: up, forward: u.forward, tiles: `
		upstream ` + cnt.URL + `
		storage ` + storeLines(storageDir(t)) + `
		timeout 60s
		layer typo:polygons {
			upstream_layers test:polygns
			gridsets EPSG:4326
		}`}.String())
		idx := gridset.Index{X: 1, Y: 0, Z: 1}
		for i := 1; i <= 2; i++ {
			a := get(t, siteURL(tileQuery("typo:polygons", "EPSG:4326", idx)))
			body := string(a.body)
			if a.status != 502 || !strings.HasPrefix(body, "tile_cache: the upstream WMS failed for this tile: upstream: GetMap answered HTTP ") ||
				!strings.Contains(body, ", saying: "+u.layerError) || strings.Count(body, "\n") != 1 {
				t.Errorf("tile #%d: %d %q\nwant the cache's message, then %q", i, a.status, body, u.layerError)
			}
			if n := len(cnt.getMaps()); n != i {
				t.Errorf("after tile request #%d the upstream had %d GetMaps: the failure was cached", i, n)
			}
			t.Logf("%s 502: %s", u.name, strings.TrimSpace(body))
		}

		// The log line, with the reason in the error and as a field.
		var logged map[string]any
		f, err := os.Open(logFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) == nil && e["msg"] == "metatile fetch failed" && e["layer"] == "typo:polygons" {
				logged = e
				t.Logf("%s log line: %s", u.name, sc.Bytes())
				break
			}
		}
		if r, _ := logged["upstream_reason"].(string); !strings.HasPrefix(r, u.layerError) ||
			!strings.Contains(logged["error"].(string), u.layerError) {
			t.Errorf("log line of the failure: %v", logged)
		}

		// A seed of levels 0 and 1 (10 tiles, 2 metatiles): DONE, all of
		// them failed, and the task says why in the upstream's words.
		ti := waitTask(t, submit(t, "typo:polygons", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":1,"type":"seed",`+
			`"tileFailureRetryCount":1,"tileFailureRetryWaitTime":10,"totalFailuresBeforeAborting":100}}`))
		if ti.State != "DONE" || ti.Total != 10 || ti.FailedTiles != 10 || !strings.Contains(ti.LastError, u.layerError) {
			t.Errorf("seed task %+v", ti)
		}
		t.Logf("%s task lastError: %s", u.name, ti.LastError)
	})
}
