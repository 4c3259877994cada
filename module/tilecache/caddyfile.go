package tilecache

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/params"
)

func init() {
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
//		storage <dir>
//		jpeg_quality <1-100>
//		breaker <failures> [<cooldown>] | breaker off
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
//			formats <mime>...
//			gridsets <name>...
//			extent <minlon> <minlat> <maxlon> <maxlat>
//			gridset_extent <gridset> <minx> <miny> <maxx> <maxy>
//			metatile <width> [<height>]
//			gutter <pixels>
//			zoom <min> [<max>]
//			transparent true|false
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
func (t *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		t.Upstream = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "name":
			if err := oneArg(d, &t.Name); err != nil {
				return err
			}
		case "upstream":
			if err := oneArg(d, &t.Upstream); err != nil {
				return err
			}
		case "timeout":
			if err := durationArg(d, &t.Timeout); err != nil {
				return err
			}
		case "upstream_concurrency":
			if err := intArgs(d, &t.UpstreamConcurrency); err != nil {
				return err
			}
		case "storage":
			if err := oneArg(d, &t.Storage); err != nil {
				return err
			}
		case "jpeg_quality":
			if err := intArgs(d, &t.JPEGQuality); err != nil {
				return err
			}
		case "neutral_params":
			args, err := listArgs(d)
			if err != nil {
				return err
			}
			t.NeutralParams = append(t.NeutralParams, args...)
		case "gridset":
			g, err := parseGridset(d)
			if err != nil {
				return err
			}
			t.Gridsets = append(t.Gridsets, g)
		case "layer":
			l, err := parseLayer(d)
			if err != nil {
				return err
			}
			t.Layers = append(t.Layers, l)
		case "breaker":
			if err := parseBreaker(d, t); err != nil {
				return err
			}
		case "max_param_length":
			if err := intArgs(d, &t.MaxParamLength); err != nil {
				return err
			}
		case "services":
			if err := parseServices(d, t); err != nil {
				return err
			}
		default:
			return d.Errf("unknown tile_cache option %q", d.Val())
		}
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

// parseBreaker reads "breaker <failures> [<cooldown>]" or "breaker off"
// (the same as 0 failures).
func parseBreaker(d *caddyfile.Dispenser, t *Handler) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 || args[0] == "off" && len(args) != 1 {
		return d.ArgErr()
	}
	n := 0
	if args[0] != "off" {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil || n < 0 {
			return d.Errf("breaker: %q is not a number of failures (or off)", args[0])
		}
	}
	t.BreakerFailures = &n
	if len(args) == 2 {
		v, err := caddy.ParseDuration(args[1])
		if err != nil || v <= 0 {
			return d.Errf("breaker: %q is not a cooldown duration", args[1])
		}
		t.BreakerCooldown = caddy.Duration(v)
	}
	return nil
}

// parseServices reads the services block: one "<service> <prefix>" per line.
func parseServices(d *caddyfile.Dispenser, t *Handler) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if t.Services == nil {
		t.Services = &ServicesConfig{}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch name := d.Val(); name {
		case "wmts":
			dst = &t.Services.WMTS
		case "tms":
			dst = &t.Services.TMS
		case "xyz":
			dst = &t.Services.XYZ
		case "demo":
			dst = &t.Services.Demo
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
