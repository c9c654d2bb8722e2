/**
 * The chain id re-check of the evm-state plugin (spec §1.2, docs/evm.md "Chain id re-check"): the
 * registration probe checks `eth_chainId` once, but a provider's load balancer may later route to
 * a node of another network. Each state poll asks `eth_chainId` again; an upstream whose answer
 * differs from the chain it was verified on leaves every network at once (`leaveNetworks`, as the
 * registration probe's wrong-chain case), with an error log line and
 * `svc_upstream_chain_changed_total`, and any answer of it still in flight is refused (the
 * `validate` tap in tip.ts), so nothing it says after the detection is served or cached.
 */
import { Counter } from 'prom-client';
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { ErrEndpointMissingData } from 'svc-proxy/plugin/errors';
import { leaveNetworks } from 'svc-proxy/plugin/contracts';

/**
 * An answer from an upstream taken out of service because its chain id changed (or any other
 * failed upstream). Retryable (-32014, extends {@link ErrEndpointMissingData}): the call moves
 * on to another upstream, and the answer is neither served nor cached.
 */
export class ErrUpstreamChainChanged extends ErrEndpointMissingData {}

/**
 * Upstreams taken out of service because their chain id changed: their answers still in flight
 * are refused (a reload's retirement also fails an upstream, but lets its calls finish).
 */
const CHANGED = new WeakSet<Upstream>();

/** Whether an upstream was taken out of service because its chain id changed. */
export function chainChanged(u: Upstream): boolean {
  return u.state === 'failed' && CHANGED.has(u);
}

/** What the pollers need to act on a changed chain id. */
export interface ChainIdCheck {
  /**
   * Compares an upstream's `eth_chainId` answer with the chain it was verified on; on a mismatch
   * takes it out of service. An unreadable answer changes nothing (the next poll asks again).
   * @param network the network the upstream serves
   * @param u the upstream
   * @param answer the `eth_chainId` result as answered
   * @returns true when the upstream was taken out of service
   */
  check(network: Network, u: Upstream, answer: unknown): boolean;
}

/** Reads an `eth_chainId` answer (hex quantity); undefined when it is not one. */
export function chainIdOf(answer: unknown): number | undefined {
  if (typeof answer !== 'string' || !/^0x[0-9a-fA-F]{1,15}$/.test(answer)) return undefined;
  const n = Number.parseInt(answer, 16);
  return n > 0 ? n : undefined;
}

/**
 * Registers `svc_upstream_chain_changed_total` and returns the re-check.
 * @param host the plugin host the evm-state plugin is applied to
 */
export function chainIdCheck(host: PluginHost): ChainIdCheck {
  const changed = new Counter({
    name: 'svc_upstream_chain_changed_total',
    help: 'Upstreams taken out of service because their eth_chainId answer changed after the registration probe',
    labelNames: ['project', 'network', 'upstream'],
    registers: [host.metrics],
  });
  return {
    check(network, u, answer) {
      const got = chainIdOf(answer);
      const expected = u.chainId ?? u.config.chainId;
      if (got === undefined || expected === undefined || got === expected || u.state === 'failed') return false;
      u.state = 'failed';
      CHANGED.add(u);
      leaveNetworks(host.hooks, network.project, u);
      changed.inc({ project: network.project.id, network: network.id, upstream: u.id });
      host.logger.error(
        { project: network.project.id, network: network.id, upstream: u.id, expected, actual: got },
        `upstream ${u.id} now serves chain ${got}, not ${expected}: taken out of service`,
      );
      return true;
    },
  };
}
