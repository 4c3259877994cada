package tilecache

import (
	"net/http"
	"strconv"
	"strings"
	"time"

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
	var etagBuf [18]byte
	etagBuf[0] = '"'
	etag := strconv.AppendUint(etagBuf[:1], t.ETag, 16)
	etag = append(etag, '"')
	etagStr := string(etag)
	modified := t.StoredAt.UTC().Truncate(time.Second)
	lastMod := modified.Format(http.TimeFormat)
	idx := tr.index
	h["Etag"] = []string{etagStr}
	h["Last-Modified"] = []string{lastMod}
	if tr.layer.cacheControl != nil {
		h["Cache-Control"] = tr.layer.cacheControl
	}
	h["Cache-Status"] = cacheStatus
	h["Geowebcache-Cache-Result"] = result
	h["Geowebcache-Tile-Index"] = []string{"[" + strconv.FormatInt(idx.X, 10) + ", " +
		strconv.FormatInt(idx.Y, 10) + ", " + strconv.Itoa(idx.Z) + "]"}
	h["Geowebcache-Gridset"] = tr.grid.nameHeader
	h["Geowebcache-Crs"] = tr.grid.crsHeader
	if notModified(r, etagStr, modified) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h["Content-Type"] = tr.format.contentType
	h["Content-Length"] = []string{strconv.Itoa(len(t.Data))}
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
