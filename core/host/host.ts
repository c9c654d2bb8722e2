/**
 * The plugin contract (docs/architecture.md): what a plugin declares, what it is handed, the boot checks. A plugin sees only this surface
 * (through `svc-proxy/plugin`), never the `Proxy` class, so a second installed copy of svc or a refactor of the core cannot break it.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Registry } from 'prom-client';
import semver from 'semver';
import type { CallContext, HttpRequestInfo } from '../pipeline/context.ts';
import type { Context as KoaContext } from 'koa';
import type { ProxyHooks, ReloadReport } from '../pipeline/hooks.ts';
import type { RpcResult } from '../wire/jsonrpc.ts';
import type { BoundedLabel } from '../../lib/labels.ts';
import type { Logger } from '../../lib/logger.ts';
import type { SchemaFragment } from '../../config/schema.ts';
import type { ResolvedConfig, UpstreamInput } from '../../config/types.ts';
import type { LifecycleState, LifecycleStatus } from '../http/drain.ts';
import type { Network } from '../registry/project.ts';
import type { Project } from '../registry/project.ts';
import type { Upstream } from '../registry/upstream.ts';
import type { RouteTarget } from '../http/routing.ts';
import type { JsonRpcInput, JsonRpcOutput } from '../http/serve.ts';
import { PluginContractError, type AnyServiceKey, type ServiceKey, type ServiceRegistry } from '../registry/services.ts';

export { PluginContractError, ServiceKey, serviceKey, type AnyServiceKey, type ServiceRegistry } from '../registry/services.ts';

/** A plugin: in `apply` it taps hooks and registers metrics and services; it reads config from the `configured` hook on. */
export interface Plugin {
  /** Unique name among the applied plugins; also the tap name and the `plugin` metric label. */
  readonly name: string;
  /** The plugin's own version (semver), shown in boot errors. */
  readonly version?: string;
  /** The svc versions this plugin works with (a semver range such as `^0.1`); boot fails naming both versions outside it. */
  readonly svc?: string;
  /** Config keys this plugin owns, merged into the one config schema; a key owned by the core or another plugin fails boot. */
  readonly schema?: SchemaFragment;
  /** Plugins that must be applied before this one (checked at boot, fastify-style). */
  readonly dependsOn?: readonly string[];
  /** The services this plugin publishes in `apply`; boot fails naming the plugin and the key when one is unpublished once `apply` returned. */
  readonly provides?: readonly AnyServiceKey[];
  /**
   * The services this plugin `require`s, checked once every plugin is applied (boot fails naming the plugin, the key and its usual
   * provider). A plugin reading one inside `apply` also lists its provider in `dependsOn`.
   */
  readonly needs?: readonly AnyServiceKey[];
  /**
   * Taps hooks, registers metrics, routes and services; called once at boot, before any config hook ran (read `host.config` later).
   * @throws anything: boot fails with the plugin's name
   */
  apply(host: PluginHost): void;
}

/** Where a plugin's listeners should bind when a test or the CLI overrides config. */
export interface ListenOverrides {
  /** Proxy port override (tests use 0). */
  port?: number;
  /** Proxy host override. */
  host?: string;
  /** Metrics port override (tests use 0). */
  metricsPort?: number;
}

/** What a plugin is handed in `apply`: everything a plugin may reach of a running svc goes through here. */
export interface PluginHost {
  /** The typed hook registry (frozen). */
  readonly hooks: ProxyHooks;
  /**
   * The resolved config, after every `config` hook ran.
   * @throws PluginContractError when read inside `apply` (too early: other plugins may still derive config)
   */
  readonly config: ResolvedConfig;
  /** svc's logger (pino): no per-call logging at info level. */
  readonly logger: Logger;
  /** The Prometheus registry served at `/metrics`. */
  readonly metrics: Registry;
  /** The shared, bounded `category` (method) label (200 methods, 64 characters each). */
  readonly methodLabel: BoundedLabel;
  /** svc's version (spec §9). */
  readonly version: string;
  /** Projects by id (filled when the server starts). */
  readonly projects: ReadonlyMap<string, Project>;
  /** Listen overrides given to this svc (CLI, tests). */
  readonly overrides: ListenOverrides;
  /** True once shutdown began. */
  readonly isClosed: boolean;
  /** Where the proxy is in its life (spec §3.2): `serving`, `draining` (healthcheck 503), `closing` (new requests refused), `stopped`. */
  readonly lifecycle: LifecycleState;
  /** The drain's live read-only view: state, HTTP requests in flight, drain start (unix ms); the metrics plugin exports it (spec §6). */
  readonly lifecycleStatus: LifecycleStatus;
  /** Services plugins publish to each other. */
  readonly services: ServiceRegistry;
  /** A call context for internal traffic (state polls, healthchecks). @param timeoutMs deadline of the call, ms */
  internalContext(network: Network, method: string, params: unknown, timeoutMs: number): { ctx: CallContext; done: () => void };
  /**
   * Sends one internal call through one upstream's own chain (never swept or hedged).
   * @param timeoutMs deadline, ms
   * @throws SvcError the normalised upstream error
   */
  upstreamCall(network: Network, u: Upstream, method: string, params: unknown, timeoutMs: number): Promise<RpcResult>;
  /**
   * Runs a call through its network's `call` chain as a client call runs (a plugin's sub-call, an internal call from {@link internalContext}).
   * @returns the result; rejects with the chain's SvcError
   */
  runCall(ctx: CallContext): Promise<RpcResult>;
  /**
   * Adds an upstream to a project at run time (providers): defaults applied, chain composed, joined to its network when `evm.chainId` is set.
   * @param entry a raw upstream entry, as in config
   * @throws Error when the project already has an upstream with that id
   */
  addUpstreamFromConfig(project: Project, entry: UpstreamInput): Upstream;
  /** The request facts a plugin route needs for auth: headers, first query values, client address (`server.trustedIPForwarders`) as on the proxy path. */
  requestInfo(k: KoaContext): HttpRequestInfo;
  /** {@link requestInfo} of a plain Node request (a WebSocket upgrade, spec §4.1), with the host without port and the path. */
  requestInfoOf(req: IncomingMessage): HttpRequestInfo;
  /**
   * The project and network a path names as the HTTP server routes it (spec §4.1): `/<project>/evm/<chainId>`, `/<project>/<alias>`,
   * `/<project>`, or through `server.aliasing.rules` on the Host.
   * @param path the URL path (no query)
   * @param host the Host header, lower-cased, without port
   * @throws ErrProjectNotFound or ErrNetworkNotSupported (HTTP 404); ErrInvalidRequest on a malformed path
   */
  resolveRoute(path: string, host: string): Promise<RouteTarget>;
  /** Serves a JSON-RPC body for a plugin's transport (WebSocket) as an HTTP POST is served (spec §4.2); refusals as JSON-RPC errors. Never rejects. */
  serveJsonRpc(input: JsonRpcInput): Promise<JsonRpcOutput>;
  /** The listening HTTP server once started (plugins add `upgrade` handlers from the `listening` hook on). */
  readonly httpServer: Server | undefined;
  /**
   * Re-reads the config and swaps in what changed without dropping a call (core/host/reload.ts says what applies live); one at a time.
   * @returns what changed, and the keys that apply only at the next restart
   * @throws ConfigError with every problem, as `svc validate` prints them (nothing changes)
   * @throws ErrReloadUnavailable when svc was not started from a config file, or is shutting down
   */
  reloadConfig(): Promise<ReloadReport>;
}

/** Thrown at boot when a plugin's dependency is missing (fastify-style); its own class for callers that catch it by name. */
export class PluginDependencyError extends PluginContractError {
  constructor(plugin: string, missing: string) {
    super(`plugin "${plugin}" depends on "${missing}", which is not applied before it`);
    this.name = 'PluginDependencyError';
  }
}

/**
 * Checks a plugin against the `applied` names before it: a unique name, a valid version, an svc range `svcVersion` satisfies, its
 * dependencies present, `provides` and `needs` lists of service keys.
 * @throws PluginContractError naming the plugin and what is wrong
 */
export function checkPlugin(p: Plugin, applied: ReadonlySet<string>, svcVersion: string): void {
  if (typeof p.name !== 'string' || p.name === '') throw new PluginContractError('a plugin has no name');
  if (applied.has(p.name)) throw new PluginContractError(`plugin "${p.name}" is applied twice (plugin names must be unique)`);
  if (p.version !== undefined && semver.valid(p.version) === null)
    throw new PluginContractError(`plugin "${p.name}" has an invalid version "${p.version}" (semver expected)`);
  if (p.svc !== undefined) {
    if (semver.validRange(p.svc) === null) throw new PluginContractError(`plugin "${p.name}" declares an invalid svc range "${p.svc}"`);
    if (!semver.satisfies(svcVersion, p.svc, { includePrerelease: true })) {
      throw new PluginContractError(`plugin "${p.name}"${p.version ? ` ${p.version}` : ''} needs svc ${p.svc}, but this is svc ${svcVersion}`);
    }
  }
  for (const d of p.dependsOn ?? []) if (!applied.has(d)) throw new PluginDependencyError(p.name, d);
  for (const field of ['provides', 'needs'] as const) {
    const keys: unknown = p[field];
    if (keys === undefined) continue;
    if (!Array.isArray(keys)) throw new PluginContractError(`plugin "${p.name}" declares ${field} that is not a list of service keys`);
    for (const k of keys) {
      try {
        nameOf(k as AnyServiceKey);
      } catch (e) {
        throw new PluginContractError(`plugin "${p.name}" lists in ${field} something that is not a service key: ${(e as Error).message}`);
      }
    }
  }
}

/**
 * Checks, once a plugin's `apply` returned, that every service in its `provides` is published (maybe by an earlier plugin, through a
 * shared helper such as the selection hooks).
 * @throws PluginContractError naming the plugin and the service
 */
export function checkProvided(p: Plugin, services: Services): void {
  for (const key of p.provides ?? []) {
    if (!services.has(key))
      throw new PluginContractError(`plugin "${p.name}" declares it provides service "${key.name}", but did not provide it in apply() (host.services.provide)`);
  }
}

/**
 * Checks, once every plugin is applied (before the config phase), that each service a plugin `needs` is published.
 * @throws PluginContractError naming the needing plugin, the service and its usual provider
 */
export function checkNeeds(plugins: readonly Plugin[], services: Services): void {
  for (const p of plugins) {
    for (const key of p.needs ?? []) {
      if (services.has(key)) continue;
      // Key names start with the providing plugin's name (`providers`, `evm-state.chain`).
      const owner = key.name.split('.')[0];
      throw new PluginContractError(
        `plugin "${p.name}" needs service "${key.name}", which no applied plugin provides (by its name, plugin "${owner}" provides it: is that plugin in the preset?)`,
      );
    }
  }
}

/** The default {@link ServiceRegistry}: a map by key name, remembering who provided each service. */
export class Services implements ServiceRegistry {
  private readonly map = new Map<string, { service: unknown; by: string | undefined }>();

  /** @param provider the plugin whose `apply` is running, if any (names the provider in errors) */
  constructor(private readonly provider: () => string | undefined = () => undefined) {}

  provide<T>(key: ServiceKey<T>, service: T): void {
    const by = this.provider();
    const prev = this.map.get(nameOf(key));
    if (prev) throw new PluginContractError(`service "${key.name}" is provided twice: by ${who(prev.by)} and by ${who(by)} (one plugin provides a service)`);
    this.map.set(key.name, { service, by });
  }

  get<T>(key: ServiceKey<T>): T | undefined {
    return this.map.get(nameOf(key))?.service as T | undefined;
  }

  /** Whether a service is published under a key (boot checks of `provides` and `needs`). */
  has(key: AnyServiceKey): boolean {
    return this.map.has(nameOf(key));
  }

  require<T>(key: ServiceKey<T>): T {
    const e = this.map.get(nameOf(key));
    if (!e) throw new PluginContractError(`service "${key.name}" is not provided (is its plugin in the preset, and declared in dependsOn?)`);
    return e.service as T;
  }
}

/** A key's name; a string (plain JavaScript) is refused, so a lookup never silently answers undefined. @throws PluginContractError */
function nameOf(key: AnyServiceKey): string {
  const k: unknown = key;
  const name = typeof k === 'object' && k !== null ? (k as { name?: unknown }).name : undefined;
  if (typeof name !== 'string')
    throw new PluginContractError(
      `services are looked up by a key from serviceKey() (exported with its service interface), not by ${typeof k === 'string' ? `the string "${k.slice(0, 64)}"` : typeof k}`,
    );
  return name;
}

/** A provider as named in messages. */
function who(plugin: string | undefined): string {
  return plugin === undefined ? "a hook outside any plugin's apply" : `plugin "${plugin}"`;
}
