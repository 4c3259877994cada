package caddytest

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// TestUpstreamCapabilitiesNameTheCache fetches each real upstream's own
// WMS capabilities through the site, proxied with that upstream's
// forwarded-headers recipe (docs/upstreams.md), and follows the GetMap
// address they advertise: it must be this site (not the upstream, nor
// host:port:upstream-port, nor the site without its port), every address
// in them must be, and a tile GetMap sent there must be answered by the
// cache.
func TestUpstreamCapabilitiesNameTheCache(t *testing.T) {
	site := fmt.Sprintf("localhost:%d", httpPort)
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		load(t, upstreamConfig(u, up, storageDir(t), "4 4"))
		for _, c := range []struct {
			version, host, want string
		}{
			{"1.1.1", site, "http://" + site + "/wms?"},
			{"1.3.0", site, "http://" + site + "/wms?"},
			// A Host without a port: the scheme's default, which both
			// upstreams leave out.
			{"1.3.0", "localhost", "http://localhost/wms?"},
		} {
			href, all := capsGetMapURL(t, "/wms", c.version, c.host)
			if href != c.want {
				t.Errorf("WMS %s capabilities for Host %s advertise GetMap at %q, want %q", c.version, c.host, href, c.want)
				continue
			}
			for _, h := range all {
				if !strings.HasPrefix(h, strings.TrimSuffix(c.want, "?")) {
					t.Errorf("WMS %s capabilities for Host %s advertise %q", c.version, c.host, h)
				}
			}
			if c.host != site {
				continue // nothing listens on port 80 to follow it to
			}
			followToHit(t, href, c.version)
		}
	})

	// QGIS Server ignores X-Forwarded-Port: behind MapServer's recipe it
	// advertises the site without its port. This is why the recipe is
	// per upstream.
	up := qgisServer(t)
	qgis := realUpstreams()[1]
	qgis.forward = forwardMapServer
	load(t, upstreamConfig(qgis, up, storageDir(t), "4 4"))
	if href, _ := capsGetMapURL(t, "/wms", "1.3.0", site); href != "http://localhost/wms?" {
		t.Errorf("QGIS Server behind MapServer's recipe advertises %q; docs/upstreams.md says http://localhost/wms?", href)
	}

	// Under a path prefix (handle_path /maps/*), QGIS Server sees /wms:
	// X-Qgis-Service-Url tells it the whole address of the service.
	load(t, siteConfig{upstream: up, forward: forwardQGISServiceURL, mount: "/maps", tiles: `
		upstream ` + up + `
		storage ` + storeLines(storageDir(t)) + `
		layer test:polygons {
			gridsets EPSG:4326
			param STYLES {
				default default
				values default population
			}
		}`}.String())
	for _, v := range []string{"1.1.1", "1.3.0"} {
		href, all := capsGetMapURL(t, "/maps/wms", v, site)
		want := "http://" + site + "/maps/wms?"
		if href != want || len(all) < 7 {
			t.Errorf("QGIS Server under /maps, WMS %s: GetMap at %q (%d addresses), want %q", v, href, len(all), want)
			continue
		}
		for _, h := range all {
			if !strings.HasPrefix(h, "http://"+site+"/maps/wms") {
				t.Errorf("QGIS Server under /maps, WMS %s advertises %q", v, h)
			}
		}
		followToHit(t, href, v)
	}
}

// followToHit sends a tile GetMap of test:polygons (level 2) to an
// advertised GetMap address, the way a client appends its parameters, and
// wants the cache to answer it, then to answer it again from the store.
func followToHit(t *testing.T, href, version string) {
	t.Helper()
	u, err := url.Parse(href)
	if err != nil || u.Host != fmt.Sprintf("localhost:%d", httpPort) {
		t.Fatalf("advertised %q does not name this site", href)
	}
	q := tileQuery("test:polygons", "EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 2}, "STYLES", "default")
	if version == "1.3.0" {
		q.Set("VERSION", "1.3.0")
		q.Set("CRS", q.Get("SRS"))
		q.Del("SRS")
		b := strings.Split(q.Get("BBOX"), ",") // lat,lon for EPSG:4326 in 1.3.0
		q.Set("BBOX", strings.Join([]string{b[1], b[0], b[3], b[2]}, ","))
	}
	first := get(t, href+q.Encode())
	if first.status != 200 || first.header.Get("Geowebcache-Cache-Result") == "" {
		t.Fatalf("GetMap on the advertised URL: %d, cache result %q (%s)", first.status,
			first.header.Get("Geowebcache-Cache-Result"), first.header.Get("Cache-Status"))
	}
	mustTile(t, get(t, href+q.Encode()), "HIT")
}

var hrefRE = regexp.MustCompile(`xlink:href="([^"]*)"`)

// capsGetMapURL fetches the WMS capabilities through the site at path
// with the given Host header and returns the GetMap OnlineResource they
// advertise, and every xlink:href in them.
func capsGetMapURL(t *testing.T, path, version, host string) (string, []string) {
	t.Helper()
	req, err := http.NewRequest("GET", fmt.Sprintf("http://localhost:%d%s?SERVICE=WMS&REQUEST=GetCapabilities&VERSION=%s", httpPort, path, version), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("capabilities %s: %d %s", version, resp.StatusCode, truncate(body))
	}
	var doc struct {
		Href struct {
			Href string `xml:"http://www.w3.org/1999/xlink href,attr"`
		} `xml:"Capability>Request>GetMap>DCPType>HTTP>Get>OnlineResource"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("capabilities %s do not parse: %v", version, err)
	}
	var all []string
	for _, m := range hrefRE.FindAllSubmatch(body, -1) {
		all = append(all, strings.ReplaceAll(string(m[1]), "&amp;", "&"))
	}
	return doc.Href.Href, all
}
