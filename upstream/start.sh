#!/usr/bin/env bash
# Usage: upstream/start.sh DIR PORT
#
# Starts the real upstream WMS: a private lighttpd on 127.0.0.1:PORT (its
# config is written to DIR/lighttpd.conf; no system config is used) whose
# mod_fastcgi spawns 2 MapServer processes (/usr/lib/cgi-bin/mapserv, run
# through the symlink DIR/mapserv so that they can be told apart from any
# other mapserv) with MAPSERVER_CONFIG_FILE=DIR/mapserver.conf.
#
#   WMS endpoint: http://127.0.0.1:PORT/wms?SERVICE=WMS&REQUEST=GetMap&...
#
# Runs generate.sh DIR PORT first (a no-op when the data is up to date; it
# writes DIR/world.map if missing).
# lighttpd daemonizes; its pid goes to DIR/lighttpd.pid, the spawned mapserv
# pids to DIR/mapserv.pids, the port to DIR/port. Waits up to START_TIMEOUT
# seconds (default 20) for GetCapabilities to answer 200; fails loudly with
# the error logs otherwise. Idempotent: when this DIR's upstream already
# answers on PORT it just says so. Stop it with upstream/stop.sh DIR.
set -euo pipefail

usage() { echo "usage: $0 DIR PORT" >&2; exit 2; }
[[ $# -eq 2 && -n $1 ]] || usage
PORT=$2
[[ $PORT =~ ^[0-9]+$ && $PORT -ge 1 && $PORT -le 65535 ]] || { echo "start.sh: bad PORT: $PORT" >&2; exit 2; }
[[ $1 != *[[:space:]]* ]] || { echo "start.sh: DIR must not contain whitespace (lighttpd splits bin-path)" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
DIR=$(realpath -- "$1")
MAPSERV=/usr/lib/cgi-bin/mapserv
TIMEOUT=${START_TIMEOUT:-20}
BASE="http://127.0.0.1:$PORT/wms"
CAPS="$BASE?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetCapabilities"

for need in "$MAPSERV" "$(command -v lighttpd || echo /usr/sbin/lighttpd)" "$(command -v curl || echo /usr/bin/curl)"; do
	[[ -x $need ]] || { echo "start.sh: $need missing; run upstream/install.sh first" >&2; exit 1; }
done
LIGHTTPD=$(command -v lighttpd)

NAME=start.sh
# shellcheck source=upstream/lighttpd.sh
source "$HERE/lighttpd.sh"

# Answers 200 with a capabilities document?
caps_ok() {
	local body
	body=$(curl -s --max-time 3 -w '\n%{http_code}' "$CAPS" 2>/dev/null) || return 1
	[[ ${body##*$'\n'} == 200 && $body == *WMT_MS_Capabilities* ]]
}

exit_if_running upstream/stop.sh

# Clean up whatever a previous run left (stale pid files, orphaned mapserv
# still holding the FastCGI sockets, which lighttpd would otherwise reuse
# instead of spawning fresh processes).
"$HERE/stop.sh" "$DIR" >/dev/null

# Data, mapfile, MapServer config (cheap when up to date).
"$HERE/generate.sh" "$DIR" "$PORT"

# The FastCGI processes run as DIR/mapserv so that stop.sh can find ours
# by command line even after lighttpd, their parent, is gone.
ln -sfn "$MAPSERV" "$DIR/mapserv"
mkdir -p "$DIR/htdocs"

# Unix socket paths are limited to 108 bytes; lighttpd appends "-N".
SOCK="$DIR/mapserv.sock"
if [[ ${#SOCK} -gt 100 ]]; then
	SOCK="/tmp/tilecache-upstream-$(echo -n "$DIR" | sha256sum | cut -c1-16).sock"
fi
echo "$SOCK" >"$DIR/socket"

cat >"$DIR/lighttpd.conf" <<EOF
# Private lighttpd for the upstream WMS, written by upstream/start.sh.
server.modules          = ( "mod_accesslog", "mod_fastcgi" )
server.bind             = "127.0.0.1"
server.port             = $PORT
server.document-root    = "$DIR/htdocs"
server.pid-file         = "$DIR/lighttpd.pid"
server.errorlog         = "$DIR/lighttpd-error.log"
accesslog.filename      = "$DIR/lighttpd-access.log"
server.tag              = "tilecache-upstream"
server.max-keep-alive-requests = 1000
server.max-connections  = 512
# Pass MapServer's answer on as it comes rather than buffering all of it
# first (in temp files beyond 1 MB): an uncompressed metatile is 4 MB
# (measured: 76 instead of 69 raw metatiles/s, two at a time).
server.stream-response-body = 2

# GET /wms?... -> MapServer. 2 processes, one per core; lighttpd queues
# requests beyond that.
fastcgi.server = (
  "/wms" => ( "mapserv" => (
    "bin-path"             => "$DIR/mapserv",
    "socket"               => "$SOCK",
    "max-procs"            => 2,
    "check-local"          => "disable",
    "bin-environment"      => ( "MAPSERVER_CONFIG_FILE" => "$DIR/mapserver.conf" ),
    "bin-copy-environment" => ( "PATH", "LANG", "LC_ALL", "TZ" ),
  ) )
)
EOF

start_lighttpd mapserv lighttpd-error.log lighttpd-stdout.log mapserv-error.log

echo "start.sh: upstream WMS at $BASE (lighttpd pid $LPID, mapserv pids $(paste -sd' ' "$DIR/mapserv.pids"))"
