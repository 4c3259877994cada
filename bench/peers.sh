#!/usr/bin/env bash
# Usage: bench/peers.sh
#
# Seeding against the peers, in one run on one machine: caddy-tilecache
# (tile_cache + tile_cache_admin, seeded through the REST interface),
# MapCache (mapcache_seed, Debian mapcache-tools) and MapProxy
# (mapproxy-seed, Debian mapproxy), and the upstream alone (the very same
# metatile GetMaps replayed straight at MapServer by bench/replay).
#
# The same work for all: the project's MapServer (upstream/start.sh), the
# same layer, GeoWebCache's EPSG:4326 grid (level 0 = 2x1 tiles of 256 px,
# 0.703125 deg/px; MapCache and MapProxy get it as an explicit grid with
# the same resolutions, origin bottom-left), levels 0..MAXZ (2,730 tiles,
# 172 metatiles for MAXZ 5), metatiles of 4x4 with no buffer, opaque PNG
# (TRANSPARENT=FALSE upstream; MapProxy told not to palettize, so that every
# cache is lossless), 2 threads/workers each, from an empty cache each
# time. The tile counts of the three caches are checked equal.
#
# Three layers: test:polygons (the project's vector data), test:relief (a
# shaded relief raster: tens of thousands of colours per metatile) and
# test:mosaic (50,000 overlapping antialiased polygons, a colour each:
# thousands of colours per tile, no palette applies; the kind of map the
# project was not tuned on). For each, the colours per tile and the share
# of flat (single-colour) tiles of what we stored are printed.
# ROUNDS rounds, interleaved: replay, ours, mapcache, mapproxy, replay, ...
#
# Printed per run: wall seconds, x the replay of the same round, CPU
# seconds of the seeding process and of MapServer; per tool, the mean
# stored tile size at level 4 and over all levels, and the PNG colour types
# stored. Then, for caddy-tilecache and MapCache (its FastCGI front end,
# Debian mapcache-cgi, behind lighttpd), the latency of cache hits one at a
# time (bench/hitlat, a new connection each) idle and while a 2-thread seed
# of the other layer runs beside it.
#
# The other tile formats (8-bit PNG, mixed JPEG/PNG, WebP) against
# MapCache's quantized PNG and MIXED, in this same setting plus a
# transparent layer: bench/formats.sh, a run of its own so that this one
# does not get longer.
#
# Environment: ROUNDS [3] MAXZ [5] LAYERS ["test:polygons test:relief test:mosaic"]
#   HITS [300] hits per latency measurement (0: skip that part)
#   UPFORMAT [image/png] the FORMAT every tool asks MapServer for a layer's
#     metatiles in (tile_cache upstream_format, MapCache's <FORMAT> param,
#     MapProxy's request_format; the tiles stay PNG): one for every layer,
#     or per layer as "LAYER=FORMAT|LAYER=FORMAT" (others: image/png). The
#     project's MapServer also has "image/png; mode=fast" (zlib level 1)
#     and "image/png; mode=raw" (uncompressed), e.g.
#     UPFORMAT="test:polygons=image/png; mode=fast|test:relief=image/png; mode=raw"
#   CADDY [/tmp/caddy-peers, built with ./xcaddy.sh if missing; BUILD=1 rebuilds]
#   DEADLINE [1200] seconds; the script stops itself after
#   KEEP=1 keeps the temp dir
# Report: bench/results/peers-<date>-<time>.txt. Everything started here is
# stopped on exit. About 9 minutes on an idle 2-core machine (three layers).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
MAXZ=${MAXZ:-5}
LAYERS=${LAYERS:-"test:polygons test:relief test:mosaic"}
HITS=${HITS:-300}
UPFORMAT=${UPFORMAT:-image/png}
DEADLINE=${DEADLINE:-1200}
CADDY_BIN=${CADDY:-/tmp/caddy-peers}
WORKERS=2

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
T_START=$(date +%s)
TMP=$(mktemp -d /tmp/peers.XXXXXX)
UPDIR=$TMP/up
CADDY_PID="" MCF_STARTED=0 UPSTREAM_STARTED=0 WATCHDOG_PID=""

log() { printf '%s peers: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
# stop_pid (and out) come from frame.sh; this script sets up its own frame.
. "$HERE/frame.sh"
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	pkill -f "mapcache_seed -c $TMP" 2>/dev/null || true
	pkill -f "mapproxy-seed -f $TMP" 2>/dev/null || true
	stop_pid "$CADDY_PID"
	if ((MCF_STARTED)); then
		stop_pid "$(cat "$TMP/mcf/lighttpd.pid" 2>/dev/null)"
		pkill -f "$TMP/mcf/mapcache" 2>/dev/null || true
	fi
	((UPSTREAM_STARTED)) && { "$ROOT/upstream/stop.sh" "$UPDIR" >/dev/null 2>&1 || true; }
	if [[ ${KEEP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
	log "total run time $(($(date +%s) - T_START)) s"
	exit "$rc"
}
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
REPORT=$HERE/results/peers-$(date +%Y%m%d-%H%M%S).txt
: >"$REPORT"
out() { printf '%s\n' "$*" | tee -a "$REPORT"; }

# ---------------------------------------------------------------- tools
need=()
command -v mapcache_seed >/dev/null || need+=(mapcache-tools)
[[ -x /usr/lib/cgi-bin/mapcache ]] || need+=(mapcache-cgi)
command -v mapproxy-seed >/dev/null || need+=(mapproxy)
[[ -x /usr/bin/time ]] || need+=(time)
command -v jq >/dev/null || need+=(jq)
if ((${#need[@]})); then
	log "installing ${need[*]} (Debian)"
	# Package scripts must not start system services on this machine.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	{ apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }; } ||
		{ rm -f /usr/sbin/policy-rc.d; die "apt-get install ${need[*]} failed"; }
	rm -f /usr/sbin/policy-rc.d
fi
if [[ ${BUILD:-0} == 1 || ! -x $CADDY_BIN ]]; then
	log "building $CADDY_BIN (./xcaddy.sh)"
	./xcaddy.sh "$CADDY_BIN" >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; die "./xcaddy.sh failed"; }
fi
cp "$CADDY_BIN" "$TMP/caddy"
for t in replay hitlat pngstat; do go build -o "$TMP/$t" "./bench/$t" || die "building bench/$t"; done
"$ROOT/upstream/install.sh" >/dev/null || die "upstream/install.sh failed"

pick_port UP_PORT
pick_port PORT
pick_port ADMIN_PORT
pick_port MCF_PORT

ticks_of() { # user+system ticks of the processes (gone ones count 0)
	local t=0 p f
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] || continue
		read -ra f <"/proc/$p/stat" || continue
		t=$((t + f[13] + f[14]))
	done
	echo "$t"
}
HZ=$(getconf CLK_TCK)
up_pids() { cat "$UPDIR/lighttpd.pid" "$UPDIR/mapserv.pids" 2>/dev/null | tr '\n' ' '; }
secs() { awk -v t="$1" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }'; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# ---------------------------------------------------------------- the upstream and the caches
"$ROOT/upstream/start.sh" "$UPDIR" "$UP_PORT" >"$TMP/upstream.log" 2>&1 || { cat "$TMP/upstream.log" >&2; die "upstream/start.sh failed"; }
UPSTREAM_STARTED=1
UPSTREAM=http://127.0.0.1:$UP_PORT/wms
RES=$(awk -v z="$MAXZ" 'BEGIN { r = 0.703125; for (i = 0; i <= z + 1; i++) { printf "%s%.12g", (i ? " " : ""), r; r /= 2 } }')
TILES=0 METAS=0
for z in $(seq 0 "$MAXZ"); do
	TILES=$((TILES + 2 ** (z + 1) * 2 ** z))
	METAS=$((METAS + ((2 ** (z + 1) + 3) / 4) * ((2 ** z + 3) / 4)))
done
# name: test:polygons -> polygons, a name every tool accepts in paths
short() { printf '%s' "${1#*:}"; }

upformat() { # upformat LAYER: the FORMAT its metatiles are asked for in
	local e
	if [[ $UPFORMAT != *=* ]]; then
		printf '%s' "$UPFORMAT"
		return
	fi
	IFS='|' read -ra e <<<"$UPFORMAT"
	for e in "${e[@]}"; do
		[[ ${e%%=*} == "$1" ]] && { printf '%s' "${e#*=}"; return; }
	done
	printf 'image/png'
}
LAYER_BLOCKS=""
for L in $LAYERS; do
	LAYER_BLOCKS+="
		layer $L {
			upstream_format \"$(upformat "$L")\"
			gridsets EPSG:4326
			metatile 4 4
			transparent false
			formats image/png
		}"
done
cat >"$TMP/Caddyfile" <<EOF
{
	admin 127.0.0.1:$ADMIN_PORT
	auto_https off
	grace_period 1ns
	log {
		level INFO
	}
}
http://127.0.0.1:$PORT {
	handle_path /gwc/* {
		tile_cache_admin {
			workers $WORKERS
		}
	}
	handle {
		tile_cache {
			upstream $UPSTREAM
			storage $TMP/tiles
			timeout 120s
			$LAYER_BLOCKS
		}
	}
}
EOF
"$TMP/caddy" run --config "$TMP/Caddyfile" --adapter caddyfile </dev/null >"$TMP/caddy.log" 2>&1 &
CADDY_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/gwc/rest/seed.json" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$PORT/gwc/rest/seed.json" || die "Caddy did not come up: $(tail -n 5 "$TMP/caddy.log")"

mapcache_xml() { # mapcache_xml LAYER DIR
	cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<mapcache>
  <grid name="gwc4326">
    <srs>EPSG:4326</srs>
    <units>dd</units>
    <size>256 256</size>
    <extent>-180 -90 180 90</extent>
    <origin>bottom-left</origin>
    <resolutions>$RES</resolutions>
  </grid>
  <format name="PNGopaque" type="PNG"/>
  <cache name="disk" type="disk"><base>$2/cache</base></cache>
  <source name="src" type="wms">
    <getmap><params><LAYERS>$1</LAYERS><FORMAT>$(upformat "$1")</FORMAT><TRANSPARENT>FALSE</TRANSPARENT></params></getmap>
    <http><url>$UPSTREAM</url></http>
  </source>
  <tileset name="$(short "$1")">
    <source>src</source><cache>disk</cache><grid>gwc4326</grid><format>PNGopaque</format>
    <metatile>4 4</metatile><metabuffer>0</metabuffer>
  </tileset>
  <service type="wmts" enabled="true"/>
  <log_level>warn</log_level>
  <lock_dir>$2/locks</lock_dir>
</mapcache>
EOF
}
mapproxy_yaml() { # mapproxy_yaml LAYER DIR
	cat <<EOF
globals:
  image:
    # Lossless like the others: MapProxy palettizes PNGs by default
    # (a quantization to 256 colours).
    paletted: false
  cache:
    base_dir: $2/cache
    lock_dir: $2/locks
services:
  tms:
    use_grid_names: true
    origin: sw
layers:
  - name: $(short "$1")
    title: $(short "$1")
    sources: [c]
caches:
  c:
    grids: [gwc4326]
    sources: [s]
    format: image/png
    request_format: '$(upformat "$1")'
    image: {mode: RGB, transparent: false, paletted: false}
    meta_size: [4, 4]
    meta_buffer: 0
    cache: {type: file, directory_layout: tms}
sources:
  s:
    type: wms
    supported_srs: ['EPSG:4326']
    req: {url: $UPSTREAM, layers: '$1', transparent: false}
grids:
  gwc4326:
    srs: 'EPSG:4326'
    bbox: [-180, -90, 180, 90]
    bbox_srs: 'EPSG:4326'
    origin: sw
    tile_size: [256, 256]
    res: [$(tr ' ' ',' <<<"$RES")]
EOF
}

# ---------------------------------------------------------------- one seed of each tool
# Each sets SECS, CPU (the seeder's CPU seconds) and UPCPU (MapServer's).
run_ours() { # run_ours LAYER
	local t0 u0 c0 url hdr st
	# Empty, as the others' caches are (rm -rf): truncateLayer, then wait
	# for the store to reclaim the old tiles, which it does in the
	# background and would otherwise do during the seed (and the hits).
	local n0
	n0=$(grep -c 'truncated layer reclaimed' "$TMP/caddy.log" || true)
	curl -s -o /dev/null -H 'Content-Type: text/xml' -d "<truncateLayer><layerName>$1</layerName></truncateLayer>" \
		"http://127.0.0.1:$PORT/gwc/rest/masstruncate" || die "truncateLayer $1"
	for _ in $(seq 300); do
		(($(grep -c 'truncated layer reclaimed' "$TMP/caddy.log" || true) > n0)) && break
		sleep 0.1
	done
	u0=$(ticks_of $(up_pids)) c0=$(ticks_of "$CADDY_PID") t0=$(now)
	hdr=$(curl -s -D - -o /dev/null -H 'Content-Type: application/json' \
		-d "{\"seedRequest\":{\"gridSetId\":\"EPSG:4326\",\"zoomStart\":0,\"zoomStop\":$MAXZ,\"format\":\"image/png\",\"type\":\"seed\",\"threadCount\":$WORKERS}}" \
		"http://127.0.0.1:$PORT/gwc/rest/seed/$1.json")
	url=$(awk 'tolower($1) == "location:" { sub(/\r$/, "", $2); print $2 }' <<<"$hdr")
	[[ -n $url ]] || die "seed $1: $(head -n1 <<<"$hdr")"
	# Polled twice a second: the time comes from the task itself (below),
	# and a curl and a jq 20 times a second took CPU from the cache hits
	# measured beside this seed (the others' seeds are one process each).
	for _ in $(seq 600); do
		TASK=$(curl -s "$url")
		st=$(jq -r .state <<<"$TASK")
		[[ $st == DONE || $st == ABORTED ]] && break
		sleep 0.5
	done
	[[ $st == DONE && $(jq -r .processed <<<"$TASK") == "$TILES" && $(jq -r .failedTiles <<<"$TASK") == 0 ]] ||
		die "our seed of $1: $TASK"
	# From the POST to the task's own end (same clock): the polls above
	# are the script's, not the seed's; the others' time ends when their
	# process exits.
	SECS=$(elapsed "$t0" "$(date -d "$(jq -r .finished <<<"$TASK")" +%s.%N)")
	CPU=$(secs $(($(ticks_of "$CADDY_PID") - c0))) UPCPU=$(secs $(($(ticks_of $(up_pids)) - u0)))
}
timed() { # timed CMD...: runs it, sets SECS, CPU, UPCPU
	local t0 u0
	u0=$(ticks_of $(up_pids)) t0=$(now)
	/usr/bin/time -f '%U %S' -o "$TMP/time.txt" "$@" >"$TMP/tool.log" 2>&1 || { tail -n 20 "$TMP/tool.log" >&2; die "$1 failed"; }
	SECS=$(elapsed "$t0" "$(now)")
	CPU=$(awk '{ printf "%.2f", $1 + $2 }' "$TMP/time.txt") UPCPU=$(secs $(($(ticks_of $(up_pids)) - u0)))
}
run_mapcache() { # run_mapcache LAYER
	local d=$TMP/mc-$(short "$1")
	rm -rf "$d/cache" "$d/locks"
	mkdir -p "$d"
	mapcache_xml "$1" "$d" >"$d/mapcache.xml"
	timed mapcache_seed -c "$d/mapcache.xml" -t "$(short "$1")" -g gwc4326 -z "0,$MAXZ" -n "$WORKERS" -q
}
run_mapproxy() { # run_mapproxy LAYER
	local d=$TMP/mp-$(short "$1")
	rm -rf "$d/cache" "$d/locks"
	mkdir -p "$d"
	mapproxy_yaml "$1" "$d" >"$d/mapproxy.yaml"
	printf 'seeds:\n  s:\n    caches: [c]\n    grids: [gwc4326]\n    levels: {from: 0, to: %d}\n' "$MAXZ" >"$d/seed.yaml"
	timed mapproxy-seed -f "$d/mapproxy.yaml" -s "$d/seed.yaml" -c "$WORKERS" --seed s -q
}
run_replay() { # run_replay LAYER: the metatile GetMaps our seed sent (list made in round 1)
	local t0 u0 line
	u0=$(ticks_of $(up_pids)) t0=$(now)
	line=$("$TMP/replay" -urls "$TMP/metas-$(short "$1").txt" -c "$WORKERS") || die "replay: $line"
	SECS=$(sed -E 's/.*wall_s=([0-9.]+).*/\1/' <<<"$line") CPU=0 UPCPU=$(secs $(($(ticks_of $(up_pids)) - u0)))
}

# The metatile GetMaps of our seed, from lighttpd's access log: the
# replay sends exactly what the caches ask for.
metatile_list() { # metatile_list LAYER
	local l0 n
	l0=$(wc -l <"$UPDIR/lighttpd-access.log")
	run_ours "$1"
	for _ in $(seq 100); do
		tail -n +"$((l0 + 1))" "$UPDIR/lighttpd-access.log" | { grep -v '"tilecache-bench-replay"$' || true; } |
			awk -v base="http://127.0.0.1:$UP_PORT" '{ for (i = 1; i <= NF; i++) if ($i == "\"GET") { print base $(i + 1); break } }' |
			{ grep 'REQUEST=GetMap' || true; } >"$TMP/metas-$(short "$1").txt"
		n=$(wc -l <"$TMP/metas-$(short "$1").txt")
		((n == METAS)) && break
		sleep 0.1
	done
	((n == METAS)) || die "the access log holds $n GetMaps of our seed of $1, expected $METAS"
}

out "== Seeding against the peers: bench/peers.sh =="
out "$(date -u +%FT%TZ), $(nproc) CPUs, $(uname -r); Caddy $("$TMP/caddy" version | cut -d' ' -f1); MapCache $(dpkg-query -W -f '${Version}' mapcache-tools), MapProxy $(dpkg-query -W -f '${Version}' mapproxy)"
out "binary $CADDY_BIN (built $(date -u -r "$CADDY_BIN" +%FT%TZ)); HEAD $(git rev-parse --short HEAD)"
out "EPSG:4326 levels 0..$MAXZ ($TILES tiles), metatiles 4x4, no buffer, opaque PNG, $WORKERS threads each, empty caches"
out ""
for L in $LAYERS; do
	s=$(short "$L")
	metatile_list "$L"
	out "-- $L: $(wc -l <"$TMP/metas-$s.txt") metatiles; a metatile has $("$TMP/pngstat" -colors "$(mkdir -p "$TMP/probe-$s" && "$TMP/replay" -urls <(head -n 1 "$TMP/metas-$s.txt") -save "$TMP/probe-$s" >/dev/null && echo "$TMP/probe-$s/1.png")" | sed -E 's/.*colors=([0-9]+).*/\1/') colours"
	out "every tool asks MapServer for these metatiles as FORMAT=$(upformat "$L")"
	out "$(printf '%-6s %-9s %8s %9s %9s %9s' round tool secs x_replay cpu_s mapsrv_s)"
	for round in $(seq "$ROUNDS"); do
		run_replay "$L"
		rs=$SECS
		out "$(printf '%-6s %-9s %8.2f %9s %9s %9s' "$round" replay "$SECS" 1.00 - "$UPCPU")"
		for tool in ours mapcache mapproxy; do
			"run_$tool" "$L"
			out "$(printf '%-6s %-9s %8.2f %9.2f %9s %9s' "$round" "$tool" "$SECS" "$(awk -v a="$SECS" -v b="$rs" 'BEGIN { print a / b }')" "$CPU" "$UPCPU")"
			printf '%s %s\n' "$tool" "$SECS" >>"$TMP/times-$s.txt"
		done
		printf 'replay %s\n' "$rs" >>"$TMP/times-$s.txt"
	done
	# medians and stored tiles (the caches of the last round)
	for tool in replay ours mapcache mapproxy; do
		m=$(awk -v t="$tool" '$1 == t { print $2 }' "$TMP/times-$s.txt" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }')
		printf -v "MED_$tool" '%s' "$m"
	done
	# our tiles, fetched back through the cache (all must be HITs)
	awk -v base="http://127.0.0.1:$PORT/wms" -v layer="$L" -v maxz="$MAXZ" 'BEGIN {
		for (z = 0; z <= maxz; z++) { s = 180 / 2 ^ z
			for (x = 0; x < 2 * 2 ^ z; x++) for (y = 0; y < 2 ^ z; y++)
				printf "%s?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=%s&STYLES=&SRS=EPSG:4326&WIDTH=256&HEIGHT=256&FORMAT=image/png&BBOX=%.10g,%.10g,%.10g,%.10g\n", \
					base, layer, -180 + x * s, -90 + y * s, -180 + (x + 1) * s, -90 + (y + 1) * s > ("'"$TMP/ours-$s"'-z" z ".txt") } }'
	for z in $(seq 0 "$MAXZ"); do
		"$TMP/replay" -urls "$TMP/ours-$s-z$z.txt" -c 2 -header geowebcache-cache-result=HIT -save "$TMP/ours-$s/$z" >/dev/null ||
			die "our tiles at z$z are not all HITs"
	done
	stat_line() { # stat_line TOOL DIR DIR4
		local all z4
		all=$("$TMP/pngstat" "$2") z4=$("$TMP/pngstat" "$3")
		out "$(printf '%-9s %6s %10s %10s  %s' "$1" \
			"$(sed -E 's/.*files=([0-9]+).*/\1/' <<<"$all")" \
			"$(sed -E 's/.*mean_bytes=([0-9.]+).*/\1/' <<<"$all")" \
			"$(sed -E 's/.*mean_bytes=([0-9.]+).*/\1/' <<<"$z4")" \
			"$(sed -E 's/.*types=([^ ]+).*/\1/' <<<"$all")")"
	}
	out ""
	out "median secs: replay $MED_replay, ours $MED_ours ($(awk -v a="$MED_ours" -v b="$MED_replay" 'BEGIN { printf "%.2f", a / b }')x), mapcache $MED_mapcache ($(awk -v a="$MED_mapcache" -v b="$MED_replay" 'BEGIN { printf "%.2f", a / b }')x), mapproxy $MED_mapproxy ($(awk -v a="$MED_mapproxy" -v b="$MED_replay" 'BEGIN { printf "%.2f", a / b }')x); ours/mapcache = $(awk -v a="$MED_ours" -v b="$MED_mapcache" 'BEGIN { printf "%.2f", a / b }') (goal <= 0.7)"
	out "$(printf '%-9s %6s %10s %10s  %s' tool tiles mean_B mean_B_z4 'PNG types')"
	stat_line ours "$TMP/ours-$s" "$TMP/ours-$s/4"
	colors=$("$TMP/pngstat" -colors "$TMP/ours-$s")
	stat_line mapcache "$TMP/mc-$s/cache" "$(find "$TMP/mc-$s/cache" -mindepth 3 -maxdepth 3 -type d -name 04)"
	stat_line mapproxy "$TMP/mp-$s/cache" "$(find "$TMP/mp-$s/cache" -mindepth 2 -maxdepth 2 -type d -name 4)"
	out "$L tiles: colours per tile mean $(sed -E 's/.*colors_mean=([0-9.]+).*/\1/' <<<"$colors"), max $(sed -E 's/.*colors_max=([0-9]+).*/\1/' <<<"$colors"); over 256 colours $(sed -E 's/.*over256=([0-9]+).*/\1/' <<<"$colors"), flat $(sed -E 's/.*flat=([0-9]+).*/\1/' <<<"$colors") of $(sed -E 's/.*files=([0-9]+).*/\1/' <<<"$colors")"
	out ""
done

# ---------------------------------------------------------------- hits while seeding
set -- $LAYERS
if ((HITS > 0)) && (($# < 2)); then
	# Each tool's seed starts from an empty cache, so hits on the layer
	# being seeded would be misses (ours) or errors (MapCache's 500s).
	out "-- cache hits while seeding: skipped, they need two layers (hits on the first, a seed of the second)"
elif ((HITS > 0)); then
	HL=$1 SL=$2 # hits on the first layer, seeding the second
	hs=$(short "$HL")
	# MapCache's own front end (FastCGI behind lighttpd) on the first layer's cache.
	mkdir -p "$TMP/mcf/htdocs"
	ln -sf /usr/lib/cgi-bin/mapcache "$TMP/mcf/mapcache"
	cat >"$TMP/mcf/lighttpd.conf" <<EOF
server.modules = ( "mod_fastcgi" )
server.bind = "127.0.0.1"
server.port = $MCF_PORT
server.document-root = "$TMP/mcf/htdocs"
server.pid-file = "$TMP/mcf/lighttpd.pid"
server.errorlog = "$TMP/mcf/error.log"
fastcgi.server = ( "/mapcache" => ( "mc" => (
	"bin-path" => "$TMP/mcf/mapcache", "socket" => "$TMP/mcf/mc.sock", "max-procs" => 2, "check-local" => "disable",
	"bin-environment" => ( "MAPCACHE_CONFIG_FILE" => "$TMP/mc-$hs/mapcache.xml" ) ) ) )
EOF
	lighttpd -f "$TMP/mcf/lighttpd.conf" || die "lighttpd for mapcache failed"
	MCF_STARTED=1
	# level 4 and 5 tiles of the first layer, cached by both in the rounds above
	cat "$TMP/ours-$hs-z4.txt" "$TMP/ours-$hs-z5.txt" >"$TMP/hit-ours.txt"
	awk -v base="http://127.0.0.1:$MCF_PORT/mapcache/wmts/1.0.0/$hs/default/gwc4326" -v maxz="$MAXZ" 'BEGIN {
		for (z = 4; z <= 5 && z <= maxz; z++) for (x = 0; x < 2 * 2 ^ z; x++) for (r = 0; r < 2 ^ z; r++)
			printf "%s/%d/%d/%d.png\n", base, z, r, x }' >"$TMP/hit-mc.txt"
	"$TMP/hitlat" -urls "$TMP/hit-mc.txt" -n 5 >/dev/null || die "MapCache's front end does not answer: $(tail -n 3 "$TMP/mcf/error.log")"
	hit() { "$TMP/hitlat" -urls "$1" -n "$HITS" -interval 10ms -max 60s; }
	pct() { sed -E 's/.*p50_ms=([0-9.]+).*p99_ms=([0-9.]+).*max_ms=([0-9.]+).*/p50 \1  p99 \2  max \3/' <<<"$1"; }
	out "-- cache hits one at a time (new connection each; $HITS hits of $HL levels 4-5), idle and while a $WORKERS-thread seed of $SL runs"
	out "ours     idle:    $(pct "$(hit "$TMP/hit-ours.txt")") ms"
	run_ours "$SL" &
	sleep 0.5
	out "ours     seeding: $(pct "$(hit "$TMP/hit-ours.txt")") ms"
	wait $! || die "our seed during the hit measurement"
	out "mapcache idle:    $(pct "$(hit "$TMP/hit-mc.txt")") ms"
	run_mapcache "$SL" &
	sleep 0.5
	out "mapcache seeding: $(pct "$(hit "$TMP/hit-mc.txt")") ms"
	wait $! || die "mapcache seed during the hit measurement"
fi
out ""
out "report: $REPORT"
