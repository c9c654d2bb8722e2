/**
 * The HTTP layer (spec §4.1, §4.2): a thin Koa adapter that parses, builds one CallContext
 * per call, runs the network's composed handler and writes the answer. No feature logic
 * lives here (DESIGN: koa). The core writes only what every response carries: content type,
 * `X-SVC-Version`, `X-SVC-Commit` and `server.responseHeaders` (spec §9).
 */
import { Readable } from 'node:stream';
import Koa from 'koa';
import Router from '@koa/router';
import getRawBody from 'raw-body';
import picomatch from 'picomatch';
import pLimit from 'p-limit';
import { newExecutionRecord, type CallContext, type ExecutionRecord, type HttpRequestInfo } from './context.ts';
import {
  asSvcError,
  ErrInvalidRequest,
  ErrNetworkNotSupported,
  ErrProjectNotFound,
  ErrRequestTooLarge,
  SvcError,
  toJsonRpcError,
} from './errors.ts';
import { parseRequestBody, serializeError, serializeResult, type ParsedCall } from './jsonrpc.ts';
import type { Network } from './registry/network.ts';
import type { Project } from './registry/project.ts';
import { DeadlineReason } from './registry/upstream.ts';
import type { Proxy } from './proxy.ts';
import type { HeaderSink, ResponseMeta } from './hooks.ts';

/** Where a request is routed: a project and, when the URL names one, a network. */
export interface RouteTarget {
  project: Project;
  /** Network from the URL; undefined when the body's `networkId` must name it. */
  network?: Network;
}

/** One serialised call answer. */
interface CallAnswer {
  text: string;
  status: number;
  record: ExecutionRecord;
}

/**
 * Resolves the project and network named by a path (spec §4.1): a configured project id
 * first, then `server.aliasing.rules` on the Host; a numeric segment is a chain id only after
 * aliasing. Throws `ErrProjectNotFound` / `ErrNetworkNotSupported` (HTTP 404).
 */
export async function resolveTarget(proxy: Proxy, segments: readonly string[], host: string, aliasMatchers: readonly AliasMatcher[]): Promise<RouteTarget> {
  let project = segments[0] !== undefined ? proxy.projects.get(segments[0]) : undefined;
  let rest: string[];
  if (project) rest = segments.slice(1);
  else {
    const rule = aliasMatchers.find((m) => m.match(host));
    if (!rule) throw new ErrProjectNotFound(`project "${segments[0] ?? ''}" not found`);
    project = proxy.projects.get(rule.rule.serveProject);
    if (!project) throw new ErrProjectNotFound(`aliasing rule serves project "${rule.rule.serveProject}", which is not configured`);
    rest = [...segments];
    if (rule.rule.serveArchitecture) {
      rest = rule.rule.serveChain !== undefined ? ['evm', String(rule.rule.serveChain), ...rest] : ['evm', ...rest];
    }
  }
  if (rest.length === 0) return { project };
  if (rest.length === 2 && rest[0] === 'evm') {
    const chain = rest[1] as string;
    if (/^\d+$/.test(chain)) {
      const network = await proxy.getNetwork(project, `evm:${Number(chain)}`);
      if (network) return { project, network };
    }
    throw new ErrNetworkNotSupported(`network evm:${chain} is not supported by project ${project.id}`);
  }
  if (rest.length === 1) {
    const network = project.aliases.get(rest[0] as string);
    if (network) return { project, network };
    throw new ErrNetworkNotSupported(`network alias "${rest[0]}" is not known in project ${project.id}`);
  }
  throw new ErrNetworkNotSupported(`path /${segments.join('/')} names no network`);
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

function httpInfo(k: Koa.Context): HttpRequestInfo {
  const query: Record<string, string> = {};
  for (const [key, v] of Object.entries(k.query)) {
    const first = Array.isArray(v) ? v[0] : v;
    if (first !== undefined) query[key] = first;
  }
  const hostHeader = k.request.headers.host ?? '';
  return {
    headers: k.request.headers,
    query,
    remoteAddress: k.req.socket.remoteAddress ?? '',
    host: hostHeader.replace(/:\d+$/, '').toLowerCase(),
    path: k.path,
  };
}

/**
 * Builds the Koa application of a proxy.
 * @param proxy the proxy whose hooks and registry serve requests
 */
export function createServer(proxy: Proxy): Koa {
  const app = new Koa();
  const cfg = proxy.config.server;
  const hooks = proxy.hooks;
  const aliasMatchers: AliasMatcher[] = cfg.aliasing.rules.map((rule) => ({ rule, match: picomatch(rule.matchDomain, { nocase: true, dot: true }) }));
  const staticHeaders: Record<string, string> = {
    // Set before the body so Koa does not add a charset (spec §4.5: `application/json`).
    'Content-Type': 'application/json',
    'X-SVC-Version': proxy.version,
    'X-SVC-Commit': proxy.commit,
    ...cfg.responseHeaders,
  };

  app.on('error', (err: Error) => proxy.logger.debug({ err: err.message }, 'http error'));

  // Every response, early errors included, carries the core headers (spec §9).
  app.use(async (k, next) => {
    k.set(staticHeaders);
    await next();
  });

  const router = new Router();
  hooks.routes.call(router);
  app.use(router.routes());

  app.use(async (k) => {
    const info = httpInfo(k);
    if (k.method === 'OPTIONS') {
      k.status = 204;
      return;
    }
    if (k.method !== 'POST') {
      // Non-POST on proxy paths is a healthcheck (spec §4.1); the healthcheck plugin serves
      // richer answers on its own routes.
      k.body = JSON.stringify({ status: 'OK', message: 'svc is serving' });
      return;
    }
    const sink: HeaderSink = { set: (n, v) => k.set(n, v) };
    const meta: ResponseMeta = { batch: false, http: info };
    let target: RouteTarget;
    let text: string;
    try {
      let segments: string[];
      try {
        segments = k.path.split('/').filter(Boolean).map((s) => decodeURIComponent(s));
      } catch {
        throw new ErrInvalidRequest(`invalid percent-encoding in path ${k.path}`);
      }
      target = await resolveTarget(proxy, segments, info.host, aliasMatchers);
      meta.project = target.project;
      try {
        text = await getRawBody(k.req, { limit: cfg.maxBodySize, encoding: 'utf8', length: k.request.headers['content-length'] });
      } catch (e) {
        const err = e as { type?: string; message: string };
        if (err.type === 'entity.too.large') throw new ErrRequestTooLarge(`request body exceeds server.maxBodySize (${cfg.maxBodySize} bytes)`);
        throw new ErrInvalidRequest(`cannot read request body: ${err.message}`);
      }
      const identity = await hooks.authenticate.promise(info, target.project);
      const parsed = parseRequestBody(text);
      const calls = parsed.calls;
      meta.batch = parsed.batch;
      const aborters = new Set<AbortController>();
      const onClose = () => {
        if (!k.res.writableFinished) for (const ac of aborters) ac.abort(new Error('client closed the connection'));
      };
      // res 'close' fires early only when the client goes away (req 'close' fires once the body is read).
      k.res.once('close', onClose);
      const run = (call: ParsedCall) =>
        runCall(proxy, target, call, info, identity, aborters).catch((e: unknown) => internalFailure(proxy, call, e));
      if (!parsed.batch) {
        const answer = await run(calls[0] as ParsedCall);
        k.res.off('close', onClose);
        hooks.responseHeaders.call(sink, [answer.record], meta);
        k.status = answer.status;
        k.body = answer.text;
        return;
      }
      if (calls.length > cfg.maxBatchSize) throw new ErrInvalidRequest(`batch of ${calls.length} requests exceeds server.maxBatchSize (${cfg.maxBatchSize})`);
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
      k.status = 200;
      k.body = Readable.from(streamArray(answers));
    } catch (e) {
      const err = asSvcError(e);
      if (!meta.batch || !(err instanceof SvcError)) hooks.responseHeaders.call(sink, [], meta);
      k.status = err.httpStatus;
      k.body = serializeError('null', toJsonRpcError(err, undefined, cfg.includeErrorDetails));
    }
  });
  return app;
}

/** Yields a batch answer element by element, so it is never one big string (spec §4.2 #8). */
function* streamArray(answers: readonly CallAnswer[]): Generator<string> {
  if (answers.length === 0) {
    yield '[]';
    return;
  }
  yield '[';
  for (let i = 0; i < answers.length; i++) yield i === 0 ? (answers[i] as CallAnswer).text : `,${(answers[i] as CallAnswer).text}`;
  yield ']';
}

/** svc's own code failed for one element: id null, -32603 (spec §4.2 #6). */
function internalFailure(proxy: Proxy, call: ParsedCall, e: unknown): CallAnswer {
  proxy.logger.error({ err: e instanceof Error ? e.stack : String(e), method: call.method }, 'internal failure serving a call');
  const err = asSvcError(e);
  const record = newExecutionRecord(call.method);
  record.error = err;
  return { text: serializeError('null', toJsonRpcError(err, call.method, proxy.config.server.includeErrorDetails)), status: err.httpStatus, record };
}

/**
 * Serves one JSON-RPC call: resolves its network, builds its context with a deadline, runs
 * the directives hook and the network's handler, and serialises the answer with the caller's id.
 */
async function runCall(
  proxy: Proxy,
  target: RouteTarget,
  call: ParsedCall,
  http: HttpRequestInfo,
  identity: CallContext['identity'],
  aborters: Set<AbortController>,
): Promise<CallAnswer> {
  const cfg = proxy.config.server;
  const record = newExecutionRecord(call.method);
  let ctx: CallContext | undefined;
  let timer: NodeJS.Timeout | undefined;
  let ac: AbortController | undefined;
  try {
    if (call.invalid) throw call.invalid;
    let network = target.network;
    if (!network) {
      if (call.networkId === undefined) throw new ErrNetworkNotSupported(`no network: call /${target.project.id}/evm/<chainId> or set the body field networkId`);
      const id = normaliseNetworkId(call.networkId);
      network = id ? await proxy.getNetwork(target.project, id) : undefined;
      if (!network) throw new ErrNetworkNotSupported(`network ${JSON.stringify(call.networkId)} is not supported by project ${target.project.id}`);
    }
    ac = new AbortController();
    aborters.add(ac);
    const controller = ac;
    timer = setTimeout(() => controller.abort(new DeadlineReason(`call exceeded server.maxTimeout (${cfg.maxTimeoutMs} ms)`)), cfg.maxTimeoutMs);
    ctx = {
      project: target.project,
      network,
      request: call,
      directives: {},
      identity,
      http,
      signal: ac.signal,
      deadline: Date.now() + cfg.maxTimeoutMs,
      record,
      finality: 'unknown',
      internal: false,
      state: new Map(),
    };
    ctx.directives = proxy.hooks.directives.call(ctx.directives, ctx);
    record.routed = true;
    const result = await network.handler(ctx);
    return { text: serializeResult(call.idRaw, result), status: 200, record };
  } catch (e) {
    if (!(e instanceof SvcError)) throw e;
    record.error = e;
    return { text: serializeError(call.idRaw, toJsonRpcError(e, call.method, cfg.includeErrorDetails)), status: e.httpStatus, record };
  } finally {
    if (timer) clearTimeout(timer);
    if (ac) aborters.delete(ac);
    record.durationMs = performance.now() - record.startedAt;
    if (ctx) proxy.hooks.callDone.call(ctx);
  }
}
