/**
 * The JavaScript run in a YAML selection policy's context before the policy itself: the subset
 * of eRPC's policy standard library svc provides (chainable Array methods, predicate factories,
 * score presets), written from eRPC's selection-policy documentation with its semantics (eRPC's
 * `sortByScore` ranks by `overall / (1 + penalty)`, higher first), the cross-tick helpers of
 * `sandbox-stdlib-ticks.ts` spliced into the same closure, and the driver `__svcRun` that builds
 * the arguments from a JSON string, calls the policy and answers a JSON string of the chosen ids
 * and what the cross-tick helpers left for the host. Everything here runs inside the context,
 * under the evaluation's time bound, so nothing the policy returns (getters, proxies) ever runs
 * on the host.
 *
 * The numbers eRPC's predicates read come with the input: `misbehaviorRate` (the consensus
 * plugin's misbehaviours over the upstream's requests), `blockHeadLagSeconds` / `finalizationLagSeconds`
 * (the block lags times the network's estimated block time, 0 until it is estimated) and, for a
 * policy naming them, `metricsByMethod` (per-method latency, which `latencyDeviationAbove`
 * compares across upstreams method by method).
 */
import { TICK_HELPERS } from './sandbox-stdlib-ticks.ts';

export const SANDBOX_STDLIB = String.raw`'use strict';
(() => {
  const G = globalThis;
  // V8 gives every context a console (inspector-only): the policy gets no output channel.
  delete G.console;
  const state = { cordonsRemoved: false, ctx: { method: '*', finality: 'unknown' }, all: [], stickies: {}, out: null };
  // Decisions of the cross-tick helpers, bounded (the host keeps 64 at most).
  const note = (step, upstream, reason) => { if (state.out.notes.length < 64) state.out.notes.push({ step, upstream, reason }); };
  const reCache = new Map();
  function globRe(p) {
    let re = reCache.get(p);
    if (!re) {
      re = new RegExp('^' + p.replace(/[.+^${'$'}{}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.') + '$');
      reCache.set(p, re);
    }
    return re;
  }
  function glob(p, v) {
    if (p == null || p === '*' || p === v) return true;
    let neg = false;
    if (p.charAt(0) === '!') { neg = true; p = p.slice(1); }
    const m = globRe(p).test(String(v));
    return neg ? !m : m;
  }
  function matchAny(p, v) {
    if (p == null) return true;
    if (Array.isArray(p)) return p.some((x) => glob(x, v));
    return glob(p, v);
  }
  function hasMatchingTag(u, p) {
    const tags = u.tags || [];
    if (Array.isArray(p)) {
      let positives = false, anyPositive = false, negationsHold = true;
      for (const x of p) {
        if (typeof x === 'string' && x.charAt(0) === '!') { if (!hasMatchingTag(u, x)) negationsHold = false; }
        else { positives = true; if (hasMatchingTag(u, x)) anyPositive = true; }
      }
      return negationsHold && (!positives || anyPositive);
    }
    if (typeof p === 'string' && p.charAt(0) === '!') return !tags.some((t) => glob(p.slice(1), t));
    return tags.some((t) => glob(p, t));
  }
  const define = (name, fn) => Object.defineProperty(Array.prototype, name, { value: fn, writable: true, configurable: true });

  define('byId', function (p) { return this.filter((u) => matchAny(p, u.id)); });
  define('excludeId', function (p) { return this.filter((u) => !matchAny(p, u.id)); });
  define('byTag', function (p) { return this.filter((u) => hasMatchingTag(u, p)); });
  define('excludeTag', function (p) { return this.filter((u) => !hasMatchingTag(u, p)); });
  define('byVendor', function (p) { return this.filter((u) => matchAny(p, u.vendor)); });
  define('excludeVendor', function (p) { return this.filter((u) => !matchAny(p, u.vendor)); });
  define('byType', function (p) { return this.filter((u) => matchAny(p, u.type)); });
  const facets = (f, u) =>
    (f.id == null || matchAny(f.id, u.id)) && (f.tag == null || hasMatchingTag(u, f.tag)) &&
    (f.vendor == null || matchAny(f.vendor, u.vendor)) && (f.type == null || matchAny(f.type, u.type));
  const anyFacet = (f, u) =>
    (f.id != null && matchAny(f.id, u.id)) || (f.tag != null && hasMatchingTag(u, f.tag)) ||
    (f.vendor != null && matchAny(f.vendor, u.vendor)) || (f.type != null && matchAny(f.type, u.type));
  define('where', function (f) { return this.filter((u) => facets(f, u)); });
  define('whereNot', function (f) { return this.filter((u) => !anyFacet(f, u)); });

  define('removeCordoned', function () { state.cordonsRemoved = true; return this.filter((u) => !u.metrics.cordonedReason); });
  define('removeByErrorRate', function (max) { return this.filter((u) => u.metrics.errorRate <= max); });
  define('removeByThrottling', function (max) { return this.filter((u) => u.metrics.throttledRate <= max); });
  define('removeByMisbehavior', function (max) { return this.filter((u) => u.metrics.misbehaviorRate <= max); });
  define('removeByLag', function (o) {
    const bh = o && o.blockHead != null ? o.blockHead : Infinity;
    const fz = o && o.finalization != null ? o.finalization : Infinity;
    return this.filter((u) => u.metrics.blockHeadLag < bh && u.metrics.finalizationLag < fz);
  });
  define('removeByMinRequests', function (min) { return this.filter((u) => u.metrics.requestsTotal >= min); });
  define('removeByLatency', function (o) {
    return this.filter((u) => {
      for (const q of [50, 70, 90, 95, 99]) if (o['p' + q + 'Ms'] != null && u.metrics.latencyP(q) > o['p' + q + 'Ms']) return false;
      return true;
    });
  });
  define('excludeIf', function (pred) { return typeof pred === 'function' ? this.filter((u) => !pred(u)) : this.slice(); });
  define('reject', function (fn) { return this.filter((u, i, a) => !fn(u, i, a)); });

  const PRESETS = {
    PREFER_FASTEST: { errorRate: 4, respLatency: 15, throttledRate: 4, blockHeadLag: 1, finalizationLag: 0, misbehaviors: 2 },
    PREFER_FRESHEST: { errorRate: 4, respLatency: 2, throttledRate: 2, blockHeadLag: 15, finalizationLag: 8, misbehaviors: 3 },
    PREFER_LEAST_ERRORS: { errorRate: 15, respLatency: 2, throttledRate: 6, blockHeadLag: 2, finalizationLag: 1, misbehaviors: 12 },
  };
  for (const k of Object.keys(PRESETS)) G[k] = Object.freeze(PRESETS[k]);
  const LAT_KEYS = { p50: 'p50ResponseSeconds', p70: 'p70ResponseSeconds', p90: 'p90ResponseSeconds', p95: 'p95ResponseSeconds', p99: 'p99ResponseSeconds' };
  function penalty(m, w, latKey) {
    let p = 0;
    if (w.errorRate) p += m.errorRate * w.errorRate;
    if (w.respLatency) p += m[latKey] * w.respLatency;
    if (w.throttledRate) p += m.throttledRate * w.throttledRate;
    if (w.blockHeadLag) p += m.blockHeadLag * w.blockHeadLag;
    if (w.finalizationLag) p += m.finalizationLag * w.finalizationLag;
    if (w.misbehaviors) p += m.misbehaviorRate * w.misbehaviors;
    return p;
  }
  define('sortByScore', function (base, opts) {
    opts = opts || {};
    const latKey = LAT_KEYS[opts.latencyQuantile] || 'p70ResponseSeconds';
    const mode = opts.multipliers || 'merge';
    const out = this.slice();
    for (const u of out) {
      let w = (typeof base === 'function' ? base(u) : base) || PRESETS.PREFER_FASTEST;
      let overall = 1;
      const pm = mode !== 'off' ? u.scoreMultipliers : null;
      if (pm) {
        let own = null;
        for (const k of Object.keys(pm)) {
          if (k === 'overall') { if (pm[k] != null) overall = pm[k]; continue; }
          (own = own || {})[k] = pm[k];
        }
        if (own) w = mode === 'override' ? own : Object.assign({}, w, own);
      }
      if (typeof opts.overall === 'function') overall *= opts.overall(u);
      u.score = overall / (1 + penalty(u.metrics, w, latKey));
    }
    out.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return out;
  });
  define('sortBy', function (fn, o) {
    const desc = !!(o && o.desc);
    return this.slice().sort((a, b) => (desc ? fn(b) - fn(a) : fn(a) - fn(b)));
  });
  define('sortByDesc', function (fn) { return this.sortBy(fn, { desc: true }); });
  define('sortByLatency', function (q) { const k = LAT_KEYS[q] || 'p70ResponseSeconds'; return this.sortBy((u) => u.metrics[k]); });
  define('sortByErrorRate', function () { return this.sortBy((u) => u.metrics.errorRate); });
  define('sortByThrottling', function () { return this.sortBy((u) => u.metrics.throttledRate); });
  define('sortByHeadLag', function () { return this.sortBy((u) => u.metrics.blockHeadLag); });
  define('sortByFinalizationLag', function () { return this.sortBy((u) => u.metrics.finalizationLag); });
  define('sortByMisbehavior', function () { return this.sortBy((u) => u.metrics.misbehaviorRate); });
  define('preferTag', function (p, o) {
    o = o || {};
    const min = o.minHealthy != null ? o.minHealthy : 1;
    const inTag = this.filter((u) => hasMatchingTag(u, p));
    if (inTag.length >= min) return inTag;
    if (o.fallback) { const fb = this.filter((u) => hasMatchingTag(u, o.fallback)); if (fb.length > 0) return fb; }
    return this.slice();
  });
  define('preferVendor', function (v, o) {
    o = o || {};
    const min = o.minHealthy != null ? o.minHealthy : 1;
    const inV = this.filter((u) => matchAny(v, u.vendor));
    if (inV.length >= min) return inV;
    if (o.fallback) { const fb = this.filter((u) => matchAny(o.fallback, u.vendor)); if (fb.length > 0) return fb; }
    return this.slice();
  });
  define('pickTop', function (n) { return this.slice(0, n); });
  define('take', function (n) { return this.slice(0, n); });
  // eRPC's round-robin: the order turned left by n (ctx.tickCount turns it one place per evaluation).
  define('rotateBy', function (n) {
    const len = this.length;
    const k = len === 0 || !Number.isFinite(n) ? 0 : ((Math.trunc(n) % len) + len) % len;
    return this.slice(k).concat(this.slice(0, k));
  });
  define('skip', function (n) { return this.slice(n); });
  define('dropTop', function (n) { return this.slice(n); });
  define('whenEmpty', function (fn) { return this.length === 0 ? fn() : this.slice(); });
  define('whenNotEmpty', function (fn) { return this.length > 0 ? fn(this) : this.slice(); });
  define('ensureMin', function (n, fn) { return this.length < n ? fn(this) : this.slice(); });
  define('fallbackTo', function (x) { return this.length > 0 ? this.slice() : typeof x === 'function' ? x() : x; });
  define('tap', function (fn) { fn(this); return this; });
  define('label', function () { return this; });

  const leaf = (f) => f;
  G.errorRateAbove = (r) => leaf((u) => u.metrics.errorRate > r);
  G.errorRateBelow = (r) => leaf((u) => u.metrics.errorRate < r);
  G.throttleRateAbove = (r) => leaf((u) => u.metrics.throttledRate > r);
  G.throttleRateBelow = (r) => leaf((u) => u.metrics.throttledRate < r);
  G.blockNumberLagAbove = (b) => leaf((u) => u.metrics.blockHeadLag > b);
  G.finalizationLagAbove = (b) => leaf((u) => u.metrics.finalizationLag > b);
  G.latencyAbove = (ms, q) => leaf((u) => u.metrics.latencyP(q == null ? 70 : q) > ms);
  G.samplesAbove = (n) => leaf((u) => u.metrics.requestsTotal > n);
  G.samplesBelow = (n) => leaf((u) => u.metrics.requestsTotal < n);
  G.all = (...ps) => (u) => ps.every((p) => p(u));
  G.any = (...ps) => (u) => ps.some((p) => p(u));
  G.not = (p) => (u) => !p(u);
  G.methodMatches = (p) => matchAny(p, state.ctx.method);
  G.isFinalityRequest = () => state.ctx.finality === 'finalized';

  G.misbehaviorRateAbove = (r) => leaf((u) => u.metrics.misbehaviorRate > r);
  G.blockSecondsLagAbove = (s) => leaf((u) => u.metrics.blockHeadLagSeconds > s);
  G.finalizationSecondsLagAbove = (s) => leaf((u) => u.metrics.finalizationLagSeconds > s);
  // eRPC's latencyDeviationAbove(multiplier, quantile | { quantile, mode, minMethodSamples, dampingMs }):
  // method by method, this upstream's latency over the fastest OTHER upstream's, each ratio damped
  // by (1 - e^(-ms / dampingMs)) so sub-perceptible gaps count little, then collapsed by mode
  // (geomean of the ratios, majority of methods, or veto by any). Methods with fewer than
  // minMethodSamples requests, or without a peer, are left out; no method compared: false.
  // The peers are taken when the factory is called, so the chain sees this evaluation's numbers.
  G.latencyDeviationAbove = (multiplier, opt) => {
    const o = typeof opt === 'number' ? { quantile: opt } : opt || {};
    const q = o.quantile != null ? o.quantile : 70;
    const mode = o.mode || 'geomean';
    const minSamples = o.minMethodSamples != null ? o.minMethodSamples : 50;
    const damping = o.dampingMs != null ? o.dampingMs : 30;
    const field = 'p' + (q <= 50 ? 50 : q <= 70 ? 70 : q <= 90 ? 90 : q <= 95 ? 95 : 99) + 'ms';
    const usable = (mm) => mm && !(minSamples > 0 && mm.requestsTotal < minSamples) && mm[field] > 0;
    // Per method, the two fastest values and who holds the fastest: "fastest other" in O(1).
    const best = new Map();
    for (const u of state.all) {
      for (const m of Object.keys(u.metricsByMethod)) {
        const mm = u.metricsByMethod[m];
        if (!usable(mm)) continue;
        const v = mm[field];
        const b = best.get(m) || { first: Infinity, firstId: null, second: Infinity };
        if (v < b.first) { b.second = b.first; b.first = v; b.firstId = u.id; } else if (v < b.second) b.second = v;
        best.set(m, b);
      }
    }
    return leaf((u) => {
      let compared = 0, slow = 0, logs = 0, logged = 0;
      for (const m of Object.keys(u.metricsByMethod || {})) {
        const mm = u.metricsByMethod[m];
        const b = best.get(m);
        if (!usable(mm) || !b) continue;
        const peer = b.firstId === u.id ? b.second : b.first;
        if (!Number.isFinite(peer)) continue;
        const my = mm[field];
        const ratio = (my / peer) * (damping > 0 ? 1 - Math.exp(-my / damping) : 1);
        compared++;
        if (ratio > multiplier) slow++;
        if (ratio > 0) { logs += Math.log(ratio); logged++; }
      }
      if (compared === 0) return false;
      if (mode === 'veto') return slow > 0;
      if (mode === 'majority') return slow / compared >= 0.5;
      return logged > 0 && Math.exp(logs / logged) > multiplier;
    });
  };

${TICK_HELPERS}
  const QUANTILES = [50, 70, 90, 99];
  function metricsOf(m, cordonReason) {
    const out = {
      errorRate: m.errorRate, errorsTotal: Math.round(m.errorRate * m.requests), requestsTotal: m.requests,
      throttledRate: m.throttleRate, blockHeadLag: m.blockHeadLag, finalizationLag: m.finalizationLag,
      misbehaviorRate: m.misbehaviorRate || 0, blockHeadLagSeconds: m.blockHeadLagSeconds || 0, finalizationLagSeconds: m.finalizationLagSeconds || 0,
      // p95 is not kept by svc: p99, the nearest kept quantile, answers (as latencyP does).
      p50ResponseSeconds: m.p50, p70ResponseSeconds: m.p70, p90ResponseSeconds: m.p90, p95ResponseSeconds: m.p99, p99ResponseSeconds: m.p99,
      requests: m.requests, throttleRate: m.throttleRate, p50: m.p50, p70: m.p70, p90: m.p90, p99: m.p99,
      cordoned: cordonReason !== undefined,
      // p95 is not kept by svc: the nearest kept quantile answers.
      latencyP(q) {
        const want = q <= 1 ? q * 100 : q;
        let best = QUANTILES[0];
        for (const k of QUANTILES) if (Math.abs(k - want) <= Math.abs(best - want)) best = k;
        return this['p' + best] * 1000;
      },
    };
    if (cordonReason !== undefined) out.cordonedReason = cordonReason;
    return out;
  }
  function upstreamOf(i) {
    const metrics = metricsOf(i.metrics, i.cordonReason);
    const u = {
      id: i.id, vendor: i.vendor, type: 'evm', tags: i.tags, syncing: i.syncing, cordoned: i.cordonReason !== undefined,
      metrics, metricsAcrossMethods: i.metricsAcrossMethods ? metricsOf(i.metricsAcrossMethods, i.cordonReason) : metrics,
      metricsByMethod: i.metricsByMethod || {},
      hasTag(p) { return hasMatchingTag(this, p); },
      is(p) { return hasMatchingTag(this, p); },
    };
    if (i.scoreMultipliers) u.scoreMultipliers = i.scoreMultipliers;
    return u;
  }

  // Errors become text here, under the time bound: a thrown object's toString or message getter
  // is policy code and must never run on the host.
  function describe(e) {
    try {
      const m = e != null && typeof e === 'object' && 'message' in e ? (e.name ? e.name + ': ' : '') + String(e.message) : String(e);
      return m.length > 500 ? m.slice(0, 500) + '...' : m;
    } catch (_) {
      return 'a value that cannot be shown';
    }
  }
  function run(define, input) {
    const fn = define();
    if (typeof fn !== 'function') throw new TypeError('evalFunc is not a function: write it as (upstreams, ctx) => upstreams');
    const data = JSON.parse(input);
    state.ctx = Object.freeze(data.ctx);
    state.stickies = data.stickies || {};
    state.out = { notes: [], shadow: Object.create(null) };
    state.all = data.upstreams.map(upstreamOf);
    const out = fn(state.all.slice(), state.ctx);
    if (out != null && typeof out.then === 'function') throw new TypeError('evalFunc returned a promise: a YAML policy must return the array itself');
    if (!Array.isArray(out)) throw new TypeError('evalFunc returned ' + (out === null ? 'null' : typeof out) + ', not an array of upstreams');
    const known = new Set(data.upstreams.map((u) => u.id));
    const ids = [];
    for (let i = 0; i < out.length && ids.length < known.size; i++) {
      const e = out[i];
      const id = typeof e === 'string' ? e : e != null && typeof e.id === 'string' ? e.id : undefined;
      if (id !== undefined && known.has(id) && !ids.includes(id)) ids.push(id);
    }
    return JSON.stringify({ ids, cordonsRemoved: state.cordonsRemoved, state: state.out });
  }
  Object.defineProperty(G, '__svcRun', {
    value(define, input) {
      try {
        return run(define, input);
      } catch (e) {
        return JSON.stringify({ error: describe(e) });
      }
    },
  });
})();
`;
