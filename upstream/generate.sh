#!/usr/bin/env bash
# Usage: upstream/generate.sh DIR [PORT]
#
# Generates the synthetic sample "world" of the upstream WMS into DIR:
#   DIR/data/{polygons,roads,places}.{shp,shx,dbf,prj,qix}
#                      ESRI Shapefiles in EPSG:4326, with shptree indexes,
#                      made by `go run ./upstream/gendata` (CSV + WKT, fixed
#                      seed, so byte-identical every time) and ogr2ogr
#   DIR/data/relief.tif
#                      a shaded relief (RGB, 7200x3600 pixels of 0.05°),
#                      made by the same generator (raw raster + header) and
#                      gdal_translate (tiled GeoTIFF) + gdaladdo (overviews)
#   DIR/world.map      the MapServer mapfile (layers test:polygons,
#                      test:roads, test:places, test:relief, test:mosaic)
#   DIR/fonts.txt      the FONTSET (DejaVu Sans)
#   DIR/mapserver.conf the MapServer 8 config file; its ENV block sets
#                      MS_MAPFILE, so clients can omit map=
#
# PORT (default 18081) is checked and otherwise unused: the mapfile has no
# wms_onlineresource, so MapServer's URLs follow each request.
# Idempotent and cheap on repeat: the data is regenerated only when the
# generator or the recipe below changed (stamp file DIR/data/.stamp, or
# FORCE=1), and the small text files are rewritten only when their content
# differs. Needs: go, ogr2ogr, shptree (upstream/install.sh).
set -euo pipefail

usage() { echo "usage: $0 DIR [PORT]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
[[ -n $1 ]] || usage
PORT=${2:-18081}
[[ $PORT =~ ^[0-9]+$ ]] || { echo "generate.sh: bad PORT: $PORT" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
mkdir -p "$1"
DIR=$(realpath -- "$1")
SEED=${SEED:-20240601}
LAYERS=(polygons roads places mosaic)

FONT_REGULAR=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
FONT_BOLD=/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf

for tool in ogr2ogr shptree gdal_translate gdaladdo; do
	command -v "$tool" >/dev/null || {
		echo "generate.sh: $tool missing; run upstream/install.sh first" >&2
		exit 1
	}
done
[[ -r $FONT_REGULAR ]] || { echo "generate.sh: $FONT_REGULAR missing; run upstream/install.sh" >&2; exit 1; }

# Locate the Go toolchain (PATH first, then the usual install place).
GO=$(command -v go || true)
[[ -n $GO ]] || { [[ -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go; } || true
[[ -n $GO ]] || { echo "generate.sh: go not found" >&2; exit 1; }

# ------------------------------------------------------------------ data

# What the data depends on: the generator's source, the seed and the
# conversion recipe. Change any of them and the data is rebuilt.
RASTER_RECIPE="gdal_translate -of GTiff -a_srs EPSG:4326 -co TILED=YES -co COMPRESS=NONE; gdaladdo -r average 2 4 8 16 32"
RECIPE="seed=$SEED ogr2ogr -f 'ESRI Shapefile' -a_srs EPSG:4326 -oo GEOM_POSSIBLE_NAMES=WKT -oo KEEP_GEOM_COLUMNS=NO; shptree; $RASTER_RECIPE"
STAMP=$( { cat "$HERE"/gendata/*.go; echo "$RECIPE"; } | sha256sum | cut -d' ' -f1)

data_ok() {
	[[ -f $DIR/data/.stamp && $(cat "$DIR/data/.stamp") == "$STAMP" ]] || return 1
	local l ext
	for l in "${LAYERS[@]}"; do
		for ext in shp shx dbf prj qix; do
			[[ -s $DIR/data/$l.$ext ]] || return 1
		done
	done
	[[ -s $DIR/data/relief.tif ]]
}

if [[ ${FORCE:-0} != 1 ]] && data_ok; then
	echo "generate.sh: data in $DIR/data is up to date"
else
	echo "generate.sh: generating data into $DIR/data (seed $SEED)"
	TMP=$(mktemp -d "$DIR/.data.tmp.XXXXXX")
	trap 'rm -rf "$TMP"' EXIT
	# The generator is plain standard library; should the module be in an
	# unbuildable state (go.mod edited elsewhere), fall back to GOPATH mode.
	if ! (cd "$REPO" && "$GO" run ./upstream/gendata -seed "$SEED" "$TMP/csv"); then
		echo "generate.sh: module build failed, retrying without modules" >&2
		(cd "$HERE/gendata" && GO111MODULE=off GOFLAGS='' "$GO" run main.go -seed "$SEED" "$TMP/csv")
	fi
	for l in "${LAYERS[@]}"; do
		ogr2ogr -f "ESRI Shapefile" -a_srs EPSG:4326 \
			-oo GEOM_POSSIBLE_NAMES=WKT -oo KEEP_GEOM_COLUMNS=NO \
			-nln "$l" "$TMP/$l.shp" "$TMP/csv/$l.csv"
		# Quadtree index (.qix) that MapServer uses to read only what a
		# tile needs.
		shptree "$TMP/$l.shp" >/dev/null
	done
	# The relief: raw RGB (ESRI .hdr) to a tiled GeoTIFF, uncompressed
	# (fastest to write and to read: 78 MB), with averaged overviews for the
	# small scales.
	gdal_translate -q -of GTiff -a_srs EPSG:4326 -co TILED=YES -co COMPRESS=NONE \
		"$TMP/csv/relief.bil" "$TMP/relief.tif"
	gdaladdo -q -r average "$TMP/relief.tif" 2 4 8 16 32
	rm -rf "$TMP/csv"
	echo "$STAMP" >"$TMP/.stamp"
	# Swap in the new data in one step (a running upstream keeps working).
	rm -rf "$DIR/data.old"
	if [[ -d $DIR/data ]]; then mv "$DIR/data" "$DIR/data.old"; fi
	mv "$TMP" "$DIR/data"
	chmod 0755 "$DIR/data"
	rm -rf "$DIR/data.old"
	trap - EXIT
fi

# ------------------------------------------------------------- text files

# install_file DEST: reads the new content from stdin; replaces DEST only
# when it differs, so a repeat run changes no file (and no mtime).
install_file() {
	local dest=$1 tmp
	tmp=$(mktemp "$dest.tmp.XXXXXX")
	cat >"$tmp"
	if [[ -f $dest ]] && cmp -s "$tmp" "$dest"; then
		rm -f "$tmp"
	else
		chmod 0644 "$tmp"
		mv -f "$tmp" "$dest"
		echo "generate.sh: wrote $dest"
	fi
}

install_file "$DIR/fonts.txt" <<EOF
sans      $FONT_REGULAR
sans-bold $FONT_BOLD
EOF

# MapServer 8 refuses to serve without its config file. MS_MAPFILE lets
# clients omit map= (a map= parameter is then refused).
install_file "$DIR/mapserver.conf" <<EOF
# MapServer 8 config, written by upstream/generate.sh. Passed to mapserv
# as MAPSERVER_CONFIG_FILE by upstream/start.sh.
CONFIG
  ENV
    MS_MAPFILE "$DIR/world.map"
    MS_ERRORFILE "$DIR/mapserv-error.log"
  END
END
EOF

LAYER_SRS="EPSG:4326 EPSG:3857 EPSG:900913"
LAYER_EXTENT="-180 -85 180 85"

install_file "$DIR/world.map" <<EOF
# Synthetic world for the tile cache's upstream tests and benchmarks.
# Written by upstream/generate.sh; data made by upstream/gendata.
MAP
  NAME "world"
  STATUS ON
  SIZE 256 256
  MAXSIZE 4096
  UNITS DD
  EXTENT -180 -90 180 90
  IMAGECOLOR 255 255 255
  SHAPEPATH "$DIR/data"
  FONTSET "$DIR/fonts.txt"

  PROJECTION
    "init=epsg:4326"
  END

  # First format is the default. 24-bit RGB + alpha, so TRANSPARENT=TRUE
  # gives a transparent background.
  OUTPUTFORMAT
    NAME "png"
    DRIVER AGG/PNG
    MIMETYPE "image/png"
    IMAGEMODE RGBA
    EXTENSION "png"
  END
  # The same PNG for a tile cache's metatiles (tile_cache's
  # upstream_format), which the cache decodes and re-encodes anyway:
  # MapServer's zlib is much of a render (three quarters on test:relief).
  # "fast" is zlib level 1: a third less time on test:polygons, at 1.2x
  # the bytes. "raw" is not compressed at all: a quarter of the time on
  # test:relief, but 4 MB per 1024x1024 metatile, for loopback and fast
  # LANs only.
  OUTPUTFORMAT
    NAME "png_fast"
    DRIVER AGG/PNG
    MIMETYPE "image/png; mode=fast"
    IMAGEMODE RGBA
    EXTENSION "png"
    FORMATOPTION "COMPRESSION=1"
  END
  OUTPUTFORMAT
    NAME "png_raw"
    DRIVER AGG/PNG
    MIMETYPE "image/png; mode=raw"
    IMAGEMODE RGBA
    EXTENSION "png"
    FORMATOPTION "COMPRESSION=0"
  END
  OUTPUTFORMAT
    NAME "jpeg"
    DRIVER AGG/JPEG
    MIMETYPE "image/jpeg"
    IMAGEMODE RGB
    EXTENSION "jpg"
    FORMATOPTION "QUALITY=85"
  END

  WEB
    METADATA
      "wms_title"             "tilecache synthetic world"
      "wms_abstract"          "Synthetic regions, roads and places (upstream/gendata)"
      # No wms_onlineresource: MapServer builds its URLs from each request
      # (Host, X-Forwarded-Host/-Port/-Proto), as behind the cache it must.
      "wms_srs"               "$LAYER_SRS"
      "wms_enable_request"    "*"
      "wms_getmap_formatlist" "image/png,image/jpeg,image/png; mode=fast,image/png; mode=raw"
      # MapServer hides a layer's class group named like wms_style_name
      # (itself "default" when unset) from GetCapabilities, taking it as
      # inherited from the root layer. Set it to a name no group uses, so
      # test:polygons lists both "default" and "population".
      "wms_style_name"        "root-style-unused"
    END
  END

  SYMBOL
    NAME "circle"
    TYPE ELLIPSE
    FILLED TRUE
    POINTS 1 1 END
  END

  # ------------------------------------------------------------ regions
  # Two WMS styles: "default" (plain) and "population" (choropleth).
  LAYER
    NAME "test:polygons"
    TYPE POLYGON
    STATUS ON
    DATA "polygons"
    PROJECTION
      "init=epsg:4326"
    END
    METADATA
      "wms_title"         "Regions"
      "wms_srs"           "$LAYER_SRS"
      "wms_extent"        "$LAYER_EXTENT"
      "wms_include_items" "all"
      "gml_include_items" "all"
    END
    CLASSGROUP "default"
    CLASS
      NAME "Region"
      GROUP "default"
      STYLE
        COLOR 236 229 206
        OUTLINECOLOR 150 138 112
        WIDTH 1
      END
    END
    CLASS
      NAME "< 100 thousand"
      GROUP "population"
      EXPRESSION ([population] < 100000)
      STYLE COLOR 255 255 204 OUTLINECOLOR 110 110 110 WIDTH 0.8 END
    END
    CLASS
      NAME "100 thousand - 1 million"
      GROUP "population"
      EXPRESSION ([population] >= 100000 AND [population] < 1000000)
      STYLE COLOR 254 217 118 OUTLINECOLOR 110 110 110 WIDTH 0.8 END
    END
    CLASS
      NAME "1 - 10 million"
      GROUP "population"
      EXPRESSION ([population] >= 1000000 AND [population] < 10000000)
      STYLE COLOR 253 141 60 OUTLINECOLOR 110 110 110 WIDTH 0.8 END
    END
    CLASS
      NAME "10 - 100 million"
      GROUP "population"
      EXPRESSION ([population] >= 10000000 AND [population] < 100000000)
      STYLE COLOR 227 26 28 OUTLINECOLOR 110 110 110 WIDTH 0.8 END
    END
    CLASS
      NAME ">= 100 million"
      GROUP "population"
      EXPRESSION ([population] >= 100000000)
      STYLE COLOR 128 0 38 OUTLINECOLOR 110 110 110 WIDTH 0.8 END
    END
  END

  # -------------------------------------------------------------- roads
  # One WMS style ("default"); classes by kind.
  LAYER
    NAME "test:roads"
    TYPE LINE
    STATUS ON
    DATA "roads"
    CLASSITEM "kind"
    PROJECTION
      "init=epsg:4326"
    END
    METADATA
      "wms_title"         "Roads"
      "wms_srs"           "$LAYER_SRS"
      "wms_extent"        "$LAYER_EXTENT"
      "wms_include_items" "all"
      "gml_include_items" "all"
    END
    CLASS
      NAME "Motorway"
      EXPRESSION "motorway"
      STYLE COLOR 120 60 0 WIDTH 3.5 END
      STYLE COLOR 240 140 40 WIDTH 2.2 END
    END
    CLASS
      NAME "Primary"
      EXPRESSION "primary"
      STYLE COLOR 200 160 30 WIDTH 1.8 END
    END
    CLASS
      NAME "Secondary"
      EXPRESSION "secondary"
      STYLE COLOR 110 110 110 WIDTH 1.2 END
    END
    CLASS
      NAME "Track"
      EXPRESSION "track"
      STYLE COLOR 130 100 70 WIDTH 0.8 PATTERN 4 3 END END
    END
  END

  # ------------------------------------------------------------- places
  # Points labelled with their name (DejaVu Sans); one WMS style. Each
  # label has one position (right of its point) and is drawn whatever it
  # overlaps (FORCE): with POSITION AUTO, MapServer put a label near a
  # metatile's edge on another side of its point than the neighbouring
  # metatile did (each sees other labels around it), and the tile cache
  # showed a piece of it cut at the edge however wide the gutter. QGIS
  # Server's project places its labels the same way (upstream/qgis/).
  LAYER
    NAME "test:places"
    TYPE POINT
    STATUS ON
    DATA "places"
    LABELITEM "name"
    PROJECTION
      "init=epsg:4326"
    END
    METADATA
      "wms_title"         "Places"
      "wms_srs"           "$LAYER_SRS"
      "wms_extent"        "$LAYER_EXTENT"
      "wms_include_items" "all"
      "gml_include_items" "all"
    END
    CLASS
      NAME "City"
      EXPRESSION ([population] >= 1000000)
      STYLE SYMBOL "circle" SIZE 7 COLOR 180 0 0 OUTLINECOLOR 255 255 255 END
      LABEL
        FONT "sans-bold"
        SIZE 9
        COLOR 20 20 20
        OUTLINECOLOR 255 255 255
        OUTLINEWIDTH 2
        POSITION CR
        FORCE TRUE
        PARTIALS FALSE
        BUFFER 2
      END
    END
    CLASS
      NAME "Town"
      STYLE SYMBOL "circle" SIZE 4 COLOR 40 40 40 END
      LABEL
        FONT "sans"
        SIZE 7
        COLOR 40 40 40
        OUTLINECOLOR 255 255 255
        OUTLINEWIDTH 2
        POSITION CR
        FORCE TRUE
        PARTIALS FALSE
        BUFFER 2
      END
    END
  END

  # ------------------------------------------------------------- relief
  # A shaded, tinted elevation raster (upstream/gendata/relief.go) covering
  # the whole world: opaque, thousands of colours per tile. Bilinear
  # resampling, as hillshades are usually served; GDAL's overviews serve the
  # small scales.
  LAYER
    NAME "test:relief"
    TYPE RASTER
    STATUS ON
    DATA "relief.tif"
    PROCESSING "RESAMPLE=BILINEAR"
    PROJECTION
      "init=epsg:4326"
    END
    METADATA
      "wms_title"         "Shaded relief"
      "wms_srs"           "$LAYER_SRS"
      "wms_extent"        "-180 -90 180 90"
    END
  END

  # ------------------------------------------------------------- mosaic
  # 50,000 small overlapping blobs, each filled with its own colour (the
  # colour column, "#rrggbb"), antialiased: a dense thematic map with
  # thousands of colours per tile that no palette holds. Meant to be drawn
  # opaque (TRANSPARENT=FALSE: the white IMAGECOLOR shows between blobs).
  LAYER
    NAME "test:mosaic"
    TYPE POLYGON
    STATUS ON
    DATA "mosaic"
    PROJECTION
      "init=epsg:4326"
    END
    METADATA
      "wms_title"         "Mosaic"
      "wms_srs"           "$LAYER_SRS"
      "wms_extent"        "$LAYER_EXTENT"
    END
    CLASS
      NAME "Blob"
      STYLE
        COLOR [colour]
        OUTLINECOLOR 40 40 40
        WIDTH 0.4
      END
    END
  END
END
EOF

echo "generate.sh: $DIR ready (mapfile $DIR/world.map)"
