package tilecache

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
)

// Config is one cache: its upstream, its storage and its layers. It is
// written inline in a tile_cache handler, or under a name in the tile_cache
// app (the Caddyfile's global options), and means the same in both places.
type Config struct {
	// Upstream is the WMS GetMap URL. It may carry a query of its own
	// (MapServer's ?map=...), kept on every upstream request.
	Upstream string `json:"upstream,omitempty"`
	// Timeout bounds one upstream metatile request. Default 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// UpstreamConcurrency caps simultaneous upstream requests of this cache,
	// across config reloads. Default 4.
	UpstreamConcurrency int `json:"upstream_concurrency,omitempty"`
	// UpstreamQueue bounds the visitors' misses waiting for an upstream
	// slot; a miss beyond it gets 503 with Retry-After at once. Default
	// 16 × upstream_concurrency.
	UpstreamQueue int `json:"upstream_queue,omitempty"`
	// SeedSlots of upstream_concurrency are seeding's whenever it has work,
	// however many visitors' misses wait: users come first, but a flood of
	// misses cannot stop a seed. At most upstream_concurrency − 1. Default
	// upstream_concurrency / 4, at least 1 when upstream_concurrency ≥ 2.
	SeedSlots *int `json:"seed_slots,omitempty"`
	// MaxMissesPerClient caps one client's (by IP, as Caddy's trusted_proxies
	// see it) misses waiting at once; beyond it: 429. Default 0: no cap.
	MaxMissesPerClient int `json:"max_misses_per_client,omitempty"`
	// Storage is the Badger directory. Default: tile_cache in Caddy's data
	// directory. With S3 it keeps the node's tasks, and the local tier.
	Storage string `json:"storage,omitempty"`
	// Usage counts the tiles and bytes of every level of every tile set in
	// the store, in the same write as the tiles (package store, usage.go):
	// served by the REST interface's rest/usage.json. Badger storage only.
	Usage bool `json:"usage,omitempty"`
	// Quota bounds the store's size: past it the coldest pages of tiles
	// are evicted (package quota). It turns usage on. With s3 it bounds
	// the bucket's tiles under the prefix (package quota/s3quota).
	Quota *quota.Config `json:"quota,omitempty"`
	// S3 keeps the tiles in an S3-compatible bucket, shared by every node
	// that names it, instead of in the Badger directory.
	S3 *S3Config `json:"s3,omitempty"`
	// Cluster makes this cache one node of several that act as one cache:
	// tasks, work units and render markers are shared through Caddy's
	// configured storage, tiles through S3 (package cluster). Every node
	// names the same S3 bucket and prefix and the same cluster.
	Cluster *cluster.Config `json:"cluster,omitempty"`
	// Gridsets are custom gridsets, beside the built-in EPSG:4326 and EPSG:900913.
	Gridsets []gridset.Config `json:"gridsets,omitempty"`
	// Layers are the cached layers.
	Layers []LayerConfig `json:"layers,omitempty"`
	// NeutralParams are extra request parameters that do not change the
	// image (besides TILED, TRANSPARENT, EXCEPTIONS, TILESORIGIN), so tile
	// requests carrying them are still served from the cache whatever their
	// value. BGCOLOR and SLD_VERSION need no entry when clients send their
	// defaults (see standardDefault in query.go); listing one here makes
	// every value of it neutral.
	NeutralParams []string `json:"neutral_params,omitempty"`
	// JPEGQuality for JPEG tiles, 1–100. Default 85.
	JPEGQuality int `json:"jpeg_quality,omitempty"`
	// Breaker spares an upstream that is down. On by default.
	Breaker *BreakerConfig `json:"breaker,omitempty"`
	// MaxParamLength: a request whose parameter name or value is longer
	// (in bytes, unescaped) is not a tile request ("malformed"). Default 1024.
	MaxParamLength int `json:"max_param_length,omitempty"`
}

// S3Config is a bucket for the tiles (see package s3store for the key
// layout) and an optional local tier in front of it.
type S3Config struct {
	s3store.Config
	// Local keeps the tiles this node reads or writes in its Badger
	// (storage) too, so a hot tile costs a local read.
	Local *LocalTierConfig `json:"local,omitempty"`
}

// LocalTierConfig bounds the local tier.
type LocalTierConfig struct {
	// MaxSize in bytes: past it the local tier drops its tiles and fills
	// again from S3. Default 1 GiB.
	MaxSize int64 `json:"max_size,omitempty"`
	// TTL: a local copy is read from S3 again after it, so that a tile
	// another node truncated is not served longer than this. Default 1m.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

// BreakerConfig is the upstream circuit breaker: after Failures upstream
// failures in a row (no answer, a timeout, HTTP 5xx or 429) misses get
// 502 at once for Cooldown, then one probe request goes upstream.
type BreakerConfig struct {
	// Off turns the breaker off: every miss asks the upstream.
	Off bool `json:"off,omitempty"`
	// Failures in a row that open the breaker. Default 5.
	Failures int `json:"failures,omitempty"`
	// Cooldown is how long it stays open before a probe. Default 30s.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`
}

// LayerConfig is one cached layer as configured.
type LayerConfig struct {
	// Name is the WMS layer name clients ask for, usually "prefix:name".
	Name string `json:"name"`
	// UpstreamLayers is what the upstream GetMap's LAYERS gets; default: Name.
	UpstreamLayers []string `json:"upstream_layers,omitempty"`
	// Formats the layer is cached in; the first is the default. Default: image/png, image/jpeg.
	Formats []string `json:"formats,omitempty"`
	// FormatOptions tune the encoding of some of the layer's formats, by
	// format name as in Formats: quality (JPEG, the JPEG tiles of the
	// mixed formats, lossy WebP), colors and dither (image/png8,
	// image/vnd.jpeg-png8; on image/webp, quantized then lossless).
	// docs/formats.md lists them.
	FormatOptions map[string]imaging.Options `json:"format_options,omitempty"`
	// Gridsets by name (built-in EPSG:4326 and EPSG:900913, or one of the
	// cache's custom gridsets). Default: both built-ins.
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
	// UpstreamFormat is the FORMAT the layer's metatiles are requested in,
	// whatever format the tiles are cached in; default: the tile's own for
	// image/png and image/jpeg, image/png for the formats encoded here
	// (image/png8, the mixed ones, image/webp).
	// The answer must be PNG or JPEG. An uncompressed PNG output format
	// of the upstream (MapServer: AGG/PNG with FORMATOPTION
	// "COMPRESSION=0") spares it the zlib work, which is most of a
	// raster's render, and spares the cache inflating it.
	UpstreamFormat string `json:"upstream_format,omitempty"`
	// Transparent is sent upstream as TRANSPARENT for PNG. Default true.
	Transparent *bool `json:"transparent,omitempty"`
	// PNGCompression trades encoding time for tile size: "fast",
	// "default" or "best" (package imaging measures them). Lossless
	// whichever is chosen.
	PNGCompression imaging.PNGCompression `json:"png_compression,omitempty"`
}

// Defaults of the cache settings; layer defaults are in compileLayer.
const (
	defaultTimeout             = 30 * time.Second
	defaultUpstreamConcurrency = 4
	defaultJPEGQuality         = 85
	defaultBreakerFailures     = 5
	defaultBreakerCooldown     = 30 * time.Second
	// DefaultMaxParamLength bounds a tile request's parameter names and
	// values (unescaped, in bytes) unless max_param_length says otherwise:
	// no WMS-C client sends more, and a filter's regular expression need
	// not see more.
	DefaultMaxParamLength = 1024
)

// setDefaults fills in every unset setting, once, at provisioning: the
// request path reads them as they are.
func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = caddy.Duration(defaultTimeout)
	}
	if c.UpstreamConcurrency == 0 {
		c.UpstreamConcurrency = defaultUpstreamConcurrency
	}
	if c.UpstreamQueue == 0 {
		c.UpstreamQueue = 16 * c.UpstreamConcurrency
	}
	if c.SeedSlots == nil {
		n := 0
		if c.UpstreamConcurrency >= 2 {
			n = max(1, c.UpstreamConcurrency/4)
		}
		c.SeedSlots = &n
	}
	if c.JPEGQuality == 0 {
		c.JPEGQuality = defaultJPEGQuality
	}
	if c.Storage == "" {
		c.Storage = filepath.Join(caddy.AppDataDir(), "tile_cache")
	}
	if c.S3 != nil && c.S3.Local != nil {
		if c.S3.Local.MaxSize == 0 {
			c.S3.Local.MaxSize = 1 << 30
		}
		if c.S3.Local.TTL == 0 {
			c.S3.Local.TTL = caddy.Duration(time.Minute)
		}
	}
	if c.Breaker == nil {
		c.Breaker = &BreakerConfig{}
	}
	if c.Breaker.Failures == 0 {
		c.Breaker.Failures = defaultBreakerFailures
	}
	if c.Breaker.Cooldown == 0 {
		c.Breaker.Cooldown = caddy.Duration(defaultBreakerCooldown)
	}
	if c.MaxParamLength == 0 {
		c.MaxParamLength = DefaultMaxParamLength
	}
}

// validate checks the settings that need no compiling; with defaults set,
// zero values are errors too.
func (c *Config) validate() error {
	u, err := url.Parse(c.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("upstream must be an absolute http(s) URL, got %q", c.Upstream)
	}
	if c.UpstreamConcurrency < 1 {
		return errors.New("upstream_concurrency must be at least 1")
	}
	if c.UpstreamQueue < 1 {
		return errors.New("upstream_queue must be at least 1")
	}
	if *c.SeedSlots < 0 || *c.SeedSlots >= c.UpstreamConcurrency && *c.SeedSlots > 0 {
		return fmt.Errorf("seed_slots must be 0..%d (upstream_concurrency − 1): visitors keep at least one slot", c.UpstreamConcurrency-1)
	}
	if c.MaxMissesPerClient < 0 {
		return errors.New("max_misses_per_client must not be negative")
	}
	if c.JPEGQuality < 1 || c.JPEGQuality > 100 {
		return errors.New("jpeg_quality must be 1..100")
	}
	if c.Timeout <= 0 {
		return errors.New("timeout must be positive")
	}
	if b := c.Breaker; b != nil && (b.Failures < 0 || b.Cooldown < 0) {
		return errors.New("breaker failures and cooldown must not be negative")
	}
	if c.MaxParamLength < 0 {
		return errors.New("max_param_length must not be negative")
	}
	if c.S3 != nil {
		if c.S3.Bucket == "" {
			return errors.New("s3: bucket is required")
		}
		if c.S3.Timeout < 0 || c.S3.Concurrency < 0 {
			return errors.New("s3: timeout and concurrency must not be negative")
		}
		if l := c.S3.Local; l != nil && (l.MaxSize < 0 || l.TTL < 0) {
			return errors.New("s3: local max_size and ttl must not be negative")
		}
	}
	if c.Usage && c.S3 != nil {
		return errors.New("usage counts tiles in the Badger store; it is not available with s3 storage")
	}
	if c.Quota != nil {
		// With s3 the quota bounds the bucket's tiles (package
		// quota/s3quota); the local tier keeps its own max_size.
		if err := c.Quota.Validate(); err != nil {
			return err
		}
	}
	if c.Cluster != nil {
		if c.S3 == nil {
			return errors.New("cluster needs the s3 storage: the nodes of a cluster share their tiles through one bucket")
		}
		if err := c.Cluster.Validate(); err != nil {
			return err
		}
	}
	if len(c.Layers) == 0 {
		return errors.New("no layers configured")
	}
	return nil
}

// breakerSettings is the breaker's threshold (0: off) and cooldown.
func (c *Config) breakerSettings() (int, time.Duration) {
	if c.Breaker.Off {
		return 0, 0
	}
	return c.Breaker.Failures, time.Duration(c.Breaker.Cooldown)
}
