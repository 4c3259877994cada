package admin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/store"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The task page: one HTML document with its script and styles inlined, a
// client of the REST interface alone (relative URLs, so any mount works).
// It is an extension of GeoWebCache's interface, as is rest/layers.json.

//go:embed page/tasks.html page/tasks.css page/tasks.js
var pageFS embed.FS

// taskPage is the page, built once: tasks.css and tasks.js go into the
// HTML, and the Content-Security-Policy allows exactly those two inline
// blocks (by hash) and requests to the page's own origin.
var taskPage = sync.OnceValues(func() ([]byte, string) {
	read := func(name string) string {
		b, err := pageFS.ReadFile("page/" + name)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	css, js := read("tasks.css"), read("tasks.js")
	html := read("tasks.html")
	html = strings.Replace(html, `<link rel="stylesheet" href="tasks.css">`, "<style>"+css+"</style>", 1)
	html = strings.Replace(html, `<script src="tasks.js"></script>`, "<script>"+js+"</script>", 1)
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'self'; script-src " + hash(js) + "; style-src " + hash(css) +
		"; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
	return []byte(html), csp
})

// isPagePath says whether a path outside /rest/ is the task page: the
// mount point itself ("/" once handle_path has stripped the prefix) or a
// last segment "tasks" (<mount>/tasks, stripped or not).
func isPagePath(p string) bool {
	return p == "/" || p == "tasks" || strings.HasSuffix(p, "/tasks")
}

// storageMarker opens the page's Storage panel.
const storageMarker = `<section id="storage-section" hidden`

// usageCounted reports whether rest/usage.json answers (the cache's store
// counts usage, or a quota over S3 keeps it).
func (h *Handler) usageCounted() bool {
	if h.bound == nil {
		return false
	}
	c, err := h.cache()
	if err != nil {
		return false
	}
	if c.S3Quota() != nil {
		return true
	}
	ur, ok := c.Store().(store.UsageReporter)
	return ok && ur.UsageOn()
}

// page serves the task page.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) error {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return nil
	}
	body, csp := taskPage()
	if h.usageCounted() {
		// The Storage panel reads rest/usage.json only where it answers:
		// a 404 would be a console error on every visit.
		body = bytes.Replace(body, []byte(storageMarker), []byte(storageMarker+` data-usage="on"`), 1)
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	return nil
}

// layerInfo is one layer of rest/layers.json.
type layerInfo struct {
	Name     string        `json:"name"`
	Formats  []string      `json:"formats"`
	Gridsets []gridsetInfo `json:"gridsets"`
	// Parameters are the layer's parameter filters with their defaults
	// (a seed request's "parameters" may set them).
	Parameters []paramInfo `json:"parameters"`
	MetaTile   [2]int      `json:"metaTile"`
}

type gridsetInfo struct {
	Name    string `json:"name"`
	SRS     string `json:"srs"`
	MinZoom int    `json:"minZoom"` // the layer's cached levels
	MaxZoom int    `json:"maxZoom"`
	Levels  int    `json:"levels"` // the gridset's levels: zoom 0..levels-1
	// Tiles per level: how many tiles of the level the layer covers
	// (0 outside minZoom..maxZoom): a seed of levels a..b has
	// sum(tiles[a..b]) tiles.
	Tiles []int64 `json:"tiles"`
	// Extent is the layer's area in the gridset as a lon/lat box
	// [minLon, minLat, maxLon, maxLat] (EPSG:4326), for the page's map;
	// absent for a CRS the gridset package cannot unproject.
	Extent *[4]float64 `json:"extent,omitempty"`
}

type paramInfo struct {
	Name    string `json:"name"`
	Default string `json:"default"`
}

// layers answers GET rest/layers.json: the cache's layers with their
// gridsets, formats and parameter filters, sorted by name. GeoWebCache's
// REST contract has no such list; the task page needs one to offer layers.
func (h *Handler) layers(w http.ResponseWriter) error {
	c, err := h.cache()
	if err != nil {
		return httpx.Text(w, http.StatusServiceUnavailable, err.Error())
	}
	out := struct {
		Layers []layerInfo `json:"layers"`
	}{Layers: []layerInfo{}}
	for _, name := range c.LayerNames() {
		l, ok := c.Layer(name)
		if !ok {
			continue
		}
		li := layerInfo{Name: l.Name, Formats: []string{}, Gridsets: []gridsetInfo{}, Parameters: []paramInfo{},
			MetaTile: [2]int{l.MetaWidth, l.MetaHeight}}
		for _, f := range l.Formats {
			li.Formats = append(li.Formats, f.Name)
		}
		for _, g := range l.Grids {
			gi := gridsetInfo{Name: g.Name, SRS: fmt.Sprintf("EPSG:%d", g.SRS), MinZoom: g.MinZoom, MaxZoom: g.MaxZoom,
				Levels: len(g.Levels), Tiles: make([]int64, len(g.Levels))}
			for z := g.MinZoom; z <= g.MaxZoom && z < len(g.Coverage); z++ {
				gi.Tiles[z] = g.Coverage[z].Count()
			}
			if b, ok := g.ToLonLat(g.Area); ok {
				gi.Extent = &[4]float64{b.MinX, b.MinY, b.MaxX, b.MaxY}
			}
			li.Gridsets = append(li.Gridsets, gi)
		}
		for _, kv := range l.Params.Defaults().Pairs() {
			li.Parameters = append(li.Parameters, paramInfo{Name: kv[0], Default: kv[1]})
		}
		out.Layers = append(out.Layers, li)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	return json.NewEncoder(w).Encode(out)
}
