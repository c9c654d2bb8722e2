/**
 * Serving JSON-RPC calls once a request is routed (spec §4.2): one call through its network's handler with its deadline, and a whole body
 * for transports other than the Koa server (the WebSocket endpoint, through the host's `serveJsonRpc`).
 */
import pLimit from 'p-limit';
import { newExecutionRecord, type CallContext, type ExecutionRecord, type HttpRequestInfo, type Identity } from '../pipeline/context.ts';
import { asSvcError, ErrCancelled, ErrInternal, ErrInvalidRequest, ErrNetworkNotSupported, ErrRequestTooLarge, SvcError } from '../wire/errors.ts';
import { toJsonRpcError, wireError } from '../wire/errors-wire.ts';
import { parseRequestBody, serializeError, serializeResult, type AnswerBody, type ParsedBody, type ParsedCall } from '../wire/jsonrpc.ts';
import { normaliseNetworkId, type RouteHost, type RouteTarget, servedNetworks } from './routing.ts';
import { RequestScope } from '../pipeline/request-scope.ts';
import { runCall } from '../pipeline/chains.ts';
import type { ProxyHooks } from '../pipeline/hooks.ts';
import { admitRequest, runAnswered } from './admission.ts';
import type { ResolvedConfig } from '../../config/types.ts';
import type { Logger } from '../../lib/logger.ts';

/** What serving calls needs of the host (the proxy is one): config, hooks, logger, networks. */
export interface ServeHost extends RouteHost {
  readonly config: ResolvedConfig;
  readonly hooks: ProxyHooks;
  readonly logger: Logger;
}

/** One serialised call answer. */
export interface CallAnswer {
  /** A string, or pieces around an upstream's raw result bytes (large answers). */
  text: AnswerBody;
  status: number;
  record: ExecutionRecord;
}

/** Batch answers up to this many characters are written as one string (a stream costs more below it). */
const SMALL_BATCH_CHARS = 64 * 1024;

/**
 * A small batch answer as one string, or undefined when it is large (or holds raw result bytes) and must stream (spec §4.2 #8): a stream
 * costs a pipeline, an AbortController and more per response, which dominate a small batch.
 */
export function smallBatchText(answers: readonly CallAnswer[]): string | undefined {
  let n = 2;
  for (const a of answers) {
    if (typeof a.text !== 'string') return undefined;
    n += a.text.length + 1;
    if (n > SMALL_BATCH_CHARS) return undefined;
  }
  return `[${(answers as ReadonlyArray<{ text: string }>).map((a) => a.text).join(',')}]`;
}

/** Yields a batch answer element by element (and piece by piece), so it is never one big string (spec §4.2 #8). */
export function* streamArray(answers: readonly CallAnswer[]): Generator<string | Buffer> {
  if (answers.length === 0) yield '[';
  for (let i = 0; i < answers.length; i++) {
    const t = (answers[i] as CallAnswer).text;
    if (typeof t === 'string') yield i === 0 ? `[${t}` : `,${t}`;
    else {
      yield i === 0 ? '[' : ',';
      yield* t;
    }
  }
  yield ']';
}

/** svc's own code failed for one element: id null, -32603 (spec §4.2 #6). */
function internalFailure(proxy: ServeHost, call: ParsedCall, e: unknown, record = newExecutionRecord(call.method)): CallAnswer {
  // Log the original exception's stack: an ErrInternal wraps it as its cause.
  const original: unknown = e instanceof ErrInternal && e.cause !== undefined ? e.cause : e;
  proxy.logger.error({ err: original instanceof Error ? original.stack : String(original), method: call.method }, 'internal failure serving a call');
  const err = asSvcError(e);
  record.error = err;
  return { text: serializeError('null', toJsonRpcError(err, call.method, proxy.config.server.includeErrorDetails)), status: err.httpStatus, record };
}

/**
 * Serves one JSON-RPC call: its network, its context with a deadline, the directives hook and the network's handler, the answer under the
 * caller's id. Never rejects: a named error is the answer; anything else is svc's own failure, an internal error with id null (spec §4.2 #6).
 */
export async function serveCall(
  proxy: ServeHost,
  target: RouteTarget,
  call: ParsedCall,
  http: HttpRequestInfo,
  identity: CallContext['identity'],
  scope: RequestScope,
): Promise<CallAnswer> {
  const cfg = proxy.config.server;
  const record = newExecutionRecord(call.method);
  let ctx: CallContext | undefined;
  let release: (() => void) | undefined;
  try {
    if (call.invalid) throw call.invalid;
    let network = target.network;
    if (!network) {
      if (call.networkId === undefined)
        throw new ErrNetworkNotSupported(`no network: call /${target.project.id}/evm/<chainId> or set the body field networkId`);
      const id = normaliseNetworkId(call.networkId);
      network = id ? await proxy.getNetwork(target.project, id) : undefined;
      if (!network)
        throw new ErrNetworkNotSupported(
          `network ${JSON.stringify(call.networkId)} is not supported by project ${target.project.id}${servedNetworks(target.project)}`,
        );
    }
    const started = scope.start();
    release = started.release;
    ctx = {
      project: target.project,
      network,
      request: call,
      directives: {},
      identity,
      http,
      signal: started.signal,
      deadline: started.deadline,
      record,
      internal: false,
      state: new Map(),
    };
    ctx.directives = proxy.hooks.directives.call(ctx.directives, ctx);
    record.routed = true;
    const result = await runCall(ctx);
    return { text: serializeResult(call.idRaw, result), status: 200, record };
  } catch (e) {
    // svc's own exception (here or wrapped deeper, e.g. in the sweep): -32603, id null, HTTP 500, logged with its stack.
    if (!(e instanceof SvcError) || e instanceof ErrInternal) return internalFailure(proxy, call, e, record);
    record.error = e;
    const shown = wireError(e);
    return { text: serializeError(call.idRaw, toJsonRpcError(shown, call.method, cfg.includeErrorDetails)), status: shown.httpStatus, record };
  } finally {
    release?.();
    record.durationMs = performance.now() - record.startedAt;
    // Observation taps are guarded (core/pipeline/hooks.ts guardObservationHooks): the answer always stands.
    if (ctx) proxy.hooks.callDone.call(ctx);
  }
}

/**
 * Serves the calls of one body (spec §4.2), all at once within `server.batchConcurrency`, else that many at a time; answers in the calls'
 * order. The one fan-out of the HTTP server and {@link serveJsonRpc}. Never rejects.
 * @param scope the body's deadlines; made with `together` true exactly when every call starts at once
 */
export function serveCalls(
  proxy: ServeHost,
  target: RouteTarget,
  calls: readonly ParsedCall[],
  http: HttpRequestInfo,
  identity: CallContext['identity'],
  scope: RequestScope,
): Promise<CallAnswer[]> {
  const run = (c: ParsedCall) => serveCall(proxy, target, c, http, identity, scope);
  const concurrency = proxy.config.server.batchConcurrency;
  if (calls.length <= concurrency) return Promise.all(calls.map(run));
  const limit = pLimit(concurrency);
  return Promise.all(calls.map((c) => limit(() => run(c))));
}

/** A JSON-RPC body to serve outside the HTTP server (spec §4.2): a call or a batch, already routed and authenticated. */
export interface JsonRpcInput {
  /** Where the body goes (the host's `resolveRoute`). */
  target: RouteTarget;
  /** The HTTP facts of the request that opened the transport (headers, query, client address). */
  info: HttpRequestInfo;
  /** Who the transport was authenticated as, if a strategy ran. */
  identity?: Identity;
  /** The body's UTF-8 text. */
  body: string;
  /** Cancels every call of the body (the transport closed). */
  signal?: AbortSignal;
  /** The transport session (one object per WebSocket connection), handed to the `admit` hook as `session`. */
  session?: object;
}

/** The answer to a {@link JsonRpcInput}. */
export interface JsonRpcOutput {
  /** The answer's JSON text: one object, or an array for a batch. */
  body: string;
  /** Whether the body was a batch. */
  batch: boolean;
  /** The HTTP status the same answer would have had (the refusal's own when refused as a whole). */
  status: number;
  /** Execution records of the routed calls, in order (empty when refused as a whole). */
  records: ExecutionRecord[];
  /** Headers the HTTP answer would have carried beyond the core's (a settlement receipt, a payment challenge), when any. */
  headers?: Record<string, string>;
}

/**
 * Serves a whole JSON-RPC body the way the HTTP server does (spec §4.1, §4.2): within `server.maxJsonDepth` and `server.maxBatchSize`,
 * each call under its own `server.maxTimeout` deadline; a body refused as a whole gets one error (one per batch element). Never rejects.
 */
export async function serveJsonRpc(proxy: ServeHost, input: JsonRpcInput): Promise<JsonRpcOutput> {
  const cfg = proxy.config.server;
  let parsed: ParsedBody | null = null;
  let scope: RequestScope | undefined;
  const onAbort = () => scope?.cancel(new ErrCancelled('the transport closed'));
  try {
    if (Buffer.byteLength(input.body) > cfg.maxBodySize) {
      throw new ErrRequestTooLarge(`request body exceeds server.maxBodySize (${cfg.maxBodySize} bytes)`);
    }
    parsed = parseRequestBody(input.body, { maxDepth: cfg.maxJsonDepth });
    const calls = parsed.calls;
    if (parsed.batch && calls.length > cfg.maxBatchSize)
      throw new ErrInvalidRequest(`batch of ${calls.length} requests exceeds server.maxBatchSize (${cfg.maxBatchSize})`);
    if (parsed.batch && calls.length === 0) throw new ErrInvalidRequest('invalid request: empty batch');
    const t = input.target;
    const admission = proxy.hooks.admit.isUsed()
      ? await admitRequest(proxy.hooks, {
          http: input.info,
          project: t.project,
          network: t.network,
          batch: parsed.batch,
          calls,
          transport: 'websocket',
          identity: input.identity,
          session: input.session,
          host: proxy,
        })
      : undefined;
    scope = new RequestScope(cfg.maxTimeoutMs, !parsed.batch || calls.length <= cfg.batchConcurrency, parsed.batch);
    if (input.signal?.aborted) onAbort();
    else input.signal?.addEventListener('abort', onAbort, { once: true });
    const answers = await serveCalls(proxy, t, calls, input.info, admission ? admission.identity : input.identity, scope);
    const text = answers.map((a) => (typeof a.text === 'string' ? a.text : a.text.map((p) => (typeof p === 'string' ? p : p.toString('utf8'))).join('')));
    const records = answers.map((a) => a.record);
    let headers: Record<string, string> | undefined;
    const withheld = admission?.tasks ? await runAnswered(admission, records, { set: (n, v) => void ((headers ??= {})[n] = v) }, proxy.logger) : undefined;
    if (withheld) throw withheld;
    return {
      body: parsed.batch ? `[${text.join(',')}]` : (text[0] as string),
      batch: parsed.batch,
      status: parsed.batch ? 200 : (answers[0] as CallAnswer).status,
      records,
      ...(headers ? { headers } : {}),
    };
  } catch (e) {
    const err = asSvcError(e);
    if (err.answer) return { body: err.answer.body, batch: parsed?.batch ?? false, status: err.httpStatus, records: [], headers: { ...err.answer.headers } };
    const wire = toJsonRpcError(err, undefined, cfg.includeErrorDetails);
    const calls = parsed?.calls;
    if (parsed?.batch && calls && calls.length > 0 && calls.length <= cfg.maxBatchSize) {
      return { body: `[${calls.map((c) => serializeError(c.idRaw, wire)).join(',')}]`, batch: true, status: err.httpStatus, records: [] };
    }
    return { body: serializeError(parsed && !parsed.batch ? (calls?.[0]?.idRaw ?? 'null') : 'null', wire), batch: false, status: err.httpStatus, records: [] };
  } finally {
    input.signal?.removeEventListener('abort', onAbort);
    scope?.dispose();
  }
}
