/**
 * Config hot reload (SIGHUP, `svc reload`, admin `svc_reloadConfig`): a validated config is reconciled with the running registry in place,
 * so nothing a client holds is dropped. Live, per project:
 * - upstreams: an unchanged one stays the same object (health, breakers, chain state, pooled connections); a removed one leaves every
 *   network at once (`upstreamLeft`) and is closed once its longest call could have ended (`server.maxTimeout` + 1 s); a changed one is
 *   added anew under its id (its cordons stay: they are the operator's), serving its predecessor's chain while its probe runs;
 * - networks whose config or upstreams changed are rebuilt; calls in flight finish on the old chain (`networkRetired`), the new one
 *   starts with known heads;
 * - `logLevel`.
 * Everything else (`server.*`, `metrics`, plugin keys, projects added or removed) is read once at start: a config that changes any of it
 * is refused whole, naming the keys, so nothing is ever half applied.
 */
import { isDeepStrictEqual } from 'node:util';
import type { ResolvedConfig, ResolvedProject } from '../../config/types.ts';
import { resolveNetwork } from '../../config/load.ts';
import type { Network } from '../registry/project.ts';
import type { Project } from '../registry/project.ts';
import { Upstream } from '../registry/upstream.ts';
import type { ProxyHooks, ReloadReport, ReloadTrigger } from '../pipeline/hooks.ts';
import type { RegistryBuilder } from '../pipeline/build.ts';
import type { Pool } from 'undici';
import type { TObject } from '@sinclair/typebox';
import type { Logger } from '../../lib/logger.ts';
import type { ServiceRegistry } from '../registry/services.ts';

import { leaveNetworks } from '../pipeline/probe.ts';
import { ErrReloadUnavailable } from '../wire/errors.ts';
import { ConfigError } from '../../config/load.ts';

export type { ReloadReport, ReloadTrigger } from '../pipeline/hooks.ts';

/** What a reload needs of the host (the proxy), by shape, so reload depends on no class of the host. */
export interface ReloadHost {
  readonly config: ResolvedConfig;
  readonly hooks: ProxyHooks;
  readonly logger: Logger;
  readonly services: ServiceRegistry;
  readonly schema: TObject;
  readonly projects: ReadonlyMap<string, Project>;
  readonly pools: Map<string, Pool>;
  readonly isClosed: boolean;
  /** Builds networks and upstreams into the registry, composing their chains. */
  readonly builder: Pick<RegistryBuilder, 'createNetwork' | 'addUpstream' | 'join' | 'upstreamOptions'>;
  probeNew(project: Project, u: Upstream): void;
  retireUpstream(u: Upstream, opts?: { keepCordons?: boolean }): void;
  replaceConfig(c: ResolvedConfig): void;
}

/** The reload side of a proxy: the config source, the reloads (one at a time), the upstreams a reload removed until they are closed. */
export class ConfigReloader {
  /** Reads and validates the config again (set by whoever started svc from a file: the CLI). */
  source?: (trigger: ReloadTrigger) => Promise<ResolvedConfig>;
  private running: Promise<unknown> = Promise.resolve();
  /** Removed upstreams not yet closed, with their close timers. */
  private readonly retiring = new Map<Upstream, NodeJS.Timeout>();

  /** @param proxy the proxy whose registry reloads change */
  constructor(private readonly proxy: ReloadHost) {}

  /**
   * Re-reads the config and applies it (see {@link applyReload}) after any reload still running.
   * @throws ConfigError (nothing changes), ErrReloadUnavailable (no source, or shutting down)
   */
  reload(trigger: ReloadTrigger): Promise<ReloadReport> {
    const load = this.source;
    if (!load) return Promise.reject(new ErrReloadUnavailable('this svc was not started with a config file: there is nothing to reload'));
    const proxy = this.proxy;
    const run = this.running.then(async () => {
      if (proxy.isClosed) throw new ErrReloadUnavailable('svc is shutting down');
      const next = await load(trigger);
      if (proxy.isClosed) throw new ErrReloadUnavailable('svc is shutting down');
      const report = applyReload(proxy, next);
      proxy.logger.info(report, report.changed ? 'config reloaded' : 'config reloaded: nothing changed');
      return report;
    });
    this.running = run.catch(() => undefined);
    return run;
  }

  /**
   * Takes an upstream out of service for good: it leaves its networks at once (`upstreamLeft`), its health window goes (its cordons too
   * unless `keepCordons`), and it is closed after `server.maxTimeout` + 1 s, when no call can still use it.
   */
  retire(u: Upstream, opts: { keepCordons?: boolean }): void {
    const proxy = this.proxy;
    const project = proxy.projects.get(u.projectId);
    u.state = 'failed';
    if (project) {
      leaveNetworks(proxy.hooks, project, u);
      project.removeUpstream(u);
      project.health.forget(u.id, opts.keepCordons);
    }
    const timer = setTimeout(() => {
      this.retiring.delete(u);
      u.close().catch(() => undefined);
      this.closeUnusedPool(u.config.endpoint);
    }, proxy.config.server.maxTimeoutMs + 1000);
    timer.unref();
    this.retiring.set(u, timer);
  }

  /** Closes the pool of a retired upstream's origin once no upstream uses that origin (pools are shared by origin). */
  private closeUnusedPool(endpoint: string): void {
    const origin = originOf(endpoint);
    if (origin === undefined) return;
    const proxy = this.proxy;
    for (const p of proxy.projects.values()) for (const u of p.upstreams.values()) if (originOf(u.config.endpoint) === origin) return;
    for (const u of this.retiring.keys()) if (originOf(u.config.endpoint) === origin) return;
    const pool = proxy.pools.get(origin);
    if (!pool) return;
    proxy.pools.delete(origin);
    pool.close().catch(() => undefined);
  }

  /** Closes the upstreams still draining (svc is closing). */
  async close(): Promise<void> {
    const all = [...this.retiring];
    this.retiring.clear();
    for (const [, t] of all) clearTimeout(t);
    await Promise.all(all.map(([u]) => u.close().catch(() => undefined)));
  }
}

/** The origin of an endpoint URL, or undefined. */
function originOf(endpoint: string): string | undefined {
  try {
    return new URL(endpoint).origin;
  } catch {
    return undefined;
  }
}

/** Root keys the reconciliation handles itself; every other root key is compared whole. */
const LIVE_ROOT = new Set(['projects', 'logLevel', 'warnings', 'server', 'metrics', 'settings']);

/** Paths (`<prefix>.<key>`) of the keys whose values differ between two records. */
function changedKeys(prefix: string, a: Readonly<Record<string, unknown>>, b: Readonly<Record<string, unknown>>, skip?: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (skip?.has(k)) continue;
    if (!isDeepStrictEqual(a[k], b[k])) out.push(prefix ? `${prefix}.${k}` : k);
  }
  return out;
}

/** Why a changed key is refused by a reload (the problem message). */
const RESTART_ONLY = 'changed: read only at start, so this file needs a restart (a reload applies changes to upstreams, networks and logLevel)';

/** The changed config paths read only at start: all but `logLevel` and the upstreams and networks of the projects present in both. */
export function restartOnlyChanges(prev: ResolvedConfig, next: ResolvedConfig): string[] {
  const out = [
    ...changedKeys('', prev as unknown as Record<string, unknown>, next as unknown as Record<string, unknown>, LIVE_ROOT),
    ...changedKeys('server', prev.server as unknown as Record<string, unknown>, next.server as unknown as Record<string, unknown>, new Set(['settings'])),
    // Plugin keys under `server` (websocket...), each by its own name.
    ...changedKeys('server', (prev.server.settings ?? {}) as Record<string, unknown>, (next.server.settings ?? {}) as Record<string, unknown>),
    ...changedKeys('metrics', prev.metrics as unknown as Record<string, unknown>, next.metrics as unknown as Record<string, unknown>),
    ...changedKeys('', prev.settings, next.settings),
  ];
  const before = new Map(prev.projects.map((p) => [p.id, p]));
  const after = new Map(next.projects.map((p) => [p.id, p]));
  // Plugins build per-project state (auth, CORS, rate-limit budgets, providers) at start.
  for (const id of before.keys()) if (!after.has(id)) out.push(`projects.${id} (removed)`);
  for (const [id, pc] of after) {
    const old = before.get(id);
    if (!old) {
      out.push(`projects.${id} (added)`);
      continue;
    }
    out.push(...changedKeys(`projects.${id}`, old.settings, pc.settings));
    if (old.allowClientDirectives !== pc.allowClientDirectives) out.push(`projects.${id}.allowClientDirectives`);
    // A providers project bootstraps its declared networks at start only.
    if (pc.settings.providers !== undefined) {
      const ids = (c: ResolvedProject) => String(c.networks.map((n) => n.id).sort());
      if (ids(old) !== ids(pc)) out.push(`projects.${id}.networks (a project with providers)`);
    }
  }
  return out;
}

/**
 * Applies a validated config to a running proxy, all or nothing: a config changing a key read only at start is refused whole, so no live
 * change depends on one that would wait for a restart (a network naming a new rate-limit budget).
 * @param next the new resolved config, after its `config` hooks ran (see `validateConfig`)
 * @returns what changed; `changed: false` when nothing did
 * @throws ConfigError listing every restart-only key that changed (nothing is applied)
 */
export function applyReload(proxy: ReloadHost, next: ResolvedConfig): ReloadReport {
  const t0 = performance.now();
  const prev = proxy.config;
  const pending = restartOnlyChanges(prev, next);
  if (pending.length > 0) throw new ConfigError(pending.map((path) => ({ path, message: RESTART_ONLY })));
  const report: ReloadReport = {
    changed: false,
    networks: { added: [], removed: [], changed: [] },
    upstreams: { added: [], removed: [], changed: [], kept: 0 },
    durationMs: 0,
  };
  if (next.logLevel !== prev.logLevel) {
    proxy.logger.level = next.logLevel;
    report.logLevel = next.logLevel;
  }
  const projects = next.projects.map((pc) => {
    const project = proxy.projects.get(pc.id);
    return project ? reconcileProject(proxy, project, pc, report) : pc;
  });
  proxy.replaceConfig({ ...prev, logLevel: next.logLevel, projects });
  const { networks: n, upstreams: u } = report;
  report.changed = report.logLevel !== undefined || [n.added, n.removed, n.changed, u.added, u.removed, u.changed].some((l) => l.length > 0);
  report.durationMs = Math.round((performance.now() - t0) * 100) / 100;
  proxy.hooks.reloaded.call(report);
  return report;
}

/**
 * Reconciles one project present before and after (its plugin keys unchanged: {@link restartOnlyChanges}).
 * @returns the project config now in force
 */
function reconcileProject(proxy: ReloadHost, project: Project, pc: ResolvedProject, report: ReloadReport): ResolvedProject {
  const old = project.config;
  const name = (id: string) => `${pc.id}/${id}`;

  // 1. Configured upstreams that go or change leave first (run-time ones, from providers, stay). Their networks are rebuilt: plugins
  //    decide things from a network's upstreams when they compose its chain (shadow copies, for one).
  const nextUp = new Map(pc.upstreams.map((uc) => [uc.id, uc]));
  const replaced = new Map<string, { order: number; chainId?: number }>();
  const touched = new Set<number>();
  for (const uc of old.upstreams) {
    const u = project.upstreams.get(uc.id);
    if (!u) continue;
    const now = nextUp.get(uc.id);
    if (now && isDeepStrictEqual(u.config, now)) continue;
    replaced.set(uc.id, { order: project.upstreamOrder(u), chainId: u.chainId });
    if (u.chainId !== undefined) touched.add(u.chainId);
    proxy.retireUpstream(u, { keepCordons: now !== undefined });
    (now ? report.upstreams.changed : report.upstreams.removed).push(name(uc.id));
  }
  for (const uc of pc.upstreams) {
    if (project.upstreams.has(uc.id)) continue;
    const chain = uc.chainId ?? replaced.get(uc.id)?.chainId;
    if (chain !== undefined) touched.add(chain);
  }

  // 2. Networks: declared ones by their config, on-demand ones by the network defaults; rebuilt too when their upstreams change.
  project.config = pc;
  const declared = new Map(pc.networks.map((nc) => [nc.id, nc]));
  for (const n of [...project.networks.values()]) {
    const nc =
      declared.get(n.id) ?? (n.declared ? undefined : resolveNetwork(proxy.schema, pc.networkDefaults, { architecture: 'evm', evm: { chainId: n.chainId } }));
    if (nc && n.declared === declared.has(n.id) && isDeepStrictEqual(n.config, nc) && !touched.has(n.chainId)) continue;
    const members = n.upstreams.slice();
    project.networks.delete(n.id);
    if (n.alias && project.aliases.get(n.alias) === n) project.aliases.delete(n.alias);
    if (nc) {
      const fresh = proxy.builder.createNetwork(project, nc, declared.has(n.id));
      joinSeeded(proxy, project, fresh, n, members);
      report.networks.changed.push(name(n.id));
    } else {
      report.networks.removed.push(name(n.id));
      // Upstreams serving that chain get an on-demand network from the defaults, as at start.
      for (const u of members) if (u.chainId !== undefined) proxy.builder.join(project, u, u.chainId);
    }
    proxy.hooks.networkRetired.call(n);
  }
  for (const nc of pc.networks) {
    if (project.networks.has(nc.id)) continue;
    const fresh = proxy.builder.createNetwork(project, nc, true);
    for (const u of project.upstreams.values())
      if (u.state !== 'failed' && (u.chainId ?? u.config.chainId) === nc.chainId) proxy.builder.join(project, u, nc.chainId);
    report.networks.added.push(name(fresh.id));
  }

  // 3. New and changed upstreams join in config order. A changed one without a configured chain id serves its predecessor's chain
  //    while its probe runs (which moves it if the chain differs), so the network never goes empty.
  for (const uc of pc.upstreams) {
    if (project.upstreams.has(uc.id)) {
      report.upstreams.kept++;
      continue;
    }
    const u = new Upstream(uc, project.id, proxy.builder.upstreamOptions());
    const was = replaced.get(uc.id);
    proxy.builder.addUpstream(project, u, was?.order);
    if (uc.chainId === undefined && was?.chainId !== undefined) {
      u.chainId = was.chainId;
      proxy.builder.join(project, u, was.chainId);
    }
    proxy.probeNew(project, u);
    if (!was) report.upstreams.added.push(name(uc.id));
  }
  project.reorder(pc.upstreams.map((uc) => uc.id));
  return pc;
}

/**
 * The upstreams of a replaced network join its successor; `networkReplaced` lets plugins carry per-network state over (evm-state's
 * known heads, so finality and block availability do not go blind until the next poll).
 */
function joinSeeded(proxy: ReloadHost, project: Project, fresh: Network, old: Network, members: readonly Upstream[]): void {
  for (const u of members) if (project.upstreams.get(u.id) === u) proxy.builder.join(project, u, fresh.chainId);
  proxy.hooks.networkReplaced.call(old, fresh);
}
