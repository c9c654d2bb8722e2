/**
 * The numbers one evaluation of a scope hands its policy, gathered from the other plugins through
 * their public contracts: the health window of the scope's method cell (project health tracker),
 * the consensus plugin's misbehaviour record (`misbehaviorRate` of the same cell, 0 without it), the evm-state
 * plugin's block-time estimate (the seconds lags, 0 until it is estimated), the upstream's
 * syncing flag, and, for a policy that reads them, the per-method latencies of the methods the
 * network served recently. No hooks here.
 */
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { CONSENSUS_MISBEHAVIOR_SERVICE, type ConsensusMisbehaviorApi } from 'svc-proxy/plugins/consensus';
import { networkChainState, SYNCING } from 'svc-proxy/plugins/evm-state';
import type { MethodLatency } from './api.ts';

/** Most methods a network remembers for `metricsByMethod` (method names come from clients). */
export const MAX_SCOPE_METHODS = 64;
import type { PolicyUpstreamInput, ScoreMultipliers } from './view.ts';

/** The method and finality of one evaluation (`*` / `unknown` for the network scope). */
export interface ScopeKey {
  readonly method: string;
  readonly finality: string;
}

/** The network scope: every call that no narrower scope takes. */
export const NETWORK_SCOPE: ScopeKey = Object.freeze({ method: '*', finality: 'unknown' });

/**
 * The methods a network served recently, most recent last, at most {@link MAX_SCOPE_METHODS}
 * (method names come from clients): the keys of `metricsByMethod`.
 */
export class RecentMethods {
  private readonly seen = new Map<string, true>();

  /** Notes a call's method (moves it to the most recent end; the least recent goes past the bound). */
  note(method: string): void {
    if (this.seen.has(method)) {
      // Refreshing on every call would churn the map on the hot path: only the bound needs order.
      if (this.seen.size < MAX_SCOPE_METHODS) return;
      this.seen.delete(method);
    } else if (this.seen.size >= MAX_SCOPE_METHODS) this.seen.delete(this.seen.keys().next().value as string);
    this.seen.set(method, true);
  }

  /** The methods, least recent first. */
  list(): string[] {
    return [...this.seen.keys()];
  }
}

/** What {@link policyInputs} needs besides the upstreams. */
export interface InputOptions {
  readonly scope: ScopeKey;
  /** Methods for `metricsByMethod`, or undefined when the policy does not read it. */
  readonly methods?: readonly string[];
  /** Each upstream's multipliers for this scope. */
  readonly multipliers: (u: Upstream) => ScoreMultipliers | undefined;
}

const misbehaviorServices = new WeakMap<PluginHost, ConsensusMisbehaviorApi | null>();

function misbehaviorOf(host: PluginHost): ConsensusMisbehaviorApi | undefined {
  let s = misbehaviorServices.get(host);
  if (s === undefined) {
    s = host.services.get(CONSENSUS_MISBEHAVIOR_SERVICE) ?? null;
    // Not cached while absent: the consensus plugin may be applied after this one.
    if (s) misbehaviorServices.set(host, s);
  }
  return s ?? undefined;
}

/**
 * The policy inputs of one evaluation, config order.
 * @param host the plugin host (services of the consensus and evm-state plugins)
 * @param network the network
 * @param upstreams its upstreams, config order
 * @param opts the scope, the methods of `metricsByMethod`, the multipliers
 */
export function policyInputs(host: PluginHost, network: Network, upstreams: readonly Upstream[], opts: InputOptions): PolicyUpstreamInput[] {
  const health = network.project.health;
  const blockTimeS = (networkChainState(host, network).blockTimeMs ?? 0) / 1000;
  const misbehavior = misbehaviorOf(host);
  const method = opts.scope.method;
  return upstreams.map((u) => {
    const all = health.snapshot(u.id, '*');
    const cell = method === '*' ? all : health.snapshot(u.id, method);
    // eRPC's misbehaviorRate is the cell's own: misbehaviours over that cell's requests.
    const extra = (m: string, c: typeof cell) => ({
      misbehaviorRate: misbehavior ? misbehavior.counts(network.project, u, m).rate : 0,
      blockHeadLagSeconds: c.blockHeadLag * blockTimeS,
      finalizationLagSeconds: c.finalizationLag * blockTimeS,
    });
    const input: PolicyUpstreamInput = {
      id: u.id,
      tags: u.tags,
      vendor: u.vendor,
      metrics: { ...cell, ...extra(method, cell) },
      syncing: SYNCING.get(u),
      cordoned: cell.cordoned,
      scoreMultipliers: opts.multipliers(u),
    };
    if (method !== '*') input.metricsAcrossMethods = { ...all, ...extra('*', all) };
    if (opts.methods) input.metricsByMethod = latencyByMethod(network, u, opts.methods);
    return input;
  });
}

/** One upstream's latency per method, for the methods it has requests of in the window. */
function latencyByMethod(network: Network, u: Upstream, methods: readonly string[]): Record<string, MethodLatency> {
  const out: Record<string, MethodLatency> = {};
  for (const m of methods) {
    const s = network.project.health.snapshot(u.id, m);
    if (s.requests === 0) continue;
    out[m] = { requestsTotal: s.requests, p50ms: s.p50 * 1000, p70ms: s.p70 * 1000, p90ms: s.p90 * 1000, p95ms: s.p99 * 1000, p99ms: s.p99 * 1000 };
  }
  return out;
}
