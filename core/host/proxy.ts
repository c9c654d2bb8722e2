/**
 * The Proxy, svc's plugin host: it applies plugins, owns config, hooks, logger and metrics, and runs the lifecycle (start, drain, close,
 * reload). Building the registry is the pipeline's, routing and serving the HTTP layer's; the proxy hands them what they need.
 */
import { RegistryBuilder } from '../pipeline/build.ts';
import type { IncomingMessage, Server } from 'node:http';
import { closeServer, listen } from '../http/listen.ts';
import { httpInfo, nodeRequestInfo } from '../http/http-io.ts';
import { compileAliasMatchers, pathSegments, resolveRoute, type AliasMatcher, type RouteTarget } from '../http/routing.ts';
import { serveJsonRpc, type JsonRpcInput, type JsonRpcOutput } from '../http/serve.ts';
import type { Pool } from 'undici';
import type { AddressInfo } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import { Registry } from 'prom-client';
import type { TObject } from '@sinclair/typebox';
import type { LevelWithSilent } from 'pino';
import type { CallContext, HttpRequestInfo } from '../pipeline/context.ts';
import { createHooks, guardObservationHooks, type ProxyHooks } from '../pipeline/hooks.ts';
import { checkNeeds, checkPlugin, checkProvided, PluginContractError, Services, type ListenOverrides, type Plugin, type PluginHost } from './host.ts';
import { Drain, type LifecycleState, type LifecycleStatus } from '../http/drain.ts';
import type { SvcError } from '../wire/errors.ts';
import { createLogger, type Logger } from '../../lib/logger.ts';
import { BoundedLabel } from '../../lib/labels.ts';
import type { Network } from '../registry/project.ts';
import type { Project } from '../registry/project.ts';
import type { Upstream } from '../registry/upstream.ts';
import { internalContext, upstreamCall } from '../pipeline/internal-call.ts';
import { runCall } from '../pipeline/chains.ts';
import { createServer } from '../http/server.ts';
import { ClientAddressResolver } from '../../lib/client-address.ts';
import type Koa from 'koa';
import { getCommit, VERSION } from '../wire/version.ts';
import { buildConfigSchema } from '../../config/schema.ts';
import type { ResolvedConfig, UpstreamInput } from '../../config/types.ts';
import { ConfigReloader, type ReloadReport, type ReloadTrigger } from './reload.ts';
import { ChainIdProber } from '../pipeline/probe.ts';
import { watchLoopStalls } from '../../lib/loop-stall.ts';
import type { RpcResult } from '../wire/jsonrpc.ts';

export type { Plugin, PluginHost, ServiceRegistry } from './host.ts';
export { PluginContractError, PluginDependencyError } from './host.ts';

/** Options of a {@link Proxy}. */
export interface ProxyOptions {
  /** Logger; default a pino logger at `config.logLevel`. */
  logger?: Logger;
  /** The assembled schema the config was validated with (needed for on-demand networks). */
  schema?: TObject;
  /** Override the listen port (CLI `--port`; tests use 0). */
  port?: number;
  /** Override the listen host. */
  host?: string;
  /** Override the metrics port (tests use 0). */
  metricsPort?: number;
  /** Probe backoff start, ms (default 1000); tests shorten it. */
  probeBackoffMs?: number;
}

/** The running service; the {@link PluginHost} its plugins are handed. */
export class Proxy implements PluginHost {
  /** The typed hook registry (frozen). */
  readonly hooks: ProxyHooks = createHooks();
  /** Metrics registry, served by the metrics plugin at `/metrics`. */
  readonly metrics = new Registry();
  /** The `category` (method) label of every plugin's metrics: at most 200 methods per process, then `other`, each cut to 64 characters. */
  readonly methodLabel = new BoundedLabel(200);
  /** Projects by id. */
  readonly projects = new Map<string, Project>();
  /** Applied plugins in order. */
  readonly plugins: Plugin[] = [];
  /** svc version and commit (spec §9). */
  readonly version = VERSION;
  readonly commit = getCommit();
  readonly logger: Logger;
  readonly schema: TObject;
  /** Services plugins publish to each other. */
  readonly services = new Services(() => this.applying);
  private resolved: ResolvedConfig;
  /** The plugin whose `apply` is running, if any: config may not be read then. */
  private applying?: string;
  /** The HTTP server, once started. */
  server?: Server;
  /** Builds projects, networks and upstreams and composes their chains. @internal core/host/reload.ts */
  readonly builder: RegistryBuilder;
  private readonly prober: ChainIdProber;
  /** One keep-alive pool per upstream origin, shared by the upstreams of that origin (read-only for callers). */
  readonly pools = new Map<string, Pool>();
  private closed = false;
  private started = false;
  private readonly drain = new Drain();
  private configured = false;

  /**
   * @param config resolved config (see `loadConfigObject`)
   * @param opts logger, schema and listen overrides
   */
  constructor(
    config: ResolvedConfig,
    readonly opts: ProxyOptions = {},
  ) {
    this.resolved = config;
    this.logger = opts.logger ?? createLogger(config.logLevel as LevelWithSilent);
    this.schema = opts.schema ?? buildConfigSchema([]);
    this.prober = new ChainIdProber(this, opts.probeBackoffMs ?? 1000);
    this.builder = new RegistryBuilder(this.hooks, this.schema, this.projects, this.pools);
    // Observation taps never break a call: guarded, logged once a minute, counted.
    guardObservationHooks(this.hooks, this.logger, this.metrics);
  }

  /** The resolved config, after every `config` hook ran. @throws PluginContractError inside `apply` (other plugins may still derive config) */
  get config(): ResolvedConfig {
    if (this.applying !== undefined) {
      throw new PluginContractError(
        `plugin "${this.applying}" read host.config inside apply(); read it from the configured hook on (config hooks may still change it)`,
      );
    }
    return this.resolved;
  }

  /** Listen overrides given to this svc (CLI, tests). */
  get overrides(): ListenOverrides {
    return { port: this.opts.port, host: this.opts.host, metricsPort: this.opts.metricsPort };
  }

  /**
   * Applies plugins in order, checking each against the contract first and its `provides` after.
   * @throws PluginContractError (or PluginDependencyError) naming the plugin: a broken contract, or anything its `apply` throws
   */
  use(...plugins: Plugin[]): this {
    for (const p of plugins) {
      checkPlugin(p, new Set(this.plugins.map((x) => x.name)), this.version);
      this.plugins.push(p);
      this.applying = p.name;
      try {
        p.apply(this);
        checkProvided(p, this.services);
      } catch (e) {
        if (e instanceof PluginContractError) throw e;
        throw new PluginContractError(`plugin "${p.name}" failed to apply: ${e instanceof Error ? e.message : String(e)}`);
      } finally {
        this.applying = undefined;
      }
    }
    return this;
  }

  /** True when a plugin with that name is applied. */
  has(name: string): boolean {
    return this.plugins.some((p) => p.name === name);
  }

  /**
   * The config phase, once: the services plugins `need`, the `config` waterfall, then `configured` (plugins checking their settings).
   * `createProxy` runs it right after applying the plugins, so `svc validate` sees every plugin's checks.
   * @throws PluginContractError when a plugin needs a service no applied plugin provides
   * @throws whatever a `configured` tap throws (ConfigError for a bad setting)
   */
  configure(): void {
    if (this.configured) return;
    checkNeeds(this.plugins, this.services);
    this.configured = true;
    this.resolved = this.hooks.config.call(this.resolved);
    this.hooks.configured.call(this.resolved);
  }

  /**
   * Builds the registry, runs the `project` hooks, listens, then starts background probes.
   * @returns the bound address
   */
  async start(): Promise<AddressInfo> {
    if (this.started) throw new Error('proxy already started');
    this.started = true;
    this.configure();
    for (const w of this.resolved.warnings) this.logger.warn(w);
    this.buildRegistry();
    for (const project of this.projects.values()) await this.hooks.project.promise(project);
    const handler = createServer(this);
    const host = this.opts.host ?? this.config.server.httpHost;
    const port = this.opts.port ?? this.config.server.httpPort;
    this.server = await listen(handler, this.config.server, host, port, this.hooks);
    this.drain.track(this.server);
    const addr = this.server.address() as AddressInfo;
    for (const p of this.projects.values()) {
      this.logger.info(
        {
          project: p.id,
          networks: [...p.networks.values()].map((n) => (n.alias ? `${n.id} (${n.alias})` : n.id)),
          upstreams: [...p.upstreams.values()].map((u) => u.id),
          // The origin and the path apart: log redaction hides every URL path (upstream URLs carry keys), svc's own included.
          listen: `${this.server instanceof TlsServer ? 'https' : 'http'}://${addr.address}:${addr.port}`,
          path: `/${p.id}`,
        },
        `project ${p.id} ready`,
      );
    }
    // A network found after start (zero-config: once an upstream's chain id is known) is announced with its path, as the declared ones are above.
    this.hooks.network.tap('core:announce', (n) =>
      this.logger.info({ project: n.project.id, network: n.id, path: `/${n.project.id}/${n.id.replace(':', '/')}` }, `network ${n.id} is served`),
    );
    // Timeouts svc causes itself (a stalled loop) are charged to no upstream (core/pipeline/blame.ts).
    watchLoopStalls();
    await this.hooks.listening.promise();
    for (const p of this.projects.values()) for (const u of p.upstreams.values()) this.prober.probe(p, u);
    return addr;
  }

  /**
   * Builds the registry as {@link start} does first, without `project` hooks, listener or probes: what `svc pipeline` inspects.
   * @throws Error when called twice or after {@link start}
   */
  buildRegistry(): void {
    if (this.projects.size > 0) throw new Error('registry already built');
    if (!this.started) this.configure();
    for (const pc of this.config.projects) this.builder.buildProject(pc);
  }

  /** Client address resolution of `server.trustedIPForwarders`/`trustedIPHeaders`, made on first use. */
  private clients?: ClientAddressResolver;

  runCall(ctx: CallContext): Promise<RpcResult> {
    return runCall(ctx);
  }

  requestInfo(k: Koa.Context): HttpRequestInfo {
    this.clients ??= new ClientAddressResolver(this.config.server.trustedIPForwarders, this.config.server.trustedIPHeaders);
    return httpInfo(k, this.clients);
  }

  requestInfoOf(req: IncomingMessage): HttpRequestInfo {
    this.clients ??= new ClientAddressResolver(this.config.server.trustedIPForwarders, this.config.server.trustedIPHeaders);
    return nodeRequestInfo(req, this.clients);
  }

  private aliasMatchers?: AliasMatcher[];

  async resolveRoute(path: string, host: string): Promise<RouteTarget> {
    this.aliasMatchers ??= compileAliasMatchers(this.config.server.aliasing.rules);
    return resolveRoute(this, pathSegments(path), host, this.aliasMatchers);
  }

  serveJsonRpc(input: JsonRpcInput): Promise<JsonRpcOutput> {
    return serveJsonRpc(this, input);
  }

  get httpServer(): Server | undefined {
    return this.server;
  }

  /**
   * Adds an upstream from a raw entry at run time (providers, CLI endpoints).
   * @returns the upstream, already probing
   * @throws Error when the project has an upstream of that id
   */
  addUpstreamFromConfig(project: Project, entry: UpstreamInput): Upstream {
    const u = this.builder.upstreamFromConfig(project, entry);
    if (this.started) this.prober.probe(project, u);
    return u;
  }

  /** Starts the chain id probe of an upstream added while serving (start probes every upstream). @internal core/host/reload.ts */
  probeNew(project: Project, u: Upstream): void {
    if (this.started) this.prober.probe(project, u);
  }

  private readonly reloader = new ConfigReloader(this);

  /** Takes an upstream out of service for good (see {@link ConfigReloader.retire}). @internal core/host/reload.ts */
  retireUpstream(u: Upstream, opts: { keepCordons?: boolean } = {}): void {
    this.reloader.retire(u, opts);
  }

  /** The config now in force, after a reload applied what it could. @internal core/host/reload.ts */
  replaceConfig(c: ResolvedConfig): void {
    this.resolved = c;
  }

  /** Sets where {@link reloadConfig} reads the config from: `load` validates it whole as `svc validate` does, throwing ConfigError. */
  setConfigSource(load: (trigger: ReloadTrigger) => Promise<ResolvedConfig>): void {
    this.reloader.source = load;
  }

  /**
   * Re-reads the config and swaps in what changed without dropping a call (core/host/reload.ts); serialised.
   * @param trigger `signal` (SIGHUP) or `request` (admin `svc_reloadConfig`), handed to the source
   * @returns what changed
   * @throws ConfigError with every problem (the old config keeps serving)
   * @throws ErrReloadUnavailable when this svc has no config source (not started from a file)
   */
  reloadConfig(trigger: ReloadTrigger = 'request'): Promise<ReloadReport> {
    return this.reloader.reload(trigger);
  }

  /**
   * Finds a network by id (`evm:<chainId>`), asking the `resolveNetwork` hook (providers) when the project does not have it yet.
   * @param deadline epoch ms the asker waits at most until (default `server.maxTimeout` from now)
   */
  async getNetwork(project: Project, networkId: string, deadline = Date.now() + this.config.server.maxTimeoutMs): Promise<Network | undefined> {
    const n = project.networks.get(networkId);
    if (n) return n;
    if (!/^evm:\d+$/.test(networkId)) return undefined;
    return this.hooks.resolveNetwork.promise(project, networkId, deadline);
  }

  /** A call context for internal traffic (state polls, healthchecks): core/pipeline/internal-call.ts. */
  internalContext(network: Network, method: string, params: unknown, timeoutMs: number): { ctx: CallContext; done: () => void } {
    return internalContext(network, method, params, timeoutMs);
  }

  /** One internal call through one upstream's own chain: core/pipeline/internal-call.ts. */
  upstreamCall(network: Network, u: Upstream, method: string, params: unknown, timeoutMs: number): Promise<RpcResult> {
    return upstreamCall(this.hooks, network, u, method, params, timeoutMs);
  }

  /**
   * Graceful drain on SIGTERM (spec §3.2): healthcheck 503 at once, calls served for `server.waitBeforeShutdown`, then new requests refused
   * while in-flight ones finish (at most `server.waitAfterShutdown`), then {@link close}. Idempotent; never rejects.
   */
  shutdown(): Promise<void> {
    const s = this.config.server;
    return this.drain.run({ waitBeforeMs: s.waitBeforeShutdownMs, waitAfterMs: s.waitAfterShutdownMs }, () => this.close());
  }

  /** Where the proxy is in its life (spec §3.2): `serving`, `draining`, `closing` or `stopped`. */
  get lifecycle(): LifecycleState {
    return this.drain.state;
  }

  /** The drain's live read-only view: state, requests in flight, drain start (spec §3.2, §6). */
  get lifecycleStatus(): LifecycleStatus {
    return this.drain;
  }

  /** Stops listening, runs `shutdown` taps, closes pools. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.drain.stopped();
    this.prober.stop();
    // Connections the listener does not track (upgraded WebSockets) close first, so it stops at once.
    this.hooks.closing.call();
    const server = this.server;
    if (server) await closeServer(server);
    await this.hooks.shutdown.promise();
    for (const p of this.projects.values()) await Promise.all([...p.upstreams.values()].map((u) => u.close()));
    await this.reloader.close();
    await Promise.all([...this.pools.values()].map((pool) => pool.close().catch(() => undefined)));
  }

  /** Whether `close()` was called. */
  get isClosed(): boolean {
    return this.closed;
  }
}

export { httpServerOptions } from '../http/http-io.ts';

export type { SvcError };
