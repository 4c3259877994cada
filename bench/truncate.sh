#!/usr/bin/env bash
# Usage: bench/truncate.sh
#
# Truncation speed of tile_cache's REST interface, and Caddy's resident
# memory while seeding a million tiles. One Caddy, loopback only, tiles put
# there by seeding through the real plugin from bench/fakewms (-delay 0, a
# synthetic map-like PNG drawn once per size), on custom gridsets with small
# tiles so that a million tiles take seconds, not hours:
#
#   t16: EPSG:3857, extent 0 0 16000 16000, resolution 1, tile_size 16:
#        one level of 1000×1000 = 1,000,000 tiles; layers with metatile
#        16 16 get 256 tiles per upstream request (a 256×256 PNG).
#   t64: the same with tile_size 64 (extent 0 0 64000 64000): 1,000,000
#        tiles of 64×64 px, ~1.4 KB on average, so that they live in Badger's
#        value log like real tiles (values over 512 bytes do); a 1024×1024
#        PNG per upstream request.
#
#   1. Memory: seed layer `mem` (t64, 1,000,000 tiles, WORKERS workers,
#      one task) while sampling Caddy's /proc/<pid>/status (VmRSS, RssAnon,
#      RssFile) and the Go heap in use (admin /metrics) every second:
#      min / median / max, first- and last-minute averages, a timeline.
#      The sampler runs on to the end: the seeds of part 3 report their
#      RssAnon too.
#   2. Range truncate through REST (type truncate, level 0, bounds covering
#      columns 0..999 × rows 0..99 = exactly 100,000 stored tiles): on
#      `mem` (1,000,000 tiles, 16×16 metatiles) and on `range4`, a layer of
#      exactly those 100,000 tiles with 4×4 metatiles (older versions
#      deleted metatile by metatile); time and tiles/s from
#      GET /rest/tasks/<id>.json, then a spot check of tiles inside (MISS)
#      and just outside (HIT) the range.
#   3. Seed REPS layers big1..bigREPS of 1,000,000 t16 tiles each and REPS
#      layers small1..smallREPS of 1,000 (gridset_extent 0 0 640 400), then,
#      interleaved, POST /rest/masstruncate truncateLayer on big_i and on
#      small_i: curl's time_total of each, the medians. After each one the
#      script waits for the old generation's background reclaim to finish
#      (Caddy's log "truncated layer reclaimed", whose duration is reported
#      too), so that no reclaim runs under the next measurement.
#
# Environment (defaults in brackets):
#   REPS [5]  WORKERS [2]  MEM_TILE [64] (tile size of t64; 16 makes part 1 fast,
#            and its ~60-75-byte tiles stay inline in Badger's LSM tree)
#   MEM_ONLY=1  run part 1 (memory) only, then stop; it then samples on for
#            MEM_SETTLE [20] seconds after the task and reports the peak of
#            that tail too (compactions go on after the last write)
#   MEM_MILLIONS [1]  layer mem holds that many million tiles (1000 columns
#            × 1000·MEM_MILLIONS rows), all seeded by the one task of part 1
#   QUIET_WAIT [30] per run, QUIET_BUDGET [120] in all (seconds)
#   DEADLINE [900] (seconds; the script stops itself after)
#   BUILD=1  rebuild /tmp/caddy-bench (./xcaddy.sh, working tree) first
#   CADDY    the Caddy binary [/tmp/caddy-bench, built if missing]
#   KEEP=1   keep the temp dir (store, Caddy log, memory samples)
#
# The report also goes to bench/results/truncate-<date>-<time>.txt. It needs
# ~2.5 GB of disk in /tmp (checked: 4 GB free). Everything started here is
# stopped on exit. 6½ minutes on an idle 2-core machine (383 s measured),
# 8½ with a core's worth of other jobs (508 s); never more than DEADLINE.
set -euo pipefail

REPS=${REPS:-5}
WORKERS=${WORKERS:-2}
MEM_TILE=${MEM_TILE:-64}
MEM_ONLY=${MEM_ONLY:-0}
MEM_SETTLE=${MEM_SETTLE:-20}
MEM_MILLIONS=${MEM_MILLIONS:-1}
QUIET_BUDGET=${QUIET_BUDGET:-120}
QUIET_WAIT=${QUIET_WAIT:-30}
DEADLINE=${DEADLINE:-900}
CADDY_BIN=${CADDY:-/tmp/caddy-bench}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"

log() { printf '%s truncate: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
for v in REPS WORKERS MEM_TILE MEM_ONLY MEM_SETTLE MEM_MILLIONS QUIET_WAIT QUIET_BUDGET DEADLINE; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1 && WORKERS >= 1)) || die "REPS and WORKERS must be >= 1"
((MEM_TILE >= 8 && MEM_TILE <= 64)) || die "MEM_TILE must be 8..64"
((MEM_MILLIONS >= 1 && MEM_MILLIONS <= 10)) || die "MEM_MILLIONS must be 1..10"
MEM_TILES=$((MEM_MILLIONS * 1000000))
CLK_TCK=$(getconf CLK_TCK)
T_START=$(date +%s)

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d /tmp/truncate.XXXXXX)
CADDY_PID="" FAKE_PID="" SAMPLER_PID="" WATCHDOG_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	stop_pid "$SAMPLER_PID"
	stop_pid "$CADDY_PID"
	stop_pid "$FAKE_PID"
	leave_tmp "$rc"
	log "total run time $(($(date +%s) - T_START)) s"
	exit "$rc"
}
# traps, the DEADLINE watchdog, the report (REPORT, out), jq
. "$HERE/frame.sh"
frame truncate

# ---------------------------------------------------------------- tools
if [[ ${BUILD:-0} == 1 || ! -x $CADDY_BIN ]]; then
	log "building $CADDY_BIN (./xcaddy.sh)"
	./xcaddy.sh "$CADDY_BIN" >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; die "./xcaddy.sh failed"; }
fi
cp "$CADDY_BIN" "$TMP/caddy"
MODULES=$("$TMP/caddy" list-modules) || die "$CADDY_BIN list-modules failed"
grep -qx 'http.handlers.tile_cache_admin' <<<"$MODULES" || die "$CADDY_BIN lacks tile_cache_admin"
go build -o "$TMP/fakewms" ./bench/fakewms || die "building bench/fakewms"
avail=$(df -Pk "$TMP" | awk 'NR == 2 { print $4 }')
((avail > 4 * 1024 * 1024)) || die "less than 4 GB free in /tmp"

pick_port FAKE_PORT
pick_port ADMIN_PORT
pick_port PORT

# ---------------------------------------------------------------- CPU accounting
ticks_of() {
	local t=0 p st f
	for p in "$@"; do
		st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		st=${st##*) }
		read -ra f <<<"$st"
		t=$((t + f[11] + f[12]))
	done
	echo "$t"
}
busy_ticks() {
	local u n s q sq st
	read -r _ u n s _ _ q sq st _ </proc/stat
	echo $((u + n + s + q + sq + st))
}
snap() {
	local n=$1
	printf -v "S_${n}_ns" '%s' "$(date +%s%N)"
	printf -v "S_${n}_busy" '%s' "$(busy_ticks)"
	printf -v "S_${n}_caddy" '%s' "$(ticks_of "$CADDY_PID")"
	printf -v "S_${n}_fake" '%s' "$(ticks_of "$FAKE_PID")"
}
# usage A B: U_caddy U_fake U_other (cores between the two snaps)
usage() {
	local a=$1 b=$2 v x y ns0=S_${1}_ns ns1=S_${2}_ns
	for v in caddy fake busy; do
		x=S_${a}_$v y=S_${b}_$v
		printf -v "D_$v" '%s' $((${!y} - ${!x}))
	done
	read -r U_caddy U_fake U_other < <(awk -v a="${!ns0}" -v b="${!ns1}" -v hz="$CLK_TCK" \
		-v c="$D_caddy" -v f="$D_fake" -v t="$D_busy" 'BEGIN {
		s = (b - a) / 1e9; o = t - c - f; if (o < 0) o = 0
		printf "%.2f %.2f %.2f\n", c/hz/s, f/hz/s, o/hz/s }')
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

# ---------------------------------------------------------------- fake WMS + Caddy
MEM_META=$((16 * MEM_TILE))
"$TMP/fakewms" -addr "127.0.0.1:$FAKE_PORT" -delay 0 -prerender "256x256,64x64,${MEM_META}x${MEM_META}" \
	>"$TMP/fakewms.log" 2>&1 &
FAKE_PID=$!

layer() { # layer NAME GRIDSET META [EXTENT...]
	printf '\t\tlayer %s {\n\t\t\tgridsets %s\n\t\t\tformats image/png\n\t\t\tmetatile %s %s\n' "$1" "$2" "$3" "$3"
	(($# > 3)) && printf '\t\t\tgridset_extent %s %s %s %s %s\n' "$2" "$4" "$5" "$6" "$7"
	printf '\t\t}\n'
}
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
:$PORT {
	bind 127.0.0.1
	handle_path /gwc/* {
		tile_cache_admin {
			cache trunc
			workers $WORKERS
		}
	}
	tile_cache {
		name trunc
		upstream http://127.0.0.1:$FAKE_PORT/wms
		storage $TMP/store
		upstream_concurrency 4
		timeout 60s
		gridset t16 {
			srs EPSG:3857
			extent 0 0 16000 16000
			resolutions 1
			tile_size 16
		}
		gridset t64 {
			srs EPSG:3857
			extent 0 0 $((1000 * MEM_TILE)) $((1000 * MEM_MILLIONS * MEM_TILE))
			resolutions 1
			tile_size $MEM_TILE
		}
EOF
	layer mem t64 16
	for i in $(seq "$REPS"); do
		layer "big$i" t16 16
		layer "small$i" t16 16 0 0 640 400
	done
	layer range4 t16 4 0 0 16000 1600
	printf '\t}\n}\n'
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
for _ in $(seq 100); do
	curl -s -m 2 -o /dev/null "http://127.0.0.1:$FAKE_PORT/stats" && break
	sleep 0.1
done
# A port picked free may be taken before fakewms binds it (other jobs on the
# machine pick ports too); seeding would then only open the circuit breaker.
kill -0 "$FAKE_PID" 2>/dev/null && curl -s -m 2 -o /dev/null "http://127.0.0.1:$FAKE_PORT/stats" ||
	die "fake WMS not up on port $FAKE_PORT: $(tail -n 1 "$TMP/fakewms.log")"
BASE=http://127.0.0.1:$PORT

# ---------------------------------------------------------------- REST helpers
# submit, wait_task, task_secs
. "$HERE/rest.sh"
seed() { # seed LAYER GRIDSET EXPECTED [TYPE [BOUNDS]]: runs a task to DONE
	local json bounds=""
	[[ -n ${5:-} ]] && bounds=',"bounds":{"coords":{"double":['"$5"']}}'
	json=$(printf '{"seedRequest":{"gridSetId":"%s","zoomStart":0,"zoomStop":0,"format":"image/png","type":"%s","threadCount":%d%s}}' \
		"$2" "${4:-seed}" "$WORKERS" "$bounds")
	TASK_URL=$(submit "$BASE" "$1" "$json")
	wait_task "$TASK_URL" "${SEED_LIMIT:-500}"
	local p f
	p=$(jq -r .processed <<<"$TASK_JSON") f=$(jq -r .failedTiles <<<"$TASK_JSON")
	((p == $3 && f == 0)) || die "$1: processed $p, failed $f, expected $3"
}
metric() { # the sum of a metric over its labels, from Caddy's admin /metrics
	curl -s -m 5 "http://127.0.0.1:$ADMIN_PORT/metrics" |
		awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%.0f\n", s }'
}
reclaimed() { grep -c 'truncated layer reclaimed' "$TMP/caddy.log" || true; }
truncate_layer() { # truncate_layer LAYER: curl's time_total in TL_TIME; waits for the reclaim (RECLAIM)
	local n0 res code t
	n0=$(reclaimed)
	res=$(curl -s -m 30 -o /dev/null -w '%{http_code} %{time_total}' -H 'Content-Type: text/xml' \
		-d "<truncateLayer><layerName>$1</layerName></truncateLayer>" "$BASE/gwc/rest/masstruncate") ||
		die "truncateLayer $1 failed"
	read -r code t <<<"$res"
	[[ $code == 200 ]] || die "truncateLayer $1 answered $code"
	for _ in $(seq 1200); do
		(($(reclaimed) > n0)) && break
		sleep 0.1
	done
	(($(reclaimed) > n0)) || die "no reclaim of $1 within 120 s"
	RECLAIM=$(grep 'truncated layer reclaimed' "$TMP/caddy.log" | tail -n 1 |
		jq -r '"\(.took * 1000 | round) ms (writes held \(.writes_held * 1000 | round) ms, \(.value_log_files_freed) value-log files freed)"')
	TL_TIME=$t
}
tile_state() { # tile_state LAYER TILESIZE X Y: HIT or MISS of the tile at column X, row Y
	local t=$2
	curl -s -m 10 -o /dev/null -w '%header{geowebcache-cache-result}' \
		"$BASE/?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=$1&STYLES=&SRS=EPSG:3857&BBOX=$(($3 * t)),$(($4 * t)),$(($3 * t + t)),$(($4 * t + t))&WIDTH=$t&HEIGHT=$t&FORMAT=image/png"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# ---------------------------------------------------------------- 1. memory
out "== Memory while seeding =="
out "$(date -u +%FT%TZ), $(nproc) CPUs, $(free -g | awk '/^Mem/ { print $2 }') GB RAM, $(uname -r); Caddy $("$TMP/caddy" version | cut -d' ' -f1)"
out "binary $CADDY_BIN (built $(date -u -r "$CADDY_BIN" +%FT%TZ)); repository HEAD at run time $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ', working tree modified')"
out "layer mem: $MEM_TILES tiles of ${MEM_TILE}x${MEM_TILE} px (gridset t64: 1000x$((1000 * MEM_MILLIONS)) tiles), metatile 16x16 = ${MEM_META}x${MEM_META} px"
out "per upstream request, bench/fakewms -delay 0 (synthetic map), workers $WORKERS, threadCount $WORKERS, one seed task."
wait_quiet
# The sampler runs until the end: epoch_s vmrss_kb rssanon_kb rssfile_kb heap_inuse_bytes,
# on whole seconds.
SAMPLES=$TMP/mem-samples.txt
(
	while kill -0 "$CADDY_PID" 2>/dev/null; do
		now=$(date +%s.%N)
		st=$(cat "/proc/$CADDY_PID/status" 2>/dev/null) || break
		heap=$(curl -s -m 0.5 "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '$1 == "go_memstats_heap_inuse_bytes" { printf "%.0f", $2 }')
		awk -v t="$now" -v h="${heap:-0}" '
			$1 == "VmRSS:" { r = $2 } $1 == "RssAnon:" { a = $2 } $1 == "RssFile:" { f = $2 }
			END { printf "%.3f %d %d %d %s\n", t, r, a, f, h }' <<<"$st"
		sleep "$(awk -v n="$(date +%s.%N)" 'BEGIN { printf "%.3f", 1 - (n - int(n)) }')"
	done
) >"$SAMPLES" &
SAMPLER_PID=$!
task_window() { # epoch seconds of the task's start and end, from TASK_JSON
	echo "$(date -d "$(jq -r .started <<<"$TASK_JSON")" +%s.%N) $(date -d "$(jq -r .finished <<<"$TASK_JSON")" +%s.%N)"
}
snap m0
SEED_LIMIT=$((500 * MEM_MILLIONS)) seed mem t64 "$MEM_TILES"
snap m1
usage m0 m1
read -r W0 W1 <<<"$(task_window)"
sleep 1.5
mem_s=$(task_secs)
gm=$(curl -s -m 5 "http://127.0.0.1:$FAKE_PORT/stats" | jq -r .getmap)
store_mb=$(du -sm "$TMP/store" | cut -f1)
out "seed: $(printf '%.1f' "$mem_s") s, $(jq -r '.tilesPerSecond | floor' <<<"$TASK_JSON") tiles/s, $gm upstream requests; Caddy $U_caddy cores, fake WMS $U_fake, other $U_other;"
out "store on disk afterwards: $store_mb MB ($(find "$TMP/store" -name '*.vlog' | wc -l) value-log files)"
out ""
# stats over the samples taken while the task ran (from its start to its end)
awk -v w0="$W0" -v w1="$W1" '
	function sortcol(c,   i, j, t) {
		for (i = 1; i <= n; i++) s[i] = v[i, c]
		for (i = 2; i <= n; i++) { t = s[i]; for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]; s[j + 1] = t }
	}
	$1 >= w0 && $1 <= w1 { n++; tt[n] = $1; for (c = 2; c <= 5; c++) v[n, c] = $c }
	END {
		split("VmRSS RssAnon RssFile Go-heap-inuse", name, " ")
		printf "%-14s %8s %8s %8s %14s %14s   (MB; %d samples, 1/s, over %.0f s)\n", "", "min", "median", "max", "first-min avg", "last-min avg", n, w1 - w0
		for (c = 2; c <= 5; c++) {
			sortcol(c)
			f = 0; fn = 0; l = 0; ln = 0
			for (i = 1; i <= n; i++) {
				if (tt[i] <= w0 + 60) { f += v[i, c]; fn++ }
				if (tt[i] >= w1 - 60) { l += v[i, c]; ln++ }
			}
			div = (c == 5 ? 1048576 : 1024)
			printf "%-14s %8.0f %8.0f %8.0f %14.0f %14.0f\n", name[c - 1], s[1] / div, s[int((n + 1) / 2)] / div, s[n] / div, f / fn / div, l / ln / div
		}
	}' "$SAMPLES" | tee -a "$REPORT"
out ""
out "timeline (every 15 s): t_s VmRSS RssAnon RssFile heap (MB)"
awk -v w0="$W0" -v w1="$W1" '$1 >= w0 && $1 <= w1 + 1 && (int($1 - w0) % 15 == 0) {
	printf "  %6.0f %6.0f %6.0f %6.0f %6.0f\n", $1 - w0, $2 / 1024, $3 / 1024, $4 / 1024, $5 / 1048576 }' "$SAMPLES" | tee -a "$REPORT"
out "VmRSS = RssAnon (heap, stacks, Badger's caches) + RssFile (pages of the mmapped files resident: Badger"
out "maps its value-log, memtable and table files); Go heap in use from go_memstats_heap_inuse_bytes."
# mem_window: "RssAnon avg/max, heap max, VmRSS at end" over the current TASK_JSON's run
mem_window() {
	local w0 w1
	read -r w0 w1 <<<"$(task_window)"
	awk -v w0="$w0" -v w1="$w1" '$1 >= w0 && $1 <= w1 { n++; a += $3; if ($3 > am) am = $3; if ($5 > hm) hm = $5; r = $2 }
		END { if (n) printf "RssAnon avg %.0f max %.0f MB, heap max %.0f MB, VmRSS at end %.0f MB", a / n / 1024, am / 1024, hm / 1048576, r / 1024 }' "$SAMPLES"
}
if ((MEM_ONLY)); then
	sleep "$MEM_SETTLE"
	out ""
	out "$(awk -v w1="$W1" -v s="$MEM_SETTLE" '$1 > w1 { n++; if ($3 > am) am = $3; if ($5 > hm) hm = $5; a = $3 }
		END { if (n) printf "after the task (%d s, %d samples): RssAnon max %.0f MB, at the end %.0f MB; Go heap in use max %.0f MB", s, n, am / 1024, a / 1024, hm / 1048576 }' "$SAMPLES")"
	out "report: $REPORT (MEM_ONLY=1: parts 2 and 3 skipped)"
	exit 0
fi

# ---------------------------------------------------------------- 2. range truncate
T=$MEM_TILE
out ""
out "== Truncation =="
out "-- range truncate: POST /rest/seed/<layer>.json type truncate, level 0, columns 0..999 x rows 0..99 = exactly 100,000 stored tiles --"
out "   mem: the 1,000,000-tile layer just seeded (t64, 16x16 metatiles), bounds 0,0,$((1000 * T)),$((100 * T))"
out "   range4: a layer of exactly these 100,000 tiles (t16, 4x4 metatiles, gridset_extent 0 0 16000 1600), bounds 0,0,16000,1600"
seed range4 t16 100000
out "seeded range4: 100,000 tiles in $(task_secs) s"
out ""
out "$(printf '%-8s %-9s %-9s %9s %9s %6s %6s  %s' layer metatile stored task_s tiles/s caddy other 'check (0,99) (999,99) (0,100) (999,100)')"
for spec in "mem t64 $T 16 1000000" "range4 t16 16 4 100000"; do
	read -r l g ts m stored <<<"$spec"
	wait_quiet
	snap t0
	seed "$l" "$g" 100000 truncate "0,0,$((1000 * ts)),$((100 * ts))"
	snap t1
	usage t0 t1
	secs=$(task_secs)
	tps=$(jq -r '.tilesPerSecond | floor' <<<"$TASK_JSON")
	# Just above the range (mem only): still there; inside: gone. The
	# HITs first: a MISS fetches its whole metatile again.
	c3=- c4=-
	if [[ $l == mem ]]; then c3=$(tile_state "$l" "$ts" 0 100) c4=$(tile_state "$l" "$ts" 999 100); fi
	c1=$(tile_state "$l" "$ts" 0 99) c2=$(tile_state "$l" "$ts" 999 99)
	out "$(printf '%-8s %-9s %-9s %9s %9s %6s %6s  %s %s %s %s' "$l" "${m}x$m" "$stored" "$secs" "$tps" "$U_caddy" "$U_other" "$c1" "$c2" "$c3" "$c4")"
	[[ $c1 == MISS && $c2 == MISS ]] || die "$l: tiles inside the truncated range are still there"
	[[ $l != mem || ($c3 == HIT && $c4 == HIT) ]] || die "$l: tiles outside the truncated range are gone"
done
out "task_s = finished - started of the task; caddy, other = cores used during the task."

# ---------------------------------------------------------------- 3. truncateLayer
out ""
out "-- truncateLayer: POST /rest/masstruncate, curl time_total; each waits for the previous reclaim to end --"
log "seeding $REPS layers of 1,000,000 tiles and $REPS of 1,000 (t16)"
for i in $(seq "$REPS"); do
	snap s0
	seed "big$i" t16 1000000
	snap s1
	usage s0 s1
	sleep 1.2 # the last sample of the task
	out "seeded big$i: 1,000,000 tiles in $(task_secs) s ($(jq -r '.tilesPerSecond | floor' <<<"$TASK_JSON") tiles/s; Caddy $U_caddy cores, other $U_other); $(mem_window)"
	seed "small$i" t16 1000
done
out "store on disk: $(du -sm "$TMP/store" | cut -f1) MB"
out ""
out "$(printf '%-4s %-18s %-9s %-24s | %-16s %-9s %-20s' rep layer time_s 'background reclaim' layer time_s 'background reclaim')"
BIG=() SMALL=()
for i in $(seq "$REPS"); do
	wait_quiet
	truncate_layer "big$i"
	tb=$TL_TIME rb=$RECLAIM
	truncate_layer "small$i"
	ts=$TL_TIME rs=$RECLAIM
	BIG+=("$tb") SMALL+=("$ts")
	out "$(printf '%-4s %-18s %-9s %-24s | %-16s %-9s %-20s' "$i" "big$i (1,000,000)" "$tb" "$rb" "small$i (1,000)" "$ts" "$rs")"
done
mb=$(median "${BIG[@]}") msm=$(median "${SMALL[@]}")
out "median: 1,000,000 tiles $mb s, 1,000 tiles $msm s (ratio $(awk -v a="$mb" -v b="$msm" 'BEGIN { printf "%.2f", a / b }'))"
# after truncateLayer the tiles are gone at once: a tile of big1 is a MISS
st=$(tile_state big1 16 500 500)
out "check: tile (500,500) of big1 after truncateLayer: $st"
[[ $st == MISS ]] || die "big1 still has tile (500,500) after truncateLayer"
truncate_layer mem
out "extra: truncateLayer of mem (900,000 tiles of ${T} px left): $TL_TIME s; reclaim $RECLAIM"
out ""
out "report: $REPORT"
