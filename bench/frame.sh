# Sourced by the bench scripts that share one run frame. After the
# caller has defined log, die and cleanup, and set HERE and DEADLINE,
# `frame NAME` sets the traps (cleanup on exit, Ctrl-C, the deadline),
# starts the watchdog that TERMs the script at DEADLINE seconds (its pid
# in WATCHDOG_PID, for cleanup to stop), opens the report
# $HERE/results/NAME-<date>-<time>.txt (REPORT, STAMP; out prints a line to
# both) and installs jq if it is missing. stop_pid is the scripts' way of
# stopping what they started; pick_port VAR gives them loopback ports;
# leave_tmp RC is how their cleanup ends with their temporary directory.
frame() {
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'log "deadline of ${DEADLINE}s reached"; exit 124' TERM
	(
		trap 'kill "$sp" 2>/dev/null; exit 0' TERM
		sleep "$DEADLINE" &
		sp=$!
		wait "$sp" && kill -TERM $$
	) >/dev/null 2>&1 &
	WATCHDOG_PID=$!
	mkdir -p "$HERE/results"
	STAMP=$(date +%Y%m%d-%H%M%S)
	REPORT=$HERE/results/$1-$STAMP.txt
	: >"$REPORT"
	command -v jq >/dev/null || apt-get install -y jq >/dev/null 2>&1 ||
		{ apt-get update >/dev/null && apt-get install -y jq >/dev/null; } || die "could not install jq"
}
out() { printf '%s\n' "$*" | tee -a "$REPORT"; }
# stop_pid PID: TERM, then KILL after 5 s (for the scripts' cleanup).
stop_pid() {
	local p=$1
	[[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 0
	kill -TERM "$p" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
}
# pick_port VAR: sets VAR to a free loopback port (connect refused: nobody
# listens), never one handed out before in this run, and below the kernel's
# ephemeral range: a port picked there can be taken by any outgoing
# connection before its server binds it.
PICKED=" "
EPH_LOW=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
pick_port() {
	local p _
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % (EPH_LOW > 22000 ? EPH_LOW - 20000 : 12000)))
		[[ $PICKED == *" $p "* ]] && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			PICKED+="$p "
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	die "no free port found"
}
# leave_tmp RC: after a failed run (RC not 0), the last lines of the Caddy
# log ($TMP/caddy.log, debug lines left out); then $TMP is kept (KEEP=1) or
# removed.
leave_tmp() {
	if (($1 != 0)) && [[ -s $TMP/caddy.log ]]; then
		log "last lines of the Caddy log:"
		grep -v '"level":"debug"' "$TMP/caddy.log" | tail -n 15 >&2 || true
	fi
	if [[ ${KEEP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
