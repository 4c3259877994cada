#!/usr/bin/env bash
# Usage: bench/upstreams.sh [ROUNDS]
#
# The render cost of the two test upstreams, side by side on this machine:
# starts MapServer (upstream/start.sh) and QGIS Server (upstream/qgis/
# start.sh) on free loopback ports, warms each, then asks each for the same
# requests ROUNDS times (default 7), alternating between the upstreams so
# that both see the same machine, and reports the median of curl's
# time_total per request and the ratio QGIS/MapServer. The figures in
# docs/upstreams.md ("The test upstreams") come from here. Stops both when
# it ends. Needs upstream/install.sh (root, apt) to have run.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROUNDS=${1:-7}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS]" >&2; exit 2; }
WORK=$(mktemp -d /tmp/bench-upstreams.XXXXXX)
cleanup() {
	bash "$REPO/upstream/stop.sh" "$WORK/mapserver" >/dev/null 2>&1 || true
	bash "$REPO/upstream/stop.sh" "$WORK/qgis" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MS_PORT=$(free_port)
bash "$REPO/upstream/start.sh" "$WORK/mapserver" "$MS_PORT" >/dev/null
QG_PORT=$(free_port)
bash "$REPO/upstream/qgis/start.sh" "$WORK/qgis" "$QG_PORT" >/dev/null

ALL="test:polygons,test:roads,test:places"
Q="SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&STYLES=&FORMAT=image/png&TRANSPARENT=TRUE"
declare -A REQ=(
	["1024x1024 metatile, EPSG:4326, 45 deg wide"]="LAYERS=$ALL&SRS=EPSG:4326&BBOX=0,0,45,45&WIDTH=1024&HEIGHT=1024"
	["1024x1024 metatile, EPSG:3857, level 2"]="LAYERS=$ALL&SRS=EPSG:3857&BBOX=0,0,10018754.17,10018754.17&WIDTH=1024&HEIGHT=1024"
	["256x256 tile, EPSG:4326"]="LAYERS=$ALL&SRS=EPSG:4326&BBOX=0,0,11.25,11.25&WIDTH=256&HEIGHT=256"
	["1024x1024 test:polygons only, EPSG:4326"]="LAYERS=test:polygons&SRS=EPSG:4326&BBOX=0,0,45,45&WIDTH=1024&HEIGHT=1024"
)

# time_of PORT QUERY: seconds curl took for one answer, which must be a PNG.
time_of() {
	local out
	out=$(curl -s --max-time 60 -o /dev/null -w '%{http_code} %{content_type} %{time_total}' "http://127.0.0.1:$1/wms?$Q&$2")
	[[ $out == "200 image/png"* ]] || { echo "bench/upstreams.sh: not a PNG from port $1: $out" >&2; exit 1; }
	echo "${out##* }"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '%-44s %12s %12s %7s\n' "request (median of $ROUNDS)" "MapServer" "QGIS Server" "ratio"
for name in "${!REQ[@]}"; do
	q=${REQ[$name]}
	time_of "$MS_PORT" "$q" >/dev/null # warm: data read, fonts loaded
	time_of "$QG_PORT" "$q" >/dev/null
	ms=() qg=()
	for ((i = 0; i < ROUNDS; i++)); do
		ms+=("$(time_of "$MS_PORT" "$q")")
		qg+=("$(time_of "$QG_PORT" "$q")")
	done
	m=$(printf '%s\n' "${ms[@]}" | median)
	g=$(printf '%s\n' "${qg[@]}" | median)
	awk -v n="$name" -v m="$m" -v g="$g" 'BEGIN { printf "%-44s %9.0f ms %9.0f ms %6.2fx\n", n, m*1000, g*1000, g/m }'
done
