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
      row.cells[8].append(b);
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
      for (let i = 0; i < 10; i++) {
        row.append(el('td'));
      }
      row.cells[5].className = row.cells[6].className = row.cells[7].className = 'num';
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
  }

  // --- actions ---

  // One task, through DELETE on its resource.
  async function killTask(id) {
    try {
      await request(`rest/tasks/${id}`, {method: 'DELETE'});
      $('form-msg').textContent = `Asked to kill task ${id}.`;
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
      $('form-msg').textContent = layer
        ? `Asked to kill the ${which} tasks of layer ${layer}.`
        : `Asked to kill all tasks.`;
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
    estimate();
  }

  function estimate() {
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
    $('f-estimate').textContent = `${fmtInt(n)} tiles`;
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
    $('f-submit').disabled = true;
    try {
      const r = await request(`rest/seed/${encodeURIComponent(layer)}.json`, {
        method: 'POST',
        headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({seedRequest: req}),
      });
      const m = /\/rest\/tasks\/(\d+)\.json$/.exec(r.headers.get('Location') || '');
      if (m) {
        task(Number(m[1]));
        save();
        $('form-msg').textContent = `Task ${m[1]} submitted: ${req.type} of ${layer}.`;
      } else {
        $('form-msg').textContent = `Submitted: ${req.type} of ${layer}.`;
      }
      showError('');
    } catch (err) {
      $('form-msg').textContent = '';
      showError(`The request was refused: ${err.message}`);
    } finally {
      $('f-submit').disabled = false;
    }
    pollSoon();
  }

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
