#!/usr/bin/env bash
# Usage: bench/hitpath.sh
#
# Cache-hit throughput of tile_cache, next to references served by the same
# Caddy process: file_server (the same tiles as files on disk) and respond (a
# body of the mean tile size, from memory; once plain, once with the
# Content-Type and Content-Length a tile has). Loopback only. See
# bench/README.md for what is measured and how to read it.
#
#   1. wrk from Debian if missing; ./caddy built with ./xcaddy.sh if missing
#      (or BUILD=1); the MapServer upstream (upstream/install.sh, start.sh)
#      in a temp dir on a free loopback port.
#   2. ONE Caddy (a copy of ./caddy, fresh temp storage, log level INFO, no
#      access logs, admin on a free loopback port) with four sites:
#        (a) tile_cache + reverse_proxy to the upstream
#        (b) file_server, root = temp dir holding the tiles as /tiles/z/x/y.png (.webp)
#        (c) respond with a literal body of the mean tile size (net/http
#            sends it chunked: no Content-Length, longer than its buffer)
#        (d) respond_len: the same + a header handler setting Content-Type
#            image/png and Content-Length, framed like a tile
#   3. the URL list: all EPSG:4326 tiles of test:polygons, levels 0..MAXZ
#      (default 4: 2+8+32+128+512 = 682 tiles), in a fixed shuffled order.
#      Pass 1 through (a) warms the cache (every answer 200 $CTYPE);
#      pass 2 must answer HIT for every tile and its bytes are saved under
#      (b)'s root; (b), (c), (d) are then checked to answer 200 with the
#      same sizes.
#   4. wrk (-t THREADS -c CONNS, the same for all) with bench/hitpath.lua
#      cycling through the list: a short unreported warm-up per target, then
#      ROUNDS interleaved rounds (a,b,c,d, a,b,c,d, ...) of DURATION each. Any
#      wrk error (status >= 400, connect, read, write, timeout) fails the
#      script; so does any tile_cache miss or pass-through during the runs
#      (Caddy's admin /metrics, caddy_tile_cache_*).
#   5. prints req/s, latency p50/p99, CPU use of Caddy, wrk and everything
#      else, and requests per Caddy CPU-second per run; the median per
#      target; the ratios tile_cache/file_server, /respond, /respond_len.
#   6. writes the report to bench/results/hitpath-<date>.txt as well.
#
# Environment (defaults in brackets):
#   THREADS [2] CONNS [32] DURATION [10s] ROUNDS [3] WARMUP [2s] MAXZ [4]
#   PIN=1         Caddy on CPU 0 with GOMAXPROCS=1, wrk on CPU 1 (taskset;
#                 THREADS defaults to 1): no fight over the CPUs, so less
#                 noise, but it measures one core of Caddy
#   BUILD=1       rebuild ./caddy first
#   PROFILE=1     after the rounds, one more run of tile_cache and of respond,
#                 each with a CPU profile of Caddy from its admin
#                 /debug/pprof/profile (PROFILE_SECONDS [8]); the profiles
#                 are saved next to the report, CPU µs per request and the
#                 top of `go tool pprof -top` / `-top -cum` go into it
#   QUIET_WAIT [60] seconds to wait, before the runs, for the machine to
#                 be quiet (other processes using < 0.25 cores): other jobs
#                 on a 2-core machine move the figures a lot
#   KEEP=1        keep the temp dir (Caddy log, Caddyfile, wrk outputs)
#   S3=1          two more targets: (e) tile_cache with its tiles in a MinIO
#                 bucket (a real S3 server on loopback, built by
#                 module/store/s3store/s3test/install.sh), (f) the same with
#                 a local tier (hot tiles in a Badger in front of the bucket)
#   FORMAT [image/png] the tile format of every tile_cache target:
#                 image/png, image/png8 or image/webp (docs/formats.md);
#                 the tiles (b) serves and (d)'s Content-Type follow it
#   QUOTA=1       one more target: (q) tile_cache with a quota (10 GiB, never
#                 reached: what access tracking costs the hit path), its own
#                 store; the report adds the ratio quota on / off
#
# Everything started here (upstream, Caddy, wrk) is stopped on exit.
set -euo pipefail

if [[ $# -gt 0 ]]; then
	echo "usage: [VAR=value...] $0   (no arguments; the settings are environment variables, see the top of this file)" >&2
	exit 2
fi

PIN=${PIN:-0}
if [[ $PIN == 1 ]]; then THREADS=${THREADS:-1}; else THREADS=${THREADS:-2}; fi
CONNS=${CONNS:-32}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2s}
MAXZ=${MAXZ:-4}
FORMAT=${FORMAT:-image/png}
case $FORMAT in
image/png | image/png8) CTYPE=image/png EXT=png ;;
image/webp) CTYPE=image/webp EXT=webp ;;
*)
	echo "hitpath.sh: FORMAT must be image/png, image/png8 or image/webp, not $FORMAT" >&2
	exit 2
	;;
esac
PROFILE=${PROFILE:-0}
PROFILE_SECONDS=${PROFILE_SECONDS:-8}
QUIET_WAIT=${QUIET_WAIT:-60}
S3=${S3:-0}
TARGETS="a b c d"
TILE_TARGETS="a" # the targets that are tile caches (all hits are checked)
QUOTA=${QUOTA:-0}
EXTRA_CACHES="" # tile caches warmed like (a) and checked to serve the same tiles
if [[ $QUOTA == 1 ]]; then
	TARGETS+=" q"
	TILE_TARGETS+=" q"
	EXTRA_CACHES+=" q"
fi
if [[ $S3 == 1 ]]; then
	TARGETS+=" e f"
	TILE_TARGETS+=" e f"
fi
LAYER=test:polygons

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/minio.sh
. "$HERE/minio.sh"
cd "$ROOT"

log() { printf '%s hitpath: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
# The shared helpers (out, pick_port, stop_pid); hitpath sets its own traps
# and report, not frame's.
. "$HERE/frame.sh"

for v in THREADS CONNS ROUNDS MAXZ PROFILE_SECONDS; do
	[[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || die "$v must be a positive integer, got '${!v}'"
done
((MAXZ <= 6)) || die "MAXZ ${MAXZ}: at most 6 (the warm-up fetches every metatile)"
[[ $DURATION =~ ^[0-9]+[sm]?$ && $WARMUP =~ ^[0-9]+[sm]?$ ]] || die "DURATION/WARMUP like 10s"
CADDY_PREFIX=()
WRK_PREFIX=()
if [[ $PIN == 1 ]]; then
	command -v taskset >/dev/null || die "PIN=1 needs taskset (util-linux)"
	(($(nproc) >= 2)) || die "PIN=1 needs 2 CPUs"
	CADDY_PREFIX=(taskset -c 0 env GOMAXPROCS=1)
	WRK_PREFIX=(taskset -c 1)
fi
CLK_TCK=$(getconf CLK_TCK)
secs() { local d=$1; case $d in *m) echo $((${d%m} * 60)) ;; *s) echo "${d%s}" ;; *) echo "$d" ;; esac; }

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d /tmp/hitpath.XXXXXX)
UPDIR=$TMP/upstream
CADDY_PID=""
WRK_PID=""
UPSTREAM_STARTED=0
MINIO_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $WRK_PID ]] && kill -0 "$WRK_PID" 2>/dev/null; then
		kill "$WRK_PID" 2>/dev/null || true
		wait "$WRK_PID" 2>/dev/null || true
	fi
	if [[ -n $CADDY_PID ]] && kill -0 "$CADDY_PID" 2>/dev/null; then
		kill -TERM "$CADDY_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$CADDY_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$CADDY_PID" 2>/dev/null || true
		wait "$CADDY_PID" 2>/dev/null || true
	fi
	if [[ -n $MINIO_PID ]]; then
		kill "$MINIO_PID" 2>/dev/null || true
		wait "$MINIO_PID" 2>/dev/null || true
	fi
	if ((UPSTREAM_STARTED)); then
		"$ROOT/upstream/stop.sh" "$UPDIR" >/dev/null 2>&1 || log "upstream/stop.sh $UPDIR failed"
	fi
	if ((rc != 0)) && [[ -s $TMP/caddy.log ]]; then
		log "last lines of the Caddy log:"
		tail -n 20 "$TMP/caddy.log" >&2 || true
	fi
	if [[ ${KEEP:-0} == 1 ]]; then
		log "kept $TMP"
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- report
mkdir -p "$HERE/results"
STAMP=$(date +%Y%m%d-%H%M%S)
REPORT=$HERE/results/hitpath-$STAMP.txt
: >"$REPORT"

# ---------------------------------------------------------------- 1. tools
if ! command -v wrk >/dev/null; then
	log "installing wrk (apt)"
	apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; } ||
		die "could not install wrk"
fi
if [[ ${BUILD:-0} == 1 || ! -x ./caddy ]]; then
	log "building ./caddy (./xcaddy.sh)"
	./xcaddy.sh >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; die "./xcaddy.sh failed"; }
fi
# Run a private copy: another build replacing ./caddy mid-run changes nothing.
cp ./caddy "$TMP/caddy"
CADDY=$TMP/caddy
# (Output captured first: "list-modules | grep -q" can kill list-modules with
# SIGPIPE when grep exits at the match, which pipefail reports as failure.)
MODULES=$("$CADDY" list-modules) || die "./caddy list-modules failed"
grep -qx 'http.handlers.tile_cache' <<<"$MODULES" || die "./caddy lacks http.handlers.tile_cache"
"$ROOT/upstream/install.sh" >/dev/null || die "upstream/install.sh failed"

pick_port UP_PORT
pick_port ADMIN_PORT
pick_port PORT_A
pick_port PORT_B
pick_port PORT_C
pick_port PORT_D
pick_port PORT_E
pick_port PORT_F
pick_port PORT_Q
pick_port MINIO_PORT
pick_port MINIO_CONSOLE

log "starting the upstream on 127.0.0.1:$UP_PORT ($UPDIR)"
UPSTREAM_STARTED=1
"$ROOT/upstream/start.sh" "$UPDIR" "$UP_PORT" >"$TMP/upstream-start.log" 2>&1 ||
	{ cat "$TMP/upstream-start.log" >&2; die "upstream/start.sh failed"; }

if [[ $S3 == 1 ]]; then
	export MINIO_ROOT_USER=hitpath MINIO_ROOT_PASSWORD=hitpath-secret
	log "starting MinIO on 127.0.0.1:$MINIO_PORT"
	start_minio "$TMP/minio"
fi

# ---------------------------------------------------------------- 2. Caddy
STORE=$TMP/store
FILES=$TMP/files
mkdir -p "$STORE" "$FILES/tiles" "$TMP/xdg-data" "$TMP/xdg-config"
CADDYFILE=$TMP/Caddyfile

# write_caddyfile BODY: the four sites; BODY is respond's literal body.
write_caddyfile() {
	cat >"$CADDYFILE" <<EOF
{
	admin 127.0.0.1:$ADMIN_PORT
	auto_https off
	persist_config off
	log {
		level INFO
	}
}

# (a) the cache; no "log" directive in any site: no access logs
:$PORT_A {
	bind 127.0.0.1
	tile_cache {
		upstream http://127.0.0.1:$UP_PORT/wms
		storage $STORE
		layer $LAYER {
			gridsets EPSG:4326 EPSG:900913
			formats $FORMAT
		}
	}
	reverse_proxy 127.0.0.1:$UP_PORT
}

# (b) the same tiles as files
:$PORT_B {
	bind 127.0.0.1
	root * $FILES
	file_server
}

# (c) a body of the mean tile size, from memory
:$PORT_C {
	bind 127.0.0.1
	respond $1 200
}
:$PORT_D {
	bind 127.0.0.1
	header {
		Content-Type $CTYPE
		Content-Length ${#1}
	}
	respond $1 200
}
EOF
	if ((QUOTA)); then
		cat >>"$CADDYFILE" <<EOF

# (q) the cache with a quota it never reaches: access tracking on every hit
:$PORT_Q {
	bind 127.0.0.1
	tile_cache {
		name quota
		upstream http://127.0.0.1:$UP_PORT/wms
		storage $TMP/store-q
		quota 10GiB
		layer $LAYER {
			gridsets EPSG:4326 EPSG:900913
			formats $FORMAT
		}
	}
	reverse_proxy 127.0.0.1:$UP_PORT
}
EOF
	fi
	((S3)) || return 0
	local site port local_tier
	for site in e f; do
		port=$PORT_E local_tier=""
		if [[ $site == f ]]; then
			port=$PORT_F local_tier="local {
				max_size 1GiB
				ttl 1h
			}"
		fi
		cat >>"$CADDYFILE" <<EOF

# ($site) the cache with its tiles in S3 (f: hot ones in a local tier too)
:$port {
	bind 127.0.0.1
	tile_cache {
		name s3$site
		upstream http://127.0.0.1:$UP_PORT/wms
		storage $TMP/store-$site
		$(s3_block "s3$site" "$local_tier")
		layer $LAYER {
			gridsets EPSG:4326 EPSG:900913
			formats $FORMAT
		}
	}
	reverse_proxy 127.0.0.1:$UP_PORT
}
EOF
	done
}

write_caddyfile placeholder
"$CADDY" validate --config "$CADDYFILE" --adapter caddyfile >"$TMP/validate.log" 2>&1 ||
	{ cat "$TMP/validate.log" >&2; die "Caddyfile rejected"; }
log "starting Caddy: (a) tile_cache :$PORT_A  (b) file_server :$PORT_B  (c) respond :$PORT_C  (d) respond_len :$PORT_D  admin :$ADMIN_PORT"
XDG_DATA_HOME=$TMP/xdg-data XDG_CONFIG_HOME=$TMP/xdg-config \
	"${CADDY_PREFIX[@]}" "$CADDY" run --config "$CADDYFILE" --adapter caddyfile </dev/null >"$TMP/caddy.log" 2>&1 &
CADDY_PID=$!
for i in $(seq 100); do
	kill -0 "$CADDY_PID" 2>/dev/null || die "Caddy exited"
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT_C/" && break
	((i < 100)) || die "Caddy did not answer within 20 s"
	sleep 0.2
done
grep -q '"level":"debug"' "$TMP/caddy.log" && die "Caddy logs at debug level"

# ---------------------------------------------------------------- 3. URLs
# "z x y" of every EPSG:4326 tile of levels 0..MAXZ, in a fixed shuffled
# order (the same for all targets).
awk -v maxz="$MAXZ" 'BEGIN {
	for (z = 0; z <= maxz; z++)
		for (x = 0; x < 2 * 2 ^ z; x++)
			for (y = 0; y < 2 ^ z; y++) print z, x, y
}' | shuf --random-source=<(yes hitpath) >"$TMP/tiles.txt"
NTILES=$(wc -l <"$TMP/tiles.txt")
# Paths: (a) the WMS-C GetMap, (b)/(c) the file.
awk '{
	s = 180 / 2 ^ $1
	printf "/?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS='"$LAYER"'&STYLES=&SRS=EPSG:4326&BBOX=%.10g,%.10g,%.10g,%.10g&WIDTH=256&HEIGHT=256&FORMAT='"$FORMAT"'\n", \
		-180 + $2 * s, -90 + $3 * s, -180 + ($2 + 1) * s, -90 + ($3 + 1) * s
}' "$TMP/tiles.txt" >"$TMP/paths-a.txt"
awk -v ext="$EXT" '{ printf "/tiles/%d/%d/%d.%s\n", $1, $2, $3, ext }' "$TMP/tiles.txt" >"$TMP/paths-b.txt"
cp "$TMP/paths-b.txt" "$TMP/paths-c.txt"
cp "$TMP/paths-b.txt" "$TMP/paths-d.txt"
cp "$TMP/paths-a.txt" "$TMP/paths-e.txt"
cp "$TMP/paths-a.txt" "$TMP/paths-f.txt"
cp "$TMP/paths-a.txt" "$TMP/paths-q.txt"

# curl_pass BASE PATHS OUTDIR PARALLEL: one curl for the whole list (a
# config file), one tab-separated line per transfer: code, content type,
# cache result, size, URL. OUTDIR "" discards bodies, else they go to
# OUTDIR/<path of paths-b>.
curl_pass() {
	local base=$1 paths=$2 outdir=$3 par=$4 cfg=$TMP/curl.cfg
	paste -d' ' "$paths" "$TMP/paths-b.txt" | while read -r p f; do
		printf 'url = "%s%s"\n' "$base" "$p"
		if [[ -n $outdir ]]; then printf 'output = "%s%s"\n' "$outdir" "$f"; else echo 'output = "/dev/null"'; fi
	done >"$cfg"
	local parallel=()
	((par > 1)) && parallel=(--parallel --parallel-max "$par")
	curl -s --no-progress-meter --create-dirs "${parallel[@]}" --max-time 60 -K "$cfg" \
		-w '%{http_code}\t%{content_type}\t%header{geowebcache-cache-result}\t%{size_download}\t%{url}\n'
}

log "pass 1: warming the cache with $NTILES tiles through tile_cache (z0..$MAXZ)"
t0=$SECONDS
curl_pass "http://127.0.0.1:$PORT_A" "$TMP/paths-a.txt" "" 4 >"$TMP/pass1.txt" || true
bad=$(awk -F'\t' -v ct="$CTYPE" '($1 != 200 || $2 != ct) && n++ < 5' "$TMP/pass1.txt")
n1=$(wc -l <"$TMP/pass1.txt")
[[ -z $bad && $n1 -eq $NTILES ]] || die "pass 1: $n1/$NTILES answers, bad ones: $bad"
log "pass 1: $NTILES x 200 $CTYPE in $((SECONDS - t0)) s"

log "pass 2: every tile must be a HIT; saving the cached bytes under $FILES/tiles"
curl_pass "http://127.0.0.1:$PORT_A" "$TMP/paths-a.txt" "$FILES" 1 >"$TMP/pass2.txt" || true
bad=$(awk -F'\t' -v ct="$CTYPE" '($1 != 200 || $2 != ct || $3 != "HIT") && n++ < 5' "$TMP/pass2.txt")
n2=$(wc -l <"$TMP/pass2.txt")
[[ -z $bad && $n2 -eq $NTILES ]] || die "pass 2: $n2/$NTILES answers, not 200 $CTYPE HIT: $bad"
nfiles=$(find "$FILES/tiles" -name "*.$EXT" -size +0 | wc -l)
((nfiles == NTILES)) || die "saved $nfiles tile files, expected $NTILES"
TOTAL_BYTES=$(awk -F'\t' '{ s += $4 } END { print s }' "$TMP/pass2.txt")
MEAN=$(((TOTAL_BYTES + NTILES / 2) / NTILES))
MINSZ=$(awk -F'\t' 'NR == 1 || $4 < m { m = $4 } END { print m }' "$TMP/pass2.txt")
MAXSZ=$(awk -F'\t' '$4 > m { m = $4 } END { print m }' "$TMP/pass2.txt")
((MEAN > 0)) || die "mean tile size is 0"
log "pass 2: $NTILES HITs; tiles $MINSZ..$MAXSZ bytes, mean $MEAN"
WARM_EXTRA="$EXTRA_CACHES"
((S3)) && WARM_EXTRA+=" e f"
if [[ -n ${WARM_EXTRA// /} ]]; then
	for t in $WARM_EXTRA; do
		log "warming ($t) with the same $NTILES tiles, then checking they are all HITs"
		port=$PORT_E
		[[ $t == f ]] && port=$PORT_F
		[[ $t == q ]] && port=$PORT_Q
		curl_pass "http://127.0.0.1:$port" "$TMP/paths-$t.txt" "" 4 >"$TMP/pass1-$t.txt" || true
		curl_pass "http://127.0.0.1:$port" "$TMP/paths-$t.txt" "" 1 >"$TMP/pass2-$t.txt" || true
		[[ $(wc -l <"$TMP/pass2-$t.txt") -eq $NTILES && -z $(awk -F'\t' '$1 != 200 || $3 != "HIT"' "$TMP/pass2-$t.txt") ]] ||
			die "($t): not every tile a HIT after warming"
		cmp -s <(awk -F'\t' '{ print $4 }' "$TMP/pass2.txt") <(awk -F'\t' '{ print $4 }' "$TMP/pass2-$t.txt") ||
			die "($t): tile sizes differ from (a)'s"
	done
fi

# (c)'s body: MEAN printable bytes (base64 of random data: no spaces,
# quotes or braces, so it is one Caddyfile token with no placeholders).
# Loaded with an admin-API reload; the tile store is shared across it.
head -c "$MEAN" /dev/urandom | base64 -w0 >"$TMP/body.b64"
BODY=$(<"$TMP/body.b64")
BODY=${BODY:0:MEAN}
((${#BODY} == MEAN)) || die "body generation"
write_caddyfile "$BODY"
curl -sf --max-time 20 -X POST -H 'Content-Type: text/caddyfile' --data-binary @"$CADDYFILE" \
	"http://127.0.0.1:$ADMIN_PORT/load" >"$TMP/load.log" 2>&1 ||
	{ cat "$TMP/load.log" >&2; die "reloading the config with the respond body failed"; }
sleep 0.5

log "checking the four targets once more"
# (a) still all HITs after the reload, with the same sizes as pass 2
curl_pass "http://127.0.0.1:$PORT_A" "$TMP/paths-a.txt" "" 1 >"$TMP/check-a.txt" || true
# (b) every file 200, same size as the cached tile
curl_pass "http://127.0.0.1:$PORT_B" "$TMP/paths-b.txt" "" 1 >"$TMP/check-b.txt" || true
# (c) 200 with MEAN bytes
curl_pass "http://127.0.0.1:$PORT_C" "$TMP/paths-c.txt" "" 1 >"$TMP/check-c.txt" || true
# (d) 200 $CTYPE with MEAN bytes
curl_pass "http://127.0.0.1:$PORT_D" "$TMP/paths-d.txt" "" 1 >"$TMP/check-d.txt" || true
if ((QUOTA)); then
	curl_pass "http://127.0.0.1:$PORT_Q" "$TMP/paths-q.txt" "" 1 >"$TMP/check-q.txt" || true
	[[ -z $(awk -F'\t' -v ct="$CTYPE" '$1 != 200 || $2 != ct || $3 != "HIT"' "$TMP/check-q.txt") ]] || die "check q: not all 200 $CTYPE HIT after the reload"
fi
if ((S3)); then
	curl_pass "http://127.0.0.1:$PORT_E" "$TMP/paths-e.txt" "" 1 >"$TMP/check-e.txt" || true
	curl_pass "http://127.0.0.1:$PORT_F" "$TMP/paths-f.txt" "" 1 >"$TMP/check-f.txt" || true
	for t in e f; do
		[[ -z $(awk -F'\t' -v ct="$CTYPE" '$1 != 200 || $2 != ct || $3 != "HIT"' "$TMP/check-$t.txt") ]] || die "check $t: not all 200 $CTYPE HIT after the reload"
	done
fi
sizes() { awk -F'\t' '{ print $4 }' "$1"; }
for t in $TARGETS; do
	n=$(wc -l <"$TMP/check-$t.txt")
	((n == NTILES)) || die "check $t: $n/$NTILES answers"
done
[[ -z $(awk -F'\t' -v ct="$CTYPE" '$1 != 200 || $2 != ct || $3 != "HIT"' "$TMP/check-a.txt") ]] || die "check a: not all 200 $CTYPE HIT after the reload"
[[ -z $(awk -F'\t' -v ct="$CTYPE" '$1 != 200 || $2 != ct' "$TMP/check-b.txt") ]] || die "check b: file_server not all 200 $CTYPE"
[[ -z $(awk -F'\t' -v m="$MEAN" '$1 != 200 || $4 != m' "$TMP/check-c.txt") ]] || die "check c: respond not all 200 with $MEAN bytes"
[[ -z $(awk -F'\t' -v m="$MEAN" -v ct="$CTYPE" '$1 != 200 || $2 != ct || $4 != m' "$TMP/check-d.txt") ]] || die "check d: respond_len not all 200 $CTYPE with $MEAN bytes"
# Same order in a and b (sequential curl keeps the list's order): sizes must match.
cmp -s <(sizes "$TMP/check-a.txt") <(sizes "$TMP/check-b.txt") || die "file sizes differ from the cached tiles"

# Per-response sizes (headers included) for the report.
hdr_size() { curl -s -o /dev/null --max-time 5 -w '%{size_header}' "$1"; }
HDR_A=$(hdr_size "http://127.0.0.1:$PORT_A$(head -n1 "$TMP/paths-a.txt")")
HDR_B=$(hdr_size "http://127.0.0.1:$PORT_B$(head -n1 "$TMP/paths-b.txt")")
HDR_C=$(hdr_size "http://127.0.0.1:$PORT_C$(head -n1 "$TMP/paths-c.txt")")
HDR_D=$(hdr_size "http://127.0.0.1:$PORT_D$(head -n1 "$TMP/paths-d.txt")")
curl -s -D "$TMP/headers-a.txt" -o /dev/null "http://127.0.0.1:$PORT_A$(head -n1 "$TMP/paths-a.txt")"
curl -s -D "$TMP/headers-b.txt" -o /dev/null "http://127.0.0.1:$PORT_B$(head -n1 "$TMP/paths-b.txt")"
curl -s -D "$TMP/headers-c.txt" -o /dev/null "http://127.0.0.1:$PORT_C$(head -n1 "$TMP/paths-c.txt")"
curl -s -D "$TMP/headers-d.txt" -o /dev/null "http://127.0.0.1:$PORT_D$(head -n1 "$TMP/paths-d.txt")"
grep -qi '^transfer-encoding: chunked' "$TMP/headers-c.txt" || log "note: respond's answer is not chunked"
grep -qi "^content-length: $MEAN" "$TMP/headers-d.txt" || die "respond_len does not send Content-Length: $MEAN"

# ---------------------------------------------------------------- 4. wrk
# metric NAME: the sum of a caddy_tile_cache_* counter over its labels.
metric() {
	curl -s --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" |
		awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%d\n", s }'
}

declare -A URL=([a]="http://127.0.0.1:$PORT_A" [b]="http://127.0.0.1:$PORT_B" [c]="http://127.0.0.1:$PORT_C" [d]="http://127.0.0.1:$PORT_D"
	[e]="http://127.0.0.1:$PORT_E" [f]="http://127.0.0.1:$PORT_F" [q]="http://127.0.0.1:$PORT_Q")
declare -A NAME=([a]=tile_cache [b]=file_server [c]=respond [d]=respond_len [e]=tile_cache_s3 [f]=s3+local_tier [q]=with_quota)
declare -A RPS P50 P99 EFF # per target: space-separated values, one per round

# run_wrk TARGET DURATION LABEL: runs wrk, checks it, sets W_* from its line.
run_wrk() {
	local t=$1 d=$2 label=$3 o=$TMP/wrk-$3.txt
	local hits0=0 miss0=0 pass0=0
	if [[ " $TILE_TARGETS " == *" $t "* ]]; then
		hits0=$(metric caddy_tile_cache_hits_total)
		miss0=$(metric caddy_tile_cache_misses_total)
		pass0=$(metric caddy_tile_cache_passthrough_total)
	fi
	local stat0 stat1 ticks0 ticks1 self0 self1 ns0 ns1 io0 io1
	io0=$(caddy_syscw)
	ticks0=$(caddy_ticks)
	ns0=$(date +%s%N)
	read -r stat0 </proc/stat
	read -r self0 </proc/$$/stat
	"${WRK_PREFIX[@]}" timeout $(($(secs "$d") + 30)) wrk -t"$THREADS" -c"$CONNS" -d"$d" --latency \
		-s "$HERE/hitpath.lua" "${URL[$t]}" -- "$TMP/paths-$t.txt" >"$o" 2>&1 &
	WRK_PID=$!
	local rc=0
	wait "$WRK_PID" || rc=$?
	WRK_PID=""
	# read builtins, no fork: the shell's children's CPU time is wrk's
	read -r stat1 </proc/stat
	read -r self1 </proc/$$/stat
	ticks1=$(caddy_ticks)
	ns1=$(date +%s%N)
	io1=$(caddy_syscw)
	cpu_share "$stat0" "$stat1" "$ticks0" "$ticks1" "$self0" "$self1" "$ns0" "$ns1"
	((rc == 0)) || { cat "$o" >&2; die "wrk ($label) exited $rc"; }
	local line
	line=$(grep '^HITPATH ' "$o") || { cat "$o" >&2; die "wrk ($label): no HITPATH line"; }
	local kv k v
	# every field hitpath.lua prints; a missing one stays 0 and fails below
	W_requests=0 W_bytes=0 W_rps=0 W_p50_us=0 W_p99_us=0 W_max_us=0
	W_err_connect=0 W_err_read=0 W_err_write=0 W_err_status=0 W_err_timeout=0
	for kv in ${line#HITPATH }; do
		k=${kv%%=*} v=${kv#*=}
		printf -v "W_$k" '%s' "$v"
	done
	local errs=$((W_err_connect + W_err_read + W_err_write + W_err_status + W_err_timeout))
	if ((errs > 0 || W_requests == 0)); then
		cat "$o" >&2
		die "wrk ($label): $W_requests requests, errors: connect $W_err_connect read $W_err_read write $W_err_write status(>=400) $W_err_status timeout $W_err_timeout"
	fi
	grep -q 'Non-2xx' "$o" && { cat "$o" >&2; die "wrk ($label) reports non-2xx/3xx responses"; }
	# requests per second of Caddy CPU time: does not depend on how the
	# CPUs were split between wrk and Caddy during the run.
	W_eff=$(awk -v n="$W_requests" -v c="$W_caddy_cpu_s" 'BEGIN { printf "%.0f", (c > 0 ? n / c : 0) }')
	# write syscalls of Caddy per answer (admin /metrics reads add a few)
	W_wpr=$(awk -v n="$W_requests" -v a="$io0" -v b="$io1" 'BEGIN { printf "%.2f", (n > 0 ? (b - a) / n : 0) }')
	if [[ " $TILE_TARGETS " == *" $t "* ]]; then
		local dh dm dp
		dh=$(($(metric caddy_tile_cache_hits_total) - hits0))
		dm=$(($(metric caddy_tile_cache_misses_total) - miss0))
		dp=$(($(metric caddy_tile_cache_passthrough_total) - pass0))
		((dm == 0 && dp == 0 && dh >= W_requests)) ||
			die "tile_cache during $label: $dh hits, $dm misses, $dp pass-throughs for $W_requests requests"
	fi
}

# caddy_syscw: write syscalls Caddy made so far (/proc/PID/io).
caddy_syscw() { awk '$1 == "syscw:" { print $2 }' "/proc/$CADDY_PID/io" 2>/dev/null || echo 0; }

# caddy_ticks: user+system CPU time of the Caddy process, in clock ticks.
caddy_ticks() {
	local st
	st=$(cat "/proc/$CADDY_PID/stat" 2>/dev/null) || { echo 0; return; }
	st=${st##*) } # fields from 3 (state) on; comm may hold spaces
	awk '{ print $12 + $13 }' <<<"$st"
}

# cpu_share STAT0 STAT1 CADDY0 CADDY1 SELF0 SELF1 NS0 NS1: from the
# /proc/stat "cpu" lines, Caddy's ticks, the shell's own /proc/$$/stat line
# (its cutime+cstime: CPU time of waited-for children, here wrk) and the
# clock before and after a run, sets (in cores, averaged over the run)
# W_caddy_cores, W_wrk_cores, W_other_cores (busy time of the machine, irq
# and softirq included, minus Caddy and wrk: other jobs, which disturb the
# figures, plus the part of the loopback network work the kernel does not
# charge to a process), W_steal (% of the machine's CPU time the
# hypervisor gave to other VMs) and W_caddy_cpu_s.
cpu_share() {
	local s0=${5##*) } s1=${6##*) }
	read -r W_caddy_cpu_s W_caddy_cores W_wrk_cores W_other_cores W_steal < <(awk \
		-v a="$1" -v b="$2" -v c0="$3" -v c1="$4" -v s0="$s0" -v s1="$s1" \
		-v n0="$7" -v n1="$8" -v hz="$CLK_TCK" 'BEGIN {
		split(a, x, " "); split(b, y, " "); split(s0, p, " "); split(s1, q, " ")
		for (i = 2; i <= 9; i++) { d[i] = y[i] - x[i]; t += d[i] }
		if (t <= 0) t = 1
		w = (n1 - n0) / 1e9; if (w <= 0) w = 1
		caddy = (c1 - c0) / hz
		wrk = ((q[14] + q[15]) - (p[14] + p[15])) / hz
		# user, nice, system, irq, softirq: the kernel charges part of the
		# loopback network work to softirq, part to the system time of
		# the processes
		busy = (d[2] + d[3] + d[4] + d[7] + d[8]) / hz
		other = busy - caddy - wrk; if (other < 0) other = 0
		printf "%.2f %.2f %.2f %.2f %.1f\n", caddy, caddy / w, wrk / w, other / w, 100 * d[9] / t
	}')
}

fmt_ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }
# median "V1 V2 ...", last "V1 V2 ...", ratio A B
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
last() { awk '{ print $NF }' <<<"$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

CPU=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')
out "# bench/hitpath.sh  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
out "machine: $(nproc) CPUs ($CPU), $(uname -sr), $(go version 2>/dev/null | awk '{print $3}' || echo 'go ?')"
# The sources the binary should reflect: every .go file outside bench/.
newest_go=$(find "$ROOT" -name '*.go' -not -path "$ROOT/bench/*" -not -path "$ROOT/.git/*" -printf '%T@\n' 2>/dev/null | sort -n | tail -n1)
stale=""
if [[ -n $newest_go ]] && (($(printf '%.0f' "$newest_go") > $(date -r ./caddy +%s))); then
	stale=" -- OLDER than the newest .go source (BUILD=1 rebuilds)"
fi
dirty=$(git status --porcelain -- . ':(exclude)bench' 2>/dev/null | head -c 1 || true)
out "caddy:   $("$CADDY" version | awk '{print $1}'), ./caddy built $(date -u -r ./caddy +%Y-%m-%dT%H:%M:%SZ)$stale"
out "         repo $(git log -1 --format='%h %cI' 2>/dev/null || echo '?')$([[ -n $dirty ]] && echo ', with uncommitted changes outside bench/')"
WRK_VERSION=$(wrk --version 2>&1 || true)
WRK_VERSION=$(awk 'NR == 1 { print $1, $2 }' <<<"$WRK_VERSION")
out "client:  $WRK_VERSION, -t$THREADS -c$CONNS$([[ $PIN == 1 ]] && echo ' (PIN=1: Caddy on CPU 0 with GOMAXPROCS=1, wrk on CPU 1)'), $ROUNDS rounds x $DURATION per target (after a $WARMUP warm-up each), interleaved ${TARGETS// /,}"
out "tiles:   $NTILES ($LAYER, EPSG:4326 z0..$MAXZ, 256x256 $FORMAT), $MINSZ..$MAXSZ bytes, mean $MEAN"
out "answer:  body+headers a) tile_cache $MEAN+$HDR_A  b) file_server $MEAN+$HDR_B  c) respond $MEAN+$HDR_C (chunked)"
out "         d) respond_len $MEAN+$HDR_D bytes (respond with Content-Type and Content-Length set by a header handler)"
((S3)) && out "         e) tile_cache_s3: tiles in MinIO on loopback; f) s3+local_tier: the same with a local Badger tier"
if [[ $PIN == 1 ]]; then
	out "note:    Caddy has one core to itself; wrk the other"
else
	out "note:    wrk and Caddy share the $(nproc) CPUs; every figure is client+server on one machine"
fi
out "columns: caddy, wrk, other = CPU use in cores over the run (other: every other process on the"
out "         machine; above ~0.1 the run was disturbed); steal% = CPU time the hypervisor took;"
out "         req/cpu-s = requests per second of Caddy CPU time; B/resp = bytes per response with headers;"
out "         wr/req = Caddy's write syscalls per response"
out ""

# machine_busy: cores busy (user+nice+system+irq+softirq) over 1 s.
machine_busy() {
	local a b
	read -r a </proc/stat
	sleep 1
	read -r b </proc/stat
	awk -v a="$a" -v b="$b" -v hz="$CLK_TCK" 'BEGIN {
		split(a, x, " "); split(b, y, " "); printf "%.2f\n", (y[2] + y[3] + y[4] + y[7] + y[8] - x[2] - x[3] - x[4] - x[7] - x[8]) / hz }'
}
waited=0
busy=$(machine_busy)
while awk -v b="$busy" 'BEGIN { exit !(b >= 0.25) }' && ((waited < QUIET_WAIT)); do
	((waited == 0)) && log "other processes use $busy cores; waiting up to ${QUIET_WAIT}s for quiet"
	busy=$(machine_busy)
	waited=$((waited + 1))
done
out "before:  other processes used $busy cores (1 s sample, after waiting ${waited}s for < 0.25)"
out ""
MAXOTHER=0
declare -A RR RE # per-round ratios tile_cache/target, in req/s and in req/cpu-s

log "warm-up: $WARMUP per target (not reported)"
for t in $TARGETS; do run_wrk "$t" "$WARMUP" "warmup-$t"; done

out "$(printf '%-6s %-12s %8s %7s %7s %7s %6s %5s %5s %6s %9s %7s %6s' round target req/s p50_ms p99_ms max_ms caddy wrk other steal% req/cpu-s B/resp wr/req)"
for r in $(seq "$ROUNDS"); do
	for t in $TARGETS; do
		log "round $r/$ROUNDS: ${NAME[$t]} ($DURATION)"
		run_wrk "$t" "$DURATION" "r$r-$t"
		RPS[$t]+="$W_rps "
		P50[$t]+="$W_p50_us "
		P99[$t]+="$W_p99_us "
		EFF[$t]+="$W_eff "
		out "$(printf '%-6s %-12s %8.0f %7s %7s %7s %6s %5s %5s %6s %9s %7d %6s' "$r" "${NAME[$t]}" "$W_rps" "$(fmt_ms "$W_p50_us")" "$(fmt_ms "$W_p99_us")" "$(fmt_ms "$W_max_us")" "$W_caddy_cores" "$W_wrk_cores" "$W_other_cores" "$W_steal" "$W_eff" $((W_bytes / W_requests)) "$W_wpr")"
		MAXOTHER=$(awk -v a="$MAXOTHER" -v b="$W_other_cores" 'BEGIN { print (b > a ? b : a) }')
	done
	line=""
	for t in ${TARGETS#a }; do
		rr=$(ratio "$(last "${RPS[a]}")" "$(last "${RPS[$t]}")")
		re=$(ratio "$(last "${EFF[a]}")" "$(last "${EFF[$t]}")")
		RR[$t]+="$rr " RE[$t]+="$re "
		line+="/${NAME[$t]} $rr ($re)  "
	done
	out "$(printf '%-6s %-12s tile_cache%s' "$r" ratios "$line")"
done

# ---------------------------------------------------------------- 5. summary
out ""
out "median of $ROUNDS rounds:"
out "$(printf '%-12s %8s %7s %7s %8s' target req/s p50_ms p99_ms req/cpu-s)"
declare -A MED MEFF
for t in $TARGETS; do
	MED[$t]=$(median "${RPS[$t]}")
	MEFF[$t]=$(median "${EFF[$t]}")
	out "$(printf '%-12s %8.0f %7s %7s %8.0f' "${NAME[$t]}" "${MED[$t]}" "$(fmt_ms "$(median "${P50[$t]}")")" "$(fmt_ms "$(median "${P99[$t]}")")" "${MEFF[$t]}")"
done
R_RESP=$(ratio "${MED[a]}" "${MED[c]}")
out ""
out "ratios, req/s (per Caddy CPU-second in brackets): of the medians | median of the per-round ratios"
for t in ${TARGETS#a }; do
	out "$(printf '%-24s %s (%s)  |  %s (%s)' "tile_cache/${NAME[$t]}" "$(ratio "${MED[a]}" "${MED[$t]}")" "$(ratio "${MEFF[a]}" "${MEFF[$t]}")" \
		"$(printf '%.3f' "$(median "${RR[$t]}")")" "$(printf '%.3f' "$(median "${RE[$t]}")")")"
done
E_RESP=$(ratio "${MEFF[a]}" "${MEFF[c]}")
if ((QUOTA)); then
	out "quota on / off, req/s (per Caddy CPU-second): of the medians $(ratio "${MED[q]}" "${MED[a]}") ($(ratio "${MEFF[q]}" "${MEFF[a]}")); goal >= 0.98"
fi
verdict() { awk -v r="$1" 'BEGIN { print (r >= 0.9 ? "met" : "NOT met") }'; }
out "goal tile_cache >= 0.9 x respond: in req/s $(verdict "$R_RESP") ($R_RESP), per Caddy CPU-second $(verdict "$E_RESP") ($E_RESP)"
if awk -v m="$MAXOTHER" 'BEGIN { exit !(m > 0.1) }'; then
	out "WARNING: other processes used up to $MAXOTHER cores during a run: its req/s are disturbed;"
	out "         the per-CPU-second figures much less so (see bench/README.md)"
fi

# ---------------------------------------------------------------- profile
# One more run each of tile_cache and respond, with a CPU profile of Caddy
# taken through the admin API while wrk runs. CPU µs per request =
# profile samples / requests in the profile window.
if [[ $PROFILE == 1 ]]; then
	d=$((PROFILE_SECONDS + 3))
	for t in a c; do
		PROF=$HERE/results/hitpath-$STAMP-${NAME[$t]}.cpu.pprof
		log "profiling ${NAME[$t]}: run of ${d}s, CPU profile of ${PROFILE_SECONDS}s from the admin API"
		(sleep 1 && curl -s --max-time $((PROFILE_SECONDS + 20)) -o "$PROF" \
			"http://127.0.0.1:$ADMIN_PORT/debug/pprof/profile?seconds=$PROFILE_SECONDS") &
		prof_pid=$!
		run_wrk "$t" "${d}s" "profile-$t"
		wait "$prof_pid" || die "fetching the profile failed"
		go tool pprof -top "$PROF" >"$TMP/pprof-$t.txt" 2>/dev/null || die "go tool pprof failed on $PROF"
		go tool pprof -top -cum "$PROF" >"$TMP/pprof-cum-$t.txt" 2>/dev/null || true
		samples=$(sed -n 's/.*Total samples = \([0-9.]*\)\(m\?s\).*/\1 \2/p' "$TMP/pprof-$t.txt" | awk '{ print ($2 == "ms" ? $1 / 1000 : $1) }')
		out ""
		out "profile ${NAME[$t]}: $(printf '%.0f' "$W_rps") req/s, Caddy $W_caddy_cores cores, other $W_other_cores; ${samples}s of samples in ${PROFILE_SECONDS}s =" \
			"$(awk -v s="$samples" -v r="$W_rps" -v p="$PROFILE_SECONDS" 'BEGIN { printf "%.1f", 1e6 * s / (r * p) }') CPU µs/request; $PROF"
		out "--- go tool pprof -top (flat), first 30 entries"
		out "$(awk '/flat%/ { f = 1 } f && n++ < 31' "$TMP/pprof-$t.txt")"
		out "--- go tool pprof -top -cum, first 40 entries"
		out "$(awk '/flat%/ { f = 1 } f && n++ < 41' "$TMP/pprof-cum-$t.txt")"
	done
fi

log "report: $REPORT"
