// Package tilecache bundles the caddy-tilecache modules: import it (or build
// with `xcaddy build --with github.com/tilecache/caddy-tilecache`) to get
// the tile_cache handler and its admin interface in Caddy.
package tilecache

import (
	// The tile_cache HTTP handler.
	_ "github.com/tilecache/caddy-tilecache/module/tilecache"
	// The tile_cache_admin HTTP handler: GeoWebCache's REST interface.
	_ "github.com/tilecache/caddy-tilecache/admin"
	// `caddy tile-cache ...`: the command line of the REST interface.
	_ "github.com/tilecache/caddy-tilecache/command"
)
