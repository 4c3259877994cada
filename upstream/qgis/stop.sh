#!/usr/bin/env bash
# Usage: upstream/qgis/stop.sh DIR
#
# Stops the QGIS Server upstream that upstream/qgis/start.sh DIR PORT
# started. upstream/stop.sh does the work for both upstreams: start.sh
# wrote the FastCGI program's name to DIR/backend, by which it finds the
# processes lighttpd leaves behind.
set -euo pipefail
[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../stop.sh" "$1"
