/**
 * One upstream's HTTP JSON-RPC transport: a keep-alive pool per origin, svc's own request ids, an answer read into one capped Buffer
 * and parsed once, and every upstream fault named here (the `upstreamFault` hook), where it arrives, with the upstream's secrets redacted.
 */
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { ErrUpstreamMalformedResponse, ErrUpstreamRequestTooLarge, SvcError } from '../wire/errors.ts';
import { decodeBody, RESPONSE_BYTES } from '../../lib/body.ts';
import { fetchAnswer, NEVER_ABORTED } from './answer-sink.ts';
import { createOriginPool, type RequestDispatcher, type UpstreamPoolOptions } from './outbound.ts';
import { arrayElements, scanAnswer } from '../../lib/json-scan.ts';
import { RAW_PARAMS_MIN_BYTES, rawParamsOf, RpcResult, serializeOutbound } from '../wire/jsonrpc.ts';
import { type FaultClassifier, nameUpstreamFault, type UpstreamFault } from '../wire/fault.ts';
import { rpcErrorFault, transportError } from './upstream-faults.ts';
import { excerptOf, Redactor, safeDecode, secretsOf } from '../../lib/redact.ts';

export { createOriginPool, type UpstreamPoolOptions } from './outbound.ts';
export { DeadlineReason, isDeadline } from './deadline.ts';

const CLOSE = Buffer.from('}');

/** Default `upstreams[].maxResponseSize`, bytes. */
export const DEFAULT_MAX_RESPONSE_SIZE = 256 * 1024 * 1024;

/** What one transport needs from its upstream's resolved config. */
export interface TransportConfig {
  /** Upstream id, for messages and details. */
  id: string;
  /** http(s) URL. */
  endpoint: string;
  /** `jsonRpc.headers`. */
  headers: Record<string, string>;
  /** `maxResponseSize`, bytes. */
  maxResponseSize: number;
  /** A plugin's dispatcher (the `upstreamDispatcher` hook), given the origin's pool; undefined: that pool. */
  dispatcher?: (pool: RequestDispatcher) => RequestDispatcher | undefined;
  /** The transport setting that needs a plugin's dispatcher (`jsonRpc.proxyPool`, `jsonRpc.enableGzip`), when one is set. */
  needsDispatcher?: string;
  /** Names error answers (the `upstreamFault` hook); unset: every fault is `ErrEndpointServerSideException` with the vendor's code. */
  classify?: FaultClassifier;
}

/** A built request body: a string, or (large params) pieces around the client's own params bytes, sent with their length declared. */
export interface OutboundBody {
  /** svc's id of this request. */
  id: number;
  /** The body as one string (the common case). */
  text?: string;
  /** The body as pieces, when the params are the client's raw bytes. */
  chunks?: Buffer[];
  /** Body size, bytes. */
  bytes: number;
}

/** Answers at least this large keep their result as a slice of the answer's bytes. */
const RAW_RESULT_MIN_BYTES = RAW_PARAMS_MIN_BYTES;

/** The HTTP side of one upstream. */
export class HttpTransport {
  /** The upstream's secret redactor, also used for its log lines. */
  readonly redactor: Redactor;
  private readonly pool: RequestDispatcher;
  /** What this transport opened and closes: the origin's pool when it is not shared, a plugin's dispatcher. */
  private readonly owned: RequestDispatcher[] = [];
  private readonly path: string;
  /** Through a plugin's dispatcher, each request names its origin (it may serve many); direct, the pool has it. */
  private readonly origin: string | undefined;
  private readonly headers: Record<string, string>;
  private lastId = 0;

  /**
   * @param cfg id, endpoint, headers and response cap
   * @param pool pool options (shared pools by origin)
   */
  constructor(
    private readonly cfg: TransportConfig,
    pool: UpstreamPoolOptions = {},
  ) {
    const url = new URL(cfg.endpoint);
    this.path = `${url.pathname || '/'}${url.search}`;
    // Header names are case-insensitive: one lower-cased entry each, the configured ones last.
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    for (const [k, v] of Object.entries(cfg.headers)) headers[k.toLowerCase()] = v;
    // URL user info becomes Basic auth unless an Authorization header is configured, which wins.
    if ((url.username || url.password) && headers.authorization === undefined) {
      headers.authorization = `Basic ${Buffer.from(`${safeDecode(url.username)}:${safeDecode(url.password)}`).toString('base64')}`;
    }
    this.headers = headers;
    const shared = pool.shared?.get(url.origin);
    const origin = shared ?? createOriginPool(url.origin, pool);
    if (pool.shared && !shared) pool.shared.set(url.origin, origin);
    if (!pool.shared) this.owned.push(origin);
    const custom = cfg.dispatcher?.(origin);
    if (custom) this.owned.push(custom);
    else if (cfg.needsDispatcher) {
      // Never send directly what the config routes through proxies or asks to compress.
      throw new Error(`upstream ${cfg.id}: ${cfg.needsDispatcher} is set but no plugin of this preset honours it (the outbound plugin does)`);
    }
    this.pool = custom ?? origin;
    this.origin = custom ? url.origin : undefined;
    this.redactor = new Redactor([...secretsOf(cfg.endpoint, cfg.headers), ...(custom?.secrets ?? [])]);
  }

  private newId(): number {
    this.lastId = this.lastId >= 2_000_000_000 ? 1 : this.lastId + 1;
    return this.lastId;
  }

  /** Builds the request body with svc's own id: svc's code only, so an exception here (params that cannot be serialised) is never the upstream's. */
  body(method: string, params: unknown): OutboundBody {
    const id = this.newId();
    const raw = rawParamsOf(params);
    if (raw) {
      const head = Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":`);
      return { id, chunks: [head, raw, CLOSE], bytes: head.length + raw.length + 1 };
    }
    const text = serializeOutbound(id, method, params);
    return { id, text, bytes: text.length };
  }

  /**
   * Sends a built body and reads the answer; throws only a {@link SvcError} (every failure is named here).
   * @param body from {@link body}
   * @param method the JSON-RPC method (some fault rules depend on it)
   * @param signal aborts the request; a {@link DeadlineReason} reason becomes a timeout
   * @param maxResponseSize cap for this answer, bytes (default the upstream's `maxResponseSize`)
   * @param extra headers of this request only (forwarded client headers); the configured ones win on a clash
   */
  async post(
    body: OutboundBody,
    method: string,
    signal: AbortSignal,
    maxResponseSize = this.cfg.maxResponseSize,
    extra?: Readonly<Record<string, string>>,
  ): Promise<RpcResult> {
    let status: number;
    let bytes: Buffer;
    const headers = extra ? { ...extra, ...this.headers } : this.headers;
    try {
      const opts: Dispatcher.DispatchOptions = body.chunks
        ? {
            path: this.path,
            method: 'POST',
            headers: { ...headers, 'content-length': String(body.bytes) },
            body: Readable.from(body.chunks, { objectMode: false }),
          }
        : { path: this.path, method: 'POST', headers, body: body.text };
      if (this.origin !== undefined) opts.origin = this.origin;
      ({ status, bytes } = await fetchAnswer(this.pool, opts, signal, maxResponseSize, this.cfg.id));
    } catch (e) {
      throw transportError(e, body.bytes, signal, this.cfg.id, this.redactor);
    }
    try {
      return this.parse(status, bytes, body.id, method);
    } finally {
      RESPONSE_BYTES.release(bytes.length);
    }
  }

  /**
   * Sends several calls as one JSON-RPC batch (spec §4.7); never rejects. An array answer is matched by svc's ids (a call it does not
   * answer fails naming its id); a single object, a non-JSON answer or a transport failure fails every call.
   * @param calls method and params of each call, in order
   * @param maxResponseSize cap of the whole answer, bytes
   * @returns one outcome per call, in order
   */
  async postBatch(calls: ReadonlyArray<{ method: string; params: unknown }>, maxResponseSize = this.cfg.maxResponseSize): Promise<Array<RpcResult | SvcError>> {
    const ids = calls.map(() => this.newId());
    const text = `[${calls.map((c, i) => serializeOutbound(ids[i] as number, c.method, c.params)).join(',')}]`;
    const up = this.cfg.id;
    let status: number;
    let bytes: Buffer;
    const never = NEVER_ABORTED;
    try {
      const opts: Dispatcher.DispatchOptions = { path: this.path, method: 'POST', headers: this.headers, body: text };
      if (this.origin !== undefined) opts.origin = this.origin;
      ({ status, bytes } = await fetchAnswer(this.pool, opts, never, maxResponseSize, up));
    } catch (e) {
      const err = transportError(e, text.length, never, this.cfg.id, this.redactor);
      return calls.map(() => err);
    }
    try {
      return this.splitBatch(status, bytes, calls, ids);
    } finally {
      RESPONSE_BYTES.release(bytes.length);
    }
  }

  /** Matches a batch answer's elements to the calls by svc's ids (see {@link postBatch}). */
  private splitBatch(
    status: number,
    bytes: Buffer,
    calls: ReadonlyArray<{ method: string; params: unknown }>,
    ids: readonly number[],
  ): Array<RpcResult | SvcError> {
    const up = this.cfg.id;
    const body = decodeBody(bytes);
    let doc: unknown;
    try {
      doc = JSON.parse(body);
    } catch {
      const err = new ErrUpstreamMalformedResponse(`upstream ${up} answered a batch with non-JSON (HTTP ${status}): ${this.excerpt(body)}`, {
        details: { upstream: up },
      });
      return calls.map(() => err);
    }
    if (!Array.isArray(doc)) {
      // One object for a batch fails every call (spec §4.7 #4): a JSON-RPC error (rate limit, auth...) keeps its classification;
      // anything else names the ids svc sent, since the object's own id answers none of them.
      let err: SvcError = new ErrUpstreamMalformedResponse(
        `upstream ${up} answered a batch of ${ids.length} requests (${idList(ids)}) with a single object${this.singleId(doc)}`,
        { details: { upstream: up } },
      );
      try {
        if (status >= 400 || (doc as { error?: unknown } | null)?.error) this.parse(status, bytes, Number.NaN, calls[0]?.method ?? '');
      } catch (e) {
        if (e instanceof SvcError && !(e instanceof ErrUpstreamMalformedResponse)) err = e;
      }
      return calls.map(() => err);
    }
    // Each element keeps its own text, so the single-answer checks (a member given twice) see it.
    const byId = new Map<number, string>();
    const texts = arrayElements(body);
    (doc as unknown[]).forEach((el, k) => {
      const id = (el as { id?: unknown } | null)?.id;
      const n = typeof id === 'number' ? id : typeof id === 'string' && /^\d+$/.test(id) ? Number(id) : undefined;
      if (n !== undefined) byId.set(n, texts[k]?.text ?? JSON.stringify(el));
    });
    return calls.map((c, i) => {
      const id = ids[i] as number;
      const one = byId.get(id);
      if (one === undefined)
        return new ErrUpstreamMalformedResponse(`upstream ${up} sent no response for request id ${id} in a batch`, { details: { upstream: up } });
      try {
        // A small element is parsed from its text (no copy into a Buffer); a large one keeps its result as bytes, like a single answer.
        return one.length < RAW_RESULT_MIN_BYTES ? this.parseText(200, one, undefined, id, c.method) : this.parse(200, Buffer.from(one), id, c.method);
      } catch (e) {
        return e instanceof SvcError ? e : new ErrUpstreamMalformedResponse(String(e), { details: { upstream: up } });
      }
    });
  }

  /** ` (id <its id>)` of a single object answering a batch, redacted and bounded; empty without one. */
  private singleId(doc: unknown): string {
    const id = doc !== null && typeof doc === 'object' ? (doc as { id?: unknown }).id : undefined;
    return id === undefined ? '' : ` (id ${this.redactor.text(JSON.stringify(id) ?? '').slice(0, 100)})`;
  }

  /** {@link body} then {@link post}: for internal calls (probes) outside any hook chain. */
  send(method: string, params: unknown, signal: AbortSignal): Promise<RpcResult> {
    return this.post(this.body(method, params), method, signal);
  }

  private parse(status: number, bytes: Buffer, id: number, method: string): RpcResult {
    return this.parseText(status, decodeBody(bytes), bytes, id, method);
  }

  /** {@link parse} of an answer already decoded; `bytes` are its bytes when a large result may be kept as a slice of them. */
  private parseText(status: number, text: string, bytes: Buffer | undefined, id: number, method: string): RpcResult {
    const up = this.cfg.id;
    if (status === 413)
      throw new ErrUpstreamRequestTooLarge(`upstream ${up} refused the request as too large (HTTP 413)`, { details: { upstream: up }, upstreamStatus: 413 });
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      if (status >= 400) return this.throwFault({ status, message: this.excerpt(text) || `HTTP ${status}`, method });
      throw new ErrUpstreamMalformedResponse(`upstream ${up} answered non-JSON (HTTP ${status}): ${this.excerpt(text)}`, {
        details: { upstream: up },
        upstreamStatus: status,
      });
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      if (status >= 400) return this.throwFault({ status, message: this.excerpt(text), method });
      throw new ErrUpstreamMalformedResponse(`upstream ${up} answered a JSON value that is not a JSON-RPC response`, { details: { upstream: up } });
    }
    // One parse, one truth (as for requests): with a member given twice, the parsed value (what
    // consensus votes on) and the raw bytes (what is spliced, cached and served) could differ.
    const scan = scanAnswer(text);
    if (scan.duplicate !== undefined) {
      throw new ErrUpstreamMalformedResponse(`upstream ${up} answered member "${this.redactor.text(scan.duplicate)}" twice`, { details: { upstream: up } });
    }
    const o = body as { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    if (o.error && typeof o.error === 'object') return this.throwFault(rpcErrorFault(status, text, o.error, method, this.redactor));
    if (status >= 400) return this.throwFault({ status, message: this.excerpt(text), method });
    if (!('result' in o)) throw new ErrUpstreamMalformedResponse(`upstream ${up} answered without result or error`, { details: { upstream: up } });
    if (o.id !== id && o.id !== String(id)) {
      throw new ErrUpstreamMalformedResponse(`upstream ${up} answered id ${this.redactor.text(JSON.stringify(o.id) ?? '').slice(0, 100)} to request id ${id}`, {
        details: { upstream: up },
      });
    }
    // A large answer keeps its result as a slice of its bytes, so the decoded text can go once parsed (ASCII only: char = byte
    // offsets). The range is the scan's: the member JSON.parse read, whatever its name's spelling.
    const at = scan.result;
    let r: RpcResult;
    if (at && bytes && bytes.length >= RAW_RESULT_MIN_BYTES && bytes.length === text.length) r = RpcResult.fromBytes(o.result, bytes.subarray(at[0], at[1]));
    else r = new RpcResult(o.result, text, at);
    r.upstreamId = up;
    return r;
  }

  private throwFault(f: UpstreamFault): never {
    throw nameUpstreamFault(f, this.cfg.id, this.cfg.classify);
  }

  /** A short, redacted excerpt of an answer body for messages (redacted before it is cut, so no secret is cut in half). */
  private excerpt(text: string): string {
    return excerptOf(this.redactor, text);
  }

  /** Closes what this transport opened (shutdown); a pool shared by origin is closed by its owner. */
  async close(): Promise<void> {
    await Promise.all(this.owned.map((d) => d.close?.().catch(() => undefined)));
  }

  /** Aborts every in-flight request and closes at once (what this transport opened only). */
  async destroy(): Promise<void> {
    await Promise.all(this.owned.map((d) => d.destroy?.().catch(() => undefined)));
  }
}

const MAX_LISTED_IDS = 10;

/** A batch's request ids for a message, bounded (a batch may hold thousands): `ids 5, 6, 7`, or the first ten then `… and <n> more`. */
export function idList(ids: readonly number[]): string {
  const shown = ids.slice(0, MAX_LISTED_IDS).join(', ');
  const more = ids.length - MAX_LISTED_IDS;
  return `${ids.length === 1 ? 'id' : 'ids'} ${shown}${more > 0 ? ` … and ${more} more` : ''}`;
}
