// Package demo serves the tile cache's demo page: every layer with its
// gridsets and formats, and a map preview per layer and gridset. The page
// and its OpenLayers bundle are embedded in the Caddy binary; the browser
// fetches nothing from the internet.
//
// The front-end's sources are in web/; web/build.sh bundles them with the
// pinned OpenLayers into assets/, which is committed and embedded here.
package demo

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Layer describes one cached layer to the page.
type Layer struct {
	Name    string   `json:"name"`
	Formats []string `json:"formats"`
	Styles  []string `json:"styles,omitempty"` // the STYLES filter's values, if any
	// Transparent is the layer's TRANSPARENT for PNG, which the page sends
	// so that requests the upstream answers look like the cached tiles.
	Transparent bool      `json:"transparent"`
	Gridsets    []Gridset `json:"gridsets"`
}

// Gridset is a layer's use of a gridset, with what a map client needs to
// build its tile grid.
type Gridset struct {
	Name        string     `json:"name"`
	SRS         string     `json:"srs"`      // "EPSG:4326"
	Extent      [4]float64 `json:"extent"`   // the gridset's extent, x/y order
	Coverage    [4]float64 `json:"coverage"` // the layer's cached area in the gridset's units
	Resolutions []float64  `json:"resolutions"`
	TileWidth   int        `json:"tileWidth"`
	TileHeight  int        `json:"tileHeight"`
	TopLeft     bool       `json:"topLeft"` // origin corner
	MinZoom     int        `json:"minZoom"`
	MaxZoom     int        `json:"maxZoom"`
}

// Info is everything the page needs, served as JSON.
type Info struct {
	// WMSURL, WMTSURL, TMSURL, XYZURL are the service URLs relative to the
	// page, which is prefix+"/" ("../wms", or "/wms" from the site's root;
	// "" when a service is off). The WMTS URL is the KVP endpoint: the page
	// asks it for ?SERVICE=WMTS&REQUEST=GetCapabilities.
	WMSURL  string  `json:"wmsUrl"`
	WMTSURL string  `json:"wmtsUrl,omitempty"`
	TMSURL  string  `json:"tmsUrl,omitempty"`
	XYZURL  string  `json:"xyzUrl,omitempty"`
	Layers  []Layer `json:"layers"`
}

//go:embed assets/index.html assets/app.js assets/app.css assets/THIRD_PARTY_LICENSES.txt
var assets embed.FS

var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// asset is one embedded static file, with its gzip form made on first use.
type asset struct {
	name, contentType string
	body              []byte
	etag              string

	gzOnce sync.Once
	gz     []byte
	gzEtag string
}

var static = func() map[string]*asset {
	m := map[string]*asset{}
	for name, ct := range map[string]string{
		"app.js":                   "text/javascript; charset=utf-8",
		"app.css":                  "text/css; charset=utf-8",
		"THIRD_PARTY_LICENSES.txt": "text/plain; charset=utf-8",
	} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		m[name] = &asset{name: name, contentType: ct, body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return m
}()

func (a *asset) gzipped() ([]byte, string) {
	a.gzOnce.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(a.body)
		zw.Close()
		if buf.Len() < len(a.body) {
			a.gz = buf.Bytes()
			a.gzEtag = strings.TrimSuffix(a.etag, `"`) + `-gz"`
		}
	})
	return a.gz, a.gzEtag
}

// contentSecurityPolicy lets the page load its own script, styles, JSON and
// tiles (tiles become blob: URLs once fetched) and nothing from elsewhere.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; " +
	"object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'self'"

// Handler serves the demo page under prefix (e.g. "/demo"): the page at
// prefix and prefix+"/", its assets below, and info as prefix+"/info.json".
// Other paths under prefix answer 404; methods other than GET and HEAD 405.
// info is called for every page and info.json request.
func Handler(prefix string, info func() Info) http.Handler {
	prefix = strings.TrimRight(prefix, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		var rel string
		switch {
		case p == prefix:
			rel = ""
		case strings.HasPrefix(p, prefix+"/"):
			rel = p[len(prefix)+1:]
		default:
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method "+r.Method+" is not allowed here; allowed: GET, HEAD", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		switch rel {
		case "", "index.html":
			base := ""
			if p == prefix {
				// Without its slash the page's relative URLs would resolve
				// one level up: <base> puts them back under prefix+"/".
				base = path.Base(r.URL.EscapedPath()) + "/"
			}
			servePage(w, r, base, info())
		case "info.json":
			serveInfo(w, r, info())
		default:
			a, ok := static[rel]
			if !ok {
				http.NotFound(w, r)
				return
			}
			serveAsset(w, r, a)
		}
	})
}

func servePage(w http.ResponseWriter, r *http.Request, base string, info Info) {
	var buf bytes.Buffer
	data := struct {
		Info
		Base string
	}{info, base}
	if err := page.Execute(&buf, data); err != nil {
		http.Error(w, "rendering the demo page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "same-origin")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(buf.Bytes()))
}

func serveInfo(w http.ResponseWriter, r *http.Request, info Info) {
	// Lists as [] rather than null, for the page's sake.
	if info.Layers == nil {
		info.Layers = []Layer{}
	}
	for i := range info.Layers {
		l := &info.Layers[i]
		if l.Formats == nil {
			l.Formats = []string{}
		}
		if l.Gridsets == nil {
			l.Gridsets = []Gridset{}
		}
		for j := range l.Gridsets {
			if l.Gridsets[j].Resolutions == nil {
				l.Gridsets[j].Resolutions = []float64{}
			}
		}
	}
	b, err := json.Marshal(info)
	if err != nil {
		http.Error(w, "encoding info.json: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// serveAsset answers a static file, gzipped when the client takes it, with
// an ETag so that a revalidation costs a 304. The assets change only with
// the binary, so clients revalidate (no-cache) instead of guessing an age.
func serveAsset(w http.ResponseWriter, r *http.Request, a *asset) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Add("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if acceptsGzip(r) {
		if gz, gzEtag := a.gzipped(); gz != nil {
			body, etag = gz, gzEtag
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reads Accept-Encoding, honouring q=0 ("not acceptable").
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}
