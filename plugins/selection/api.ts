/**
 * `svc-proxy/plugins/selection`: the selection-policy contract (spec §1.3, §3.1, §6), so an in-house
 * plugin can install its own upstream order for every network: the policy function type
 * ({@link EvalFunc}), what it receives ({@link UpstreamsView} of {@link PolicyUpstream}s, a
 * {@link PolicyContext}), the selection plugin's published hooks ({@link selectionHooks}) and the
 * read side other plugins use ({@link SelectionApi} under {@link SELECTION_API_SERVICE}).
 *
 * Types and service names only, plus the few lines that create the hooks on first use: the
 * behaviour (default policy, evaluation loop, the view's helpers, metrics) lives in
 * plugins/selection, which implements this contract as any third party would.
 */
import { SyncWaterfallHook } from 'tapable';
import { serviceKey, type Network, type PluginHost, type ServiceKey } from 'svc-proxy/plugin';
import type { HealthSnapshot } from 'svc-proxy/plugin/contracts';

/**
 * Weights of the selection score (lower is better, spec §6 `svc_selection_score`): the penalty
 * `errorRate*errorRate + respLatency*p70Seconds + throttledRate*throttleRate + blockHeadLag*blockHeadLag
 * + finalizationLag*finalizationLag + misbehaviors*misbehaviorRate`. Config: `networks[].selectionPolicy.scoreWeights`; an
 * upstream's `routing.scoreMultipliers` override them for that upstream ({@link ScoreMultipliers}).
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
  /** Weight of the finalization lag, in blocks. Default 0 (eRPC's PREFER_FASTEST). */
  finalizationLag: number;
  /** Weight of the consensus misbehaviour rate (0..1, {@link PolicyMetricsExtra.misbehaviorRate}). Default 2 (eRPC's PREFER_FASTEST). */
  misbehaviors: number;
}

/**
 * One upstream's score multipliers (eRPC's `upstreams[].routing.scoreMultipliers`, the first entry
 * matching the network): each weight given replaces the base weight of that term for this
 * upstream only (0 drops the term), and `overall` scales its preference (eRPC's score is
 * `overall / (1 + penalty)`, higher better; svc's lower-is-better score is
 * `(1 + penalty) / overall - 1`, which orders upstreams the same way and equals the plain
 * penalty when `overall` is 1; `overall` 0 ranks the upstream last).
 */
export interface ScoreMultipliers extends Partial<ScoreWeights> {
  /** Preference dial: above 1 prefers this upstream, below 1 demotes it (>= 0, default 1). */
  overall?: number;
}

/** What a policy sees of an upstream beyond its health snapshot (eRPC's names). */
export interface PolicyMetricsExtra {
  /**
   * eRPC's misbehaviour rate: this upstream's misbehaviours over its requests in the same health
   * cell (the evaluation's method, or `*`) within the health window, 0..1 (the consensus
   * plugin's record: a round whose data answer differed from its own data answer). 0 when no
   * consensus policy ran for it. svc counts consensus losses only; eRPC also counts wrong empty
   * answers, deterministic integrity rejects and head rollbacks.
   */
  misbehaviorRate: number;
  /** `blockHeadLag` times the network's estimated block time, seconds; 0 while the block time is not estimated yet (as in eRPC). */
  blockHeadLagSeconds: number;
  /** `finalizationLag` times the network's estimated block time, seconds; 0 while the block time is not estimated yet. */
  finalizationLagSeconds: number;
}

/**
 * The metric numbers a policy sees for one upstream: a health snapshot of the evaluation's
 * method cell (`*` unless `evalScope` splits by method) and the {@link PolicyMetricsExtra} numbers.
 */
export type PolicyMetrics = Readonly<HealthSnapshot & PolicyMetricsExtra>;

/** One method's latency numbers of an upstream (eRPC's `u.metricsByMethod[method]`, read by `latencyDeviationAbove`). */
export interface MethodLatency {
  /** Requests of this method in the window. */
  readonly requestsTotal: number;
  /** Median latency of its successful answers, ms (0 without samples). */
  readonly p50ms: number;
  /** 70th percentile latency of its successful answers, ms (0 without samples; `latencyDeviationAbove`'s default). */
  readonly p70ms: number;
  /** 90th percentile latency of its successful answers, ms (0 without samples). */
  readonly p90ms: number;
  /** eRPC's 95th percentile, ms: svc keeps no p95, so this is the p99 (the nearest kept quantile above). */
  readonly p95ms: number;
  /** 99th percentile latency of its successful answers, ms (0 without samples). */
  readonly p99ms: number;
}

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
  /** Its `routing.scoreMultipliers` entry matching this evaluation, if any (eRPC's `u.scoreMultipliers`). */
  readonly scoreMultipliers?: Readonly<ScoreMultipliers>;
  /**
   * Per-method latency of the methods the health tracker holds a cell of their own for, for
   * this upstream, with requests in the window (at most 200: the tracker's bound; taken once
   * per network tick); filled only for a policy whose source names `metricsByMethod`
   * or `latencyDeviationAbove`, else absent.
   */
  readonly metricsByMethod?: Readonly<Record<string, MethodLatency>>;
  /** The whole upstream's numbers (method `*`) when the evaluation's {@link metrics} are one method's (`evalScope` by method); else absent (they are the same). */
  readonly metricsAcrossMethods?: PolicyMetrics;
}

/** One selection decision as a policy step records it (the selection plugin stamps the time). */
export interface DecisionDraft {
  /** Policy step: `removeCordoned`, `excludeErrorRate`, `excludeThrottled`, `excludeSlow`, `excludeSyncing`, `useAllUncordoned`, `preferNonFallback`, `evalFunc`, or a custom step name. */
  step: string;
  /** Upstream id, or `*` for a decision about the whole list. */
  upstream: string;
  /** Why (`cordoned`, `tier:fallback`, `errorRate 0.82 > 0.7 over 25 requests`...). */
  reason: string;
}

/**
 * The upstream list a policy receives: an `Array` of {@link PolicyUpstream} with selection
 * helpers. Every helper returns a new view and leaves this one untouched; exclusions are
 * recorded as selection decisions of the evaluation (the admin `svc_project` method shows them).
 * Views produced by array methods (`filter`, `slice`, `sort`...) keep the helpers.
 */
export interface UpstreamsView extends Array<PolicyUpstream> {
  /** Same as `Array.prototype.filter`, typed to keep the helpers. */
  filter<S extends PolicyUpstream>(pred: (u: PolicyUpstream, i: number, all: PolicyUpstream[]) => u is S, thisArg?: unknown): UpstreamsView;
  /** Same as `Array.prototype.filter`, typed to keep the helpers. */
  filter(pred: (u: PolicyUpstream, i: number, all: PolicyUpstream[]) => unknown, thisArg?: unknown): UpstreamsView;
  /** Ids in order. */
  ids(): string[];
  /**
   * Drops upstreams cordoned for every method (step `removeCordoned`, reason `cordoned`) and
   * makes the request path honour new cordons at once (spec §3.1). A policy that never calls it
   * keeps cordoned upstreams in rotation.
   */
  removeCordoned(): UpstreamsView;
  /**
   * Drops the upstreams matching `pred`, recording one decision each.
   * @param pred true for an upstream to exclude
   * @param reason the decision's reason, or a function of the upstream
   * @param step the decision's step name (default `exclude`)
   */
  exclude(pred: (u: PolicyUpstream) => boolean, reason: string | ((u: PolicyUpstream) => string), step?: string): UpstreamsView;
  /**
   * Leaves out upstreams tagged `tag` (default `tier:fallback`, step `preferNonFallback`) while
   * at least one other upstream is in the view; keeps them when they are all that is left.
   */
  preferNonFallback(tag?: string): UpstreamsView;
  /**
   * This view when it is not empty, else `alternative` (recording one decision for `*`).
   * @param alternative the list to use instead
   * @param reason the decision's reason
   * @param step the decision's step name (default `ifEmpty`)
   */
  ifEmpty(alternative: Iterable<PolicyUpstream>, reason?: string, step?: string): UpstreamsView;
  /**
   * A copy ordered by score (see {@link ScoreWeights}), lowest first, each upstream's
   * {@link PolicyUpstream.scoreMultipliers} merged over the weights; ties keep the current
   * order (stable).
   * @param weights overrides of the configured weights
   */
  sortByScore(weights?: Partial<ScoreWeights>): UpstreamsView;
  /**
   * A copy with the upstreams no connection could reach on their last attempt
   * (`metrics.unreachable`: refused, no route, name not resolved) moved last, in their current
   * order (step `demoteDown`): still tried when every other upstream fails.
   */
  demoteDown(): UpstreamsView;
  /** Score of one upstream with the configured weights, optionally overridden, and its own multipliers (lower is better). */
  score(u: PolicyUpstream, weights?: Partial<ScoreWeights>): number;
  /**
   * Records a decision of a custom step (shown by the admin method with the built-in ones).
   * @param upstream upstream id or `*`
   */
  note(step: string, upstream: string, reason: string): this;
}

/** Second argument of an {@link EvalFunc}. */
export interface PolicyContext {
  /** Project id. */
  readonly project: string;
  /** Network id (`evm:<chainId>`). */
  readonly network: string;
  /** Method of the evaluation's scope: `*` unless `evalScope` splits by method. */
  readonly method: string;
  /** Finality of the evaluation's scope (`finalized`, `unfinalized`, `realtime`, `unknown`): `unknown` unless `evalScope` splits by finality. */
  readonly finality: string;
  /** The configured score weights (`selectionPolicy.scoreWeights`, defaults applied). */
  readonly weights: Readonly<ScoreWeights>;
  /** The configured `evalTimeout`, ms. */
  readonly evalTimeoutMs: number;
  /** Evaluation time, epoch ms. */
  readonly now: number;
  /** The built-in policy, for functions that only pre- or post-process it. */
  readonly defaultPolicy: EvalFunc;
  /** Score of one upstream (lower is better) with the configured weights, optionally overridden, and its own multipliers. */
  score(u: PolicyUpstream, weights?: Partial<ScoreWeights>): number;
  /** Wraps a plain array of this evaluation's upstreams back into a view (to get the helpers again). */
  view(list: Iterable<PolicyUpstream>): UpstreamsView;
}

/**
 * A selection policy (`networks[].selectionPolicy.evalFunc`, or installed by a plugin through
 * {@link selectionHooks}; spec §1.3, §3.1): receives every upstream of the network (config
 * order) with its metrics, returns the ones that may serve, in preference order. That order is
 * what the request path hands out, what the admin `svc_project` method shows and what
 * `svc_selection_score` ranks. May be async; bounded by `evalTimeout` (on an error or overrun
 * the previous order is kept). Cordoned upstreams stay in rotation unless the function calls
 * `.removeCordoned()`. Elements of the returned array may also be plain upstream ids; unknown
 * ids and duplicates are ignored.
 */
export type EvalFunc = (upstreams: UpstreamsView, ctx: PolicyContext) => readonly PolicyUpstream[] | Promise<readonly PolicyUpstream[]>;

/** Hooks the selection plugin publishes for other plugins (see {@link selectionHooks}). */
export interface SelectionHooks {
  /**
   * Chooses a network's policy when the network is created: receives the configured one
   * (`selectionPolicy.evalFunc`, else the selection plugin's option, else its default policy)
   * and returns the one to use. Lets a plugin install a policy (spec §1.3 "or from a plugin"):
   * return your own {@link EvalFunc}, or one that calls the policy it received and reorders or
   * filters its answer.
   */
  readonly policy: SyncWaterfallHook<[EvalFunc, Network]>;
}

/** One recorded selection decision. */
export interface SelectionDecision extends DecisionDraft {
  /** When it was made, epoch ms. */
  time: number;
}

/** The selection state of one network, for the admin `svc_project` method and other plugins. */
export interface SelectionState {
  /**
   * Upstream ids in the order the request path hands them out: the active policy's answer (a
   * plugin's included), refreshed at each evaluation; before the first, config order. A cordon
   * set since applies on the request path at once and shows here at the next evaluation (spec §3.1).
   */
  order: string[];
  /**
   * Upstream id -> the `svc_selection_score` value: the health score of the last successful
   * evaluation, raised where needed so that it ascends along the policy's order (each upstream at
   * least {@link SCORE_ORDER_STEP} above the one before it, excluded upstreams after every
   * selected one). Lower is better; equal to {@link SelectionState.healthScores} whenever the
   * policy orders by score, as the default policy does.
   */
  scores: Record<string, number>;
  /** Upstream id -> health score of the last successful evaluation with the configured weights (lower is better). */
  healthScores: Record<string, number>;
  /** Upstream id -> why the last successful evaluation left it out. */
  excluded: Record<string, string>;
  /** True when the active policy called `removeCordoned()`: new cordons apply on the request path at once. */
  honoursCordons: boolean;
  /** True when a policy other than the built-in default is active (config `evalFunc` or a plugin's). */
  custom: boolean;
  /** Time of the last successful evaluation, epoch ms (undefined before the first). */
  evaluatedAt?: number;
  /** Resolved `evalInterval`, ms. */
  evalIntervalMs: number;
  /** Resolved `evalTimeout`, ms. */
  evalTimeoutMs: number;
  /** Resolved score weights. */
  weights: ScoreWeights;
  /** Resolved `evalScope`. */
  evalScope: EvalScope;
  /** The narrower scopes evaluated besides the network's (none with `evalScope: network`). */
  scopes: ScopeState[];
}

/**
 * The grain of a network's evaluations (eRPC's `selectionPolicy.evalScope`): `network` (one
 * order for every call), `network-method` (one per method), `network-finality` (one per finality
 * of the call's block), `network-method-finality` (one per pair).
 */
export type EvalScope = 'network' | 'network-method' | 'network-finality' | 'network-method-finality';

/** One narrower scope's order (see {@link SelectionState.scopes}). */
export interface ScopeState {
  /** The scope's method (`*` when the scope does not split by method). */
  method: string;
  /** The scope's finality (`unknown` when it does not split by finality). */
  finality: string;
  /** Upstream ids in the order its calls get (empty until its first evaluation: its calls then use the network's). */
  order: string[];
  /** Upstream id -> why its last evaluation left it out. */
  excluded: Record<string, string>;
  /** Time of its last successful evaluation, epoch ms. */
  evaluatedAt?: number;
}

/**
 * The least gap between two consecutive upstreams' `svc_selection_score` along the policy's
 * order (see {@link SelectionState.scores}), so that the gauge never shows two upstreams as
 * equally preferred or a later one as better.
 */
export const SCORE_ORDER_STEP = 0.001;

/** What other plugins read of the selection (service {@link SELECTION_API_SERVICE}). */
export interface SelectionApi {
  /**
   * The current order, scores and exclusions of a network.
   * @param networkId `evm:<chainId>` or the network's alias
   * @returns undefined for an unknown project or network
   */
  state(projectId: string, networkId: string): SelectionState | undefined;
  /**
   * Evaluates a network's policy now, outside the timer, for every scope it has (`evalScope`).
   * Never rejects: a failed policy keeps the previous order, as on a tick.
   * @returns false for an unknown network
   */
  evaluate(projectId: string, networkId: string): Promise<boolean>;
  /**
   * The last selection decisions of a network (at most 100 by default), oldest first.
   * @returns an empty array for an unknown project or network
   */
  decisions(projectId: string, networkId: string): SelectionDecision[];
}

/**
 * Key of the selection plugin's read side ({@link SelectionApi}): `host.services.get(SELECTION_API_SERVICE)`
 * (undefined without the selection plugin), or `require` with `dependsOn: ['selection']`.
 */
export const SELECTION_API_SERVICE: ServiceKey<SelectionApi> = serviceKey<SelectionApi>('selection.api');

/**
 * Key of the selection plugin's {@link SelectionHooks}; use {@link selectionHooks}, which creates
 * them when the selection plugin has not yet.
 */
export const SELECTION_HOOKS_SERVICE: ServiceKey<SelectionHooks> = serviceKey<SelectionHooks>('selection.hooks');

/**
 * The selection plugin's hooks of a proxy, created on first use, so a plugin may tap them
 * whether it is applied before or after the selection plugin, as long as it is before start
 * (networks pick their policy when they are created). Published as the host service
 * {@link SELECTION_HOOKS_SERVICE}, never module state, so a plugin built against another
 * installed copy of svc meets the same hooks.
 * @example
 * ```ts
 * selectionHooks(host).policy.tap('acme-selection', () => (ups) => ups.removeCordoned().reverse());
 * ```
 */
export function selectionHooks(host: PluginHost): SelectionHooks {
  let h = host.services.get(SELECTION_HOOKS_SERVICE);
  if (!h) {
    h = Object.freeze({ policy: new SyncWaterfallHook<[EvalFunc, Network]>(['policy', 'network']) });
    host.services.provide(SELECTION_HOOKS_SERVICE, h);
  }
  return h;
}
