// The tile_cache demo page: a map preview of one layer in one gridset,
// built from info.json. Tiles are requested exactly as the gridset cuts
// them (WMS-C), so every request the map makes is one the cache can answer.
import 'ol/ol.css';
import './style.css';

import Map from 'ol/Map.js';
import View from 'ol/View.js';
import TileLayer from 'ol/layer/Tile.js';
import TileWMS from 'ol/source/TileWMS.js';
import WMTS, {optionsFromCapabilities} from 'ol/source/WMTS.js';
import WMTSCapabilities from 'ol/format/WMTSCapabilities.js';
import TileGrid from 'ol/tilegrid/TileGrid.js';
import TileState from 'ol/TileState.js';
import Projection from 'ol/proj/Projection.js';
import {addProjection, get as getProjection} from 'ol/proj.js';
import {defaults as defaultControls, MousePosition, ScaleLine} from 'ol/control.js';
import {createStringXY} from 'ol/coordinate.js';

const $ = (id) => document.getElementById(id);

// Service URLs in info.json are relative to the page (document.baseURI,
// which a <base> element sets when the page is served without its slash).
function resolve(u) {
  const url = new URL(u, document.baseURI);
  url.username = '';
  url.password = '';
  return url.href;
}

function option(value, label, selected) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = label;
  o.selected = selected;
  return o;
}

function fillSelect(sel, values, current, label = (v) => v) {
  sel.replaceChildren(...values.map((v) => option(v, label(v), v === current)));
  sel.disabled = values.length < 2;
}

// The projection of a gridset: OpenLayers knows EPSG:4326 and EPSG:3857
// (with its aliases EPSG:900913, EPSG:102100, ...). Any other SRS gets a
// plain projection of its own: the view uses the gridset's projection, so
// nothing is ever reprojected and no proj4 definition is needed.
function projectionFor(gs) {
  let p = getProjection(gs.srs);
  if (!p) {
    p = new Projection({code: gs.srs, units: 'm', extent: gs.extent});
    addProjection(p);
  }
  return p;
}

// The gridset's own tile grid: same origin corner, resolutions, tile size
// and extent, up to the layer's last cached level. Beyond it the map
// magnifies the last level instead of asking for tiles the cache passes
// through.
function tileGridFor(gs) {
  const [minx, miny, , maxy] = gs.extent;
  return new TileGrid({
    extent: gs.extent,
    origin: gs.topLeft ? [minx, maxy] : [minx, miny],
    resolutions: gs.resolutions.slice(0, gs.maxZoom + 1),
    minZoom: gs.minZoom,
    tileSize: [gs.tileWidth, gs.tileHeight],
  });
}

// Tile statistics of the current source, with the cache's verdict per tile
// (geowebcache-cache-result: HIT, MISS, ...), read from the tile responses.
const stats = {loading: 0, loaded: 0, errors: 0, results: {}};

function resetStats() {
  stats.loading = 0;
  stats.loaded = 0;
  stats.errors = 0;
  stats.results = {};
  showStats();
}

function showStats() {
  const el = $('stats');
  const parts = Object.keys(stats.results)
    .sort()
    .map((k) => `${k} ${stats.results[k]}`);
  el.textContent =
    `Tiles loaded: ${stats.loaded}` +
    (parts.length ? ` (cache: ${parts.join(', ')})` : '') +
    (stats.errors ? `, failed: ${stats.errors}` : '') +
    (stats.loading ? `, loading: ${stats.loading}` : '');
  el.dataset.loaded = stats.loaded;
  el.dataset.loading = stats.loading;
  el.dataset.errors = stats.errors;
  el.dataset.hit = stats.results.HIT || 0;
  el.dataset.miss = stats.results.MISS || 0;
}

// Loads a tile with fetch() instead of an <img> src, to read its headers.
function tileLoad(tile, src) {
  const img = tile.getImage();
  stats.loading++;
  showStats();
  fetch(src, {credentials: 'same-origin'})
    .then(async (r) => {
      const result = r.headers.get('geowebcache-cache-result') || 'uncached';
      stats.results[result] = (stats.results[result] || 0) + 1;
      if (!r.ok) {
        throw new Error(`HTTP ${r.status}`);
      }
      const type = r.headers.get('content-type') || '';
      if (!type.startsWith('image/')) {
        throw new Error(`not an image: ${type}`);
      }
      const url = URL.createObjectURL(await r.blob());
      img.addEventListener('load', () => URL.revokeObjectURL(url), {once: true});
      img.addEventListener('error', () => URL.revokeObjectURL(url), {once: true});
      img.src = url;
      stats.loaded++;
    })
    .catch(() => {
      stats.errors++;
      tile.setState(TileState.ERROR);
    })
    .finally(() => {
      stats.loading--;
      showStats();
    });
}

let info = null;
let map = null;
let capabilities = null; // the WMTS capabilities, parsed, once
let generation = 0; // drops answers meant for an earlier selection

const state = {layer: '', gridset: '', format: '', style: '', mode: 'wms'};

function readHash() {
  const q = new URLSearchParams(location.hash.replace(/^#/, ''));
  for (const k of Object.keys(state)) {
    if (q.has(k)) {
      state[k] = q.get(k);
    }
  }
}

function writeHash() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) {
    q.set(k, v);
  }
  history.replaceState(null, '', '#' + q.toString());
}

// normalize makes the selection valid for info: an unknown layer, gridset,
// format or style falls back to the first one.
function normalize() {
  const layer = info.layers.find((l) => l.name === state.layer) || info.layers[0];
  state.layer = layer.name;
  const gridsets = layer.gridsets || [];
  if (!gridsets.some((g) => g.name === state.gridset)) {
    state.gridset = gridsets.length ? gridsets[0].name : '';
  }
  const formats = layer.formats || [];
  if (!formats.includes(state.format)) {
    state.format = formats[0] || 'image/png';
  }
  const styles = layer.styles || [];
  if (!styles.includes(state.style)) {
    state.style = styles[0] || '';
  }
  if (state.mode !== 'wmts' || !info.wmtsUrl) {
    state.mode = 'wms';
  }
  return layer;
}

function showControls(layer) {
  fillSelect($('sel-layer'), info.layers.map((l) => l.name), state.layer);
  fillSelect($('sel-gridset'), (layer.gridsets || []).map((g) => g.name), state.gridset, (name) => {
    const g = layer.gridsets.find((x) => x.name === name);
    return g.srs && g.srs !== name ? `${name} (${g.srs})` : name;
  });
  fillSelect($('sel-format'), layer.formats || [], state.format);
  const styles = layer.styles || [];
  $('sel-style').parentElement.hidden = styles.length === 0;
  fillSelect($('sel-style'), styles, state.style, (s) => (s === '' ? '(default)' : s));
  const modes = info.wmtsUrl ? ['wms', 'wmts'] : ['wms'];
  fillSelect($('sel-mode'), modes, state.mode, (m) => (m === 'wms' ? 'WMS-C' : 'WMTS'));
  for (const row of document.querySelectorAll('tr[data-layer]')) {
    row.classList.toggle('current', row.dataset.layer === state.layer && row.dataset.gridset === state.gridset);
  }
}

function setStatus(text, error) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', !!error);
}

function wmsSource(layer, gs, projection) {
  const params = {
    LAYERS: layer.name,
    FORMAT: state.format,
    STYLES: state.style,
    VERSION: '1.1.1',
    TILED: true,
    // The layer's own transparency (OpenLayers asks for TRANSPARENT=true
    // unless told otherwise): the cache ignores TRANSPARENT, but levels
    // outside the cached ones go to the upstream, and should look alike.
    TRANSPARENT: layer.transparent,
  };
  return new TileWMS({
    url: resolve(info.wmsUrl),
    params,
    projection,
    tileGrid: tileGridFor(gs),
    hidpi: false,
    wrapX: false,
    transition: 0,
    tileLoadFunction: tileLoad,
  });
}

async function wmtsSource(layer, gs, projection) {
  if (!capabilities) {
    const u = new URL(resolve(info.wmtsUrl));
    u.searchParams.set('SERVICE', 'WMTS');
    u.searchParams.set('REQUEST', 'GetCapabilities');
    const r = await fetch(u.href, {credentials: 'same-origin'});
    if (!r.ok) {
      throw new Error(`WMTS GetCapabilities: HTTP ${r.status}`);
    }
    capabilities = new WMTSCapabilities().read(await r.text());
  }
  const opts = optionsFromCapabilities(capabilities, {
    layer: layer.name,
    matrixSet: gs.name,
    format: state.format,
    style: state.style || undefined,
    projection,
  });
  if (!opts) {
    throw new Error(`the WMTS capabilities have no layer ${layer.name} in ${gs.name}`);
  }
  return new WMTS({...opts, wrapX: false, transition: 0, tileLoadFunction: tileLoad});
}

async function showMap() {
  const gen = ++generation;
  const layer = normalize();
  writeHash();
  showControls(layer);
  const gs = (layer.gridsets || []).find((g) => g.name === state.gridset);
  if (!gs) {
    setStatus(`Layer ${layer.name} has no gridset.`, true);
    return;
  }
  const projection = projectionFor(gs);
  let source;
  try {
    source = state.mode === 'wmts' ? await wmtsSource(layer, gs, projection) : wmsSource(layer, gs, projection);
  } catch (e) {
    if (gen === generation) {
      setStatus(String(e.message || e), true);
    }
    return;
  }
  if (gen !== generation) {
    return;
  }
  resetStats();
  const extent = gs.coverage || gs.extent;
  const view = new View({
    projection,
    resolutions: gs.resolutions,
    minZoom: gs.minZoom,
    maxZoom: Math.min(gs.resolutions.length - 1, gs.maxZoom + 2),
    constrainResolution: true,
    extent: gs.extent,
    constrainOnlyCenter: true,
    showFullExtent: true,
  });
  const tiles = new TileLayer({source, extent, preload: 0});
  map.setLayers([tiles]);
  map.setView(view);
  view.on('change:resolution', () => {
    $('zoom').textContent = `zoom ${view.getZoom()}`;
  });
  // The level whose resolution is nearest to showing all of the coverage.
  view.fit(extent, {size: map.getSize(), nearest: true});
  $('zoom').textContent = `zoom ${view.getZoom()}`;
  $('map').dataset.rendered = '0';
  const levels = gs.minZoom === gs.maxZoom ? `level ${gs.minZoom}` : `levels ${gs.minZoom}–${gs.maxZoom}`;
  setStatus(
    `${layer.name} in ${gs.name} (${gs.srs}), ${state.format}, ${levels}, ` +
      `${gs.tileWidth}×${gs.tileHeight} tiles, origin ${gs.topLeft ? 'top left' : 'bottom left'}, ` +
      (state.mode === 'wmts' ? 'WMTS' : 'WMS-C') + '.',
  );
}

function init() {
  const mapEl = $('map');
  // For debugging from the console (and tests): the map and what it shows.
  window.tilecacheDemo = {map: () => map, info: () => info, state};
  map = new Map({
    target: mapEl,
    controls: defaultControls().extend([
      new ScaleLine(),
      new MousePosition({
        coordinateFormat: createStringXY(5),
        className: 'mouse-position',
        target: $('mouse'),
        placeholder: '\u00a0',
      }),
    ]),
  });
  map.on('rendercomplete', () => {
    mapEl.dataset.rendered = String(Number(mapEl.dataset.rendered || 0) + 1);
  });
  for (const [id, key] of [
    ['sel-layer', 'layer'],
    ['sel-gridset', 'gridset'],
    ['sel-format', 'format'],
    ['sel-style', 'style'],
    ['sel-mode', 'mode'],
  ]) {
    $(id).addEventListener('change', (e) => {
      state[key] = e.target.value;
      if (key === 'layer') {
        state.gridset = state.format = state.style = '';
      }
      showMap();
    });
  }
  window.addEventListener('hashchange', () => {
    readHash();
    showMap();
    $('preview').scrollIntoView({block: 'start'});
  });
  readHash();
  showMap();
}

async function main() {
  try {
    const r = await fetch(resolve('info.json'), {credentials: 'same-origin'});
    if (!r.ok) {
      throw new Error(`info.json: HTTP ${r.status}`);
    }
    info = await r.json();
  } catch (e) {
    $('preview').hidden = false;
    setStatus(`The map preview is unavailable: ${e.message || e}`, true);
    return;
  }
  info.layers = info.layers || [];
  $('preview').hidden = false;
  if (info.layers.length === 0) {
    $('map').hidden = true;
    $('controls').hidden = true;
    setStatus('This cache has no layers.', true);
    return;
  }
  init();
}

main();
