package tilecache

import (
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/quota"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("tile_cache", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("tile_cache", parseCaddyfile)
	// Tiles are answered before the proxy that serves everything else.
	httpcaddyfile.RegisterDirectiveOrder("tile_cache", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var t Handler
	err := t.UnmarshalCaddyfile(h.Dispenser)
	return &t, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	tile_cache [<upstream>] {
//		name <name>
//		upstream <url>
//		timeout <duration>
//		upstream_concurrency <n>
//		upstream_queue <n>
//		seed_slots <n>
//		max_misses_per_client <n>
//		storage <dir>
//		usage
//		quota [<max_size>] {     # see package quota
//			max_size <size>
//			low_watermark <share>
//			policy lru|lfu
//			keep_levels <min> <max>
//			layer <name> <size> | layer <name> { max_size <size>; policy lru|lfu; keep_levels <min> <max> }
//		}
//		s3 {
//			bucket <name>
//			prefix <path>
//			endpoint <host[:port]>
//			region <region>
//			path_style
//			insecure
//			access_key <key>         # e.g. {env.AWS_ACCESS_KEY_ID}
//			secret_key <secret>      # e.g. {env.AWS_SECRET_ACCESS_KEY}
//			session_token <token>
//			timeout <duration>
//			concurrency <n>
//			local {
//				max_size <bytes, e.g. 2GiB>
//				ttl <duration>
//			}
//		}
//		cluster [<name>] {
//			name <name>              # the cluster's area in Caddy's storage; default the cache's name
//			lease <duration>         # a node silent this long is dead, its work taken over (10s)
//			poll <duration>          # how often the shared task registry is read (1s)
//		}
//		jpeg_quality <1-100>
//		breaker <failures> [<cooldown>] | breaker off | breaker { failures <n>; cooldown <d>; off }
//		max_param_length <bytes>
//		neutral_params <name>...
//		gridset <name> {
//			srs <EPSG:code>
//			extent <minx> <miny> <maxx> <maxy>
//			resolutions <r>... | scale_denominators <s>... | levels <n>
//			tile_size <width> [<height>]
//			origin bottom_left|top_left
//			meters_per_unit <m>
//			pixel_size <metres>
//			y_first
//		}
//		layer <name> {
//			upstream_layers <name>...
//			upstream_format <FORMAT>   # what metatiles are requested in; default the tile's format
//			formats <mime>...
//			format <mime> {            # encoding options of one of the formats
//				quality <1-100>
//				colors <2-256>
//				dither
//			}
//			gridsets <name>...
//			extent <minlon> <minlat> <maxlon> <maxlat>
//			gridset_extent <gridset> <minx> <miny> <maxx> <maxy>
//			metatile <width> [<height>]
//			gutter <pixels>
//			zoom <min> [<max>]
//			transparent true|false
//			png_compression fast|default|best
//			client_expiry <duration>
//			server_expiry <duration>
//			param <NAME> {
//				default <value>
//				values <value>...
//				regex <pattern>
//				ignore_case
//			}
//		}
//		services {
//			wmts <path-prefix>
//			tms <path-prefix>
//			xyz <path-prefix>
//			demo <path-prefix>
//		}
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.Upstream = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "name":
			if err := oneArg(d, &h.Name); err != nil {
				return err
			}
		case "services":
			if err := parseServices(d, h); err != nil {
				return err
			}
		default:
			if err := h.Config.parseOption(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseGlobalOption reads the tile_cache global option, the app's caches:
//
//	{
//		tile_cache {
//			cache <name> {
//				<every tile_cache setting but name and services>
//			}
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if existing != nil {
		a, ok := existing.(httpcaddyfile.App)
		if !ok {
			return nil, d.Err("tile_cache: unexpected earlier global option value")
		}
		if err := json.Unmarshal(a.Value, app); err != nil {
			return nil, err
		}
	}
	for d.Next() {
		if d.NextArg() {
			return nil, d.ArgErr()
		}
		for d.NextBlock(0) {
			if d.Val() != "cache" {
				return nil, d.Errf("unknown tile_cache global option %q (cache)", d.Val())
			}
			var name string
			if err := oneArgThenBlock(d, &name); err != nil {
				return nil, err
			}
			if _, dup := app.Caches[name]; dup {
				return nil, d.Errf("tile_cache: cache %q defined twice", name)
			}
			cfg := new(Config)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				if err := cfg.parseOption(d); err != nil {
					return nil, err
				}
			}
			if app.Caches == nil {
				app.Caches = make(map[string]*Config)
			}
			app.Caches[name] = cfg
		}
	}
	return httpcaddyfile.App{Name: "tile_cache", Value: caddyconfig.JSON(app, nil)}, nil
}

// oneArgThenBlock reads exactly one argument before a block.
func oneArgThenBlock(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// parseOption reads one cache setting, the same in a tile_cache handler and
// in a cache of the global option.
func (c *Config) parseOption(d *caddyfile.Dispenser) error {
	switch d.Val() {
	case "upstream":
		return oneArg(d, &c.Upstream)
	case "timeout":
		return durationArg(d, &c.Timeout)
	case "upstream_concurrency":
		return intArgs(d, &c.UpstreamConcurrency)
	case "upstream_queue":
		return intArgs(d, &c.UpstreamQueue)
	case "seed_slots":
		var n int
		if err := intArgs(d, &n); err != nil {
			return err
		}
		c.SeedSlots = &n
	case "max_misses_per_client":
		return intArgs(d, &c.MaxMissesPerClient)
	case "storage":
		return oneArg(d, &c.Storage)
	case "usage":
		if d.NextArg() {
			return d.ArgErr()
		}
		c.Usage = true
	case "quota":
		if c.Quota != nil {
			return d.Err("quota given twice")
		}
		c.Quota = new(quota.Config)
		return c.Quota.UnmarshalCaddyfile(d)
	case "jpeg_quality":
		return intArgs(d, &c.JPEGQuality)
	case "neutral_params":
		args, err := listArgs(d)
		if err != nil {
			return err
		}
		c.NeutralParams = append(c.NeutralParams, args...)
	case "gridset":
		g, err := parseGridset(d)
		if err != nil {
			return err
		}
		c.Gridsets = append(c.Gridsets, g)
	case "layer":
		l, err := parseLayer(d)
		if err != nil {
			return err
		}
		c.Layers = append(c.Layers, l)
	case "breaker":
		return parseBreaker(d, c)
	case "s3":
		return parseS3(d, c)
	case "cluster":
		return parseCluster(d, c)
	case "max_param_length":
		return intArgs(d, &c.MaxParamLength)
	default:
		return d.Errf("unknown tile_cache option %q", d.Val())
	}
	return nil
}

func parseGridset(d *caddyfile.Dispenser) (gridset.Config, error) {
	var g gridset.Config
	if !d.NextArg() {
		return g, d.ArgErr()
	}
	g.Name = d.Val()
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "srs":
			err = oneArg(d, &g.SRS)
		case "extent":
			err = floatArgs(d, g.Extent[:])
		case "resolutions":
			g.Resolutions, err = floatList(d)
		case "scale_denominators":
			g.ScaleDenominators, err = floatList(d)
		case "levels":
			err = intArgs(d, &g.Levels)
		case "tile_size":
			err = intPairArgs(d, &g.TileWidth, &g.TileHeight)
		case "origin":
			err = oneArg(d, &g.Origin)
		case "meters_per_unit":
			err = floatArg(d, &g.MetersPerUnit)
		case "pixel_size":
			err = floatArg(d, &g.PixelSize)
		case "y_first":
			g.YFirst = true
		default:
			return g, d.Errf("unknown gridset option %q", d.Val())
		}
		if err != nil {
			return g, err
		}
	}
	return g, nil
}

func parseLayer(d *caddyfile.Dispenser) (LayerConfig, error) {
	var l LayerConfig
	if !d.NextArg() {
		return l, d.ArgErr()
	}
	l.Name = d.Val()
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "upstream_layers":
			var args []string
			args, err = listArgs(d)
			l.UpstreamLayers = append(l.UpstreamLayers, args...)
		case "formats":
			var args []string
			args, err = listArgs(d)
			l.Formats = append(l.Formats, args...)
		case "format":
			var name string
			var o imaging.Options
			if name, o, err = parseFormatOptions(d); err == nil {
				if _, dup := l.FormatOptions[name]; dup {
					return l, d.Errf("format %s: options given twice", name)
				}
				if l.FormatOptions == nil {
					l.FormatOptions = map[string]imaging.Options{}
				}
				l.FormatOptions[name] = o
			}
		case "gridsets":
			var args []string
			args, err = listArgs(d)
			l.Gridsets = append(l.Gridsets, args...)
		case "extent":
			var e [4]float64
			err = floatArgs(d, e[:])
			l.Extent = &e
		case "gridset_extent":
			if !d.NextArg() {
				return l, d.ArgErr()
			}
			name := d.Val()
			var e [4]float64
			args := d.RemainingArgs()
			if len(args) != 4 {
				return l, d.ArgErr()
			}
			for i, a := range args {
				if e[i], err = strconv.ParseFloat(a, 64); err != nil {
					return l, d.Errf("gridset_extent: %q is not a number", a)
				}
			}
			if err == nil {
				if l.GridsetExtents == nil {
					l.GridsetExtents = map[string][4]float64{}
				}
				l.GridsetExtents[name] = e
			}
		case "metatile":
			err = intPairArgs(d, &l.MetaWidth, &l.MetaHeight)
		case "gutter":
			err = intArgs(d, &l.Gutter)
		case "zoom":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return l, d.ArgErr()
			}
			lo, err1 := strconv.Atoi(args[0])
			if err1 != nil {
				return l, d.Errf("zoom: %q is not a whole number", args[0])
			}
			l.MinZoom = &lo
			if len(args) == 2 {
				hi, err2 := strconv.Atoi(args[1])
				if err2 != nil {
					return l, d.Errf("zoom: %q is not a whole number", args[1])
				}
				l.MaxZoom = &hi
			}
		case "png_compression":
			var s string
			if err = oneArg(d, &s); err == nil {
				if l.PNGCompression, err = imaging.ParsePNGCompression(s); err != nil {
					return l, d.Errf("png_compression: %v", err)
				}
			}
		case "upstream_format":
			err = oneArg(d, &l.UpstreamFormat)
		case "transparent":
			var s string
			if err = oneArg(d, &s); err == nil {
				b, perr := strconv.ParseBool(s)
				if perr != nil {
					return l, d.Errf("transparent: %v", perr)
				}
				l.Transparent = &b
			}
		case "client_expiry":
			err = durationArg(d, &l.ClientExpiry)
		case "server_expiry":
			err = durationArg(d, &l.ServerExpiry)
		case "param":
			var f params.FilterConfig
			if !d.NextArg() {
				return l, d.ArgErr()
			}
			f.Key = d.Val()
			for n := d.Nesting(); d.NextBlock(n); {
				switch d.Val() {
				case "default":
					args := d.RemainingArgs()
					if len(args) > 1 {
						return l, d.ArgErr()
					}
					if len(args) == 1 {
						f.Default = args[0]
					}
				case "values":
					var args []string
					args, err = listArgs(d)
					f.Values = append(f.Values, args...)
				case "regex":
					err = oneArg(d, &f.Regex)
				case "ignore_case":
					f.IgnoreCase = true
				default:
					return l, d.Errf("unknown param option %q", d.Val())
				}
				if err != nil {
					return l, err
				}
			}
			l.Parameters = append(l.Parameters, f)
		default:
			return l, d.Errf("unknown layer option %q", d.Val())
		}
		if err != nil {
			return l, err
		}
	}
	return l, nil
}

// parseCluster reads "cluster [<name>]" with an optional block.
func parseCluster(d *caddyfile.Dispenser, c *Config) error {
	cl := &cluster.Config{}
	c.Cluster = cl
	if d.NextArg() {
		cl.Name = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "name":
			err = oneArg(d, &cl.Name)
		case "lease":
			err = durationArg(d, &cl.Lease)
		case "poll":
			err = durationArg(d, &cl.Poll)
		default:
			return d.Errf("unknown cluster option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseS3 reads an s3 block.
func parseS3(d *caddyfile.Dispenser, c *Config) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	s := &S3Config{}
	c.S3 = s
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "bucket":
			err = oneArg(d, &s.Bucket)
		case "prefix":
			err = oneArg(d, &s.Prefix)
		case "endpoint":
			err = oneArg(d, &s.Endpoint)
		case "region":
			err = oneArg(d, &s.Region)
		case "path_style":
			s.PathStyle = true
			if d.NextArg() {
				return d.ArgErr()
			}
		case "insecure":
			s.Insecure = true
			if d.NextArg() {
				return d.ArgErr()
			}
		case "access_key":
			err = oneArg(d, &s.AccessKey)
		case "secret_key":
			err = oneArg(d, &s.SecretKey)
		case "session_token":
			err = oneArg(d, &s.SessionToken)
		case "timeout":
			err = durationArg(d, &s.Timeout)
		case "concurrency":
			err = intArgs(d, &s.Concurrency)
		case "local":
			err = parseLocalTier(d, s)
		default:
			return d.Errf("unknown s3 option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	if s.Bucket == "" {
		return d.Err("s3: bucket is required")
	}
	return nil
}

func parseLocalTier(d *caddyfile.Dispenser, s *S3Config) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	l := &LocalTierConfig{}
	s.Local = l
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_size":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 {
				return d.Errf("local max_size: %q is not a size (e.g. 2GiB)", v)
			}
			l.MaxSize = int64(n)
		case "ttl":
			if err := durationArg(d, &l.TTL); err != nil {
				return err
			}
		default:
			return d.Errf("unknown s3 local option %q", d.Val())
		}
	}
	return nil
}

// parseBreaker reads "breaker off", "breaker <failures> [<cooldown>]", or
// a block:
//
//	breaker {
//		failures <n>
//		cooldown <duration>
//		off
//	}
func parseBreaker(d *caddyfile.Dispenser, c *Config) error {
	b := &BreakerConfig{}
	c.Breaker = b
	args := d.RemainingArgs()
	switch {
	case len(args) == 1 && args[0] == "off":
		b.Off = true
	case len(args) == 1 || len(args) == 2:
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return d.Errf("breaker: %q is not a number of failures (or off)", args[0])
		}
		b.Failures = n
		if len(args) == 2 {
			v, err := caddy.ParseDuration(args[1])
			if err != nil || v <= 0 {
				return d.Errf("breaker: %q is not a cooldown duration", args[1])
			}
			b.Cooldown = caddy.Duration(v)
		}
	case len(args) > 2:
		return d.ArgErr()
	}
	block := false
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		block = true
		if len(args) > 0 {
			return d.Err("breaker: give the settings as arguments or in a block, not both")
		}
		switch d.Val() {
		case "failures":
			if err := intArgs(d, &b.Failures); err != nil {
				return err
			}
			if b.Failures < 1 {
				return d.Err("breaker failures must be at least 1 (or: off)")
			}
		case "cooldown":
			if err := durationArg(d, &b.Cooldown); err != nil {
				return err
			}
			if b.Cooldown <= 0 {
				return d.Err("breaker cooldown must be positive")
			}
		case "off":
			if d.NextArg() {
				return d.ArgErr()
			}
			b.Off = true
		default:
			return d.Errf("unknown breaker option %q (failures, cooldown, off)", d.Val())
		}
	}
	if len(args) == 0 && !block {
		return d.Err("breaker: give off, a number of failures, or a block")
	}
	return nil
}

// parseServices reads the services block: one "<service> <prefix>" per line.
func parseServices(d *caddyfile.Dispenser, h *Handler) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if h.Services == nil {
		h.Services = &ServicesConfig{}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch name := d.Val(); name {
		case "wmts":
			dst = &h.Services.WMTS
		case "tms":
			dst = &h.Services.TMS
		case "xyz":
			dst = &h.Services.XYZ
		case "demo":
			dst = &h.Services.Demo
		default:
			return d.Errf("unknown services option %q (wmts, tms, xyz, demo)", name)
		}
		name := d.Val()
		if err := oneArg(d, dst); err != nil {
			return err
		}
		if _, err := normalizePrefix(name, *dst); err != nil || *dst == "" {
			return d.Errf("services %s: the prefix must be a path such as /%s, not %q", name, name, *dst)
		}
	}
	return nil
}

func oneArg(d *caddyfile.Dispenser, dst *string) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.ArgErr()
	}
	*dst = args[0]
	return nil
}

// The helpers below are called with the option's name as the current
// token, and name it in their errors.

func durationArg(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	opt := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	v, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("%s: %v", opt, err)
	}
	*dst = caddy.Duration(v)
	return nil
}

func intArgs(d *caddyfile.Dispenser, dst *int) error {
	opt := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return d.Errf("%s: %q is not a whole number", opt, s)
	}
	*dst = v
	return nil
}

// floatArgs reads exactly len(dst) numbers.
func floatArgs(d *caddyfile.Dispenser, dst []float64) error {
	opt := d.Val()
	args := d.RemainingArgs()
	if len(args) != len(dst) {
		return d.ArgErr()
	}
	for i, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		if err != nil {
			return d.Errf("%s: %q is not a number", opt, a)
		}
		dst[i] = v
	}
	return nil
}

func floatArg(d *caddyfile.Dispenser, dst *float64) error {
	var v [1]float64
	err := floatArgs(d, v[:])
	*dst = v[0]
	return err
}

func floatList(d *caddyfile.Dispenser) ([]float64, error) {
	opt := d.Val()
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	out := make([]float64, len(args))
	for i, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		if err != nil {
			return nil, d.Errf("%s: %q is not a number", opt, a)
		}
		out[i] = v
	}
	return out, nil
}

// listArgs reads one or more arguments.
// parseFormatOptions reads `format <mime> { quality <n>; colors <n>; dither }`.
// The values are checked when the layer is compiled, against the format.
func parseFormatOptions(d *caddyfile.Dispenser) (string, imaging.Options, error) {
	var o imaging.Options
	if !d.NextArg() {
		return "", o, d.ArgErr()
	}
	name := d.Val()
	if d.NextArg() {
		return "", o, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "quality":
			err = intArgs(d, &o.Quality)
		case "colors":
			err = intArgs(d, &o.Colors)
		case "dither":
			if d.NextArg() {
				return "", o, d.ArgErr()
			}
			o.Dither = true
		default:
			return "", o, d.Errf("format %s: unknown option %q (quality, colors, dither)", name, d.Val())
		}
		if err != nil {
			return "", o, err
		}
	}
	return name, o, nil
}

func listArgs(d *caddyfile.Dispenser) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	return args, nil
}

// intPairArgs reads "<a> [<b>]"; one number means both.
func intPairArgs(d *caddyfile.Dispenser, a, b *int) error {
	opt := d.Val()
	args := d.RemainingArgs()
	if len(args) == 1 {
		args = append(args, args[0])
	}
	if len(args) != 2 {
		return d.ArgErr()
	}
	for i, dst := range []*int{a, b} {
		v, err := strconv.Atoi(args[i])
		if err != nil {
			return d.Errf("%s: %q is not a whole number", opt, args[i])
		}
		*dst = v
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
