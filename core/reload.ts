/**
 * Config hot reload (SIGHUP, `svc reload`, admin `svc_reloadConfig`): a new, already validated
 * config is reconciled with the running registry in place, so nothing a client holds is dropped.
 *
 * What is applied live, per project present before and after:
 * - upstreams: an upstream whose resolved config is unchanged is kept as the same object, so its
 *   health window, scores, circuit breakers, chain state and pooled connections stay; a removed
 *   one leaves every network at once (`upstreamLeft`), finishes its in-flight calls and is closed
 *   once the longest call could have ended (`server.maxTimeout` + 1 s); a changed one is removed
 *   and added anew under its id (its cordons stay: they are the operator's, by id);
 * - networks: a network whose resolved config changed (failsafe, selection policy, finality…) is
 *   replaced by a new one with its chain built anew; calls in flight finish on the old chain
 *   (`networkRetired`), its upstreams join the new one with the heads already known;
 * - projects added or removed as a whole; `logLevel`.
 * Everything else (listen addresses, `server.*`, `metrics`, top-level plugin keys such as `cache`,
 * `rateLimiters`, `sharedState`, and a project's own plugin keys such as `auth` or `providers`) is
 * read once at start by the plugins that own it: a change there is reported as pending a restart,
 * never half applied.
 */
import { isDeepStrictEqual } from 'node:util';
import type { ResolvedConfig, ResolvedNetwork, ResolvedProject } from '../config/types.ts';
import { resolveNetwork } from '../config/load.ts';
import { CHAIN_STATE_SERVICE } from './chain-state.ts';
import type { Network } from './registry/network.ts';
import type { Project } from './registry/project.ts';
import { Upstream } from './registry/upstream.ts';
import type { Proxy } from './proxy.ts';
import { ErrReloadUnavailable } from './errors.ts';

/** What a reload changed (the answer of `svc_reloadConfig`, logged on SIGHUP). */
export interface ReloadReport {
  /** Whether anything was applied live. */
  changed: boolean;
  /** Project ids added and removed. */
  projects: { added: string[]; removed: string[] };
  /** Networks as `<project>/<network id>`: added, removed, replaced because their config changed. */
  networks: { added: string[]; removed: string[]; changed: string[] };
  /**
   * Upstreams as `<project>/<upstream id>`: added, removed (draining), changed (replaced under
   * the same id); `kept` counts those that kept their state and connections.
   */
  upstreams: { added: string[]; removed: string[]; changed: string[]; kept: number };
  /** The new log level, when it changed. */
  logLevel?: string;
  /** Config paths that changed but are read only at start: they apply at the next restart. */
  pendingRestart: string[];
  /** Time the swap took, ms (validation not included). */
  durationMs: number;
}

/**
 * The reload side of a proxy: where the config is read from, the reloads (one at a time), and
 * the upstreams a reload removed until they are closed.
 */
export class ConfigReloader {
  /** Reads and validates the config again (set by whoever started svc from a file: the CLI). */
  source?: () => Promise<ResolvedConfig>;
  /** The reload running now: reloads run one after the other. */
  private running: Promise<unknown> = Promise.resolve();
  /** Removed upstreams not yet closed, with their close timers. */
  private readonly retiring = new Map<Upstream, NodeJS.Timeout>();

  /** @param proxy the proxy whose registry reloads change */
  constructor(private readonly proxy: Proxy) {}

  /**
   * Re-reads the config and applies it (see {@link applyReload}), after any reload still running.
   * @throws ConfigError (nothing changes), ErrReloadUnavailable (no source, or shutting down)
   */
  reload(): Promise<ReloadReport> {
    const load = this.source;
    if (!load) return Promise.reject(new ErrReloadUnavailable('this svc was not started with a config file: there is nothing to reload'));
    const proxy = this.proxy;
    const run = this.running.then(async () => {
      if (proxy.isClosed) throw new ErrReloadUnavailable('svc is shutting down');
      const next = await load();
      if (proxy.isClosed) throw new ErrReloadUnavailable('svc is shutting down');
      const report = await applyReload(proxy, next);
      proxy.logger.info({ ...report, pendingRestart: report.pendingRestart.length ? report.pendingRestart : undefined }, report.changed ? 'config reloaded' : 'config reloaded: nothing changed that applies live');
      if (report.pendingRestart.length) proxy.logger.warn({ pendingRestart: report.pendingRestart }, 'config reload: these keys changed but apply only at the next restart');
      return report;
    });
    this.running = run.catch(() => undefined);
    return run;
  }

  /**
   * Takes an upstream out of service for good: it leaves every network of its project at once
   * (`upstreamLeft`), its probe stops, its health window is dropped (its cordons too unless
   * `keepCordons`), and it is closed after `server.maxTimeout` + 1 s, when every call that could
   * still use it has ended.
   */
  retire(u: Upstream, opts: { keepCordons?: boolean }): void {
    const proxy = this.proxy;
    const project = proxy.projects.get(u.projectId);
    u.state = 'failed';
    if (project) {
      for (const n of project.networks.values()) {
        if (!n.upstreams.includes(u)) continue;
        n.removeUpstream(u);
        proxy.hooks.upstreamLeft.call(u, n);
      }
      project.removeUpstream(u);
      project.health.forget(u.id, opts.keepCordons);
    }
    const timer = setTimeout(() => {
      this.retiring.delete(u);
      u.close().catch(() => undefined);
    }, proxy.config.server.maxTimeoutMs + 1000);
    timer.unref();
    this.retiring.set(u, timer);
  }

  /** Closes the upstreams still draining (svc is closing). */
  async close(): Promise<void> {
    const all = [...this.retiring];
    this.retiring.clear();
    for (const [, t] of all) clearTimeout(t);
    await Promise.all(all.map(([u]) => u.close().catch(() => undefined)));
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

/** A new, empty report. */
function emptyReport(): ReloadReport {
  return { changed: false, projects: { added: [], removed: [] }, networks: { added: [], removed: [], changed: [] }, upstreams: { added: [], removed: [], changed: [], kept: 0 }, pendingRestart: [], durationMs: 0 };
}

/**
 * Applies a validated config to a running proxy (see the module comment for what is live).
 * @param proxy the running proxy
 * @param next the new resolved config, after its `config` hooks ran (see `validateConfig`)
 * @returns what changed; `changed: false` and an empty report when the config is the same
 */
export async function applyReload(proxy: Proxy, next: ResolvedConfig): Promise<ReloadReport> {
  const t0 = performance.now();
  const prev = proxy.config;
  const report = emptyReport();
  report.pendingRestart.push(
    ...changedKeys('', prev as unknown as Record<string, unknown>, next as unknown as Record<string, unknown>, LIVE_ROOT),
    ...changedKeys('server', prev.server as unknown as Record<string, unknown>, next.server as unknown as Record<string, unknown>, new Set(['settings'])),
    // Plugin keys under `server` (websocket...), each by its own name.
    ...changedKeys('server', (prev.server.settings ?? {}) as Record<string, unknown>, (next.server.settings ?? {}) as Record<string, unknown>),
    ...changedKeys('metrics', prev.metrics as unknown as Record<string, unknown>, next.metrics as unknown as Record<string, unknown>),
    ...changedKeys('', prev.settings, next.settings),
  );
  if (next.logLevel !== prev.logLevel) {
    proxy.logger.level = next.logLevel;
    report.logLevel = next.logLevel;
  }

  const prevIds = new Set(prev.projects.map((p) => p.id));
  const projects: ResolvedProject[] = [];
  for (const pc of next.projects) {
    const project = proxy.projects.get(pc.id);
    if (!project || !prevIds.has(pc.id)) {
      await proxy.addProject(pc);
      report.projects.added.push(pc.id);
      projects.push(pc);
      continue;
    }
    projects.push(reconcileProject(proxy, project, pc, report));
  }
  const nextIds = new Set(next.projects.map((p) => p.id));
  for (const id of prevIds) {
    const project = proxy.projects.get(id);
    if (nextIds.has(id) || !project) continue;
    proxy.projects.delete(id);
    for (const n of project.networks.values()) retireNetwork(proxy, n);
    for (const u of project.upstreams.values()) proxy.retireUpstream(u);
    report.projects.removed.push(id);
  }

  proxy.replaceConfig({ ...prev, logLevel: next.logLevel, projects });
  report.changed = report.logLevel !== undefined || report.projects.added.length + report.projects.removed.length + report.networks.added.length + report.networks.removed.length + report.networks.changed.length + report.upstreams.added.length + report.upstreams.removed.length + report.upstreams.changed.length > 0;
  report.durationMs = Math.round((performance.now() - t0) * 100) / 100;
  proxy.hooks.reloaded.call(report);
  return report;
}

/**
 * Reconciles one project present before and after.
 * @returns the project config now in force (the project's own plugin keys stay as started)
 */
function reconcileProject(proxy: Proxy, project: Project, pc: ResolvedProject, report: ReloadReport): ResolvedProject {
  const old = project.config;
  const settingsChanged = changedKeys(`projects.${pc.id}`, old.settings, pc.settings);
  report.pendingRestart.push(...settingsChanged);
  if (old.allowClientDirectives !== pc.allowClientDirectives) report.pendingRestart.push(`projects.${pc.id}.allowClientDirectives`);
  const inForce: ResolvedProject = { ...pc, settings: settingsChanged.length ? old.settings : pc.settings, allowClientDirectives: old.allowClientDirectives };
  const name = (id: string) => `${pc.id}/${id}`;

  // 1. Upstreams of the old config that go or change leave first (upstreams added at run time,
  //    by providers, are not in the config and stay).
  const nextUp = new Map(pc.upstreams.map((uc) => [uc.id, uc]));
  const replaced = new Map<string, number>();
  for (const uc of old.upstreams) {
    const u = project.upstreams.get(uc.id);
    if (!u) continue;
    const now = nextUp.get(uc.id);
    if (now && isDeepStrictEqual(u.config, now)) continue;
    replaced.set(uc.id, project.upstreamOrder(u));
    proxy.retireUpstream(u, { keepCordons: now !== undefined });
    (now ? report.upstreams.changed : report.upstreams.removed).push(name(uc.id));
  }

  // 2. Networks: the declared ones by their config, the on-demand ones by the network defaults.
  project.config = inForce;
  const declared = new Map(pc.networks.map((nc) => [nc.id, nc]));
  for (const n of [...project.networks.values()]) {
    const nc = declared.get(n.id) ?? (n.declared ? undefined : resolveNetwork(proxy.schema, pc.networkDefaults, { architecture: 'evm', evm: { chainId: n.chainId } }));
    if (nc && n.declared === declared.has(n.id) && isDeepStrictEqual(n.config, nc)) continue;
    const members = n.upstreams.slice();
    project.networks.delete(n.id);
    if (n.alias && project.aliases.get(n.alias) === n) project.aliases.delete(n.alias);
    if (nc) {
      const fresh = proxy.createNetwork(project, nc, declared.has(n.id));
      joinSeeded(proxy, project, fresh, n, members);
      report.networks.changed.push(name(n.id));
    } else {
      report.networks.removed.push(name(n.id));
      // Upstreams serving that chain get an on-demand network from the defaults, as at start.
      for (const u of members) if (u.chainId !== undefined) proxy.join(project, u, u.chainId);
    }
    retireNetwork(proxy, n);
  }
  for (const nc of pc.networks) {
    if (project.networks.has(nc.id)) continue;
    const fresh = proxy.createNetwork(project, nc, true);
    for (const u of project.upstreams.values()) if (u.state !== 'failed' && (u.chainId ?? u.config.chainId) === nc.chainId) proxy.join(project, u, nc.chainId);
    report.networks.added.push(name(fresh.id));
  }

  // 3. New and changed upstreams join (a changed one keeps its place in config order).
  for (const uc of pc.upstreams) {
    if (project.upstreams.has(uc.id)) {
      report.upstreams.kept++;
      continue;
    }
    const u = new Upstream(uc, project.id, { shared: proxy.pools });
    proxy.addUpstream(project, u, replaced.get(uc.id));
    proxy.probeNew(project, u);
    if (!replaced.has(uc.id)) report.upstreams.added.push(name(uc.id));
  }
  project.reorder(pc.upstreams.map((uc) => uc.id));
  return inForce;
}

/**
 * The upstreams of a replaced network join its successor, which starts with the heads the old
 * one knew (so finality and block availability do not go blind until the next poll).
 */
function joinSeeded(proxy: Proxy, project: Project, fresh: Network, old: Network, members: readonly Upstream[]): void {
  const chain = proxy.services.get(CHAIN_STATE_SERVICE);
  const known = proxy.chainState(old);
  for (const u of members) {
    if (!project.upstreams.has(u.id) || project.upstreams.get(u.id) !== u) continue;
    proxy.join(project, u, fresh.chainId);
    const s = known.peek(u);
    if (s && chain?.observeShared) chain.observeShared(fresh, u, s.latest, s.finalized);
  }
}

/** Tells plugins a network is gone (its in-flight calls finish on its chain). */
function retireNetwork(proxy: Proxy, n: Network): void {
  proxy.hooks.networkRetired.call(n);
}

export type { ResolvedNetwork };
