/** The chain id probe (spec §1.2): a verified upstream joins its chain's network; one whose configured chain id differs is taken out of service. */
import { backoffDelay } from '../../lib/backoff.ts';
import type { RegistryBuilder } from './build.ts';
import { excerptOf } from '../../lib/redact.ts';
import type { Logger } from '../../lib/logger.ts';
import type { ProxyHooks } from './hooks.ts';
import type { Project } from '../registry/project.ts';
import { DeadlineReason, type Upstream } from '../registry/upstream.ts';

/** Timeout of one probe, ms. */
const PROBE_TIMEOUT_MS = 5000;
/** Longest wait between two probes of an upstream, ms. */
const MAX_BACKOFF_MS = 30_000;

/** Takes an upstream out of its project's networks (or only the one named), calling `upstreamLeft` for each. */
export function leaveNetworks(hooks: ProxyHooks, project: Project, u: Upstream, only?: string): void {
  for (const n of project.networks.values()) {
    if (only !== undefined && n.id !== only) continue;
    if (n.removeUpstream(u)) hooks.upstreamLeft.call(u, n);
  }
}

/** What the prober needs from its proxy. */
export interface ProberHost {
  readonly hooks: ProxyHooks;
  readonly logger: Logger;
  readonly projects: ReadonlyMap<string, Project>;
  readonly isClosed: boolean;
  /** Joins a verified upstream to the network of its chain. */
  readonly builder: Pick<RegistryBuilder, 'join'>;
}

/** Probes upstreams' chain ids; owns the retry timers. */
export class ChainIdProber {
  private readonly timers = new Set<NodeJS.Timeout>();

  /** @param backoffMs first retry delay, ms (doubles per failure, capped at 30 s) */
  constructor(
    private readonly host: ProberHost,
    private readonly backoffMs: number,
  ) {}

  /** Verifies an upstream's chain id with `eth_chainId`, retried with backoff until it answers. */
  probe(project: Project, u: Upstream, tries = 0): void {
    const host = this.host;
    if (host.isClosed) return;
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(new DeadlineReason('chain id probe timed out')), PROBE_TIMEOUT_MS);
    u.transport('eth_chainId', [], ac.signal)
      .then((r) => {
        clearTimeout(t);
        const got = typeof r.result === 'string' ? Number.parseInt(r.result, 16) : Number.NaN;
        if (!Number.isSafeInteger(got) || got <= 0)
          throw new Error(`eth_chainId answered ${excerptOf(u.redactor, JSON.stringify(r.result) ?? 'undefined', 100)}`);
        // Removed by a config reload meanwhile: nothing to join.
        if (project.upstreams.get(u.id) !== u || host.projects.get(project.id) !== project) return;
        if (u.config.chainId !== undefined && got !== u.config.chainId) {
          u.state = 'failed';
          leaveNetworks(host.hooks, project, u);
          host.logger.error(
            { project: project.id, upstream: u.id, configured: u.config.chainId, actual: got },
            `upstream ${u.id} serves chain ${got}, not the configured ${u.config.chainId}: taken out of service`,
          );
          return;
        }
        // A replaced upstream serves its predecessor's chain while probed (core/host/reload.ts): another chain moves it.
        const provisional = u.config.chainId === undefined ? u.chainId : undefined;
        if (provisional !== undefined && provisional !== got) leaveNetworks(host.hooks, project, u, `evm:${provisional}`);
        u.chainId = got;
        u.state = 'ready';
        host.builder.join(project, u, got);
        host.logger.info({ project: project.id, upstream: u.id, chainId: got }, `upstream ${u.id} verified on evm:${got}`);
      })
      .catch((e: unknown) => {
        clearTimeout(t);
        if (host.isClosed || u.state === 'failed') return;
        u.probeFailures++;
        const delay = backoffDelay({ initialMs: this.backoffMs, factor: 2, maxMs: MAX_BACKOFF_MS }, Math.min(tries, 10) + 1);
        host.logger.warn({ project: project.id, upstream: u.id, err: (e as Error).message, retryInMs: delay }, `upstream ${u.id} chain id probe failed`);
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          this.probe(project, u, tries + 1);
        }, delay);
        timer.unref();
        this.timers.add(timer);
      });
  }

  /** Stops every pending retry. */
  stop(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
