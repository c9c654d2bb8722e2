/**
 * The numbers one evaluation of a scope hands its policy, gathered from the other plugins through
 * their public contracts: the health window of the scope's method cell (project health tracker),
 * the consensus plugin's misbehaviour record (`misbehaviorRate` of the same cell, 0 without it),
 * the evm-state plugin's block-time estimate (the seconds lags, 0 until it is estimated), the
 * upstream's syncing flag, and, for a policy that reads them, the per-method latencies of the
 * methods the health tracker holds for the upstream ({@link MethodLatencies}, built once per
 * network tick and shared by its scopes). No hooks here.
 */
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { CONSENSUS_MISBEHAVIOR_SERVICE, type ConsensusMisbehaviorApi } from 'svc-proxy/plugins/consensus';
import { networkChainState, SYNCING } from 'svc-proxy/plugins/evm-state';
import type { MethodLatency } from './api.ts';
import type { PolicyUpstreamInput, ScoreMultipliers } from './view.ts';

/** The method and finality of one evaluation (`*` / `unknown` for the network scope). */
export interface ScopeKey {
  readonly method: string;
  readonly finality: string;
}

/** The network scope: every call that no narrower scope takes. */
export const NETWORK_SCOPE: ScopeKey = Object.freeze({ method: '*', finality: 'unknown' });

/**
 * Each upstream's latency per method (`metricsByMethod`), over the methods the project's health
 * tracker holds a cell of their own for with requests in the window (as eRPC's
 * `GetUpstreamMetrics`; the tracker bounds them, client-sent names never reach this list on their
 * own). Built lazily per upstream, once: a network's tick makes one and hands it to every scope.
 */
export class MethodLatencies {
  private readonly byUpstream = new Map<Upstream, Record<string, MethodLatency>>();

  constructor(private readonly network: Network) {}

  /** The upstream's latency per method with requests in the window. */
  of(u: Upstream): Record<string, MethodLatency> {
    let out = this.byUpstream.get(u);
    if (out) return out;
    out = {};
    const health = this.network.project.health;
    for (const m of health.methods(u.id)) {
      const s = health.snapshot(u.id, m);
      if (s.requests === 0) continue;
      // Frozen: every scope of the tick reads the same objects.
      out[m] = Object.freeze({
        requestsTotal: s.requests,
        p50ms: s.p50 * 1000,
        p70ms: s.p70 * 1000,
        p90ms: s.p90 * 1000,
        p95ms: s.p99 * 1000,
        p99ms: s.p99 * 1000,
      });
    }
    Object.freeze(out);
    this.byUpstream.set(u, out);
    return out;
  }
}

/** What {@link policyInputs} needs besides the upstreams. */
export interface InputOptions {
  /** The evaluation's method and finality: `u.metrics` is its method's health cell (`*` for the network scope). */
  readonly scope: ScopeKey;
  /** The tick's per-method latencies for `metricsByMethod`, or undefined when the policy does not read it. */
  readonly latency?: MethodLatencies;
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
 * @param opts the scope, the tick's per-method latencies, the multipliers
 */
export function policyInputs(host: PluginHost, network: Network, upstreams: readonly Upstream[], opts: InputOptions): PolicyUpstreamInput[] {
  const project = network.project;
  const health = project.health;
  const blockTimeS = (networkChainState(host, network).blockTimeMs ?? 0) / 1000;
  const misbehavior = misbehaviorOf(host);
  const method = opts.scope.method;
  return upstreams.map((u) => {
    const all = health.snapshot(u.id, '*');
    const cell = method === '*' ? all : health.snapshot(u.id, method);
    // eRPC's misbehaviorRate is the cell's own: misbehaviours over that cell's requests.
    const extra = (m: string, c: typeof cell) => ({
      misbehaviorRate: misbehavior ? misbehavior.counts(project, u, m).rate : 0,
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
    if (opts.latency) input.metricsByMethod = opts.latency.of(u);
    return input;
  });
}
