/**
 * Selection policy evaluation, free of any proxy state (spec §1.3, §3.1): the {@link defaultPolicy}
 * and {@link evaluatePolicy}, which runs a policy (sync or async, bounded by `evalTimeout`) over
 * synthetic or live inputs. The policy contract (`EvalFunc`, `PolicyContext`) is `svc-proxy/plugin`'s.
 * The helpers a policy composes live in `./view.ts`. The selection plugin (`./state.ts`) feeds
 * it health snapshots on every evaluation tick; no hooks here.
 */
import { performance } from 'node:perf_hooks';
import type { EvalFunc, PolicyContext } from './api.ts';
import { attachCarry, type TickCarry } from './memory.ts';
import {
  DEFAULT_SCORE_WEIGHTS,
  policyUpstream,
  RUNS,
  upstreamScore,
  viewOf,
  type DecisionDraft,
  type PolicyRun,
  type PolicyUpstream,
  type PolicyUpstreamInput,
  type ScoreWeights,
} from './view.ts';

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

// The policy contract (EvalFunc, PolicyContext) is this plugin's contract (api.ts).
export type { EvalFunc, PolicyContext } from './api.ts';

const pct = (x: number) => x.toFixed(2);

/**
 * The built-in policy (spec §1.3, §3.1), in order: remove cordoned upstreams; exclude an
 * upstream with more than 10 requests in the window and an error rate above 0.7 or a throttle
 * rate above 0.4; exclude one whose p70 latency is above 10 s; exclude one that is syncing; if
 * that leaves nothing use every uncordoned upstream; leave out `tier:fallback` upstreams while
 * another survives; order by score (lower first, configured weights); move the ones no
 * connection could reach on their last attempt (refused, no route) last.
 */
export const defaultPolicy: EvalFunc = (upstreams) => {
  const t = DEFAULT_THRESHOLDS;
  const uncordoned = upstreams.removeCordoned();
  return uncordoned
    .exclude(
      (u) => u.metrics.requests > t.minSamples && u.metrics.errorRate > t.maxErrorRate,
      (u) => `errorRate ${pct(u.metrics.errorRate)} > ${t.maxErrorRate} over ${u.metrics.requests} requests`,
      'excludeErrorRate',
    )
    .exclude(
      (u) => u.metrics.requests > t.minSamples && u.metrics.throttleRate > t.maxThrottleRate,
      (u) => `throttleRate ${pct(u.metrics.throttleRate)} > ${t.maxThrottleRate} over ${u.metrics.requests} requests`,
      'excludeThrottled',
    )
    .exclude(
      (u) => u.metrics.p70 > t.maxP70Seconds,
      (u) => `p70 ${pct(u.metrics.p70)}s > ${t.maxP70Seconds}s`,
      'excludeSlow',
    )
    .exclude((u) => u.syncing, 'syncing', 'excludeSyncing')
    .ifEmpty(uncordoned, 'every uncordoned upstream was excluded: using all of them', 'useAllUncordoned')
    .preferNonFallback()
    .sortByScore()
    .demoteDown();
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
  /** Upstream id -> score with the configured weights and the upstream's multipliers, for every input upstream. */
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
  /** Method of the evaluation's scope (default `*`). */
  method?: string;
  /** Finality of the evaluation's scope (default `unknown`). */
  finality?: string;
  /** Evaluation time, epoch ms (default `Date.now()`). */
  now?: number;
  /** Cross-tick state for a YAML policy's helpers (sticky primary, excludedSince); it writes `carry.out` back. */
  carry?: TickCarry;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return !!v && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
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
    method: opts.method ?? '*',
    finality: opts.finality ?? 'unknown',
    weights,
    evalTimeoutMs: timeoutMs,
    now: opts.now ?? Date.now(),
    defaultPolicy,
    score: (u, w) => upstreamScore(u, w ? { ...weights, ...w } : weights),
    view: (list) => viewOf(list, run),
  };
  if (opts.carry) attachCarry(ctx, opts.carry);
  const started = performance.now();
  const finish = (ret: unknown): PolicyResult => {
    const durationMs = performance.now() - started;
    if (!Array.isArray(ret)) throw new PolicyError('invalid', `evalFunc returned ${ret === null ? 'null' : typeof ret}, not an array of upstreams`, durationMs);
    const order: string[] = [];
    const seen = new Set<string>();
    for (const el of ret as unknown[]) {
      const id =
        typeof el === 'string' ? el : el && typeof el === 'object' && typeof (el as { id?: unknown }).id === 'string' ? (el as { id: string }).id : undefined;
      if (id === undefined || seen.has(id) || !byId.has(id)) continue;
      seen.add(id);
      order.push(id);
    }
    const lastReason = new Map<string, string>();
    for (const d of run.decisions) lastReason.set(d.upstream, d.reason);
    const excluded: Record<string, string> = {};
    const scores: Record<string, number> = {};
    for (const e of entries) {
      scores[e.id] = upstreamScore(e, weights);
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
    ret = fn(viewOf(entries, run), ctx);
  } catch (e) {
    // A YAML policy overrunning its vm `timeout` is a timeout, not a bug in the policy.
    const kind = (e as { code?: unknown } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT' ? 'timeout' : 'error';
    throw new PolicyError(kind, `evalFunc threw: ${errorMessage(e)}`, performance.now() - started, { cause: e });
  }
  if (!isThenable(ret)) {
    const spent = performance.now() - started;
    if (custom && spent > timeoutMs) throw new PolicyError('overrun', `evalFunc ran ${Math.round(spent)} ms, more than evalTimeout ${timeoutMs} ms`, spent);
    return finish(ret);
  }
  return new Promise<PolicyResult>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new PolicyError('timeout', `evalFunc did not settle within evalTimeout ${timeoutMs} ms`, performance.now() - started)),
      timeoutMs,
    );
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
