package caddytest

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// TestUpstreamCapabilitiesNameTheCache fetches MapServer's own WMS
// capabilities through the site, configured as Caddyfile.example is, and
// follows the GetMap address they advertise: it must be this site (not
// host:port:upstream-port, as a plain reverse_proxy makes MapServer
// write), and a tile GetMap sent there must be answered by the cache.
func TestUpstreamCapabilitiesNameTheCache(t *testing.T) {
	up := mapServer(t)
	load(t, mapserverConfig(up, storageDir(t), "4 4"))
	site := fmt.Sprintf("localhost:%d", httpPort)
	for _, c := range []struct {
		version, host, want string
	}{
		{"1.1.1", site, "http://" + site + "/wms?"},
		{"1.3.0", site, "http://" + site + "/wms?"},
		// A Host without a port: the scheme's default, which MapServer
		// leaves out.
		{"1.3.0", "localhost", "http://localhost/wms?"},
	} {
		href := capsGetMapURL(t, c.version, c.host)
		if href != c.want {
			t.Errorf("WMS %s capabilities for Host %s advertise GetMap at %q, want %q", c.version, c.host, href, c.want)
			continue
		}
		if c.host != site {
			continue // nothing listens on port 80 to follow it to
		}
		// Follow it with a tile of level 2, the way a client appends its
		// parameters to the advertised address.
		u, err := url.Parse(href)
		if err != nil || u.Host != site {
			t.Fatalf("advertised %q does not name this site", href)
		}
		q := tileQuery("test:polygons", "EPSG:4326", gridset.Index{X: 5, Y: 2, Z: 2}, "STYLES", "default")
		if c.version == "1.3.0" {
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
}

// capsGetMapURL fetches the WMS capabilities through the site with the
// given Host header and returns the GetMap OnlineResource they advertise.
func capsGetMapURL(t *testing.T, version, host string) string {
	t.Helper()
	req, err := http.NewRequest("GET", fmt.Sprintf("http://localhost:%d/wms?SERVICE=WMS&REQUEST=GetCapabilities&VERSION=%s", httpPort, version), nil)
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
	return doc.Href.Href
}
