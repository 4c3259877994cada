#!/usr/bin/env bash
# Usage: upstream/qgis/start.sh DIR PORT
#
# Starts QGIS Server as a real upstream WMS: a private lighttpd on
# 127.0.0.1:PORT (config DIR/lighttpd.conf; no system config is used) whose
# mod_fastcgi spawns 2 QGIS Server processes (Debian's
# /usr/lib/cgi-bin/qgis_mapserv.fcgi, run through the symlink
# DIR/qgis_mapserv.fcgi so that upstream/stop.sh can tell them from any
# other) serving DIR/world.qgs.
#
#   WMS endpoint: http://127.0.0.1:PORT/wms?SERVICE=WMS&REQUEST=GetMap&...
#
# Runs upstream/qgis/generate.sh DIR first (a no-op when up to date). DIR
# must not be a running MapServer upstream's DIR. Records DIR/lighttpd.pid,
# DIR/qgis_mapserv.fcgi.pids, DIR/port and DIR/backend (for stop.sh); waits
# up to START_TIMEOUT seconds (default 30) for a 200 GetCapabilities.
# Idempotent: when this DIR's upstream already answers on PORT it just says
# so. Stop it with upstream/qgis/stop.sh DIR.
set -euo pipefail

usage() { echo "usage: $0 DIR PORT" >&2; exit 2; }
[[ $# -eq 2 && -n $1 ]] || usage
PORT=$2
[[ $PORT =~ ^[0-9]+$ && $PORT -ge 1 && $PORT -le 65535 ]] || { echo "qgis/start.sh: bad PORT: $PORT" >&2; exit 2; }
[[ $1 != *[[:space:]]* ]] || { echo "qgis/start.sh: DIR must not contain whitespace (lighttpd splits bin-path)" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
DIR=$(realpath -- "$1")
FCGI=/usr/lib/cgi-bin/qgis_mapserv.fcgi
BACKEND=qgis_mapserv.fcgi
TIMEOUT=${START_TIMEOUT:-30}
BASE="http://127.0.0.1:$PORT/wms"
CAPS="$BASE?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"

for need in "$FCGI" "$(command -v lighttpd || echo /usr/sbin/lighttpd)" "$(command -v curl || echo /usr/bin/curl)"; do
	[[ -x $need ]] || { echo "qgis/start.sh: $need missing; run upstream/install.sh first" >&2; exit 1; }
done
LIGHTTPD=$(command -v lighttpd)

NAME=qgis/start.sh
# shellcheck source=upstream/lighttpd.sh
source "$HERE/../lighttpd.sh"

# A 200 with QGIS Server's WMS 1.3.0 capabilities, which list the layers
# (a project that failed to load answers an exception instead).
caps_ok() {
	local body
	body=$(curl -s --max-time 5 -w '\n%{http_code}' "$CAPS" 2>/dev/null) || return 1
	[[ ${body##*$'\n'} == 200 && $body == *WMS_Capabilities* && $body == *'<Name>test:places</Name>'* ]]
}

exit_if_running upstream/qgis/stop.sh

# Whatever a previous run left: stale pid files, orphaned FastCGI
# processes holding the sockets lighttpd would otherwise reuse.
echo "$BACKEND" >"$DIR/backend"
"$HERE/../stop.sh" "$DIR" >/dev/null

"$HERE/generate.sh" "$DIR"

ln -sfn "$FCGI" "$DIR/$BACKEND"
mkdir -p "$DIR/htdocs" "$DIR/home" "$DIR/run"
chmod 0700 "$DIR/run"

SOCK="$DIR/qgis.sock"
if [[ ${#SOCK} -gt 100 ]]; then
	SOCK="/tmp/tilecache-qgis-$(echo -n "$DIR" | sha256sum | cut -c1-16).sock"
fi
echo "$SOCK" >"$DIR/socket"

cat >"$DIR/lighttpd.conf" <<CONF
# Private lighttpd for QGIS Server, written by upstream/qgis/start.sh.
server.modules          = ( "mod_accesslog", "mod_fastcgi" )
server.bind             = "127.0.0.1"
server.port             = $PORT
server.document-root    = "$DIR/htdocs"
server.pid-file         = "$DIR/lighttpd.pid"
server.errorlog         = "$DIR/lighttpd-error.log"
accesslog.filename      = "$DIR/lighttpd-access.log"
server.tag              = "tilecache-upstream-qgis"
server.max-keep-alive-requests = 1000
server.max-connections  = 512
server.stream-response-body = 2

# GET /wms?... -> QGIS Server. 2 processes, one per core; lighttpd queues
# requests beyond that.
fastcgi.server = (
  "/wms" => ( "qgis" => (
    "bin-path"             => "$DIR/$BACKEND",
    "socket"               => "$SOCK",
    "max-procs"            => 2,
    "check-local"          => "disable",
    # QGIS_PROJECT_FILE: clients need no MAP= parameter. A Qt application
    # without a display: offscreen. HOME and XDG_RUNTIME_DIR: QGIS writes
    # its profile and caches there, not in root's home.
    "bin-environment"      => (
      "QGIS_PROJECT_FILE"     => "$DIR/world.qgs",
      "QGIS_SERVER_LOG_FILE"  => "$DIR/qgis-server.log",
      "QGIS_SERVER_LOG_LEVEL" => "1",
      "QT_QPA_PLATFORM"       => "offscreen",
      "HOME"                  => "$DIR/home",
      "XDG_RUNTIME_DIR"       => "$DIR/run",
    ),
    "bin-copy-environment" => ( "PATH", "LANG", "LC_ALL", "TZ" ),
  ) )
)
CONF

start_lighttpd "$BACKEND" lighttpd-error.log lighttpd-stdout.log qgis-server.log

echo "qgis/start.sh: QGIS Server WMS at $BASE (lighttpd pid $LPID, $BACKEND pids $(paste -sd' ' "$DIR/$BACKEND.pids"))"
