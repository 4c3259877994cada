package tilecache

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Layer is a configured layer, compiled for serving. Immutable.
type Layer struct {
	Name           string
	upstreamLayers string // comma-joined, ready for LAYERS=
	upstreamFormat string // FORMAT= of the metatile GetMap; "" for the tile's own
	Formats        []Format
	Grids          []*Grid
	MetaWidth      int
	MetaHeight     int
	Gutter         int
	Params         *params.Set
	ClientExpiry   time.Duration
	ServerExpiry   time.Duration
	transparent    bool
	// encoder encodes the layer's tiles: the cache's JPEG quality, the
	// layer's PNG compression.
	encoder imaging.Encoder
	// WGS84 is the layer's area in lon/lat, for capabilities documents.
	WGS84 gridset.BBox
	// styles are the layer's WMTS styles (styles.go).
	styles wmtsStyles

	cacheControl []string // precomputed header value, nil for none

	hits, misses, stale, upstreamErrors prometheus.Counter
	upstreamLatency                     prometheus.Observer
}

// Format is one image format a layer is cached in.
type Format struct {
	imaging.Format
	// Name is the FORMAT value clients send and the store key uses: the
	// configured spelling.
	Name        string
	contentType []string
}

// Grid is a layer's use of one gridset: which tiles it has per level.
type Grid struct {
	*gridset.Gridset
	// Area is the layer's cached area in the gridset's units, within the
	// gridset's extent; Coverage per level the tiles that cover it.
	Area             gridset.BBox
	Coverage         []gridset.Range
	MinZoom, MaxZoom int
	crsHeader        []string
	nameHeader       []string
}

// compileLayer checks a layer's configuration and computes, once, all that
// serving it needs: formats, filters, each gridset's area and coverage,
// the lon/lat box and the WMTS styles.
func compileLayer(c *LayerConfig, grids map[string]*gridset.Gridset, jpegQuality int) (*Layer, error) {
	fail := func(format string, a ...any) (*Layer, error) {
		return nil, fmt.Errorf("layer %q: %s", c.Name, fmt.Sprintf(format, a...))
	}
	if err := store.CheckName(c.Name); err != nil || strings.ContainsAny(c.Name, ",/") {
		return fail("a layer needs a name without commas, slashes or NUL bytes")
	}
	l := &Layer{
		Name:         c.Name,
		MetaWidth:    c.MetaWidth,
		MetaHeight:   c.MetaHeight,
		Gutter:       c.Gutter,
		ClientExpiry: time.Duration(c.ClientExpiry),
		ServerExpiry: time.Duration(c.ServerExpiry),
		transparent:  c.Transparent == nil || *c.Transparent,
		encoder:      imaging.Encoder{JPEGQuality: jpegQuality, PNG: c.PNGCompression},
	}
	up := c.UpstreamLayers
	if len(up) == 0 {
		up = []string{c.Name}
	}
	l.upstreamLayers = strings.Join(up, ",")
	l.upstreamFormat = c.UpstreamFormat
	if strings.IndexFunc(l.upstreamFormat, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fail("upstream_format %q has control characters", l.upstreamFormat)
	}
	if l.MetaWidth == 0 {
		l.MetaWidth = 4
	}
	if l.MetaHeight == 0 {
		l.MetaHeight = 4
	}
	if l.MetaWidth < 1 || l.MetaHeight < 1 || l.MetaWidth > 16 || l.MetaHeight > 16 {
		return fail("metatile size must be 1..16 tiles")
	}
	if l.Gutter < 0 || l.Gutter > 512 {
		return fail("gutter must be 0..512 pixels")
	}
	if l.ClientExpiry < 0 || l.ServerExpiry < 0 {
		return fail("expiry must not be negative")
	}
	if l.ClientExpiry > 0 {
		l.cacheControl = []string{fmt.Sprintf("public, max-age=%d", int64(l.ClientExpiry/time.Second))}
	}
	formats := c.Formats
	if len(formats) == 0 {
		formats = []string{"image/png", "image/jpeg"}
	}
	for name := range c.FormatOptions {
		if !slices.Contains(formats, name) {
			return fail("format options name format %q, which the layer is not cached in (formats %s)", name, strings.Join(formats, " "))
		}
	}
	for _, name := range formats {
		f, err := imaging.ParseFormat(name)
		if err != nil {
			return fail("%v", err)
		}
		if l.formatByName(name) != nil {
			return fail("format %q is listed twice", name)
		}
		if f, err = f.WithOptions(c.FormatOptions[name]); err != nil {
			return fail("%v", err)
		}
		l.Formats = append(l.Formats, Format{Format: f, Name: name, contentType: []string{f.ContentType(nil)}})
	}
	var err error
	if l.Params, err = params.New(c.Parameters); err != nil {
		return fail("%v", err)
	}
	names := c.Gridsets
	if len(names) == 0 {
		names = gridset.BuiltinNames()
	}
	for gsName := range c.GridsetExtents {
		found := false
		for _, n := range names {
			found = found || n == gsName
		}
		if !found {
			return fail("gridset_extents names gridset %q, which the layer does not use", gsName)
		}
	}
	for _, name := range names {
		gs, ok := grids[name]
		if !ok {
			return fail("unknown gridset %q", name)
		}
		g := &Grid{
			Gridset:    gs,
			MinZoom:    0,
			MaxZoom:    len(gs.Levels) - 1,
			crsHeader:  []string{fmt.Sprintf("EPSG:%d", gs.SRS)},
			nameHeader: []string{gs.Name},
		}
		ext := gs.Extent
		if e, ok := c.GridsetExtents[name]; ok {
			ext = gridset.BBox{MinX: e[0], MinY: e[1], MaxX: e[2], MaxY: e[3]}
		} else if c.Extent != nil {
			ll := gridset.BBox{MinX: c.Extent[0], MinY: c.Extent[1], MaxX: c.Extent[2], MaxY: c.Extent[3]}
			if ext, ok = gs.FromLonLat(ll); !ok {
				return fail("cannot project the lon/lat extent into gridset %s (EPSG:%d): give it in gridset_extents", name, gs.SRS)
			}
		}
		if !(ext.MinX < ext.MaxX && ext.MinY < ext.MaxY) {
			return fail("extent for gridset %s must have min < max", name)
		}
		g.Area = ext.Intersect(gs.Extent)
		g.Coverage = gs.Cover(ext)
		if c.MinZoom != nil {
			g.MinZoom = *c.MinZoom
		}
		if c.MaxZoom != nil {
			g.MaxZoom = min(*c.MaxZoom, g.MaxZoom)
		}
		if g.MinZoom < 0 || g.MinZoom > g.MaxZoom {
			return fail("min_zoom/max_zoom out of order for gridset %s", name)
		}
		l.Grids = append(l.Grids, g)
	}
	l.WGS84 = layerWGS84(l, c)
	if l.styles, err = compileStyles(l, c); err != nil {
		return fail("%v", err)
	}
	m := metrics()
	l.hits = m.hits.WithLabelValues(l.Name)
	l.misses = m.misses.WithLabelValues(l.Name)
	l.stale = m.stale.WithLabelValues(l.Name)
	l.upstreamErrors = m.upstreamErrors.WithLabelValues(l.Name)
	l.upstreamLatency = m.upstreamLatency.WithLabelValues(l.Name)
	return l, nil
}

// Format returns the layer's format named name (as clients send FORMAT).
func (l *Layer) Format(name string) (*Format, bool) {
	f := l.formatByName(name)
	return f, f != nil
}

func (l *Layer) formatByName(name string) *Format {
	for i := range l.Formats {
		if strings.EqualFold(l.Formats[i].Name, name) {
			return &l.Formats[i]
		}
	}
	return nil
}

// The Content-Type values of a mixed format's tiles, allocated once.
var (
	jpegContentType = []string{"image/jpeg"}
	pngContentType  = []string{"image/png"}
)

// contentTypeOf is the Content-Type header of a stored tile: the format's
// own, or for the mixed JPEG/PNG formats the tile's (each tile keeps and
// answers its type, as GeoWebCache's do).
func (f *Format) contentTypeOf(tile []byte) []string {
	if !f.Mixed() {
		return f.contentType
	}
	if f.ContentType(tile) == "image/jpeg" {
		return jpegContentType
	}
	return pngContentType
}

// Grid returns the layer's use of the gridset named name.
func (l *Layer) Grid(name string) (*Grid, bool) {
	for _, g := range l.Grids {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// layerWGS84 is the layer's area in lon/lat: the configured extent, or the
// union of its gridsets' areas that can be unprojected, or the world.
func layerWGS84(l *Layer, c *LayerConfig) gridset.BBox {
	world := gridset.BBox{MinX: -180, MinY: -90, MaxX: 180, MaxY: 90}
	if c.Extent != nil {
		return gridset.BBox{MinX: c.Extent[0], MinY: c.Extent[1], MaxX: c.Extent[2], MaxY: c.Extent[3]}.Intersect(world)
	}
	var u gridset.BBox
	found := false
	for _, g := range l.Grids {
		b, ok := g.ToLonLat(g.Area)
		switch {
		case !ok:
		case !found:
			u, found = b, true
		default:
			u = u.Union(b)
		}
	}
	if !found {
		return world
	}
	return u.Intersect(world)
}

// formatByExt is the layer's first format with that file extension
// ("jpg" is "jpeg").
func (l *Layer) formatByExt(ext string) *Format {
	ext = strings.ToLower(ext)
	if ext == "jpg" {
		ext = "jpeg"
	}
	for i := range l.Formats {
		if l.Formats[i].Extension() == ext {
			return &l.Formats[i]
		}
	}
	return nil
}

// extFormats are the layer's formats reachable by extension: the first of
// each extension.
func (l *Layer) extFormats() []*Format {
	var out []*Format
	for i := range l.Formats {
		if l.formatByExt(l.Formats[i].Extension()) == &l.Formats[i] {
			out = append(out, &l.Formats[i])
		}
	}
	return out
}

// gridByNameOrSRS is the layer's gridset named name or, failing that, the
// only one of its gridsets whose SRS name is.
func (l *Layer) gridByNameOrSRS(name string) *Grid {
	if g, ok := l.Grid(name); ok {
		return g
	}
	code, _, err := gridset.ParseSRS(name)
	if err != nil {
		return nil
	}
	var found *Grid
	for _, g := range l.Grids {
		if gridset.SameSRS(g.SRS, code) {
			if found != nil {
				return nil // ambiguous
			}
			found = g
		}
	}
	return found
}
