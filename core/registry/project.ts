/**
 * A project: its networks (by id and alias) and its upstreams (spec §1.2).
 */
import type { ResolvedProject } from '../../config/types.ts';
import { HealthTracker } from '../../lib/health-window.ts';
import { healthOutcome } from '../blame.ts';
import type { Network } from './network.ts';
import type { Upstream } from './upstream.ts';

/** One configured project. */
export class Project {
  readonly id: string;
  /** Networks by id (`evm:<chainId>`). */
  readonly networks = new Map<string, Network>();
  /** Networks by alias. */
  readonly aliases = new Map<string, Network>();
  /** Upstreams by id, in config order. */
  readonly upstreams = new Map<string, Upstream>();
  /** Health of this project's upstreams (issue #3 item 1): rolling scores and cordons. */
  readonly health: HealthTracker;
  private readonly order = new Map<Upstream, number>();

  /** @param config resolved project config */
  constructor(readonly config: ResolvedProject) {
    this.id = config.id;
    const windowMs = typeof config.settings.scoreMetricsWindowSize === 'number' ? config.settings.scoreMetricsWindowSize : 600_000;
    this.health = new HealthTracker(healthOutcome, windowMs);
  }

  /** Registers an upstream (config order is registration order). */
  addUpstream(u: Upstream): void {
    this.upstreams.set(u.id, u);
    this.order.set(u, this.order.size);
  }

  /** Position of an upstream in config order. */
  upstreamOrder(u: Upstream): number {
    return this.order.get(u) ?? Number.MAX_SAFE_INTEGER;
  }

  /** Registers a network under its id and alias. */
  addNetwork(n: Network): void {
    this.networks.set(n.id, n);
    if (n.alias) this.aliases.set(n.alias, n);
  }
}
