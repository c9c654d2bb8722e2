/**
 * Rolling health windows per (upstream, method) (spec §2.1, §3.1): with `*` as the whole
 * upstream, request count, error rate, throttle rate, latency quantiles of successful responses
 * (DDSketch), block-head and finalization lag, and the cordon flag with its reason. Generic over
 * what an error is: the caller injects the classifier (core's `healthOutcome`, core/pipeline/blame.ts,
 * which decides that nothing a client sends counts against an upstream). One tracker per
 * project (core/registry/project.ts); cordons are in-process only.
 *
 * svc's one home of "what is an upstream's health": everyone else reads a {@link HealthSnapshot}
 * (or `latencyQuantile`, `cordonOf`) and computes none of these numbers again. The health plugin
 * feeds it; the selection plugin scores snapshots with its configured weights; the healthcheck,
 * the admin methods and page, the failsafe's adaptive delays and consensus read or cordon
 * through it (docs/architecture.md, "Resilience primitives and upstream health").
 */
import { DDSketch } from '@datadog/sketches-js';
import type { AttemptRecord } from '../core/wire/records.ts';
import { compileGlobs, type GlobTest } from './glob.ts';
import { connectFailed, type Reachability, reachabilityOf } from './reachability.ts';

/** How an attempt counts in the health window (core/pipeline/blame.ts `healthOutcome` decides). */
export type HealthOutcome = 'success' | 'error' | 'throttle' | 'neutral' | 'ignore';

/** Decides how one finished attempt counts (core/pipeline/blame.ts `healthOutcome`). */
export type HealthClassifier = (a: AttemptRecord) => HealthOutcome;

interface Bucket {
  epoch: number;
  requests: number;
  errors: number;
  throttles: number;
  latency: DDSketch;
}

/** A snapshot of one cell's window (spec §3.1 selection inputs). */
export interface HealthSnapshot {
  /** Requests in the window (successes, errors, throttles and neutral answers). */
  requests: number;
  /** errors / requests, 0..1. */
  errorRate: number;
  /** throttles / requests, 0..1. */
  throttleRate: number;
  /** Latency quantiles of successful responses, seconds (0 without samples). */
  p50: number;
  p70: number;
  p90: number;
  p99: number;
  /** Blocks behind the network's highest latest block (0 until the state poller runs). */
  blockHeadLag: number;
  /** Blocks behind the network's highest finalized block. */
  finalizationLag: number;
  /** Cordon state of this cell (or of `*`). */
  cordoned: boolean;
  cordonReason?: string;
  /**
   * The upstream's last attempt that said anything got no answer (connection refused or reset,
   * no answer before the deadline, HTTP 5xx: lib/reachability.ts); false while up or unknown.
   */
  down?: boolean;
  /** Why it is down: that attempt's error (`<ErrName>: <message>`, bounded); only while down. */
  downReason?: string;
  /** Down because no connection could be made (refused, no route, name not resolved); only while down. */
  unreachable?: boolean;
}

/** One (upstream, method) cell. */
class HealthCell {
  /** The window's buckets; replaced (emptied) when a reload replaces the upstream. */
  buckets: Bucket[];
  cordoned = false;
  cordonReason?: string;
  cordonedAt = 0;

  constructor(n: number) {
    this.buckets = Array.from({ length: n }, () => ({ epoch: -1, requests: 0, errors: 0, throttles: 0, latency: new DDSketch({ relativeAccuracy: 0.02 }) }));
  }

  bucket(epoch: number): Bucket {
    const b = this.buckets[epoch % this.buckets.length] as Bucket;
    if (b.epoch !== epoch) {
      b.epoch = epoch;
      b.requests = 0;
      b.errors = 0;
      b.throttles = 0;
      b.latency = new DDSketch({ relativeAccuracy: 0.02 });
    }
    return b;
  }
}

/** Most method cells per upstream; later methods share the `*other` cell (labels from clients are bounded). */
const MAX_METHODS = 200;

/** A real cordon edge (spec §3.1): off-to-on (`cordon`) or on-to-off (`uncordon`, with how long it lasted). */
export interface CordonChange {
  upstream: string;
  method: string;
  /** `reason`: an already-cordoned cell got a new reason (no edge: counters do not move). */
  action: 'cordon' | 'uncordon' | 'reason';
  /** The reason it was cordoned with (the new one for `reason`). */
  reason: string;
  /** On `reason`: the reason it had before. */
  previousReason?: string;
  /** On `uncordon`: how long the cell was cordoned, ms. */
  durationMs?: number;
}

/** A cordon scope that is a glob over method names rather than one name or `*`. */
function isGlobMethod(method: string): boolean {
  return method !== '*' && (method.includes('*') || method.includes('?'));
}

/** Health of every upstream of one project. */
export class HealthTracker {
  /** Called on every real cordon edge (the health plugin turns them into §6 metrics). */
  readonly cordonListeners: Array<(change: CordonChange) => void> = [];
  private readonly cells = new Map<string, Map<string, HealthCell>>();
  /** Cordons whose method is a glob (`eth_get*`), per upstream: tested only when some exist. */
  private readonly globCordons = new Map<string, Map<string, GlobTest>>();
  private readonly lags = new Map<string, { head: number; finalization: number }>();
  private readonly reach = new Map<string, Reachability>();
  /** Called when an upstream's reachability turns (up to down, down to up, or first known). */
  readonly reachabilityListeners: Array<(upstream: string, r: Reachability) => void> = [];
  private readonly bucketMs: number;

  /**
   * @param classify how an attempt counts (core passes `healthOutcome`, core/pipeline/blame.ts)
   * @param windowMs rolling window length, ms (`projects[].scoreMetricsWindowSize`, default 10 min)
   * @param buckets sub-buckets of the window (default 10)
   * @param now clock, ms (tests inject one)
   */
  constructor(
    private readonly classify: HealthClassifier,
    readonly windowMs = 600_000,
    readonly buckets = 10,
    private readonly now: () => number = Date.now,
  ) {
    this.bucketMs = Math.max(1, Math.floor(windowMs / buckets));
  }

  private cell(upstream: string, method: string, create: boolean): HealthCell | undefined {
    let m = this.cells.get(upstream);
    if (!m) {
      if (!create) return undefined;
      m = new Map();
      this.cells.set(upstream, m);
    }
    let c = m.get(method);
    if (!c && create) {
      const key = m.size >= MAX_METHODS && method !== '*' ? '*other' : method;
      c = m.get(key);
      if (!c) {
        c = new HealthCell(this.buckets);
        m.set(key, c);
      }
    }
    return c;
  }

  /** Records one finished attempt in its method cell and the upstream's `*` cell. */
  record(a: AttemptRecord): void {
    this.recordReachability(a);
    const kind = this.classify(a);
    if (kind === 'ignore') return;
    const epoch = Math.floor(this.now() / this.bucketMs);
    for (const method of [a.method, '*']) {
      const b = (this.cell(a.upstreamId, method, true) as HealthCell).bucket(epoch);
      b.requests++;
      if (kind === 'error') b.errors++;
      else if (kind === 'throttle') b.throttles++;
      else if (kind === 'success') b.latency.accept(Math.max(a.durationMs, 0.001) / 1000);
    }
  }

  /** Whether the upstream answered its last attempt that said anything (lib/reachability.ts); undefined before any. */
  reachability(upstream: string): Reachability | undefined {
    return this.reach.get(upstream);
  }

  private downFields(upstream: string): { down?: boolean; downReason?: string; unreachable?: boolean } {
    const r = this.reach.get(upstream);
    return r && !r.up ? { down: true, downReason: r.error, ...(r.unreachable ? { unreachable: true } : {}) } : {};
  }

  private recordReachability(a: AttemptRecord): void {
    const verdict = reachabilityOf(a);
    if (verdict === undefined) return;
    const up = verdict === 'up';
    const at = this.now();
    const was = this.reach.get(a.upstreamId);
    const unreachable = !up && connectFailed(a);
    if (was && was.up === up && (was.unreachable === true) === unreachable) {
      was.at = at;
      if (!up) was.error = errorLine(a);
      return;
    }
    const r: Reachability = { up, at, since: at, ...(up ? {} : { error: errorLine(a) }), ...(unreachable ? { unreachable } : {}) };
    this.reach.set(a.upstreamId, r);
    for (const l of this.reachabilityListeners) l(a.upstreamId, r);
  }

  /**
   * Drops what is known about an upstream that a config reload removed or replaced: its window
   * and lags, and its cordons unless `keepCordons` (a replaced upstream keeps the operator's
   * cordons, which name it by id). No cordon edge is reported for the dropped ones.
   */
  forget(upstream: string, keepCordons = false): void {
    const m = this.cells.get(upstream);
    this.lags.delete(upstream);
    this.reach.delete(upstream);
    if (!m) return;
    if (!keepCordons) {
      // Reported as uncordons, so the cordon gauges of a removed upstream go to 0.
      for (const method of [...m.keys()]) this.uncordon(upstream, method);
      this.cells.delete(upstream);
      return;
    }
    // Only the cordon cells stay, with their reasons and start times and empty windows.
    for (const [method, c] of m) {
      if (!c.cordoned) m.delete(method);
      else c.buckets = new HealthCell(this.buckets).buckets;
    }
  }

  /** Sets the block lags of an upstream (fed by the EVM state poller). */
  setLag(upstream: string, head: number, finalization: number): void {
    this.lags.set(upstream, { head: Math.max(0, head), finalization: Math.max(0, finalization) });
  }

  /**
   * The window's numbers for one cell (`*` for the whole upstream).
   * @param method a method name or `*`
   */
  snapshot(upstream: string, method = '*'): HealthSnapshot {
    const c = this.cell(upstream, method, false);
    const epoch = Math.floor(this.now() / this.bucketMs);
    let requests = 0;
    let errors = 0;
    let throttles = 0;
    const sketch = new DDSketch({ relativeAccuracy: 0.02 });
    if (c) {
      for (const b of c.buckets) {
        if (b.epoch < 0 || epoch - b.epoch >= this.buckets) continue;
        requests += b.requests;
        errors += b.errors;
        throttles += b.throttles;
        if (b.latency.count > 0) sketch.merge(b.latency);
      }
    }
    const q = (p: number) => (sketch.count > 0 ? sketch.getValueAtQuantile(p) : 0);
    const lag = this.lags.get(upstream);
    const cordon = this.cordonOf(upstream, method);
    return {
      requests,
      errorRate: requests ? errors / requests : 0,
      throttleRate: requests ? throttles / requests : 0,
      p50: q(0.5),
      p70: q(0.7),
      p90: q(0.9),
      p99: q(0.99),
      blockHeadLag: lag?.head ?? 0,
      finalizationLag: lag?.finalization ?? 0,
      cordoned: cordon !== undefined,
      cordonReason: cordon,
      ...this.downFields(upstream),
    };
  }

  /**
   * Requests and successful answers of one cell over the window (`*` for the whole upstream),
   * without the quantiles {@link snapshot} merges: cheap enough for the request path.
   * @param method a method name or `*`; a method without a cell of its own (past the per-upstream
   * bound) has none of either
   */
  requestCounts(upstream: string, method = '*'): { requests: number; answered: number } {
    const c = this.cell(upstream, method, false);
    let requests = 0;
    let answered = 0;
    if (c) {
      const epoch = Math.floor(this.now() / this.bucketMs);
      for (const b of c.buckets) {
        if (b.epoch < 0 || epoch - b.epoch >= this.buckets) continue;
        requests += b.requests;
        answered += b.latency.count;
      }
    }
    return { requests, answered };
  }

  /**
   * The methods an upstream has a cell of its own for with requests in the window (eRPC's
   * `GetUpstreamMetrics` keys): at most 200, since later methods share one cell; never `*`, that
   * shared cell, or a glob cordon's cell.
   */
  methods(upstream: string): string[] {
    const m = this.cells.get(upstream);
    if (!m) return [];
    const out: string[] = [];
    for (const method of m.keys()) {
      if (method === '*' || method === '*other' || isGlobMethod(method)) continue;
      if (this.requestCounts(upstream, method).requests > 0) out.push(method);
    }
    return out;
  }

  /**
   * One latency quantile of a method's successful answers over several upstreams' windows
   * together (the failsafe plugin's adaptive timeouts and hedges: eRPC's per network × method
   * latency), in seconds; 0 while none of them has a sample.
   * @param upstreams upstream ids (a network's upstreams)
   * @param method a method name or `*`
   * @param q the quantile, 0..1
   */
  latencyQuantile(upstreams: Iterable<string>, method: string, q: number): number {
    const epoch = Math.floor(this.now() / this.bucketMs);
    let sketch: DDSketch | undefined;
    for (const u of upstreams) {
      const c = this.cell(u, method, false);
      if (!c) continue;
      for (const b of c.buckets) {
        if (b.epoch < 0 || epoch - b.epoch >= this.buckets || b.latency.count === 0) continue;
        (sketch ??= new DDSketch({ relativeAccuracy: 0.02 })).merge(b.latency);
      }
    }
    return sketch ? sketch.getValueAtQuantile(Math.min(1, Math.max(0, q))) : 0;
  }

  /**
   * Cordons an (upstream, method) cell (spec §3.1). Returns true on a real off-to-on edge;
   * an already-cordoned cell only gets its reason overwritten.
   */
  cordon(upstream: string, method: string, reason: string): boolean {
    const c = this.cell(upstream, method, true) as HealthCell;
    const edge = !c.cordoned;
    const previous = c.cordonReason;
    c.cordoned = true;
    c.cordonReason = reason;
    if (edge) {
      c.cordonedAt = this.now();
      if (isGlobMethod(method)) {
        let globs = this.globCordons.get(upstream);
        if (!globs) this.globCordons.set(upstream, (globs = new Map()));
        globs.set(method, compileGlobs(method));
      }
      for (const l of this.cordonListeners) l({ upstream, method, action: 'cordon', reason });
    } else if (previous !== reason) for (const l of this.cordonListeners) l({ upstream, method, action: 'reason', reason, previousReason: previous ?? '' });
    return edge;
  }

  /**
   * Uncordons a cell. Returns the cordon duration in ms on a real on-to-off edge, else undefined.
   * Uncordoning `*` leaves method cordons in place (spec §3.1 leaves it open; svc keeps them).
   */
  uncordon(upstream: string, method: string): number | undefined {
    const c = this.cell(upstream, method, false);
    if (!c || !c.cordoned) return undefined;
    const reason = c.cordonReason ?? '';
    c.cordoned = false;
    c.cordonReason = undefined;
    const globs = this.globCordons.get(upstream);
    if (globs?.delete(method) && globs.size === 0) this.globCordons.delete(upstream);
    const durationMs = this.now() - c.cordonedAt;
    for (const l of this.cordonListeners) l({ upstream, method, action: 'uncordon', reason, durationMs });
    return durationMs;
  }

  /** The cordon reason when `*`, the method's cell, or a glob cordon matching it is cordoned (`*` first), else undefined. */
  cordonOf(upstream: string, method: string): string | undefined {
    const m = this.cells.get(upstream);
    if (!m) return undefined;
    const all = m.get('*');
    if (all?.cordoned) return all.cordonReason ?? 'cordoned';
    if (method === '*') return undefined;
    const c = m.get(method);
    if (c?.cordoned) return c.cordonReason ?? 'cordoned';
    const globs = this.globCordons.get(upstream);
    if (globs) for (const [glob, test] of globs) if (test(method)) return m.get(glob)?.cordonReason ?? 'cordoned';
    return undefined;
  }

  /** True when the upstream is cordoned for every method or for this one. */
  isCordoned(upstream: string, method: string): boolean {
    return this.cordonOf(upstream, method) !== undefined;
  }

  /** Every cordoned cell: `[upstream, method, reason]`. */
  listCordoned(): Array<{ upstream: string; method: string; reason: string }> {
    const out: Array<{ upstream: string; method: string; reason: string }> = [];
    for (const [u, m] of this.cells) for (const [method, c] of m) if (c.cordoned) out.push({ upstream: u, method, reason: c.cordonReason ?? '' });
    return out;
  }
}

/** Longest error text kept for a down upstream, characters. */
const MAX_ERROR_TEXT = 200;

/** `<ErrName>: <message>` of an attempt's error, bounded (messages are redacted where they arise). */
function errorLine(a: AttemptRecord): string {
  const e = a.error;
  const text = e ? `${e.name}: ${e.message}` : a.outcome;
  return text.length > MAX_ERROR_TEXT ? `${text.slice(0, MAX_ERROR_TEXT - 1)}…` : text;
}
