package tilecache

import (
	"net/url"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/params"
)

// query is a request's query string split without allocating: the
// protocol's own parameters (WMS-C's GetMap keys, WMTS's KVP keys, STYLES
// for TMS and XYZ) by position in the caller's list of names, and the
// others, which only a layer's parameter filters can accept. WMS-C, WMTS,
// TMS and XYZ all read their queries through it, so every protocol treats
// a parameter the same way.
type query struct {
	fields [maxFields]string
	seen   [maxFields]bool
	// A fixed array keeps the query on the stack; more extra parameters
	// than fit is more than any layer here filters.
	extra  [maxExtra]param
	nExtra int
}

const (
	maxFields = 16
	maxExtra  = 8
)

type param struct{ key, value string }

// Why a query could not be read.
type queryFault int

const (
	queryOK        queryFault = iota
	queryMalformed            // bad escaping, or a name or value over the length limit
	queryDuplicate            // a name given twice
	queryTooMany              // more extra parameters than fit
)

// scan reads raw. names are the protocol's own parameters (upper case),
// neutral those that change nothing about a tile and are dropped, limit
// the longest name or value accepted. Names compare case-insensitively.
// On a fault, key is the parameter at fault.
func (q *query) scan(raw string, names []string, neutral []string, limit int) (fault queryFault, key string) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, ok1 := unescape(k)
		v, ok2 := unescape(v)
		if !ok1 || !ok2 || len(k) > limit || len(v) > limit {
			return queryMalformed, k
		}
		if i := indexFold(names, k); i >= 0 {
			if q.seen[i] {
				return queryDuplicate, k
			}
			q.fields[i], q.seen[i] = v, true
			continue
		}
		if indexFold(neutral, k) >= 0 {
			continue
		}
		for _, p := range q.extra[:q.nExtra] {
			if strings.EqualFold(p.key, k) {
				return queryDuplicate, k
			}
		}
		if q.nExtra == maxExtra {
			return queryTooMany, k
		}
		q.extra[q.nExtra] = param{k, v}
		q.nExtra++
	}
	return queryOK, ""
}

// extras are the parameters that are neither the protocol's nor neutral.
func (q *query) extras() []param { return q.extra[:q.nExtra] }

func unescape(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

func indexFold(names []string, k string) int {
	for i, n := range names {
		if len(n) == len(k) && strings.EqualFold(n, k) {
			return i
		}
	}
	return -1
}

// paramError says why parameters do not name a tile set of a layer.
type paramError struct {
	// unknown: the layer has no filter for key; else a filter rejects
	// the value (err says why), or STYLES went to a layer without a
	// STYLES filter.
	unknown bool
	key     string
	err     error
}

func (e *paramError) Error() string {
	switch {
	case e.unknown:
		return "no parameter filter for " + e.key
	case e.err != nil:
		return e.err.Error()
	}
	return "no parameter filter for " + e.key
}

// filter runs a request's STYLES value and extra parameters through the
// layer's parameter filters, whichever protocol asked, so the same values
// always give the same tile set. An empty STYLES is no style. A standard
// WMS parameter the layer does not filter is dropped when its value is
// the one that leaves the image as cached (standardDefault), and refused
// otherwise. A request with neither STYLES nor filtered parameters (the
// common case) costs nothing.
func (l *Layer) filter(styles string, extra []param) (params.Values, *paramError) {
	if styles != "" && !l.Params.Has("STYLES") {
		return params.Values{}, &paramError{key: "STYLES"}
	}
	filtered := 0
	for _, p := range extra {
		switch {
		case l.Params.Has(p.key):
			filtered++
		case !standardDefault(l, p):
			return params.Values{}, &paramError{unknown: true, key: p.key}
		}
	}
	if filtered == 0 && styles == "" {
		return l.Params.Defaults(), nil
	}
	raw := make(map[string]string, filtered+1)
	if styles != "" {
		raw["STYLES"] = styles
	}
	for _, p := range extra {
		if l.Params.Has(p.key) {
			raw[p.key] = p.value
		}
	}
	v, err := l.Params.Normalize(raw)
	if err != nil {
		return params.Values{}, &paramError{err: err}
	}
	return v, nil
}

// standardDefault reports whether p is a standard GetMap parameter whose
// value leaves the image exactly as the layer's tiles were rendered, so a
// tile answers it. Clients send these on every request whether they
// matter or not (OWSLib always sends BGCOLOR=0xFFFFFF, QGIS an empty
// SLD_VERSION); any other value changes the picture and is the upstream's
// to answer. EXCEPTIONS and TRANSPARENT (any value) are neutral, see
// defaultNeutral.
func standardDefault(l *Layer, p param) bool {
	switch {
	case strings.EqualFold(p.key, "BGCOLOR"):
		// WMS's own default background, which tiles are fetched with. Not
		// an empty value: MapServer reads that as black.
		return strings.EqualFold(p.value, "0xFFFFFF")
	case strings.EqualFold(p.key, "SLD_VERSION"):
		// Says how to read an SLD; without one (SLD and SLD_BODY are
		// not standard defaults, so a request with one never gets here
		// unless the layer filters it) it changes nothing.
		return !l.Params.Has("SLD") && !l.Params.Has("SLD_BODY")
	}
	return false
}
