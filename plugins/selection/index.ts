/**
 * selection plugin (spec §1.3, §3.1, §6): the per-network selection policy.
 * Taps: `network` (evaluate the policy at once, then every `selectionPolicy.evalInterval` on an
 * unref'd timer), `upstreamJoined` (re-evaluate), `select` at stage POLICY (hand out the cached
 * order without recomputing it, honouring new cordons at once when the policy calls
 * `removeCordoned()`), `shutdown` (stop the timers). Publishes `svc_selection_score` and
 * `svc_selection_excluded_seconds`, and keeps the last 100 decisions per network for the admin.
 */
import { Type, type TProperties } from '@sinclair/typebox';
import { SyncWaterfallHook } from 'tapable';
import { Gauge } from 'prom-client';
import type { CallContext } from '../../core/context.ts';
import { ConfigError, parseDuration, type ConfigProblem } from '../../core/config/load.ts';
import { Duration, Strict } from '../../core/config/schema.ts';
import { ErrUpstreamsExhausted } from '../../core/errors.ts';
import type { Plugin, Proxy } from '../../core/proxy.ts';
import type { Network } from '../../core/registry/network.ts';
import type { Upstream } from '../../core/registry/upstream.ts';
import { SelectStage } from '../../core/stages.ts';
import {
  DEFAULT_SCORE_WEIGHTS,
  defaultPolicy,
  evaluatePolicy,
  PolicyError,
  Ring,
  type DecisionDraft,
  type EvalFunc,
  type PolicyResult,
  type PolicyUpstreamInput,
  type ScoreWeights,
} from './policy.ts';

export {
  DEFAULT_SCORE_WEIGHTS,
  DEFAULT_THRESHOLDS,
  defaultPolicy,
  evaluatePolicy,
  FALLBACK_TAG,
  PolicyError,
  policyUpstream,
  Ring,
  scoreOf,
  UpstreamsView,
} from './policy.ts';
export type {
  DecisionDraft,
  EvalFunc,
  EvaluateOptions,
  PolicyContext,
  PolicyErrorKind,
  PolicyMetrics,
  PolicyResult,
  PolicyUpstream,
  PolicyUpstreamInput,
  ScoreWeights,
} from './policy.ts';

/** Decisions kept per network (the admin `svc_project` method shows them). */
export const MAX_DECISIONS = 100;

/**
 * The config keys this plugin owns: `networks[].selectionPolicy` (and the same under
 * `networkDefaults`, merged into each network).
 */
export const selectionPolicySchema = Strict(
  {
    evalInterval: Type.Optional(Duration({ default: '15s', description: 'how often the ordered upstream list is re-evaluated (spec §1.3); must be > 0' })),
    evalTimeout: Type.Optional(Duration({ default: '100ms', description: 'bound of a custom evalFunc: an async one is raced against it, a sync one is measured; on overrun the previous order is kept' })),
    scoreWeights: Type.Optional(
      Strict(
        {
          errorRate: Type.Optional(Type.Number({ minimum: 0, default: 4, description: 'weight of the error rate (0..1)' })),
          respLatency: Type.Optional(Type.Number({ minimum: 0, default: 15, description: 'weight of the p70 latency, seconds' })),
          throttledRate: Type.Optional(Type.Number({ minimum: 0, default: 4, description: 'weight of the throttle rate (0..1)' })),
          blockHeadLag: Type.Optional(Type.Number({ minimum: 0, default: 1, description: 'weight of the block-head lag, blocks' })),
        },
        { default: {}, description: 'score = errorRate*w + p70Seconds*w + throttleRate*w + blockHeadLag*w, lower is better (svc_selection_score)' },
      ),
    ),
    evalFunc: Type.Optional(
      Type.Unsafe<EvalFunc>({
        'x-svc-kind': 'function',
        description: 'TypeScript/JS configs only: `(upstreams, ctx) => upstreams` (sync or async) replacing the default policy; call `upstreams.removeCordoned()` to honour cordons (spec §3.1)',
      }),
    ),
  },
  { default: {}, description: 'per-network upstream selection policy (spec §1.3)' },
);

/** The schema fragment of the plugin. */
export const selectionSchemaFragment: { network: TProperties } = { network: { selectionPolicy: selectionPolicySchema } };

/** A network's selection settings, resolved (durations in ms, weights defaulted). */
export interface SelectionSettings {
  /** `evalInterval`, ms (> 0). Default 15 000. */
  evalIntervalMs: number;
  /** `evalTimeout`, ms (> 0). Default 100. */
  evalTimeoutMs: number;
  /** `scoreWeights` with defaults 4 / 15 / 4 / 1. */
  weights: ScoreWeights;
  /** `evalFunc`, when configured. */
  evalFunc?: EvalFunc;
}

/**
 * Reads `selectionPolicy` settings (resolved or raw: durations as ms or strings).
 * @param raw the `selectionPolicy` object, or undefined for every default
 * @param path config path of the object, for errors (e.g. `projects[0].networks[1].selectionPolicy`)
 * @throws ConfigError naming `<path>.evalFunc` when it is not a function, `<path>.evalInterval`/`.evalTimeout` when not > 0, `<path>.scoreWeights.<k>` when not a finite number >= 0
 */
export function readSelectionSettings(raw: unknown, path: string): SelectionSettings {
  const problems: ConfigProblem[] = [];
  const o = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const duration = (key: string, def: number): number => {
    const v = o[key];
    if (v === undefined) return def;
    let n = Number.NaN;
    try {
      if (typeof v === 'number' || typeof v === 'string') n = parseDuration(v);
    } catch {
      // reported below
    }
    if (!Number.isFinite(n) || n <= 0) {
      problems.push({ path: `${path}.${key}`, message: `must be a duration greater than 0 (got ${JSON.stringify(v)})` });
      return def;
    }
    return n;
  };
  const evalIntervalMs = duration('evalInterval', 15_000);
  const evalTimeoutMs = duration('evalTimeout', 100);
  const weights: ScoreWeights = { ...DEFAULT_SCORE_WEIGHTS };
  const w = o.scoreWeights;
  if (w !== undefined && w !== null && typeof w === 'object') {
    for (const k of Object.keys(DEFAULT_SCORE_WEIGHTS) as (keyof ScoreWeights)[]) {
      const v = (w as Record<string, unknown>)[k];
      if (v === undefined) continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) problems.push({ path: `${path}.scoreWeights.${k}`, message: `must be a finite number >= 0 (got ${JSON.stringify(v)})` });
      else weights[k] = v;
    }
  }
  const f = o.evalFunc;
  if (f !== undefined && typeof f !== 'function') {
    problems.push({ path: `${path}.evalFunc`, message: `must be a function (upstreams, ctx) => upstreams, set from a TypeScript/JS config or a plugin; got ${f === null ? 'null' : typeof f}` });
  }
  if (problems.length) throw new ConfigError(problems);
  return { evalIntervalMs, evalTimeoutMs, weights, evalFunc: typeof f === 'function' ? (f as EvalFunc) : undefined };
}

/** One recorded selection decision. */
export interface SelectionDecision extends DecisionDraft {
  /** When it was made, epoch ms. */
  time: number;
}

/** The selection state of one network, for the admin `svc_project` method. */
export interface SelectionState {
  /** Upstream ids in the order the request path hands them out (before any evaluation: config order). */
  order: string[];
  /** Upstream id -> score of the last successful evaluation (lower is better). */
  scores: Record<string, number>;
  /** Upstream id -> why the last successful evaluation left it out. */
  excluded: Record<string, string>;
  /** True when the active policy called `removeCordoned()`: new cordons apply on the request path at once. */
  honoursCordons: boolean;
  /** True when a custom `evalFunc` is active. */
  custom: boolean;
  /** Time of the last successful evaluation, epoch ms (undefined before the first). */
  evaluatedAt?: number;
  /** Resolved `evalInterval`, ms. */
  evalIntervalMs: number;
  /** Resolved `evalTimeout`, ms. */
  evalTimeoutMs: number;
  /** Resolved score weights. */
  weights: ScoreWeights;
}

/** Hooks the selection plugin publishes for other plugins (see {@link selectionHooks}). */
export interface SelectionHooks {
  /**
   * Chooses a network's policy when the network is created: receives the configured one
   * (`selectionPolicy.evalFunc`, else the plugin option, else {@link defaultPolicy}) and
   * returns the one to use. Lets a plugin install a policy (spec §1.3 "or from a plugin").
   */
  readonly policy: SyncWaterfallHook<[EvalFunc, Network]>;
}

/** Options of {@link selectionPlugin}. */
export interface SelectionPluginOptions {
  /** Policy of networks that configure no `evalFunc` (default {@link defaultPolicy}). */
  evalFunc?: EvalFunc;
  /** Decisions kept per network (default {@link MAX_DECISIONS}). */
  maxDecisions?: number;
}

const hooksByProxy = new WeakMap<Proxy, SelectionHooks>();
const selections = new WeakMap<Proxy, Map<Network, NetworkSelection>>();

/**
 * The selection plugin's hooks of a proxy (created on first use, so a plugin may tap them
 * whether it is applied before or after the selection plugin, as long as it is before start).
 */
export function selectionHooks(proxy: Proxy): SelectionHooks {
  let h = hooksByProxy.get(proxy);
  if (!h) {
    h = Object.freeze({ policy: new SyncWaterfallHook<[EvalFunc, Network]>(['policy', 'network']) });
    hooksByProxy.set(proxy, h);
  }
  return h;
}

function findSelection(proxy: Proxy, projectId: string, networkId: string): NetworkSelection | undefined {
  const project = proxy.projects.get(projectId);
  const network = project?.networks.get(networkId) ?? project?.aliases.get(networkId);
  return network ? selections.get(proxy)?.get(network) : undefined;
}

/**
 * The last selection decisions of a network (at most 100), oldest first. A decision is
 * recorded when it changes: an upstream newly excluded by a step (or by a different step), an
 * upstream included again (step `include`), a new order (step `order`, upstream `*`), and
 * every failed custom evaluation (step `evalFunc`, upstream `*`).
 * @param networkId `evm:<chainId>` or the network's alias
 * @returns an empty array for an unknown project/network or without the selection plugin
 */
export function selectionDecisions(proxy: Proxy, projectId: string, networkId: string): SelectionDecision[] {
  return findSelection(proxy, projectId, networkId)?.decisions() ?? [];
}

/**
 * The current ordered list, last scores and exclusions of a network.
 * @param networkId `evm:<chainId>` or the network's alias
 * @returns undefined for an unknown project/network or without the selection plugin
 */
export function selectionState(proxy: Proxy, projectId: string, networkId: string): SelectionState | undefined {
  return findSelection(proxy, projectId, networkId)?.state();
}

/**
 * Evaluates a network's policy now, outside the timer (admin, tests). Never rejects: a failed
 * custom policy keeps the previous order, as on a tick.
 * @returns resolves once the evaluation (and any evaluation it had to wait for) committed; false for an unknown network
 */
export async function evaluateSelection(proxy: Proxy, projectId: string, networkId: string): Promise<boolean> {
  const sel = findSelection(proxy, projectId, networkId);
  if (!sel) return false;
  await sel.evaluate();
  return true;
}

/** Static accessors in the DESIGN's `XPlugin.getHooks(proxy)` style. */
export const SelectionPlugin = Object.freeze({
  getHooks: selectionHooks,
  getDecisions: selectionDecisions,
  getState: selectionState,
  evaluate: evaluateSelection,
});

/** Metrics shared by every network of a proxy. */
interface SelectionMetrics {
  score: Gauge<'project' | 'network' | 'method' | 'upstream'>;
  excluded: Gauge<'upstream'>;
}

/** The selection state and timer of one network. */
class NetworkSelection {
  /** Cached order (null until the first evaluation commits: the request path then keeps config order). */
  private order: Upstream[] | null = null;
  /** Upstreams the cached order was computed over; others joined since and go last. */
  private evaluated = new Set<Upstream>();
  private honourCordons = true;
  private excluded: Record<string, string> = {};
  private scores: Record<string, number> = {};
  private evaluatedAt?: number;
  private readonly ring: Ring<SelectionDecision>;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private inflight?: Promise<void>;
  private rerun?: Promise<void>;
  private prevKeys = new Set<string>();
  private prevOrder: string[] = [];
  private readonly excludedSince = new Map<string, number>();
  private readonly scoreLabels = new Set<string>();

  constructor(
    private readonly proxy: Proxy,
    private readonly network: Network,
    private readonly settings: SelectionSettings,
    private readonly policy: EvalFunc,
    private readonly metrics: SelectionMetrics,
    maxDecisions: number,
  ) {
    this.ring = new Ring<SelectionDecision>(maxDecisions);
  }

  private get custom(): boolean {
    return this.policy !== defaultPolicy;
  }

  /** Evaluates once now, then every `evalInterval` (unref'd). */
  start(): void {
    void this.evaluate();
    this.timer = setInterval(() => void this.evaluate(), this.settings.evalIntervalMs);
    this.timer.unref?.();
  }

  /** Stops the timer; later evaluations are ignored. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Runs the policy over the network's upstreams and commits the result; a failure keeps the
   * previous order. Synchronous for a sync policy (the returned promise is already settled).
   * An evaluation requested while an async one runs waits for it, then runs once more.
   * Never rejects.
   */
  evaluate(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.inflight) {
      this.rerun ??= this.inflight.then(() => {
        this.rerun = undefined;
        return this.evaluate();
      });
      return this.rerun;
    }
    const snapshot = this.network.upstreams.slice();
    let out: PolicyResult | Promise<PolicyResult>;
    try {
      const health = this.network.project.health;
      const inputs: PolicyUpstreamInput[] = snapshot.map((u) => {
        const metrics = health.snapshot(u.id, '*');
        return { id: u.id, tags: u.tags, vendor: u.vendor, metrics, syncing: u.syncing, cordoned: metrics.cordoned };
      });
      out = evaluatePolicy(inputs, {
        evalFunc: this.policy,
        weights: this.settings.weights,
        evalTimeoutMs: this.settings.evalTimeoutMs,
        project: this.network.project.id,
        network: this.network.id,
      });
    } catch (e) {
      this.fail(e);
      return Promise.resolve();
    }
    if (!(out instanceof Promise)) {
      this.commit(out, snapshot);
      return Promise.resolve();
    }
    const p = out
      .then(
        (r) => this.commit(r, snapshot),
        (e: unknown) => this.fail(e),
      )
      .catch((e: unknown) => this.fail(e))
      .finally(() => {
        this.inflight = undefined;
      });
    this.inflight = p;
    return p;
  }

  private commit(r: PolicyResult, snapshot: readonly Upstream[]): void {
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
    this.scores = r.scores;
    const now = Date.now();
    this.evaluatedAt = now;
    this.recordChanges(r, prevExcluded, now);
    this.updateMetrics(snapshot, now, true);
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
      this.proxy.logger.debug({ project: this.network.project.id, network: this.network.id, order: r.order, excluded: r.excluded }, `selection order of ${this.network.id} changed`);
    }
    this.prevOrder = r.order;
  }

  private fail(e: unknown): void {
    if (this.stopped) return;
    const now = Date.now();
    const err = e instanceof Error ? e : new Error(String(e));
    const kind = e instanceof PolicyError ? e.kind : 'error';
    this.ring.push({ step: 'evalFunc', upstream: '*', reason: `${kind}: ${err.message}; previous order kept`, time: now });
    this.proxy.logger.warn({ project: this.network.project.id, network: this.network.id, kind, err: err.message }, `selection policy of ${this.network.id} failed (${kind}): previous order kept`);
    this.updateMetrics(this.network.upstreams, now, false);
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
      return new ErrUpstreamsExhausted([], `every upstream of ${this.network.id} is cordoned for ${method}: ${list(cordoned)}`, { details: { network: this.network.id, cordoned } });
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
      order: (this.order ?? this.network.upstreams).map((u) => u.id),
      scores: { ...this.scores },
      excluded: { ...this.excluded },
      honoursCordons: this.honourCordons,
      custom: this.custom,
      evaluatedAt: this.evaluatedAt,
      evalIntervalMs: this.settings.evalIntervalMs,
      evalTimeoutMs: this.settings.evalTimeoutMs,
      weights: { ...this.settings.weights },
    };
  }
}

/** Config path of a network's `selectionPolicy`, for error messages. */
function settingsPath(proxy: Proxy, network: Network): string {
  const pi = proxy.config.projects.findIndex((p) => p.id === network.project.id);
  const ni = pi < 0 ? -1 : (proxy.config.projects[pi]?.networks.findIndex((n) => n.id === network.id) ?? -1);
  if (pi < 0) return `projects[?].networks[?].selectionPolicy`;
  return ni < 0 ? `projects[${pi}].networkDefaults.selectionPolicy` : `projects[${pi}].networks[${ni}].selectionPolicy`;
}

/** Checks every network's (and `networkDefaults`') `selectionPolicy` of a config. */
function validateConfig(proxy: Proxy): void {
  const problems: ConfigProblem[] = [];
  const check = (raw: unknown, path: string) => {
    try {
      readSelectionSettings(raw, path);
    } catch (e) {
      if (e instanceof ConfigError) problems.push(...e.problems);
      else throw e;
    }
  };
  proxy.config.projects.forEach((p, i) => {
    const nd = p.networkDefaults as { selectionPolicy?: unknown };
    if (nd.selectionPolicy !== undefined) check(nd.selectionPolicy, `projects[${i}].networkDefaults.selectionPolicy`);
    p.networks.forEach((n, j) => check(n.settings.selectionPolicy, `projects[${i}].networks[${j}].selectionPolicy`));
  });
  if (problems.length) throw new ConfigError(problems);
}

/**
 * Creates the selection plugin (name `selection`).
 * @param opts default policy for networks without `evalFunc`, decisions kept per network
 * @returns a plugin owning `networks[].selectionPolicy` and tapping `network`, `upstreamJoined`, `select` (stage POLICY) and `shutdown`
 * @throws ConfigError from `apply` when a `selectionPolicy` is invalid (e.g. `projects[0].networks[0].selectionPolicy.evalFunc` is not a function)
 */
export function selectionPlugin(opts: SelectionPluginOptions = {}): Plugin {
  const maxDecisions = opts.maxDecisions ?? MAX_DECISIONS;
  if (!Number.isInteger(maxDecisions) || maxDecisions < 1) throw new RangeError(`selectionPlugin: maxDecisions must be a positive integer, got ${maxDecisions}`);
  if (opts.evalFunc !== undefined && typeof opts.evalFunc !== 'function') throw new TypeError('selectionPlugin: evalFunc must be a function (upstreams, ctx) => upstreams');
  return {
    name: 'selection',
    schema: selectionSchemaFragment,
    apply(proxy: Proxy) {
      validateConfig(proxy);
      const hooks = selectionHooks(proxy);
      const nets = new Map<Network, NetworkSelection>();
      selections.set(proxy, nets);
      const metrics: SelectionMetrics = {
        score: new Gauge({
          name: 'svc_selection_score',
          help: 'Selection score of an upstream, lower is better (method "*": the whole upstream)',
          labelNames: ['project', 'network', 'method', 'upstream'],
          registers: [proxy.metrics],
        }),
        excluded: new Gauge({
          name: 'svc_selection_excluded_seconds',
          help: 'Seconds an upstream has been continuously excluded by the selection policy (0 while selectable)',
          labelNames: ['upstream'],
          registers: [proxy.metrics],
        }),
      };

      proxy.hooks.network.tap('selection', (network: Network) => {
        let settings: SelectionSettings;
        try {
          settings = readSelectionSettings(network.config.settings.selectionPolicy, settingsPath(proxy, network));
        } catch (e) {
          proxy.logger.error({ project: network.project.id, network: network.id, err: (e as Error).message }, `invalid selectionPolicy of ${network.id}: using the default policy`);
          settings = readSelectionSettings(undefined, '');
        }
        const policy = hooks.policy.call(settings.evalFunc ?? opts.evalFunc ?? defaultPolicy, network);
        const sel = new NetworkSelection(proxy, network, settings, policy, metrics, maxDecisions);
        nets.set(network, sel);
        sel.start();
      });

      proxy.hooks.upstreamJoined.tap('selection', (_u: Upstream, network: Network) => {
        void nets.get(network)?.evaluate();
      });

      proxy.hooks.select.tap({ name: 'selection', stage: SelectStage.POLICY }, (ups: Upstream[], ctx: CallContext) => {
        const sel = nets.get(ctx.network);
        return sel ? sel.select(ups, ctx.request.method) : ups;
      });

      proxy.hooks.shutdown.tapPromise('selection', async () => {
        for (const sel of nets.values()) sel.stop();
      });
    },
  };
}
