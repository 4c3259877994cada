#!/usr/bin/env bash
# Usage: upstream/qgis/generate.sh DIR
#
# Generates the QGIS Server upstream's state into DIR:
#   DIR/data/...   the synthetic world, made by upstream/generate.sh (the
#                  very Shapefiles and GeoTIFF MapServer serves; it also
#                  writes MapServer's mapfile there, unused by QGIS)
#   DIR/world.qgs  the QGIS project, written with PyQGIS by project.py
#                  (layers test:polygons with styles default and population,
#                  test:roads, test:places with labels, test:relief)
#
# The project is rewritten only when project.py or the data changed
# (DIR/world.qgs.stamp, or FORCE=1). Needs Debian's /usr/bin/python3 with
# python3-qgis, and what upstream/generate.sh needs (upstream/install.sh).
set -euo pipefail

[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
DIR=$(realpath -- "$1")

"$HERE/../generate.sh" "$DIR"

# Debian's Python, not whatever python3 comes first on the PATH: PyQGIS
# is built for it.
PY=/usr/bin/python3
"$PY" -c 'import qgis.core' 2>/dev/null || {
	echo "qgis/generate.sh: $PY cannot import qgis.core; run upstream/install.sh" >&2
	exit 1
}

STAMP=$( { cat "$HERE/project.py" "$DIR/data/.stamp"; } | sha256sum | cut -d' ' -f1)
if [[ ${FORCE:-0} != 1 && -s $DIR/world.qgs && -f $DIR/world.qgs.stamp && $(cat "$DIR/world.qgs.stamp") == "$STAMP" ]]; then
	echo "qgis/generate.sh: project $DIR/world.qgs is up to date"
	exit 0
fi
mkdir -p "$DIR/home" "$DIR/run"
chmod 0700 "$DIR/run"
# Written aside and moved in: a running QGIS Server reloads a project whose
# file changed, and must never read half of one.
TMP="$DIR/.world.tmp.qgs"
HOME="$DIR/home" XDG_RUNTIME_DIR="$DIR/run" QT_QPA_PLATFORM=offscreen \
	"$PY" "$HERE/project.py" "$DIR/data" "$TMP"
mv -f "$TMP" "$DIR/world.qgs"
echo "$STAMP" >"$DIR/world.qgs.stamp"
echo "qgis/generate.sh: wrote $DIR/world.qgs"
