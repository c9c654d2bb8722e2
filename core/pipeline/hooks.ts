/**
 * Every hook of svc (docs/architecture.md), with tapable's semantics: taps run lowest `stage` first, a waterfall passes on each
 * tap's result, a bail hook stops at the first non-undefined one. Around-style hooks (`call`, `attempt`, `upstream`) are
 * composed once per network/upstream: each tap wraps the handler so far, so the lowest stage ends innermost (stages.ts).
 */
import { AsyncSeriesBailHook, AsyncSeriesHook, SyncBailHook, SyncHook, SyncWaterfallHook } from 'tapable';
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../../lib/logger.ts';
import type Router from '@koa/router';
import type { AttemptReason, AttemptRecord, CallContext, Directives, ExecutionRecord, HttpRequestInfo, Identity } from './context.ts';
import type { SvcError, SvcErrorOptions } from '../wire/errors.ts';
import type { UpstreamFault } from '../wire/fault.ts';
import type { ParsedCall, RpcResult } from '../wire/jsonrpc.ts';
import type { Network, Project } from '../registry/project.ts';
import type { Upstream } from '../registry/upstream.ts';
import type { ResolvedConfig, ResolvedServer, ResolvedUpstream } from '../../config/types.ts';
import type { Readable } from 'node:stream';
import type { RequestListener, Server, ServerOptions } from 'node:http';
import type { RequestDispatcher } from '../registry/outbound.ts';
import type { UpstreamTransport } from '../registry/plugin-transport.ts';

/** What asked for a reload: SIGHUP (`signal`) or admin `svc_reloadConfig` (`request`). */
export type ReloadTrigger = 'signal' | 'request';

/** What a reload changed (the answer of `svc_reloadConfig`, logged on SIGHUP). */
export interface ReloadReport {
  /** Whether anything was applied live. */
  changed: boolean;
  /** Networks as `<project>/<network id>`: added, removed, replaced because their config changed. */
  networks: { added: string[]; removed: string[]; changed: string[] };
  /** Upstreams as `<project>/<upstream id>`: added, removed (draining), changed (same id); `kept` counts those that kept state and connections. */
  upstreams: { added: string[]; removed: string[]; changed: string[]; kept: number };
  /** The new log level, when it changed. */
  logLevel?: string;
  /** Time the swap took, ms (validation not included). */
  durationMs: number;
}

/** How the proxy port's bodies are compressed (the `bodyCoding` hook; the compression plugin gives one for `server.enableGzip`). */
export interface BodyCoding {
  /** The request codings it decodes (`gzip`, `deflate`, ...), named when another one is refused (HTTP 415). */
  readonly decodes: readonly string[];
  /**
   * The decoded bytes of a request body in `encoding` (lower-cased, trimmed, never `identity`), or undefined when it is not one of
   * {@link decodes}. `server.maxBodySize` applies to what it yields, so a zip bomb stops there; a failure is the stream's `error`.
   */
  decode(encoding: string, body: Readable): Readable | undefined;
  /** How answers are encoded; unset: they go as they are, and do not vary by `Accept-Encoding`. */
  readonly answers?: {
    /** The `Content-Encoding` it writes. */
    readonly name: string;
    /** Whether a client's `Accept-Encoding` header takes it. */
    accepts(acceptEncoding: string | undefined): boolean;
    /** The encoded body, or undefined when it stays as it is (too small to pay); `length`: bytes of a stream, when known. */
    encode(body: string | Readable, length: number | undefined): Promise<Buffer | Readable | undefined>;
  };
}

/** The network-level handler of one call: returns a result or throws a {@link SvcError}. */
export type CallHandler = (ctx: CallContext) => Promise<RpcResult>;

/** Hands out a round's selected upstreams to its legs: hedge legs share one, so each starts on the next untried upstream; a retry round gets a fresh one. */
export class UpstreamCursor {
  private i = 0;
  /** @param upstreams the ordered candidates of this round (from the `select` hook) */
  constructor(readonly upstreams: readonly Upstream[]) {}
  /** Next untried upstream of the round, or undefined when all were handed out. */
  next(): Upstream | undefined {
    return this.upstreams[this.i++];
  }
  /** Number of upstreams not yet handed out. */
  get remaining(): number {
    return Math.max(0, this.upstreams.length - this.i);
  }
}

/** One leg of a network round (the primary, a retry round or a hedge leg). */
export interface Leg {
  /** Upstreams of the round, shared by its hedge legs. */
  cursor: UpstreamCursor;
  /** Trace reason of the leg's first attempt; later attempts in the leg are `sweep` (or `hedge`). */
  reason: AttemptReason;
  /** Aborted when the leg loses a hedge race or the call ends. */
  signal: AbortSignal;
}

/** Network-scope handler below `select`: sweeps a leg's upstreams until one answers (spec §1.3). */
export type AttemptHandler = (ctx: CallContext, leg: Leg) => Promise<RpcResult>;

/** One request to one upstream, as seen by the upstream chain. */
export interface UpstreamCall {
  /** The call being served (synthetic for internal calls such as state polls). */
  ctx: CallContext;
  /** Method and params to send (params after interpolation). */
  method: string;
  params: unknown;
  /** Aborts this one request (hedge loss, deadline). */
  signal: AbortSignal;
  /** Trace record of this attempt; the transport fills `dialled`. */
  attempt: AttemptRecord;
  /** Cap on this answer's size, bytes, below the upstream's `maxResponseSize` (state polls use a small one). */
  maxResponseSize?: number;
  /**
   * Extra request headers of this one request, lower-cased names (the client headers a plugin
   * forwards, e.g. `forwardHeaders`); the upstream's configured headers win on a clash. A call
   * carrying them is sent alone, never in an outbound batch with other callers' calls.
   */
  headers?: Readonly<Record<string, string>>;
}

/** One upstream's transport, wrapped by upstream-scope policies (spec §4.7). */
export type UpstreamSender = (call: UpstreamCall) => Promise<RpcResult>;

/** A place to write response headers (Koa's `ctx.set` adapter). */
export interface HeaderSink {
  set(name: string, value: string): void;
}

/** Facts about the HTTP response being written, for the `responseHeaders` hook. */
export interface ResponseMeta {
  /** True for a batch body. */
  batch: boolean;
  /** HTTP request facts. */
  http: HttpRequestInfo;
  /** Project resolved from the URL, if any. */
  project?: Project;
}

/**
 * Settles what a request's admission reserved (a payment), once every call of the request answered and before the response is written.
 * Awaited: a tap bounds its own time and never rejects (a rejection is logged and the answer stands).
 * @param records the calls' execution records, in body order (errors included)
 * @param sink where its own response headers go (a settlement receipt)
 * @returns nothing; or an error whose answer replaces the calls' answers (a settlement refused: the answer is withheld, spec §5 item 1)
 */
export type AnsweredTask = (records: readonly ExecutionRecord[], sink: HeaderSink) => Promise<SvcError | void> | SvcError | void;

/**
 * A request whose body is parsed and none of whose calls is served yet, as the `admit` hook sees it (spec §5 pay-per-request): a tap may
 * refuse the whole request by throwing an {@link SvcError} (with `answer` for a body and headers of its own), change who the calls run as,
 * and register work to run once they answered.
 */
export interface Admission {
  /** HTTP facts of the request (for a WebSocket message, of the upgrade). */
  readonly http: HttpRequestInfo;
  /** Project resolved from the URL. */
  readonly project: Project;
  /** Network resolved from the URL; absent when calls name theirs (body `networkId`). */
  readonly network?: Network;
  /** Whether the body was a batch. */
  readonly batch: boolean;
  /** The calls as parsed, in body order (invalid elements included: they are answered with their error and never routed). */
  readonly calls: readonly ParsedCall[];
  /** `http` for an HTTP request, `websocket` for a message on an upgraded connection. */
  readonly transport: 'http' | 'websocket';
  /** The transport session the message arrived on (the same object for every message of one WebSocket); undefined for HTTP. */
  readonly session?: object;
  /** Who the calls run as: the authenticated identity; a tap may replace it (a payer's address becomes the rate-limit identity). */
  identity?: Identity;
  /** Registers work to run once every call answered, before the response is written (see {@link AnsweredTask}). */
  onAnswered(task: AnsweredTask): void;
  /**
   * The network a call will be served on: the URL's, else its body `networkId` resolved as serving it would (normalised; a network a
   * provider offers is created).
   * @returns undefined when the project serves no such network (the call is answered `ErrNetworkNotSupported`)
   */
  networkOf(call: ParsedCall): Promise<Network | undefined>;
}

/** The typed hook registry of one {@link Proxy}. Frozen after construction. */
export interface ProxyHooks {
  // ---- start-up -------------------------------------------------------------------------
  /** Last chance to derive config before the registry is built (zero-config injects providers here, spec §2.10). */
  readonly config: SyncWaterfallHook<[ResolvedConfig]>;
  /** The config is final: plugins read their settings here or later, never in `apply`. Runs once, before the registry is built. */
  readonly configured: SyncHook<[ResolvedConfig]>;
  /** A project was built: providers expand into upstreams, connectors open. Runs before listening. */
  readonly project: AsyncSeriesHook<[Project]>;
  /** A network was created (at start-up or on demand) and its handler chain built. */
  readonly network: SyncHook<[Network]>;
  /** An upstream joined a network and may serve (after its chain id is known). */
  readonly upstreamJoined: SyncHook<[Upstream, Network]>;
  /**
   * An upstream left a network for good (reload removed or changed it, in-flight calls finish; or its chain id probe failed it):
   * plugins stop its pollers and timers. Observation hook: a tap that throws is logged.
   */
  readonly upstreamLeft: SyncHook<[Upstream, Network]>;
  /**
   * A network was replaced by a reload or removed with its project: no new call reaches it, in-flight ones finish on its chain;
   * plugins stop their per-network timers. Observation hook: a tap that throws is logged.
   */
  readonly networkRetired: SyncHook<[Network]>;
  /**
   * A reload replaced a network with a successor (same id) that the staying upstreams joined; runs just before the old one's
   * `networkRetired`, so plugins carry over per-network state (evm-state: accepted heads). A throwing tap is logged.
   */
  readonly networkReplaced: SyncHook<[Network, Network]>;
  /** A config reload was applied (SIGHUP, `svc reload`, `svc_reloadConfig`), with what changed. Observation hook: a throwing tap is logged. */
  readonly reloaded: SyncHook<[ReloadReport]>;
  /** Admin, healthcheck and similar plugins mount their paths here. */
  readonly routes: SyncHook<[Router]>;
  /** The HTTP listener is up; background work (pollers, probes) may start. */
  readonly listening: AsyncSeriesHook<[]>;
  /**
   * `close()` began (spec §3.2, after the drain windows): plugins close long-lived connections the HTTP server does not
   * (upgraded WebSockets), so the listener can stop at once. Observation hook: a tap that throws is logged.
   */
  readonly closing: SyncHook<[]>;
  /** Drain, close pools and stores (spec §3.2). Plugins tap in reverse dependency order. */
  readonly shutdown: AsyncSeriesHook<[]>;

  // ---- per HTTP request -----------------------------------------------------------------
  /** Auth strategies in order; the first identity wins; throw `ErrAuthUnauthorized` to reject (spec §5). */
  readonly authenticate: AsyncSeriesBailHook<[HttpRequestInfo, Project], Identity | undefined>;
  /**
   * Once per request with a parsed body, before any call is served (spec §5 pay-per-request): refuse it as a whole by throwing a
   * `SvcError`, set its identity, or register {@link AnsweredTask}s. Core skips it (and its promise) while nothing taps it.
   */
  readonly admit: AsyncSeriesHook<[Admission]>;
  /** Diagnostic and cost headers, once per HTTP response, after every call settled (spec §4.5). */
  readonly responseHeaders: SyncHook<[HeaderSink, readonly ExecutionRecord[], ResponseMeta]>;

  // ---- per call -------------------------------------------------------------------------
  /** Resolve the call's directives: network defaults, headers, query, `allowClientDirectives` (spec §2.8). */
  readonly directives: SyncWaterfallHook<[Directives, CallContext]>;
  /** Order and filter upstreams for one call: cordons, `use-upstream`, method support, score (spec §1.3, §3.1). */
  readonly select: SyncWaterfallHook<[Upstream[], CallContext]>;
  /** Response checks that turn an upstream reply into a retryable error (empty, pending, stale head...). */
  readonly validate: SyncBailHook<[CallContext, RpcResult, Upstream], SvcError | undefined>;

  // ---- composed once per network --------------------------------------------------------
  /** Wrappers around the network call: static responses, multiplex, cache, interpolation, getLogs (outside in, by descending stage). */
  readonly call: SyncWaterfallHook<[CallHandler, Network]>;
  /** Network-scope wrappers around the sweep: timeout( retry( hedge( sweep ))), consensus. */
  readonly attempt: SyncWaterfallHook<[AttemptHandler, Network]>;

  // ---- composed once per upstream -------------------------------------------------------
  /** Wrappers around one upstream's transport: upstream timeout/retry, circuit breaker, rate limit, outbound batching. */
  readonly upstream: SyncWaterfallHook<[UpstreamSender, Upstream]>;
  /**
   * Names an upstream's error answer once, where the transport reads it (spec §7): the first tap returning an error wins; with
   * none, `ErrEndpointServerSideException` carrying the vendor's code. Called only for error answers, never for results.
   */
  readonly upstreamFault: SyncBailHook<[UpstreamFault, SvcErrorOptions], SvcError | undefined>;
  /**
   * How an HTTP upstream's requests leave the process, asked once when the upstream is built: a tap may return its own dispatcher
   * (outbound proxies, compressed bodies), given the upstream's config and the keep-alive pool of its origin; the first wins. With none,
   * requests go straight through that pool.
   */
  readonly upstreamDispatcher: SyncBailHook<[ResolvedUpstream, RequestDispatcher], RequestDispatcher | undefined>;
  /**
   * The compression of the proxy port's bodies (request `Content-Encoding`, answer `Accept-Encoding`), asked once when the HTTP server
   * is built; the first tap returning one wins. With none, a compressed request body is refused (HTTP 415) and answers go as they are.
   */
  readonly bodyCoding: SyncBailHook<[ResolvedServer], BodyCoding | undefined>;
  /**
   * The proxy port's server, asked once when svc listens: a tap may build its own around the request listener with Node's server
   * options from `server.*` (the tls plugin's HTTPS server); the first wins. With none, Node's HTTP server.
   */
  readonly httpServer: SyncBailHook<[ResolvedServer, ServerOptions, RequestListener], Server | undefined>;
  /**
   * The transport of an upstream whose endpoint is not http(s), asked once when the upstream is built: the plugin that declares its
   * scheme (`SchemaFragment.endpointSchemes`) returns one, any other tap returns undefined. With none the upstream is not built (config
   * validation refuses such an endpoint first). A tap must not block: connections open lazily.
   */
  readonly upstreamTransport: SyncBailHook<[ResolvedUpstream], UpstreamTransport | undefined>;

  // ---- discovery ------------------------------------------------------------------------
  /**
   * A call names a network the project lacks: providers may create it (spec §2.10, §4.1). Arguments: project, network id
   * (`evm:<chainId>`), and the waiting request's deadline (epoch ms), which a tap must not wait past.
   */
  readonly resolveNetwork: AsyncSeriesBailHook<[Project, string, number], Network | undefined>;

  // ---- observation: a throwing tap is logged and counted, never breaks the call ----------
  /** One upstream attempt ended (metrics, health scores, cost accounting). */
  readonly attemptDone: SyncHook<[AttemptRecord]>;
  /** One call ended (per-call metrics, logs, totals). */
  readonly callDone: SyncHook<[CallContext]>;
}

/** Builds a fresh, frozen hook registry. */
export function createHooks(): ProxyHooks {
  return Object.freeze({
    config: new SyncWaterfallHook<[ResolvedConfig]>(['config']),
    configured: new SyncHook<[ResolvedConfig]>(['config']),
    project: new AsyncSeriesHook<[Project]>(['project']),
    network: new SyncHook<[Network]>(['network']),
    upstreamJoined: new SyncHook<[Upstream, Network]>(['upstream', 'network']),
    upstreamLeft: new SyncHook<[Upstream, Network]>(['upstream', 'network']),
    networkRetired: new SyncHook<[Network]>(['network']),
    networkReplaced: new SyncHook<[Network, Network]>(['network', 'successor']),
    reloaded: new SyncHook<[ReloadReport]>(['report']),
    routes: new SyncHook<[Router]>(['router']),
    listening: new AsyncSeriesHook<[]>([]),
    closing: new SyncHook<[]>([]),
    shutdown: new AsyncSeriesHook<[]>([]),
    authenticate: new AsyncSeriesBailHook<[HttpRequestInfo, Project], Identity | undefined>(['http', 'project']),
    admit: new AsyncSeriesHook<[Admission]>(['admission']),
    responseHeaders: new SyncHook<[HeaderSink, readonly ExecutionRecord[], ResponseMeta]>(['sink', 'records', 'meta']),
    directives: new SyncWaterfallHook<[Directives, CallContext]>(['directives', 'ctx']),
    select: new SyncWaterfallHook<[Upstream[], CallContext]>(['upstreams', 'ctx']),
    validate: new SyncBailHook<[CallContext, RpcResult, Upstream], SvcError | undefined>(['ctx', 'result', 'upstream']),
    call: new SyncWaterfallHook<[CallHandler, Network]>(['handler', 'network']),
    attempt: new SyncWaterfallHook<[AttemptHandler, Network]>(['handler', 'network']),
    upstream: new SyncWaterfallHook<[UpstreamSender, Upstream]>(['sender', 'upstream']),
    upstreamFault: new SyncBailHook<[UpstreamFault, SvcErrorOptions], SvcError | undefined>(['fault', 'opts']),
    upstreamDispatcher: new SyncBailHook<[ResolvedUpstream, RequestDispatcher], RequestDispatcher | undefined>(['upstream', 'pool']),
    bodyCoding: new SyncBailHook<[ResolvedServer], BodyCoding | undefined>(['server']),
    httpServer: new SyncBailHook<[ResolvedServer, ServerOptions, RequestListener], Server | undefined>(['server', 'options', 'listener']),
    upstreamTransport: new SyncBailHook<[ResolvedUpstream], UpstreamTransport | undefined>(['upstream']),
    resolveNetwork: new AsyncSeriesBailHook<[Project, string, number], Network | undefined>(['project', 'networkId', 'deadline']),
    attemptDone: new SyncHook<[AttemptRecord]>(['attempt']),
    callDone: new SyncHook<[CallContext]>(['ctx']),
  });
}

/** How often one observation tap's failure is logged, ms. */
const TAP_ERROR_LOG_INTERVAL_MS = 60_000;

/** A registered tap as interceptors see it (tapable's `FullTap`, which tapable does not export). */
export interface RegisteredTap {
  name: string;
  type: 'sync' | 'async' | 'promise';
  fn: Function;
  stage?: number;
}

/**
 * Guards the observation hooks (`attemptDone`, `callDone`, `responseHeaders`, lifecycle): every tap, registered before or after,
 * runs inside a guard. A throwing tap is logged at most once a minute per tap with its stack and counted in
 * `svc_plugin_errors_total{plugin,hook}` (registered in `registry`); the call is unaffected.
 */
export function guardObservationHooks(hooks: ProxyHooks, logger: Logger, registry: Registry): void {
  const errors = new Counter({
    name: 'svc_plugin_errors_total',
    help: 'Exceptions thrown by plugin taps of observation hooks (attemptDone, callDone, responseHeaders); the call was unaffected',
    labelNames: ['plugin', 'hook'],
    registers: [registry],
  });
  for (const name of ['attemptDone', 'callDone', 'responseHeaders', 'closing', 'upstreamLeft', 'networkRetired', 'networkReplaced', 'reloaded'] as const) {
    hooks[name].intercept({ register: <T extends RegisteredTap>(tap: T): T => guardedTap(tap, name, logger, errors, 'the call is unaffected') });
  }
}

/** A tap wrapped so that an exception is logged (at most once a minute) and counted, never thrown. */
function guardedTap<T extends RegisteredTap>(tap: T, hookName: string, logger: Logger, errors: Counter<'plugin' | 'hook'> | undefined, unaffected: string): T {
  const plugin = tap.name.split(':')[0] ?? tap.name;
  const fn = tap.fn as (...args: unknown[]) => unknown;
  let lastLog = -Infinity;
  return {
    ...tap,
    fn: (...args: unknown[]) => {
      try {
        return fn(...args);
      } catch (e) {
        errors?.inc({ plugin, hook: hookName });
        const now = Date.now();
        if (now - lastLog >= TAP_ERROR_LOG_INTERVAL_MS) {
          lastLog = now;
          logger.error(
            { plugin, hook: hookName, tap: tap.name, err: e instanceof Error ? e.stack : String(e) },
            `plugin ${plugin}: ${hookName} tap threw (logged at most once a minute; ${unaffected})`,
          );
        }
        return undefined;
      }
    },
  };
}

/**
 * Guards an observation hook a plugin defines (e.g. the WebSocket endpoint's) as {@link guardObservationHooks} guards the core's.
 * @param hook a synchronous hook whose taps only observe (a throwing tap's result is dropped)
 * @param hookName the `hook` label and log field
 * @param unaffected for the log line, e.g. "the connection is unaffected"
 */
export function guardObservationHook(
  hook: { intercept(i: { register: <T extends RegisteredTap>(tap: T) => T }): void },
  hookName: string,
  host: { logger: Logger; metrics: Registry },
  unaffected: string,
): void {
  const errors = host.metrics.getSingleMetric('svc_plugin_errors_total') as Counter<'plugin' | 'hook'> | undefined;
  hook.intercept({ register: <T extends RegisteredTap>(tap: T): T => guardedTap(tap, hookName, host.logger, errors, unaffected) });
}
