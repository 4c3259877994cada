package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// key names a tile by level, column and row, the row counted from the
// bottom of the grid (GeoWebCache's tile index, TMS's y).
type key struct{ z, x, y int }

func (k key) String() string { return fmt.Sprintf("%d/%d/%d", k.z, k.x, k.y) }

// grid says how many tiles a level has, to turn rows counted from the top
// (XYZ, WMTS) into rows counted from the bottom and to enumerate a level.
type grid struct {
	name string
	w0   int // columns at level 0 (rows at level 0 are 1)
}

var grids = map[string]grid{
	"EPSG:4326":   {"EPSG:4326", 2},
	"EPSG:900913": {"EPSG:900913", 1},
	"EPSG:3857":   {"EPSG:3857", 1},
}

func (g grid) cols(z int) int { return g.w0 << z }
func (g grid) rows(z int) int { return 1 << z }

// errMissing: the source has no such tile (no file, or HTTP 404).
var errMissing = errors.New("missing")

// source is one set of tiles.
type source interface {
	// get returns the tile's bytes, errMissing when the set has none, or
	// another error (which stops the run).
	get(ctx context.Context, k key) ([]byte, error)
	// list returns the tiles the set holds at the given levels (nil: all),
	// or ok=false when the set cannot be listed (HTTP).
	list(levels map[int]bool) (keys []key, ok bool, err error)
	String() string
}

// parseSource reads a source spec:
//
//	mapcache:DIR  a MapCache disk cache, DIR = <base>/<tileset>/<grid>
//	              (MapCache's default "disk" layout:
//	              zz/xxx/xxx/xxx/yyy/yyy/yyy.<ext>, y from the bottom for
//	              a grid with origin bottom-left)
//	dir:DIR       DIR/z/x/y.<ext>, y from the bottom (TMS)
//	xyzdir:DIR    DIR/z/x/y.<ext>, y from the top (XYZ)
//	http(s)://... a URL template with {z}, {x} and {y} (row from the top,
//	              as XYZ and Leaflet) or {-y} (row from the bottom, as TMS)
//
// Files may have any extension: the type is read from the bytes.
func parseSource(spec string, g grid, header string) (source, error) {
	switch {
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		if !strings.Contains(spec, "{z}") || !strings.Contains(spec, "{x}") ||
			!(strings.Contains(spec, "{y}") || strings.Contains(spec, "{-y}")) {
			return nil, fmt.Errorf("URL template %q needs {z}, {x} and {y} or {-y}", spec)
		}
		h := &httpSource{tmpl: spec, g: g, client: &http.Client{Timeout: 120 * time.Second}}
		if header != "" {
			n, v, ok := strings.Cut(header, "=")
			if !ok {
				return nil, fmt.Errorf("-header %q: want NAME=VALUE", header)
			}
			h.hdrName, h.hdrValue = n, v
		}
		return h, nil
	case strings.HasPrefix(spec, "mapcache:"):
		return dirSource{root: strings.TrimPrefix(spec, "mapcache:"), layout: layoutMapCache, g: g}, nil
	case strings.HasPrefix(spec, "xyzdir:"):
		return dirSource{root: strings.TrimPrefix(spec, "xyzdir:"), layout: layoutXYZ, g: g}, nil
	case strings.HasPrefix(spec, "dir:"):
		return dirSource{root: strings.TrimPrefix(spec, "dir:"), layout: layoutTMS, g: g}, nil
	}
	return nil, fmt.Errorf("source %q: want mapcache:DIR, dir:DIR, xyzdir:DIR or an http(s) URL template", spec)
}

type layout int

const (
	layoutTMS layout = iota
	layoutXYZ
	layoutMapCache
)

type dirSource struct {
	root   string
	layout layout
	g      grid
}

func (d dirSource) String() string {
	return map[layout]string{layoutTMS: "dir:", layoutXYZ: "xyzdir:", layoutMapCache: "mapcache:"}[d.layout] + d.root
}

// stem is the tile's path without its extension.
func (d dirSource) stem(k key) string {
	switch d.layout {
	case layoutMapCache:
		return filepath.Join(d.root, fmt.Sprintf("%02d/%03d/%03d/%03d/%03d/%03d/%03d",
			k.z, k.x/1000000, k.x/1000%1000, k.x%1000, k.y/1000000, k.y/1000%1000, k.y%1000))
	case layoutXYZ:
		return filepath.Join(d.root, strconv.Itoa(k.z), strconv.Itoa(k.x), strconv.Itoa(d.g.rows(k.z)-1-k.y))
	}
	return filepath.Join(d.root, strconv.Itoa(k.z), strconv.Itoa(k.x), strconv.Itoa(k.y))
}

func (d dirSource) get(_ context.Context, k key) ([]byte, error) {
	stem := d.stem(k)
	m, err := filepath.Glob(globEscape(stem) + ".*")
	if err != nil {
		return nil, err
	}
	switch len(m) {
	case 0:
		return nil, errMissing
	case 1:
		return os.ReadFile(m[0]) // a symbolic link (MapCache's blank tiles) is read as its target
	}
	return nil, fmt.Errorf("%s: more than one file for tile %v: %v", d, k, m)
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

func (d dirSource) list(levels map[int]bool) ([]key, bool, error) {
	var keys []key
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		k, ok := d.parse(filepath.ToSlash(rel))
		if !ok {
			return nil // not a tile (MapCache's lock files, a blanks/ folder, ...)
		}
		if levels == nil || levels[k.z] {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, true, err
	}
	return keys, true, nil
}

// parse reads a tile's key from its path under the root.
func (d dirSource) parse(rel string) (key, bool) {
	if i := strings.LastIndexByte(rel, '.'); i > strings.LastIndexByte(rel, '/') {
		rel = rel[:i]
	}
	parts := strings.Split(rel, "/")
	n := make([]int, len(parts))
	for i, s := range parts {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return key{}, false
		}
		n[i] = v
	}
	switch d.layout {
	case layoutMapCache:
		if len(n) != 7 {
			return key{}, false
		}
		return key{n[0], n[1]*1000000 + n[2]*1000 + n[3], n[4]*1000000 + n[5]*1000 + n[6]}, true
	case layoutXYZ:
		if len(n) != 3 || n[2] >= d.g.rows(n[0]) {
			return key{}, false
		}
		return key{n[0], n[1], d.g.rows(n[0]) - 1 - n[2]}, true
	}
	if len(n) != 3 {
		return key{}, false
	}
	return key{n[0], n[1], n[2]}, true
}

type httpSource struct {
	tmpl              string
	g                 grid
	client            *http.Client
	hdrName, hdrValue string
}

func (h *httpSource) String() string { return h.tmpl }

func (h *httpSource) url(k key) string {
	return strings.NewReplacer("{z}", strconv.Itoa(k.z), "{x}", strconv.Itoa(k.x),
		"{-y}", strconv.Itoa(k.y), "{y}", strconv.Itoa(h.g.rows(k.z)-1-k.y)).Replace(h.tmpl)
}

func (h *httpSource) get(ctx context.Context, k key) ([]byte, error) {
	u := h.url(k)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, errMissing
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s: %.200s", u, resp.Status, b)
	case h.hdrName != "" && resp.Header.Get(h.hdrName) != h.hdrValue:
		return nil, fmt.Errorf("GET %s: %s is %q, want %q", u, h.hdrName, resp.Header.Get(h.hdrName), h.hdrValue)
	}
	return b, nil
}

func (h *httpSource) list(map[int]bool) ([]key, bool, error) { return nil, false, nil }
