/**
 * One upstream: its transport (HTTP, core/registry/transport.ts; or a plugin's for another endpoint scheme), its method filter, its
 * tags and its state.
 */
import { compileGlobs } from '../../lib/glob.ts';
import type { RpcResult } from '../wire/jsonrpc.ts';
import type { SvcError } from '../wire/errors.ts';
import type { ResolvedUpstream } from '../../config/types.ts';
import { DEFAULT_MAX_RESPONSE_SIZE, HttpTransport, type UpstreamPoolOptions } from './transport.ts';
import type { RequestDispatcher } from './outbound.ts';
import { Redactor, secretsOf } from '../../lib/redact.ts';
import type { UpstreamTransport } from './plugin-transport.ts';

export type { TransportRequest, UpstreamTransport } from './plugin-transport.ts';
export { createOriginPool, DeadlineReason, isDeadline, DEFAULT_MAX_RESPONSE_SIZE, type UpstreamPoolOptions } from './transport.ts';

/** Lifecycle of an upstream's chain-id verification. */
export type UpstreamState = 'probing' | 'ready' | 'failed';

/** Most methods one upstream learns to ignore at run time. */
export const MAX_LEARNED_IGNORES = 1000;

/** One request as dialled, with the records it is accounted in: the pipeline's `UpstreamCall`, declared by shape so the registry needs none of it. */
export interface DialRequest {
  /** JSON-RPC method sent upstream. */
  readonly method: string;
  /** Params sent upstream (after interpolation). */
  readonly params: unknown;
  /** Aborts this one request (hedge loss, deadline). */
  readonly signal: AbortSignal;
  /** Cap on this answer's size, bytes, below the upstream's `maxResponseSize`. */
  readonly maxResponseSize?: number;
  /** Extra request headers of this one request (lower-cased names; the upstream's configured headers win on a clash). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The attempt's record: `dialled` is set once the request is built and sent. */
  readonly attempt: { dialled: boolean };
  /** The call's record: each dial counts one upstream attempt. */
  readonly ctx: { readonly record: { upstreamAttempts: number }; readonly deadline?: number };
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
  /** Failed `eth_chainId` probes so far: the providers plugin stops holding a chain's first request once every generated upstream failed one. */
  probeFailures = 0;
  /**
   * When this object was made, `performance.now()` ms (as `AttemptRecord.startedAt`): an earlier attempt belongs to a predecessor a
   * reload replaced under the same id (the health plugin leaves it out).
   */
  readonly createdAt = performance.now();
  /** Plugin-owned fields of this upstream, by slot (core/registry/slots.ts). */
  readonly slots = new Map<symbol, unknown>();
  /** Tap names of the `upstream` hook's wrappers around {@link dial}, outermost first (core/pipeline/chains.ts holds the sender). */
  pipeline: readonly string[] = [];

  /** The HTTP transport; undefined when a plugin's transport serves the endpoint's scheme. */
  private readonly http?: HttpTransport;
  private readonly other?: UpstreamTransport;
  private readonly otherRedactor?: Redactor;
  private readonly maxResponseSize: number;
  private readonly ignore: (m: string) => boolean;
  private readonly allow: (m: string) => boolean;
  private readonly supportCache = new Map<string, boolean>();
  /** Methods found unsupported at run time (`autoIgnoreUnsupportedMethods`), for the life of the process. */
  private readonly learnedIgnores = new Set<string>();

  /**
   * @param pool pool options (pools shared by origin), a plugin's dispatcher, the fault classifier and the transports of other schemes
   * @throws Error when a plugin's dispatcher refuses the upstream's transport settings, or no plugin serves a non-http(s) endpoint's
   *   scheme (config validation reports both first)
   * @internal core builds upstreams (core/pipeline/build.ts); a plugin adds one with the host's `addUpstreamFromConfig`
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
    const maxResponseSize = typeof config.settings.maxResponseSize === 'number' ? config.settings.maxResponseSize : DEFAULT_MAX_RESPONSE_SIZE;
    this.maxResponseSize = maxResponseSize;
    // Method names from clients are matched in linear time.
    this.ignore = config.ignoreMethods.length ? compileGlobs(config.ignoreMethods) : () => false;
    this.allow = config.allowMethods.length ? compileGlobs(config.allowMethods) : () => false;
    if (!/^https?:\/\//i.test(config.endpoint)) {
      const other = pool.transportFor?.(config);
      if (!other) throw new Error(`upstream ${config.id}: no plugin of this preset serves "${config.endpoint.split('://')[0]}://" endpoints`);
      this.other = other;
      this.otherRedactor = new Redactor([...secretsOf(config.endpoint, config.headers), ...(other.secrets ?? [])]);
      return;
    }
    const out = pool.dispatcher;
    const jsonRpc = (config.settings.jsonRpc ?? {}) as { enableGzip?: boolean; proxyPool?: string };
    const transport = {
      id: config.id,
      endpoint: config.endpoint,
      headers: config.headers,
      maxResponseSize,
      dispatcher: out && ((origin: RequestDispatcher) => out(config, origin)),
      needsDispatcher: jsonRpc.proxyPool !== undefined ? 'jsonRpc.proxyPool' : jsonRpc.enableGzip ? 'jsonRpc.enableGzip' : undefined,
      classify: pool.classifyFault,
    };
    this.http = new HttpTransport(transport, pool);
  }

  /** True when the upstream serves: verified, or configured with a chain id while its probe runs. */
  get serving(): boolean {
    return this.state === 'ready' || (this.state === 'probing' && this.config.chainId !== undefined);
  }

  /** Whether `ignoreMethods`/`allowMethods` let this upstream serve a method (allow wins); cached, bounded: method names come from clients. */
  supportsMethod(method: string): boolean {
    let v = this.supportCache.get(method);
    if (v === undefined) {
      v = !this.learnedIgnores.has(method) && (this.allow(method) || !this.ignore(method));
      if (this.supportCache.size < 1000) this.supportCache.set(method, v);
    }
    return v;
  }

  /**
   * Stops sending a method here for the life of the process, after the upstream said it does not support it
   * (`autoIgnoreUnsupportedMethods`); at most {@link MAX_LEARNED_IGNORES}, since method names come from clients.
   * @returns true when the method was newly ignored
   */
  ignoreMethod(method: string): boolean {
    if (this.learnedIgnores.has(method) || this.learnedIgnores.size >= MAX_LEARNED_IGNORES) return false;
    this.learnedIgnores.add(method);
    this.supportCache.delete(method);
    return true;
  }

  /** Replaces this upstream's secrets in text: for log lines about it. */
  get redactor(): Redactor {
    return this.http?.redactor ?? (this.otherRedactor as Redactor);
  }

  /** The innermost sender: builds the body (an exception there is svc's, never the upstream's), then accounts the dial and sends it. */
  dial(call: DialRequest): Promise<RpcResult> {
    if (!this.http) {
      call.attempt.dialled = true;
      call.ctx.record.upstreamAttempts++;
      return this.sendOther(call.method, call.params, call.signal, call.maxResponseSize, call.headers, call.ctx.deadline);
    }
    const body = this.http.body(call.method, call.params);
    call.attempt.dialled = true;
    call.ctx.record.upstreamAttempts++;
    return this.http.post(body, call.method, call.signal, call.maxResponseSize, call.headers);
  }

  /**
   * Sends calls as one JSON-RPC batch (spec §4.7): one outcome per call, in order, never rejects; each counts one upstream attempt.
   * A plugin's transport has no batches: each call is sent on its own, concurrently.
   */
  sendBatch(calls: readonly DialRequest[]): Promise<Array<RpcResult | SvcError>> {
    for (const c of calls) {
      c.attempt.dialled = true;
      c.ctx.record.upstreamAttempts++;
    }
    if (!this.http)
      return Promise.all(
        calls.map((c) => this.sendOther(c.method, c.params, c.signal, c.maxResponseSize, c.headers, c.ctx.deadline).catch((e: SvcError) => e)),
      );
    return this.http.postBatch(calls);
  }

  /** One request outside the hook chains (chain-id probes); throws only a SvcError, a DeadlineReason abort as a timeout. */
  transport(method: string, params: unknown, signal: AbortSignal): Promise<RpcResult> {
    return this.http ? this.http.send(method, params, signal) : this.sendOther(method, params, signal);
  }

  private sendOther(
    method: string,
    params: unknown,
    signal: AbortSignal,
    maxResponseSize = this.maxResponseSize,
    headers?: Readonly<Record<string, string>>,
    deadline?: number,
  ): Promise<RpcResult> {
    return (this.other as UpstreamTransport).send({ method, params, signal, maxResponseSize, headers, deadline });
  }

  /** Closes the pool (shutdown) unless it is shared, in which case its owner closes it. */
  close(): Promise<void> {
    return this.http ? this.http.close() : (this.other as UpstreamTransport).close();
  }

  /** Aborts every in-flight request and closes the pool at once (own pools only). */
  destroy(): Promise<void> {
    return this.http ? this.http.destroy() : (this.other as UpstreamTransport).destroy();
  }
}
