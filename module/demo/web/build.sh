#!/usr/bin/env bash
# Rebuilds the demo page's committed assets (../assets: index.html, app.js,
# app.css, THIRD_PARTY_LICENSES.txt) from src/, with the OpenLayers and
# esbuild versions pinned in package-lock.json. Needs node and npm with the
# npm registry (npm ci installs node_modules/, which is not committed).
# The Go code embeds ../assets: run this after changing src/, then commit
# ../assets.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x node_modules/.bin/esbuild ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund
fi
out=../assets
meta=$(mktemp)
trap 'rm -f "$meta"' EXIT
mkdir -p "$out"
# One IIFE bundle; the CSS it imports (ol/ol.css, src/style.css) becomes
# app.css beside it. No source maps: the assets are embedded in Caddy.
node_modules/.bin/esbuild src/main.js --bundle --minify --format=iife --target=es2020 \
	--legal-comments=none --charset=utf8 --log-level=warning \
	--metafile="$meta" --outfile="$out/app.js"
cp src/index.html "$out/index.html"
# The licences of every package the bundle contains.
node - "$meta" "$out/THIRD_PARTY_LICENSES.txt" <<'JS'
const fs = require('fs');
const path = require('path');
const [meta, dest] = process.argv.slice(2);
const inputs = Object.keys(JSON.parse(fs.readFileSync(meta, 'utf8')).inputs);
const pkgs = new Set();
for (const f of inputs) {
  const m = f.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) pkgs.add(m[1]);
}
let text = 'The demo page\'s app.js and app.css bundle these npm packages:\n';
for (const p of [...pkgs].sort()) {
  const dir = path.join('node_modules', p);
  const pj = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const lic = fs.readdirSync(dir).find((n) => /^licen[cs]e/i.test(n));
  text += `\n==== ${p} ${pj.version} (${pj.license || 'see below'}) ====\n\n`;
  text += lic ? fs.readFileSync(path.join(dir, lic), 'utf8').trim() + '\n' : '(no licence file in the package)\n';
}
fs.writeFileSync(dest, text);
JS
ls -l "$out"
