#!/usr/bin/env bash
# The README's second command: the whole test suite.
# Installs MapServer for the end-to-end tests (Debian packages; needs root or
# sudo), then runs every Go test: unit tests, the caddytest suite in a real
# in-process Caddy, and the end-to-end tests against the real MapServer.
set -euo pipefail
cd "$(dirname "$0")"
bash upstream/install.sh
go test -count=1 -timeout 25m ./...
