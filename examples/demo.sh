#!/usr/bin/env bash
# Usage: examples/demo.sh [--check]
#
# The README's first command: installs and starts the project's MapServer
# upstream on 127.0.0.1:18081 (Debian packages, generated data), builds
# ./caddy with the plugin (xcaddy.sh) if it is not there, and runs it with
# Caddyfile.example on http://localhost:8080. It asks for one tile twice to
# show MISS then HIT, then keeps serving until Ctrl-C. With --check it stops
# after that (CI runs it so).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${WORK:-$ROOT/.work}
UPSTREAM_PORT=18081
PORT=${TILECACHE_PORT:-8080}
mkdir -p "$WORK"

bash upstream/install.sh mapserver
bash upstream/start.sh "$WORK/upstream" "$UPSTREAM_PORT"
[ -x ./caddy ] || ./xcaddy.sh

caddy_pid=
cleanup() {
  [ -n "$caddy_pid" ] && kill "$caddy_pid" 2>/dev/null && wait "$caddy_pid" 2>/dev/null
  bash upstream/stop.sh "$WORK/upstream"
}
trap cleanup EXIT INT TERM

TILECACHE_PORT=$PORT TILECACHE_STORAGE="$WORK/tiles" \
  ./caddy run --config Caddyfile.example --adapter caddyfile > "$WORK/caddy.log" 2>&1 &
caddy_pid=$!
for _ in $(seq 100); do
  curl -fs -o /dev/null "http://localhost:2019/config/" && break
  kill -0 "$caddy_pid" 2>/dev/null || { cat "$WORK/caddy.log"; exit 1; }
  sleep 0.2
done

# Tile x=5, y=2 (from the bottom) of level 2 of the EPSG:4326 gridset.
TILE="http://localhost:$PORT/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=test:polygons&STYLES=&SRS=EPSG:4326&BBOX=45,0,90,45&WIDTH=256&HEIGHT=256&FORMAT=image/png"
echo "tile: $TILE"
results=()
for i in 1 2; do
  r=$(curl -fsS -o "$WORK/tile.png" -D - "$TILE" | tr -d '\r' | awk -F': ' 'tolower($1)=="geowebcache-cache-result"{print $2}')
  echo "request $i: geowebcache-cache-result: $r"
  results+=("$r")
done
file "$WORK/tile.png" 2>/dev/null || true
if [ "${results[1]}" != HIT ]; then
  echo "demo: the second request was not a cache HIT" >&2
  exit 1
fi
if [ "${1:-}" = --check ]; then
  echo "demo: OK"
  exit 0
fi
echo "Serving on http://localhost:$PORT (log: $WORK/caddy.log). Ctrl-C stops Caddy and MapServer."
wait "$caddy_pid"
