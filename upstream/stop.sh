#!/usr/bin/env bash
# Usage: upstream/stop.sh DIR
#
# Stops the upstream WMS that upstream/start.sh DIR PORT (MapServer) or
# upstream/qgis/start.sh DIR PORT (QGIS Server) started: the
# lighttpd whose pid is in DIR/lighttpd.pid (checked to be the one running
# with -f DIR/lighttpd.conf; found by that command line if the pid file is
# gone) and the FastCGI processes, which lighttpd 1.4 leaves running when
# it exits. Their name is in DIR/backend (qgis_mapserv.fcgi for QGIS
# Server; mapserv when the file is missing). They are found by the pids
# recorded in DIR/<backend>.pids and by their command line (argv[0] is
# exactly DIR/<backend>), so only this DIR's processes are hit.
# SIGTERM (plus SIGINT for mapserv, see below) first, SIGKILL after 5
# seconds. Idempotent: with nothing
# running it only removes stale pid and socket files.
set -euo pipefail

usage() { echo "usage: $0 DIR" >&2; exit 2; }
[[ $# -eq 1 && -n $1 ]] || usage
# Absolute, symlinks resolved, as start.sh has it. DIR may be gone (wiped
# while the server ran): its processes are still found by command line.
DIR=$(realpath -m -- "$1")
BACKEND=$(cat "$DIR/backend" 2>/dev/null || echo mapserv)
[[ $BACKEND =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "stop.sh: bad backend name in $DIR/backend" >&2; exit 1; }

# argv0 PID: the process's argv[0] (empty if gone), without forking.
argv0() {
	local a0=""
	IFS= read -r -d '' a0 <"/proc/$1/cmdline" 2>/dev/null || true
	printf '%s' "$a0"
}

# shellcheck source=upstream/lighttpd.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lighttpd.sh"

# Is PID one of our FastCGI processes (argv[0] exactly DIR/BACKEND)?
is_our_mapserv() {
	[[ $1 =~ ^[0-9]+$ && -r /proc/$1/cmdline ]] || return 1
	[[ $(argv0 "$1") == "$DIR/$BACKEND" ]]
}

# terminate SIGNALS PID...: sends each of the comma-separated SIGNALS to the
# pids, waits up to 5 s, then KILLs survivors.
terminate() {
	local sigs=$1 alive p i sig
	shift
	local pids=("$@")
	((${#pids[@]})) || return 0
	for sig in ${sigs//,/ }; do
		kill -"$sig" "${pids[@]}" 2>/dev/null || true
	done
	for ((i = 0; i < 50; i++)); do
		alive=()
		for p in "${pids[@]}"; do
			# A zombie (state Z) is as good as gone.
			if [[ -r /proc/$p/stat ]] && [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]]; then
				alive+=("$p")
			fi
		done
		((${#alive[@]})) || return 0
		sleep 0.1
	done
	echo "stop.sh: killing ${alive[*]} with SIGKILL" >&2
	kill -KILL "${alive[@]}" 2>/dev/null || true
}

# ---- lighttpd: the pid file's, else found by command line (the pid file
# may be gone, e.g. DIR was wiped while the server ran).
LPID=""
if [[ -f $DIR/lighttpd.pid ]]; then
	p=$(cat "$DIR/lighttpd.pid")
	if our_lighttpd "$p"; then LPID=$p; fi
fi
if [[ -z $LPID ]]; then
	for d in /proc/[0-9]*; do
		if our_lighttpd "${d#/proc/}"; then LPID=${d#/proc/}; break; fi
	done
fi

# ---- mapserv: recorded, and by command line (that also covers the
# children lighttpd respawned since start.sh recorded them).
declare -A seen=()
MPIDS=()
add_mapserv() { if [[ -z ${seen[$1]:-} ]] && is_our_mapserv "$1"; then seen[$1]=1; MPIDS+=("$1"); fi; }
if [[ -f $DIR/$BACKEND.pids ]]; then
	while read -r p; do if [[ -n $p ]]; then add_mapserv "$p"; fi; done <"$DIR/$BACKEND.pids"
fi
collect_by_cmdline() {
	local d
	for d in /proc/[0-9]*; do add_mapserv "${d#/proc/}"; done
}
collect_by_cmdline

if [[ -n $LPID ]]; then
	echo "stop.sh: stopping lighttpd $LPID"
	terminate TERM "$LPID"
	# lighttpd may have respawned a backend meanwhile: look again.
	collect_by_cmdline
fi
if ((${#MPIDS[@]})); then
	echo "stop.sh: stopping $BACKEND ${MPIDS[*]}"
	# MapServer 8 in FastCGI mode only sets a flag on SIGTERM and exits
	# after its next request, so an idle one blocked in accept() would stay.
	# It does not catch SIGINT, which ends it at once. QGIS Server ends
	# on either.
	terminate TERM,INT "${MPIDS[@]}"
fi
[[ -n $LPID || ${#MPIDS[@]} -gt 0 ]] || echo "stop.sh: nothing running for $DIR"

# ---- stale files: pid files and the FastCGI sockets (lighttpd would
# otherwise try to reuse them).
[[ -d $DIR ]] || exit 0
SOCK=$(cat "$DIR/socket" 2>/dev/null || echo "$DIR/$BACKEND.sock")
rm -f "$DIR/lighttpd.pid" "$DIR/$BACKEND.pids" "$SOCK" "$SOCK"-[0-9]*
