package tilecache

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/demo"
	"github.com/tilecache/caddy-tilecache/module/ogc"
)

// ServicesConfig turns on the other tile protocols and the demo page. Each
// field is a path prefix (matched against the request path as this handler
// sees it, i.e. after any handle_path stripped its own prefix); "" leaves
// the service off. Every request under a prefix is answered here and never
// reaches the next handler or the upstream.
type ServicesConfig struct {
	// WMTS 1.0.0, KVP at the prefix itself and REST below <prefix>/1.0.0/.
	WMTS string `json:"wmts,omitempty"`
	// TMS 1.0.0 at <prefix>/1.0.0/.
	TMS string `json:"tms,omitempty"`
	// XYZ (slippy map) tiles at <prefix>/<layer>/<gridset>/<z>/<x>/<y>.<ext>.
	XYZ string `json:"xyz,omitempty"`
	// Demo serves the demo page (package demo).
	Demo string `json:"demo,omitempty"`
}

// services is a handler's ServicesConfig compiled against its cache.
// Immutable.
type services struct {
	cache                *Cache
	wmts, tms, xyz, demo string // normalized prefixes, "" = off
	routes               []route
	demoPage             http.Handler // nil unless demo is on
	matrixSets           []*matrixSet // WMTS's view of the cache's gridsets
}

type route struct {
	prefix string
	serve  func(s *services, w http.ResponseWriter, r *http.Request, segs []string) error
}

func compileServices(cfg *ServicesConfig, c *Cache) (*services, error) {
	s := &services{cache: c, matrixSets: compileMatrixSets(c)}
	var err error
	for _, p := range []struct {
		name  string
		in    string
		out   *string
		serve func(s *services, w http.ResponseWriter, r *http.Request, segs []string) error
	}{
		{"wmts", cfg.WMTS, &s.wmts, (*services).serveWMTS},
		{"tms", cfg.TMS, &s.tms, (*services).serveTMS},
		{"xyz", cfg.XYZ, &s.xyz, (*services).serveXYZ},
		{"demo", cfg.Demo, &s.demo, (*services).serveDemo},
	} {
		if *p.out, err = normalizePrefix(p.name, p.in); err != nil {
			return nil, err
		}
		if *p.out == "" {
			continue
		}
		for _, rt := range s.routes {
			if rt.prefix == *p.out {
				return nil, fmt.Errorf("services: %s and another service share the prefix %s", p.name, *p.out)
			}
		}
		s.routes = append(s.routes, route{*p.out, p.serve})
	}
	// A longer prefix nested in a shorter one wins.
	sort.SliceStable(s.routes, func(i, j int) bool { return len(s.routes[i].prefix) > len(s.routes[j].prefix) })
	if s.demo != "" {
		info := s.demoInfo()
		s.demoPage = demo.Handler(s.demo, func() demo.Info { return info })
	}
	return s, nil
}

// normalizePrefix checks a configured prefix and drops a trailing slash.
func normalizePrefix(service, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("services: %s prefix %q must start with /", service, p)
	}
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "", fmt.Errorf("services: %s prefix / would take every request: give a path such as /%s", service, service)
	}
	if strings.ContainsAny(p, "?#") {
		return "", fmt.Errorf("services: %s prefix %q must be a plain path", service, p)
	}
	return p, nil
}

// serve answers WMTS, TMS, XYZ and demo-page requests; handled is false
// for anything else, which then goes on as a WMS request.
func (s *services) serve(w http.ResponseWriter, r *http.Request) (handled bool, err error) {
	p := r.URL.Path
	for _, rt := range s.routes {
		if p == rt.prefix || strings.HasPrefix(p, rt.prefix) && p[len(rt.prefix)] == '/' {
			return true, rt.serve(s, w, r, pathSegments(r, rt.prefix))
		}
	}
	return false, nil
}

// scanQuery reads the query of a WMTS, TMS or XYZ request: the names are
// the protocol's own parameters; a fault is a 400.
func (s *services) scanQuery(raw string, names []string, q *query) *svcError {
	fault, key := q.scan(raw, names, s.cache.neutral, s.cache.cfg.MaxParamLength)
	switch fault {
	case queryMalformed:
		return errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "",
			"malformed query string, or a parameter name or value longer than %d bytes", s.cache.cfg.MaxParamLength)
	case queryDuplicate:
		return errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, key, "parameter %s given more than once", key)
	case queryTooMany:
		return errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, key, "more than %d parameters besides the protocol's own", maxExtra)
	}
	return nil
}

// filterError words a parameter the layer's filters do not accept as a 400.
func filterError(l *Layer, e *paramError) *svcError {
	if e.err != nil {
		return errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, e.key, "%v", e.err)
	}
	return errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, e.key, "layer %s has no parameter filter for %s", l.Name, e.key)
}
