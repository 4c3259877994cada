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

# True when PID is alive and is the lighttpd started with -f DIR/lighttpd.conf.
our_lighttpd() {
	[[ $1 =~ ^[0-9]+$ && -r /proc/$1/cmdline ]] || return 1
	local -a argv
	mapfile -d '' -t argv <"/proc/$1/cmdline" 2>/dev/null || return 1
	[[ ${#argv[@]} -gt 0 && ${argv[0]##*/} == lighttpd ]] || return 1
	local i
	for ((i = 1; i + 1 < ${#argv[@]}; i++)); do
		[[ ${argv[i]} == -f && ${argv[i + 1]} == "$DIR/lighttpd.conf" ]] && return 0
	done
	return 1
}

# Answers 200 with a capabilities document?
caps_ok() {
	local body
	body=$(curl -s --max-time 3 -w '\n%{http_code}' "$CAPS" 2>/dev/null) || return 1
	[[ ${body##*$'\n'} == 200 && $body == *WMT_MS_Capabilities* ]]
}

# Already running for this DIR?
if [[ -f $DIR/lighttpd.pid ]] && our_lighttpd "$(cat "$DIR/lighttpd.pid")"; then
	running_port=$(cat "$DIR/port" 2>/dev/null || echo "?")
	if [[ $running_port == "$PORT" ]] && caps_ok; then
		echo "start.sh: upstream for $DIR already running at $BASE (lighttpd pid $(cat "$DIR/lighttpd.pid"))"
		exit 0
	fi
	echo "start.sh: an upstream for $DIR is running (port $running_port) but does not answer on $PORT;" \
		"run upstream/stop.sh $DIR first" >&2
	exit 1
fi

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

"$LIGHTTPD" -tt -f "$DIR/lighttpd.conf" >/dev/null || {
	echo "start.sh: lighttpd rejects $DIR/lighttpd.conf" >&2
	exit 1
}

fail() {
	echo "start.sh: $*" >&2
	for log in lighttpd-error.log lighttpd-stdout.log mapserv-error.log; do
		if [[ -s $DIR/$log ]]; then
			echo "---- $DIR/$log (last 40 lines)" >&2
			tail -n 40 "$DIR/$log" >&2
		fi
	done
	"$HERE/stop.sh" "$DIR" >&2 || true
	exit 1
}

rm -f "$DIR/lighttpd.pid" "$DIR/mapserv.pids"
echo "$PORT" >"$DIR/port"
# lighttpd forks into the background itself. Its standard streams go to a
# file so that it never holds the caller's pipes open.
"$LIGHTTPD" -f "$DIR/lighttpd.conf" </dev/null >>"$DIR/lighttpd-stdout.log" 2>&1 ||
	fail "lighttpd did not start (port $PORT in use?)"

# Bounded wait for the pid file and a 200 GetCapabilities.
deadline=$((SECONDS + TIMEOUT))
until caps_ok; do
	if [[ -f $DIR/lighttpd.pid ]] && ! our_lighttpd "$(cat "$DIR/lighttpd.pid")"; then
		fail "lighttpd exited"
	fi
	((SECONDS < deadline)) || fail "no 200 GetCapabilities from $CAPS within ${TIMEOUT}s"
	sleep 0.2
done
[[ -f $DIR/lighttpd.pid ]] || fail "no pid file $DIR/lighttpd.pid"
LPID=$(cat "$DIR/lighttpd.pid")

# Record the FastCGI processes: those whose argv[0] is DIR/mapserv (stop.sh
# has killed any older ones, so these are lighttpd's children).
: >"$DIR/mapserv.pids"
for d in /proc/[0-9]*; do
	a0=""
	IFS= read -r -d '' a0 <"$d/cmdline" 2>/dev/null || true
	if [[ $a0 == "$DIR/mapserv" ]]; then echo "${d#/proc/}" >>"$DIR/mapserv.pids"; fi
done

echo "start.sh: upstream WMS at $BASE (lighttpd pid $LPID, mapserv pids $(paste -sd' ' "$DIR/mapserv.pids"))"
