package quota

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
)

// UnmarshalCaddyfile reads a quota, the dispenser on its name:
//
//	quota [<max_size>] {
//		max_size <size>               # the whole store, e.g. 20GiB
//		low_watermark <share>         # 90% or 0.9: where eviction stops
//		policy lru|lfu
//		keep_levels <min> <max>       # never evicted, e.g. 0 8
//		layer <name> <size>           # a layer's own quota
//		layer <name> {
//			max_size <size>
//			policy lru|lfu
//			keep_levels <min> <max>
//		}
//	}
func (c *Config) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		n, err := size(d, d.Val())
		if err != nil {
			return err
		}
		c.MaxSize = n
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_size":
			if err := sizeArg(d, &c.MaxSize); err != nil {
				return err
			}
		case "low_watermark":
			if !d.NextArg() {
				return d.ArgErr()
			}
			v := d.Val()
			pct := strings.HasSuffix(v, "%")
			f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if err != nil {
				return d.Errf("quota low_watermark: %q is not a share (e.g. 90%% or 0.9)", v)
			}
			if pct {
				f /= 100
			}
			c.LowWatermark = f
			if d.NextArg() {
				return d.ArgErr()
			}
		case "policy":
			if err := policyArg(d, &c.Policy); err != nil {
				return err
			}
		case "keep_levels":
			if err := levelsArg(d, &c.KeepLevels); err != nil {
				return err
			}
		case "layer":
			if !d.NextArg() {
				return d.ArgErr()
			}
			name := d.Val()
			if c.Layers == nil {
				c.Layers = map[string]*LayerConfig{}
			}
			if c.Layers[name] != nil {
				return d.Errf("quota: layer %q given twice", name)
			}
			l := &LayerConfig{}
			c.Layers[name] = l
			if d.NextArg() {
				n, err := size(d, d.Val())
				if err != nil {
					return err
				}
				l.MaxSize = n
				if d.NextArg() {
					return d.ArgErr()
				}
			}
			for nest := d.Nesting(); d.NextBlock(nest); {
				var err error
				switch d.Val() {
				case "max_size":
					err = sizeArg(d, &l.MaxSize)
				case "policy":
					err = policyArg(d, &l.Policy)
				case "keep_levels":
					err = levelsArg(d, &l.KeepLevels)
				default:
					err = d.Errf("unknown quota layer option %q (max_size, policy, keep_levels)", d.Val())
				}
				if err != nil {
					return err
				}
			}
		default:
			return d.Errf("unknown quota option %q (max_size, low_watermark, policy, keep_levels, layer)", d.Val())
		}
	}
	return nil
}

func size(d *caddyfile.Dispenser, v string) (int64, error) {
	n, err := humanize.ParseBytes(v)
	if err != nil || n == 0 || n > 1<<62 {
		return 0, d.Errf("quota: %q is not a size (e.g. 20GiB)", v)
	}
	return int64(n), nil
}

func sizeArg(d *caddyfile.Dispenser, dst *int64) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := size(d, d.Val())
	if err != nil {
		return err
	}
	*dst = n
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func policyArg(d *caddyfile.Dispenser, dst *Policy) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	p := Policy(strings.ToLower(d.Val()))
	if err := p.check(); err != nil {
		return d.Err(err.Error())
	}
	*dst = p
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func levelsArg(d *caddyfile.Dispenser, dst **[2]int) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.Errf("quota keep_levels: want <min> <max>, e.g. keep_levels 0 8")
	}
	var l [2]int
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil {
			return d.Errf("quota keep_levels: %q is not a level", a)
		}
		l[i] = n
	}
	if err := checkLevels(&l); err != nil {
		return d.Err(err.Error())
	}
	*dst = &l
	return nil
}
