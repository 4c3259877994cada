package tilecache

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/ogc"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Cache-Status (RFC 9211) values, one per outcome.
var (
	statusHit     = []string{"tile_cache; hit"}
	statusMiss    = []string{"tile_cache; fwd=miss; stored"}
	statusStale   = []string{"tile_cache; hit; detail=stale-upstream-failed"}
	statusNoStore = []string{"tile_cache; fwd=miss; detail=store-failed"}
	resultHit     = []string{"HIT"}
	resultMiss    = []string{"MISS"}
)

// writeTile answers with a tile. It sets headers by direct map assignment of
// precomputed values: this is the cache-hit path, and Header.Set would
// canonicalise and allocate for every header.
func writeTile(w http.ResponseWriter, r *http.Request, tr *tileRequest, t store.Tile, cacheStatus, result []string) {
	h := w.Header()
	// The four per-tile header values are built in one buffer, turned into
	// one string and sliced: two allocations instead of ten.
	modified := t.StoredAt.UTC().Truncate(time.Second)
	idx := tr.index
	var buf [160]byte
	b := append(buf[:0], '"')
	b = strconv.AppendUint(b, t.ETag, 16)
	b = append(b, '"')
	endETag := len(b)
	b = modified.AppendFormat(b, http.TimeFormat)
	endMod := len(b)
	b = append(b, '[')
	b = strconv.AppendInt(b, idx.X, 10)
	b = append(b, ", "...)
	b = strconv.AppendInt(b, idx.Y, 10)
	b = append(b, ", "...)
	b = strconv.AppendInt(b, int64(idx.Z), 10)
	b = append(b, ']')
	endIdx := len(b)
	b = strconv.AppendInt(b, int64(len(t.Data)), 10)
	all := string(b)
	v := &[4]string{all[:endETag], all[endETag:endMod], all[endMod:endIdx], all[endIdx:]}
	h["Etag"] = v[0:1:1]
	h["Last-Modified"] = v[1:2:2]
	if tr.layer.cacheControl != nil {
		h["Cache-Control"] = tr.layer.cacheControl
	}
	h["Cache-Status"] = cacheStatus
	h["Geowebcache-Cache-Result"] = result
	h["Geowebcache-Tile-Index"] = v[2:3:3]
	h["Geowebcache-Gridset"] = tr.grid.nameHeader
	h["Geowebcache-Crs"] = tr.grid.crsHeader
	if notModified(r, v[0], modified) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h["Content-Type"] = tr.format.contentTypeOf(t.Data)
	h["Content-Length"] = v[3:4:4]
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(t.Data)
	}
}

// notModified applies RFC 9110's conditional GET rules: If-None-Match when
// present, else If-Modified-Since.
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for inm != "" {
			var tag string
			tag, inm, _ = strings.Cut(inm, ",")
			tag = strings.TrimSpace(tag)
			tag = strings.TrimPrefix(tag, "W/") // weak comparison
			if tag == "*" || tag == etag {
				return true
			}
		}
		return false
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		t, err := http.ParseTime(ims)
		return err == nil && !modified.After(t)
	}
	return false
}

// svcError is a request the services cannot answer with a tile or a
// document: the status, and for WMTS the OWS exception code and locator.
type svcError struct {
	status  int
	code    string
	locator string
	msg     string
}

func (e *svcError) Error() string { return e.msg }

func errorf(status int, code, locator, format string, a ...any) *svcError {
	return &svcError{status: status, code: code, locator: locator, msg: fmt.Sprintf(format, a...)}
}

// writeText answers a TMS or XYZ error: one line of text/plain.
func writeText(w http.ResponseWriter, e *svcError) {
	httpx.Text(w, e.status, "tile_cache: "+e.msg)
}

// writeXML answers with a document.
func writeXML(w http.ResponseWriter, r *http.Request, status int, doc any) error {
	b, err := ogc.Marshal(doc)
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/xml; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return nil
}

// methodAllowed answers 405 to anything but GET and HEAD.
func methodAllowed(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeText(w, errorf(http.StatusMethodNotAllowed, "", "", "method %s not allowed: GET or HEAD", r.Method))
	return false
}
