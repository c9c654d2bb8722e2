/**
 * JSON-RPC 2.0 wire handling (spec §4.1, §4.2): the caller's id kept byte-for-byte, svc's own ids
 * upstream, and an upstream's raw result bytes spliced into answers instead of re-serialised.
 */
import { ErrInvalidRequest, ErrJsonRpcRequestUnmarshal, type SvcError } from './errors.ts';
import { arrayElements, extractTopLevelValue, findTopLevelValue, nestingDepth, scanMembers, skipWs, type MemberScan } from '../../lib/json-scan.ts';

export { extractTopLevelValue } from '../../lib/json-scan.ts';

/** A JSON-RPC id as parsed (numbers above 2^53 are only kept exactly in {@link ParsedCall.idRaw}). */
export type JsonRpcId = string | number | null;

/** One inbound call after parsing (one element of a batch, or the single request). */
export interface ParsedCall {
  /** The caller's id as raw JSON text, written back verbatim (`null` when absent). */
  idRaw: string;
  /** JSON-RPC method; empty string when the element was invalid. */
  method: string;
  /** Params as sent: an array, an object, or undefined when omitted (viem omits empty params). */
  params: unknown;
  /** Body field `networkId` (`evm:<chainId>`), spec §2.8 "directive-adjacent inputs". */
  networkId?: string;
  /** Set when the element is not a valid request: answered with this error, caller's id kept. */
  invalid?: SvcError;
}

/** Result of parsing an inbound body. */
export interface ParsedBody {
  /** True when the body's first non-blank byte is `[` (spec §4.2 #1). */
  batch: boolean;
  calls: ParsedCall[];
}

/** Limits applied while parsing an inbound body. */
export interface ParseLimits {
  /** `server.maxJsonDepth`: deepest nesting of one request object (the object itself is 1). */
  maxDepth: number;
}

/** Default {@link ParseLimits}. */
export const DEFAULT_PARSE_LIMITS: ParseLimits = { maxDepth: 64 };

/** Longest accepted method name, characters. */
export const MAX_METHOD_LENGTH = 256;
/** Characters a method name may hold: a bounded alphabet, so matching and labels stay cheap. */
const METHOD_NAME = /^[A-Za-z0-9_.:-]+$/;

/** Params of at least this many bytes are sent upstream as the client's own bytes: never re-serialised, never copied into a second string. */
export const RAW_PARAMS_MIN_BYTES = 64 * 1024;

const rawParams = new WeakMap<object, Buffer>();

/** The client's own bytes for a large params value still the very object parsed (a plugin that rewrites params makes a new one, which has none). */
export function rawParamsOf(params: unknown): Buffer | undefined {
  return params !== null && typeof params === 'object' ? rawParams.get(params) : undefined;
}

/**
 * Remembers a large params value's raw bytes (ASCII bodies only: char = byte offsets), unless a number in them would not survive a
 * parse: then the parsed value, which cache and multiplexing keys hash, goes upstream (one parse, one truth).
 */
function keepRawParams(call: ParsedCall, text: string, raw: Buffer | undefined, from: number, lossy: boolean): void {
  const p = call.params;
  if (!raw || lossy || call.invalid || p === null || typeof p !== 'object') return;
  const r = findTopLevelValue(text, 'params', from);
  if (r && r[1] - r[0] >= RAW_PARAMS_MIN_BYTES) rawParams.set(p, raw.subarray(r[0], r[1]));
}

function tooDeep(limit: number): ErrInvalidRequest {
  return new ErrInvalidRequest(`invalid request: JSON nesting deeper than server.maxJsonDepth (${limit})`);
}

/**
 * Parses an inbound body; a structurally wrong batch element gets `invalid` instead of throwing.
 * @param text the UTF-8 body
 * @param limits nesting limit (svc's own, README "Limits")
 * @param raw the body's bytes, when the caller has them: large params are forwarded as these bytes ({@link rawParamsOf})
 * @throws ErrJsonRpcRequestUnmarshal (HTTP 400) when the body is not JSON (first, spec §4.2 #5)
 * @throws ErrInvalidRequest when a single request is nested deeper than `limits.maxDepth` (a linear scan, before anything recursive)
 */
export function parseRequestBody(text: string, limits: ParseLimits = DEFAULT_PARSE_LIMITS, raw?: Buffer): ParsedBody {
  let doc: unknown;
  try {
    doc = JSON.parse(text); // V8 parses iteratively: safe at any depth
  } catch (e) {
    throw new ErrJsonRpcRequestUnmarshal('failed to parse json-rpc request', { cause: e });
  }
  const batch = text.charCodeAt(skipWs(text, 0)) === 91; /* [ */
  if (!batch && nestingDepth(text, limits.maxDepth) > limits.maxDepth) throw tooDeep(limits.maxDepth);
  // Byte offsets equal character offsets only in an ASCII body.
  const bytes = raw !== undefined && raw.length === text.length && text.length >= RAW_PARAMS_MIN_BYTES ? raw : undefined;
  if (Array.isArray(doc)) {
    // Raw element texts give each call its id byte-for-byte (integers above 2^53, `1.0`, `1e3`)
    // and its depth; one linear pass over the body.
    const elements = arrayElements(text);
    return {
      batch: true,
      calls: doc.map((el, i) => {
        const scanned = elements[i];
        if (scanned && scanned.depth > limits.maxDepth)
          return { idRaw: rawId(scanned.text) ?? 'null', method: '', params: undefined, invalid: tooDeep(limits.maxDepth) };
        const scan = scanned ? scanMembers(scanned.text) : undefined;
        const c = toCall(el, scanned?.text, scan);
        if (scanned) keepRawParams(c, text, bytes, scanned.start, scan?.lossyNumber === true);
        return c;
      }),
    };
  }
  const scan = scanMembers(text);
  const single = toCall(doc, text, scan);
  keepRawParams(single, text, bytes, 0, scan.lossyNumber);
  return { batch: false, calls: [single] };
}

/** Raw text of an element's `id` when it is a string, a number or null (else undefined). */
function rawId(elementText: string): string | undefined {
  const t = extractTopLevelValue(elementText, 'id');
  if (t === undefined) return undefined;
  const c = t.charCodeAt(0); // a string, a number (digit or minus), or null
  if (c === 34 || c === 45 || (c >= 48 && c <= 57) || t === 'null') return t;
  return undefined;
}

/** A member name given twice (spec §4.2; -32600): the client's name, bounded by {@link scanMembers}, JSON-escaped so it cannot break the message. */
function duplicateMember(name: string, topLevel: boolean): ErrInvalidRequest {
  return new ErrInvalidRequest(`invalid request: member ${JSON.stringify(name)} appears twice${topLevel ? '' : ' in one object of the request'}`);
}

function toCall(el: unknown, text: string | undefined, scan: MemberScan | undefined): ParsedCall {
  if (el === null || typeof el !== 'object' || Array.isArray(el)) {
    return { idRaw: 'null', method: '', params: undefined, invalid: new ErrInvalidRequest('invalid request: not a JSON-RPC request object') };
  }
  const o = el as Record<string, unknown>;
  const idOk = o.id === undefined || o.id === null || typeof o.id === 'string' || typeof o.id === 'number';
  const raw = idOk && o.id !== undefined ? ((text !== undefined ? rawId(text) : undefined) ?? JSON.stringify(o.id)) : undefined;
  const method = typeof o.method === 'string' ? o.method : '';
  // One parse, one truth: a name given twice would let the raw scans (id, params) and the parsed
  // value disagree about what the client asked, so the element is refused before anything reads it.
  if (scan?.duplicate !== undefined)
    return {
      idRaw: scan.topLevel && scan.duplicate === 'id' ? 'null' : (raw ?? 'null'),
      method: '',
      params: undefined,
      invalid: duplicateMember(scan.duplicate, scan.topLevel === true),
    };
  const call: ParsedCall = { idRaw: raw ?? 'null', method: '', params: o.params };
  if (typeof o.networkId === 'string') call.networkId = o.networkId;
  if (!idOk) call.invalid = new ErrInvalidRequest('invalid request: id must be a string, a number or null');
  else if (o.jsonrpc !== '2.0') call.invalid = new ErrInvalidRequest('invalid request: "jsonrpc" must be "2.0"');
  else if (typeof o.method !== 'string' || o.method === '') call.invalid = new ErrInvalidRequest('invalid request: "method" must be a non-empty string');
  else if (method.length > MAX_METHOD_LENGTH || !METHOD_NAME.test(method)) {
    // The name is not echoed: it may be megabytes long.
    call.invalid = new ErrInvalidRequest(`invalid request: "method" must be at most ${MAX_METHOD_LENGTH} characters of [A-Za-z0-9_.:-]`);
  } else if (o.params !== undefined && o.params !== null && typeof o.params !== 'object')
    call.invalid = new ErrInvalidRequest('invalid request: "params" must be an array or an object');
  // An invalid element never carries its method onwards (labels, logs, matching).
  if (!call.invalid) call.method = method;
  return call;
}

/** A successful call result; keeps the upstream's raw body so an unchanged result is spliced into the answer, not re-serialised. */
export class RpcResult {
  /** Id of the upstream that produced it, when known. */
  upstreamId?: string;
  /** True when served from a cache tier: tip checks and head observation skip it. */
  fromCache = false;
  private cachedJson?: string;
  /** A slice of a large upstream answer, or a cache entry's bytes: written as they are, never decoded into a second string. */
  private rawBytes?: Buffer;
  /** {@link UNPARSED} until a lazy result is first read. */
  private value: unknown;

  /**
   * @param result the parsed result value
   * @param sourceText the upstream's whole response body, when `result` came from it unchanged
   * @param resultAt `[start, end)` of the result in `sourceText` when the answer was scanned (`scanAnswer`): no second scan
   */
  constructor(
    result: unknown,
    private readonly sourceText?: string,
    private readonly resultAt?: readonly [number, number],
  ) {
    this.value = result;
  }

  /**
   * The parsed value. A lazy result ({@link RpcResult.lazy}) is parsed on first read: a cache hit nobody inspects is never parsed.
   * @throws SyntaxError only if a lazy result was built from text that is not JSON
   */
  get result(): unknown {
    if (this.value === UNPARSED) this.value = JSON.parse(this.cachedJson ?? (this.rawBytes as Buffer).toString('utf8'));
    return this.value;
  }

  /** A result whose raw bytes (`bytes`, the value's exact JSON) are a slice of the upstream's answer buffer. */
  static fromBytes(result: unknown, bytes: Buffer): RpcResult {
    const r = new RpcResult(result);
    r.rawBytes = bytes;
    return r;
  }

  /** A result known only by its exact JSON text or bytes (a cache hit): written as is, parsed only if a plugin reads {@link result}. */
  static lazy(wire: string | Buffer): RpcResult {
    const r = new RpcResult(UNPARSED);
    if (typeof wire === 'string') r.cachedJson = wire;
    else r.rawBytes = wire;
    return r;
  }

  /** JSON text of the result: raw upstream bytes where possible. */
  json(): string {
    if (this.cachedJson !== undefined) return this.cachedJson;
    let out: string | undefined;
    if (this.rawBytes !== undefined) out = this.rawBytes.toString('utf8');
    else {
      const r = this.value;
      if (this.sourceText !== undefined && ((r !== null && typeof r === 'object') || typeof r === 'number')) {
        out = this.resultAt ? this.sourceText.slice(this.resultAt[0], this.resultAt[1]) : extractTopLevelValue(this.sourceText, 'result');
      }
      out ??= JSON.stringify(r) ?? 'null';
    }
    this.cachedJson = out;
    return out;
  }

  /** What to write for the result: its raw bytes when it has them (no copy), else {@link json}. */
  wire(): string | Buffer {
    return this.rawBytes ?? this.json();
  }

  /**
   * A deep copy for another caller (multiplexing followers, spec §4.6 #4): the value is cloned, the immutable raw bytes shared (no
   * re-serialising); a lazy result never parsed stays lazy.
   */
  copy(): RpcResult {
    const r = new RpcResult(this.value === UNPARSED ? UNPARSED : structuredClone(this.value), this.sourceText, this.resultAt);
    r.rawBytes = this.rawBytes;
    r.cachedJson = this.cachedJson;
    r.upstreamId = this.upstreamId;
    r.fromCache = this.fromCache;
    return r;
  }

  /** A new result carrying a changed value (drops the raw bytes, keeps the upstream id). */
  withResult(result: unknown): RpcResult {
    const r = new RpcResult(result);
    r.upstreamId = this.upstreamId;
    r.fromCache = this.fromCache;
    return r;
  }

  /** True for `null`, `"0x"`, `[]`, `{}` and `""`: "this node does not have it (yet)". */
  isEmpty(): boolean {
    const r = this.result;
    if (r === null || r === undefined || r === '' || r === '0x') return true;
    if (Array.isArray(r)) return r.length === 0;
    if (typeof r === 'object') return Object.keys(r as object).length === 0;
    return false;
  }
}

const UNPARSED: unique symbol = Symbol('svc.rpcResult.unparsed');

/** An answer as written: one string, or pieces (strings and raw result bytes) written in order. */
export type AnswerBody = string | Array<string | Buffer>;

/** Serialises one response object with the caller's raw id. */
export function serializeResult(idRaw: string, result: RpcResult): AnswerBody {
  const w = result.wire();
  if (typeof w === 'string') return `{"jsonrpc":"2.0","id":${idRaw},"result":${w}}`;
  return [`{"jsonrpc":"2.0","id":${idRaw},"result":`, w, '}'];
}

/** Byte length of an answer body. */
export function answerBytes(body: AnswerBody): number {
  if (typeof body === 'string') return Buffer.byteLength(body);
  let n = 0;
  for (const p of body) n += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
  return n;
}

/** Serialises one error response with the caller's raw id. */
export function serializeError(idRaw: string, error: { code: number; message: string; data?: unknown; raw?: string }): string {
  if (error.raw !== undefined) return `{"jsonrpc":"2.0","id":${idRaw},"error":${error.raw}}`;
  const { code, message, data } = error;
  return `{"jsonrpc":"2.0","id":${idRaw},"error":${JSON.stringify(data === undefined ? { code, message } : { code, message, data })}}`;
}

/** Outbound request body with svc's own id (callers' ids never go upstream). */
export function serializeOutbound(id: number, method: string, params: unknown): string {
  return params === undefined
    ? `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)}}`
    : `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`;
}
