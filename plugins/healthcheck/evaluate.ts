/**
 * The eight evaluation strategies of spec §4.3 over a set of upstreams, and the live
 * `eth_chainId` probe they may need. Reads only public state: upstream probe state, the chain
 * state's last successful poll, the project's health tracker and the `select` hook.
 */
import type { Network, PluginHost, Project, Upstream } from 'svc-proxy/plugin';
import type { Strategy } from './schema.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

/** A live `eth_chainId` probe gives up after this long, ms (spec §4.3). */
export const CHAIN_ID_PROBE_TIMEOUT_MS = 5000;
/** A probe's answer is reused this long, so an open healthcheck cannot fan out paid calls, ms. */
export const CHAIN_ID_PROBE_TTL_MS = 5000;

/** The verdict of one strategy over some upstreams. */
export interface Verdict {
  healthy: boolean;
  message: string;
}

/** One upstream with the network it serves (an upstream not yet on a network has none). */
export interface Member {
  upstream: Upstream;
  network?: Network;
}

/**
 * The upstreams a state poller runs for (the evm-state plugin's `evm-state.pollers` service);
 * undefined when no poller plugin is loaded. An upstream with `evm.statePollerInterval: 0` has no
 * entry.
 */
export type Pollers = ReadonlyMap<Upstream, unknown> | undefined;

/**
 * Whether an upstream finished initialising (spec §4.3 `any:initializedUpstreams`): its chain-id
 * probe confirmed the chain and, when a state poller runs for this very upstream, that poller
 * polled it successfully once. An upstream without a poller (`evm.statePollerInterval: 0`, or a
 * preset without evm-state) is initialised by its chain-id probe alone: nothing else will ever
 * complete its start-up, and a readiness probe must pass once it serves.
 */
export function isInitialized(host: PluginHost, m: Member, pollers: Pollers): boolean {
  if (m.upstream.state !== 'ready' || !m.network) return false;
  if (!pollers?.has(m.upstream)) return true;
  return (networkChainState(host, m.network).peek(m.upstream)?.lastPollAt ?? 0) > 0;
}

/**
 * Runs `eth_chainId` through each upstream's own chain (no cache, multiplexing, retry or hedge),
 * in parallel, with one answer per upstream reused for {@link CHAIN_ID_PROBE_TTL_MS}.
 */
export class ChainIdProbes {
  private readonly recent = new Map<Upstream, { at: number; ok: Promise<boolean> }>();

  constructor(
    private readonly host: PluginHost,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether the upstream answers `eth_chainId` with its network's chain id (never rejects). */
  check(m: Member): Promise<boolean> {
    const network = m.network;
    if (!network) return Promise.resolve(false);
    const hit = this.recent.get(m.upstream);
    if (hit && this.now() - hit.at < CHAIN_ID_PROBE_TTL_MS) return hit.ok;
    const ok = this.host.upstreamCall(network, m.upstream, 'eth_chainId', [], CHAIN_ID_PROBE_TIMEOUT_MS).then(
      (r) => typeof r.result === 'string' && Number.parseInt(r.result, 16) === network.chainId,
      () => false,
    );
    this.recent.set(m.upstream, { at: this.now(), ok });
    // Bounded by the configured upstreams: entries are only ever replaced, and dropped when stale.
    for (const [u, e] of this.recent) if (this.now() - e.at >= CHAIN_ID_PROBE_TTL_MS) this.recent.delete(u);
    return ok;
  }
}

/**
 * Whether selection would route to an upstream now: the `select` hook (method filters, cordons,
 * selection-policy exclusions) over its network, for a plain read.
 */
function activeOn(host: PluginHost, network: Network): Set<Upstream> {
  const { ctx, done } = host.internalContext(network, 'eth_blockNumber', [], 1000);
  try {
    return new Set(host.hooks.select.call(network.upstreams.slice(), ctx));
  } catch {
    return new Set();
  } finally {
    done();
  }
}

/**
 * Evaluates a strategy (spec §4.3) over the upstreams of one project or one network.
 * @param pollers the upstreams a state poller runs for (see {@link isInitialized})
 */
export async function evaluate(
  host: PluginHost,
  project: Project,
  members: readonly Member[],
  strategy: Strategy,
  probes: ChainIdProbes,
  pollers: Pollers,
): Promise<Verdict> {
  const n = members.length;
  if (n === 0) return { healthy: false, message: 'no upstreams configured' };
  switch (strategy) {
    case 'any:initializedUpstreams': {
      const k = members.filter((m) => isInitialized(host, m, pollers)).length;
      return k > 0 ? { healthy: true, message: `${k} / ${n} upstreams initialized` } : { healthy: false, message: `no upstream initialized yet (0 / ${n})` };
    }
    case 'any:errorRateBelow90':
    case 'all:errorRateBelow90':
    case 'any:errorRateBelow100':
    case 'all:errorRateBelow100': {
      const limit = strategy.endsWith('90') ? 0.9 : 1;
      // Upstreams with traffic in the window count with their error rate (the state poller's
      // calls are traffic). An initialised upstream without traffic (no poller, no calls yet)
      // counts as 0%: it answered its chain-id probe, and a readiness probe must not wait for
      // client traffic that only comes once it passes. Others have no data and do not count.
      let counted = 0;
      let below = 0;
      for (const m of members) {
        const s = project.health.snapshot(m.upstream.id);
        if (s.requests > 0) {
          counted++;
          if (s.errorRate < limit) below++;
        } else if (isInitialized(host, m, pollers)) {
          counted++;
          below++;
        }
      }
      if (counted === 0) return { healthy: false, message: 'no error rate data available yet' };
      const healthy = strategy.startsWith('any:') ? below > 0 : below === counted;
      return { healthy, message: `${below} / ${counted} upstreams with traffic have an error rate below ${limit * 100}%` };
    }
    case 'any:evm:eth_chainId':
    case 'all:evm:eth_chainId': {
      const results = await Promise.all(members.map((m) => probes.check(m)));
      const passed = results.filter(Boolean).length;
      const healthy = strategy.startsWith('any:') ? passed > 0 : passed === n;
      return { healthy, message: `${passed} / ${n} upstreams passed (${n - passed} failed)` };
    }
    case 'all:activeUpstreams': {
      const active = new Map<Network, Set<Upstream>>();
      let ok = 0;
      for (const m of members) {
        if (!m.network || !isInitialized(host, m, pollers)) continue;
        let set = active.get(m.network);
        if (!set) active.set(m.network, (set = activeOn(host, m.network)));
        if (set.has(m.upstream) && !project.health.isCordoned(m.upstream.id, '*')) ok++;
      }
      return ok === n
        ? { healthy: true, message: `all ${n} upstreams active` }
        : { healthy: false, message: `${ok} / ${n} upstreams active (initialized, not cordoned, not excluded)` };
    }
  }
}
