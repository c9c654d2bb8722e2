/**
 * A network's evaluation scopes (eRPC's `selectionPolicy.evalScope`): the network's own
 * {@link NetworkSelection} and, under a narrower `evalScope`, one more per method, per finality
 * or per pair, created when a call of the scope arrives. One timer per network evaluates every
 * scope each `evalInterval`, with the same policy, each with its own method's health numbers and
 * the `routing.scoreMultipliers` entries matching its method and finality; the per-method
 * latencies are gathered once per tick for all of them. The calls of a scope get its order, and
 * under `probeExcluded` are mirrored to what its evaluation left out (`prober.ts`).
 *
 * Bounded, since methods come from clients: a method gets a scope only once one of the network's
 * upstreams answered it within the health window (a name no upstream serves never does), at most
 * {@link MAX_SCOPES} narrow scopes per network; a call whose scope is past the bound, or whose
 * scope has not finished its first evaluation yet, gets the network's order. A narrow scope
 * without calls for {@link SCOPE_IDLE_MS} is dropped at the next tick of the network's timer (or
 * an evaluation asked for), which frees its slot. No hooks here; `index.ts` routes the `select`
 * tap through {@link ScopedSelection.select}.
 */
import { type CallContext, FINALITY, type Network, type PluginHost, type Upstream } from 'svc-proxy/plugin';
import type { EvalScope, SelectionDecision, SelectionState } from './api.ts';
import { MethodLatencies, type ScopeKey } from './inputs.ts';
import type { EvalFunc } from './policy.ts';
import type { SelectionSettings } from './schema.ts';
import { NetworkSelection, type SelectionMetrics } from './state.ts';
import { StickyRegisters } from './memory.ts';
import type { ExcludedProber } from './prober.ts';

/** Most narrower scopes a network evaluates: calls of a scope past them use the network's order. */
export const MAX_SCOPES = 64;

/** How long a narrow scope lives without calls, ms. */
export const SCOPE_IDLE_MS = 3_600_000;

/**
 * The scope a call falls in under an `evalScope`, or undefined for the network's own.
 * @param evalScope the network's `evalScope`
 * @param method the call's method
 * @param finality the call's finality (`FINALITY` slot)
 */
export function scopeOf(evalScope: EvalScope, method: string, finality: string): ScopeKey | undefined {
  switch (evalScope) {
    case 'network-method':
      return { method, finality: 'unknown' };
    case 'network-finality':
      return { method: '*', finality };
    case 'network-method-finality':
      return { method, finality };
    default:
      return undefined;
  }
}

/** Every scope of one network. */
export class ScopedSelection {
  /** The network's own scope. */
  readonly network: NetworkSelection;
  private readonly scopes = new Map<string, NetworkSelection>();
  /** The sticky primary registers every scope shares (keyed by `stickyPrimary`'s own scope). */
  private readonly registers = new StickyRegisters();
  /** The last tick's per-method latencies (a new scope's first evaluation reads them too). */
  private latency?: MethodLatencies;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  /**
   * @param prober the network's mirror prober, when its policy names `probeExcluded`: each scope's evaluations set the copies of the calls it serves
   * Other parameters as {@link NetworkSelection}'s; every scope shares them.
   */
  constructor(
    private readonly host: PluginHost,
    private readonly net: Network,
    private readonly settings: SelectionSettings,
    private readonly policy: EvalFunc,
    private readonly metrics: SelectionMetrics,
    private readonly maxDecisions: number,
    private readonly prober?: ExcludedProber,
  ) {
    this.network = new NetworkSelection(host, net, settings, policy, metrics, maxDecisions, prober, undefined, this.registers);
    if (prober) prober.route = (ctx) => this.servedBy(ctx);
  }

  /** The id of the narrower scope whose order a call of this network gets, or undefined for the network's own. */
  private servedBy(ctx: CallContext): string | undefined {
    const key = scopeOf(this.settings.evalScope, ctx.request.method, FINALITY.get(ctx));
    if (!key) return undefined;
    const id = `${key.method}\u0000${key.finality}`;
    return this.scopes.get(id)?.ready ? id : undefined;
  }

  /** Evaluates every scope now, then every `evalInterval` on one unref'd timer. */
  start(): void {
    if (this.stopped || this.timer) return;
    void this.evaluate();
    this.timer = setInterval(() => void this.evaluate(), this.settings.evalIntervalMs);
    this.timer.unref?.();
  }

  /**
   * One tick (the timer's, or an upstream joined or turned, or the admin asked): drops idle
   * narrow scopes, then evaluates every scope with one set of per-method latencies; never rejects.
   */
  async evaluate(): Promise<void> {
    if (this.stopped) return;
    this.sweep(Date.now());
    const latency = (this.latency = new MethodLatencies(this.net));
    await Promise.all([this.network.evaluate(latency), ...[...this.scopes.values()].map((s) => s.evaluate(latency))]);
  }

  private sweep(now: number): void {
    for (const [key, s] of this.scopes) {
      if (now - s.lastUsed < SCOPE_IDLE_MS) continue;
      s.stop();
      this.scopes.delete(key);
    }
  }

  /**
   * The order of a call's scope (see {@link NetworkSelection.select}).
   * @throws ErrUpstreamsExhausted when candidates exist but none is selectable
   */
  select(candidates: Upstream[], ctx: CallContext): Upstream[] {
    const method = ctx.request.method;
    // The default scope: the network's own order, with nothing read per call.
    if (this.settings.evalScope === 'network') return this.network.select(candidates, method);
    const key = scopeOf(this.settings.evalScope, method, FINALITY.get(ctx));
    // A finality scope of `unknown` is the network's own evaluation: no second one for it.
    const own = !key || (key.method === '*' && key.finality === 'unknown');
    const scoped = own ? undefined : this.scopeFor(key);
    return (scoped?.ready ? scoped : this.network).select(candidates, method);
  }

  /**
   * The scope's selection, created (and its first evaluation started) on first use; undefined
   * past {@link MAX_SCOPES}, and for a method none of the network's upstreams answered within the
   * health window.
   */
  private scopeFor(key: ScopeKey): NetworkSelection | undefined {
    const id = `${key.method}\u0000${key.finality}`;
    let s = this.scopes.get(id);
    if (!s) {
      if (this.stopped) return undefined;
      if (this.scopes.size >= MAX_SCOPES) this.sweep(Date.now());
      if (this.scopes.size >= MAX_SCOPES || !this.answered(key.method)) return undefined;
      s = new NetworkSelection(this.host, this.net, this.settings, this.policy, this.metrics, this.maxDecisions, this.prober?.scope(id), key, this.registers);
      this.scopes.set(id, s);
      // Off the request path: the call that opened the scope keeps the network's order.
      const started = s;
      setImmediate(() => {
        if (!this.stopped && this.scopes.get(id) === started) void started.evaluate(this.latency);
      });
    }
    s.lastUsed = Date.now();
    return s;
  }

  /** Whether some upstream of the network answered `method` within the health window (`*`: always). */
  private answered(method: string): boolean {
    if (method === '*') return true;
    const health = this.net.project.health;
    return this.net.upstreams.some((u) => health.requestCounts(u.id, method).answered > 0);
  }

  /** Stops the timer and every scope. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.network.stop();
    for (const s of this.scopes.values()) s.stop();
  }

  /** Stops, for a network a config reload replaced (see {@link NetworkSelection.retire}). */
  retire(): void {
    this.stop();
    this.network.retire();
  }

  /** The network scope's decisions. */
  decisions(): SelectionDecision[] {
    return this.network.decisions();
  }

  /** The network scope's state, with the narrow scopes' orders. */
  state(): SelectionState {
    return { ...this.network.state(), scopes: [...this.scopes.values()].map((s) => s.scopeState()) };
  }
}
