#!/usr/bin/env bash
# Usage: bench/offline.sh
#
# The offline packages' rates, as go test benchmarks (module/offline):
#
#   mbtiles, geopackage   BenchmarkExport / BenchmarkExportMixed: tiles
#                         written into a file (5 KB tiles, and a rendered
#                         map's mix of 100 B and 5-30 KB), with the file's
#                         size over the tiles' bytes; BenchmarkImport:
#                         tiles read back with every check of an import
#   importer              BenchmarkImportIntoBadger(/Mixed): a whole import
#                         from an MBTiles file into a fresh Badger that
#                         counts usage (both passes: check, then store),
#                         the usage checked exact after each round
#
# Each reports tiles/s (wall clock), cpu-µs/tile (the process's own CPU
# time: what other load on the machine stretches least) and peak RSS.
# Environment: TILES [200000] tiles a round, COUNT [3] rounds of each.
# The report also goes to bench/results/offline-<date>-<time>.txt.
set -euo pipefail
TILES=${TILES:-200000}
COUNT=${COUNT:-3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE/.."
mkdir -p bench/results
OUT=bench/results/offline-$(date +%Y%m%d-%H%M%S).txt
{
	echo "# bench/offline.sh: TILES=$TILES COUNT=$COUNT, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD)"
	OFFLINE_BENCH_TILES=$TILES go test -run XXX -bench . -benchtime 1x -count "$COUNT" -timeout 60m \
		./module/offline/mbtiles/ ./module/offline/geopackage/ ./module/offline/importer/ 2>&1 |
		grep -E '^(Benchmark|ok|FAIL|goos|cpu)'
	echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT"
