/**
 * Provider bootstrap (spec §2.10, §3.6, §8): for one (project, provider, chain) a task asks the
 * vendor for upstreams and adds them to the project. A failed task (the vendor threw, e.g. a
 * catalog it could not fetch) is retried in the background, 3 s after the first failure, then
 * ×1.5 each time up to 130 s. A vendor that answers an empty list has finished: that chain is
 * not served by this provider.
 */
import type { PluginHost, Project, UpstreamInput } from 'svc-proxy/plugin';
import { PROVIDER_ORIGIN, type Vendor, type VendorUpstream } from './api.ts';
import { backoffDelay, compileGlobs, type GlobTest } from 'svc-proxy/util';
import type { ProviderConfig } from './schema.ts';

/** First bootstrap retry delay, ms (spec §8). */
export const BOOTSTRAP_FIRST_RETRY_MS = 3000;
/** Bootstrap retry delay growth (spec §8). */
export const BOOTSTRAP_BACKOFF_FACTOR = 1.5;
/** Longest bootstrap retry delay, ms (spec §8). */
export const BOOTSTRAP_MAX_RETRY_MS = 130_000;

/**
 * Wait before the next bootstrap try of a provider task that failed `failures` times (spec §8):
 * 3 s, then ×1.5 per failure, at most 130 s.
 * @param failures failures so far (1 for the first retry)
 * @returns the delay, ms
 */
export function bootstrapRetryDelayMs(failures: number): number {
  return backoffDelay({ initialMs: BOOTSTRAP_FIRST_RETRY_MS, factor: BOOTSTRAP_BACKOFF_FACTOR, maxMs: BOOTSTRAP_MAX_RETRY_MS }, failures);
}

// Vendor, VendorUpstream: the providers service contract, in svc-proxy/plugin.
export type { Vendor, VendorUpstream } from './api.ts';

/**
 * A provider's network filter: `onlyNetworks` (unset or empty = every network) minus
 * `ignoreNetworks` (which wins when both name a network). eRPC refuses a provider with both
 * lists and matches ids exactly; svc's lists are globs, so both together mean "these, but not
 * those", and an exact id is a glob matching only itself.
 * @param p the provider
 * @returns whether the provider may serve a network id
 */
export function networkFilter(p: Pick<ProviderConfig, 'onlyNetworks' | 'ignoreNetworks'>): GlobTest {
  const only = p.onlyNetworks && p.onlyNetworks.length > 0 ? compileGlobs(p.onlyNetworks) : undefined;
  const ignore = p.ignoreNetworks && p.ignoreNetworks.length > 0 ? compileGlobs(p.ignoreNetworks) : undefined;
  return (networkId: string) => (!only || only(networkId)) && !(ignore && ignore(networkId));
}

/**
 * A generated upstream's id from the provider's template, as eRPC writes it: `<PROVIDER>` the
 * provider id, `<VENDOR>` its vendor, `<NETWORK>` the network id (`evm:1`), `<EVM_CHAIN_ID>` the
 * chain id alone (`1`).
 */
export function upstreamIdOf(template: string, p: Pick<ProviderConfig, 'id' | 'vendor'>, chainId: number): string {
  return template
    .replaceAll('<VENDOR>', p.vendor)
    .replaceAll('<PROVIDER>', p.id)
    .replaceAll('<NETWORK>', `evm:${chainId}`)
    .replaceAll('<EVM_CHAIN_ID>', String(chainId));
}

type TaskState = { kind: 'running'; promise: Promise<void> } | { kind: 'done'; offered: number } | { kind: 'failed'; failures: number; error: string };

/**
 * Most remembered "vendor does not serve this chain" answers per project. Chain ids come from
 * clients: past this, the oldest answers are forgotten (the vendor is asked again if that chain
 * is requested again), so random chain ids cannot grow memory without end.
 */
export const MAX_DECLINED_TASKS = 10_000;

/** The tasks of one project. */
export class ProjectBootstrap {
  private readonly tasks = new Map<string, TaskState>();
  /** Keys of tasks done with no upstream, oldest first (bounded by {@link MAX_DECLINED_TASKS}). */
  private readonly declinedKeys = new Set<string>();
  /** Pending background retries, by task key. */
  private readonly retries = new Map<string, NodeJS.Timeout>();
  private closed = false;
  /** Each provider's network filter, compiled once. */
  private readonly admits: ReadonlyMap<ProviderConfig, GlobTest>;

  constructor(
    private readonly host: PluginHost,
    private readonly project: Project,
    private readonly providers: readonly ProviderConfig[],
    private readonly vendors: ReadonlyMap<string, Vendor>,
  ) {
    this.admits = new Map(providers.map((p) => [p, networkFilter(p)]));
  }

  /** The providers whose `onlyNetworks` admit a network id and whose `ignoreNetworks` do not name it. */
  eligible(networkId: string): ProviderConfig[] {
    return this.providers.filter((p) => this.admits.get(p)?.(networkId) === true);
  }

  /** Starts the tasks of a chain that are not running or done; returns whether any is still running. */
  start(chainId: number): boolean {
    let running = false;
    for (const p of this.eligible(`evm:${chainId}`)) {
      const key = `${p.id}\0${chainId}`;
      const t = this.tasks.get(key);
      if (!t || (t.kind === 'failed' && !this.retries.has(key))) this.run(p, chainId, key, t?.kind === 'failed' ? t.failures : 0);
      if (this.tasks.get(key)?.kind === 'running') running = true;
    }
    return running;
  }

  /** Whether any task of a chain is still running. */
  running(chainId: number): boolean {
    return this.eligible(`evm:${chainId}`).some((p) => this.tasks.get(`${p.id}\0${chainId}`)?.kind === 'running');
  }

  /**
   * Why the failed tasks of a chain failed, one `provider <id>: <error>` entry each (empty when
   * none failed): what the first request is told when no provider produced an upstream.
   */
  failures(chainId: number): string[] {
    const out: string[] = [];
    for (const p of this.eligible(`evm:${chainId}`)) {
      const t = this.tasks.get(`${p.id}\0${chainId}`);
      if (t?.kind === 'failed') out.push(`provider ${p.id}: ${t.error}`);
    }
    return out;
  }

  /**
   * Why no provider serves a chain, once none is running or failed: one entry per provider whose
   * vendor offered no upstream for it (`provider <id> (vendor <v>) does not serve evm:<id>`) and
   * per provider whose `ignoreNetworks` excludes it. What the first request for an unserved chain
   * is told instead of a bare "not supported".
   */
  declined(chainId: number): string[] {
    const networkId = `evm:${chainId}`;
    const out: string[] = [];
    for (const p of this.providers) {
      if (!this.admits.get(p)?.(networkId)) {
        if (p.ignoreNetworks?.length && compileGlobs(p.ignoreNetworks)(networkId)) out.push(`provider ${p.id} ignores ${networkId} (ignoreNetworks)`);
        continue;
      }
      const t = this.tasks.get(`${p.id}\0${chainId}`);
      if (t?.kind === 'done' && t.offered === 0) out.push(`provider ${p.id} (vendor ${p.vendor}) does not serve ${networkId}`);
    }
    return out;
  }

  /** Stops background retries. */
  close(): void {
    this.closed = true;
    for (const t of this.retries.values()) clearTimeout(t);
    this.retries.clear();
  }

  /** Records a task done with no upstream, forgetting the oldest such beyond the cap. */
  private rememberDeclined(key: string): void {
    this.declinedKeys.delete(key);
    this.declinedKeys.add(key);
    if (this.declinedKeys.size <= MAX_DECLINED_TASKS) return;
    const oldest = this.declinedKeys.values().next().value as string;
    this.declinedKeys.delete(oldest);
    this.tasks.delete(oldest);
  }

  private run(p: ProviderConfig, chainId: number, key: string, failures: number): void {
    const vendor = this.vendors.get(p.vendor);
    if (!vendor) return;
    const promise = vendor
      .upstreamsFor(chainId, p.settings, { id: p.id, logger: this.host.logger })
      .then((list) => {
        this.add(p, chainId, list);
        this.tasks.set(key, { kind: 'done', offered: list.length });
        if (list.length === 0) this.rememberDeclined(key);
      })
      .catch((e: unknown) => {
        const n = failures + 1;
        this.tasks.set(key, { kind: 'failed', failures: n, error: (e as Error)?.message ?? String(e) });
        if (this.closed) return;
        const delay = bootstrapRetryDelayMs(n);
        this.host.logger.warn(
          { project: this.project.id, provider: p.id, chainId, err: (e as Error).message, retryInMs: Math.round(delay) },
          `provider ${p.id} could not bootstrap evm:${chainId}`,
        );
        const timer = setTimeout(() => {
          this.retries.delete(key);
          if (!this.closed) this.run(p, chainId, key, n);
        }, delay);
        timer.unref();
        this.retries.set(key, timer);
      });
    this.tasks.set(key, { kind: 'running', promise });
  }

  /** Adds a vendor's upstreams to the project (spec §2.10 ids; overrides by network glob). */
  private add(p: ProviderConfig, chainId: number, list: readonly VendorUpstream[]): void {
    const networkId = `evm:${chainId}`;
    const base = upstreamIdOf(p.upstreamIdTemplate, p, chainId);
    const overrides = Object.entries(p.overrides).filter(([glob]) => compileGlobs(glob)(networkId));
    list.forEach((v, i) => {
      const id = v.idSuffix !== undefined ? `${base}-${v.idSuffix}` : list.length > 1 ? `${base}-${i}` : base;
      const existing = this.project.upstreams.get(id);
      if (existing) {
        this.host.logger.error(
          { project: this.project.id, provider: p.id, upstream: id, existing: existing.id },
          `provider ${p.id} generated upstream id "${id}", which upstream "${existing.id}" already has: not added (docs/interface.md §2.10: provider id "public" is reserved)`,
        );
        return;
      }
      let entry: UpstreamInput = { id, endpoint: v.endpoint, vendorName: p.vendor, ...v.entry, evm: { ...(v.entry?.evm ?? {}), chainId } };
      for (const [, o] of overrides) {
        // `evm` and `jsonRpc` merge a level deeper, so an override's headers join the vendor's (an auth header) instead of replacing them.
        const jsonRpc =
          o.jsonRpc || entry.jsonRpc ? { jsonRpc: { ...entry.jsonRpc, ...o.jsonRpc, headers: { ...entry.jsonRpc?.headers, ...o.jsonRpc?.headers } } } : {};
        entry = { ...entry, ...o, id, endpoint: v.endpoint, evm: { ...(entry.evm ?? {}), ...((o.evm as object | undefined) ?? {}), chainId }, ...jsonRpc };
      }
      const u = this.host.addUpstreamFromConfig(this.project, entry);
      PROVIDER_ORIGIN.set(u, { id: p.id, vendor: p.vendor, settings: p.settings });
    });
  }
}
