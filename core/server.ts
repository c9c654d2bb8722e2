/**
 * The HTTP layer (spec §4.1, §4.2): a thin Koa adapter that parses, builds one CallContext
 * per call, runs the network's composed handler and writes the answer. No feature logic
 * lives here (DESIGN: koa). The core writes only what every response carries: content type,
 * `X-SVC-Version`, `X-SVC-Commit` and `server.responseHeaders` (spec §9).
 */
import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import Koa from 'koa';
import Router from '@koa/router';
import { compressAnswer, httpInfo, readRequestBody } from './http-io.ts';
import { acceptsGzip, GZIP_MIN_BYTES } from './compression.ts';
import { routedPaths, staticKey } from './routed-paths.ts';
import { RequestScope } from './request-scope.ts';
import { compileGlobs } from '../lib/glob.ts';
import pLimit from 'p-limit';
import { newExecutionRecord, type CallContext, type ExecutionRecord, type HttpRequestInfo, type Identity } from './context.ts';
import { asSvcError, ErrCancelled, ErrInternal, ErrInvalidRequest, ErrNetworkNotSupported, ErrProjectNotFound, ErrServiceShuttingDown, SvcError } from './errors.ts';
import { toJsonRpcError, wireError } from './errors-wire.ts';
import { answerBytes, parseRequestBody, serializeError, serializeResult, type AnswerBody, type ParsedBody, type ParsedCall } from './jsonrpc.ts';
import type { Network } from './registry/network.ts';
import type { Project } from './registry/project.ts';
import type { Proxy } from './proxy.ts';
import type { HeaderSink, ResponseMeta } from './hooks.ts';
import { ClientAddressResolver } from '../lib/client-address.ts';
import { answerRefusal, type RefusalLimits } from './early-refusal.ts';

/** Where a request is routed: a project and, when the URL names one, a network. */
export interface RouteTarget {
  project: Project;
  /** Network from the URL; undefined when the body's `networkId` must name it. */
  network?: Network;
}

/** One serialised call answer. */
interface CallAnswer {
  /** A string, or pieces around an upstream's raw result bytes (large answers, issue #8 item 5). */
  text: AnswerBody;
  status: number;
  record: ExecutionRecord;
}

/**
 * Resolves the project and network named by a path (spec §4.1): a configured project id
 * first, then `server.aliasing.rules` on the Host; a numeric segment is a chain id only after
 * aliasing. Throws `ErrProjectNotFound` / `ErrNetworkNotSupported` (HTTP 404).
 */
export async function resolveTarget(proxy: Proxy, segments: readonly string[], host: string, aliasMatchers: readonly AliasMatcher[]): Promise<RouteTarget> {
  return resolveRoute(proxy, segments, host, aliasMatchers);
}

/**
 * {@link resolveTarget} without a promise when the registry already has the network (the
 * common case): a promise only when the `resolveNetwork` hook must be asked.
 * @throws ErrProjectNotFound / ErrNetworkNotSupported, synchronously or through the promise
 */
function resolveRoute(proxy: Proxy, segments: readonly string[], host: string, aliasMatchers: readonly AliasMatcher[]): RouteTarget | Promise<RouteTarget> {
  let project = segments[0] !== undefined ? proxy.projects.get(segments[0]) : undefined;
  let rest: readonly string[];
  if (project) rest = segments.slice(1);
  else {
    const rule = aliasMatchers.find((m) => m.match(host));
    if (!rule) throw new ErrProjectNotFound(`project "${segments[0] ?? ''}" not found`);
    project = proxy.projects.get(rule.rule.serveProject);
    if (!project) throw new ErrProjectNotFound(`aliasing rule serves project "${rule.rule.serveProject}", which is not configured`);
    rest = segments;
    if (rule.rule.serveArchitecture) {
      rest = rule.rule.serveChain !== undefined ? ['evm', String(rule.rule.serveChain), ...rest] : ['evm', ...rest];
    }
  }
  if (rest.length === 0) return { project };
  if (rest.length === 2 && rest[0] === 'evm') {
    const chain = rest[1] as string;
    if (!/^\d+$/.test(chain)) throw chainNotSupported(chain, project);
    const id = `evm:${Number(chain)}`;
    const known = project.networks.get(id);
    if (known) return { project, network: known };
    const found = project;
    return proxy.getNetwork(project, id).then((network) => {
      if (!network) throw chainNotSupported(chain, found);
      return { project: found, network };
    });
  }
  if (rest.length === 1) {
    const network = project.aliases.get(rest[0] as string);
    if (network) return { project, network };
    throw new ErrNetworkNotSupported(`network alias "${rest[0]}" is not known in project ${project.id}`);
  }
  throw new ErrNetworkNotSupported(`path /${segments.join('/')} names no network`);
}

function chainNotSupported(chain: string, project: Project): ErrNetworkNotSupported {
  return new ErrNetworkNotSupported(`network evm:${chain} is not supported by project ${project.id}`);
}

/** A compiled aliasing rule. */
export interface AliasMatcher {
  rule: { serveProject: string; serveArchitecture?: 'evm'; serveChain?: string | number };
  match: (host: string) => boolean;
}

/** Normalises a body `networkId` (`evm:<chainId>`, hex or decimal chain) to `evm:<decimal>`. */
export function normaliseNetworkId(id: string): string | undefined {
  const m = /^evm:(0x[0-9a-fA-F]+|\d+)$/.exec(id.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? `evm:${n}` : undefined;
}

/**
 * The `responseHeaders` hook's sink: writes straight to the Node response, with Koa's
 * `ctx.set` guards (nothing once headers are sent, no empty name) but without its per-call
 * array building.
 */
class ResponseHeaderSink implements HeaderSink {
  constructor(private readonly res: ServerResponse) {}
  set(name: string, value: string): void {
    if (!this.res.headersSent && name) this.res.setHeader(name, value);
  }
}

/**
 * The `responseHeaders` sink of a proxy answer: the headers are collected as a flat
 * `[name, value, …]` list and written with the status line in one `writeHead` (issue 27), instead
 * of one `setHeader` each (Node lowercases, validates and stores every one in an object first).
 * A second `set` of a name with the same spelling replaces the first.
 */
class CollectedHeaders implements HeaderSink {
  readonly list: string[];

  /** @param statics the headers every response carries (spec §9), first in the list */
  constructor(statics: readonly string[]) {
    this.list = statics.slice();
  }

  set(name: string, value: string): void {
    if (!name) return;
    const l = this.list;
    for (let i = 0; i < l.length; i += 2) {
      if (l[i] === name) {
        l[i + 1] = value;
        return;
      }
    }
    l.push(name, value);
  }

  /** Writes the collected headers onto the response the ordinary way (answers that take Koa's path). */
  applyTo(res: ServerResponse): void {
    const l = this.list;
    if (res.headersSent) return;
    for (let i = 0; i < l.length; i += 2) res.setHeader(l[i] as string, l[i + 1] as string);
  }
}

/** A single-call answer svc writes itself, past Koa's response handling (see {@link CollectedHeaders}). */
interface DirectAnswer {
  status: number;
  body: string;
  headers: CollectedHeaders;
}

/** Direct answers by Koa context, written by the outer middleware once the loop turn ends. */
const directAnswers = new WeakMap<Koa.Context, DirectAnswer>();

/**
 * Writes a direct answer: status line and headers in one `writeHead`, the body in one `end`.
 * Headers a Koa middleware set on the response before (CORS) are kept: Node merges them.
 */
function writeDirect(res: ServerResponse, a: DirectAnswer): void {
  if (res.headersSent || res.writableEnded) return;
  const h = a.headers.list;
  h.push('Content-Length', String(Buffer.byteLength(a.body)));
  res.writeHead(a.status, h);
  res.end(a.body);
}

/**
 * Resolves in the event loop's check phase. Koa writes an answer when its middleware settles;
 * settling here instead of at once lets every answer completed in one loop turn go out back to
 * back, so a client waiting in epoll is woken once for several of them rather than once each.
 * On this 2-core machine that cut a cache hit from about 78 to 56 µs of CPU and raised its
 * throughput by 40% (issue #10 item 7); the added latency is one loop turn.
 */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Builds the Koa application of a proxy.
 * @param proxy the proxy whose hooks and registry serve requests
 */
export function createServer(proxy: Proxy): Koa {
  const app = new Koa();
  const cfg = proxy.config.server;
  const hooks = proxy.hooks;
  const parseLimits = { maxDepth: cfg.maxJsonDepth };
  const refusal: RefusalLimits = { maxBodySize: cfg.maxBodySize, maxBatchSize: cfg.maxBatchSize, parse: parseLimits, details: cfg.includeErrorDetails };
  const clients = new ClientAddressResolver(cfg.trustedIPForwarders, cfg.trustedIPHeaders);
  const aliasMatchers: AliasMatcher[] = cfg.aliasing.rules.map((rule) => ({ rule, match: compileGlobs(rule.matchDomain, { nocase: true }) }));
  const staticHeaders: ReadonlyArray<readonly [string, string]> = Object.entries({
    // Set before the body so Koa does not add a charset (spec §4.5: `application/json`).
    'Content-Type': 'application/json',
    'X-SVC-Version': proxy.version,
    'X-SVC-Commit': proxy.commit,
    ...cfg.responseHeaders,
  });
  const gzipOn = cfg.enableGzip;
  // The same headers as a flat list for direct answers; `Vary` because a direct answer could
  // have been compressed for another client (what compressAnswer writes on Koa's path).
  const staticList: readonly string[] = [...staticHeaders.flat(), ...(gzipOn ? ['Vary', 'Accept-Encoding'] : [])];
  const setStatic = (res: ServerResponse): void => {
    for (const [name, value] of staticHeaders) res.setHeader(name, value);
  };

  app.on('error', (err: Error) => proxy.logger.debug({ err: err.message }, 'http error'));

  const router = new Router();
  hooks.routes.call(router);
  const routes = router.routes() as unknown as Koa.Middleware;
  const served = routedPaths(router);

  // Every response, early errors included, carries the core headers (spec §9). The router
  // runs only for methods some route serves: proxy POSTs skip route matching unless a plugin
  // mounted a POST route.
  // A proxy POST (no route matched) sets them itself: on its answer's single `writeHead` when it
  // answers directly, else before its body.
  app.use((k, next) => {
    const res = k.res;
    const paths = served === undefined ? 'any' : served.get(k.method);
    const routed = paths === 'any' || (paths !== undefined && paths.has(staticKey(k.path)));
    if (routed || k.method !== 'POST') setStatic(res);
    const done = routed ? routes(k, next) : next();
    return done.then(() => {
      const direct = directAnswers.get(k);
      if (direct) return nextTurn().then(() => writeDirect(res, direct));
      return (gzipOn ? Promise.resolve(compressAnswer(k)) : Promise.resolve()).then(nextTurn);
    });
  });

  app.use(async (k) => {
    const info = httpInfo(k, clients);
    if (k.method === 'OPTIONS') {
      k.status = 204;
      return;
    }
    const lifecycle = proxy.lifecycle;
    if (k.method !== 'POST') {
      // (static headers already set by the outer middleware for every non-POST)
      // Non-POST on proxy paths is a healthcheck (spec §4.1); the healthcheck plugin serves
      // richer answers on its own routes. From SIGTERM on it is 503 (spec §3.2).
      if (lifecycle !== 'serving') {
        k.status = 503;
        k.body = JSON.stringify({ status: 'ERROR', code: 'HealthcheckUnhealthy', message: 'shutting down' });
      } else k.body = JSON.stringify({ status: 'OK', message: 'svc is serving' });
      return;
    }
    if (lifecycle === 'closing' || lifecycle === 'stopped') {
      // Drain (spec §3.2): a new request is refused and its keep-alive connection ends, so the
      // client's retry reaches another replica; in-flight calls are not affected.
      const err = new ErrServiceShuttingDown('svc is shutting down: retry on another replica');
      if (!k.res.headersSent) setStatic(k.res);
      k.set('Connection', 'close');
      const batch = await answerRefusal(k, err, refusal);
      hooks.responseHeaders.call(new ResponseHeaderSink(k.res), [], { batch, http: info });
      return;
    }
    const sink = new CollectedHeaders(staticList);
    const meta: ResponseMeta = { batch: false, http: info };
    let target: RouteTarget;
    let scope: RequestScope | undefined;
    let text: string;
    let raw: Buffer;
    // The body as far as it got: unread (undefined), unreadable or unparsable (null), parsed.
    let body: ParsedBody | null | undefined;
    try {
      const segments = pathSegments(k.path);
      const route = resolveRoute(proxy, segments, info.host, aliasMatchers);
      target = route instanceof Promise ? await route : route;
      meta.project = target.project;
      info.networkId = target.network?.id;
      // Credentials come from headers and query only (spec §5.5): authenticate before the body is
      // read, so an unauthenticated client cannot make svc buffer maxBodySize (issue #9 item 4).
      // No auth strategy tapped: no identity, and no promise to wait for. A refusal (401) is
      // answered below like every early refusal.
      let identity: Identity | undefined;
      if (hooks.authenticate.isUsed()) identity = await hooks.authenticate.promise(info, target.project);
      body = null;
      const read = await readRequestBody(k, cfg.maxBodySize);
      text = read.text;
      raw = read.raw;
      const parsed = parseRequestBody(text, parseLimits, raw);
      body = parsed;
      // The decoded body is not needed past parsing: let it go while the calls run.
      text = '';
      const calls = parsed.calls;
      meta.batch = parsed.batch;
      const deadlines = new RequestScope(cfg.maxTimeoutMs, !parsed.batch || calls.length <= cfg.batchConcurrency, parsed.batch);
      scope = deadlines;
      const onClose = () => {
        if (!k.res.writableFinished) deadlines.cancel(new ErrCancelled('client closed the connection'));
      };
      // res 'close' fires early only when the client goes away (req 'close' fires once the body is
      // read). It fires at most once, so `on` (no once-wrapper) is enough.
      k.res.on('close', onClose);
      if (!parsed.batch) {
        const answer = await serveCall(proxy, target, calls[0] as ParsedCall, info, identity, deadlines);
        k.res.off('close', onClose);
        hooks.responseHeaders.call(sink, [answer.record], meta);
        if (typeof answer.text === 'string' && (!gzipOn || answer.text.length <= GZIP_MIN_BYTES || !acceptsGzip(k.req.headers['accept-encoding']))) {
          // Nothing to compress: written directly once the loop turn ends (the outer middleware).
          directAnswers.set(k, { status: answer.status, body: answer.text, headers: sink });
          k.respond = false;
          return;
        }
        setStatic(k.res);
        sink.applyTo(k.res);
        k.status = answer.status;
        if (typeof answer.text === 'string') k.body = answer.text;
        else {
          // Pieces around raw result bytes: written as they are, with their length declared.
          k.length = answerBytes(answer.text);
          k.body = Readable.from(answer.text);
        }
        return;
      }
      if (calls.length > cfg.maxBatchSize) throw new ErrInvalidRequest(`batch of ${calls.length} requests exceeds server.maxBatchSize (${cfg.maxBatchSize})`);
      const run = (call: ParsedCall) => serveCall(proxy, target, call, info, identity, deadlines);
      let answers: CallAnswer[];
      if (calls.length <= cfg.batchConcurrency) answers = await Promise.all(calls.map(run));
      else {
        const limit = pLimit(cfg.batchConcurrency);
        answers = await Promise.all(calls.map((c) => limit(() => run(c))));
      }
      k.res.off('close', onClose);
      hooks.responseHeaders.call(
        sink,
        answers.map((a) => a.record),
        meta,
      );
      setStatic(k.res);
      sink.applyTo(k.res);
      k.status = 200;
      k.body = smallBatchText(answers) ?? Readable.from(streamArray(answers));
    } catch (e) {
      // Refused as a whole, no call routed (spec §4.1): an array gets one error per element.
      if (!k.res.headersSent) setStatic(k.res);
      meta.batch = await answerRefusal(k, asSvcError(e), refusal, body);
      hooks.responseHeaders.call(new ResponseHeaderSink(k.res), [], meta);
    } finally {
      scope?.dispose();
    }
  });
  return app;
}

/**
 * The non-empty, percent-decoded segments of a request path.
 * @throws ErrInvalidRequest on a malformed percent-encoding
 */
function pathSegments(path: string): string[] {
  const out: string[] = [];
  try {
    for (const s of path.split('/')) if (s !== '') out.push(decodeURIComponent(s));
  } catch {
    throw new ErrInvalidRequest(`invalid percent-encoding in path ${path}`);
  }
  return out;
}

/** Batch answers up to this many characters are written as one string (a stream costs more below it). */
const SMALL_BATCH_CHARS = 64 * 1024;

/**
 * A small batch answer as one string, or undefined when it is large (or holds raw result bytes)
 * and must stream (spec §4.2 #8): writing a stream costs a pipeline, an AbortController and more
 * per response, which dominate a small batch (issue #11).
 */
function smallBatchText(answers: readonly CallAnswer[]): string | undefined {
  let n = 2;
  for (const a of answers) {
    if (typeof a.text !== 'string') return undefined;
    n += a.text.length + 1;
    if (n > SMALL_BATCH_CHARS) return undefined;
  }
  return `[${(answers as ReadonlyArray<{ text: string }>).map((a) => a.text).join(',')}]`;
}

/** Yields a batch answer element by element (and piece by piece), so it is never one big string (spec §4.2 #8). */
function* streamArray(answers: readonly CallAnswer[]): Generator<string | Buffer> {
  if (answers.length === 0) {
    yield '[';
  }
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
function internalFailure(proxy: Proxy, call: ParsedCall, e: unknown, record = newExecutionRecord(call.method)): CallAnswer {
  // Log the original exception's stack: an ErrInternal wraps it as its cause.
  const original: unknown = e instanceof ErrInternal && e.cause !== undefined ? e.cause : e;
  proxy.logger.error({ err: original instanceof Error ? original.stack : String(original), method: call.method }, 'internal failure serving a call');
  const err = asSvcError(e);
  record.error = err;
  return { text: serializeError('null', toJsonRpcError(err, call.method, proxy.config.server.includeErrorDetails)), status: err.httpStatus, record };
}

/**
 * Serves one JSON-RPC call: resolves its network, builds its context with a deadline, runs
 * the directives hook and the network's handler, and serialises the answer with the caller's id.
 * Never rejects: a named error is the caller's answer; anything else is svc's own failure,
 * answered as an internal error with id null (spec §4.2 #6).
 */
async function serveCall(
  proxy: Proxy,
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
      if (call.networkId === undefined) throw new ErrNetworkNotSupported(`no network: call /${target.project.id}/evm/<chainId> or set the body field networkId`);
      const id = normaliseNetworkId(call.networkId);
      network = id ? await proxy.getNetwork(target.project, id) : undefined;
      if (!network) throw new ErrNetworkNotSupported(`network ${JSON.stringify(call.networkId)} is not supported by project ${target.project.id}`);
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
    const result = await network.handler(ctx);
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
    // Observation taps are guarded (core/hooks.ts guardObservationHooks): the answer always stands.
    if (ctx) proxy.hooks.callDone.call(ctx);
  }
}
