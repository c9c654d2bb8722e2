/**
 * The chain-state side of shared heads: how a head read from Redis is matched to this replica's
 * upstream (project id + upstream id), judged by its chain state and applied to it, and which
 * heads this replica observed itself (what it publishes). index.ts wires these to Redis.
 */
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { CHAIN_STATE_SERVICE, networkChainState } from 'svc-proxy/plugins/evm-state';
import type { HeadContext, HeadLedger, SharedHead } from './merge.ts';

/** What {@link headBridge} returns: the chain-state side of the heads index.ts moves through Redis. */
export interface HeadBridge {
  /** The plausibility context heads read from Redis are checked with (merge.ts `headsToApply`). */
  readonly context: HeadContext;
  /** Applies heads read from Redis to this replica's chain state and records them in the ledger. */
  apply(heads: SharedHead[]): void;
  /** The heads this replica's own chain state holds, every serving upstream with a head. */
  local(): Generator<SharedHead>;
}

/** Every serving upstream of every project with its network. */
function* upstreamsOf(host: PluginHost): Generator<{ network: Network; upstream: Upstream }> {
  for (const project of host.projects.values()) {
    for (const network of project.networks.values()) {
      for (const upstream of network.upstreams) yield { network, upstream };
    }
  }
}

/**
 * The chain-state side of shared heads for one plugin instance.
 * @param host the plugin host (projects, services, chain state)
 * @param ledger what was learned and published (merge.ts), updated as heads are applied
 */
export function headBridge(host: PluginHost, ledger: HeadLedger): HeadBridge {
  const find = (project: string, upstream: string): { network: Network; upstream: Upstream } | undefined => {
    const p = host.projects.get(project);
    const u = p?.upstreams.get(upstream);
    if (!p || !u) return undefined;
    for (const network of p.networks.values()) if (network.upstreams.includes(u)) return { network, upstream: u };
    return undefined;
  };
  // The same plausibility rule as this replica's own polls: a head another replica (or
  // anything that writes to Redis) reports moves nothing it would not move here.
  const context: HeadContext = {
    known: (h) => {
      const at = find(h.project, h.upstream);
      if (!at) return undefined;
      const s = networkChainState(host, at.network).peek(at.upstream);
      return { latest: s?.latest ?? 0, finalized: s?.finalized ?? 0 };
    },
    judge: (h, n, kind) => {
      const at = find(h.project, h.upstream);
      // Judged with no reporting upstream: another replica's word is no upstream's own report
      // (so never a sole source), and this replica's own view of that upstream is a witness.
      return at ? networkChainState(host, at.network).judgeHead(n, kind, undefined, true) : 'implausible';
    },
  };
  const apply = (heads: SharedHead[]): void => {
    const service = host.services.get(CHAIN_STATE_SERVICE);
    for (const h of heads) {
      const at = find(h.project, h.upstream);
      if (!at) continue;
      service?.observeShared?.(at.network, at.upstream, h.latest, h.finalized);
      ledger.learned(h);
    }
  };
  const local = function* (): Generator<SharedHead> {
    for (const { network, upstream } of upstreamsOf(host)) {
      const s = networkChainState(host, network).peek(upstream);
      if (s && (s.latest > 0 || s.finalized > 0)) yield { project: upstream.projectId, upstream: upstream.id, latest: s.latest, finalized: s.finalized };
    }
  };
  return { context, apply, local };
}
