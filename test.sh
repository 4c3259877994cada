#!/usr/bin/env bash
# The README's second command: the whole test suite.
# Installs MapServer and QGIS Server for the end-to-end tests, GDAL, OWSLib and QGIS for the
# GIS client tests and Chromium for the browser tests (Debian packages;
# needs root), then runs every Go test: unit tests, the S3 store against a
# real MinIO, the caddytest suite in a real Caddy (in-process, and as a
# process it kills) once per tile store (Badger, S3, S3 with a local
# tier), three Caddy processes as one cluster (caddytest/cluster: one
# shared storage directory, MinIO, a fake WMS and MapServer), the
# end-to-end tests against the real MapServer and QGIS Server, and the pages in a
# headless browser.
set -euo pipefail
cd "$(dirname "$0")"
bash upstream/install.sh
# Debian's Chromium for the browser tests (headless, driven by chromedp),
# GDAL, OWSLib and QGIS for Debian's Python for the GIS client tests, and
# libjpeg-turbo's jpegtran and djpeg, which the JPEG Huffman pass
# (module/imaging/jpegopt) is checked against.
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v jpegtran >/dev/null && command -v djpeg >/dev/null || need+=(libjpeg-turbo-progs)
/usr/bin/python3 -c 'import osgeo.gdal, owslib, numpy' 2>/dev/null || need+=(gdal-bin python3-gdal python3-owslib python3-numpy)
/usr/bin/python3 -c 'import qgis.core' 2>/dev/null || need+=(python3-qgis)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" > /dev/null
fi
# MinIO, a real S3 server, for the S3 store's tests: built from its Go
# module at a pinned version into ~/.cache (about 2 minutes, once).
TILECACHE_MINIO=$(bash module/store/s3store/s3test/install.sh)
export TILECACHE_MINIO
# The timeouts only end a hung run: on a quiet machine each step takes
# minutes, beside CPU hogs the caddytest package took 49 minutes
# (docs/development.md, "The suite on a busy machine"), so an hour would
# be a speed assumption of its own.
go test -count=1 -timeout 150m ./...
# The Caddy-level suite again with every cache's tiles in S3 (MinIO), then
# in S3 behind a local tier: the same tests, table-driven by store
# (caddytest/stores_test.go), but those of outside clients (QGIS, GDAL,
# browsers: clientsOnce), whose view of the HTTP interface the store
# does not change.
for s in s3 s3-local; do
  TILECACHE_TEST_STORE=$s go test -count=1 -timeout 150m ./caddytest/
done
