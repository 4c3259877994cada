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
		// As Caddyfile.example proxies: the forwarded host and port apart,
		// so that MapServer's capabilities name this site.
		u, _ := url.Parse(s.upstream)
		fmt.Fprintf(&b, "\t\tmap {http.request.scheme}:{http.request.port} {forwarded_port} {\n"+
			"\t\t\thttp: 80\n\t\t\thttps: 443\n\t\t\tdefault {http.request.port}\n\t\t}\n"+
			"\t\treverse_proxy %s {\n\t\t\theader_up X-Forwarded-Host {host}\n"+
			"\t\t\theader_up X-Forwarded-Port {forwarded_port}\n\t\t}\n", u.Host)
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

func ptr(s string) *string { return &s }
