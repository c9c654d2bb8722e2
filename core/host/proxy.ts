/**
 * The Proxy: config + registry + hooks + logger + metrics registry (docs/architecture.md).
 * `new Proxy(config).use(...plugins)`, then `start()`. Plugins tap hooks in `apply`; the
 * proxy builds every network's and upstream's chain once, then serves.
 */
import { composeRecorded } from '../pipeline/pipeline.ts';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { httpInfo, httpServerOptions, nodeRequestInfo } from '../http/http-io.ts';
import { compileAliasMatchers, pathSegments, resolveRoute, type AliasMatcher, type RouteTarget } from '../http/routing.ts';
import { serveJsonRpc, type JsonRpcInput, type JsonRpcOutput } from '../http/serve.ts';
import type { Pool } from 'undici';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import type { TObject } from '@sinclair/typebox';
import type { LevelWithSilent } from 'pino';
import type { CallContext, HttpRequestInfo } from '../pipeline/context.ts';
import { createHooks, guardObservationHooks, UpstreamCursor, type AttemptHandler, type CallHandler, type ProxyHooks, type UpstreamCall } from '../pipeline/hooks.ts';
import { checkPlugin, PluginContractError, Services, type ListenOverrides, type Plugin, type PluginHost } from './host.ts';
import { Drain, type LifecycleState, type LifecycleStatus } from '../http/drain.ts';
import { ErrUpstreamsExhausted, type SvcError } from '../wire/errors.ts';
import { createLogger, type Logger } from '../../lib/logger.ts';
import { BoundedLabel } from '../../lib/labels.ts';
import { Network } from '../registry/project.ts';
import { Project } from '../registry/project.ts';
import { Upstream } from '../registry/upstream.ts';
import { internalContext, upstreamCall } from '../pipeline/internal-call.ts';
import { callFailure } from '../pipeline/sweep.ts';
import { installCallChain, installSender, runCall } from '../pipeline/chains.ts';
import { healthOutcome } from '../pipeline/blame.ts';
import { createServer } from '../http/server.ts';
import { ClientAddressResolver } from '../../lib/client-address.ts';
import type Koa from 'koa';
import { getCommit, VERSION } from '../wire/version.ts';
import { buildConfigSchema, fragmentCollisions, type SchemaFragment } from '../../config/schema.ts';
import { loadConfigObject, resolveNetwork, resolveUpstream } from '../../config/load.ts';
import type { ResolvedConfig, ResolvedProject, UpstreamInput } from '../../config/types.ts';
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
  /**
   * The `category` (method) label shared by every plugin's metrics: at most 200 distinct
   * methods per process, then `other`, each cut to 64 characters.
   */
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

  /** The attempt handler before any plugin wraps it: the `forward` plugin replaces it with the sweep. */
  private readonly noForward: AttemptHandler = () => Promise.reject(new ErrUpstreamsExhausted([], 'no forwarding plugin is applied (add forwardPlugin() to the preset)'));
  /** Chain id probes of the upstreams (core/pipeline/probe.ts). */
  private readonly prober: ChainIdProber;
  /** One keep-alive pool per upstream origin, shared by the upstreams of that origin (read-only for callers). */
  readonly pools = new Map<string, Pool>();
  private closed = false;
  private started = false;
  /** SIGTERM drain state machine (spec §3.2). */
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
    // Observation taps never break a call: guarded, logged once a minute, counted.
    guardObservationHooks(this.hooks, this.logger, this.metrics);
  }

  /**
   * The resolved config, after every `config` hook ran (at start).
   * @throws PluginContractError when read inside a plugin's `apply`: other plugins may still
   *   derive config there; read it from the `configured` hook on
   */
  get config(): ResolvedConfig {
    if (this.applying !== undefined) {
      throw new PluginContractError(`plugin "${this.applying}" read host.config inside apply(); read it from the configured hook on (config hooks may still change it)`);
    }
    return this.resolved;
  }

  /** Listen overrides given to this svc (CLI, tests). */
  get overrides(): ListenOverrides {
    return { port: this.opts.port, host: this.opts.host, metricsPort: this.opts.metricsPort };
  }

  /**
   * Applies plugins in order, checking each against the contract first.
   * @throws PluginContractError (or PluginDependencyError) naming the plugin: a duplicate name,
   *   a missing dependency, an svc version outside its range; anything its `apply` throws, with its name
   */
  use(...plugins: Plugin[]): this {
    for (const p of plugins) {
      checkPlugin(p, new Set(this.plugins.map((x) => x.name)), this.version);
      this.plugins.push(p);
      this.applying = p.name;
      try {
        p.apply(this);
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
   * The config phase: runs the `config` waterfall (plugins deriving config),
   * then `configured` (plugins reading their settings and checking them). Once; `createProxy`
   * runs it right after applying the plugins, so `svc validate` sees every plugin's checks.
   * @throws whatever a `configured` tap throws (ConfigError for a bad setting)
   */
  configure(): void {
    if (this.configured) return;
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
    const app = createServer(this);
    const host = this.opts.host ?? this.config.server.httpHost;
    const port = this.opts.port ?? this.config.server.httpPort;
    const server = createHttpServer(httpServerOptions(this.config.server), app.callback());
    // Node's own limits, not a timer per socket: 0 = unlimited.
    if (this.config.server.maxConnections > 0) server.maxConnections = this.config.server.maxConnections;
    this.server = await new Promise<Server>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve(server));
    });
    this.drain.track(this.server);
    const addr = this.server.address() as AddressInfo;
    for (const p of this.projects.values()) {
      this.logger.info(
        {
          project: p.id,
          networks: [...p.networks.values()].map((n) => (n.alias ? `${n.id} (${n.alias})` : n.id)),
          upstreams: [...p.upstreams.values()].map((u) => u.id),
          // The origin and the path apart: log redaction hides every URL path (upstream URLs carry keys), svc's own included.
          listen: `http://${addr.address}:${addr.port}`,
          path: `/${p.id}`,
        },
        `project ${p.id} ready`,
      );
    }
    // Timeouts svc causes itself (a stalled loop) are charged to no upstream (core/pipeline/blame.ts).
    watchLoopStalls();
    await this.hooks.listening.promise();
    for (const p of this.projects.values()) for (const u of p.upstreams.values()) this.prober.probe(p, u);
    return addr;
  }

  /**
   * Builds every project's networks and upstreams and composes their chains, as {@link start}
   * does first, without the `project` hooks, a listener or probes: what `svc pipeline` inspects.
   * @throws Error when called twice or after {@link start}
   */
  buildRegistry(): void {
    if (this.projects.size > 0) throw new Error('registry already built');
    if (!this.started) this.configure();
    for (const pc of this.config.projects) this.buildProject(pc);
  }

  /** Builds a project with its declared networks and its upstreams (not yet probed). */
  private buildProject(pc: ResolvedProject): Project {
    const project = new Project(pc, healthOutcome);
    this.projects.set(project.id, project);
    for (const nc of pc.networks) this.createNetwork(project, nc, true);
    for (const uc of pc.upstreams) this.addUpstream(project, new Upstream(uc, project.id, { shared: this.pools }));
    return project;
  }

  /**
   * Registers an upstream: composes its `upstream` chain and, when it has a configured chain
   * id, joins that network at once (it serves while its probe is pending).
   * @param order its place in the project's config order (a reload keeps a replaced upstream's)
   */
  addUpstream(project: Project, u: Upstream, order?: number): void {
    project.addUpstream(u, order);
    const sender = composeRecorded(this.hooks.upstream, (call: UpstreamCall) => u.dial(call), u);
    installSender(u, sender.handler);
    u.pipeline = sender.wrappers;
    if (u.config.chainId !== undefined) this.join(project, u, u.config.chainId);
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
    if (entry.id !== undefined && project.upstreams.has(entry.id)) throw new Error(`project ${project.id} already has an upstream "${entry.id}"`);
    const u = new Upstream(resolveUpstream(this.schema, project.config.upstreamDefaults, entry, new Set(project.upstreams.keys())), project.id, { shared: this.pools });
    this.addUpstream(project, u);
    if (this.started) this.prober.probe(project, u);
    return u;
  }

  /**
   * Starts the chain id probe of an upstream added while serving (nothing before start: start probes every upstream).
   * @internal core/host/reload.ts
   */
  probeNew(project: Project, u: Upstream): void {
    if (this.started) this.prober.probe(project, u);
  }

  /** Config reload (core/host/reload.ts): the source, the serialised runs, the upstreams draining. */
  private readonly reloader = new ConfigReloader(this);

  /**
   * Takes an upstream out of service for good (config reload; see {@link ConfigReloader.retire}).
   * @internal core/host/reload.ts
   */
  retireUpstream(u: Upstream, opts: { keepCordons?: boolean } = {}): void {
    this.reloader.retire(u, opts);
  }

  /** The config now in force, after a reload applied what it could. @internal core/host/reload.ts */
  replaceConfig(c: ResolvedConfig): void {
    this.resolved = c;
  }

  /**
   * Sets where {@link reloadConfig} reads the config from. The function re-reads the source and
   * validates it whole, as `svc validate` does (see `validateConfig`), throwing ConfigError.
   */
  setConfigSource(load: (trigger: ReloadTrigger) => Promise<ResolvedConfig>): void {
    this.reloader.source = load;
  }

  /**
   * Re-reads the config and swaps in what changed without dropping a call (core/host/reload.ts).
   * Reloads are serialised. A config that does not validate is refused whole: nothing changes.
   * @param trigger `signal` (SIGHUP) or `request` (admin `svc_reloadConfig`), handed to the source
   * @returns what changed
   * @throws ConfigError with every problem (the old config keeps serving)
   * @throws ErrReloadUnavailable when this svc has no config source (not started from a file)
   */
  reloadConfig(trigger: ReloadTrigger = 'request'): Promise<ReloadReport> {
    return this.reloader.reload(trigger);
  }

  /**
   * Joins an upstream to the network of a chain (created on demand).
   * @internal core/host/reload.ts
   */
  join(project: Project, u: Upstream, chainId: number): void {
    const network = this.ensureNetwork(project, chainId);
    if (network.addUpstream(u)) this.hooks.upstreamJoined.call(u, network);
  }

  /** The network for a chain id, created on demand from `networkDefaults` when undeclared. */
  ensureNetwork(project: Project, chainId: number): Network {
    const existing = project.networks.get(`evm:${chainId}`);
    if (existing) return existing;
    const nc = resolveNetwork(this.schema, project.config.networkDefaults, { architecture: 'evm', evm: { chainId } });
    return this.createNetwork(project, nc, false);
  }

  /** Builds a network and composes its handler chain once (docs/architecture.md). */
  createNetwork(project: Project, nc: Network['config'], declared: boolean): Network {
    const network = new Network(project, nc, declared);
    const attempts = composeRecorded(this.hooks.attempt, this.noForward, network);
    const attempt = attempts.handler;
    const hooks = this.hooks;
    const inner: CallHandler = async (ctx) => {
      const candidates = hooks.select.call(network.upstreams.slice(), ctx);
      if (candidates.length === 0) throw new ErrUpstreamsExhausted([], `no upstream of ${network.id} can serve ${ctx.request.method}`);
      ctx.record.networkAttempts++;
      return attempt(ctx, { cursor: new UpstreamCursor(candidates), reason: 'primary', signal: ctx.signal });
    };
    const calls = composeRecorded(this.hooks.call, inner, network);
    const chain = calls.handler;
    network.pipeline = { call: calls.wrappers, attempt: attempts.wrappers };
    // A call that reached its deadline is a timeout, whatever path failed it (spec §4.7 #2).
    installCallChain(network, async (ctx) => {
      try {
        return await chain(ctx);
      } catch (e) {
        throw callFailure(ctx.signal, e);
      }
    });
    project.addNetwork(network);
    this.hooks.network.call(network);
    return network;
  }

  /**
   * Finds a network by id (`evm:<chainId>`), asking the `resolveNetwork` hook (providers) when
   * the project does not have it yet.
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
   * Graceful drain (spec §3.2), what the CLI runs on SIGTERM: the healthcheck turns 503 at once,
   * calls are served for `server.waitBeforeShutdown`, then new requests get 503
   * `ErrServiceShuttingDown` with `Connection: close` while in-flight ones finish (at most
   * `server.waitAfterShutdown`), then {@link close}. Idempotent; never rejects.
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
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections?.();
        // Connections still busy after the drain window are cut.
        setTimeout(() => {
          server.closeAllConnections?.();
          resolve();
        }, 2000).unref();
      });
    }
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

/** Options of {@link createProxy}. */
export interface CreateProxyOptions extends ProxyOptions {
  /** Raw config object (YAML/JSON/TS already read). */
  config?: unknown;
  /** Plugins (usually a preset's). Their schema fragments join the config schema. */
  plugins: Plugin[];
  /** Environment for `${ENV}` expansion. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Validates a raw config against the core schema plus the plugins' fragments, builds the
 * proxy and applies the plugins. Does not start it.
 * @throws ConfigError listing every problem with its path
 * @throws PluginContractError when two owners define one config key, or a plugin breaks the contract
 */
export function createProxy(opts: CreateProxyOptions): Proxy {
  const collisions = fragmentCollisions(opts.plugins.filter((p) => p.schema).map((p) => ({ owner: p.name, fragment: p.schema as SchemaFragment })));
  if (collisions.length) throw new PluginContractError(collisions.join('; '));
  const { config, schema } = loadConfigObject(opts.config ?? {}, { fragments: opts.plugins.map((p) => p.schema).filter((s): s is SchemaFragment => !!s), env: opts.env });
  const proxy = new Proxy(config, { ...opts, schema });
  proxy.use(...opts.plugins);
  proxy.configure();
  return proxy;
}

export type { SvcError };
