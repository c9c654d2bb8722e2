/**
 * One upstream: an undici keep-alive pool to its origin (one pool per origin, DESIGN "Real
 * parts"), its method filter, its tags and its composed sender chain (`upstream` hook).
 * Upstream faults are normalised here, once, where they arrive (issue #2 item 5).
 */
import { Pool, errors as undiciErrors } from 'undici';
import picomatch from 'picomatch';
import {
  ErrCancelled,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrUpstreamMalformedResponse,
  SvcError,
} from '../errors.ts';
import { RpcResult, serializeOutbound } from '../jsonrpc.ts';
import { normaliseUpstreamError } from '../evm/normalize.ts';
import type { ResolvedUpstream } from '../config/types.ts';
import type { UpstreamCall, UpstreamSender } from '../hooks.ts';

/** Lifecycle of an upstream's chain-id verification (issue #2 item 2). */
export type UpstreamState = 'probing' | 'ready' | 'failed';

/** Options for the undici pool behind an upstream. */
export interface UpstreamPoolOptions {
  /** Max sockets to the origin. Default 128. */
  connections?: number;
  /** Idle keep-alive, ms. Default 30 000. */
  keepAliveTimeoutMs?: number;
  /**
   * Shared pools by origin: upstreams of the same origin (one provider, several paths or
   * keys) reuse one keep-alive pool. The owner of the map closes the pools.
   */
  shared?: Map<string, Pool>;
}

/** Creates the keep-alive pool for an origin (deadlines come from AbortSignals, not socket timers). */
export function createOriginPool(origin: string, opts: UpstreamPoolOptions = {}): Pool {
  return new Pool(origin, {
    connections: opts.connections ?? 128,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? 30_000,
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: 10_000 },
  });
}

const ABORT_TIMEOUT = Symbol('svc.timeout');

/** The abort reason used for call deadlines, so the transport can tell timeouts from cancellations. */
export class DeadlineReason {
  readonly [ABORT_TIMEOUT] = true;
  constructor(readonly message = 'request deadline exceeded') {}
}

/** True when an abort reason is a deadline (not a hedge loss or client cancel). */
export function isDeadline(reason: unknown): boolean {
  return !!reason && typeof reason === 'object' && ABORT_TIMEOUT in reason;
}

/** A configured upstream endpoint. */
export class Upstream {
  readonly id: string;
  /** `vendorName` or `unknown`, the `vendor` metric label. */
  readonly vendor: string;
  /** Tags as `"<key>:<value>"` strings. */
  readonly tags: ReadonlySet<string>;
  /** Chain id, configured or probed. */
  chainId?: number;
  /** Verification state; only `ready` (or `probing` with a configured chain id) serves. */
  state: UpstreamState;
  /** True while the EVM state poller says the node is syncing (selection excludes it). */
  syncing = false;
  /** The composed sender: the `upstream` hook's wrappers around {@link transport}. */
  send: UpstreamSender;

  private readonly pool: Pool;
  /** False when the pool is shared by origin and closed by its owner (the proxy). */
  private readonly ownsPool: boolean;
  private readonly path: string;
  private readonly headers: Record<string, string>;
  private readonly ignore: (m: string) => boolean;
  private readonly allow: (m: string) => boolean;
  private readonly supportCache = new Map<string, boolean>();
  private nextId = 1;

  /**
   * @param config resolved upstream config
   * @param projectId owning project id
   * @param pool pool options
   */
  constructor(
    readonly config: ResolvedUpstream,
    readonly projectId: string,
    pool: UpstreamPoolOptions = {},
  ) {
    this.id = config.id;
    this.vendor = config.vendor;
    this.tags = new Set(config.tags);
    this.chainId = config.chainId;
    this.state = 'probing';
    const url = new URL(config.endpoint);
    this.path = `${url.pathname || '/'}${url.search}`;
    this.headers = { 'content-type': 'application/json', accept: 'application/json', ...config.headers };
    if (url.username || url.password) {
      this.headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
    }
    const shared = pool.shared?.get(url.origin);
    this.ownsPool = !pool.shared;
    this.pool = shared ?? createOriginPool(url.origin, pool);
    if (pool.shared && !shared) pool.shared.set(url.origin, this.pool);
    const opts = { dot: true };
    this.ignore = config.ignoreMethods.length ? picomatch(config.ignoreMethods, opts) : () => false;
    this.allow = config.allowMethods.length ? picomatch(config.allowMethods, opts) : () => false;
    this.send = (call) => this.dial(call);
  }

  /** True when the upstream serves: verified, or configured with a chain id while its probe runs. */
  get serving(): boolean {
    return this.state === 'ready' || (this.state === 'probing' && this.config.chainId !== undefined);
  }

  /**
   * Whether `ignoreMethods`/`allowMethods` let this upstream serve a method (allow wins).
   * Cached per method; the cache is bounded because method names come from clients.
   */
  supportsMethod(method: string): boolean {
    let v = this.supportCache.get(method);
    if (v === undefined) {
      v = this.allow(method) || !this.ignore(method);
      if (this.supportCache.size < 1000) this.supportCache.set(method, v);
    }
    return v;
  }

  /** The innermost sender: accounts the dial on the call's record, then calls {@link transport}. */
  private dial(call: UpstreamCall): Promise<RpcResult> {
    call.attempt.dialled = true;
    call.ctx.record.upstreamAttempts++;
    return this.transport(call.method, call.params, call.signal);
  }

  /**
   * One HTTP JSON-RPC request with svc's own id. Never throws anything but a {@link SvcError}:
   * transport failures, HTTP errors and malformed bodies are normalised here.
   * @param method JSON-RPC method
   * @param params params (omitted from the body when undefined)
   * @param signal aborts the request; a {@link DeadlineReason} reason becomes a timeout
   */
  async transport(method: string, params: unknown, signal: AbortSignal): Promise<RpcResult> {
    const id = this.nextId++;
    if (this.nextId > 2_000_000_000) this.nextId = 1;
    let status: number;
    let text: string;
    try {
      const res = await this.pool.request({ path: this.path, method: 'POST', headers: this.headers, body: serializeOutbound(id, method, params), signal });
      status = res.statusCode;
      text = await res.body.text();
    } catch (e) {
      throw this.transportError(e, signal);
    }
    return this.parse(status, text, id, method);
  }

  private transportError(e: unknown, signal: AbortSignal): SvcError {
    if (e instanceof SvcError) return e;
    if (signal.aborted) {
      const r: unknown = signal.reason;
      if (r instanceof SvcError) return r;
      if (isDeadline(r)) return new ErrEndpointRequestTimeout(`upstream ${this.id} did not answer before the deadline`, { details: { upstream: this.id } });
      return new ErrCancelled(`request to upstream ${this.id} was cancelled`, { details: { upstream: this.id } });
    }
    if (e instanceof undiciErrors.HeadersTimeoutError || e instanceof undiciErrors.BodyTimeoutError || e instanceof undiciErrors.ConnectTimeoutError) {
      return new ErrEndpointRequestTimeout(`upstream ${this.id} timed out: ${(e as Error).message}`, { cause: e, details: { upstream: this.id } });
    }
    const err = e as NodeJS.ErrnoException;
    return new ErrEndpointServerSideException(`transport error talking to upstream ${this.id}: ${err.code ?? ''} ${err.message}`.replace(/\s+/g, ' ').trim(), {
      cause: e,
      details: { upstream: this.id, errno: err.code },
    });
  }

  private parse(status: number, text: string, id: number, method: string): RpcResult {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      if (status >= 400) return this.throwFault({ status, message: excerpt(text) || `HTTP ${status}`, method });
      throw new ErrUpstreamMalformedResponse(`upstream ${this.id} answered non-JSON (HTTP ${status}): ${excerpt(text)}`, { details: { upstream: this.id }, upstreamStatus: status });
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      if (status >= 400) return this.throwFault({ status, message: excerpt(text), method });
      throw new ErrUpstreamMalformedResponse(`upstream ${this.id} answered a JSON value that is not a JSON-RPC response`, { details: { upstream: this.id } });
    }
    const o = body as { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    if (o.error && typeof o.error === 'object') {
      const code = typeof o.error.code === 'number' ? o.error.code : undefined;
      const message = typeof o.error.message === 'string' ? o.error.message : JSON.stringify(o.error);
      return this.throwFault({ status, code, message, data: o.error.data, method });
    }
    if (status >= 400) return this.throwFault({ status, message: excerpt(text), method });
    if (!('result' in o)) throw new ErrUpstreamMalformedResponse(`upstream ${this.id} answered without result or error`, { details: { upstream: this.id } });
    if (o.id !== id && o.id !== String(id)) {
      throw new ErrUpstreamMalformedResponse(`upstream ${this.id} answered id ${JSON.stringify(o.id)} to request id ${id}`, { details: { upstream: this.id } });
    }
    const r = new RpcResult(o.result, text);
    r.upstreamId = this.id;
    return r;
  }

  private throwFault(f: { status: number; code?: number; message: string; data?: unknown; method: string }): never {
    const err = normaliseUpstreamError(f);
    (err.details as Record<string, unknown>).upstream = this.id;
    throw err;
  }

  /** Closes the pool (shutdown) unless it is shared, in which case its owner closes it. */
  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.close().catch(() => undefined);
  }

  /** Aborts every in-flight request and closes the pool at once (own pools only). */
  async destroy(): Promise<void> {
    if (this.ownsPool) await this.pool.destroy().catch(() => undefined);
  }
}

function excerpt(text: string): string {
  const t = text.trim();
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}
