#!/usr/bin/env bash
# Usage: bench/formats.sh
#
# Tile formats against MapCache (issue 31): bytes, PSNR and seeding CPU of
# 8-bit PNG, mixed JPEG/PNG and WebP tiles, each against the same tool's
# own lossless PNG of the same tile, in one run on one machine.
#
# The setting is bench/peers.sh's (kept apart so that its default run does
# not get longer): the project's MapServer (upstream/start.sh), GeoWebCache's
# EPSG:4326 grid (MapCache gets it as an explicit grid, origin bottom-left),
# levels 0..MAXZ, metatiles of 4x4 with no buffer, 2 threads/workers, empty
# caches. Per layer:
#
#   MapCache 1.14 (mapcache_seed, Debian mapcache-tools), three tilesets of
#   one source, each seeded on its own:
#     png    <format type="PNG"/>                     lossless
#     png8   <format type="PNG"><colors>256</colors>  quantized, 8-bit
#     mixed  <format type="MIXED">: opaque JPEG (quality JPEG_QUALITY),
#            transparent the png8 format above
#   caddy-tilecache (tile_cache + tile_cache_admin, seeded through REST),
#   one site (own port, own cache, own store) per format, each layer with
#   that one format, so that a seed's CPU is that format's alone and an
#   image/webp can have one quality per site:
#     png, png8, jpeg-png8 (image/vnd.jpeg-png8), jpeg-png, webp (lossless),
#     webp8 (image/webp with colors 256: the png8 tile as lossless WebP),
#     webp<Q> for each Q of WEBP_QUALITIES (lossy)
#
# Opaque layers ask MapServer for TRANSPARENT=FALSE, the layers of
# TRANSPARENT_LAYERS (a road layer: lines over transparency) for TRUE.
#
# Measured per layer and format, on every tile of level ZM (default MAXZ;
# bench/formats, the Go tool, reads MapCache's disk cache and our XYZ
# service, every tile a HIT): tiles present/missing, mean bytes, x the
# same tool's lossless PNG, PSNR against that lossless tile (median and
# worst tile; inf = identical; pooled: of the mean squared error over all
# the tiles, the set's PSNR as one image), tile types; and the seeding process's CPU
# seconds (mapcache_seed's user+sys; Caddy's /proc ticks during the seed)
# over the metatiles of levels 0..MAXZ. The two lossless sets are compared
# with each other too (pixel-identical expected: the same MapServer
# renders); where they differ (MapCache keeps images premultiplied, which
# changes semi-transparent pixels), MapCache's png8 and mixed are also
# given against our lossless png, which holds the upstream's pixels.
#
# Environment:
#   LAYERS ["test:mosaic test:polygons test:roads"]
#   TRANSPARENT_LAYERS ["test:roads"] asked for with TRANSPARENT=TRUE
#   MAXZ [4] seeded levels 0..MAXZ; ZM [MAXZ] the level measured
#   JPEG_QUALITY [85] MapCache's JPEG in MIXED (ours' default is 85 too)
#   WEBP_QUALITIES ["75 90"] our lossy WebP sites
#   OUR_VARIANTS [all: "png png8 jpeg-png8 jpeg-png webp webp8 webp75 webp90"]
#     our sites, png first (the reference)
#   OURS [auto] 0: MapCache only; auto: ours when the Caddy validates the
#     config (else skipped with the reason), and a format whose seed fails
#     (not encoded by this build yet) reported as such; 1: ours, every
#     format, or fail
#   CADDY [/tmp/caddy-formats, built with go build ./cmd/caddy if missing;
#     BUILD=1 rebuilds]
#   PORT_BASE [unset: frame.sh's random free ports] loopback ports counted
#     up from here instead
#   DEADLINE [1500] seconds; KEEP=1 keeps the temp dir
# Report: bench/results/formats-<date>-<time>.txt. Everything started here
# is stopped on exit. CPU figures are for a shared 2-core machine: other
# load inflates them for every tool alike.
set -euo pipefail

LAYERS=${LAYERS:-"test:mosaic test:polygons test:roads"}
TRANSPARENT_LAYERS=${TRANSPARENT_LAYERS:-"test:roads"}
MAXZ=${MAXZ:-4}
ZM=${ZM:-$MAXZ}
JPEG_QUALITY=${JPEG_QUALITY:-85}
WEBP_QUALITIES=${WEBP_QUALITIES:-"75 90"}
OURS=${OURS:-auto}
DEADLINE=${DEADLINE:-1500}
CADDY_BIN=${CADDY:-/tmp/caddy-formats}
WORKERS=2

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
T_START=$(date +%s)
TMP=$(mktemp -d /tmp/formats.XXXXXX)
UPDIR=$TMP/up
CADDY_PID="" UPSTREAM_STARTED=0 WATCHDOG_PID=""

log() { printf '%s formats: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
. "$HERE/frame.sh"
. "$HERE/rest.sh"
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
	[[ -n ${SEED_PID:-} ]] && stop_pid "$SEED_PID"
	stop_pid "$CADDY_PID"
	((UPSTREAM_STARTED)) && { "$ROOT/upstream/stop.sh" "$UPDIR" >/dev/null 2>&1 || true; }
	leave_tmp "$rc"
	log "total run time $(($(date +%s) - T_START)) s"
	exit "$rc"
}
frame formats
if [[ -n ${PORT_BASE:-} ]]; then
	# Ports counted up from PORT_BASE (free ones only) instead of frame.sh's
	# random ones: for a machine where other jobs hold random ports.
	NEXT_PORT=$PORT_BASE
	pick_port() {
		while (exec 3<>"/dev/tcp/127.0.0.1/$NEXT_PORT") 2>/dev/null; do NEXT_PORT=$((NEXT_PORT + 1)); done
		printf -v "$1" '%s' "$NEXT_PORT"
		NEXT_PORT=$((NEXT_PORT + 1))
	}
fi

# ---------------------------------------------------------------- tools
need=()
command -v mapcache_seed >/dev/null || need+=(mapcache-tools)
[[ -x /usr/bin/time ]] || need+=(time)
if ((${#need[@]})); then
	log "installing ${need[*]} (Debian)"
	{ apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }; } ||
		die "apt-get install ${need[*]} failed"
fi
go build -o "$TMP/formats" ./bench/formats || die "building bench/formats"
"$ROOT/upstream/install.sh" mapserver >/dev/null || die "upstream/install.sh failed"

HZ=$(getconf CLK_TCK)
ticks_of() { # user+system ticks of the processes (gone ones count 0)
	local t=0 p f
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] || continue
		read -ra f <"/proc/$p/stat" || continue
		t=$((t + f[13] + f[14]))
	done
	echo "$t"
}
now() { date +%s.%N; }
short() { printf '%s' "${1#*:}"; }
transparent() { [[ " $TRANSPARENT_LAYERS " == *" $1 "* ]]; }
# kv KEY LINE: the value of KEY in a key=value line of bench/formats
kv() { sed -E -n "s/.*(^| )$1=([^ ]*).*/\\2/p" <<<"$2"; }

pick_port UP_PORT
"$ROOT/upstream/start.sh" "$UPDIR" "$UP_PORT" >"$TMP/upstream.log" 2>&1 || { cat "$TMP/upstream.log" >&2; die "upstream/start.sh failed"; }
UPSTREAM_STARTED=1
UPSTREAM=http://127.0.0.1:$UP_PORT/wms
RES=$(awk -v z="$MAXZ" 'BEGIN { r = 0.703125; for (i = 0; i <= z + 1; i++) { printf "%s%.12g", (i ? " " : ""), r; r /= 2 } }')
TILES=0 METAS=0
for z in $(seq 0 "$MAXZ"); do
	TILES=$((TILES + 2 ** (z + 1) * 2 ** z))
	METAS=$((METAS + ((2 ** (z + 1) + 3) / 4) * ((2 ** z + 3) / 4)))
done

# ---------------------------------------------------------------- ours: one site per format
# VARIANTS: name, then the layer's format lines (| for a newline).
VARIANTS=(png png8 jpeg-png8 jpeg-png webp webp8)
declare -A MIME=([png]=image/png [png8]=image/png8 [jpeg-png8]=image/vnd.jpeg-png8 [jpeg-png]=image/vnd.jpeg-png [webp]=image/webp [webp8]=image/webp)
declare -A EXT=([png]=png [png8]=png8 [jpeg-png8]=jpeg-png8 [jpeg-png]=jpeg-png [webp]=webp [webp8]=webp)
# webp8: the png8 tile (the same quantizer, 256 colours) written as lossless
# WebP, against png8 at the same pixels.
declare -A FMTOPT=([webp8]="format image/webp {|colors 256|}")
for q in $WEBP_QUALITIES; do
	VARIANTS+=("webp$q")
	MIME[webp$q]=image/webp EXT[webp$q]=webp
	FMTOPT[webp$q]="format image/webp {|quality $q|}"
done
if [[ -n ${OUR_VARIANTS:-} ]]; then
	for v in $OUR_VARIANTS; do [[ -n ${MIME[$v]:-} ]] || die "OUR_VARIANTS: unknown $v (${VARIANTS[*]})"; done
	[[ ${OUR_VARIANTS%% *} == png ]] || die "OUR_VARIANTS must start with png (the reference)"
	read -ra VARIANTS <<<"$OUR_VARIANTS"
fi
declare -A VPORT=()
caddyfile() {
	local v L s
	pick_port ADMIN_PORT
	printf '{\n\tadmin 127.0.0.1:%s\n\tauto_https off\n\tgrace_period 1ns\n\tlog {\n\t\tlevel INFO\n\t}\n}\n' "$ADMIN_PORT"
	for v in "${VARIANTS[@]}"; do
		pick_port "VPORT[$v]"
		printf 'http://127.0.0.1:%s {\n\thandle_path /gwc/* {\n\t\ttile_cache_admin {\n\t\t\tcache f-%s\n\t\t\tworkers %s\n\t\t}\n\t}\n' \
			"${VPORT[$v]}" "$v" "$WORKERS"
		printf '\thandle {\n\t\ttile_cache {\n\t\t\tname f-%s\n\t\t\tupstream %s\n\t\t\tstorage %s\n\t\t\ttimeout 120s\n\t\t\tservices {\n\t\t\t\txyz /xyz\n\t\t\t}\n' \
			"$v" "$UPSTREAM" "$TMP/tiles-$v"
		for L in $LAYERS; do
			s=false
			transparent "$L" && s=true
			printf '\t\t\tlayer %s {\n\t\t\t\tupstream_format image/png\n\t\t\t\tgridsets EPSG:4326\n\t\t\t\tmetatile 4 4\n\t\t\t\ttransparent %s\n\t\t\t\tformats %s\n' \
				"$L" "$s" "${MIME[$v]}"
			[[ -n ${FMTOPT[$v]:-} ]] && tr '|' '\n' <<<"${FMTOPT[$v]}" | sed 's/^/\t\t\t\t/'
			printf '\t\t\t}\n'
		done
		printf '\t\t}\n\t}\n}\n'
	done
}

HAVE_OURS=0
if [[ $OURS != 0 ]]; then
	if [[ ${BUILD:-0} == 1 || ! -x $CADDY_BIN ]]; then
		log "building $CADDY_BIN (go build ./cmd/caddy)"
		if ! go build -o "$CADDY_BIN" ./cmd/caddy >"$TMP/build.log" 2>&1; then
			tail -n 20 "$TMP/build.log" >&2
			[[ $OURS == 1 ]] && die "building Caddy failed"
			rm -f "$CADDY_BIN"
		fi
	fi
	if [[ -x $CADDY_BIN ]]; then
		cp "$CADDY_BIN" "$TMP/caddy"
		caddyfile >"$TMP/Caddyfile"
		if "$TMP/caddy" validate --config "$TMP/Caddyfile" --adapter caddyfile >"$TMP/validate.log" 2>&1; then
			HAVE_OURS=1
		else
			OURS_WHY=$(grep -v '^{' "$TMP/validate.log" | grep -i -m1 'error' || tail -n 1 "$TMP/validate.log")
		fi
	else
		OURS_WHY="no Caddy binary"
	fi
	[[ $OURS == 1 && $HAVE_OURS == 0 ]] && die "our side: ${OURS_WHY:-?}"
fi
if ((HAVE_OURS)); then
	"$TMP/caddy" run --config "$TMP/Caddyfile" --adapter caddyfile </dev/null >"$TMP/caddy.log" 2>&1 &
	CADDY_PID=$!
	for v in "${VARIANTS[@]}"; do
		for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${VPORT[$v]}/gwc/rest/seed.json" && break; sleep 0.1; done
		curl -s -o /dev/null "http://127.0.0.1:${VPORT[$v]}/gwc/rest/seed.json" || die "Caddy did not come up: $(tail -n 5 "$TMP/caddy.log")"
	done
fi

# ---------------------------------------------------------------- MapCache
mapcache_xml() { # mapcache_xml LAYER DIR
	local tr=FALSE
	transparent "$1" && tr=TRUE
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
  <format name="fPNG" type="PNG"/>
  <format name="fPNG8" type="PNG"><colors>256</colors></format>
  <format name="fJPEG" type="JPEG"><quality>$JPEG_QUALITY</quality></format>
  <format name="fMIXED" type="MIXED"><opaque>fJPEG</opaque><transparent>fPNG8</transparent></format>
  <cache name="disk" type="disk"><base>$2/cache</base></cache>
  <source name="src" type="wms">
    <getmap><params><LAYERS>$1</LAYERS><FORMAT>image/png</FORMAT><TRANSPARENT>$tr</TRANSPARENT></params></getmap>
    <http><url>$UPSTREAM</url></http>
  </source>
$(for f in png:fPNG png8:fPNG8 mixed:fMIXED; do
		printf '  <tileset name="%s"><source>src</source><cache>disk</cache><grid>gwc4326</grid><format>%s</format><metatile>4 4</metatile><metabuffer>0</metabuffer></tileset>\n' "${f%%:*}" "${f#*:}"
	done)
  <service type="wmts" enabled="true"/>
  <log_level>warn</log_level>
  <lock_dir>$2/locks</lock_dir>
</mapcache>
EOF
}
# seed_mapcache LAYER TILESET: sets SECS, CPU
seed_mapcache() {
	local d=$TMP/mc-$(short "$1") t0
	t0=$(now)
	/usr/bin/time -f '%U %S' -o "$TMP/time.txt" mapcache_seed -c "$d/mapcache.xml" -t "$2" -g gwc4326 -z "0,$MAXZ" -n "$WORKERS" -q \
		>"$TMP/tool.log" 2>&1 || { tail -n 20 "$TMP/tool.log" >&2; die "mapcache_seed $1 $2 failed"; }
	SECS=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
	CPU=$(awk '{ printf "%.2f", $1 + $2 }' "$TMP/time.txt")
}
# seed_ours LAYER VARIANT: sets SECS, CPU; returns 1 (SEED_FAILED says
# why) when tiles failed, which OURS=auto reports and goes on.
seed_ours() {
	local base=http://127.0.0.1:${VPORT[$2]} c0 url
	req() { printf '{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":%s,"format":"%s","type":"%s","threadCount":%s}}' "$1" "${MIME[$2]}" "$3" "$WORKERS"; }
	# First level 0 alone (one metatile): a format this build cannot
	# encode fails there in a second instead of over the whole seed. The
	# measured seed is then a reseed, which renders every metatile again.
	url=$(submit "$base" "$1" "$(req 0 "$2" seed)")
	wait_task "$url" 300
	if [[ $(jq -r .failedTiles <<<"$TASK_JSON") == 0 ]]; then
		c0=$(ticks_of "$CADDY_PID")
		url=$(submit "$base" "$1" "$(req "$MAXZ" "$2" reseed)")
		wait_task "$url" 900
	fi
	SECS=$(task_secs)
	CPU=$(awk -v t="$(($(ticks_of "$CADDY_PID") - ${c0:-0}))" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
	if [[ $(jq -r .processed <<<"$TASK_JSON") != "$TILES" || $(jq -r .failedTiles <<<"$TASK_JSON") != 0 ]]; then
		# OURS=auto: a format this build cannot encode yet is reported, not fatal
		[[ $OURS == 1 ]] && die "our seed of $1 in $2: $TASK_JSON"
		SEED_FAILED="$(jq -r '"\(.failedTiles) of \(.total) tiles failed: \(.lastError)"' <<<"$TASK_JSON")"
		return 1
	fi
}

# row TOOL FORMAT KVLINE SECS CPU
row() {
	local m w p
	m=$(kv psnr_median "$3") w=$(kv psnr_worst "$3") p=$(kv psnr_pooled "$3")
	out "$(printf '%-9s %-10s %5s/%-4s %8s %6s %8s %8s %8s %11s %6s %8s %6s %7s  %s' "$1" "$2" \
		"$(kv present "$3")" "$(kv tiles "$3")" "$(kv mean_bytes "$3" | awk '{ printf "%.0f", $1 }')" \
		"${RATIO:-$(kv ratio "$3")}" "${m:--}" "${w:--}" "${p:--}" "$(kv worst_tile "$3")" "$(kv identical "$3")" \
		"$(awk -v t="$4" 'BEGIN { printf "%.2f", t }')" "$5" "$(awk -v c="$5" -v m="$METAS" 'BEGIN { printf "%.1f", 1000 * c / m }')" "$(kv types "$3")")"
}

out "== Tile formats against MapCache: bench/formats.sh =="
out "$(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r); MapCache $(dpkg-query -W -f '${Version}' mapcache-tools); HEAD $(git rev-parse --short HEAD)"
if ((HAVE_OURS)); then
	out "Caddy $("$TMP/caddy" version | cut -d' ' -f1), binary $CADDY_BIN (built $(date -u -r "$CADDY_BIN" +%FT%TZ))"
else
	out "caddy-tilecache: not measured (${OURS_WHY:-OURS=0})"
fi
out "EPSG:4326 levels 0..$MAXZ ($TILES tiles, $METAS metatiles of 4x4, no buffer), $WORKERS threads each, empty caches; measured: every tile of level $ZM"
out "MapCache: png lossless, png8 = PNG <colors>256</colors>, mixed = MIXED (opaque JPEG q$JPEG_QUALITY, transparent png8)"
((HAVE_OURS)) && out "ours: ${VARIANTS[*]} (one site each; webpQ: lossy WebP at quality Q)"
out "PSNR (dB) against the same tool's lossless PNG of the tile (R,G,B,A, peak 255; inf = identical); x_png: bytes / the lossless PNG's bytes of the same tiles"
out "cpu_s: the seeding process's CPU seconds for levels 0..$MAXZ (inflated by other load on this machine, for every tool alike); ms/meta = cpu_s / $METAS metatiles"
for L in $LAYERS; do
	s=$(short "$L")
	d=$TMP/mc-$s
	mkdir -p "$d"
	mapcache_xml "$L" "$d" >"$d/mapcache.xml"
	out ""
	out "-- $L (TRANSPARENT=$(transparent "$L" && echo TRUE || echo FALSE))"
	out "$(printf '%-9s %-10s %10s %8s %6s %8s %8s %8s %11s %6s %8s %6s %7s  %s' tool format tiles mean_B x_png psnr_med worst pooled worst_tile ident secs cpu_s ms/meta types)"
	declare -A MCSECS=() MCCPU=()
	for ts in png png8 mixed; do
		seed_mapcache "$L" "$ts"
		MCSECS[$ts]=$SECS MCCPU[$ts]=$CPU
	done
	mcsrc() { printf 'mapcache:%s/cache/%s/gwc4326' "$d" "$1"; }
	line=$("$TMP/formats" -kv -levels "$ZM" -ref "$(mcsrc png)" -cand "png8=$(mcsrc png8)" -cand "mixed=$(mcsrc mixed)") ||
		die "bench/formats on MapCache's $L: $line"
	printf '%s\n' "$line" >>"$TMP/formats-$s.kv"
	RATIO=1.000 row mapcache png "$(grep '^set=ref ' <<<"$line")" "${MCSECS[png]}" "${MCCPU[png]}"
	for ts in png8 mixed; do
		row mapcache "$ts" "$(grep "^set=$ts " <<<"$line")" "${MCSECS[$ts]}" "${MCCPU[$ts]}"
	done
	if ((HAVE_OURS)); then
		declare -A OSECS=() OCPU=() OFAIL=()
		ok=()
		for v in "${VARIANTS[@]}"; do
			if seed_ours "$L" "$v"; then
				ok+=("$v")
			else
				OFAIL[$v]=$SEED_FAILED
			fi
			OSECS[$v]=$SECS OCPU[$v]=$CPU
		done
		[[ ${ok[0]:-} == png ]] || die "our seed of $L in image/png failed: ${OFAIL[png]}"
		xyz() { printf 'http://127.0.0.1:%s/xyz/%s/EPSG:4326/{z}/{x}/{y}.%s' "${VPORT[$1]}" "$L" "${EXT[$1]}"; }
		args=()
		for v in "${ok[@]:1}"; do args+=(-cand "$v=$(xyz "$v")"); done
		line=$("$TMP/formats" -kv -levels "$ZM" -header geowebcache-cache-result=HIT -ref "$(xyz png)" "${args[@]}") ||
			die "bench/formats on our $L: $line"
		printf '%s\n' "$line" >>"$TMP/formats-$s.kv"
		RATIO=1.000 row ours png "$(grep '^set=ref ' <<<"$line")" "${OSECS[png]}" "${OCPU[png]}"
		for v in "${VARIANTS[@]:1}"; do
			if [[ -n ${OFAIL[$v]:-} ]]; then
				out "$(printf '%-9s %-10s not measured: seed failed (%s)' ours "$v" "${OFAIL[$v]}")"
			else
				row ours "$v" "$(grep "^set=$v " <<<"$line")" "${OSECS[$v]}" "${OCPU[$v]}"
			fi
		done
		# The two lossless sets: the same MapServer renders, so the same
		# pixels are expected. Our png keeps MapServer's pixels exactly;
		# where MapCache's do differ (semi-transparent pixels: it keeps
		# images premultiplied), its formats are also given against ours,
		# i.e. against what the upstream sent.
		line=$("$TMP/formats" -kv -levels "$ZM" -header geowebcache-cache-result=HIT -ref "$(xyz png)" \
			-cand "png=$(mcsrc png)" -cand "png8=$(mcsrc png8)" -cand "mixed=$(mcsrc mixed)") ||
			die "bench/formats, MapCache's sets against our png, $L: $line"
		printf '%s\n' "$line" >>"$TMP/formats-$s.kv"
		c=$(grep '^set=png ' <<<"$line")
		out "lossless PNG, MapCache's against ours: $(kv identical "$c") of $(kv pairs "$c") tiles pixel-identical (PSNR median $(kv psnr_median "$c"), worst $(kv psnr_worst "$c")); bytes MapCache/ours $(kv ratio "$c")"
		if [[ $(kv identical "$c") != "$(kv pairs "$c")" ]]; then
			for ts in png8 mixed; do
				c=$(grep "^set=$ts " <<<"$line")
				out "  mapcache $ts against our lossless png (the upstream's pixels): PSNR median $(kv psnr_median "$c"), worst $(kv psnr_worst "$c") at $(kv worst_tile "$c")"
			done
		fi
	fi
done
out ""
out "report: $REPORT"
