#!/usr/bin/env bash
# Usage: bench/offline.sh
#
# The offline packages' rates, as go test benchmarks (module/offline):
#
#   mbtiles, geopackage   BenchmarkExport / BenchmarkExportMixed /
#                         BenchmarkExportRendered: tiles written into a
#                         file (5 KB tiles; a rendered map's mix of 100 B
#                         and 5-30 KB; the sizes of tiles the MapServer
#                         upstream rendered), with the file's size over
#                         the tiles' bytes; BenchmarkImport: tiles read
#                         back with every check of an import
#   importer              BenchmarkImportIntoBadger(/Mixed): a whole import
#                         from an MBTiles file into a fresh Badger that
#                         counts usage (both passes: check, then store),
#                         the usage checked exact after each round
#
# The rendered tiles: the project's MapServer (upstream/start.sh, on a free
# loopback port, stopped at the end) draws every 256x256 tile of EPSG:4326
# levels 0..RENDERED_MAXZ of test:mosaic, test:polygons, test:relief and
# test:roads (transparent), as PNG, into a temporary directory
# (OFFLINE_BENCH_RENDERED for the benchmarks).
#
# Each reports tiles/s (wall clock), cpu-µs/tile (the process's own CPU
# time: what other load on the machine stretches least) and peak RSS.
# Environment: TILES [200000] tiles a round, COUNT [3] rounds of each,
# RENDERED_MAXZ [3] (2+8+32+128 = 170 tiles a layer), BENCH [.] the
# benchmarks to run (a go test -bench pattern), RENDERED_KEEP=DIR keeps a
# copy of the rendered tiles, RENDERED_DIR=DIR uses them instead of
# rendering again.
# The report also goes to bench/results/offline-<date>-<time>.txt.
set -euo pipefail
TILES=${TILES:-200000}
COUNT=${COUNT:-3}
RENDERED_MAXZ=${RENDERED_MAXZ:-3}
BENCH=${BENCH:-.}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
TMP=$(mktemp -d /tmp/offline-bench.XXXXXX)
UPDIR=$TMP/up
UPSTREAM_STARTED=0
log() { printf '%s offline: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	((UPSTREAM_STARTED)) && { "$ROOT/upstream/stop.sh" "$UPDIR" >/dev/null 2>&1 || true; }
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PICKED=" "
pick_port() { # as bench/frame.sh's, without its report and watchdog
	local p _
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	die "no free port found"
}

# ------------------------------------------------ the rendered tiles
if [[ -n ${RENDERED_DIR:-} ]]; then
	RENDERED=$RENDERED_DIR # kept from an earlier fetch (RENDERED_KEEP)
else
"$ROOT/upstream/install.sh" mapserver >/dev/null || die "upstream/install.sh failed"
pick_port UP_PORT
"$ROOT/upstream/start.sh" "$UPDIR" "$UP_PORT" >"$TMP/upstream.log" 2>&1 || { cat "$TMP/upstream.log" >&2; die "upstream/start.sh failed"; }
UPSTREAM_STARTED=1
RENDERED=$TMP/rendered
for layer in test:mosaic test:polygons test:relief test:roads; do
	transparent=false
	[[ $layer == test:roads ]] && transparent=true
	for ((z = 0; z <= RENDERED_MAXZ; z++)); do
		n=$((1 << z))
		for ((x = 0; x < 2 * n; x++)); do
			for ((y = 0; y < n; y++)); do
				printf '%s %s %s %s %s\n' "$layer" "$z" "$x" "$y" "$transparent"
			done
		done
	done
done | xargs -P 2 -n 5 sh -c '
	layer=$1 z=$2 x=$3 y=$4 tr=$5
	d=$(awk -v z="$z" -v x="$x" -v y="$y" "BEGIN { s = 180 / 2 ^ z; printf \"%.12g,%.12g,%.12g,%.12g\", -180 + x * s, -90 + y * s, -180 + (x + 1) * s, -90 + (y + 1) * s }")
	out="$0/${layer#test:}/$z/$x/$y.png"
	mkdir -p "${out%/*}"
	curl -sf -o "$out" "http://127.0.0.1:'"$UP_PORT"'/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=$layer&STYLES=&SRS=EPSG:4326&BBOX=$d&WIDTH=256&HEIGHT=256&FORMAT=image/png&TRANSPARENT=$tr" &&
		[ "$(head -c 4 "$out" | od -An -tx1 | tr -d " ")" = 89504e47 ] || { echo "GetMap of $layer $z/$x/$y failed" >&2; exit 255; }
' "$RENDERED" || die "fetching the rendered tiles failed"
"$ROOT/upstream/stop.sh" "$UPDIR" >/dev/null 2>&1 || true
UPSTREAM_STARTED=0
if [[ -n ${RENDERED_KEEP:-} ]]; then
	rm -rf "$RENDERED_KEEP" && cp -r "$RENDERED" "$RENDERED_KEEP" && log "rendered tiles kept in $RENDERED_KEEP"
fi
fi
RENDERED_SUMMARY=$(find "$RENDERED" -name '*.png' -printf '%s\n' | sort -n |
	awk '{ a[NR] = $1; s += $1 } END { printf "%d rendered tiles, mean %.0f B, median %d B, min %d B, max %d B", NR, s / NR, a[int((NR + 1) / 2)], a[1], a[NR] }')

mkdir -p bench/results
OUT=bench/results/offline-$(date +%Y%m%d-%H%M%S).txt
{
	echo "# bench/offline.sh: TILES=$TILES COUNT=$COUNT, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD)"
	echo "# $RENDERED_SUMMARY (EPSG:4326 levels 0..$RENDERED_MAXZ of test:mosaic, test:polygons, test:relief, test:roads)"
	OFFLINE_BENCH_RENDERED=$RENDERED OFFLINE_BENCH_TILES=$TILES go test -run XXX -bench "$BENCH" -benchtime 1x -count "$COUNT" -timeout 60m \
		./module/offline/mbtiles/ ./module/offline/geopackage/ ./module/offline/importer/ 2>&1 |
		grep -E '^(Benchmark|ok|FAIL|goos|cpu)'
	echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT"
