package tilecache

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/httpx"
)

// Paths and URLs of the services: what a request's path says, and the
// absolute URLs the documents hand out.

// pathSegments splits the path below prefix into unescaped segments: nil
// for the prefix itself, [""] for prefix + "/". It splits the escaped path,
// so a segment may hold an escaped slash (a gridset name with a "/").
func pathSegments(r *http.Request, prefix string) []string {
	n := strings.Count(prefix, "/") + 1 // segments of the prefix, the empty one before its "/" included
	esc := strings.Split(r.URL.EscapedPath(), "/")
	if len(esc) >= n {
		ok := true
		for i, p := range strings.Split(prefix, "/") {
			if u, err := url.PathUnescape(esc[i]); err != nil || u != p {
				ok = false
				break
			}
		}
		if ok {
			out := make([]string, 0, len(esc)-n)
			for _, e := range esc[n:] {
				u, err := url.PathUnescape(e)
				if err != nil {
					u = e
				}
				out = append(out, u)
			}
			if len(out) == 0 {
				return nil
			}
			return out
		}
	}
	rest := strings.TrimPrefix(r.URL.Path, prefix)
	if rest == "" {
		return nil
	}
	return strings.Split(rest[1:], "/")
}

// escapePath escapes each segment of a path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// serviceURL is the absolute URL of a service prefix for this request.
func serviceURL(r *http.Request, prefix string) string {
	return httpx.MountURL(r) + escapePath(prefix)
}

// relativePath is the relative reference from the directory dir (ending in
// "/") to the absolute path target, escaped.
func relativePath(dir, target string) string {
	from := strings.Split(strings.Trim(dir, "/"), "/")
	if from[0] == "" {
		from = nil
	}
	to := strings.Split(strings.TrimPrefix(target, "/"), "/")
	i := 0
	for i < len(from) && i < len(to)-1 && from[i] == to[i] {
		i++
	}
	var b strings.Builder
	for range from[i:] {
		b.WriteString("../")
	}
	b.WriteString(escapePath(strings.Join(to[i:], "/")))
	out := b.String()
	if out == "" {
		return "./"
	}
	// A first segment with a colon would read as a URL scheme.
	if first, _, _ := strings.Cut(out, "/"); strings.Contains(first, ":") {
		out = "./" + out
	}
	return out
}

// splitExt splits "12.png" into "12" and "png".
func splitExt(s string) (base, ext string, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}
