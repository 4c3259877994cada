package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/seeder"
)

// tileList accepts POST rest/seed/<layer>/tiles: a list of tiles in the
// body, one per line (z/x/y as osm2pgsql and imposm write expire files,
// or z x y), read as it streams in, and everything else in the query
// string: type, gridSetId, format, threadCount, scheme, parents,
// children, allParameters, parameter_<NAME>, and the retry fields of a
// seed request. The body is not bounded by max_body (an expire list is
// easily tens of MB); its tile lines are, by max_list_lines, and its blank
// and comment lines by as many again.
func (h *Handler) tileList(w http.ResponseWriter, r *http.Request, rt route) error {
	req, lr, err := listQuery(r.URL.Query())
	if err == nil {
		err = h.checkParams(req.Params)
	}
	if err != nil {
		return httpx.Text(w, http.StatusBadRequest, err.Error())
	}
	lr.MaxLines = h.MaxListLines
	spec, err := h.engine.ResolveList(rt.layer, req, lr, r.Body)
	return h.submit(w, r, spec, err)
}

// listQuery reads a tile list request's query string; an unknown name is
// an error, so that a typo is not silently a different task.
func listQuery(q url.Values) (seeder.Request, seeder.ListRequest, error) {
	var req seeder.Request
	var lr seeder.ListRequest
	intOf := func(name, v string) (*int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, badBody("%s must be an integer, not %q", name, truncated(v))
		}
		return &n, nil
	}
	for name, vs := range q {
		if len(vs) != 1 {
			return req, lr, badBody("%s is given %d times", truncated(name), len(vs))
		}
		v := vs[0]
		var err error
		switch {
		case name == "type":
			req.Type = v
		case name == "gridSetId":
			req.GridsetID = v
		case name == "format":
			req.Format = v
		case name == "scheme":
			lr.Scheme = v
		case name == "threadCount":
			req.ThreadCount, err = intOf(name, v)
		case name == "parents":
			lr.Parents, err = intOf(name, v)
		case name == "children":
			lr.Children, err = intOf(name, v)
		case name == "tileFailureRetryCount":
			req.RetryCount, err = intOf(name, v)
		case name == "tileFailureRetryWaitTime":
			var n *int
			if n, err = intOf(name, v); err == nil {
				req.RetryWaitMS = widen(n)
			}
		case name == "totalFailuresBeforeAborting":
			var n *int
			if n, err = intOf(name, v); err == nil {
				req.MaxFailures = widen(n)
			}
		case name == "allParameters":
			if req.AllParams, err = strconv.ParseBool(v); err != nil {
				err = badBody("allParameters must be true or false")
			}
		case name == "exportFormat":
			req.ExportFormat = v
		case name == "cachedOnly":
			if req.CachedOnly, err = strconv.ParseBool(v); err != nil {
				err = badBody("cachedOnly must be true or false")
			}
		case strings.HasPrefix(name, "parameter_") && len(name) > len("parameter_"):
			if req.Params == nil {
				req.Params = map[string]string{}
			}
			req.Params[strings.TrimPrefix(name, "parameter_")] = v
		default:
			err = badBody("unknown query parameter %q: type, gridSetId, format, threadCount, scheme, parents, children, allParameters, exportFormat, cachedOnly, parameter_<NAME> and the retry fields are expected", truncated(name))
		}
		if err != nil {
			return req, lr, err
		}
	}
	if req.Type == "" {
		return req, lr, fmt.Errorf("%w", badBody("type is required: seed, reseed or truncate"))
	}
	return req, lr, nil
}
