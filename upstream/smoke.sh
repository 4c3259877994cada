#!/usr/bin/env bash
# Usage: upstream/smoke.sh PORT [OUTDIR]
#
# Smoke test of a running upstream WMS (upstream/start.sh DIR PORT) with
# curl: capabilities 1.1.1 and 1.3.0, GetMap in EPSG:4326/3857/900913,
# WMS 1.3.0 lat,lon axis order, the "population" style, the
# StyleNotDefined exception, JPEG, the shaded relief (test:relief: opaque
# and far more than 256 colours; the colours are counted when Go is on the
# PATH), and the render time of a 1024x1024 metatile. Images are kept in OUTDIR (default: a fresh temporary folder)
# for a look. Ends with "N passed, N failed"; exits 1 on any failure.
set -euo pipefail

[[ $# -ge 1 && $# -le 2 && $1 =~ ^[0-9]+$ ]] || { echo "usage: $0 PORT [OUTDIR]" >&2; exit 2; }
PORT=$1
OUT=${2:-$(mktemp -d /tmp/upstream-smoke.XXXXXX)}
mkdir -p "$OUT"
W="http://127.0.0.1:$PORT/wms?SERVICE=WMS"
ALL="test:polygons,test:roads,test:places"
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok   $*"; }
ko() { fail=$((fail + 1)); echo "FAIL $*"; }

# get FILE URL: downloads, prints "code content-type".
get() { curl -s --max-time 30 -o "$OUT/$1" -w '%{http_code} %{content_type}' "$2" || echo "000 -"; }

# png_size FILE: "WIDTHxHEIGHT" from the IHDR chunk.
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{printf "%dx%d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}'; }
is_png() { [[ -s $1 && $(od -An -tx1 -N8 "$1" | tr -d ' \n') == 89504e470d0a1a0a ]]; }
# same_png A B: both are PNGs and byte-identical.
same_png() { is_png "$OUT/$1" && is_png "$OUT/$2" && cmp -s "$OUT/$1" "$OUT/$2"; }

# check_png NAME URL [SIZE]
check_png() {
	local name=$1 url=$2 want=${3:-256x256} r
	r=$(get "$name.png" "$url")
	if [[ $r == "200 image/png" ]] && is_png "$OUT/$name.png" && [[ $(png_size "$OUT/$name.png") == "$want" ]]; then
		ok "$name: $r $want"
	else
		ko "$name: $r $(head -c 300 "$OUT/$name.png" | tr -d '\0')"
	fi
}

r=$(get caps111.xml "$W&VERSION=1.1.1&REQUEST=GetCapabilities")
if [[ $r == 200* ]] && grep -q '<WMT_MS_Capabilities' "$OUT/caps111.xml"; then ok "GetCapabilities 1.1.1: $r"; else ko "GetCapabilities 1.1.1: $r"; fi
r=$(get caps130.xml "$W&VERSION=1.3.0&REQUEST=GetCapabilities")
if [[ $r == 200* ]] && grep -q '<WMS_Capabilities' "$OUT/caps130.xml"; then ok "GetCapabilities 1.3.0: $r"; else ko "GetCapabilities 1.3.0: $r"; fi
for n in '<Name>test:polygons</Name>' '<Name>test:roads</Name>' '<Name>test:places</Name>' '<Name>test:relief</Name>' \
	'<Name>population</Name>' '<CRS>EPSG:4326</CRS>' '<CRS>EPSG:3857</CRS>' '<CRS>EPSG:900913</CRS>'; do
	if grep -qF "$n" "$OUT/caps130.xml"; then ok "capabilities list $n"; else ko "capabilities lack $n"; fi
done
# "default" once per vector layer (test:polygons lists default and
# population); the relief raster has no classes, so no named style.
n=$(grep -cF '<Name>default</Name>' "$OUT/caps130.xml" || true)
if [[ $n == 3 ]]; then ok "capabilities list style default for the 3 vector layers"; else ko "style default listed $n times, want 3"; fi

G111="$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/png&WIDTH=256&HEIGHT=256"
check_png epsg4326 "$G111&LAYERS=$ALL&STYLES=&SRS=EPSG:4326&BBOX=-180,-90,0,90"
check_png epsg3857 "$G111&LAYERS=$ALL&STYLES=&SRS=EPSG:3857&BBOX=-20037508.34,0,0,20037508.34"
check_png epsg900913 "$G111&LAYERS=$ALL&STYLES=&SRS=EPSG:900913&BBOX=-20037508.34,0,0,20037508.34"
check_png wms130 "$W&VERSION=1.3.0&REQUEST=GetMap&FORMAT=image/png&WIDTH=256&HEIGHT=256&LAYERS=$ALL&STYLES=&CRS=EPSG:4326&BBOX=-90,-180,90,0"
if same_png epsg4326.png wms130.png; then ok "1.3.0 lat,lon BBOX gives the 1.1.1 lon,lat image"; else ko "1.3.0 lat,lon image differs from 1.1.1"; fi
if same_png epsg3857.png epsg900913.png; then ok "EPSG:900913 == EPSG:3857"; else ko "EPSG:900913 differs from EPSG:3857"; fi

check_png style-default "$G111&LAYERS=test:polygons&STYLES=default&SRS=EPSG:4326&BBOX=-45,0,0,45"
check_png style-empty "$G111&LAYERS=test:polygons&STYLES=&SRS=EPSG:4326&BBOX=-45,0,0,45"
check_png style-population "$G111&LAYERS=test:polygons&STYLES=population&SRS=EPSG:4326&BBOX=-45,0,0,45"
if same_png style-default.png style-empty.png; then ok "STYLES=default == STYLES="; else ko "STYLES=default differs from STYLES="; fi
if is_png "$OUT/style-population.png" && is_png "$OUT/style-default.png" &&
	! cmp -s "$OUT/style-default.png" "$OUT/style-population.png"; then ok "STYLES=population differs from default"; else ko "STYLES=population same as default"; fi

r=$(get style-nope.xml "$G111&LAYERS=test:polygons&STYLES=nope&SRS=EPSG:4326&BBOX=-45,0,0,45")
if grep -q 'code="StyleNotDefined"' "$OUT/style-nope.xml"; then ok "STYLES=nope: $r StyleNotDefined"; else ko "STYLES=nope: $r $(head -c 300 "$OUT/style-nope.xml")"; fi

r=$(get world.jpg "$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/jpeg&WIDTH=512&HEIGHT=512&LAYERS=$ALL&STYLES=&SRS=EPSG:4326&BBOX=-45,0,0,45")
if [[ $r == "200 image/jpeg" && $(od -An -tx1 -N3 "$OUT/world.jpg" | tr -d ' \n') == ffd8ff ]]; then ok "image/jpeg: $r"; else ko "image/jpeg: $r"; fi

check_png places "$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/png&TRANSPARENT=TRUE&WIDTH=512&HEIGHT=512&LAYERS=test:places&STYLES=&SRS=EPSG:4326&BBOX=-45,0,0,45" 512x512
check_png map "$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/png&WIDTH=512&HEIGHT=512&LAYERS=$ALL&STYLES=&SRS=EPSG:4326&BBOX=-45,0,0,45" 512x512

timing() {
	local label=$1 url=$2 t
	t=$(for _ in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total}\n' "$url"; done | sort -n |
		awk '{a[NR]=$1} END {printf "min %.0f ms, median %.0f ms, max %.0f ms", a[1]*1000, a[3]*1000, a[5]*1000}')
	echo "time $label: $t"
}

# The relief: a 1024x1024 EPSG:4326 level-5 metatile, opaque without
# TRANSPARENT=TRUE, with thousands of distinct colours.
RELIEF="$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/png&WIDTH=1024&HEIGHT=1024&LAYERS=test:relief&STYLES=&SRS=EPSG:4326&BBOX=0,0,22.5,22.5&TRANSPARENT=FALSE"
check_png relief "$RELIEF" 1024x1024
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if command -v go >/dev/null && is_png "$OUT/relief.png"; then
	st=$(cd "$HERE/.." && go run ./bench/pngstat -colors "$OUT/relief.png" 2>&1) || true
	colors=$(sed -nE 's/.* colors=([0-9]+).*/\1/p' <<<"$st")
	if [[ -n $colors && $colors -gt 4096 && $st == *opaque=true* ]]; then
		ok "test:relief metatile: $colors colours, opaque"
	else
		ko "test:relief metatile: want > 4096 colours, opaque: $st"
	fi
fi
timing "1024x1024 test:relief EPSG:4326 level 5" "$RELIEF"

# Render cost: 1024x1024 metatiles (4x4 tiles of 256), all layers.
META="$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/png&WIDTH=1024&HEIGHT=1024&LAYERS=$ALL&STYLES="
check_png meta4326 "$META&SRS=EPSG:4326&BBOX=-45,0,0,45" 1024x1024
timing "1024x1024 EPSG:4326 bbox -45,0,0,45" "$META&SRS=EPSG:4326&BBOX=-45,0,0,45"
timing "1024x1024 EPSG:3857 z2 metatile" "$META&SRS=EPSG:3857&BBOX=-10018754.17,0,0,10018754.17"
timing "256x256 EPSG:3857 z4 tile" "$W&VERSION=1.1.1&REQUEST=GetMap&FORMAT=image/png&WIDTH=256&HEIGHT=256&LAYERS=$ALL&STYLES=&SRS=EPSG:3857&BBOX=-2504688.54,2504688.54,0,5009377.09"

echo "images in $OUT"
echo "$pass passed, $fail failed"
((fail == 0))
