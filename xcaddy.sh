#!/usr/bin/env bash
# Builds ./caddy: Caddy v2.11.9 with this plugin, using xcaddy pinned in go.mod
# as a tool (go tool xcaddy), so nothing is looked up at @latest.
#
# The plugin is given to xcaddy with an explicit placeholder version: xcaddy
# then runs `go get <module>@<that version>`, which the replace directive it
# writes answers from this checkout. Without a version, go asks the module
# proxy for the list of published versions of a module that was never
# published, and the proxy answers 403.
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-./caddy}
CADDY_VERSION=v2.11.9
PLACEHOLDER=v0.0.0-00010101000000-000000000000
XCADDY_SKIP_CLEANUP=0 go tool xcaddy build "$CADDY_VERSION" \
  --output "$out" \
  --with "github.com/tilecache/caddy-tilecache@${PLACEHOLDER}=$(pwd)"
# Read the whole list before matching: grep -q exits at the first match,
# and under pipefail the SIGPIPE that then kills caddy would fail the check.
mods=$("$out" list-modules)
grep -qx 'http.handlers.tile_cache' <<<"$mods" || {
  echo "xcaddy.sh: built $out lacks http.handlers.tile_cache" >&2
  exit 1
}
echo "built $out"
