/**
 * The selection state of one evaluation scope (spec §1.3, §3.1, §6): the cached order the
 * request path hands out, one evaluation (a failed custom policy keeps the previous order), the
 * ring of the last decisions, and, for a network's own scope, the `svc_selection_score` /
 * `svc_selection_excluded_seconds` gauges. No hooks or timers here: `scopes.ts` keeps a network's
 * scopes and its one timer, and `index.ts` taps `select` into them.
 */
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { ErrUpstreamsExhausted } from 'svc-proxy/plugin/errors';
import { SCORE_ORDER_STEP, type ScopeState, type SelectionDecision, type SelectionState } from './api.ts';
import { defaultPolicy, evaluatePolicy, PolicyError, type EvalFunc, type PolicyResult } from './policy.ts';
import type { SelectionSettings } from './schema.ts';
import type { ScoreMultipliers } from './view.ts';
import { MethodLatencies, NETWORK_SCOPE, policyInputs, type ScopeKey } from './inputs.ts';
import { policyReads } from './sandbox.ts';
import { resolveScoreMultipliers, type ScoreMultiplierEntry } from './multipliers.ts';
import { Ring } from './ring.ts';
import { SelectionMemory, type StickyRegisters, type TickCarry } from './memory.ts';
import type { ProbeSink } from './prober.ts';
import type { SelectionMetrics } from './gauges.ts';

/** Decisions kept per network (the admin `svc_project` method shows them). */
export const MAX_DECISIONS = 100;

// The state and decision shapes are this plugin's contract (api.ts), read by the admin and other plugins.
export type { SelectionDecision, SelectionState } from './api.ts';
export { createSelectionMetrics, type SelectionMetrics } from './gauges.ts';

/**
 * The `svc_selection_score` values of an evaluation (spec §6, lower is better): each upstream's
 * health score, raised where needed so that the values ascend along the policy's order, each at
 * least {@link SCORE_ORDER_STEP} above the one before it, then the excluded upstreams (config
 * order) after every selected one. A policy that orders by score (the default) keeps the health
 * scores as they are; a policy that reorders (a plugin's, a config `evalFunc`) is shown as the
 * order it hands out, never as an order the request path does not follow.
 * @param r the evaluation (its `order` and health `scores`)
 * @param snapshot the upstreams it evaluated, config order
 * @returns upstream id -> score, for every upstream of `snapshot`
 */
export function rankedScores(r: Pick<PolicyResult, 'order' | 'scores'>, snapshot: readonly { readonly id: string }[]): Record<string, number> {
  const out: Record<string, number> = {};
  let prev: number | undefined;
  const rank = (id: string) => {
    const health = r.scores[id] ?? 0;
    // Rounded to the µ-unit so the raised values read cleanly (0.002, not 0.0020000000000000005).
    const v = prev === undefined || health >= prev + SCORE_ORDER_STEP ? health : Math.round((prev + SCORE_ORDER_STEP) * 1e6) / 1e6;
    out[id] = v;
    prev = v;
  };
  for (const id of r.order) rank(id);
  for (const u of snapshot) if (!(u.id in out)) rank(u.id);
  return out;
}

/**
 * The selection state and timer of one scope of a network: the network's own (method `*`,
 * finality `unknown`), which publishes the gauges, or a narrower one of
 * `evalScope` (`scopes.ts` keeps those).
 */
export class NetworkSelection {
  /** Cached order (null until the first evaluation commits: the request path then keeps config order). */
  private order: Upstream[] | null = null;
  /** Upstreams the cached order was computed over; others joined since and go last. */
  private evaluated = new Set<Upstream>();
  private honourCordons = true;
  private excluded: Record<string, string> = {};
  /** Health scores of the last successful evaluation (configured weights). */
  private healthScores: Record<string, number> = {};
  /** What `svc_selection_score` shows: the health scores made to ascend along the order ({@link rankedScores}). */
  private scores: Record<string, number> = {};
  private evaluatedAt?: number;
  private readonly ring: Ring<SelectionDecision>;
  private stopped = false;
  private inflight?: Promise<void>;
  private rerun?: Promise<void>;
  private prevKeys = new Set<string>();
  private prevOrder: string[] = [];
  private readonly excludedSince = new Map<string, number>();
  /** What a YAML policy's cross-tick helpers remember (sticky primary, probe settings). */
  readonly memory: SelectionMemory;
  private readonly scoreLabels = new Set<string>();
  /** Each upstream's `routing.scoreMultipliers` entry for this scope, resolved once (config is fixed for the network's life). */
  private readonly multipliers = new WeakMap<Upstream, ScoreMultipliers | undefined>();
  /** When a call last used this scope, epoch ms (idle narrow scopes are dropped). */
  lastUsed = Date.now();
  /** Whether the policy reads `metricsByMethod` (built only then: a health snapshot per method and upstream). */
  private readonly byMethod: boolean;

  constructor(
    private readonly host: PluginHost,
    private readonly network: Network,
    private readonly settings: SelectionSettings,
    private readonly policy: EvalFunc,
    private readonly metrics: SelectionMetrics,
    maxDecisions: number,
    private readonly prober?: ProbeSink,
    /** The evaluation's method and finality. */
    readonly scope: ScopeKey = NETWORK_SCOPE,
    /** The network's sticky registers, shared by its scopes. */
    registers?: StickyRegisters,
  ) {
    this.ring = new Ring<SelectionDecision>(maxDecisions);
    this.memory = new SelectionMemory(this.excludedSince, registers, scope.method, scope.finality);
    this.byMethod = policyReads(policy, 'latencyDeviationAbove') || policyReads(policy, 'metricsByMethod');
  }

  /** The network's own scope: it alone publishes gauges (their labels name no finality). */
  private get primary(): boolean {
    return this.scope === NETWORK_SCOPE;
  }

  /** Whether an evaluation committed (before, a narrow scope's calls use the network's order). */
  get ready(): boolean {
    return this.order !== null;
  }

  private get custom(): boolean {
    return this.policy !== defaultPolicy;
  }

  /** Stops: later evaluations are ignored. */
  stop(): void {
    this.stopped = true;
    this.prober?.stop();
  }

  /**
   * Stops, for a network a config reload replaced: the score series of upstreams no longer in the
   * project go (the successor network writes the others' series under the same labels).
   */
  retire(): void {
    this.stop();
    const project = this.network.project;
    for (const id of this.scoreLabels)
      if (!project.upstreams.has(id)) this.metrics.score.remove({ project: project.id, network: this.network.id, method: '*', upstream: id });
    this.scoreLabels.clear();
  }

  private multipliersOf(u: Upstream): ScoreMultipliers | undefined {
    if (this.multipliers.has(u)) return this.multipliers.get(u);
    const routing = u.config.settings.routing as { scoreMultipliers?: ScoreMultiplierEntry[] } | undefined;
    const m = resolveScoreMultipliers(routing?.scoreMultipliers, this.network.id, this.scope.method, this.scope.finality);
    this.multipliers.set(u, m);
    return m;
  }

  /**
   * Runs the policy over the network's upstreams and commits the result; a failure keeps the
   * previous order. Synchronous for a sync policy (the returned promise is already settled).
   * An evaluation requested while an async one runs waits for it, then runs once more.
   * Never rejects.
   * @param latency the network tick's per-method latencies (scopes share them); built here when absent and the policy reads them
   */
  evaluate(latency?: MethodLatencies): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.inflight) {
      this.rerun ??= this.inflight.then(() => {
        this.rerun = undefined;
        return this.evaluate();
      });
      return this.rerun;
    }
    const snapshot = this.network.upstreams.slice();
    const carry = this.memory.carry(this.prevOrder);
    let out: PolicyResult | Promise<PolicyResult>;
    try {
      const inputs = policyInputs(this.host, this.network, snapshot, {
        scope: this.scope,
        latency: this.byMethod ? (latency ?? new MethodLatencies(this.network)) : undefined,
        multipliers: (u) => this.multipliersOf(u),
      });
      out = evaluatePolicy(inputs, {
        evalFunc: this.policy,
        weights: this.settings.weights,
        evalTimeoutMs: this.settings.evalTimeoutMs,
        project: this.network.project.id,
        network: this.network.id,
        method: this.scope.method,
        finality: this.scope.finality,
        carry,
      });
    } catch (e) {
      this.fail(e);
      return Promise.resolve();
    }
    if (!(out instanceof Promise)) {
      this.commit(out, snapshot, carry);
      return Promise.resolve();
    }
    const p = out
      .then(
        (r) => this.commit(r, snapshot, carry),
        (e: unknown) => this.fail(e),
      )
      .catch((e: unknown) => this.fail(e))
      .finally(() => {
        this.inflight = undefined;
      });
    this.inflight = p;
    return p;
  }

  private commit(r: PolicyResult, snapshot: readonly Upstream[], carry: TickCarry): void {
    if (this.stopped) return;
    const byId = new Map(snapshot.map((u) => [u.id, u] as const));
    const order: Upstream[] = [];
    for (const id of r.order) {
      const u = byId.get(id);
      if (u) order.push(u);
    }
    const prevExcluded = this.excluded;
    this.order = order;
    this.evaluated = new Set(snapshot);
    this.honourCordons = r.cordonsRemoved;
    this.excluded = r.excluded;
    this.healthScores = r.scores;
    this.scores = rankedScores(r, snapshot);
    const now = Date.now();
    this.evaluatedAt = now;
    const notes = this.memory.commit(carry);
    for (const n of notes) if (n.step === 'shadowExcludeIf') this.metrics.shadowExclusions.inc([this.network.project.id, this.network.id, n.upstream]);
    this.recordChanges({ ...r, decisions: [...r.decisions, ...notes] }, prevExcluded, now);
    if (this.primary) this.updateMetrics(snapshot, now, true);
    this.prober?.update(
      this.memory.probe,
      snapshot.filter((u) => u.id in r.excluded),
    );
  }

  /** Records decisions that differ from the previous evaluation's (see {@link selectionDecisions}). */
  private recordChanges(r: PolicyResult, prevExcluded: Record<string, string>, time: number): void {
    const keys = new Set<string>();
    for (const d of r.decisions) {
      const key = `${d.step}\u0000${d.upstream}`;
      if (keys.has(key)) continue;
      keys.add(key);
      if (!this.prevKeys.has(key)) this.ring.push({ step: d.step, upstream: d.upstream, reason: d.reason, time });
    }
    this.prevKeys = keys;
    for (const id of Object.keys(prevExcluded)) {
      if (!(id in r.excluded) && r.order.includes(id)) this.ring.push({ step: 'include', upstream: id, reason: 'no longer excluded', time });
    }
    if (r.order.length !== this.prevOrder.length || r.order.some((id, i) => id !== this.prevOrder[i])) {
      this.ring.push({ step: 'order', upstream: '*', reason: r.order.length ? r.order.join(' > ') : '(no upstream)', time });
      this.host.logger.debug(
        { project: this.network.project.id, network: this.network.id, ...this.scope, order: r.order, excluded: r.excluded },
        `selection order of ${this.network.id} changed`,
      );
    }
    this.prevOrder = r.order;
  }

  private fail(e: unknown): void {
    if (this.stopped) return;
    const now = Date.now();
    const err = e instanceof Error ? e : new Error(String(e));
    const kind = e instanceof PolicyError ? e.kind : 'error';
    this.ring.push({ step: 'evalFunc', upstream: '*', reason: `${kind}: ${err.message}; previous order kept`, time: now });
    this.host.logger.warn(
      { project: this.network.project.id, network: this.network.id, ...this.scope, kind, err: err.message },
      `selection policy of ${this.network.id} failed (${kind}): previous order kept`,
    );
    if (this.primary) this.updateMetrics(this.network.upstreams, now, false);
  }

  private updateMetrics(upstreams: readonly Upstream[], now: number, scores: boolean): void {
    const project = this.network.project.id;
    const network = this.network.id;
    if (scores) {
      const seen = new Set<string>();
      for (const u of upstreams) {
        const s = this.scores[u.id];
        if (s === undefined) continue;
        seen.add(u.id);
        this.metrics.score.set({ project, network, method: '*', upstream: u.id }, s);
      }
      for (const id of this.scoreLabels) if (!seen.has(id)) this.metrics.score.remove({ project, network, method: '*', upstream: id });
      this.scoreLabels.clear();
      for (const id of seen) this.scoreLabels.add(id);
    }
    // Exclusion time climbs on every evaluation while excluded; 0 once selectable again.
    for (const u of upstreams) {
      if (this.evaluated.has(u) && u.id in this.excluded) {
        let since = this.excludedSince.get(u.id);
        if (since === undefined) {
          since = now;
          this.excludedSince.set(u.id, since);
        }
        this.metrics.excluded.set({ upstream: u.id }, (now - since) / 1000);
      } else {
        this.excludedSince.delete(u.id);
        this.metrics.excluded.set({ upstream: u.id }, 0);
      }
    }
  }

  /**
   * The request path (`select` tap): the cached order intersected with the candidates, then
   * upstreams that joined since the last evaluation; without recomputing anything. When the
   * policy removes cordons, a cordon for `*` or for `method` applies at once.
   * @throws ErrUpstreamsExhausted when candidates exist but none is selectable (all cordoned, or all excluded by the policy)
   */
  select(candidates: Upstream[], method: string): Upstream[] {
    if (candidates.length === 0) return candidates;
    const order = this.order;
    let out: Upstream[];
    if (order === null) {
      out = candidates;
    } else {
      out = [];
      // Lists are short; a Set only pays off for large provider-expanded networks.
      const set = candidates.length > 16 ? new Set(candidates) : undefined;
      for (const u of order) if (set ? set.has(u) : candidates.includes(u)) out.push(u);
      for (const u of candidates) if (!this.evaluated.has(u)) out.push(u);
    }
    if (this.honourCordons) {
      const health = this.network.project.health;
      for (const u of out) {
        if (health.isCordoned(u.id, method)) {
          out = out.filter((x) => !health.isCordoned(x.id, method));
          break;
        }
      }
      // The default policy's last resort, before the next tick: every uncordoned upstream.
      if (out.length === 0 && !this.custom) out = candidates.filter((x) => !health.isCordoned(x.id, method));
    }
    if (out.length === 0) throw this.exhausted(candidates, method);
    return out;
  }

  private exhausted(candidates: readonly Upstream[], method: string): ErrUpstreamsExhausted {
    const health = this.network.project.health;
    const cordoned: Record<string, string> = {};
    const excluded: Record<string, string> = {};
    for (const u of candidates) {
      const c = health.cordonOf(u.id, method);
      if (c !== undefined) cordoned[u.id] = c;
      else excluded[u.id] = this.excluded[u.id] ?? 'not selected';
    }
    const list = (m: Record<string, string>) =>
      Object.entries(m)
        .map(([id, r]) => `${id} (${r})`)
        .join(', ');
    if (Object.keys(excluded).length === 0) {
      return new ErrUpstreamsExhausted([], `every upstream of ${this.network.id} is cordoned for ${method}: ${list(cordoned)}`, {
        details: { network: this.network.id, cordoned },
      });
    }
    return new ErrUpstreamsExhausted([], `the selection policy of ${this.network.id} left no upstream for ${method}: ${list({ ...cordoned, ...excluded })}`, {
      details: { network: this.network.id, cordoned, excluded },
    });
  }

  decisions(): SelectionDecision[] {
    return this.ring.toArray();
  }

  state(): SelectionState {
    return {
      // The policy's list (a plugin's included), refreshed at each tick (spec §3.1: a cordon
      // applies on the request path at once, the ordered list at the next tick).
      order: (this.order ?? this.network.upstreams).map((u) => u.id),
      scores: { ...this.scores },
      healthScores: { ...this.healthScores },
      excluded: { ...this.excluded },
      honoursCordons: this.honourCordons,
      custom: this.custom,
      evaluatedAt: this.evaluatedAt,
      evalIntervalMs: this.settings.evalIntervalMs,
      evalTimeoutMs: this.settings.evalTimeoutMs,
      weights: { ...this.settings.weights },
      evalScope: this.settings.evalScope,
      scopes: [],
    };
  }

  /** This scope's order, as {@link SelectionState.scopes} lists it. */
  scopeState(): ScopeState {
    return { ...this.scope, order: (this.order ?? []).map((u) => u.id), excluded: { ...this.excluded }, evaluatedAt: this.evaluatedAt };
  }
}
