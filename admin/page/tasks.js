// The task page: a client of the REST interface only. Every URL is relative
// to the page (<mount>/ or <mount>/tasks), so it works under any prefix.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const FAST = 1000; // poll period while tasks run or were just submitted
  const SLOW = 5000; // otherwise
  const RATE_WINDOW = 10000; // ms of samples the rate is measured over
  const KEEP_FINISHED = 50; // finished tasks shown and remembered

  // api resolves a REST path against the page, without any user:password@
  // of the page's own URL (fetch refuses URLs with credentials).
  function api(p) {
    const u = new URL(p, document.baseURI);
    u.username = '';
    u.password = '';
    return u.href;
  }

  class HTTPError extends Error {
    constructor(path, status, text) {
      super(`${path}: HTTP ${status}${text ? ': ' + text.trim() : ''}`);
      this.status = status;
    }
  }

  async function request(path, opts = {}) {
    const r = await fetch(api(path), {credentials: 'same-origin', cache: 'no-store', ...opts});
    if (!r.ok) {
      throw new HTTPError(path, r.status, await r.text());
    }
    return r;
  }

  const getJSON = async (path) => (await request(path)).json();

  // The tasks this page knows, by id: from the listing, from its own
  // submissions, and (for the finished ones) from earlier visits.
  const tasks = new Map();
  const storeKey = 'tile_cache_tasks:' + location.pathname.replace(/\/tasks$/, '/');
  let layers = [];
  let layersLoaded = false;
  let polls = 0;
  let timer = 0;
  let fastUntil = 0;

  function task(id) {
    let t = tasks.get(id);
    if (!t) {
      t = {id, info: null, active: false, final: false, needsInfo: true, samples: []};
      tasks.set(id, t);
    }
    return t;
  }

  function save() {
    const ids = [...tasks.values()].filter((t) => t.info || t.active).map((t) => t.id);
    try {
      localStorage.setItem(storeKey, JSON.stringify(ids.slice(-KEEP_FINISHED * 2)));
    } catch (e) {
      // storage may be off: the list then lasts as long as the page
    }
  }

  function restore() {
    try {
      for (const id of JSON.parse(localStorage.getItem(storeKey) || '[]')) {
        if (Number.isSafeInteger(id) && id > 0) {
          task(id);
        }
      }
    } catch (e) {
      // ignore a broken entry
    }
  }

  function showError(msg) {
    const el = $('error');
    el.textContent = msg || '';
    el.hidden = !msg;
  }

  async function refreshInfo(t) {
    try {
      t.info = await getJSON(`rest/tasks/${t.id}.json`);
      t.needsInfo = false;
      t.final = t.info.status === 2 || t.info.status === -1;
    } catch (e) {
      if (e.status === 404) {
        tasks.delete(t.id); // forgotten by the server
      } else {
        throw e;
      }
    }
  }

  // A sample of a running task's progress, for its rate.
  function sample(t, now) {
    if (t.status !== 1) {
      t.samples = [];
      return;
    }
    t.samples.push({at: now, processed: t.processed});
    while (t.samples.length > 2 && now - t.samples[1].at >= RATE_WINDOW) {
      t.samples.shift();
    }
  }

  // rate is the task's tiles per second over the last samples, or the
  // server's own average (tilesPerSecond) until there are enough.
  function rate(t) {
    const s = t.samples;
    if (s.length >= 2) {
      const dt = (s[s.length - 1].at - s[0].at) / 1000;
      if (dt >= 0.9) {
        return (s[s.length - 1].processed - s[0].processed) / dt;
      }
    }
    return t.info && t.info.tilesPerSecond > 0 ? t.info.tilesPerSecond : null;
  }

  async function poll() {
    clearTimeout(timer);
    let listing;
    try {
      listing = (await getJSON('rest/seed.json'))['long-array-array'] || [];
      const now = performance.now();
      const listed = new Set();
      for (const [processed, total, remaining, id, status] of listing) {
        listed.add(id);
        const t = task(id);
        const wasActive = t.active;
        Object.assign(t, {processed, total, remaining, status, active: true, final: false});
        if (!wasActive) {
          t.needsInfo = true;
        }
        sample(t, now);
      }
      const work = [];
      for (const t of tasks.values()) {
        if (t.active && !listed.has(t.id)) {
          t.active = false; // finished (or killed) since the last poll
          t.needsInfo = true;
        }
        // A killed running task leaves the listing at once but is RUNNING
        // until its workers have stopped: its resource is read until final.
        if (t.needsInfo || (!t.active && !t.final) || (t.active && polls % 5 === 0)) {
          work.push(refreshInfo(t));
        }
      }
      await Promise.all(work);
      if (!layersLoaded) {
        await loadLayers();
      }
      await loadStorage();
      polls++;
      showError('');
      render();
      save();
      const d = new Date();
      $('updated').textContent = `Updated ${d.toLocaleTimeString()}`;
    } catch (e) {
      showError(`Could not reach the REST interface: ${e.message}`);
    }
    const stopping = [...tasks.values()].some((t) => !t.active && !t.final);
    const busy = (listing && listing.length > 0) || stopping || performance.now() < fastUntil;
    timer = setTimeout(poll, busy ? FAST : SLOW);
  }

  function pollSoon() {
    fastUntil = performance.now() + 5000;
    clearTimeout(timer);
    timer = setTimeout(poll, 50);
  }

  // --- rendering ---

  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'class') {
        e.className = v;
      } else if (k === 'text') {
        e.textContent = v;
      } else {
        e.setAttribute(k, v);
      }
    }
    e.append(...children);
    return e;
  }

  function setCells(row, values) {
    values.forEach((v, i) => {
      const cell = row.cells[i];
      if (v instanceof Node) {
        if (cell.firstChild !== v) {
          cell.replaceChildren(v);
        }
      } else if (cell.textContent !== String(v)) {
        cell.textContent = v;
      }
    });
  }

  const fmtInt = (n) => (n == null ? '' : Number(n).toLocaleString('en-US'));

  function fmtDuration(s) {
    if (s == null || !isFinite(s)) {
      return '';
    }
    s = Math.round(s);
    if (s < 60) {
      return `${s} s`;
    }
    if (s < 3600) {
      return `${Math.floor(s / 60)} min ${s % 60} s`;
    }
    if (s < 86400) {
      return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    }
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  function what(info) {
    if (!info) {
      return '';
    }
    const levels = info.zoomStart === info.zoomStop ? `level ${info.zoomStart}` : `levels ${info.zoomStart}–${info.zoomStop}`;
    return `${info.gridSetId}, ${info.format}, ${levels}`;
  }

  // syncRows keeps one row per id in tbody, in the order of ids; make
  // builds a new row. Rows are updated in place, so that a button under
  // the pointer survives the next poll.
  function syncRows(tbody, ids, make) {
    const rows = new Map([...tbody.rows].map((r) => [Number(r.dataset.taskId || r.dataset.key), r]));
    let prev = null;
    for (const id of ids) {
      let row = rows.get(id);
      rows.delete(id);
      if (!row) {
        row = make(id);
      }
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (row !== want) {
        tbody.insertBefore(row, want);
      }
      prev = row;
    }
    for (const r of rows.values()) {
      r.remove();
    }
  }

  function killButton(label, title, onClick) {
    const b = el('button', {type: 'button', class: 'danger', title, text: label});
    b.addEventListener('click', onClick);
    return b;
  }

  function renderActive() {
    // Listed tasks, and killed ones whose workers are still stopping.
    const active = [...tasks.values()].filter((t) => t.active || (t.info && !t.final)).sort((a, b) => a.id - b.id);
    const tbody = $('tasks').tBodies[0];
    syncRows(tbody, active.map((t) => t.id), (id) => {
      const row = el('tr', {'data-task-id': id});
      for (let i = 0; i < 9; i++) {
        row.append(el('td'));
      }
      row.cells[5].append(el('progress', {max: 1, value: 0}), el('span', {class: 'pct'}));
      row.cells[5].className = 'progress-col';
      row.cells[6].className = row.cells[7].className = 'num';
      const b = killButton('Kill', `Kill task ${id}`, () => killTask(id));
      b.disabled = true;
      row.cells[8].append(b, ' ', areaButton(id));
      return row;
    });
    for (const t of active) {
      const row = tbody.querySelector(`tr[data-task-id="${t.id}"]`);
      const info = t.info;
      if (!t.active) {
        // Stopping: the listing has it no more; its resource tells.
        Object.assign(t, {processed: info.processed, total: info.total, remaining: info.remaining, status: -2});
        t.samples = [];
      }
      const status = t.status === 1 ? 'RUNNING' : t.status === 0 ? 'PENDING' : 'STOPPING';
      row.dataset.status = status;
      const bar = row.cells[5].firstChild;
      bar.max = Math.max(t.total, 1);
      bar.value = t.total > 0 ? t.processed : 0;
      const pct = t.total > 0 ? Math.floor((100 * t.processed) / t.total) : 0;
      let progress = `${fmtInt(t.processed)} / ${fmtInt(t.total)} (${pct}%)`;
      if (info && info.failedTiles > 0) {
        progress += `, ${fmtInt(info.failedTiles)} failed`;
      }
      row.cells[5].lastChild.textContent = progress;
      const r = t.status === 1 ? rate(t) : null;
      const left = r > 0 ? fmtDuration(t.remaining / r) : t.status === 1 ? '…' : '';
      setCells(row, [
        t.id,
        info ? info.layer : '…',
        info ? info.type : '',
        what(info),
        info && info.threadCount > 1 && t.status === 1 ? `${status} (${info.threadCount} threads)` : status,
      ]);
      row.cells[6].textContent = r == null ? '' : r >= 10 ? Math.round(r).toLocaleString('en-US') : r.toFixed(1);
      row.cells[7].textContent = left;
      const b = row.cells[8].firstChild;
      b.disabled = !info || !t.active;
      row.cells[8].lastChild.hidden = !(info && info.geometry);
    }
    $('no-tasks').hidden = active.length > 0;
    $('tasks').hidden = active.length === 0;
  }

  function renderFinished() {
    const done = [...tasks.values()]
      .filter((t) => t.final && t.info)
      .sort((a, b) => b.id - a.id)
      .slice(0, KEEP_FINISHED);
    const tbody = $('finished').tBodies[0];
    syncRows(tbody, done.map((t) => t.id), (id) => {
      const row = el('tr', {'data-task-id': id});
      for (let i = 0; i < 11; i++) {
        row.append(el('td'));
      }
      row.cells[5].className = row.cells[6].className = row.cells[7].className = 'num';
      row.cells[10].append(areaButton(id));
      return row;
    });
    for (const t of done) {
      const info = t.info;
      const row = tbody.querySelector(`tr[data-task-id="${t.id}"]`);
      row.dataset.state = info.state;
      const started = info.started ? Date.parse(info.started) : null;
      const finished = info.finished ? Date.parse(info.finished) : null;
      setCells(row, [
        t.id,
        info.layer,
        info.type,
        what(info),
        info.state,
        `${fmtInt(info.processed)} / ${fmtInt(info.total)}`,
        info.failedTiles ? fmtInt(info.failedTiles) : '',
        started && finished ? fmtDuration((finished - started) / 1000) : '',
        finished ? new Date(finished).toLocaleTimeString() : '',
        info.abortReason || info.lastError || '',
      ]);
      row.cells[4].className = 'state state-' + info.state.toLowerCase();
      row.cells[10].firstChild.hidden = !info.geometry;
    }
    $('no-finished').hidden = done.length > 0;
    $('finished').hidden = done.length === 0;
  }

  function renderLayers() {
    const tbody = $('layers').tBodies[0];
    const count = {};
    for (const t of tasks.values()) {
      if (t.active && t.info) {
        const c = (count[t.info.layer] = count[t.info.layer] || {running: 0, pending: 0});
        c[t.status === 1 ? 'running' : 'pending']++;
      }
    }
    syncRows(tbody, layers.map((l, i) => i), (i) => {
      const l = layers[i];
      const row = el('tr', {'data-key': i, 'data-layer': l.name});
      for (let j = 0; j < 6; j++) {
        row.append(el('td'));
      }
      row.cells[3].className = row.cells[4].className = 'num';
      row.cells[5].append(
        killButton('Kill running', `Kill every running task of layer ${l.name}`, () => kill(l.name, 'running')),
        ' ',
        killButton('Kill pending', `Kill every pending task of layer ${l.name}`, () => kill(l.name, 'pending')),
      );
      return row;
    });
    layers.forEach((l, i) => {
      const row = tbody.rows[i];
      const c = count[l.name] || {running: 0, pending: 0};
      setCells(row, [
        l.name,
        l.gridsets.map((g) => `${g.name} (${g.minZoom}–${g.maxZoom})`).join(', '),
        l.formats.join(', '),
        c.running || '',
        c.pending || '',
      ]);
    });
  }

  function render() {
    renderActive();
    renderFinished();
    renderLayers();
    renderTotal();
  }

  // --- storage ---

  // The Storage panel: rest/usage.json, read at most every STORAGE_EVERY
  // (it reads every page record of the store). Absent when the cache does
  // not count usage: the page says so (data-usage), or rest/usage.json
  // answers 404 (a reload turned it off; asked again after STORAGE_RETRY).
  const STORAGE_EVERY = 5000;
  const STORAGE_RETRY = 60000;
  let storageNext = 0;

  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  function fmtBytes(n) {
    if (n == null) {
      return '';
    }
    let i = 0;
    while (n >= 1024 && i < UNITS.length - 1) {
      n /= 1024;
      i++;
    }
    return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${UNITS[i]}`;
  }

  // quotaCell is a bar of bytes against limit (bytes), amber past the low
  // watermark, and the figures; text alone without a limit.
  function quotaCell(cell, bytes, limit, watermark, none) {
    if (!limit) {
      cell.replaceChildren(none);
      return;
    }
    const m = el('meter', {min: 0, max: limit, low: 0, high: limit * watermark, optimum: 0});
    m.value = Math.min(bytes, limit);
    const pct = Math.round((bytes / limit) * 100);
    const text = el('span', {text: `${fmtBytes(bytes)} of ${fmtBytes(limit)} (${pct}%)`});
    if (bytes > limit) {
      text.className = 'over';
    }
    m.title = text.textContent;
    cell.replaceChildren(m, text);
  }

  const fmtEvicted = (e) => (e && e.tiles > 0 ? `${fmtInt(e.tiles)} (${fmtBytes(e.bytes)})` : e ? '0' : '');
  const fmtWhen = (s) => (s ? new Date(s).toLocaleString() : '');

  async function loadStorage() {
    const now = performance.now();
    // The server marks the panel when the cache counts usage.
    if (now < storageNext || $('storage-section').dataset.usage !== 'on') {
      return;
    }
    storageNext = now + STORAGE_EVERY;
    let usage;
    try {
      usage = await getJSON('rest/usage.json');
    } catch (e) {
      if (e.status === 404) {
        $('storage-section').hidden = true;
        storageNext = now + STORAGE_RETRY;
      } else {
        $('storage-msg').textContent = `Could not read the usage: ${e.message}`;
      }
      return;
    }
    renderStorage(usage);
  }

  function renderStorage(usage) {
    const q = usage.quota || null;
    const wm = q ? q.lowWatermark : 1;
    const list = usage.layers || [];
    const tbody = $('storage').tBodies[0];
    syncRows(tbody, list.map((l, i) => i), (i) => {
      const row = el('tr', {'data-key': i});
      for (let j = 0; j < 6; j++) {
        row.append(el('td'));
      }
      row.cells[1].className = row.cells[2].className = row.cells[4].className = 'num';
      row.cells[3].className = 'quota-col';
      return row;
    });
    list.forEach((l, i) => {
      const row = tbody.rows[i];
      row.dataset.layer = l.name;
      setCells(row, [l.name, fmtInt(l.tiles), fmtBytes(l.bytes)]);
      quotaCell(row.cells[3], l.bytes, l.quota, wm, q && q.maxSize ? 'cache quota only' : '');
      row.cells[4].textContent = fmtEvicted(l.evicted);
      row.cells[5].textContent = fmtWhen(l.lastAccess);
    });
    const total = $('storage').tFoot.rows[0];
    const evicted = list.reduce((a, l) => (l.evicted ? {tiles: a.tiles + l.evicted.tiles, bytes: a.bytes + l.evicted.bytes} : a), {tiles: 0, bytes: 0});
    const last = list.map((l) => l.lastAccess || '').sort().pop();
    total.cells[1].textContent = fmtInt(usage.tiles);
    total.cells[2].textContent = fmtBytes(usage.bytes);
    quotaCell(total.cells[3], usage.bytes, q && q.maxSize, wm, q ? 'no cache quota' : 'no quota');
    total.cells[4].textContent = list.some((l) => l.evicted) ? fmtEvicted(evicted) : '';
    total.cells[5].textContent = fmtWhen(last);
    const notes = [];
    // warn: a note that the figures are incomplete or eviction is off.
    let warn = false;
    if (usage.estimate) {
      warn = usage.recounting;
      notes.push(usage.recounting
        ? 'The bucket has not been listed yet: the figures are what this cache stored since it started.'
        : `An estimate: the bucket as listed ${fmtWhen(usage.listedAt)}, plus what was stored since.`);
    } else if (usage.recounting) {
      warn = true;
      notes.push('Counting the tiles stored before usage was turned on: the figures are incomplete.');
    }
    if (q && !q.enabled) {
      warn = true;
      notes.push('Eviction is paused (rest/diskquota enabled false).');
    }
    $('storage-msg').textContent = notes.join(' ');
    $('storage-msg').className = warn ? 'over' : '';
    $('storage-section').hidden = false;
  }

  // renderTotal puts a submitted polygon task's exact tile count, from its
  // resource, where the form's estimate was.
  function renderTotal() {
    const t = awaitTotal && tasks.get(awaitTotal);
    if (t && t.info) {
      $('f-estimate').textContent = `task ${t.id}: ${fmtInt(t.info.total)} tiles in the polygon`;
      $('f-estimate').dataset.total = t.info.total;
    }
  }

  // --- actions ---

  // One task, through DELETE on its resource.
  async function killTask(id) {
    try {
      await request(`rest/tasks/${id}`, {method: 'DELETE'});
      formMsg(`Asked to kill task ${id}.`);
    } catch (e) {
      showError(e.message);
    }
    pollSoon();
  }

  async function kill(layer, which) {
    const body = new URLSearchParams({kill_all: which});
    const path = layer ? `rest/seed/${encodeURIComponent(layer)}` : 'rest/seed';
    try {
      await request(path, {method: 'POST', body});
      formMsg(layer ? `Asked to kill the ${which} tasks of layer ${layer}.` : `Asked to kill all tasks.`);
    } catch (e) {
      showError(e.message);
    }
    pollSoon();
  }

  async function loadLayers() {
    layers = (await getJSON('rest/layers.json')).layers || [];
    layersLoaded = true;
    const sel = $('f-layer');
    sel.replaceChildren(...layers.map((l) => el('option', {value: l.name, text: l.name})));
    onLayer();
  }

  const currentLayer = () => layers.find((l) => l.name === $('f-layer').value);
  const currentGridset = () => {
    const l = currentLayer();
    return l && l.gridsets.find((g) => g.name === $('f-gridset').value);
  };

  function onLayer() {
    const l = currentLayer();
    if (!l) {
      return;
    }
    $('f-gridset').replaceChildren(...l.gridsets.map((g) => el('option', {value: g.name, text: g.name})));
    $('f-format').replaceChildren(...l.formats.map((f) => el('option', {value: f, text: f})));
    $('f-params').replaceChildren(
      ...l.parameters.map((p) =>
        el('label', {}, p.name + ' ', el('input', {type: 'text', 'data-param': p.name, value: p.default, size: 10})),
      ),
    );
    onGridset();
  }

  // onGridset sets the level range to the cached levels, stopping where a
  // seed would pass 100,000 tiles.
  function onGridset() {
    const g = currentGridset();
    if (!g) {
      return;
    }
    const zs = $('f-zoomStart');
    const ze = $('f-zoomStop');
    zs.max = ze.max = g.levels - 1;
    zs.value = g.minZoom;
    let stop = g.minZoom;
    let sum = g.tiles[g.minZoom] || 0;
    while (stop < g.maxZoom && sum + (g.tiles[stop + 1] || 0) <= 100000) {
      stop++;
      sum += g.tiles[stop] || 0;
    }
    ze.value = stop;
    showExtent(g);
    estimate();
  }

  function estimate() {
    awaitTotal = 0;
    delete $('f-estimate').dataset.total;
    const g = currentGridset();
    const a = Number($('f-zoomStart').value);
    const b = Number($('f-zoomStop').value);
    if (!g || !Number.isInteger(a) || !Number.isInteger(b) || a > b) {
      $('f-estimate').textContent = '';
      return;
    }
    let n = 0;
    for (let z = Math.max(a, 0); z <= b && z < g.tiles.length; z++) {
      n += g.tiles[z];
    }
    // A polygon's tiles are counted exactly by the server: the box count
    // of the levels is only an upper bound.
    $('f-estimate').textContent = polygonMode()
      ? `at most ${fmtInt(n)} tiles; the exact count after submitting`
      : `${fmtInt(n)} tiles`;
  }

  // formMsg and formError write the line under the form.
  function formMsg(text) {
    const m = $('form-msg');
    m.textContent = text;
    m.className = 'muted';
  }

  function formError(text) {
    const m = $('form-msg');
    m.textContent = text;
    m.className = 'error';
  }

  async function submit(e) {
    e.preventDefault();
    const f = $('seed-form');
    const layer = f.elements.layer.value;
    const req = {
      name: layer,
      gridSetId: f.elements.gridSetId.value,
      format: f.elements.format.value,
      type: f.elements.type.value,
      zoomStart: Number(f.elements.zoomStart.value),
      zoomStop: Number(f.elements.zoomStop.value),
      threadCount: Number(f.elements.threadCount.value),
    };
    const params = [...$('f-params').querySelectorAll('input[data-param]')].map((i) => ({
      string: [i.dataset.param, i.value],
    }));
    if (params.length) {
      req.parameters = {entry: params};
    }
    const polygon = polygonMode();
    if (polygon) {
      let g;
      try {
        g = readGeometry();
      } catch (err) {
        formError(`The polygon cannot be sent: ${err.message}`);
        return;
      }
      if (!g) {
        formError('Draw a polygon on the map or paste one, or choose the whole layer.');
        return;
      }
      req.geometry = g.geometry;
      // A WKT with an SRID of its own is read in that CRS by the server.
      if (!g.srid) {
        req.geometrySrs = 'EPSG:4326';
      }
      const buffer = $('f-buffer').value.trim();
      if (buffer !== '') {
        req.buffer = Number(buffer);
      }
    }
    $('f-submit').disabled = true;
    try {
      const r = await request(`rest/seed/${encodeURIComponent(layer)}.json`, {
        method: 'POST',
        headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({seedRequest: req}),
      });
      const m = /\/rest\/tasks\/(\d+)\.json$/.exec(r.headers.get('Location') || '');
      const area = polygon ? ' in a polygon' : '';
      if (m) {
        task(Number(m[1]));
        save();
        formMsg(`Task ${m[1]} submitted: ${req.type} of ${layer}${area}.`);
        if (polygon) {
          awaitTotal = Number(m[1]);
          $('f-estimate').textContent = `task ${m[1]}: counting its tiles…`;
        }
      } else {
        formMsg(`Submitted: ${req.type} of ${layer}${area}.`);
      }
      showError('');
    } catch (err) {
      formError(`The request was refused: ${err.message}`);
    } finally {
      $('f-submit').disabled = false;
    }
    pollSoon();
  }

  // --- the area: the whole layer, or a polygon drawn on the map or pasted ---

  // The map is an SVG in lon/lat: x is the longitude, y minus the latitude
  // (the viewBox is -180 -90 360 180), so a point's place is just (lon, -lat).
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const DIGITS = 100; // clicked vertices are rounded to 0.01°, finer than a pixel of the map

  function svg(tag, attrs = {}) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) {
      e.setAttribute(k, v);
    }
    return e;
  }

  // The polygon being drawn: clicked vertices (an open ring), closed or not;
  // or the polygons of pasted text (pasted, then clicks add nothing).
  const draft = {points: [], closed: false, pasted: null};
  let awaitTotal = 0; // the submitted polygon task whose exact total the form shows

  const polygonMode = () => $('f-area-polygon').checked;

  function setMode(polygon) {
    $('f-area-polygon').checked = polygon;
    $('f-area-layer').checked = !polygon;
    onMode();
  }

  function onMode() {
    $('f-polygon').hidden = !polygonMode();
    estimate();
  }

  function graticule() {
    const g = $('map-grid');
    for (let lon = -150; lon <= 150; lon += 30) {
      g.append(svg('line', {x1: lon, y1: -90, x2: lon, y2: 90, class: lon === 0 ? 'axis' : ''}));
      const t = svg('text', {x: lon + 1, y: 87});
      t.textContent = `${lon}°`;
      g.append(t);
    }
    for (let lat = -60; lat <= 60; lat += 30) {
      g.append(svg('line', {x1: -180, y1: -lat, x2: 180, y2: -lat, class: lat === 0 ? 'axis' : ''}));
      const t = svg('text', {x: -178, y: -lat - 1});
      t.textContent = `${lat}°`;
      g.append(t);
    }
  }

  // showExtent outlines the selected layer's extent in its gridset, when
  // rest/layers.json gives it in lon/lat.
  function showExtent(g) {
    const r = $('map-extent');
    const e = g && g.extent;
    if (!e) {
      r.setAttribute('hidden', '');
      return;
    }
    const [x0, y0, x1, y1] = e.map((v, i) => Math.max(-[180, 90][i % 2], Math.min([180, 90][i % 2], v)));
    Object.entries({x: x0, y: -y1, width: x1 - x0, height: y1 - y0}).forEach(([k, v]) => r.setAttribute(k, v));
    r.removeAttribute('hidden');
  }

  const round = (v) => Math.round(v * DIGITS) / DIGITS;

  // mapPoint is the lon/lat under a mouse event, rounded, within the world.
  function mapPoint(ev) {
    const m = $('map').getScreenCTM();
    if (!m) {
      return null;
    }
    const p = new DOMPoint(ev.clientX, ev.clientY).matrixTransform(m.inverse());
    return [round(Math.max(-180, Math.min(180, p.x))), round(Math.max(-90, Math.min(90, -p.y)))];
  }

  // ringPath is an SVG path of rings of [lon, lat] positions; a ring's
  // closing position (equal to its first) is left to the Z.
  function ringPath(rings) {
    return rings
      .map((r) => {
        const n = r.length > 1 && r[0][0] === r[r.length - 1][0] && r[0][1] === r[r.length - 1][1] ? r.length - 1 : r.length;
        return r
          .slice(0, n)
          .map((p, i) => `${i ? 'L' : 'M'}${p[0]} ${-p[1]}`)
          .join(' ') + ' Z';
      })
      .join(' ');
  }

  function drawDraft() {
    const g = $('map-draft');
    g.replaceChildren();
    if (draft.pasted) {
      for (const rings of draft.pasted) {
        g.append(svg('path', {d: ringPath(rings), 'fill-rule': 'evenodd'}));
      }
      return;
    }
    const pts = draft.points;
    if (pts.length >= 3 && draft.closed) {
      g.append(svg('path', {d: ringPath([pts])}));
    } else if (pts.length >= 2) {
      g.append(svg('polyline', {points: pts.map((p) => `${p[0]},${-p[1]}`).join(' ')}));
    }
    for (const p of pts) {
      g.append(svg('circle', {cx: p[0], cy: -p[1], r: 1.6}));
    }
  }

  function geometryMsg(text, bad) {
    const m = $('f-geometry-msg');
    m.textContent = text;
    m.classList.toggle('bad', !!bad);
  }

  // drawn: the clicked vertices changed; the textarea gets them as a
  // GeoJSON Polygon as soon as they make one.
  function drawn() {
    const pts = draft.points;
    $('f-geometry').value = pts.length >= 3 ? JSON.stringify({type: 'Polygon', coordinates: [[...pts, pts[0]]]}) : '';
    if (draft.closed) {
      geometryMsg(`Closed polygon of ${pts.length} vertices. Clear to draw another.`);
    } else if (pts.length) {
      geometryMsg(`${pts.length} vertices: click to add more, double-click or Close polygon to finish.`);
    } else {
      geometryMsg('Click on the map to add vertices, or paste a polygon.');
    }
    drawDraft();
    estimate();
  }

  function closeDraft() {
    if (draft.pasted || draft.closed) {
      return;
    }
    if (draft.points.length < 3) {
      geometryMsg('A polygon needs at least 3 vertices.', true);
      return;
    }
    draft.closed = true;
    drawn();
  }

  function clearDraft() {
    Object.assign(draft, {points: [], closed: false, pasted: null});
    drawn();
  }

  // geoJSONPolygons lists the polygons (arrays of rings of [lon, lat]) of a
  // GeoJSON Polygon, MultiPolygon, Feature or FeatureCollection.
  function geoJSONPolygons(o) {
    const out = [];
    const add = (g) => {
      switch (g && g.type) {
        case 'Polygon':
          out.push(g.coordinates);
          break;
        case 'MultiPolygon':
          out.push(...(Array.isArray(g.coordinates) ? g.coordinates : [null]));
          break;
        case 'Feature':
          add(g.geometry);
          break;
        case 'FeatureCollection':
          (Array.isArray(g.features) ? g.features : []).forEach(add);
          break;
        default:
          throw new Error(`a GeoJSON ${g && g.type ? g.type : 'value without a type'} is not a polygon`);
      }
    };
    add(o);
    return checkPolygons(out);
  }

  function checkPolygons(polys) {
    if (!polys.length) {
      throw new Error('no polygon');
    }
    for (const p of polys) {
      const ok =
        Array.isArray(p) &&
        p.length > 0 &&
        p.every((r) => Array.isArray(r) && r.length >= 4 && r.every((q) => Array.isArray(q) && q.length >= 2 && q.every(Number.isFinite)));
      if (!ok) {
        throw new Error('a polygon needs rings of at least 4 [lon, lat] positions');
      }
    }
    return polys;
  }

  // wktPolygons reads WKT (POLYGON or MULTIPOLYGON, optionally SRID=n;)
  // far enough to draw it; the server's parser has the last word.
  function wktPolygons(s) {
    const m = /^\s*(?:SRID\s*=\s*(\d+)\s*;)?\s*(MULTIPOLYGON|POLYGON)\s*(?:ZM|Z|M)?\s*(\(.*\))\s*$/is.exec(s);
    if (!m) {
      throw new Error('not GeoJSON, nor WKT POLYGON or MULTIPOLYGON');
    }
    const tokens = m[3].match(/[(),]|[^\s(),]+(?:\s+[^\s(),]+)*/g);
    let i = 0;
    const list = () => {
      if (tokens[i++] !== '(') {
        throw new Error('WKT: "(" expected');
      }
      const items = [];
      for (;;) {
        items.push(tokens[i] === '(' ? list() : tokens[i++].trim().split(/\s+/).map(Number));
        const t = tokens[i++];
        if (t === ')') {
          return items;
        }
        if (t !== ',') {
          throw new Error('WKT: "," or ")" expected');
        }
      }
    };
    const v = list();
    if (i !== tokens.length) {
      throw new Error('WKT: text after the geometry');
    }
    return {srid: m[1] ? Number(m[1]) : 0, polygons: checkPolygons(m[2].toUpperCase() === 'POLYGON' ? [v] : v)};
  }

  // readGeometry reads the textarea: the request's geometry (an object for
  // GeoJSON, the text for WKT), its polygons to draw and the WKT's SRID.
  function readGeometry() {
    const text = $('f-geometry').value.trim();
    if (!text) {
      return null;
    }
    if (text[0] === '{') {
      let o;
      try {
        o = JSON.parse(text);
      } catch (e) {
        throw new Error(`not valid JSON: ${e.message}`);
      }
      return {geometry: o, polygons: geoJSONPolygons(o), srid: 0};
    }
    const w = wktPolygons(text);
    return {geometry: text, polygons: w.polygons, srid: w.srid};
  }

  // onGeometryInput draws what is typed or pasted into the textarea.
  function onGeometryInput() {
    setMode(true);
    Object.assign(draft, {points: [], closed: false, pasted: null});
    try {
      const g = readGeometry();
      if (g) {
        const n = g.polygons.reduce((a, p) => a + p.reduce((b, r) => b + r.length, 0), 0);
        if (g.srid && g.srid !== 4326) {
          geometryMsg(`WKT in SRID ${g.srid}: not drawn; the server reads it in that CRS.`);
        } else {
          draft.pasted = g.polygons;
          const off = g.polygons.some((p) => p.some((r) => r.some((q) => Math.abs(q[0]) > 180 || Math.abs(q[1]) > 90)));
          geometryMsg(
            `${g.polygons.length === 1 ? 'A polygon' : `${g.polygons.length} polygons`}, ${n} positions` +
              (off ? ', partly outside −180..180 × −90..90.' : '.'),
            off,
          );
        }
      } else {
        geometryMsg('Click on the map to add vertices, or paste a polygon.');
      }
    } catch (e) {
      geometryMsg(`Cannot draw this: ${e.message}`, true);
    }
    drawDraft();
    estimate();
  }

  // showTaskArea draws a task's area (its resource's geometry, a GeoJSON
  // MultiPolygon in lon/lat) on the map, apart from the polygon being drawn.
  function showTaskArea(id) {
    const t = tasks.get(id);
    const g = $('map-task');
    g.replaceChildren();
    let polys = [];
    try {
      polys = t && t.info && t.info.geometry ? geoJSONPolygons(t.info.geometry) : [];
    } catch (e) {
      polys = [];
    }
    if (!polys.length) {
      hideTaskArea();
      return;
    }
    for (const rings of polys) {
      g.append(svg('path', {d: ringPath(rings)}));
    }
    g.dataset.taskId = id;
    const info = t.info;
    const buffer = info.buffer ? `, buffer ${info.buffer} px` : '';
    $('map-task-label').textContent = `Showing the area of task ${id} (${info.type} of ${info.layer}${buffer}), dashed orange.`;
    $('map-task-note').hidden = false;
    $('map').scrollIntoView({block: 'nearest'});
  }

  function hideTaskArea() {
    $('map-task').replaceChildren();
    delete $('map-task').dataset.taskId;
    $('map-task-note').hidden = true;
  }

  function areaButton(id) {
    const b = el('button', {type: 'button', class: 'show-area', title: `Show the area of task ${id} on the map`, text: 'Show area'});
    b.addEventListener('click', () => showTaskArea(id));
    b.hidden = true;
    return b;
  }

  $('map').addEventListener('click', (ev) => {
    if (ev.button !== 0 || ev.detail > 1) {
      return; // a double-click's second click closes the polygon
    }
    if (draft.pasted || draft.closed) {
      geometryMsg('The polygon is complete: Clear to draw another.', true);
      return;
    }
    const p = mapPoint(ev);
    if (!p) {
      return;
    }
    setMode(true);
    const last = draft.points[draft.points.length - 1];
    if (!last || last[0] !== p[0] || last[1] !== p[1]) {
      draft.points.push(p);
    }
    drawn();
  });
  $('map').addEventListener('dblclick', (ev) => {
    ev.preventDefault();
    closeDraft();
  });
  $('map').addEventListener('mousemove', (ev) => {
    const p = mapPoint(ev);
    $('map-pos').textContent = p ? `lon ${p[0].toFixed(2)}, lat ${p[1].toFixed(2)}` : '';
  });
  $('map').addEventListener('mouseleave', () => {
    $('map-pos').textContent = '';
  });
  $('map-close').addEventListener('click', closeDraft);
  $('map-clear').addEventListener('click', clearDraft);
  $('map-task-hide').addEventListener('click', hideTaskArea);
  $('f-geometry').addEventListener('input', onGeometryInput);
  $('f-area-layer').addEventListener('change', onMode);
  $('f-area-polygon').addEventListener('change', onMode);
  $('f-buffer').addEventListener('input', estimate);
  graticule();

  $('f-layer').addEventListener('change', onLayer);
  $('f-gridset').addEventListener('change', onGridset);
  $('f-zoomStart').addEventListener('input', estimate);
  $('f-zoomStop').addEventListener('input', estimate);
  $('seed-form').addEventListener('submit', submit);
  $('kill-all').addEventListener('click', () => kill('', 'all'));
  $('clear-finished').addEventListener('click', () => {
    for (const t of [...tasks.values()]) {
      if (t.final) {
        tasks.delete(t.id);
      }
    }
    save();
    render();
  });

  restore();
  poll();
})();
