// Package httpx holds the HTTP helpers the plugin's handlers share: the
// one-line plain-text answers every error gets, and the absolute URL a
// handler is mounted at, which documents hand out.
package httpx

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Text answers with status and msg as one line of text/plain: line breaks
// in msg become spaces, so a client or log reads exactly one line.
func Text(w http.ResponseWriter, status int, msg string) error {
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, err := fmt.Fprintln(w, msg)
	return err
}

// OriginalPath is the request's escaped path as the client sent it, before
// a handle_path or uri strip rewrote it.
func OriginalPath(r *http.Request) string {
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		return or.URL.EscapedPath()
	}
	return r.URL.EscapedPath()
}

// MountURL is scheme://host followed by the path prefix that Caddy
// stripped before the handler saw the request (handle_path), as the
// client addressed it; no trailing slash. The handler's own paths hang
// from it.
func MountURL(r *http.Request) string {
	cur, orig := r.URL.EscapedPath(), OriginalPath(r)
	mount := ""
	if strings.HasSuffix(orig, cur) {
		mount = strings.TrimSuffix(orig, cur)
	}
	return Origin(r) + strings.TrimRight(mount, "/")
}

// Origin is the request's scheme://host, as the client addressed it.
func Origin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}
