/**
 * What a selection policy works on (spec §1.3, §3.1, §6), free of any proxy state: the score
 * weights and {@link scoreOf}, the frozen per-upstream input objects ({@link policyUpstream}),
 * and the {@link UpstreamsView} helpers a policy composes (`removeCordoned`, `exclude`,
 * `preferNonFallback`, `sortByScore`...), which record their exclusions as decisions of the
 * evaluation run. `policy.ts` runs a policy over them; no hooks here.
 */
import type {
  DecisionDraft,
  MethodLatency,
  PolicyMetrics,
  PolicyUpstream,
  ScoreMultipliers,
  ScoreWeights,
  UpstreamsView as UpstreamsViewContract,
} from './api.ts';

// The policy contract's types are this plugin's contract (api.ts); re-exported for its files.
export type { DecisionDraft, MethodLatency, PolicyMetrics, PolicyMetricsExtra, PolicyUpstream, ScoreMultipliers, ScoreWeights } from './api.ts';

/**
 * The default score weights (eRPC's PREFER_FASTEST):
 * `4*errorRate + 15*p70Seconds + 4*throttleRate + 1*blockHeadLag + 0*finalizationLag + 2*misbehaviorRate`.
 */
export const DEFAULT_SCORE_WEIGHTS: Readonly<ScoreWeights> = Object.freeze({
  errorRate: 4,
  respLatency: 15,
  throttledRate: 4,
  blockHeadLag: 1,
  finalizationLag: 0,
  misbehaviors: 2,
});

/** The tag that marks an upstream as a last resort ({@link UpstreamsView.preferNonFallback}). */
export const FALLBACK_TAG = 'tier:fallback';

/** A synthetic or live policy input: everything but the id is optional (zero metrics by default). */
export interface PolicyUpstreamInput {
  id: string;
  tags?: Iterable<string>;
  vendor?: string;
  metrics?: Partial<PolicyMetrics>;
  syncing?: boolean;
  /** Default: `metrics.cordoned`, else false. */
  cordoned?: boolean;
  /** Its `routing.scoreMultipliers` entry for this evaluation (none by default). */
  scoreMultipliers?: ScoreMultipliers;
  /** Per-method latency (eRPC's `metricsByMethod`), when the policy reads it. */
  metricsByMethod?: Record<string, MethodLatency>;
  /** The whole upstream's numbers when `metrics` are one method's. */
  metricsAcrossMethods?: Partial<PolicyMetrics>;
}

/** State of one policy evaluation, shared by every view derived from its input (see `evaluatePolicy`). */
export interface PolicyRun {
  readonly weights: Readonly<ScoreWeights>;
  readonly decisions: DecisionDraft[];
  cordonsRemoved: boolean;
}

/** The run an input object belongs to: lets views made by `filter`/`slice` (species) find it. */
export const RUNS = new WeakMap<PolicyUpstream, PolicyRun>();
/** Sink for views built from foreign objects: helpers work, nothing is recorded. */
const detachedRun = (): PolicyRun => ({ weights: DEFAULT_SCORE_WEIGHTS, decisions: [], cordonsRemoved: false });

/**
 * Score of one upstream, lower is better (spec §6 `svc_selection_score`):
 * `w.errorRate*errorRate + w.respLatency*p70 (s) + w.throttledRate*throttleRate + w.blockHeadLag*blockHeadLag
 * + w.finalizationLag*finalizationLag + w.misbehaviors*misbehaviorRate`. Missing metric numbers and weights count as 0.
 */
export function scoreOf(
  m: Partial<Pick<PolicyMetrics, 'errorRate' | 'p70' | 'throttleRate' | 'blockHeadLag' | 'finalizationLag' | 'misbehaviorRate'>>,
  w: Readonly<Partial<ScoreWeights>> = DEFAULT_SCORE_WEIGHTS,
): number {
  return (
    (w.errorRate ?? 0) * (m.errorRate ?? 0) +
    (w.respLatency ?? 0) * (m.p70 ?? 0) +
    (w.throttledRate ?? 0) * (m.throttleRate ?? 0) +
    (w.blockHeadLag ?? 0) * (m.blockHeadLag ?? 0) +
    (w.finalizationLag ?? 0) * (m.finalizationLag ?? 0) +
    (w.misbehaviors ?? 0) * (m.misbehaviorRate ?? 0)
  );
}

/**
 * Score of one upstream with its own `routing.scoreMultipliers` (eRPC's "merge" mode): each
 * weight it sets replaces the base one, and `overall` turns the penalty P into `(1 + P) / overall - 1`,
 * the lower-is-better form of eRPC's `overall / (1 + P)`: the same order, and exactly P without
 * multipliers. `overall` 0 gives `Infinity` (ranked last).
 * @param u the upstream (its metrics and multipliers)
 * @param base the weights every upstream starts from
 */
export function upstreamScore(u: Pick<PolicyUpstream, 'metrics' | 'scoreMultipliers'>, base: Readonly<ScoreWeights> = DEFAULT_SCORE_WEIGHTS): number {
  const pm = u.scoreMultipliers;
  if (!pm) return scoreOf(u.metrics, base);
  const { overall, ...weights } = pm;
  const penalty = scoreOf(u.metrics, { ...base, ...weights });
  if (overall === undefined || overall === 1) return penalty;
  return overall > 0 ? (1 + penalty) / overall - 1 : Number.POSITIVE_INFINITY;
}

/** Builds a view bound to an evaluation run (set in {@link UpstreamsView}'s static block). */
let bindView: (items: Iterable<PolicyUpstream>, run: PolicyRun) => UpstreamsView;

/**
 * A view of `items` bound to an evaluation run: its helpers record their decisions there.
 * @param items the upstreams of the view, in order
 * @param run the evaluation the view belongs to
 */
export function viewOf(items: Iterable<PolicyUpstream>, run: PolicyRun): UpstreamsView {
  return bindView(items, run);
}

/**
 * The upstream list a policy receives (the `UpstreamsView` contract of `svc-proxy/plugin`): an `Array`
 * of {@link PolicyUpstream} with selection helpers. Every helper returns a new view and leaves
 * this one untouched; exclusions are recorded as selection decisions of the evaluation. Views
 * produced by array methods (`filter`, `slice`, `sort`...) keep the helpers.
 */
export class UpstreamsView extends Array<PolicyUpstream> implements UpstreamsViewContract {
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
   * A copy ordered by {@link upstreamScore} (each upstream's multipliers merged over the
   * weights), lowest first; ties keep the current order (stable).
   * @param weights overrides of the configured weights
   */
  sortByScore(weights?: Partial<ScoreWeights>): UpstreamsView {
    const w = weights ? { ...this.run().weights, ...weights } : this.run().weights;
    const scored = Array.from(this, (u) => ({ u, s: upstreamScore(u, w) }));
    scored.sort((a, b) => a.s - b.s);
    return this.derive(scored.map((x) => x.u));
  }

  /**
   * A copy with the upstreams no connection could reach on their last attempt
   * (`metrics.unreachable`: refused, no route, name not resolved) moved last, in their current
   * order (step `demoteDown`): a dead node stops costing every call a failed first try as soon
   * as it is seen, and is still tried when every other upstream fails. A timeout or an HTTP 5xx
   * from a node that is there is left to the error-rate exclusion and to hedging.
   */
  demoteDown(): UpstreamsView {
    const down = this.filter((u) => u.metrics.unreachable === true);
    if (down.length === 0 || down.length === this.length) return this.derive(this);
    for (const u of down) this.run().decisions.push({ step: 'demoteDown', upstream: u.id, reason: `down: ${u.metrics.downReason ?? 'no answer'}` });
    return this.derive([...this.filter((u) => u.metrics.unreachable !== true), ...down]);
  }

  /** Score of one upstream with the configured weights, optionally overridden, and its own multipliers. */
  score(u: PolicyUpstream, weights?: Partial<ScoreWeights>): number {
    return upstreamScore(u, weights ? { ...this.run().weights, ...weights } : this.run().weights);
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

/** Builds the frozen policy input object of one upstream. */
export function policyUpstream(i: PolicyUpstreamInput): PolicyUpstream {
  const metrics = metricsOf(i.metrics ?? {}, i.cordoned);
  return Object.freeze({
    id: i.id,
    tags: Object.freeze([...(i.tags ?? [])]),
    vendor: i.vendor ?? 'unknown',
    metrics,
    syncing: i.syncing ?? false,
    cordoned: metrics.cordoned,
    ...(i.scoreMultipliers ? { scoreMultipliers: Object.freeze({ ...i.scoreMultipliers }) } : {}),
    ...(i.metricsByMethod ? { metricsByMethod: Object.freeze({ ...i.metricsByMethod }) } : {}),
    ...(i.metricsAcrossMethods ? { metricsAcrossMethods: metricsOf(i.metricsAcrossMethods, i.cordoned) } : {}),
  });
}

/** Frozen metric numbers with every field defaulted (0, not cordoned). */
function metricsOf(m: Partial<PolicyMetrics>, cordoned: boolean | undefined): PolicyMetrics {
  const metrics: PolicyMetrics = {
    requests: m.requests ?? 0,
    errorRate: m.errorRate ?? 0,
    throttleRate: m.throttleRate ?? 0,
    p50: m.p50 ?? 0,
    p70: m.p70 ?? 0,
    p90: m.p90 ?? 0,
    p99: m.p99 ?? 0,
    blockHeadLag: m.blockHeadLag ?? 0,
    finalizationLag: m.finalizationLag ?? 0,
    misbehaviorRate: m.misbehaviorRate ?? 0,
    blockHeadLagSeconds: m.blockHeadLagSeconds ?? 0,
    finalizationLagSeconds: m.finalizationLagSeconds ?? 0,
    cordoned: cordoned ?? m.cordoned ?? false,
    cordonReason: m.cordonReason,
    ...(m.down ? { down: true, downReason: m.downReason, ...(m.unreachable ? { unreachable: true } : {}) } : {}),
  };
  return Object.freeze(metrics);
}
