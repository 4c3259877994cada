#!/usr/bin/env bash
# Usage: bench/cluster.sh
#
# Seeding throughput of 1, 2 and 3 clustered tile_cache nodes (issue 12),
# loopback only. Every node is its own Caddy process (its own admin and HTTP
# port, its own `storage` directory), all of them with the same global
# `storage file_system <shared dir>` (the cluster's registry, work units,
# locks and render markers), the same S3 bucket and prefix (MinIO, the
# tiles) and `cluster { lease 10s; poll 250ms }`; `tile_cache_admin
# { workers 2 }`, `upstream_concurrency 4`, `seed_slots 2`.
#
# Upstream: bench/fakewms with a fixed render time (DELAY, 120ms) and its
# synthetic map (one 1024x1024 PNG drawn and encoded once), so that the
# upstream is never the bottleneck. For each round and each N in NODES
# ("1 2 3"), interleaved (1,2,3,1,2,3,...): N fresh Caddy processes, a fresh
# shared-storage subdirectory and a fresh S3 prefix; one seed task
# (EPSG:4326, levels ZSTART..ZSTOP, default 5..6: 10,240 tiles = 640
# metatiles of 4x4, threadCount 2) POSTed to node 1; polled on node 1's
# GET /rest/tasks/<id>.json until DONE. tiles/s = processed / (finished -
# started) of that resource. The round fails unless processed == total,
# failedTiles == 0, and the fake WMS saw exactly one GetMap per metatile.
#
# Per node it reports the CPU seconds used during the seed (/proc/<pid>/stat,
# snapshots just before the POST and just after DONE), its upstream GetMaps
# (caddy_tile_cache_upstream_duration_seconds_count) and, from its admin
# /metrics, caddy_tile_cache_cluster_op_seconds by op (count, sum; for
# lock_wait also how many waits took >= 0.95 s, i.e. hit certmagic's 1 s
# lock poll). Coordination per work unit = (claim + marker_check +
# marker_write seconds) / units the node did (its GetMaps / perUnit of the
# task record in the shared storage). claim includes its lock_wait. MinIO's,
# the fake WMS's and every other process's CPU are reported too: the
# machine has 2 cores and all of it shares them.
#
# Environment (defaults in brackets):
#   NODES ["1 2 3"] (0: one node without the cluster option, "1nc")  ROUNDS [2]  ZSTART [5] ZSTOP [6]  DELAY [120ms]
#   WORKERS [2] (tile_cache_admin workers and threadCount)
#   IMAGE [map]: the fake WMS's synthetic map; flat: one opaque colour (a
#             tiny PNG: next to no CPU per metatile, to see the coordination
#             without the CPU limit of 2 shared cores)
#   LEASE [10s] POLL [250ms] (the cluster block)
#   SETTLE [1] wait, before the POST, until every node has read the others'
#             heartbeats (one more beat each, <= lease/4); 0 POSTs at once
#   QUIET_WAIT [20] per round, QUIET_BUDGET [60] in all (seconds to wait
#             for other processes to use < 0.25 cores)
#   DEADLINE [780] (seconds; the script stops itself after)
#   CADDY     a Caddy binary with the plugin [default: go build -o
#             /tmp/caddy-cluster-bench ./cmd/caddy from the working tree,
#             every run]
#   MISSES [1] part B: MISS_METAS [32] metatiles of level 7 asked for on all
#             three nodes, the 2nd and 3rd STAGGERS ["0 0.01 0.1"] seconds
#             after the 1st: how many renders the render markers save
#   KEEP=1    keep the temp dir (Caddyfiles, logs, metrics, shared storage)
#
# The report also goes to bench/results/cluster-<date>-<time>.txt. Everything
# started here (MinIO, the fake WMS, the Caddy nodes) is stopped on exit. About
# 4 minutes with the defaults on an idle 2-core machine; never more than
# DEADLINE.
set -euo pipefail

NODES=${NODES:-"1 2 3"}
ROUNDS=${ROUNDS:-2}
ZSTART=${ZSTART:-5}
ZSTOP=${ZSTOP:-6}
DELAY=${DELAY:-120ms}
WORKERS=${WORKERS:-2}
LEASE=${LEASE:-10s}
POLL=${POLL:-250ms}
SETTLE=${SETTLE:-1}
IMAGE=${IMAGE:-map}
QUIET_WAIT=${QUIET_WAIT:-20}
QUIET_BUDGET=${QUIET_BUDGET:-60}
DEADLINE=${DEADLINE:-780}
MISSES=${MISSES:-1}
MISS_METAS=${MISS_METAS:-32}
STAGGERS=${STAGGERS:-"0 0.01 0.1"}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/minio.sh
. "$HERE/minio.sh"
cd "$ROOT"

log() { printf '%s cluster: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

for v in SETTLE ROUNDS ZSTART ZSTOP WORKERS QUIET_WAIT QUIET_BUDGET DEADLINE; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((ROUNDS >= 1 && WORKERS >= 1)) || die "ROUNDS and WORKERS must be >= 1"
((ZSTART <= ZSTOP && ZSTOP <= 8)) || die "need ZSTART <= ZSTOP <= 8"
[[ $IMAGE == map || $IMAGE == flat ]] || die "IMAGE must be map or flat"
[[ $DELAY =~ ^[0-9]+ms$ ]] || die "DELAY must be like 120ms, got '$DELAY'"
for n in $NODES; do [[ $n =~ ^[0-9]$ ]] || die "NODES: '$n' is not 0..9"; done
[[ " $NODES " == *" 1 "* ]] || die "NODES must include 1 (the reference)"
CLK_TCK=$(getconf CLK_TCK)
T_START=$(date +%s)

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d /tmp/cluster-bench.XXXXXX)
FAKE_PID="" MINIO_PID="" WATCHDOG_PID=""
NODE_PIDS=()
stop_nodes() {
	local p
	for p in "${NODE_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${NODE_PIDS[@]}"; do stop_pid "$p"; done
	NODE_PIDS=()
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	[[ -n ${SAMPLER_PID:-} ]] && kill "$SAMPLER_PID" 2>/dev/null || true
	stop_nodes
	stop_pid "$MINIO_PID"
	stop_pid "$FAKE_PID"
	if ((rc != 0)); then
		local f
		for f in "$TMP"/r*/node*.log; do
			[[ -s $f ]] || continue
			log "last lines of $f:"
			grep -v '"level":"debug"' "$f" | tail -n 8 >&2 || true
		done
	fi
	if [[ ${KEEP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
	log "total run time $(($(date +%s) - T_START)) s"
	exit "$rc"
}
# traps, the DEADLINE watchdog, the report (REPORT, out), jq
. "$HERE/frame.sh"
frame cluster

# ---------------------------------------------------------------- tools
if [[ -n ${CADDY:-} ]]; then
	CADDY_BIN=$CADDY
	[[ -x $CADDY_BIN ]] || die "CADDY=$CADDY_BIN is not executable"
else
	CADDY_BIN=/tmp/caddy-cluster-bench
	log "building $CADDY_BIN (go build ./cmd/caddy, working tree)"
	go build -o "$CADDY_BIN" ./cmd/caddy 2>"$TMP/build.log" || { tail -n 30 "$TMP/build.log" >&2; die "go build ./cmd/caddy failed"; }
fi
cp "$CADDY_BIN" "$TMP/caddy" # a private copy: a rebuild meanwhile changes nothing
MODULES=$("$TMP/caddy" list-modules) || die "$CADDY_BIN list-modules failed"
grep -qx 'http.handlers.tile_cache_admin' <<<"$MODULES" || die "$CADDY_BIN lacks tile_cache_admin"
go build -o "$TMP/fakewms" ./bench/fakewms || die "building bench/fakewms"

pick_port FAKE_PORT
pick_port MINIO_PORT
pick_port MINIO_CONSOLE
MAXN=0
for n in $NODES; do ((n > MAXN)) && MAXN=$n; done
declare -a ADMIN_PORT HTTP_PORT
for i in $(seq "$MAXN"); do
	pick_port "ADMIN_PORT[$i]"
	pick_port "HTTP_PORT[$i]"
done

# ---------------------------------------------------------------- MinIO, fake WMS
export MINIO_ROOT_USER=cluster MINIO_ROOT_PASSWORD=cluster-bench-secret
log "starting MinIO on 127.0.0.1:$MINIO_PORT"
start_minio "$TMP/minio"
FAKE_SOURCE=()
IMAGE_NOTE="synthetic 1024x1024 map"
if [[ $IMAGE == flat ]]; then
	# One opaque colour: next to no CPU to decode, slice and encode, so that
	# what is left is the coordination, the PUTs and MinIO.
	python3 - "$TMP/flat.png" <<'PY' || die "writing a flat PNG needs python3"
import struct, sys, zlib
w = h = 1024
row = b"\x00" + bytes((0xf2, 0xef, 0xe9)) * w
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(row * h, 6)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
	FAKE_SOURCE=(-source "$TMP/flat.png")
	IMAGE_NOTE="flat one-colour 1024x1024 PNG"
fi
"$TMP/fakewms" -addr "127.0.0.1:$FAKE_PORT" -delay "$DELAY" -prerender 1024x1024 "${FAKE_SOURCE[@]}" >"$TMP/fakewms.log" 2>&1 &
FAKE_PID=$!
for i in $(seq 100); do
	curl -sf -m 2 -o /dev/null "http://127.0.0.1:$FAKE_PORT/stats" && break
	((i < 100)) || die "fakewms did not answer (log: $TMP/fakewms.log)"
	kill -0 "$FAKE_PID" 2>/dev/null || die "fakewms exited: $(cat "$TMP/fakewms.log")"
	sleep 0.1
done

# ---------------------------------------------------------------- CPU accounting
ticks_of() { # ticks_of PID...: user+system ticks of the processes
	local t=0 p st f
	for p in "$@"; do
		st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		st=${st##*) }
		read -ra f <<<"$st"
		t=$((t + f[11] + f[12]))
	done
	echo "$t"
}
busy_ticks() { # all CPUs' busy ticks (user nice system irq softirq steal)
	local u n s q sq st
	read -r _ u n s _ _ q sq st _ </proc/stat
	echo $((u + n + s + q + sq + st))
}
# snap NAME: the clock and the ticks of each node, MinIO, the fake WMS and
# the whole machine, under NAME.
snap() {
	local n=$1 i
	printf -v "S_${n}_ns" '%s' "$(date +%s%N)"
	printf -v "S_${n}_busy" '%s' "$(busy_ticks)"
	printf -v "S_${n}_minio" '%s' "$(ticks_of "$MINIO_PID")"
	printf -v "S_${n}_fake" '%s' "$(ticks_of "$FAKE_PID")"
	for i in "${!NODE_PIDS[@]}"; do
		printf -v "S_${n}_node$i" '%s' "$(ticks_of "${NODE_PIDS[$i]}")"
	done
}
# delta A B VAR: ticks of VAR between snapshots A and B
delta() { local x=S_${1}_$3 y=S_${2}_$3; echo $((${!y} - ${!x})); }
secs_between() { local x=S_${1}_ns y=S_${2}_ns; awk -v a="${!x}" -v b="${!y}" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }
QUIET_LEFT=$QUIET_BUDGET
OTHER_AT_START=""
wait_quiet() { # up to QUIET_WAIT s (QUIET_BUDGET s in all) for others to use < 0.25 cores
	local t0 waited other
	t0=$(date +%s)
	while :; do
		snap q0
		sleep 1
		snap q1
		other=$(awk -v b="$(delta q0 q1 busy)" -v m="$(delta q0 q1 minio)" -v f="$(delta q0 q1 fake)" \
			-v s="$(secs_between q0 q1)" -v hz="$CLK_TCK" 'BEGIN { o = b - m - f; if (o < 0) o = 0; printf "%.2f", o / hz / s }')
		awk -v o="$other" 'BEGIN { exit !(o < 0.25) }' && break
		waited=$(($(date +%s) - t0))
		if ((waited >= QUIET_WAIT || waited >= QUIET_LEFT)); then
			log "machine not quiet: other processes use $other cores; going on"
			break
		fi
	done
	OTHER_AT_START=$other
	QUIET_LEFT=$((QUIET_LEFT - ($(date +%s) - t0)))
	((QUIET_LEFT > 0)) || QUIET_LEFT=0
}

# ---------------------------------------------------------------- nodes
CACHE=bench
LAYER=bench:map
CONC=$((2 * WORKERS > 4 ? 2 * WORKERS : 4))
SEED_SLOTS=$((WORKERS < CONC ? WORKERS : CONC - 1))
# procs N: Caddy processes of a round of N (0: one, without the cluster option)
procs() { echo $(($1 > 0 ? $1 : 1)); }
label() { if (($1 > 0)); then echo "$1"; else echo "1nc"; fi; }
# node_caddyfile I RDIR PREFIX CLUSTERED
node_caddyfile() {
	local i=$1 rdir=$2 prefix=$3 cl=""
	(($4)) && cl="cluster {
			lease $LEASE
			poll $POLL
		}"
	cat <<EOF
{
	admin 127.0.0.1:${ADMIN_PORT[$i]}
	auto_https off
	persist_config off
	grace_period 1ns
	storage file_system $rdir/shared
	log {
		level INFO
	}
}

:${HTTP_PORT[$i]} {
	bind 127.0.0.1
	handle_path /gwc/* {
		tile_cache_admin {
			cache $CACHE
			workers $WORKERS
		}
	}
	tile_cache {
		name $CACHE
		upstream http://127.0.0.1:$FAKE_PORT/wms
		storage $rdir/node$i
		$(s3_block "$prefix")
		$cl
		upstream_concurrency $CONC
		seed_slots $SEED_SLOTS
		timeout 60s
		layer $LAYER {
			upstream_layers test:polygons
			gridsets EPSG:4326
			formats image/png
			metatile 4 4
		}
	}
}
EOF
}
# start_nodes N RDIR PREFIX: N Caddy processes, each answering on its admin
# and HTTP ports before it returns. NODE_PIDS[1..N].
start_nodes() {
	local n=$1 rdir=$2 prefix=$3 i p clustered=$(($1 > 0))
	n=$(procs "$n")
	mkdir -p "$rdir/shared" "$rdir/home"
	NODE_PIDS=()
	for i in $(seq "$n"); do
		node_caddyfile "$i" "$rdir" "$prefix" "$clustered" >"$rdir/node$i.Caddyfile"
		HOME=$rdir/home XDG_DATA_HOME=$rdir/home/data$i XDG_CONFIG_HOME=$rdir/home/config$i \
			"$TMP/caddy" run --config "$rdir/node$i.Caddyfile" --adapter caddyfile >"$rdir/node$i.log" 2>&1 &
		NODE_PIDS[i]=$!
	done
	for i in $(seq "$n"); do
		p=${NODE_PIDS[$i]}
		for _ in $(seq 150); do
			curl -s -m 2 -o /dev/null "http://127.0.0.1:${ADMIN_PORT[$i]}/config/" &&
				curl -s -m 2 -o /dev/null "http://127.0.0.1:${HTTP_PORT[$i]}/gwc/rest/seed.json" && break
			kill -0 "$p" 2>/dev/null || die "node $i (Caddy) exited: $(tail -n 5 "$rdir/node$i.log")"
			sleep 0.1
		done
		curl -sf -m 2 -o /dev/null "http://127.0.0.1:${HTTP_PORT[$i]}/gwc/rest/seed.json" ||
			die "node $i does not answer GET /gwc/rest/seed.json"
	done
	((clustered)) || return 0
	# every node has joined the cluster (its heartbeat is in the shared storage)
	local hb=$rdir/shared/tile_cache/$CACHE/nodes
	for _ in $(seq 50); do
		(($(find "$hb" -type f 2>/dev/null | wc -l) >= n)) && break
		sleep 0.1
	done
	(($(find "$hb" -type f 2>/dev/null | wc -l) >= n)) ||
		die "only $(find "$hb" -type f 2>/dev/null | wc -l) of $n nodes wrote a heartbeat"
	((SETTLE && n > 1)) || return 0
	# A node learns of the others when it reads their heartbeats, right after
	# writing its own (every lease/4). Before e03cd1c it counted a node that
	# joined after its last read as dead and took over its work units
	# (SETTLE=0 showed it); now such a node counts as alive until a read.
	# Waiting until every node has beaten once more keeps rounds alike.
	local f before after
	before=$(for f in "$hb"/*; do jq -r .beat "$f"; done | tr '\n' ' ')
	for _ in $(seq 150); do
		sleep 0.1
		after=$(for f in "$hb"/*; do jq -r .beat "$f" 2>/dev/null || echo 0; done | tr '\n' ' ')
		awk -v a="$before" -v b="$after" 'BEGIN { n = split(a, x, " "); split(b, y, " ")
			for (i = 1; i <= n; i++) if (y[i] + 0 <= x[i] + 0) exit 1 }' && { sleep 0.2; return 0; }
	done
	die "the nodes' heartbeats did not advance within 15 s"
}

# ---------------------------------------------------------------- REST, metrics
# submit, wait_task, task_secs
. "$HERE/rest.sh"
SEED_JSON=$(printf '{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":%d,"zoomStop":%d,"format":"image/png","type":"seed","threadCount":%d}}' \
	"$ZSTART" "$ZSTOP" "$WORKERS")
# op_stat FILE OP: "count sum slow" of caddy_tile_cache_cluster_op_seconds
# for op; slow = observations above the largest bucket below 1 s.
op_stat() {
	awk -v op="$2" '
		index($0, "caddy_tile_cache_cluster_op_seconds") != 1 { next }
		index($0, "op=\"" op "\"") == 0 { next }
		/_count/ { c = $NF } /_sum/ { s = $NF }
		/_bucket/ && match($0, /le="[^"]*"/) {
			le = substr($0, RSTART + 4, RLENGTH - 5) + 0
			if (le < 1 && le >= blo) { blo = le; below = $NF }
		}
		END { printf "%d %.6f %d\n", c, s, c - below }' "$1"
}
getmaps_of() { # GetMaps a node sent: upstream_duration_seconds count, all layers
	awk 'index($0, "caddy_tile_cache_upstream_duration_seconds_count") == 1 { n += $NF } END { printf "%d\n", n }' "$1"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# The heartbeat sampler: every 0.5 s, each node's heartbeat record (pid,
# beat) to <round dir>/beats.txt, to see how regularly the nodes beat.
SAMPLER_PID=""
start_sampler() {
	local hb=$1/shared/tile_cache/$CACHE/nodes
	(
		while :; do
			for f in "$hb"/*; do
				line=$(<"$f") || continue # one line, no newline at its end
				[[ $line =~ \"beat\":([0-9]+).*\"pid\":([0-9]+) ]] &&
					printf '%s %s %s\n' "$EPOCHREALTIME" "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}"
			done
			sleep 0.5
		done
	) >"$1/beats.txt" 2>/dev/null &
	SAMPLER_PID=$!
}
stop_sampler() {
	[[ -n $SAMPLER_PID ]] || return 0
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	SAMPLER_PID=""
}
# beat_gap FILE PID: the longest time the beat of PID was seen unchanged.
beat_gap() {
	awk -v pid="$2" '$2 == pid {
		if (!seen) { seen = 1; t0 = $1; b = $3; next }
		if ($3 != b) { if ($1 - t0 > g) g = $1 - t0; t0 = $1; b = $3 }
		last = $1
	} END { if (last - t0 > g) g = last - t0; printf "%.1f\n", g }' "$1"
}

# ---------------------------------------------------------------- the task
TILES=0 METAS=0
for z in $(seq "$ZSTART" "$ZSTOP"); do
	w=$((2 ** (z + 1))) h=$((2 ** z))
	TILES=$((TILES + w * h))
	METAS=$((METAS + ((w + 3) / 4) * ((h + 3) / 4)))
done
LIMIT1=$(awk -v w="$WORKERS" -v d="${DELAY%ms}" 'BEGIN { printf "%.1f", w * 16 / (d / 1000) }')

out "== Seeding throughput of 1..$MAXN clustered nodes: bench/cluster.sh =="
out "$(date -u +%FT%TZ), $(nproc) CPUs, $(uname -r); Caddy $("$TMP/caddy" version | cut -d' ' -f1)"
out "binary $CADDY_BIN (built $(date -u -r "$CADDY_BIN" +%FT%TZ)); repository HEAD at run time $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ', working tree modified')"
out "task: EPSG:4326 levels $ZSTART..$ZSTOP = $TILES tiles = $METAS metatiles of 4x4, threadCount $WORKERS, POSTed to node 1"
out "each node: workers $WORKERS, upstream_concurrency $CONC, seed_slots $SEED_SLOTS, cluster { lease $LEASE; poll $POLL },"
out "  own storage dir, global storage file_system <round dir>/shared, tiles in MinIO bucket 'tiles' (prefix per round)"
out "upstream: bench/fakewms -delay $DELAY, $IMAGE_NOTE ($(curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$FAKE_PORT/wms?REQUEST=GetMap&WIDTH=1024&HEIGHT=1024") bytes); limit per node = $WORKERS x 16 / $DELAY = $LIMIT1 tiles/s"
out ""

declare -A TPS CPUS COORD          # by N: space-separated per-round values
declare -a ROWS DETAILS
round_no=0
for round in $(seq "$ROUNDS"); do
	for n in $NODES; do
		round_no=$((round_no + 1))
		rdir=$TMP/r$round_no
		prefix=r$round_no-n$n
		log "round $round, $(label "$n") node(s): starting"
		start_nodes "$n" "$rdir" "$prefix"
		curl -sf -m 5 -o /dev/null "http://127.0.0.1:$FAKE_PORT/control?reset=1" || die "fakewms control"
		wait_quiet
		other_before=$OTHER_AT_START
		t_post=$(date +%s.%N)
		start_sampler "$rdir"
		snap a0
		url=$(submit "http://127.0.0.1:${HTTP_PORT[1]}" "$LAYER" "$SEED_JSON")
		wait_task "$url" 300
		snap a1
		t_done=$(date +%s.%N)
		stop_sampler
		FAILS=()
		processed=$(jq -r .processed <<<"$TASK_JSON")
		total=$(jq -r .total <<<"$TASK_JSON")
		failed=$(jq -r .failedTiles <<<"$TASK_JSON")
		id=$(jq -r .id <<<"$TASK_JSON")
		((total == TILES)) || FAILS+=("task total $total, expected $TILES")
		((processed == total && failed == 0)) || FAILS+=("processed $processed of $total, failedTiles $failed")
		gm=$(curl -s -m 5 "http://127.0.0.1:$FAKE_PORT/stats" | jq -r .getmap)
		((gm == METAS)) || FAILS+=("the fake WMS saw $gm GetMaps, expected exactly $METAS (one per metatile)")
		hist=$rdir/shared/tile_cache/$CACHE/history/$id
		units=0 per=1 rmetas=0
		if ((n == 0)); then
			units=$METAS rmetas=$METAS # not clustered: no shared record, one metatile per unit
		elif [[ -s $hist ]]; then
			read -r units per rmetas < <(jq -r '"\(.units) \(.perUnit) \(.metatiles)"' "$hist")
		else
			FAILS+=("no finished task record at $hist")
		fi
		((rmetas == METAS)) || FAILS+=("the task record says $rmetas metatiles, expected $METAS")
		secs=$(task_secs)
		wall=$(awk -v a="$t_post" -v b="$t_done" 'BEGIN { printf "%.2f", b - a }')
		span=$(secs_between a0 a1)
		tps=$(awk -v p="$processed" -v s="$secs" 'BEGIN { printf "%.1f", p / s }')
		minio_s=$(awk -v t="$(delta a0 a1 minio)" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
		fake_s=$(awk -v t="$(delta a0 a1 fake)" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
		ours=$(($(delta a0 a1 minio) + $(delta a0 a1 fake)))
		cpu_list="" coord_list="" sum_gm=0 coord_all=0 cpus=""
		for i in $(seq "$(procs "$n")"); do
			curl -s -m 5 "http://127.0.0.1:${ADMIN_PORT[$i]}/metrics" >"$rdir/node$i.metrics" ||
				FAILS+=("node $i: GET /metrics failed")
			t=$(delta a0 a1 "node$i")
			ours=$((ours + t))
			cpu=$(awk -v t="$t" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
			ngm=$(getmaps_of "$rdir/node$i.metrics")
			sum_gm=$((sum_gm + ngm))
			nunits=$(((ngm + per - 1) / per))
			read -r cl_c cl_s _ < <(op_stat "$rdir/node$i.metrics" claim)
			read -r lw_c lw_s lw_slow < <(op_stat "$rdir/node$i.metrics" lock_wait)
			read -r mc_c mc_s _ < <(op_stat "$rdir/node$i.metrics" marker_check)
			read -r mw_c mw_s _ < <(op_stat "$rdir/node$i.metrics" marker_write)
			read -r rr_c rr_s _ < <(op_stat "$rdir/node$i.metrics" registry_read)
			read -r bt_c bt_s _ < <(op_stat "$rdir/node$i.metrics" beat)
			took=$(grep -c 'taking over a work unit' "$rdir/node$i.log" || true)
			((took == 0)) || FAILS+=("node $i took over $took work units of a node it judged silent (none died)")
			gap=$(beat_gap "$rdir/beats.txt" "${NODE_PIDS[$i]}")
			coord=$(awk -v a="$cl_s" -v b="$mc_s" -v c="$mw_s" -v u="$nunits" 'BEGIN { printf "%.2f", u ? 1000 * (a + b + c) / u : 0 }')
			coord_all=$(awk -v x="$coord_all" -v a="$cl_s" -v b="$mc_s" -v c="$mw_s" 'BEGIN { printf "%.6f", x + a + b + c }')
			cpu_list+="${cpu_list:+/}$cpu"
			coord_list+="${coord_list:+/}$coord"
			cpus+="$cpu "
			DETAILS+=("$(printf '%-3s %-5s %-4s %7d %5d %6s %7.1f  %5d %8.1f %8.2f | %5d %8.1f %4d | %5d %7.1f | %5d %7.1f | %4d %6.1f | %4d %6.1f %5s | %4d' \
				"$(label "$n")" "$round" "$i" "$ngm" "$nunits" "$cpu" "$(awk -v c="$cpu" -v m="$ngm" 'BEGIN { printf "%.1f", m ? 1000 * c / m : 0 }')" \
				"$cl_c" "$(awk -v s="$cl_s" 'BEGIN { print 1000 * s }')" "$coord" \
				"$lw_c" "$(awk -v s="$lw_s" 'BEGIN { print 1000 * s }')" "$lw_slow" \
				"$mc_c" "$(awk -v s="$mc_s" 'BEGIN { print 1000 * s }')" \
				"$mw_c" "$(awk -v s="$mw_s" 'BEGIN { print 1000 * s }')" \
				"$rr_c" "$(awk -v s="$rr_s" 'BEGIN { print 1000 * s }')" \
				"$bt_c" "$(awk -v s="$bt_s" 'BEGIN { print 1000 * s }')" "$gap" "$took")")
		done
		((sum_gm == gm)) || FAILS+=("the nodes' upstream_duration counts add up to $sum_gm, the fake WMS saw $gm")
		coord_unit=$(awk -v x="$coord_all" -v u="$units" 'BEGIN { printf "%.2f", u ? 1000 * x / u : 0 }')
		other=$(awk -v b="$(delta a0 a1 busy)" -v o="$ours" -v s="$span" -v hz="$CLK_TCK" 'BEGIN { x = b - o; if (x < 0) x = 0; printf "%.2f", x / hz / s }')
		busy=$(awk -v b="$(delta a0 a1 busy)" -v s="$span" -v hz="$CLK_TCK" -v c="$(nproc)" 'BEGIN { printf "%.0f", 100 * b / hz / s / c }')
		limit=$(awk -v n="$(procs "$n")" -v l="$LIMIT1" 'BEGIN { printf "%.0f", n * l }')
		pct=$(awk -v t="$tps" -v l="$limit" 'BEGIN { printf "%.1f", 100 * t / l }')
		ROWS+=("$n|$round|$secs|$wall|$tps|$limit|$pct|$cpu_list|$minio_s|$fake_s|$other|$busy|$coord_list|$coord_unit|$units|$per|$other_before")
		log "round $round, $(label "$n") node(s): $tps tiles/s ($secs s), CPU $cpu_list s, MinIO $minio_s s, other $other cores"
		if ((${#FAILS[@]})); then
			report
			for f in "${FAILS[@]}"; do out "FAIL round $round_no ($n nodes): $f"; done
			die "round $round_no ($n nodes): ${FAILS[0]}"
		fi
		TPS[$n]+="$tps "
		CPUS[$n]+="$cpus"
		COORD[$n]+="$coord_unit "
		stop_nodes
	done
done

# ---------------------------------------------------------------- report
# report: the table of the rounds so far, the medians, the per-node details.
report() {
	local r n round secs wall tps limit pct cpu_list minio_s fake_s other busy coord_list coord_unit units per x m r3 d
	if [[ -n ${TPS[1]:-} ]]; then MED1=$(median ${TPS[1]}); else MED1=$(cut -d'|' -f5 <<<"${ROWS[0]}"); fi
	out "$(printf '%-3s %-5s %7s %7s %8s %6s %6s %6s  %-17s %6s %5s %6s %5s  %-17s %7s' \
		N round secs wall tiles/s x1node limit '%lim' 'CPU s per node' MinIO fake other busy% 'coord ms/unit' 'all')"
	for r in "${ROWS[@]}"; do
		IFS='|' read -r n round secs wall tps limit pct cpu_list minio_s fake_s other busy coord_list coord_unit units per _ <<<"$r"
		x=$(awk -v t="$tps" -v m="$MED1" 'BEGIN { printf "%.2f", t / m }')
		out "$(printf '%-3s %-5s %7.2f %7.2f %8.1f %6s %6s %6s  %-17s %6s %5s %6s %5s  %-17s %7s' \
			"$(label "$n")" "$round" "$secs" "$wall" "$tps" "$x" "$limit" "$pct" "$cpu_list" "$minio_s" "$fake_s" "$other" "$busy" "$coord_list" "$coord_unit")"
	done
	out ""
	out "secs = finished - started of GET /rest/tasks/<id>.json on node 1; wall = POST to DONE seen by this script;"
	out "tiles/s = processed / secs; x1node = tiles/s / the 1-node median ($MED1); limit = N x $WORKERS workers x 16 tiles / $DELAY;"
	out "CPU s per node = user+system seconds of each Caddy (node 1/node 2/...) from the POST to DONE; MinIO, fake = theirs;"
	out "other = cores used by every other process meanwhile; busy% = the whole machine's CPU use ($(nproc) CPUs);"
	out "coord ms/unit = (claim + marker_check + marker_write seconds) / work units, per node (its units = its GetMaps /"
	out "perUnit) and for all nodes (all = their sum / the task's units). claim includes its lock_wait."
	[[ " $NODES " == *" 0 "* ]] && out "1nc = one node without the cluster option (the same node otherwise): what coordination costs one node."
	out ""
	out "medians:"
	for n in $NODES; do
		[[ -n ${TPS[$n]:-} ]] || continue
		m=$(median ${TPS[$n]})
		out "$(printf '  %3s node(s): %7.1f tiles/s = %.2f x one node (%.1f %% of its limit %s); Caddy CPU per node (median) %s s; coordination %s ms per unit' \
			"$(label "$n")" "$m" "$(awk -v a="$m" -v b="$MED1" 'BEGIN { print a / b }')" \
			"$(awk -v a="$m" -v n="$(procs "$n")" -v l="$LIMIT1" 'BEGIN { print 100 * a / (n * l) }')" \
			"$(awk -v n="$(procs "$n")" -v l="$LIMIT1" 'BEGIN { printf "%.0f", n * l }')" \
			"$(median ${CPUS[$n]})" "$(median ${COORD[$n]})")"
	done
	if [[ -n ${TPS[3]:-} ]]; then
		r3=$(awk -v a="$(median ${TPS[3]})" -v b="$MED1" 'BEGIN { printf "%.2f", a / b }')
		if awk -v r="$r3" 'BEGIN { exit !(r >= 2.7) }'; then
			out "goal 3 nodes >= 2.7 x one node: MET ($r3 x)"
		else
			out "goal 3 nodes >= 2.7 x one node: NOT MET ($r3 x)"
		fi
	fi
	out ""
	out "per node: GetMaps it sent, work units it did, its CPU s and CPU ms per metatile; cluster_op_seconds by op:"
	out "count and total ms (lock_wait: also how many waits took >= 0.95 s, i.e. met certmagic's 1 s lock poll);"
	out "hb-gap = the longest time (s) the node's heartbeat record did not change during the seed (sampled every"
	out "0.5 s; it beats every lease/4); took = work units it took over from a node it judged silent."
	out "$(printf '%-3s %-5s %-4s %7s %5s %6s %7s  %5s %8s %8s | %5s %8s %4s | %5s %7s | %5s %7s | %4s %6s | %4s %6s %5s | %4s' \
		N round node getmaps units cpu-s ms/meta claims claim-ms coord/u lockw lockw-ms ">1s" mchk mchk-ms mwr mwr-ms rreg rreg-ms beat beat-ms hb-gap took)"
	for d in "${DETAILS[@]}"; do out "$d"; done
}

report

# ------------------------------------------------- part B: one miss, three nodes
# What render markers (best effort) achieve for visitors: MISS_METAS
# metatiles of level 7, each asked for on all three nodes, the second and
# third node STAGGER seconds after the first (0: all at once), 8 metatiles
# at a time. Renders = the fake WMS's GetMaps: MISS_METAS if every node
# that came second waited for the first one's render, up to 3 x without.
if ((MISSES)) && ((MAXN >= 3)); then
	out ""
	out "== misses of the same metatile on three nodes (render markers, best effort) =="
	out "$(printf '%-8s %9s %8s %10s %10s' stagger metatiles renders 'x ideal' 'waited')"
	for st in $STAGGERS; do
		round_no=$((round_no + 1))
		rdir=$TMP/r$round_no
		start_nodes 3 "$rdir" "misses$round_no"
		curl -sf -m 5 -o /dev/null "http://127.0.0.1:$FAKE_PORT/control?reset=1" || die "fakewms control"
		batch=()
		for k in $(seq 0 $((MISS_METAS - 1))); do
			x=$((4 * (k % 64))) y=$((4 * (k / 64)))
			bbox=$(awk -v x="$x" -v y="$y" 'BEGIN { r = 1.40625; printf "%.5f,%.5f,%.5f,%.5f", -180 + x * r, -90 + y * r, -180 + (x + 1) * r, -90 + (y + 1) * r }')
			q="SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=$LAYER&STYLES=&SRS=EPSG:4326&BBOX=$bbox&WIDTH=256&HEIGHT=256&FORMAT=image/png"
			(
				for i in 1 2 3; do
					curl -s -m 30 -o /dev/null "http://127.0.0.1:${HTTP_PORT[$i]}/?$q" &
					sleep "$st"
				done
				wait
			) &
			batch+=($!)
			# only these: MinIO and the fake WMS are this script's children too
			(((k + 1) % 8)) || { wait "${batch[@]}"; batch=(); }
		done
		((${#batch[@]} == 0)) || wait "${batch[@]}"
		gm=$(curl -s -m 5 "http://127.0.0.1:$FAKE_PORT/stats" | jq -r .getmap)
		waited=0
		for i in 1 2 3; do
			w=$(curl -s -m 5 "http://127.0.0.1:${ADMIN_PORT[$i]}/metrics" | awk '/^caddy_tile_cache_rendered_elsewhere_total/ { print $2 }')
			waited=$((waited + ${w:-0}))
		done
		out "$(printf '%-8s %9d %8d %10.2f %10d' "${st}s" "$MISS_METAS" "$gm" "$(awk -v g="$gm" -v m="$MISS_METAS" 'BEGIN { print g / m }')" "$waited")"
		stop_nodes
	done
	out "renders = GetMaps the upstream got; x ideal = renders / metatiles (1: one render per metatile, 3: none"
	out "shared); waited = misses the nodes answered from another node's render (rendered_elsewhere_total)."
fi
out ""
out "report: $REPORT"
