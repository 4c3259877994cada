package caddytest

import (
	"fmt"
	"net/url"
	"strings"
)

// siteConfig is the one site layout the tests load, as docs/rest.md's
// example has it: the REST interface (optional) under handle_path behind
// basic_auth, then tile_cache, then reverse_proxy for everything that is
// not a cached tile.
type siteConfig struct {
	port int // default httpPort
	// admin: the tile_cache_admin block's body; nil leaves the REST
	// interface out. adminPath defaults to /geowebcache.
	admin     *string
	adminPath string
	// tiles is the tile_cache block's body.
	tiles string
	// mount puts tile_cache and the proxy under handle_path <mount>/*.
	mount string
	// upstream is the WMS URL whose host the reverse_proxy sends the
	// rest to ("": no reverse_proxy).
	upstream string
	// forward is how the proxy tells the upstream the address clients
	// used, so that its capabilities name this site: each upstream has
	// its own recipe (docs/upstreams.md). Default MapServer's.
	forward forwarding
}

// forwarding is one upstream's forwarded-headers recipe.
type forwarding int

const (
	// MapServer: the host and the port apart; it reads X-Forwarded-Port,
	// and appends its own port to an X-Forwarded-Host that has one.
	forwardMapServer forwarding = iota
	// QGIS Server: the host with its port; it ignores X-Forwarded-Port.
	forwardQGIS
	// QGIS Server, the whole address of the service in one header,
	// path included: what it needs under a handle_path prefix.
	forwardQGISServiceURL
)

// lines are the recipe's Caddyfile lines inside the site's handle block,
// with the reverse_proxy to host: exactly what docs/upstreams.md shows.
func (f forwarding) lines(host string) string {
	switch f {
	case forwardQGIS:
		// Caddy's own X-Forwarded-Host has the port; a client's QGIS
		// address headers are taken out.
		return "reverse_proxy " + host + " {\n\theader_up -X-Qgis-*\n\theader_up -Forwarded\n}"
	case forwardQGISServiceURL:
		return "request_header -X-Qgis-*\nreverse_proxy " + host + " {\n\theader_up X-Qgis-Service-Url {scheme}://{hostport}{http.request.orig_uri.path}\n}"
	}
	return "map {http.request.scheme}:{http.request.port} {forwarded_port} {\n\thttp: 80\n\thttps: 443\n\tdefault {http.request.port}\n}\n" +
		"reverse_proxy " + host + " {\n\theader_up X-Forwarded-Host \":[0-9]+$\" \"\"\n\theader_up X-Forwarded-Port {forwarded_port}\n}"
}

func (s siteConfig) String() string {
	port := s.port
	if port == 0 {
		port = httpPort
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nhttp://localhost:%d {\n", port)
	if s.admin != nil {
		path := s.adminPath
		if path == "" {
			path = "/geowebcache"
		}
		fmt.Fprintf(&b, "\thandle_path %s/* {\n\t\tbasic_auth {\n\t\t\t%s %s\n\t\t}\n\t\ttile_cache_admin {\n\t\t\t%s\n\t\t}\n\t}\n",
			path, adminUser, adminHash(), indent(*s.admin, 3))
	}
	open := "\thandle {\n"
	if s.mount != "" {
		open = "\thandle_path " + s.mount + "/* {\n"
	}
	b.WriteString(open)
	fmt.Fprintf(&b, "\t\ttile_cache {\n\t\t\t%s\n\t\t}\n", indent(s.tiles, 3))
	if s.upstream != "" {
		u, _ := url.Parse(s.upstream)
		fmt.Fprintf(&b, "\t\t%s\n", indentAll(s.forward.lines(u.Host), 2))
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// indent puts every line after the first at the given depth of tabs.
func indent(s string, depth int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = strings.Repeat("\t", depth) + strings.TrimLeft(lines[i], "\t ")
	}
	return strings.Join(lines, "\n")
}

// indentAll puts every line after the first at the given depth of tabs,
// keeping the tabs the lines have.
func indentAll(s string, depth int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat("\t", depth))
}

func ptr(s string) *string { return &s }
