/*
 * svc's operator page (docs/admin-ui.md). Plain browser JavaScript, no build step.
 *
 * - The credential the operator types is kept in this tab (sessionStorage) and sent in a header
 *   (X-SVC-Secret-Token or Authorization), never in a cookie or URL.
 * - Data: GET /admin/ui/snapshot once, then GET /admin/ui/events, Server-Sent Events read with
 *   fetch() and a stream reader (EventSource cannot send a header); reconnects after `retry`.
 * - Actions: POST /admin, JSON-RPC svc_cordonUpstream / svc_uncordonUpstream, Content-Type
 *   application/json (what a cross-site form cannot send).
 * - Everything from svc is written with textContent (upstream ids and reasons are data, not HTML).
 * - Charts: uPlot (served from svc's own node_modules at /admin/ui/uplot.js).
 */

(() => {
  const STORE = 'svc-admin-ui-credential';
  /** Chart points kept per network (at one push a second: two minutes). */
  const HISTORY = 120;
  const COLORS = ['#0969da', '#cf222e', '#1a7f37', '#8250df', '#bf8700', '#1b7c83', '#953800', '#57606a'];

  /** @type {{kind: string, value: string} | null} */
  let cred = null;
  /** @type {AbortController | null} */
  let streamAbort = null;
  let retryMs = 2000;
  /** Network views by "<project>\u0000<network>". */
  const views = new Map();
  /** Project views by id. */
  const projects = new Map();

  const $ = (id) => document.getElementById(id);
  const el = (tag, props = {}, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) e.append(c);
    return e;
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function authHeaders(c = cred) {
    if (!c || c.kind === 'none') return {};
    if (c.kind === 'bearer') return { Authorization: `Bearer ${c.value}` };
    return { 'X-SVC-Secret-Token': c.value };
  }

  function setStatus(text, live) {
    const s = $('status');
    s.textContent = text;
    s.className = `status ${live === undefined ? '' : live ? 'live' : 'down'}`;
  }

  function showLogin(message) {
    cred = null;
    streamAbort?.abort();
    sessionStorage.removeItem(STORE);
    $('login').hidden = false;
    $('app').hidden = true;
    $('forget').hidden = true;
    $('login-error').textContent = message || '';
    setStatus('not connected');
  }

  /** Reads the answer of a refused request as one line. */
  async function refusal(r) {
    try {
      const j = await r.json();
      return `HTTP ${r.status}: ${j?.error?.message ?? r.statusText}`;
    } catch {
      return `HTTP ${r.status}`;
    }
  }

  async function connect(c) {
    let r;
    try {
      r = await fetch('/admin/ui/snapshot', { headers: authHeaders(c), cache: 'no-store' });
    } catch (e) {
      $('login-error').textContent = `svc did not answer: ${e.message}`;
      return;
    }
    if (!r.ok) {
      showLogin(await refusal(r));
      return;
    }
    cred = c;
    sessionStorage.setItem(STORE, JSON.stringify(c));
    $('login').hidden = true;
    $('app').hidden = false;
    $('forget').hidden = false;
    render(await r.json());
    void stream();
  }

  /** Reads /admin/ui/events until the credential is dropped; reconnects after `retry` ms. */
  async function stream() {
    streamAbort?.abort();
    const ac = new AbortController();
    streamAbort = ac;
    while (!ac.signal.aborted && cred) {
      try {
        const r = await fetch('/admin/ui/events', { headers: { ...authHeaders(), Accept: 'text/event-stream' }, cache: 'no-store', signal: ac.signal });
        if (r.status === 401 || r.status === 403) {
          showLogin(await refusal(r));
          return;
        }
        if (!r.ok || !r.body) throw new Error(await refusal(r));
        setStatus('live', true);
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          for (let m = /\r?\n\r?\n/.exec(buf); m; m = /\r?\n\r?\n/.exec(buf)) {
            onEvent(buf.slice(0, m.index));
            buf = buf.slice(m.index + m[0].length);
          }
        }
        setStatus('stream ended, reconnecting', false);
      } catch (e) {
        if (ac.signal.aborted) return;
        setStatus(`reconnecting (${e.message})`, false);
      }
      await sleep(retryMs);
    }
  }

  /** One Server-Sent Event block (text/event-stream). */
  function onEvent(block) {
    let type = 'message';
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line === '' || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
      else if (field === 'retry' && /^\d+$/.test(value)) retryMs = Number(value);
    }
    if (type === 'snapshot' && data.length) render(JSON.parse(data.join('\n')));
  }

  const pct = (x) => `${(x * 100).toFixed(x > 0 && x < 0.001 ? 3 : 1)}%`;
  const num = (x) => (x === null || x === undefined ? '–' : String(x));
  const msText = (x) => (x > 0 ? x.toFixed(x < 10 ? 2 : 1) : '–');

  /** Window of the "last minute" columns, ms. */
  const RECENT_MS = 60_000;
  /** Counter totals seen per row key, oldest first, for the last-minute deltas (bounded by time). */
  const history = new Map();

  /**
   * The change of a row's counters over about the last minute: the snapshot totals are since
   * start, so the page keeps what it saw and subtracts. Null until two samples exist.
   * @param key the row's identity; @param at snapshot time, epoch ms; @param values counter totals
   */
  function recent(key, at, values) {
    let h = history.get(key);
    if (!h) history.set(key, (h = []));
    h.push({ at, values });
    while (h.length > 2 && at - h[1].at >= RECENT_MS) h.shift();
    if (h.length < 2) return null;
    const first = h[0];
    // A counter that went down: svc restarted (or another worker answered); start again.
    if (values.some((v, i) => v < first.values[i])) {
      h.splice(0, h.length - 1);
      return null;
    }
    return { seconds: (at - first.at) / 1000, deltas: values.map((v, i) => v - first.values[i]) };
  }

  /** Draws a snapshot: updates the views in place (buttons stay the same elements). */
  function render(s) {
    setStatus(`live · ${new Date(s.at).toLocaleTimeString()} · svc ${s.version}${s.lifecycle === 'serving' ? '' : ` · ${s.lifecycle}`}`, true);
    const root = $('projects');
    for (const p of s.projects) {
      let pv = projects.get(p.id);
      if (!pv) {
        pv = {
          section: el('section', { class: 'project', 'data-project': p.id }, el('h2', { text: `Project ${p.id}` })),
          networks: el('div'),
          cache: table(['Network', 'Policy', 'Connector', 'Hits', 'Misses', 'Hit ratio', 'Last min']),
          limits: table(['Scope', 'Budget', 'Rejected', 'Per min']),
        };
        pv.section.append(
          pv.networks,
          el(
            'div',
            { class: 'side' },
            el('section', {}, el('h3', { text: 'Cache hit ratio per policy' }), pv.cache.table),
            el('section', {}, el('h3', { text: 'Rate-limit rejections' }), pv.limits.table),
          ),
        );
        projects.set(p.id, pv);
        root.append(pv.section);
      }
      for (const n of p.networks) renderNetwork(p.id, n, pv.networks, s.at);
      fill(
        pv.cache.body,
        p.cache.map((c) => {
          const d = recent(`cache\u0000${p.id}\u0000${c.network}\u0000${c.policy}\u0000${c.connector}`, s.at, [c.hits, c.misses]);
          const reads = d ? d.deltas[0] + d.deltas[1] : 0;
          return [c.network, c.policy, c.connector, c.hits, c.misses, c.hitRatio === null ? '–' : pct(c.hitRatio), reads > 0 ? pct(d.deltas[0] / reads) : '–'];
        }),
        'no cache reads yet',
      );
      fill(
        pv.limits.body,
        p.rateLimited.map((r) => {
          const d = recent(`limit\u0000${p.id}\u0000${r.scope}\u0000${r.budget}`, s.at, [r.rejected]);
          return [r.scope, r.budget, r.rejected, d && d.seconds > 0 ? (d.deltas[0] * (60 / d.seconds)).toFixed(1) : '–'];
        }),
        'no rejections',
      );
    }
  }

  function table(columns) {
    const body = el('tbody');
    return { table: el('table', {}, el('thead', {}, el('tr', {}, ...columns.map((c) => el('th', { text: c })))), body), body };
  }

  function fill(body, rows, empty) {
    body.replaceChildren(
      ...(rows.length
        ? rows.map((r) => el('tr', {}, ...r.map((v, i) => el('td', { text: String(v), class: i === 0 ? '' : typeof v === 'number' ? '' : 'text' }))))
        : [el('tr', {}, el('td', { text: empty, colSpan: 7, class: 'text' }))]),
    );
  }

  const UPSTREAM_COLUMNS = [
    'Upstream',
    'Rotation',
    'Score',
    'Requests',
    'Error rate',
    'Throttled',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'Latest block',
    'Head lag',
    'Breaker',
    'Cordons, last error',
    '',
  ];

  function renderNetwork(projectId, n, container, at) {
    const key = `${projectId}\u0000${n.id}`;
    let v = views.get(key);
    if (!v) {
      const t = table(UPSTREAM_COLUMNS);
      v = {
        facts: el('div', { class: 'facts' }),
        body: t.body,
        rows: new Map(),
        charts: el('div', { class: 'charts' }),
        history: { t: [], lat: new Map(), err: new Map() },
        plots: null,
        plotIds: '',
      };
      container.append(
        el('section', { class: 'network', 'data-network': n.id }, el('h3', { text: `${n.id}${n.alias ? ` (${n.alias})` : ''}` }), v.facts, t.table, v.charts),
      );
      views.set(key, v);
    }
    v.facts.textContent = `head ${num(n.highestLatest || null)} · finalized ${num(n.highestFinalized || null)} · block time ${n.blockTimeMs ? `${(n.blockTimeMs / 1000).toFixed(1)} s` : '–'} · consensus disputes ${n.consensusDisputes}`;
    const seen = new Set();
    for (const u of n.upstreams) {
      seen.add(u.id);
      let row = v.rows.get(u.id);
      if (!row) {
        const cells = UPSTREAM_COLUMNS.slice(0, -1).map((_, i) => el('td', { class: [0, 1, 11, 12].includes(i) ? 'text' : '' }));
        const button = el('button', { type: 'button', 'data-project': projectId, 'data-upstream': u.id });
        button.addEventListener('click', () => void act(projectId, u.id, button));
        const tr = el('tr', { 'data-upstream': u.id }, ...cells, el('td', {}, button));
        row = { tr, cells, button };
        v.rows.set(u.id, row);
        v.body.append(tr);
      }
      const c = row.cells;
      c[0].textContent = u.vendor && u.vendor !== 'unknown' ? `${u.id} (${u.vendor})` : u.id;
      c[1].replaceChildren(
        el('span', {
          class: `badge ${u.down ? 'down' : u.inRotation ? 'in' : 'out'}`,
          // A node that does not answer says so first, whatever its place in the order.
          text: u.down ? 'down' : u.inRotation ? (u.rank ? `in #${u.rank}` : 'in') : u.cordoned ? 'cordoned' : u.excluded ? 'excluded' : 'out',
        }),
      );
      c[1].title = u.down ? (u.lastError ?? 'no answer') : (u.excluded ?? '');
      c[2].textContent = u.score === null ? '–' : u.score.toFixed(3);
      c[3].textContent = String(u.requests);
      c[4].textContent = pct(u.errorRate);
      c[5].textContent = pct(u.throttleRate);
      c[6].textContent = msText(u.latencyMs.p50);
      c[7].textContent = msText(u.latencyMs.p90);
      c[8].textContent = msText(u.latencyMs.p99);
      c[9].textContent = num(u.latestBlock);
      c[10].textContent = String(u.headLag);
      c[11].replaceChildren(u.breaker === 'none' ? '–' : el('span', { class: `badge ${u.breaker}`, text: u.breaker }));
      const cordonText = u.cordons.length
        ? u.cordons.map((x) => `${x.method}: ${x.reason}`).join('; ') + (u.moreCordons ? ` (+${u.moreCordons} more)` : '')
        : '';
      // A down upstream's last error is the first thing an operator needs: shown, not hidden in a tooltip.
      c[12].textContent = [u.down ? `last error: ${u.lastError ?? 'no answer'}` : '', cordonText].filter(Boolean).join('; ') || '–';
      row.tr.className = u.inRotation ? '' : 'out';
      row.tr.setAttribute('data-in-rotation', String(u.inRotation));
      row.button.textContent = u.cordoned ? 'Uncordon' : 'Cordon';
      row.button.setAttribute('data-action', u.cordoned ? 'uncordon' : 'cordon');
    }
    for (const [id, row] of v.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        v.rows.delete(id);
      }
    }
    chart(v, n, at);
  }

  /** Appends one point per upstream and redraws the two uPlot charts of a network. */
  function chart(v, n, at) {
    if (typeof uPlot !== 'function') return;
    const h = v.history;
    const ids = n.upstreams.map((u) => u.id);
    if (h.t.length && h.t[h.t.length - 1] >= at / 1000) return;
    h.t.push(at / 1000);
    for (const u of n.upstreams) {
      if (!h.lat.has(u.id)) h.lat.set(u.id, new Array(h.t.length - 1).fill(null));
      if (!h.err.has(u.id)) h.err.set(u.id, new Array(h.t.length - 1).fill(null));
      h.lat.get(u.id).push(u.latencyMs.p90 || null);
      h.err.get(u.id).push(u.errorRate * 100);
    }
    if (h.t.length > HISTORY) {
      h.t.shift();
      for (const a of [...h.lat.values(), ...h.err.values()]) a.shift();
    }
    const idsKey = ids.join('\u0000');
    if (v.plotIds !== idsKey) {
      v.plots?.forEach((p) => p.destroy());
      v.charts.replaceChildren();
      const series = [{}, ...ids.map((id, i) => ({ label: id, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true }))];
      const make = (title, unit) => {
        const fig = el('figure', {}, el('figcaption', { text: title }));
        v.charts.append(fig);
        return new uPlot(
          {
            width: 440,
            height: 150,
            series,
            scales: { x: { time: true } },
            axes: [{}, { size: 56, values: (_u, ticks) => ticks.map((t) => `${t}${unit}`) }],
            legend: { live: false },
          },
          [[]],
          fig,
        );
      };
      v.plots = [make('p90 latency of successful answers (ms)', ''), make('error rate (%)', '%')];
      v.plotIds = idsKey;
    }
    v.plots[0].setData([h.t, ...ids.map((id) => h.lat.get(id) ?? [])]);
    v.plots[1].setData([h.t, ...ids.map((id) => h.err.get(id) ?? [])]);
  }

  /** A cordon button: one JSON-RPC call to POST /admin, then a fresh snapshot. */
  async function act(projectId, upstream, button) {
    const uncordon = button.getAttribute('data-action') === 'uncordon';
    const method = uncordon ? 'svc_uncordonUpstream' : 'svc_cordonUpstream';
    const params = [{ projectId, upstream, ...(uncordon ? {} : { reason: 'admin ui: manual cordon' }) }];
    button.disabled = true;
    const line = $('action');
    try {
      const r = await fetch('/admin', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...authHeaders() },
        body: JSON.stringify({ jsonrpc: '2.0', id: Date.now(), method, params }),
        cache: 'no-store',
      });
      const j = await r.json().catch(() => null);
      if (!r.ok || !j || j.error) line.textContent = `${method} ${upstream} refused: ${j?.error?.message ?? `HTTP ${r.status}`}`;
      else line.textContent = `${upstream} ${uncordon ? 'uncordoned' : 'cordoned'} in project ${projectId}`;
      const s = await fetch('/admin/ui/snapshot', { headers: authHeaders(), cache: 'no-store' });
      if (s.ok) render(await s.json());
    } catch (e) {
      line.textContent = `${method} ${upstream} failed: ${e.message}`;
    } finally {
      button.disabled = false;
    }
  }

  $('login').addEventListener('submit', (e) => {
    e.preventDefault();
    void connect({ kind: $('kind').value, value: $('credential').value });
  });
  $('forget').addEventListener('click', () => showLogin(''));
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(STORE) ?? 'null');
  } catch {
    saved = null;
  }
  if (saved && typeof saved.kind === 'string' && typeof saved.value === 'string') void connect(saved);
})();
