/**
 * JSON-RPC 2.0 wire handling (spec §4.1, §4.2): inbound parsing with the caller's id kept
 * byte-for-byte, outbound request bodies with svc's own ids, and response serialisation that
 * splices an upstream's raw result bytes instead of re-serialising them.
 */
import { parse as losslessParse, isLosslessNumber } from 'lossless-json';
import { ErrInvalidRequest, ErrJsonRpcRequestUnmarshal, type SvcError } from './errors.ts';

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

/** Numbers JSON.parse would not round-trip: long digit runs, and ids written with a fraction or exponent. */
const UNSAFE_NUMBER = /\d{16,}|"id"\s*:\s*-?\d+[.eE]/;

/**
 * Parses an inbound body. Throws {@link ErrJsonRpcRequestUnmarshal} (HTTP 400) when the body is
 * not JSON; never throws for a structurally wrong element, which gets `invalid` instead.
 * @param text the UTF-8 body
 */
export function parseRequestBody(text: string): ParsedBody {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new ErrJsonRpcRequestUnmarshal('failed to parse json-rpc request', { cause: e });
  }
  // Integers above 2^53 lose precision in JSON.parse: re-read ids losslessly only when the
  // body holds a long digit run, so the common path pays nothing.
  let lossless: unknown;
  if (UNSAFE_NUMBER.test(text)) {
    try {
      lossless = losslessParse(text);
    } catch {
      lossless = undefined;
    }
  }
  if (Array.isArray(doc)) {
    const ll = Array.isArray(lossless) ? lossless : undefined;
    return { batch: true, calls: doc.map((el, i) => toCall(el, ll?.[i])) };
  }
  return { batch: false, calls: [toCall(doc, lossless)] };
}

function idText(id: unknown, llId: unknown): string | undefined {
  if (id === undefined) return undefined;
  if (isLosslessNumber(llId)) return llId.value;
  if (id === null || typeof id === 'string' || typeof id === 'number') return JSON.stringify(id);
  return undefined;
}

function toCall(el: unknown, ll: unknown): ParsedCall {
  if (el === null || typeof el !== 'object' || Array.isArray(el)) {
    return { idRaw: 'null', method: '', params: undefined, invalid: new ErrInvalidRequest('invalid request: not a JSON-RPC request object') };
  }
  const o = el as Record<string, unknown>;
  const llId = ll && typeof ll === 'object' ? (ll as Record<string, unknown>).id : undefined;
  const raw = idText(o.id, llId);
  const call: ParsedCall = { idRaw: raw ?? 'null', method: typeof o.method === 'string' ? o.method : '', params: o.params };
  if (typeof o.networkId === 'string') call.networkId = o.networkId;
  if (raw === undefined && o.id !== undefined) call.invalid = new ErrInvalidRequest('invalid request: id must be a string, a number or null');
  else if (o.jsonrpc !== '2.0') call.invalid = new ErrInvalidRequest('invalid request: "jsonrpc" must be "2.0"');
  else if (typeof o.method !== 'string' || o.method === '') call.invalid = new ErrInvalidRequest('invalid request: "method" must be a non-empty string');
  else if (o.params !== undefined && o.params !== null && typeof o.params !== 'object') call.invalid = new ErrInvalidRequest('invalid request: "params" must be an array or an object');
  return call;
}

/**
 * A successful call result. Keeps the upstream's raw body so the unchanged result is spliced
 * into the client's response instead of being re-serialised.
 */
export class RpcResult {
  /** Id of the upstream that produced it, when known. */
  upstreamId?: string;
  /** True when served from a cache tier (later issue). */
  fromCache = false;
  private cachedJson?: string;

  /**
   * @param result the parsed result value
   * @param sourceText the upstream's whole response body, when `result` came from it unchanged
   */
  constructor(
    readonly result: unknown,
    private readonly sourceText?: string,
  ) {}

  /** JSON text of the result: raw upstream bytes where possible. */
  json(): string {
    if (this.cachedJson !== undefined) return this.cachedJson;
    const r = this.result;
    let out: string | undefined;
    if (this.sourceText !== undefined && ((r !== null && typeof r === 'object') || typeof r === 'number')) out = extractTopLevelValue(this.sourceText, 'result');
    out ??= JSON.stringify(r) ?? 'null';
    this.cachedJson = out;
    return out;
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

/** Serialises one response object with the caller's raw id. */
export function serializeResult(idRaw: string, result: RpcResult): string {
  return `{"jsonrpc":"2.0","id":${idRaw},"result":${result.json()}}`;
}

/** Serialises one error response with the caller's raw id. */
export function serializeError(idRaw: string, error: { code: number; message: string; data?: unknown }): string {
  return `{"jsonrpc":"2.0","id":${idRaw},"error":${JSON.stringify(error)}}`;
}

/** Outbound request body with svc's own id (issue #2 item 4: callers' ids never go upstream). */
export function serializeOutbound(id: number, method: string, params: unknown): string {
  return params === undefined
    ? `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)}}`
    : `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`;
}

/**
 * Finds the raw JSON text of a top-level member of an object document without building it.
 * A skipper, not a parser: the document was already validated by `JSON.parse`.
 * @returns the value's text, or undefined when the key is absent or the text is not an object
 */
export function extractTopLevelValue(text: string, key: string): string | undefined {
  let i = skipWs(text, 0);
  if (text.charCodeAt(i) !== 123 /* { */) return undefined;
  i++;
  for (;;) {
    i = skipWs(text, i);
    if (text.charCodeAt(i) !== 34 /* " */) return undefined;
    const keyEnd = skipString(text, i);
    const k = text.slice(i + 1, keyEnd - 1);
    i = skipWs(text, keyEnd);
    if (text.charCodeAt(i) !== 58 /* : */) return undefined;
    i = skipWs(text, i + 1);
    const end = skipValue(text, i);
    if (k === key) return text.slice(i, end);
    i = skipWs(text, end);
    const c = text.charCodeAt(i);
    if (c === 44 /* , */) {
      i++;
      continue;
    }
    return undefined;
  }
}

function skipWs(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 32 || c === 10 || c === 13 || c === 9) i++;
    else return i;
  }
}

function skipString(s: string, i: number): number {
  i++; // opening quote
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 92 /* \ */) i += 2;
    else if (c === 34) return i + 1;
    else if (Number.isNaN(c)) return i;
    else i++;
  }
}

function skipValue(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 34) return skipString(s, i);
  if (c === 123 || c === 91) {
    let depth = 0;
    for (;;) {
      const d = s.charCodeAt(i);
      if (Number.isNaN(d)) return i;
      if (d === 34) {
        i = skipString(s, i);
        continue;
      }
      if (d === 123 || d === 91) depth++;
      else if (d === 125 || d === 93) {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
  }
  // number, true, false, null
  for (;;) {
    const d = s.charCodeAt(i);
    if (Number.isNaN(d) || d === 44 || d === 125 || d === 93 || d === 32 || d === 10 || d === 13 || d === 9) return i;
    i++;
  }
}
