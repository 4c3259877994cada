package caddytest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// TestUpstreamCapabilitiesNameTheCache fetches each real upstream's own
// WMS capabilities through the site, proxied with that upstream's
// forwarded-headers recipe as docs/upstreams.md shows it, and follows the
// GetMap address they advertise: it must be this site (not the upstream,
// nor host:port:upstream-port, nor the site without its port), every
// address in them must be, whatever forwarding headers the client sends
// itself, and a tile GetMap sent there must be answered by the cache.
func TestUpstreamCapabilitiesNameTheCache(t *testing.T) {
	site := fmt.Sprintf("localhost:%d", httpPort)
	o := origin{"http://" + site, client}
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		load(t, recipeSite(t, "http://"+site, docsRecipe(t, docsSection[u.name], 0), up, rootTiles(t, up)))
		for _, c := range []struct {
			version, host, want string
		}{
			{"1.1.1", site, "http://" + site + "/wms?"},
			{"1.3.0", site, "http://" + site + "/wms?"},
			// A Host without a port: the scheme's default, which both
			// upstreams leave out.
			{"1.3.0", "localhost", "http://localhost/wms?"},
		} {
			if href := wantCaps(t, o, "/wms", c.version, c.host, c.want); href != "" && c.host == site {
				followToHit(t, o, href, c.version) // nothing listens on port 80 to follow the other
			}
		}
	})

	// Each part below is a subtest of its own: load stops a test that has
	// failed before, and one upstream's failure must not hide the others.
	t.Run("QGIS behind MapServer's recipe", func(t *testing.T) {
		// QGIS Server ignores X-Forwarded-Port: it advertises the site
		// without its port. This is why the recipe is per upstream.
		up := qgisServer(t)
		load(t, recipeSite(t, "http://"+site, docsRecipe(t, "MapServer", 0), up, rootTiles(t, up)))
		if href, _ := capsAt(t, o, "/wms", "1.3.0", site); href != "http://localhost/wms?" {
			t.Errorf("QGIS Server behind MapServer's recipe advertises %q; docs/upstreams.md says http://localhost/wms?", href)
		}
	})
	t.Run("QGIS behind a bare reverse_proxy", func(t *testing.T) {
		// What the QGIS recipe removes is what QGIS Server would
		// otherwise take from a client: each of these headers alone
		// makes it advertise the client's address.
		up := qgisServer(t)
		load(t, recipeSite(t, "http://"+site, "reverse_proxy 127.0.0.1:18091", up, rootTiles(t, up)))
		for i := 0; i < 6; i += 2 {
			if href, _ := capsAt(t, o, "/wms", "1.3.0", site, clientHeaders[i:i+2]...); !strings.Contains(href, "evil.example") {
				t.Errorf("behind a bare reverse_proxy, QGIS Server ignores a client's %s: advertises %q", clientHeaders[i], href)
			}
		}
	})
	t.Run("QGIS under a path", func(t *testing.T) {
		// Under handle_path /maps/*, QGIS Server sees /wms:
		// X-Qgis-Service-Url tells it the whole address of the service.
		up := qgisServer(t)
		load(t, recipeSite(t, "http://"+site, docsRecipe(t, "QGIS Server", 1), up, pathTiles(t, up)))
		for _, v := range []string{"1.1.1", "1.3.0"} {
			if href := wantCaps(t, o, "/maps/wms", v, site, "http://"+site+"/maps/wms?"); href != "" {
				followToHit(t, o, href, v)
			}
		}
	})
}

// TestUpstreamCapabilitiesOverHTTPS is the same over TLS, with the same
// recipes: the capabilities name https://, from X-Forwarded-Proto (and
// {scheme} in the QGIS recipe under a path), and for a Host without a port
// the addresses have none either.
func TestUpstreamCapabilitiesOverHTTPS(t *testing.T) {
	const site = "localhost:9443"
	pki := storageDir(t) // kept until the suite ends: Caddy keeps using it until the next load
	head := globalOptions("storage file_system " + pki)
	if !strings.Contains(head, "auto_https off") {
		t.Fatalf("the global options no longer turn automatic HTTPS off; adapt this test:\n%s", head)
	}
	// Certificates from Caddy's local CA, kept in pki; no redirect server.
	head = strings.Replace(head, "auto_https off", "auto_https disable_redirects", 1)
	eachUpstream(t, func(t *testing.T, u realUpstream, up string) {
		loadWhole(t, head+recipeSite(t, "https://"+site, "tls internal\n"+docsRecipe(t, docsSection[u.name], 0), up, rootTiles(t, up)))
		o := tlsOrigin(t, "https://"+site, pki)
		for _, c := range []struct {
			version, host, want string
		}{
			{"1.1.1", site, "https://" + site + "/wms?"},
			{"1.3.0", site, "https://" + site + "/wms?"},
			{"1.3.0", "localhost", "https://localhost/wms?"},
		} {
			if href := wantCaps(t, o, "/wms", c.version, c.host, c.want); href != "" && c.host == site {
				followToHit(t, o, href, c.version)
			}
		}
	})
	t.Run("QGIS under a path", func(t *testing.T) {
		up := qgisServer(t)
		loadWhole(t, head+recipeSite(t, "https://"+site, "tls internal\n"+docsRecipe(t, "QGIS Server", 1), up, pathTiles(t, up)))
		o := tlsOrigin(t, "https://"+site, pki)
		for _, v := range []string{"1.1.1", "1.3.0"} {
			if href := wantCaps(t, o, "/maps/wms", v, site, "https://"+site+"/maps/wms?"); href != "" {
				followToHit(t, o, href, v)
			}
		}
	})
}

// clientHeaders are what a client may send to have an upstream advertise
// an address of its choosing (QGIS Server reads the first three before
// X-Forwarded-Host; MapServer the last three). Behind each recipe none
// may count: a shared HTTP cache in front of Caddy would keep such
// capabilities and serve them to everyone.
var clientHeaders = []string{
	"X-Qgis-Wms-Service-Url", "http://evil.example/wms",
	"X-Qgis-Service-Url", "http://evil.example/service",
	"Forwarded", "host=evil.example;proto=https",
	"X-Forwarded-Host", "evil.example",
	"X-Forwarded-Port", "666",
	"X-Forwarded-Proto", "ftp",
}

// docsSection is the heading of each upstream's recipe in docs/upstreams.md.
var docsSection = map[string]string{"MapServer": "MapServer", "QGIS": "QGIS Server"}

var headingRE = regexp.MustCompile(`\n##+ `)

// docsRecipe is the n-th Caddyfile block under the heading "### <section>"
// of docs/upstreams.md: the recipe exactly as a reader copies it.
func docsRecipe(t *testing.T, section string, n int) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/upstreams.md")
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(raw), "\n### "+section+"\n")
	if !ok {
		t.Fatalf("docs/upstreams.md has no section %q", section)
	}
	if end := headingRE.FindStringIndex(text); end != nil {
		text = text[:end[0]]
	}
	var blocks []string
	for _, m := range fenceRE.FindAllStringSubmatch(text, -1) {
		if m[1] == "caddyfile" {
			blocks = append(blocks, m[2])
		}
	}
	if n >= len(blocks) {
		t.Fatalf("docs/upstreams.md, %s: no Caddyfile block %d (%d blocks)", section, n, len(blocks))
	}
	return blocks[n]
}

// recipeSite is a site at addr with a recipe pointed at the upstream WMS
// up: the recipe's own tile_cache block, its body ("# ...") replaced by
// tiles, or else a tile_cache block with tiles before the recipe.
func recipeSite(t *testing.T, addr, recipe, up, tiles string) string {
	t.Helper()
	host := upstreamHost(t, up)
	docHost := regexp.MustCompile(`127\.0\.0\.1:180[89]1`)
	if !docHost.MatchString(recipe) {
		t.Fatalf("the recipe proxies to no upstream of the page (127.0.0.1:18081 or :18091):\n%s", recipe)
	}
	recipe = docHost.ReplaceAllLiteralString(recipe, host)
	if strings.Contains(recipe, "tile_cache") {
		if !strings.Contains(recipe, "# ...") {
			t.Fatalf("the recipe's tile_cache block has no \"# ...\" to fill:\n%s", recipe)
		}
		recipe = strings.Replace(recipe, "# ...", tiles, 1)
	} else {
		recipe = "tile_cache {\n" + tiles + "\n}\n" + recipe
	}
	return "\n" + addr + " {\n" + recipe + "\n}\n"
}

func upstreamHost(t *testing.T, up string) string {
	u, err := url.Parse(up)
	if err != nil || u.Host == "" {
		t.Fatalf("upstream %q: %v", up, err)
	}
	return u.Host
}

// rootTiles is the tile_cache body of a site at the root: test:polygons
// with both styles, as upstreamConfig has it.
func rootTiles(t *testing.T, up string) string {
	return `upstream ` + up + `
		storage ` + storeLines(storageDir(t)) + `
		timeout 60s
		layer test:polygons {
			gridsets EPSG:4326 EPSG:900913
			metatile 4 4
			param STYLES {
				default default
				values default population
			}
		}`
}

// pathTiles is the tile_cache body under /maps.
func pathTiles(t *testing.T, up string) string {
	return `upstream ` + up + `
		storage ` + storeLines(storageDir(t)) + `
		layer test:polygons {
			gridsets EPSG:4326
			param STYLES {
				default default
				values default population
			}
		}`
}

// origin is a site's scheme://host:port and a client that trusts it.
type origin struct {
	url    string
	client *http.Client
}

// tlsOrigin waits for the site's certificate from Caddy's local CA, whose
// root is in the storage at pki, and returns a client that trusts it.
func tlsOrigin(t *testing.T, site, pki string) origin {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if pem, rerr := os.ReadFile(filepath.Join(pki, "pki", "authorities", "local", "root.crt")); rerr != nil {
			err = rerr
		} else {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool}, DisableCompression: true}}
			var resp *http.Response
			if resp, err = c.Get(site + "/"); err == nil {
				resp.Body.Close()
				return origin{site, c}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer over TLS with the local CA's certificate: %v", site, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantCaps checks the capabilities at path for Host host, then again with
// the client's own forwarding headers: their GetMap address must be want,
// and every address must start like it. It returns the GetMap address, or
// "" after an error.
func wantCaps(t *testing.T, o origin, path, version, host, want string) string {
	t.Helper()
	for _, hdr := range [][]string{nil, clientHeaders} {
		href, all := capsAt(t, o, path, version, host, hdr...)
		with := ""
		if hdr != nil {
			with = " and the client's forwarding headers"
		}
		if href != want || len(all) < 7 {
			t.Errorf("%s: WMS %s capabilities for Host %s%s advertise GetMap at %q (%d addresses), want %q", path, version, host, with, href, len(all), want)
			return ""
		}
		for _, h := range all {
			if !strings.HasPrefix(h, strings.TrimSuffix(want, "?")) {
				t.Errorf("%s: WMS %s capabilities for Host %s%s advertise %q", path, version, host, with, h)
				return ""
			}
		}
	}
	return want
}

// followToHit sends a tile GetMap of test:polygons (level 2) to an
// advertised GetMap address, the way a client appends its parameters, and
// wants the cache to answer it, then to answer it again from the store.
func followToHit(t *testing.T, o origin, href, version string) {
	t.Helper()
	if !strings.HasPrefix(href, o.url+"/") {
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
	first := o.get(t, href+q.Encode())
	if first.status != 200 || first.header.Get("Geowebcache-Cache-Result") == "" {
		t.Fatalf("GetMap on the advertised URL: %d, cache result %q (%s)", first.status,
			first.header.Get("Geowebcache-Cache-Result"), first.header.Get("Cache-Status"))
	}
	mustTile(t, o.get(t, href+q.Encode()), "HIT")
}

func (o origin) get(t *testing.T, u string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := o.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, body}
}

var hrefRE = regexp.MustCompile(`xlink:href="([^"]*)"`)

// capsAt fetches the WMS capabilities through the site at path with the
// given Host and other headers, and returns the GetMap OnlineResource they
// advertise, and every xlink:href in them.
func capsAt(t *testing.T, o origin, path, version, host string, hdr ...string) (string, []string) {
	t.Helper()
	a := o.get(t, o.url+path+"?SERVICE=WMS&REQUEST=GetCapabilities&VERSION="+version, append([]string{"Host", host}, hdr...)...)
	if a.status != 200 {
		t.Fatalf("capabilities %s: %d %s", version, a.status, truncate(a.body))
	}
	var doc struct {
		Href struct {
			Href string `xml:"http://www.w3.org/1999/xlink href,attr"`
		} `xml:"Capability>Request>GetMap>DCPType>HTTP>Get>OnlineResource"`
	}
	if err := xml.Unmarshal(a.body, &doc); err != nil {
		t.Fatalf("capabilities %s do not parse: %v", version, err)
	}
	var all []string
	for _, m := range hrefRE.FindAllSubmatch(a.body, -1) {
		all = append(all, strings.ReplaceAll(string(m[1]), "&amp;", "&"))
	}
	return doc.Href.Href, all
}
