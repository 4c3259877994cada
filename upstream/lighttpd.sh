# Sourced by upstream/start.sh (MapServer), upstream/qgis/start.sh (QGIS
# Server) and upstream/stop.sh: what running a WMS behind a private lighttpd
# takes, whichever the WMS. The caller sets DIR (the upstream's state
# folder); start_lighttpd and exit_if_running also need NAME (the script, for
# messages), PORT, BASE, CAPS, TIMEOUT, LIGHTTPD and a caps_ok function that
# says whether its WMS answers as it should.

UPSTREAM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# our_lighttpd PID: is PID alive and the lighttpd started with
# -f DIR/lighttpd.conf (not some other lighttpd, or a recycled pid)?
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

# exit_if_running STOP: when this DIR's upstream already runs, exits 0 if it
# answers on PORT, else 1 (telling to run STOP first); returns otherwise.
exit_if_running() {
	[[ -f $DIR/lighttpd.pid ]] && our_lighttpd "$(cat "$DIR/lighttpd.pid")" || return 0
	local running_port
	running_port=$(cat "$DIR/port" 2>/dev/null || echo "?")
	if [[ $running_port == "$PORT" ]] && caps_ok; then
		echo "$NAME: upstream for $DIR already running at $BASE (lighttpd pid $(cat "$DIR/lighttpd.pid"))"
		exit 0
	fi
	echo "$NAME: an upstream for $DIR is running (port $running_port) but does not answer on $PORT;" \
		"run $1 $DIR first" >&2
	exit 1
}

# start_lighttpd BACKEND LOG...: checks and starts lighttpd with
# DIR/lighttpd.conf, waits up to TIMEOUT seconds for caps_ok, then sets
# LPID to lighttpd's pid and records in DIR/BACKEND.pids the FastCGI
# processes whose argv[0] is DIR/BACKEND (stop.sh killed any older ones, so
# these are lighttpd's children). On failure it prints the end of each LOG
# (files in DIR), stops what it started and exits 1.
start_lighttpd() {
	local backend=$1
	shift
	local logs=("$@")
	"$LIGHTTPD" -tt -f "$DIR/lighttpd.conf" >/dev/null || {
		echo "$NAME: lighttpd rejects $DIR/lighttpd.conf" >&2
		exit 1
	}
	fail() {
		echo "$NAME: $*" >&2
		local log
		for log in "${logs[@]}"; do
			if [[ -s $DIR/$log ]]; then
				echo "---- $DIR/$log (last 40 lines)" >&2
				tail -n 40 "$DIR/$log" >&2
			fi
		done
		"$UPSTREAM_DIR/stop.sh" "$DIR" >&2 || true
		exit 1
	}
	rm -f "$DIR/lighttpd.pid" "$DIR/$backend.pids"
	echo "$PORT" >"$DIR/port"
	# lighttpd forks into the background itself. Its standard streams go to
	# a file so that it never holds the caller's pipes open.
	"$LIGHTTPD" -f "$DIR/lighttpd.conf" </dev/null >>"$DIR/lighttpd-stdout.log" 2>&1 ||
		fail "lighttpd did not start (port $PORT in use?)"
	local deadline=$((SECONDS + TIMEOUT))
	until caps_ok; do
		if [[ -f $DIR/lighttpd.pid ]] && ! our_lighttpd "$(cat "$DIR/lighttpd.pid")"; then
			fail "lighttpd exited"
		fi
		((SECONDS < deadline)) || fail "no 200 GetCapabilities from $CAPS within ${TIMEOUT}s"
		sleep 0.2
	done
	[[ -f $DIR/lighttpd.pid ]] || fail "no pid file $DIR/lighttpd.pid"
	LPID=$(cat "$DIR/lighttpd.pid")
	: >"$DIR/$backend.pids"
	local d a0
	for d in /proc/[0-9]*; do
		a0=""
		IFS= read -r -d '' a0 <"$d/cmdline" 2>/dev/null || true
		if [[ $a0 == "$DIR/$backend" ]]; then echo "${d#/proc/}" >>"$DIR/$backend.pids"; fi
	done
}
