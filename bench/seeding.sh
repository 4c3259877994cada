#!/usr/bin/env bash
# Usage: bench/seeding.sh
#
# Seeding throughput of tile_cache + tile_cache_admin, through the REST
# interface of a real Caddy, loopback only. Two parts, one run:
#
#   A. Against bench/fakewms, an upstream with a fixed render time: for each
#      DELAY (default 20ms 50ms 120ms), seed one EPSG:4326 level (SEED_Z,
#      default 6: 128×64 tiles = 512 metatiles of 4×4, 8192 tiles) of a
#      fresh layer with WORKERS workers (admin `workers`, request
#      `threadCount`; tile_cache `upstream_concurrency` = max(4, WORKERS)),
#      and compare tiles/s (from GET /rest/tasks/<id>.json) with the limit
#      WORKERS × 16 ÷ DELAY. ROUNDS rounds, interleaved. The fake WMS
#      answers, byte for byte, a real 1024×1024 MapServer metatile of
#      SOURCE_LAYER (test:polygons), captured once at the start. Each of
#      FORMATS (image/png) is seeded in every round, a fresh layer each,
#      interleaved: with a dense SOURCE_LAYER and a DELAY of MapServer's
#      own render time, it measures what a tile format's encoding costs a
#      seed when the upstream is on another machine (issue 31: png8 or
#      WebP against PNG, "the upstream still sets the pace"). With
#      PROFILE=1 (default), one more seed at the first DELAY runs under
#      Caddy's CPU profiler (admin /debug/pprof/profile) and the top
#      functions are printed.
#
#   B. Against the real MapServer (upstream/start.sh): levels 0..MS_MAXZ
#      (default 5) of test:polygons, EPSG:4326, from an empty cache, WORKERS
#      workers: the seed task's wall time; then the very same metatile
#      GetMaps, read from lighttpd's access log, replayed straight at
#      MapServer WORKERS at a time (bench/replay). MS_ROUNDS rounds
#      (seed, replay, truncateLayer, seed, replay, ...), and the CPU time
#      Caddy and MapServer used in each. After round 1 every seeded tile is
#      fetched back through the cache (all must be HITs) for the mean
#      stored tile size; at the end the metatiles are fetched once more
#      (untimed), cut into 256×256 tiles and encoded by Go's png encoder
#      (default compression) for comparison.
#
# Every run prints the CPU use (in cores) of Caddy, of the upstream and of
# everything else on the machine during the run: it has 2 cores, and other
# jobs change the figures. Before each run the script waits (up to
# QUIET_WAIT seconds, QUIET_BUDGET in all) for other processes to use
# < 0.25 cores.
#
# Environment (defaults in brackets):
#   DELAYS ["20ms 50ms 120ms"] WORKERS [2] ROUNDS [2] SEED_Z [6]
#     (a DELAY of "render": MapServer's own time for the captured metatile)
#   SOURCE_LAYER [test:polygons] TRANSPARENT [TRUE] the captured metatile
#   FORMATS ["image/png"] part A's tile formats (image/png8, image/webp, …)
#   PROFILE [1] PROFILE_SECONDS [10]   MS_MAXZ [5] MS_ROUNDS [3] (0: no part B)
#   QUIET_WAIT [45] per run, QUIET_BUDGET [120] in all (seconds)
#   DEADLINE [600] (seconds; the script stops itself after)
#   BUILD=1   rebuild /tmp/caddy-bench (./xcaddy.sh /tmp/caddy-bench, from
#             the working tree) first
#   CADDY     the Caddy binary [/tmp/caddy-bench, built if missing]
#   KEEP=1    keep the temp dir (Caddyfile, logs, URL lists)
#   S3=1      part A also seeds into an S3 store (a MinIO bucket on
#             loopback, built by module/store/s3store/s3test/install.sh):
#             every delay and round runs on both stores, interleaved
#
# The report also goes to bench/results/seeding-<date>-<time>.txt (and the
# CPU profile next to it). Everything started here (fake WMS, MapServer,
# Caddy) is stopped on exit. 3½ minutes on an idle 2-core machine (203 s
# measured), up to ~5½ with other jobs running; never more than DEADLINE.
set -euo pipefail

DELAYS=${DELAYS:-"20ms 50ms 120ms"}
WORKERS=${WORKERS:-2}
ROUNDS=${ROUNDS:-2}
SEED_Z=${SEED_Z:-6}
SOURCE_LAYER=${SOURCE_LAYER:-test:polygons}
TRANSPARENT=${TRANSPARENT:-TRUE}
FORMATS=${FORMATS:-image/png}
PROFILE=${PROFILE:-1}
PROFILE_SECONDS=${PROFILE_SECONDS:-10}
MS_MAXZ=${MS_MAXZ:-5}
MS_ROUNDS=${MS_ROUNDS:-3}
QUIET_BUDGET=${QUIET_BUDGET:-120}
QUIET_WAIT=${QUIET_WAIT:-45}
DEADLINE=${DEADLINE:-600}
CADDY_BIN=${CADDY:-/tmp/caddy-bench}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/minio.sh
. "$HERE/minio.sh"
cd "$ROOT"

log() { printf '%s seeding: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

for v in WORKERS ROUNDS SEED_Z PROFILE_SECONDS MS_MAXZ MS_ROUNDS QUIET_WAIT QUIET_BUDGET DEADLINE; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((WORKERS >= 1 && ROUNDS >= 1)) || die "WORKERS and ROUNDS must be >= 1"
((SEED_Z >= 2 && SEED_Z <= 8)) || die "SEED_Z must be 2..8"
((MS_MAXZ <= 7)) || die "MS_MAXZ must be <= 7"
for d in $DELAYS; do [[ $d =~ ^[0-9]+ms$ || $d == render ]] || die "DELAYS: '$d' is not like 20ms (or render)"; done
[[ $SOURCE_LAYER =~ ^test:[a-z]+$ ]] || die "SOURCE_LAYER: '$SOURCE_LAYER' is not a test: layer"
[[ $TRANSPARENT == TRUE || $TRANSPARENT == FALSE ]] || die "TRANSPARENT must be TRUE or FALSE"
for f in $FORMATS; do [[ $f =~ ^image/[a-z0-9.+-]+$ ]] || die "FORMATS: '$f' is not a MIME type"; done
CLK_TCK=$(getconf CLK_TCK)
T_START=$(date +%s)

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d /tmp/seeding.XXXXXX)
UPDIR=$TMP/upstream
CADDY_PID="" FAKE_PID="" WATCHDOG_PID="" UPSTREAM_STARTED=0
MINIO_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	stop_pid "$CADDY_PID"
	[[ -n $MINIO_PID ]] && stop_pid "$MINIO_PID"
	stop_pid "$FAKE_PID"
	if ((UPSTREAM_STARTED)); then
		"$ROOT/upstream/stop.sh" "$UPDIR" >/dev/null 2>&1 || log "upstream/stop.sh $UPDIR failed"
	fi
	leave_tmp "$rc"
	log "total run time $(($(date +%s) - T_START)) s"
	exit "$rc"
}
# traps, the DEADLINE watchdog, the report (REPORT, out), jq
. "$HERE/frame.sh"
frame seeding

# ---------------------------------------------------------------- tools
if [[ ${BUILD:-0} == 1 || ! -x $CADDY_BIN ]]; then
	log "building $CADDY_BIN (./xcaddy.sh)"
	./xcaddy.sh "$CADDY_BIN" >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; die "./xcaddy.sh failed"; }
fi
cp "$CADDY_BIN" "$TMP/caddy" # a private copy: a rebuild meanwhile changes nothing
MODULES=$("$TMP/caddy" list-modules) || die "$CADDY_BIN list-modules failed"
grep -qx 'http.handlers.tile_cache_admin' <<<"$MODULES" || die "$CADDY_BIN lacks tile_cache_admin"
go build -o "$TMP/fakewms" ./bench/fakewms || die "building bench/fakewms"
go build -o "$TMP/replay" ./bench/replay || die "building bench/replay"
"$ROOT/upstream/install.sh" >/dev/null || die "upstream/install.sh failed"

pick_port UP_PORT
pick_port FAKE_PORT
pick_port ADMIN_PORT
pick_port PORT_F
pick_port PORT_M
pick_port PORT_S
pick_port MINIO_PORT
pick_port MINIO_CONSOLE
S3=${S3:-0}
STORES=badger
if [[ $S3 == 1 ]]; then
	STORES="badger s3"
	export MINIO_ROOT_USER=seeding MINIO_ROOT_PASSWORD=seeding-secret
	start_minio "$TMP/minio"
fi
declare -A STORE_PORT=([badger]=$PORT_F [s3]=$PORT_S)

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
up_pids() {
	cat "$UPDIR/lighttpd.pid" "$UPDIR/mapserv.pids" 2>/dev/null | tr -s ' \n' ' '
}
# snap NAME: records the clock and the ticks of Caddy, the fake WMS, the
# MapServer processes and the whole machine under NAME.
snap() {
	local n=$1
	printf -v "S_${n}_ns" '%s' "$(date +%s%N)"
	printf -v "S_${n}_busy" '%s' "$(busy_ticks)"
	printf -v "S_${n}_caddy" '%s' "$(ticks_of "$CADDY_PID")"
	printf -v "S_${n}_fake" '%s' "$(ticks_of "$FAKE_PID")"
	# shellcheck disable=SC2046
	printf -v "S_${n}_up" '%s' "$(ticks_of $(up_pids))"
}
# usage A B: sets U_caddy U_fake U_up U_other (cores), U_caddy_s U_up_s (CPU s).
usage() {
	local a=$1 b=$2 v
	local ns0 ns1
	ns0=S_${a}_ns ns1=S_${b}_ns
	local secs
	secs=$(awk -v a="${!ns0}" -v b="${!ns1}" 'BEGIN { printf "%.6f", (b - a) / 1e9 }')
	for v in caddy fake up busy; do
		local x=S_${a}_$v y=S_${b}_$v
		printf -v "D_$v" '%s' $((${!y} - ${!x}))
	done
	read -r U_caddy U_fake U_up U_other U_caddy_s U_up_s < <(awk -v s="$secs" -v hz="$CLK_TCK" \
		-v c="$D_caddy" -v f="$D_fake" -v u="$D_up" -v b="$D_busy" 'BEGIN {
		o = b - c - f - u; if (o < 0) o = 0
		printf "%.2f %.2f %.2f %.2f %.2f %.2f\n", c/hz/s, f/hz/s, u/hz/s, o/hz/s, c/hz, u/hz }')
}
QUIET_LEFT=$QUIET_BUDGET
wait_quiet() { # up to QUIET_WAIT s (QUIET_BUDGET s in all) for others to use < 0.25 cores
	local t0 waited
	t0=$(date +%s)
	while :; do
		snap q0
		sleep 1
		snap q1
		usage q0 q1
		awk -v o="$U_other" 'BEGIN { exit !(o < 0.25) }' && break
		waited=$(($(date +%s) - t0))
		if ((waited >= QUIET_WAIT || waited >= QUIET_LEFT)); then
			log "machine not quiet: other processes use $U_other cores; going on"
			break
		fi
	done
	QUIET_LEFT=$((QUIET_LEFT - ($(date +%s) - t0)))
	((QUIET_LEFT > 0)) || QUIET_LEFT=0
}

# ---------------------------------------------------------------- upstream + capture
log "starting MapServer on 127.0.0.1:$UP_PORT ($UPDIR)"
UPSTREAM_STARTED=1
"$ROOT/upstream/start.sh" "$UPDIR" "$UP_PORT" >"$TMP/upstream-start.log" 2>&1 ||
	{ cat "$TMP/upstream-start.log" >&2; die "upstream/start.sh failed"; }
SOURCE_URL="http://127.0.0.1:$UP_PORT/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=$SOURCE_LAYER&STYLES=&SRS=EPSG:4326&BBOX=0,0,45,45&WIDTH=1024&HEIGHT=1024&FORMAT=image/png&TRANSPARENT=$TRANSPARENT"
ct=$(curl -s -m 30 -o "$TMP/source.png" -w '%{http_code} %{content_type}' "$SOURCE_URL") || die "capturing a MapServer metatile"
[[ $ct == "200 image/png" ]] || die "capturing a MapServer metatile: $ct"
# MapServer's own time for this metatile, warm (its files read once by
# the capture): the DELAY that stands for it on another machine.
RENDER_MS=$(for _ in 1 2 3; do curl -s -m 30 -o /dev/null -w '%{time_total}\n' "$SOURCE_URL"; done |
	sort -n | awk 'NR == 2 { printf "%.0f", 1000 * $1 }')
DELAYS=${DELAYS//render/${RENDER_MS}ms}
log "captured a 1024x1024 MapServer metatile of $SOURCE_LAYER ($(stat -c %s "$TMP/source.png") bytes, MapServer answers it in $RENDER_MS ms) for the fake WMS"

FIRST_DELAY=${DELAYS%% *}
"$TMP/fakewms" -addr "127.0.0.1:$FAKE_PORT" -delay "$FIRST_DELAY" -source "$TMP/source.png" \
	-prerender 1024x1024 >"$TMP/fakewms.log" 2>&1 &
FAKE_PID=$!

# ---------------------------------------------------------------- Caddy
NLAYERS=$((ROUNDS * $(wc -w <<<"$DELAYS") * $(wc -w <<<"$FORMATS") + 1))
CONC=$((WORKERS > 4 ? WORKERS : 4))
{
	cat <<EOF
{
	admin 127.0.0.1:$ADMIN_PORT
	auto_https off
	persist_config off
	log {
		level INFO
	}
}

EOF
	for store in $STORES; do
		s3cfg=""
		[[ $store == s3 ]] && s3cfg=$(s3_block seeding)
		cat <<EOF

# A: the fake WMS with a fixed render time, tiles in $store
:${STORE_PORT[$store]} {
	bind 127.0.0.1
	handle_path /gwc/* {
		tile_cache_admin {
			cache fake-$store
			workers $WORKERS
		}
	}
	tile_cache {
		name fake-$store
		upstream http://127.0.0.1:$FAKE_PORT/wms
		storage $TMP/store-fake-$store
		$s3cfg
		upstream_concurrency $CONC
		timeout 60s
EOF
		for i in $(seq "$NLAYERS"); do
			printf '\t\tlayer bench:r%d {\n\t\t\tupstream_layers %s\n\t\t\tgridsets EPSG:4326\n\t\t\tformats %s\n\t\t\tmetatile 4 4\n\t\t}\n' "$i" "$SOURCE_LAYER" "$FORMATS"
		done
		printf '\t}\n}\n'
	done
	cat <<EOF

# B: the real MapServer
:$PORT_M {
	bind 127.0.0.1
	handle_path /gwc/* {
		tile_cache_admin {
			cache ms
			workers $WORKERS
		}
	}
	tile_cache {
		name ms
		upstream http://127.0.0.1:$UP_PORT/wms
		storage $TMP/store-ms
		upstream_concurrency $CONC
		timeout 60s
		layer test:polygons {
			gridsets EPSG:4326
			formats image/png
			metatile 4 4
		}
	}
}
EOF
} >"$TMP/Caddyfile"
mkdir -p "$TMP/home"
HOME=$TMP/home XDG_DATA_HOME=$TMP/home/data XDG_CONFIG_HOME=$TMP/home/config \
	"$TMP/caddy" run --config "$TMP/Caddyfile" --adapter caddyfile >"$TMP/caddy.log" 2>&1 &
CADDY_PID=$!
for _ in $(seq 100); do
	curl -s -m 2 -o /dev/null "http://127.0.0.1:$ADMIN_PORT/config/" && break
	kill -0 "$CADDY_PID" 2>/dev/null || die "Caddy exited"
	sleep 0.1
done
curl -s -m 2 -o /dev/null "http://127.0.0.1:$FAKE_PORT/stats" || die "fakewms is not answering"

# ---------------------------------------------------------------- REST helpers
# submit, wait_task, task_secs
. "$HERE/rest.sh"
seed_json() { # seed_json ZSTART ZSTOP [TYPE [FORMAT]]
	printf '{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":%d,"zoomStop":%d,"format":"%s","type":"%s","threadCount":%d}}' \
		"$1" "$2" "${4:-image/png}" "${3:-seed}" "$WORKERS"
}

# ---------------------------------------------------------------- A. fixed render time
TILES_A=$((2 ** (SEED_Z + 1) * 2 ** SEED_Z))
METAS_A=$((TILES_A / 16))
out "== Seeding throughput: bench/fakewms with a fixed render time =="
out "$(date -u +%FT%TZ), $(nproc) CPUs, $(uname -r); Caddy $("$TMP/caddy" version | cut -d' ' -f1)"
out "binary $CADDY_BIN (built $(date -u -r "$CADDY_BIN" +%FT%TZ)); repository HEAD at run time $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ', working tree modified')"
out "EPSG:4326 level $SEED_Z of a fresh layer: $TILES_A tiles = $METAS_A metatiles of 4x4 (1024x1024 px); workers $WORKERS, threadCount $WORKERS, upstream_concurrency $CONC"
out "fake WMS answer: the 1024x1024 MapServer metatile of $SOURCE_LAYER (TRANSPARENT=$TRANSPARENT) at BBOX=0,0,45,45 ($(stat -c %s "$TMP/source.png") bytes as MapServer"
out "sent it, in $RENDER_MS ms, the median of 3 warm requests), served by the fake WMS byte for byte: $(curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$FAKE_PORT/wms?REQUEST=GetMap&WIDTH=1024&HEIGHT=1024") bytes"
out ""
out "$(printf '%-6s %-6s %-5s %-10s %7s %8s %9s %9s %7s %9s %7s %7s %7s %6s %6s %6s' round store delay format tiles secs tiles/s limit '%lim' caddy-ms/m busy% serve idle caddy fake other)"
declare -A RES # per "delay store format": tiles/s values
layer_no=0
for round in $(seq "$ROUNDS"); do
	for d in $DELAYS; do
		for fmt in $FORMATS; do
			layer_no=$((layer_no + 1))
			for store in $STORES; do
				curl -s -m 5 -o /dev/null "http://127.0.0.1:$FAKE_PORT/control?delay=$d&reset=1" || die "fakewms control"
				wait_quiet
				snap a0
				url=$(submit "http://127.0.0.1:${STORE_PORT[$store]}" "bench:r$layer_no" "$(seed_json "$SEED_Z" "$SEED_Z" seed "$fmt")")
				wait_task "$url" "$((DEADLINE / 2))"
				snap a1
				usage a0 a1
				processed=$(jq -r .processed <<<"$TASK_JSON")
				failed=$(jq -r .failedTiles <<<"$TASK_JSON")
				((processed == TILES_A && failed == 0)) || die "task: processed $processed failed $failed of $TILES_A"
				gm=$(curl -s -m 5 "http://127.0.0.1:$FAKE_PORT/stats" | jq -r .getmap)
				((gm == METAS_A)) || die "fake WMS saw $gm GetMaps, expected $METAS_A"
				secs=$(task_secs)
				# Where the upstream slots sat idle: from the fake WMS's trace
				# of every GetMap (arrival, end), the slot time not spent
				# answering, per request, and the mean time answering.
				read -r idle_ms serve_ms < <(curl -s -m 5 "http://127.0.0.1:$FAKE_PORT/trace" | awk -v w="$WORKERS" '
					NR == 1 || $1 < s0 { s0 = $1 } $2 > e1 { e1 = $2 } { sum += $2 - $1; n++ }
					END { if (!n) { print "- -"; exit } printf "%.2f %.2f\n", (w * (e1 - s0) - sum) / n / 1e6, sum / n / 1e6 }')
				ms=${d%ms}
				read -r tps limit pct cpm busy < <(awk -v n="$processed" -v s="$secs" -v w="$WORKERS" -v d="$ms" \
					-v cs="$U_caddy_s" -v m="$METAS_A" 'BEGIN {
					tps = n / s; lim = w * 16 / (d / 1000)
					printf "%.0f %.0f %.1f %.1f %.0f\n", tps, lim, 100 * tps / lim, 1000 * cs / m, 100 * m * d / 1000 / (s * w) }')
				RES["$d $store $fmt"]+="$tps "
				out "$(printf '%-6s %-6s %-5s %-10s %7d %8.2f %9s %9s %7s %9s %7s %7s %7s %6s %6s %6s' "$round" "$store" "$d" "${fmt#image/}" "$processed" "$secs" "$tps" "$limit" "$pct" "$cpm" "$busy" "$serve_ms" "$idle_ms" "$U_caddy" "$U_fake" "$U_other")"
			done
		done
	done
done
out ""
out "tiles/s = processed / (finished - started), from GET /rest/tasks/<id>.json; limit = workers x 16 / delay;"
out "caddy-ms/m = Caddy CPU ms per metatile; busy% = share of the run the $WORKERS upstream slots spent rendering"
out "(metatiles x delay / (secs x workers)); serve = the fake WMS's mean ms from a GetMap's arrival to the end of its answer;"
out "idle = ms per GetMap that the $WORKERS slots sat without a request (from the fake WMS's trace); caddy, fake, other = cores used during the run by Caddy, the fake WMS"
out "and everything else on the machine (the 2 cores are shared)."
((S3)) && out "s3 rows: tiles in a MinIO bucket on loopback; MinIO's CPU is in 'other'."
for d in $DELAYS; do
	for store in $STORES; do
		for fmt in $FORMATS; do
			out "  $d $store ${fmt#image/}: median $(tr ' ' '\n' <<<"${RES["$d $store $fmt"]}" | grep . | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }') tiles/s"
		done
	done
done

if [[ $PROFILE == 1 ]]; then
	layer_no=$((layer_no + 1))
	out ""
	out "-- CPU profile of Caddy while seeding at $FIRST_DELAY (level $((SEED_Z + 1)), killed after the profile) --"
	curl -s -m 5 -o /dev/null "http://127.0.0.1:$FAKE_PORT/control?delay=$FIRST_DELAY&reset=1"
	wait_quiet
	url=$(submit "http://127.0.0.1:$PORT_F" "bench:r$layer_no" "$(seed_json $((SEED_Z + 1)) $((SEED_Z + 1)) seed "${FORMATS%% *}")")
	sleep 1
	snap p0
	PPROF=$HERE/results/seeding-$STAMP.cpu.pprof
	curl -s -m $((PROFILE_SECONDS + 20)) -o "$PPROF" \
		"http://127.0.0.1:$ADMIN_PORT/debug/pprof/profile?seconds=$PROFILE_SECONDS" || die "profile failed"
	snap p1
	usage p0 p1
	TASK_JSON=$(curl -s -m 5 "$url")
	curl -s -m 10 -o /dev/null -d kill_all=all "http://127.0.0.1:$PORT_F/gwc/rest/seed" || true
	gm=$(curl -s -m 5 "http://127.0.0.1:$FAKE_PORT/stats" | jq -r .getmap)
	out "during the profile: Caddy $U_caddy cores, fake WMS $U_fake, other $U_other; task at $(jq -r .tilesPerSecond <<<"$TASK_JSON" | cut -d. -f1) tiles/s; $gm GetMaps so far"
	out "profile saved as $PPROF"
	out ""
	out "go tool pprof -top (flat):"
	go tool pprof -top -nodecount=25 "$PPROF" 2>/dev/null | sed -n '1,35p' | tee -a "$REPORT"
	out ""
	out "go tool pprof -top -cum:"
	go tool pprof -top -cum -nodecount=30 "$PPROF" 2>/dev/null | sed -n '6,40p' | tee -a "$REPORT"
	# wait for the killed task's workers to stop before part B
	sleep 1
fi

# ---------------------------------------------------------------- B. real MapServer
if ((MS_ROUNDS == 0)); then
	out ""
	out "part B (MapServer) skipped: MS_ROUNDS=0"
	out "report: $REPORT"
	exit 0
fi
MS_TILES=0 MS_METAS=0
for z in $(seq 0 "$MS_MAXZ"); do
	w=$((2 ** (z + 1))) h=$((2 ** z))
	MS_TILES=$((MS_TILES + w * h))
	MS_METAS=$((MS_METAS + ((w + 3) / 4) * ((h + 3) / 4)))
done
# Every tile of the levels, for fetching them back through the cache.
awk -v maxz="$MS_MAXZ" -v base="http://127.0.0.1:$PORT_M" 'BEGIN {
	for (z = 0; z <= maxz; z++) {
		n = 2 ^ z; s = 180 / n
		for (y = 0; y < n; y++) for (x = 0; x < 2 * n; x++)
			printf "%s/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=test:polygons&STYLES=&SRS=EPSG:4326&BBOX=%.12g,%.12g,%.12g,%.12g&WIDTH=256&HEIGHT=256&FORMAT=image/png\n",
				base, -180 + x * s, -90 + y * s, -180 + (x + 1) * s, -90 + (y + 1) * s
	}
}' >"$TMP/tile-urls.txt"

out ""
out "== Seeding against MapServer =="
out "test:polygons, EPSG:4326, levels 0..$MS_MAXZ from an empty cache: $MS_TILES tiles, $MS_METAS metatiles; workers $WORKERS;"
out "MapServer 8 behind lighttpd with 2 mapserv FastCGI processes (upstream/start.sh) on the same 2 cores."
out "replay = the seed's metatile GetMaps from lighttpd's access log, sent straight to MapServer $WORKERS at a time (bench/replay)."
out ""
out "$(printf '%-6s %-8s %9s %8s %6s %6s %6s  |  %-8s %8s %6s %6s  | %6s' round what secs tiles/s caddy mapsrv other what secs mapsrv other ratio)"
declare -a SEEDS REPLAYS CPUNOTE
TRUNC_URL="http://127.0.0.1:$PORT_M/gwc/rest/masstruncate"
for round in $(seq "$MS_ROUNDS"); do
	if ((round > 1)); then
		# Empty the cache again: truncateLayer, then wait for the old
		# generation's reclaim (a few thousand keys) to finish.
		n0=$(grep -c 'truncated layer reclaimed' "$TMP/caddy.log" || true)
		code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: text/xml' \
			-d '<truncateLayer><layerName>test:polygons</layerName></truncateLayer>' "$TRUNC_URL")
		[[ $code == 200 ]] || die "truncateLayer answered $code"
		for _ in $(seq 100); do
			(($(grep -c 'truncated layer reclaimed' "$TMP/caddy.log" || true) > n0)) && break
			sleep 0.1
		done
	fi
	wait_quiet
	L0=$(wc -l <"$UPDIR/lighttpd-access.log")
	snap m0
	url=$(submit "http://127.0.0.1:$PORT_M" "test:polygons" "$(seed_json 0 "$MS_MAXZ")")
	wait_task "$url" 300
	snap m1
	usage m0 m1
	processed=$(jq -r .processed <<<"$TASK_JSON")
	failed=$(jq -r .failedTiles <<<"$TASK_JSON")
	((processed == MS_TILES && failed == 0)) || die "MapServer seed: processed $processed failed $failed of $MS_TILES"
	seed_s=$(task_secs)
	seed_tps=$(jq -r '.tilesPerSecond | floor' <<<"$TASK_JSON")
	s_caddy=$U_caddy s_up=$U_up s_other=$U_other s_caddy_s=$U_caddy_s s_up_s=$U_up_s
	# The seed's GetMaps, from the access log, as URLs straight at MapServer.
	# lighttpd buffers its access log for a moment, so lines of the previous
	# replay may land after L0: those are told apart by their User-Agent.
	for _ in $(seq 100); do
		tail -n +"$((L0 + 1))" "$UPDIR/lighttpd-access.log" | { grep -v '"tilecache-bench-replay"$' || true; } |
			awk -v base="http://127.0.0.1:$UP_PORT" '{
				for (i = 1; i <= NF; i++) if ($i == "\"GET") { print base $(i + 1); break }
			}' | { grep 'REQUEST=GetMap' || true; } >"$TMP/replay-urls-$round.txt"
		n=$(wc -l <"$TMP/replay-urls-$round.txt")
		((n >= MS_METAS)) && break
		sleep 0.1
	done
	((n == MS_METAS)) || die "the access log holds $n GetMaps for the seed, expected $MS_METAS"
	wait_quiet
	snap r0
	line=$(timeout 300 "$TMP/replay" -urls "$TMP/replay-urls-$round.txt" -c "$WORKERS") ||
		die "replay failed: $line"
	snap r1
	usage r0 r1
	replay_s=$(sed -E 's/.*wall_s=([0-9.]+).*/\1/' <<<"$line")
	ratio=$(awk -v a="$seed_s" -v b="$replay_s" 'BEGIN { printf "%.3f", a / b }')
	SEEDS+=("$seed_s") REPLAYS+=("$replay_s")
	CPUNOTE+=("$(awk -v cs="$s_caddy_s" -v us="$s_up_s" -v ru="$U_up_s" -v m="$MS_METAS" -v rnd="$round" 'BEGIN {
		printf "round %d: CPU time of the seed: Caddy %.2f s (%.1f ms per metatile) + MapServer %.2f s = %.2f s; of the replay: MapServer %.2f s.\n", rnd, cs, 1000 * cs / m, us, cs + us, ru
		printf "  CPU work ratio seed/replay = %.2f: with both sharing the same 2 cores, seed/replay cannot go much below it.", (cs + us) / ru }')")
	out "$(printf '%-6s %-8s %9.2f %8s %6s %6s %6s  |  %-8s %8.2f %6s %6s  | %6s' "$round" seed "$seed_s" "$seed_tps" "$s_caddy" "$s_up" "$s_other" replay "$replay_s" "$U_up" "$U_other" "$ratio")"
	if ((round == 1)); then
		# every tile back through the cache: all HITs; their mean size
		FETCH=$(timeout 300 "$TMP/replay" -urls "$TMP/tile-urls.txt" -c 2 -header geowebcache-cache-result=HIT) ||
			die "fetching the seeded tiles: $FETCH"
	fi
done
# Untimed: the same metatiles once more from MapServer, cut into 256x256
# tiles and encoded with Go's png at default compression.
REPLAY1=$(timeout 300 "$TMP/replay" -urls "$TMP/replay-urls-1.txt" -c "$WORKERS" -slice 256x256) ||
	die "replay -slice failed: $REPLAY1"
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
ms=$(median "${SEEDS[@]}") mr=$(median "${REPLAYS[@]}")
out ""
out "median seed $ms s, median replay $mr s: seed/replay = $(awk -v a="$ms" -v b="$mr" 'BEGIN { printf "%.3f", a / b }') (goal <= 1.25)"
out "seed secs = finished - started of the task; replay secs = wall time of bench/replay -c $WORKERS;"
out "caddy, mapsrv (lighttpd + mapserv), other = cores used during that run."
for note in "${CPUNOTE[@]}"; do out "$note"; done
out ""
ntiles=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$FETCH")
mean_cache=$(sed -E 's/.*mean_bytes=([0-9.]+).*/\1/' <<<"$FETCH")
go_tiles=$(sed -E 's/.* tiles=([0-9]+).*/\1/' <<<"$REPLAY1")
go_mean=$(sed -E 's/.*go_png_mean=([0-9.]+).*/\1/' <<<"$REPLAY1")
meta_mean=$(sed -E 's/.*mean_bytes=([0-9.]+).*/\1/' <<<"$REPLAY1")
out "stored tile size: $ntiles tiles fetched back through the cache, all HIT: mean $mean_cache bytes"
out "the same $go_tiles tiles cut from MapServer's metatiles (mean metatile $meta_mean bytes) and encoded by Go's"
out "image/png at default compression: mean $go_mean bytes; cache/Go = $(awk -v a="$mean_cache" -v b="$go_mean" 'BEGIN { printf "%.3f", a / b }') (goal <= 1)"
out "raw: fetch [$FETCH]"
out "raw: replay -slice [$REPLAY1]"
out ""
out "report: $REPORT"
