package tilecache

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/tilecache/caddy-tilecache/module/params"
)

// LayerConfig is one cached layer as configured.
type LayerConfig struct {
	// Name is the WMS layer name clients ask for, usually "prefix:name".
	Name string `json:"name"`
	// UpstreamLayers is what the upstream GetMap's LAYERS gets; default: Name.
	UpstreamLayers []string `json:"upstream_layers,omitempty"`
	// Formats the layer is cached in; the first is the default. Default: image/png, image/jpeg.
	Formats []string `json:"formats,omitempty"`
	// Gridsets by name (built-in EPSG:4326 and EPSG:900913, or one of the
	// handler's custom gridsets). Default: both built-ins.
	Gridsets []string `json:"gridsets,omitempty"`
	// Extent limits the cached area, in WGS84 lon/lat: minx miny maxx maxy.
	// Tiles outside it are not cached (they pass through).
	Extent *[4]float64 `json:"extent,omitempty"`
	// GridsetExtents gives the extent in a gridset's own units, for
	// gridsets whose CRS the plugin cannot project lon/lat into. It wins
	// over Extent for that gridset.
	GridsetExtents map[string][4]float64 `json:"gridset_extents,omitempty"`
	// MetaWidth×MetaHeight tiles are fetched from the upstream at once. Default 4×4.
	MetaWidth  int `json:"metatile_width,omitempty"`
	MetaHeight int `json:"metatile_height,omitempty"`
	// Gutter is the extra border in pixels requested around each metatile
	// and cut away, so labels near tile edges render consistently.
	Gutter int `json:"gutter,omitempty"`
	// MinZoom and MaxZoom bound the cached levels; requests at other levels
	// pass through. Default: every level of the gridset.
	MinZoom *int `json:"min_zoom,omitempty"`
	MaxZoom *int `json:"max_zoom,omitempty"`
	// Parameters are GeoWebCache-style parameter filters (STYLES, CQL_FILTER...).
	Parameters []params.FilterConfig `json:"parameters,omitempty"`
	// ClientExpiry sets Cache-Control max-age on tiles; 0 sends none.
	ClientExpiry caddy.Duration `json:"client_expiry,omitempty"`
	// ServerExpiry: a stored tile older than this is fetched again; 0 keeps tiles forever.
	ServerExpiry caddy.Duration `json:"server_expiry,omitempty"`
	// Transparent is sent upstream as TRANSPARENT for PNG. Default true.
	Transparent *bool `json:"transparent,omitempty"`
}
