/**
 * Selection policy evaluation, free of any proxy state (spec §1.3, §3.1): the policy input
 * objects, the {@link UpstreamsView} helpers a policy composes (`removeCordoned`, `exclude`,
 * `preferNonFallback`, `sortByScore`...), the {@link defaultPolicy} and {@link evaluatePolicy},
 * which runs a policy (sync or async, bounded by `evalTimeout`) over synthetic or live inputs.
 * The selection plugin (`./index.ts`) feeds it health snapshots on every evaluation tick.
 */
import { performance } from 'node:perf_hooks';
import type { HealthSnapshot } from '../../core/registry/health.ts';

/**
 * Weights of the selection score (lower is better, spec §6 `svc_selection_score`):
 * `errorRate*errorRate + respLatency*p70Seconds + throttledRate*throttleRate + blockHeadLag*blockHeadLag`.
 * Config: `networks[].selectionPolicy.scoreWeights`.
 */
export interface ScoreWeights {
  /** Weight of the error rate (0..1). Default 4. */
  errorRate: number;
  /** Weight of the p70 latency of successful responses, in seconds. Default 15. */
  respLatency: number;
  /** Weight of the throttle (rate-limited) rate (0..1). Default 4. */
  throttledRate: number;
  /** Weight of the block-head lag, in blocks. Default 1. */
  blockHeadLag: number;
}

/** The default score weights: `4*errorRate + 15*p70Seconds + 4*throttleRate + 1*blockHeadLag`. */
export const DEFAULT_SCORE_WEIGHTS: Readonly<ScoreWeights> = Object.freeze({ errorRate: 4, respLatency: 15, throttledRate: 4, blockHeadLag: 1 });

/** Thresholds of the {@link defaultPolicy}'s health exclusions. */
export const DEFAULT_THRESHOLDS = Object.freeze({
  /** Rates only count with more than this many requests in the window. */
  minSamples: 10,
  /** Excluded above this error rate. */
  maxErrorRate: 0.7,
  /** Excluded above this throttle rate. */
  maxThrottleRate: 0.4,
  /** Excluded above this p70 latency, seconds. */
  maxP70Seconds: 10,
});

/** The tag that marks an upstream as a last resort ({@link UpstreamsView.preferNonFallback}). */
export const FALLBACK_TAG = 'tier:fallback';

/** The metric numbers a policy sees for one upstream (a health snapshot of its `*` cell). */
export type PolicyMetrics = Readonly<HealthSnapshot>;

/**
 * One upstream as a selection policy sees it (frozen; built fresh for every evaluation).
 * `metrics` is the health tracker's `*` window: `requests`, `errorRate`, `throttleRate` (0..1),
 * `p50`/`p70`/`p90`/`p99` (seconds), `blockHeadLag`/`finalizationLag` (blocks), `cordoned`.
 */
export interface PolicyUpstream {
  /** Upstream id as declared in config. */
  readonly id: string;
  /** Tags as `"<key>:<value>"` strings. */
  readonly tags: readonly string[];
  /** `vendorName` or `unknown`. */
  readonly vendor: string;
  /** Rolling health window of the whole upstream (method `*`). */
  readonly metrics: PolicyMetrics;
  /** True while the EVM state poller says the node is syncing. */
  readonly syncing: boolean;
  /** True while the upstream is cordoned for every method (`*`, spec §3.1). */
  readonly cordoned: boolean;
}

/** A synthetic or live policy input: everything but the id is optional (zero metrics by default). */
export interface PolicyUpstreamInput {
  id: string;
  tags?: Iterable<string>;
  vendor?: string;
  metrics?: Partial<HealthSnapshot>;
  syncing?: boolean;
  /** Default: `metrics.cordoned`, else false. */
  cordoned?: boolean;
}

/** One selection decision as a policy step records it (the plugin stamps the time). */
export interface DecisionDraft {
  /** Policy step: `removeCordoned`, `excludeErrorRate`, `excludeThrottled`, `excludeSlow`, `excludeSyncing`, `useAllUncordoned`, `preferNonFallback`, `evalFunc`, or a custom step name. */
  step: string;
  /** Upstream id, or `*` for a decision about the whole list. */
  upstream: string;
  /** Why (`cordoned`, `tier:fallback`, `errorRate 0.82 > 0.7 over 25 requests`...). */
  reason: string;
}

/** Second argument of an {@link EvalFunc}. */
export interface PolicyContext {
  /** Project id. */
  readonly project: string;
  /** Network id (`evm:<chainId>`). */
  readonly network: string;
  /** Method scope of the evaluation: always `*` (the list is per network, not per method). */
  readonly method: string;
  /** The configured score weights (`selectionPolicy.scoreWeights`, defaults applied). */
  readonly weights: Readonly<ScoreWeights>;
  /** The configured `evalTimeout`, ms. */
  readonly evalTimeoutMs: number;
  /** Evaluation time, epoch ms. */
  readonly now: number;
  /** The built-in policy, for functions that only pre- or post-process it. */
  readonly defaultPolicy: EvalFunc;
  /** Score of one upstream (lower is better) with the configured weights, optionally overridden. */
  score(u: PolicyUpstream, weights?: Partial<ScoreWeights>): number;
  /** Wraps a plain array of this evaluation's upstreams back into a view (to get the helpers again). */
  view(list: Iterable<PolicyUpstream>): UpstreamsView;
}

/**
 * A selection policy (`networks[].selectionPolicy.evalFunc`, spec §1.3, §3.1): receives every
 * upstream of the network (config order) with its metrics, returns the ones that may serve, in
 * preference order. May be async; bounded by `evalTimeout`. Cordoned upstreams stay in rotation
 * unless the function calls `.removeCordoned()`. Elements of the returned array may also be
 * plain upstream ids; unknown ids and duplicates are ignored.
 */
export type EvalFunc = (upstreams: UpstreamsView, ctx: PolicyContext) => readonly PolicyUpstream[] | Promise<readonly PolicyUpstream[]>;

/** State of one policy evaluation, shared by every view derived from its input. */
interface PolicyRun {
  readonly weights: Readonly<ScoreWeights>;
  readonly decisions: DecisionDraft[];
  cordonsRemoved: boolean;
}

/** The run an input object belongs to: lets views made by `filter`/`slice` (species) find it. */
const RUNS = new WeakMap<PolicyUpstream, PolicyRun>();
/** Sink for views built from foreign objects: helpers work, nothing is recorded. */
const detachedRun = (): PolicyRun => ({ weights: DEFAULT_SCORE_WEIGHTS, decisions: [], cordonsRemoved: false });

/**
 * Score of one upstream, lower is better (spec §6 `svc_selection_score`):
 * `w.errorRate*errorRate + w.respLatency*p70 (s) + w.throttledRate*throttleRate + w.blockHeadLag*blockHeadLag`.
 * Missing metric numbers count as 0.
 */
export function scoreOf(m: Partial<Pick<HealthSnapshot, 'errorRate' | 'p70' | 'throttleRate' | 'blockHeadLag'>>, w: Readonly<ScoreWeights> = DEFAULT_SCORE_WEIGHTS): number {
  return w.errorRate * (m.errorRate ?? 0) + w.respLatency * (m.p70 ?? 0) + w.throttledRate * (m.throttleRate ?? 0) + w.blockHeadLag * (m.blockHeadLag ?? 0);
}

/** Builds a view bound to an evaluation run (set in {@link UpstreamsView}'s static block). */
let bindView: (items: Iterable<PolicyUpstream>, run: PolicyRun) => UpstreamsView;

/**
 * The upstream list a policy receives: an `Array` of {@link PolicyUpstream} with selection
 * helpers. Every helper returns a new view and leaves this one untouched; exclusions are
 * recorded as selection decisions of the evaluation. Views produced by array methods
 * (`filter`, `slice`, `sort`...) keep the helpers.
 */
export class UpstreamsView extends Array<PolicyUpstream> {
  #run: PolicyRun | undefined;

  /** @param items the upstreams (a single number creates an empty view of that length, as `Array` does) */
  constructor(...items: PolicyUpstream[]) {
    super(...items);
  }

  static {
    bindView = (items, run) => {
      const v = new UpstreamsView();
      for (const u of items) v.push(u);
      v.#run = run;
      return v;
    };
  }

  private run(): PolicyRun {
    const r = this.#run ?? (this[0] ? RUNS.get(this[0]) : undefined);
    if (r) return r;
    this.#run = detachedRun();
    return this.#run;
  }

  private derive(items: Iterable<PolicyUpstream>): UpstreamsView {
    return bindView(items, this.run());
  }

  /** Same as `Array.prototype.filter`, typed to keep the helpers. */
  override filter<S extends PolicyUpstream>(pred: (u: PolicyUpstream, i: number, all: PolicyUpstream[]) => u is S, thisArg?: unknown): UpstreamsView;
  override filter(pred: (u: PolicyUpstream, i: number, all: PolicyUpstream[]) => unknown, thisArg?: unknown): UpstreamsView;
  override filter(pred: (u: PolicyUpstream, i: number, all: PolicyUpstream[]) => unknown, thisArg?: unknown): UpstreamsView {
    return this.derive(Array.prototype.filter.call(this, pred, thisArg) as PolicyUpstream[]);
  }

  /** Ids in order. */
  ids(): string[] {
    return Array.from(this, (u) => u.id);
  }

  /**
   * Drops upstreams cordoned for every method (step `removeCordoned`, reason `cordoned`) and
   * makes the request path honour new cordons at once (spec §3.1). A policy that never calls it
   * keeps cordoned upstreams in rotation.
   */
  removeCordoned(): UpstreamsView {
    this.run().cordonsRemoved = true;
    return this.exclude((u) => u.cordoned, 'cordoned', 'removeCordoned');
  }

  /**
   * Drops the upstreams matching `pred`, recording one decision each.
   * @param pred true for an upstream to exclude
   * @param reason the decision's reason, or a function of the upstream
   * @param step the decision's step name (default `exclude`)
   */
  exclude(pred: (u: PolicyUpstream) => boolean, reason: string | ((u: PolicyUpstream) => string), step = 'exclude'): UpstreamsView {
    const run = this.run();
    const kept: PolicyUpstream[] = [];
    for (const u of this) {
      if (pred(u)) run.decisions.push({ step, upstream: u.id, reason: typeof reason === 'function' ? reason(u) : reason });
      else kept.push(u);
    }
    return this.derive(kept);
  }

  /**
   * Leaves out upstreams tagged `tag` (default `tier:fallback`, step `preferNonFallback`) while
   * at least one other upstream is in the view; keeps them when they are all that is left.
   */
  preferNonFallback(tag: string = FALLBACK_TAG): UpstreamsView {
    if (!this.some((u) => !u.tags.includes(tag))) return this.derive(this);
    return this.exclude((u) => u.tags.includes(tag), tag, 'preferNonFallback');
  }

  /**
   * This view when it is not empty, else `alternative` (recording one decision for `*`).
   * @param alternative the list to use instead
   * @param reason the decision's reason
   * @param step the decision's step name (default `ifEmpty`)
   */
  ifEmpty(alternative: Iterable<PolicyUpstream>, reason = 'every upstream was excluded', step = 'ifEmpty'): UpstreamsView {
    if (this.length > 0) return this.derive(this);
    const alt = this.derive(alternative);
    if (alt.length > 0) this.run().decisions.push({ step, upstream: '*', reason });
    return alt;
  }

  /**
   * A copy ordered by {@link scoreOf}, lowest first; ties keep the current order (stable).
   * @param weights overrides of the configured weights
   */
  sortByScore(weights?: Partial<ScoreWeights>): UpstreamsView {
    const w = weights ? { ...this.run().weights, ...weights } : this.run().weights;
    const scored = Array.from(this, (u) => ({ u, s: scoreOf(u.metrics, w) }));
    scored.sort((a, b) => a.s - b.s);
    return this.derive(scored.map((x) => x.u));
  }

  /** Score of one upstream with the configured weights, optionally overridden. */
  score(u: PolicyUpstream, weights?: Partial<ScoreWeights>): number {
    return scoreOf(u.metrics, weights ? { ...this.run().weights, ...weights } : this.run().weights);
  }

  /**
   * Records a decision of a custom step (shown by the admin method with the built-in ones).
   * @param upstream upstream id or `*`
   */
  note(step: string, upstream: string, reason: string): this {
    this.run().decisions.push({ step, upstream, reason });
    return this;
  }
}

const pct = (x: number) => x.toFixed(2);

/**
 * The built-in policy (spec §1.3, §3.1), in order: remove cordoned upstreams; exclude an
 * upstream with more than 10 requests in the window and an error rate above 0.7 or a throttle
 * rate above 0.4; exclude one whose p70 latency is above 10 s; exclude one that is syncing; if
 * that leaves nothing use every uncordoned upstream; leave out `tier:fallback` upstreams while
 * another survives; order by score (lower first, configured weights).
 */
export const defaultPolicy: EvalFunc = (upstreams) => {
  const t = DEFAULT_THRESHOLDS;
  const uncordoned = upstreams.removeCordoned();
  return uncordoned
    .exclude((u) => u.metrics.requests > t.minSamples && u.metrics.errorRate > t.maxErrorRate, (u) => `errorRate ${pct(u.metrics.errorRate)} > ${t.maxErrorRate} over ${u.metrics.requests} requests`, 'excludeErrorRate')
    .exclude((u) => u.metrics.requests > t.minSamples && u.metrics.throttleRate > t.maxThrottleRate, (u) => `throttleRate ${pct(u.metrics.throttleRate)} > ${t.maxThrottleRate} over ${u.metrics.requests} requests`, 'excludeThrottled')
    .exclude((u) => u.metrics.p70 > t.maxP70Seconds, (u) => `p70 ${pct(u.metrics.p70)}s > ${t.maxP70Seconds}s`, 'excludeSlow')
    .exclude((u) => u.syncing, 'syncing', 'excludeSyncing')
    .ifEmpty(uncordoned, 'every uncordoned upstream was excluded: using all of them', 'useAllUncordoned')
    .preferNonFallback()
    .sortByScore();
};

/** How a policy evaluation failed. */
export type PolicyErrorKind = 'error' | 'timeout' | 'overrun' | 'invalid';

/** A policy evaluation that failed; the plugin keeps the previous order. */
export class PolicyError extends Error {
  /**
   * @param kind `error` (threw or rejected), `timeout` (async, slower than evalTimeout), `overrun` (sync, slower than evalTimeout), `invalid` (did not return an array)
   * @param durationMs how long the evaluation ran, ms
   */
  constructor(
    readonly kind: PolicyErrorKind,
    message: string,
    readonly durationMs: number,
    opts?: { cause?: unknown },
  ) {
    super(message, opts);
    this.name = 'PolicyError';
  }
}

/** What {@link evaluatePolicy} returns. */
export interface PolicyResult {
  /** Upstream ids that may serve, in preference order. */
  order: string[];
  /** Upstream id -> reason, for every input upstream not in `order`. */
  excluded: Record<string, string>;
  /** Upstream id -> score with the configured weights, for every input upstream. */
  scores: Record<string, number>;
  /** Decisions recorded by the policy's steps, in step order. */
  decisions: DecisionDraft[];
  /** True when the policy called `removeCordoned()` (new cordons then apply on the request path at once). */
  cordonsRemoved: boolean;
  /** Wall time of the evaluation, ms. */
  durationMs: number;
}

/** Options of {@link evaluatePolicy}. */
export interface EvaluateOptions {
  /** The policy (default {@link defaultPolicy}). */
  evalFunc?: EvalFunc;
  /** Score weight overrides (default {@link DEFAULT_SCORE_WEIGHTS}). */
  weights?: Partial<ScoreWeights>;
  /** Bound of a custom policy, ms (default 100): an async one is raced against it, a sync one measured. */
  evalTimeoutMs?: number;
  /** Project id passed in the context (default `''`). */
  project?: string;
  /** Network id passed in the context (default `''`). */
  network?: string;
  /** Evaluation time, epoch ms (default `Date.now()`). */
  now?: number;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return !!v && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Builds the frozen policy input object of one upstream. */
export function policyUpstream(i: PolicyUpstreamInput): PolicyUpstream {
  const m = i.metrics ?? {};
  const metrics: HealthSnapshot = {
    requests: m.requests ?? 0,
    errorRate: m.errorRate ?? 0,
    throttleRate: m.throttleRate ?? 0,
    p50: m.p50 ?? 0,
    p70: m.p70 ?? 0,
    p90: m.p90 ?? 0,
    p99: m.p99 ?? 0,
    blockHeadLag: m.blockHeadLag ?? 0,
    finalizationLag: m.finalizationLag ?? 0,
    cordoned: i.cordoned ?? m.cordoned ?? false,
    cordonReason: m.cordonReason,
  };
  return Object.freeze({
    id: i.id,
    tags: Object.freeze([...(i.tags ?? [])]),
    vendor: i.vendor ?? 'unknown',
    metrics: Object.freeze(metrics),
    syncing: i.syncing ?? false,
    cordoned: metrics.cordoned,
  });
}

/**
 * Runs a selection policy over a list of upstreams (spec §1.3, §3.1). Synchronous when the
 * policy is; a custom policy is bounded by `evalTimeoutMs` (an async one raced against it, a
 * sync one measured afterwards).
 * @param inputs the network's upstreams in config order (ids unique)
 * @param opts policy, weights, bound and context fields
 * @returns the result, or a promise of it for an async policy
 * @throws PolicyError when a custom policy throws, rejects, overruns `evalTimeoutMs` or returns a non-array (an async policy rejects instead)
 */
export function evaluatePolicy(inputs: readonly PolicyUpstreamInput[], opts: EvaluateOptions = {}): PolicyResult | Promise<PolicyResult> {
  const fn = opts.evalFunc ?? defaultPolicy;
  const custom = fn !== defaultPolicy;
  const weights: Readonly<ScoreWeights> = Object.freeze({ ...DEFAULT_SCORE_WEIGHTS, ...(opts.weights ?? {}) });
  const timeoutMs = opts.evalTimeoutMs ?? 100;
  const run: PolicyRun = { weights, decisions: [], cordonsRemoved: false };
  const entries = inputs.map(policyUpstream);
  const byId = new Map<string, PolicyUpstream>();
  for (const e of entries) {
    byId.set(e.id, e);
    RUNS.set(e, run);
  }
  const ctx: PolicyContext = {
    project: opts.project ?? '',
    network: opts.network ?? '',
    method: '*',
    weights,
    evalTimeoutMs: timeoutMs,
    now: opts.now ?? Date.now(),
    defaultPolicy,
    score: (u, w) => scoreOf(u.metrics, w ? { ...weights, ...w } : weights),
    view: (list) => bindView(list, run),
  };
  const started = performance.now();
  const finish = (ret: unknown): PolicyResult => {
    const durationMs = performance.now() - started;
    if (!Array.isArray(ret)) throw new PolicyError('invalid', `evalFunc returned ${ret === null ? 'null' : typeof ret}, not an array of upstreams`, durationMs);
    const order: string[] = [];
    const seen = new Set<string>();
    for (const el of ret as unknown[]) {
      const id = typeof el === 'string' ? el : el && typeof el === 'object' && typeof (el as { id?: unknown }).id === 'string' ? (el as { id: string }).id : undefined;
      if (id === undefined || seen.has(id) || !byId.has(id)) continue;
      seen.add(id);
      order.push(id);
    }
    const lastReason = new Map<string, string>();
    for (const d of run.decisions) lastReason.set(d.upstream, d.reason);
    const excluded: Record<string, string> = {};
    const scores: Record<string, number> = {};
    for (const e of entries) {
      scores[e.id] = scoreOf(e.metrics, weights);
      if (seen.has(e.id)) continue;
      let reason = lastReason.get(e.id);
      if (reason === undefined) {
        reason = 'dropped by evalFunc';
        run.decisions.push({ step: 'evalFunc', upstream: e.id, reason });
      }
      excluded[e.id] = reason;
    }
    return { order, excluded, scores, decisions: run.decisions, cordonsRemoved: run.cordonsRemoved, durationMs };
  };

  let ret: ReturnType<EvalFunc>;
  try {
    ret = fn(bindView(entries, run), ctx);
  } catch (e) {
    throw new PolicyError('error', `evalFunc threw: ${errorMessage(e)}`, performance.now() - started, { cause: e });
  }
  if (!isThenable(ret)) {
    const spent = performance.now() - started;
    if (custom && spent > timeoutMs) throw new PolicyError('overrun', `evalFunc ran ${Math.round(spent)} ms, more than evalTimeout ${timeoutMs} ms`, spent);
    return finish(ret);
  }
  return new Promise<PolicyResult>((resolve, reject) => {
    const timer = setTimeout(() => reject(new PolicyError('timeout', `evalFunc did not settle within evalTimeout ${timeoutMs} ms`, performance.now() - started)), timeoutMs);
    timer.unref?.();
    Promise.resolve(ret).then(
      (v) => {
        clearTimeout(timer);
        try {
          resolve(finish(v));
        } catch (e) {
          reject(e);
        }
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(new PolicyError('error', `evalFunc rejected: ${errorMessage(e)}`, performance.now() - started, { cause: e }));
      },
    );
  });
}

/** A fixed-size ring of the most recent items, oldest dropped first. */
export class Ring<T> {
  private readonly items: T[] = [];
  private start = 0;

  /** @param capacity items kept (at least 1) */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`ring capacity must be a positive integer, got ${capacity}`);
  }

  /** Adds an item, dropping the oldest when full. */
  push(item: T): void {
    if (this.items.length < this.capacity) {
      this.items.push(item);
      return;
    }
    this.items[this.start] = item;
    this.start = (this.start + 1) % this.capacity;
  }

  /** Items kept, oldest first (a copy). */
  toArray(): T[] {
    return [...this.items.slice(this.start), ...this.items.slice(0, this.start)];
  }

  /** Number of items kept. */
  get size(): number {
    return this.items.length;
  }
}
