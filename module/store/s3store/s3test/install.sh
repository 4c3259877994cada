#!/usr/bin/env bash
# Builds MinIO, the S3 server the S3 tests run, from its Go module at a
# pinned version into a cache folder, unless it is there already (about
# 2 minutes and 150 MB the first time). Prints the binary's path.
set -euo pipefail
VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
DIR=${TILECACHE_CACHE:-$HOME/.cache/caddy-tilecache}/minio
BIN=$DIR/bin/minio
if [ ! -x "$BIN" ] || [ "$(cat "$DIR/version" 2>/dev/null)" != "$VERSION" ]; then
  echo "building MinIO $VERSION into $DIR (about 2 minutes)" >&2
  mkdir -p "$DIR"
  (cd "$DIR" && GOBIN="$DIR/bin" go install "github.com/minio/minio@$VERSION") >&2
  echo "$VERSION" > "$DIR/version"
fi
echo "$BIN"
