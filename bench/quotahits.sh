#!/usr/bin/env bash
# Usage: bench/quotahits.sh
#
# Hits while the quota evicts, through a real Caddy (built from cmd/caddy
# of the working tree), loopback only. Two runs, one after the other, the
# same in every way but the quota:
#
#   quota     tile_cache with `quota QUOTA` (default 24MiB)
#   no quota  the same without it (nothing is evicted)
#
# In each: bench/fakewms answers GetMaps (DELAY, default 5ms, a map-like
# PNG of ~18 KB per tile); the hot set, every EPSG:4326 tile of levels
# 0..4 (682 tiles), is requested once (misses) and then hit by wrk
# (bench/hitpath.lua, -t THREADS -c CONNS) for DURATION twice:
#   idle      nothing else runs;
#   seeding   a REST seed of levels 5..10 (2 threads) starts with it:
#             with the quota, its tiles push the store over the quota
#             within a second or two and again and again after, and the
#             evictor evicts (counted from Caddy's metrics, eviction
#             passes and tiles, during the run).
# The hot set is hit all along, so LRU keeps it: every wrk answer must be
# 200 (wrk's non-2xx count), and misses (visitors' requests that went to
# the upstream) and store errors during the runs are reported.
# Reported per run and phase: req/s, p50, p90, p99, max (wrk), and the
# ratios: quota seeding / quota idle, and quota seeding / no-quota seeding
# (what eviction adds beyond the seed itself).
#
# Environment: QUOTA [24MiB] DELAY [5ms] DURATION [15s] THREADS [2]
#   CONNS [16] ROUNDS [2] DEADLINE [900] KEEP=1 (keep the temp dir)
# The report also goes to bench/results/quotahits-<date>-<time>.txt.
set -euo pipefail

QUOTA=${QUOTA:-24MiB}
DELAY=${DELAY:-5ms}
DURATION=${DURATION:-15s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-16}
ROUNDS=${ROUNDS:-2}
DEADLINE=${DEADLINE:-900}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"

log() { printf '%s quotahits: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

TMP=$(mktemp -d /tmp/quotahits.XXXXXX)
CADDY_PID="" FAKE_PID="" WATCHDOG_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	stop_pid "$CADDY_PID"
	stop_pid "$FAKE_PID"
	leave_tmp "$rc"
	exit "$rc"
}
. "$HERE/frame.sh"
frame quotahits
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; } ||
	die "could not install wrk"

log "building Caddy and the fake WMS"
go build -o "$TMP/caddy" ./cmd/caddy
go build -o "$TMP/fakewms" ./bench/fakewms

pick_port WMS_PORT
pick_port HTTP_PORT
pick_port ADMIN_PORT
"$TMP/fakewms" -addr "127.0.0.1:$WMS_PORT" -delay "$DELAY" -prerender 1024x1024 >"$TMP/fakewms.log" 2>&1 &
FAKE_PID=$!
HASH=$("$TMP/caddy" hash-password --plaintext bench 2>/dev/null)
BASE=http://127.0.0.1:$HTTP_PORT
REST=$BASE/geowebcache/rest

# The hot set: every EPSG:4326 tile of levels 0..4, shuffled the same way
# every time.
awk 'BEGIN { for (z = 0; z <= 4; z++) for (x = 0; x < 2 * 2 ^ z; x++) for (y = 0; y < 2 ^ z; y++) print z, x, y }' |
	shuf --random-source=<(yes quotahits) |
	awk '{ s = 180 / 2 ^ $1
		printf "/?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=bench:world&STYLES=&SRS=EPSG:4326&BBOX=%.10g,%.10g,%.10g,%.10g&WIDTH=256&HEIGHT=256&FORMAT=image/png\n", -180 + $2 * s, -90 + $3 * s, -180 + ($2 + 1) * s, -90 + ($3 + 1) * s }' >"$TMP/hot.txt"

# start_caddy QUOTA_LINE: a fresh store and Caddy.
start_caddy() {
	rm -rf "$TMP/store"
	cat >"$TMP/Caddyfile" <<EOF
{
	admin 127.0.0.1:$ADMIN_PORT
	http_port $HTTP_PORT
	auto_https off
	log {
		output file $TMP/caddy.log
		level INFO
	}
}
:$HTTP_PORT {
	bind 127.0.0.1
	handle_path /geowebcache/* {
		basic_auth {
			admin $HASH
		}
		tile_cache_admin {
			workers 2
		}
	}
	handle {
		tile_cache {
			upstream http://127.0.0.1:$WMS_PORT/wms
			storage $TMP/store
			$1
			layer bench:world {
				gridsets EPSG:4326
			}
		}
	}
}
EOF
	"$TMP/caddy" run --config "$TMP/Caddyfile" --adapter caddyfile >"$TMP/caddy.out" 2>&1 &
	CADDY_PID=$!
	for _ in $(seq 100); do curl -fs "http://127.0.0.1:$ADMIN_PORT/config/" >/dev/null 2>&1 && break; sleep 0.1; done
	kill -0 "$CADDY_PID" || die "Caddy did not start"
}

# metric NAME: the sum of a counter over its labels.
metric() {
	curl -s --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" |
		awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%d\n", s }'
}

# run_wrk LABEL: wrk on the hot set; prints "rps p50 p90 p99 max" (ms).
run_wrk() {
	local o=$TMP/wrk-$1.txt
	wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$HERE/hitpath.lua" "$BASE" -- "$TMP/hot.txt" >"$o" 2>&1 ||
		{ cat "$o" >&2; die "wrk failed ($1)"; }
	grep -q 'Non-2xx' "$o" && { cat "$o" >&2; die "wrk ($1): non-2xx answers"; }
	local line
	line=$(grep '^HITPATH' "$o") || { cat "$o" >&2; die "wrk ($1): no HITPATH line"; }
	awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%.0f %.2f %.2f %.2f %.2f\n", v["rps"], v["p50_us"] / 1000, v["p90_us"] / 1000, v["p99_us"] / 1000, v["max_us"] / 1000 }' <<<"$line"
}

out "bench/quotahits.sh on $(nproc) cores, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
out "fake WMS $DELAY per GetMap; hot set 682 tiles (EPSG:4326 z0-4); wrk -t$THREADS -c$CONNS $DURATION; seed z5-10, 2 threads"
out ""
out "$(printf '%-6s %-9s %-8s %8s %7s %7s %7s %7s %9s %8s %7s %12s' round run phase req/s p50_ms p90_ms p99_ms max_ms evictions evicted misses store_errors)"
declare -A P99
for r in $(seq "$ROUNDS"); do
	for run in quota noquota; do
		line=""
		[[ $run == quota ]] && line="quota $QUOTA"
		start_caddy "$line"
		log "round $r, $run: warming the hot set"
		while read -r p; do curl -fs -o /dev/null "$BASE$p" || die "warming $p"; done <"$TMP/hot.txt"
		for phase in idle seeding; do
			task=""
			if [[ $phase == seeding ]]; then
				task=$(curl -fs -u admin:bench -H 'Content-Type: application/json' -X POST \
					-d '{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":5,"zoomStop":10,"type":"seed","format":"image/png","threadCount":2}}' \
					-D - -o /dev/null "$REST/seed/bench:world.json" | awk 'tolower($1) == "location:" { print $2 }' | tr -d '\r')
				[[ -n $task ]] || die "the seed was not accepted"
				# No pause here: a hot set left alone for even a few
				# seconds is, rightly, the least recently used, and LRU
				# evicts it first (the first version of this script did).
			fi
			p0=$(metric caddy_tile_cache_eviction_passes_total)
			t0=$(metric caddy_tile_cache_evicted_tiles_total)
			m0=$(metric caddy_tile_cache_misses_total)
			e0=$(metric caddy_tile_cache_store_errors_total)
			log "round $r, $run, $phase: wrk $DURATION"
			read -r rps p50 p90 p99 max < <(run_wrk "$r-$run-$phase")
			p1=$(metric caddy_tile_cache_eviction_passes_total)
			t1=$(metric caddy_tile_cache_evicted_tiles_total)
			m1=$(metric caddy_tile_cache_misses_total)
			e1=$(metric caddy_tile_cache_store_errors_total)
			[[ -n $task ]] && curl -fs -u admin:bench -X DELETE "$task" >/dev/null || true
			P99[$run-$phase]+="$p99 "
			out "$(printf '%-6s %-9s %-8s %8s %7s %7s %7s %7s %9s %8s %7s %12s' "$r" "$run" "$phase" "$rps" "$p50" "$p90" "$p99" "$max" $((p1 - p0)) $((t1 - t0)) $((m1 - m0)) $((e1 - e0)))"
		done
		stop_pid "$CADDY_PID"
		CADDY_PID=""
	done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
qi=$(median "${P99[quota-idle]}") qs=$(median "${P99[quota-seeding]}") ns=$(median "${P99[noquota-seeding]}") ni=$(median "${P99[noquota-idle]}")
out ""
out "p99 medians (ms): quota idle $qi, quota seeding $qs; no quota idle $ni, no quota seeding $ns"
out "ratios: quota seeding / quota idle $(awk -v a="$qs" -v b="$qi" 'BEGIN { printf "%.2f", a / b }')  (goal <= 2)" \
	" | quota seeding / no-quota seeding $(awk -v a="$qs" -v b="$ns" 'BEGIN { printf "%.2f", a / b }')  (what eviction adds)"
log "report: $REPORT"
