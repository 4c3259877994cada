package admin

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("tile_cache_admin", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("tile_cache_admin", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var a Handler
	err := a.UnmarshalCaddyfile(h.Dispenser)
	return &a, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	tile_cache_admin [<cache>] {
//		cache <name>
//		workers <n>
//		retry_count <n>
//		retry_wait <duration>
//		max_failures <n>
//		history <n>
//		max_body <size>             (bytes, or 512KiB, 1MB...)
//		max_tasks <n>
//		max_tiles_per_task <n>
//		max_param_length <bytes>
//		max_list_lines <n>
//		checkpoint_interval <duration>
//		trusted_origins <origin>...   (may POST from a browser on another origin)
//		offline_dir <path>          (where uploads wait while imported)
//		import_root <path>          (what an import may read on the server)
//		max_import <size>           (bytes of an uploaded file)
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		h.Cache = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		opt := d.Val()
		if opt == "trusted_origins" {
			h.TrustedOrigins = append(h.TrustedOrigins, d.RemainingArgs()...)
			if len(h.TrustedOrigins) == 0 {
				return d.ArgErr()
			}
			continue
		}
		if !d.NextArg() {
			return d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		var err error
		switch opt {
		case "cache":
			h.Cache = val
		case "workers":
			h.Workers, err = strconv.Atoi(val)
		case "history":
			h.History, err = strconv.Atoi(val)
		case "retry_count":
			var n int
			n, err = strconv.Atoi(val)
			h.RetryCount = &n
		case "max_failures":
			var n int64
			n, err = strconv.ParseInt(val, 10, 64)
			h.MaxFailures = &n
		case "checkpoint_interval":
			var dur time.Duration
			dur, err = caddy.ParseDuration(val)
			h.CheckpointInterval = caddy.Duration(dur)
		case "max_body":
			var n uint64
			n, err = humanize.ParseBytes(val)
			if err == nil && n > 1<<40 {
				err = fmt.Errorf("%s is too large", val)
			}
			h.MaxBody = int64(n)
		case "offline_dir":
			h.OfflineDir = val
		case "import_root":
			h.ImportRoot = val
		case "max_import":
			var n uint64
			n, err = humanize.ParseBytes(val)
			if err == nil && n > 1<<50 {
				err = fmt.Errorf("%s is too large", val)
			}
			h.MaxImport = int64(n)
		case "max_tasks":
			h.MaxTasks, err = strconv.Atoi(val)
		case "max_tiles_per_task":
			h.MaxTilesPerTask, err = strconv.ParseInt(val, 10, 64)
		case "max_param_length":
			h.MaxParamLength, err = strconv.Atoi(val)
		case "max_list_lines":
			h.MaxListLines, err = strconv.ParseInt(val, 10, 64)
		case "retry_wait":
			var dur time.Duration
			dur, err = caddy.ParseDuration(val)
			h.RetryWait = caddy.Duration(dur)
		default:
			return d.Errf("unknown tile_cache_admin option %q", opt)
		}
		if err != nil {
			return d.Errf("%s: %v", opt, err)
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
