/**
 * The part of the YAML policy standard library that remembers across evaluations or reaches
 * the whole upstream set (eRPC's `stickyPrimary`, `readmitExcluded`/`probeExcluded`, `cooldown`,
 * `includeIf`, `shadowExcludeIf`, the scope constants and `durationMs`), written from eRPC's
 * selection-policy documentation with its semantics. It is spliced inside the stdlib's closure
 * (`sandbox-stdlib.ts`), whose `state`, `define`, `matchAny`, `hasMatchingTag`, `PRESETS`,
 * `penalty` and `note` it uses. What it remembers comes in with the evaluation's JSON input
 * (`state.stickies`, `ctx.excludedSince`) and leaves in its answer (`state.out`); the host keeps it
 * (`memory.ts`).
 *
 * `stickyPrimary`'s `scope` picks the register, as in eRPC: `network` is shared by every
 * evaluation of the network (every `evalScope` scope), `network-method` by those of one method,
 * and so on. `network` and `network-finality` score with PREFER_FASTEST on the across-methods
 * metrics, the slot scopes read `u.score` (set by `sortByScore`), as eRPC does.
 */
export const TICK_HELPERS = String.raw`
  G.NETWORK = 'network';
  G.NETWORK_METHOD = 'network-method';
  G.NETWORK_FINALITY = 'network-finality';
  G.NETWORK_METHOD_FINALITY = 'network-method-finality';
  const UNIT_MS = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 };
  // Go's duration syntax ('30s', '1m30s', '500ms'), as eRPC's YAML writes it; a number is ms.
  function durationMs(v, what) {
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
    if (typeof v === 'string') {
      const s = v.trim();
      const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
      let total = 0, m, end = 0;
      while ((m = re.exec(s)) !== null) { total += Number(m[1]) * UNIT_MS[m[2]]; end = re.lastIndex; }
      if (end > 0 && end === s.length) return total;
    }
    throw new TypeError((what || 'durationMs') + ': ' + JSON.stringify(v) + ' is not a duration (write \'30s\', \'1m\', \'500ms\' or a number of ms)');
  }
  G.durationMs = (v) => durationMs(v);
  const since = () => state.ctx.excludedSince || {};

  define('stickyPrimary', function (opts) {
    opts = opts || {};
    const hysteresis = opts.hysteresis != null ? Number(opts.hysteresis) : 0.1;
    const minSwitchMs = opts.minSwitchInterval != null ? durationMs(opts.minSwitchInterval, 'stickyPrimary minSwitchInterval') : 30000;
    const scope = opts.scope || 'network';
    if (scope !== 'network' && scope !== 'network-method' && scope !== 'network-finality' && scope !== 'network-method-finality')
      throw new TypeError('stickyPrimary scope must be network, network-method, network-finality or network-method-finality');
    if (this.length === 0) return this.slice();
    const now = state.ctx.now;
    const reg = state.stickies[scope] || null;
    const prev = reg ? reg.primary : null;
    const write = (primary, switched) => {
      state.stickies[scope] = { primary, lastSwitchAt: switched || !reg ? now : reg.lastSwitchAt };
      state.out.sticky = { scope, primary, lastSwitchAt: state.stickies[scope].lastSwitchAt };
    };
    if (!prev) { write(this[0].id, true); return this.slice(); }
    const head = this[0];
    if (head.id === prev) { write(prev, false); return this.slice(); }
    const at = this.findIndex((u) => u.id === prev);
    // The primary left the list (excluded, removed): the head serves, the register stays.
    if (at < 0) return this.slice();
    const hold = (why) => {
      const out = this.slice();
      out.unshift(out.splice(at, 1)[0]);
      write(prev, false);
      note('stickyPrimary', prev, 'held over ' + head.id + ': ' + why);
      return out;
    };
    const elapsed = now - reg.lastSwitchAt;
    if (elapsed < minSwitchMs) return hold('last switch ' + Math.round(elapsed / 1000) + 's ago, minSwitchInterval ' + minSwitchMs / 1000 + 's');
    const wildcard = scope === 'network' || scope === 'network-finality';
    const scoreOf = (u) => {
      if (wildcard) return u.metricsAcrossMethods ? 1 / (1 + penalty(u.metricsAcrossMethods, PRESETS.PREFER_FASTEST, 'p70ResponseSeconds')) : null;
      return typeof u.score === 'number' && !Number.isNaN(u.score) ? u.score : null;
    };
    const cs = scoreOf(head), ps = scoreOf(this[at]);
    if (cs == null || ps == null) return hold('no score to compare');
    if (cs > ps * (1 + hysteresis)) {
      write(head.id, true);
      note('stickyPrimary', head.id, 'took over from ' + prev + ': score ' + cs.toFixed(4) + ' > ' + ps.toFixed(4) + ' x ' + (1 + hysteresis));
      return this.slice();
    }
    return hold('score ' + cs.toFixed(4) + ' <= ' + ps.toFixed(4) + ' x ' + (1 + hysteresis));
  });

  function readmitExcluded(opts) {
    opts = opts || {};
    if (opts.reAdmitAfter == null) throw new TypeError('readmitExcluded needs reAdmitAfter (a duration)');
    const after = durationMs(opts.reAdmitAfter, 'readmitExcluded reAdmitAfter');
    const max = opts.maxConcurrent != null ? Math.max(0, Math.floor(Number(opts.maxConcurrent))) : 1;
    const longestFirst = opts.longestFirst !== false;
    const position = opts.position || 'tail';
    if (position !== 'tail' && position !== 'head' && position !== 'random') throw new TypeError('readmitExcluded position must be tail, head or random');
    const out = since();
    const now = state.ctx.now;
    const have = new Set(this.map((u) => u.id));
    const ready = state.all.filter((u) => !have.has(u.id) && typeof out[u.id] === 'number' && now - out[u.id] >= after);
    ready.sort((a, b) => (longestFirst ? out[a.id] - out[b.id] : out[b.id] - out[a.id]) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const adds = ready.slice(0, max);
    if (adds.length === 0) return this.slice();
    for (const u of adds) note('readmitExcluded', u.id, 'out ' + Math.round((now - out[u.id]) / 1000) + 's (reAdmitAfter ' + after / 1000 + 's): re-admitted at the ' + position);
    if (position === 'head') return adds.concat(this);
    if (position === 'tail') return this.concat(adds);
    const mixed = this.slice();
    for (const u of adds) mixed.splice(Math.floor(Math.random() * (mixed.length + 1)), 0, u);
    return mixed;
  }
  define('readmitExcluded', readmitExcluded);
  // eRPC's older spelling: with reAdmitAfter it re-admits; without, it asks the host to mirror traffic.
  define('probeExcluded', function (opts) {
    opts = opts || {};
    if (opts.reAdmitAfter != null) return readmitExcluded.call(this, opts);
    const rate = opts.sampleRate != null ? Number(opts.sampleRate) : 0.1;
    if (!(rate >= 0 && rate <= 1)) throw new TypeError('probeExcluded sampleRate must be a number from 0 to 1');
    state.out.probe = {
      sampleRate: rate,
      minSamples: opts.minSamples != null ? Number(opts.minSamples) : 10,
      minSamplesWindowMs: durationMs(opts.minSamplesWindow != null ? opts.minSamplesWindow : '60s', 'probeExcluded minSamplesWindow'),
      maxConcurrent: opts.maxConcurrent != null ? Number(opts.maxConcurrent) : 4,
      timeoutMs: durationMs(opts.timeout != null ? opts.timeout : '10s', 'probeExcluded timeout'),
    };
    return this.slice();
  });
  define('cooldown', function (d) {
    const ms = durationMs(d, 'cooldown');
    const out = since();
    const now = state.ctx.now;
    return this.filter((u) => !(typeof out[u.id] === 'number' && now - out[u.id] < ms));
  });

  define('includeIf', function (target, condition) {
    let f;
    if (typeof target === 'string' || Array.isArray(target)) f = { tag: target };
    else if (target != null && typeof target === 'object') f = target;
    // No concrete facet: never admit the whole set by accident.
    if (!f || (f.id == null && f.tag == null && f.vendor == null && f.type == null)) return this.slice();
    let pass;
    if (typeof condition === 'function') {
      try {
        pass = !!condition(this, state.ctx);
      } catch (e) {
        // A helper svc lacks must still fail the load; any other throw means "do not include", as in eRPC.
        if (e && e.svcUnsupported) throw e;
        pass = false;
      }
    } else pass = !!condition;
    if (!pass) return this.slice();
    const have = new Set(this.map((u) => u.id));
    const adds = state.all.filter((u) => !have.has(u.id) && facets(f, u));
    if (adds.length === 0) return this.slice();
    return f.position === 'head' ? adds.concat(this) : this.concat(adds);
  });

  define('shadowExcludeIf', function (pred, reason) {
    if (typeof pred !== 'function') return this.slice();
    const out = this.slice();
    for (const u of out) {
      if (!pred(u)) continue;
      const list = state.out.shadow[u.id] || (state.out.shadow[u.id] = []);
      list.push(typeof reason === 'string' ? reason : 'shadowExcludeIf');
    }
    return out;
  });
`;
