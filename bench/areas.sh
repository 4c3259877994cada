#!/usr/bin/env bash
# Usage: bench/areas.sh
#
# Task areas other than a box, through the REST interface of a real Caddy
# (built from cmd/caddy of the working tree), loopback only:
#
#   1. Tile lists: a LINES-line expire list (default 10,000,000), once
#      realistic (clustered edits at z15..18, duplicates: what osm2pgsql
#      writes) and once worst case (distinct random z18 tiles), POSTed to
#      rest/seed/<layer>/tiles as a truncate task (accepting the list is
#      the same work for any type; a seed of 10 M lines is hours of
#      rendering). Reported: lines/s accepted (the POST's own time: the
#      list is parsed as it streams in, the answer comes when it is a
#      task), Caddy's RssAnon before and at its peak during the POST
#      (sampled every 0.1 s), and VmHWM (peak RSS, mapped files included).
#   2. GetMaps: a SEED_LINES-line realistic list (default 5,000) seeded
#      against bench/fakewms (1 ms per GetMap): the GetMaps the upstream
#      saw against the distinct 4×4 metatiles of the list, counted here by
#      sort -u, independently of the cache.
#   3. Polygons: a world polygon with holes (EPSG:4326, levels 0..14: over
#      700 M tiles) submitted as a seed: the time to the answer (the exact
#      count is made before it), then SEED_SECONDS (default 20) of seeding
#      against the 1 ms fake WMS with Caddy's RssAnon sampled every second
#      (and RssFile, Badger's mapped files, which grow with what is stored).
#
# Environment: LINES [10000000] SEED_LINES [5000] SEED_SECONDS [20]
#   DEADLINE [900] KEEP=1 (keep the temp dir)
# The report also goes to bench/results/areas-<date>-<time>.txt.
set -euo pipefail

LINES=${LINES:-10000000}
SEED_LINES=${SEED_LINES:-5000}
SEED_SECONDS=${SEED_SECONDS:-20}
DEADLINE=${DEADLINE:-900}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"

log() { printf '%s areas: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
for v in LINES SEED_LINES SEED_SECONDS DEADLINE; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done

TMP=$(mktemp -d /tmp/areas.XXXXXX)
CADDY_PID="" FAKE_PID="" WATCHDOG_PID="" SAMPLER=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	[[ -n $SAMPLER ]] && kill "$SAMPLER" 2>/dev/null || true
	stop_pid "$CADDY_PID"
	stop_pid "$FAKE_PID"
	leave_tmp "$rc"
	exit "$rc"
}
. "$HERE/frame.sh"
frame areas

log "building Caddy, the fake WMS and the list generator"
go build -o "$TMP/caddy" ./cmd/caddy
go build -o "$TMP/fakewms" ./bench/fakewms
go build -o "$TMP/tilelistgen" ./module/tilelist/cmd/tilelistgen

pick_port WMS_PORT
pick_port HTTP_PORT
pick_port ADMIN_PORT
"$TMP/fakewms" -addr "127.0.0.1:$WMS_PORT" -delay 1ms >"$TMP/fakewms.log" 2>&1 &
FAKE_PID=$!
HASH=$("$TMP/caddy" hash-password --plaintext bench 2>/dev/null)
cat >"$TMP/Caddyfile" <<EOF
{
	admin 127.0.0.1:$ADMIN_PORT
	http_port $HTTP_PORT
	auto_https off
	log {
		output file $TMP/caddy.log
		level WARN
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
			max_tiles_per_task 2000000000
		}
	}
	handle {
		tile_cache {
			upstream http://127.0.0.1:$WMS_PORT/wms
			storage $TMP/store
			upstream_concurrency 4
			layer bench:list {
				gridsets EPSG:900913
			}
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
REST=http://127.0.0.1:$HTTP_PORT/geowebcache/rest
# rss FIELD: Caddy's VmRSS, VmHWM or RssAnon in MB. RssAnon is the
# memory Caddy's code holds; VmRSS adds the mapped pages of Badger's files
# (page cache the kernel takes back), which grow with what is stored.
rss() { awk -v k="$1:" '$1 == k { print int($2 / 1024) }' "/proc/$CADDY_PID/status"; }
# sample_anon FILE: RssAnon every 0.1 s into FILE until killed.
sample_anon() { while :; do rss RssAnon >>"$1"; sleep 0.1; done; }
kill_task() { curl -fs -u admin:bench -X DELETE "$1" >/dev/null || true; }
wait_done() { # wait_done URL: until DONE or ABORTED
	local s
	for _ in $(seq 3000); do
		s=$(curl -fs -u admin:bench "$1" | jq -r .state)
		[[ $s == DONE || $s == ABORTED ]] && { echo "$s"; return; }
		sleep 0.1
	done
	die "task $1 did not finish"
}

out "bench/areas.sh on $(nproc) cores, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
out ""
out "1. tile lists of $LINES lines, accepted as a truncate task"
out "   list        lines/s    POST s   distinct tiles   RssAnon before / peak   VmHWM after"
for kind in realistic random; do
	"$TMP/tilelistgen" -kind "$kind" -n "$LINES" >"$TMP/$kind.list"
	before=$(rss RssAnon)
	: >"$TMP/anon"
	sample_anon "$TMP/anon" &
	SAMPLER=$!
	read -r code took loc < <(curl -s -o "$TMP/post.out" -u admin:bench --data-binary "@$TMP/$kind.list" \
		-H 'Content-Type: text/plain' -w '%{http_code} %{time_total} %header{location}\n' \
		"$REST/seed/bench:list/tiles?type=truncate&gridSetId=EPSG:900913")
	kill "$SAMPLER"
	wait "$SAMPLER" 2>/dev/null || true
	[[ $code == 200 ]] || die "POST of the $kind list: $code $(cat "$TMP/post.out")"
	tiles=$(curl -fs -u admin:bench "$loc" | jq .listTiles)
	kill_task "$loc"
	wait_done "$loc" >/dev/null
	peak=$(sort -n "$TMP/anon" | tail -1)
	out "$(printf '   %-10s %9.0f %8.2f %16s %10s / %4s MB %8s MB' "$kind" "$(echo "$LINES / $took" | bc -l)" "$took" "$tiles" "$before" "$peak" "$(rss VmHWM)")"
	rm -f "$TMP/$kind.list"
done

out ""
out "2. GetMaps of a $SEED_LINES-line realistic list, seeded (4×4 metatiles)"
"$TMP/tilelistgen" -kind realistic -n "$SEED_LINES" -seed 7 >"$TMP/seed.list"
# Distinct metatiles, counted here: native rows are 2^z-1-y (XYZ rows
# from the top), metatiles of 4×4 from the origin.
want=$(awk -F/ '{ z=$1; x=$2; y=2^z-1-$3; print z "/" int(x/4) "/" int(y/4) }' "$TMP/seed.list" | sort -u | wc -l)
curl -fs "http://127.0.0.1:$WMS_PORT/control?reset=1" >/dev/null
read -r code took loc < <(curl -s -o "$TMP/post.out" -u admin:bench --data-binary "@$TMP/seed.list" \
	-w '%{http_code} %{time_total} %header{location}\n' \
	"$REST/seed/bench:list/tiles?type=seed&gridSetId=EPSG:900913&threadCount=2")
[[ $code == 200 ]] || die "POST of the seed list: $code $(cat "$TMP/post.out")"
start=$(date +%s.%N)
state=$(wait_done "$loc")
secs=$(echo "$(date +%s.%N) - $start" | bc -l)
got=$(curl -fs "http://127.0.0.1:$WMS_PORT/stats" | jq .getmap)
info=$(curl -fs -u admin:bench "$loc")
out "$(printf '   %s: %s tiles in %.1f s; GetMaps %s, distinct metatiles of the list (sort -u) %s' "$state" \
	"$(jq .processed <<<"$info")" "$secs" "$got" "$want")"
[[ $got == "$want" ]] || out "   MISMATCH: the upstream saw $got GetMaps for $want metatiles"

out ""
out "3. a world polygon with holes, EPSG:4326 levels 0..14"
POLY='{"type":"Polygon","coordinates":[[[-180,-90],[180,-90],[180,90],[-180,90],[-180,-90]],[[-120,-40],[-60,-40],[-60,30],[-120,30],[-120,-40]],[[10,-20],[40,-20],[40,10],[10,-20]]]}'
curl -fs "http://127.0.0.1:$WMS_PORT/control?reset=1" >/dev/null
read -r code took loc < <(curl -s -o "$TMP/post.out" -u admin:bench -H 'Content-Type: application/json' \
	-d '{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":14,"type":"seed","threadCount":2,"geometry":'"$POLY"'}}' \
	-w '%{http_code} %{time_total} %header{location}\n' "$REST/seed/bench:world.json")
[[ $code == 200 ]] || die "polygon seed: $code $(cat "$TMP/post.out")"
total=$(curl -fs -u admin:bench "$loc" | jq .total)
out "$(printf '   counted and accepted in %.3f s: %s tiles' "$took" "$total")"
samples=() files=()
for _ in $(seq "$SEED_SECONDS"); do
	sleep 1
	samples+=("$(rss RssAnon)")
	files+=("$(rss RssFile)")
done
done_tiles=$(curl -fs -u admin:bench "$loc" | jq .processed)
kill_task "$loc"
sorted=$(printf '%s\n' "${samples[@]}" | sort -n)
out "   seeding for ${SEED_SECONDS} s: $done_tiles tiles, $(curl -fs "http://127.0.0.1:$WMS_PORT/stats" | jq .getmap) GetMaps;" \
	"RssAnon each second (MB): ${samples[*]} (min $(head -1 <<<"$sorted"), max $(tail -1 <<<"$sorted"));" \
	"RssFile (Badger's mapped files) from ${files[0]} to ${files[-1]} MB"
log "report: $REPORT"
