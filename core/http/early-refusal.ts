/**
 * The answer to a request refused as a whole before any call was routed (spec §4.1, §4.2, §5): unknown project or network, a path that names none, an auth refusal, the
 * drain's `ErrServiceShuttingDown`, a body or batch over its limit. Nothing is forwarded, and the
 * HTTP status is the refusal's own (404, 401, 503, 400, 413), so a load balancer or client can
 * tell a retryable refusal from a served batch.
 *
 * The body is an array when the request was an array a batch client can map back: one error per
 * element, each under that element's own id (`null` for an element that is not an object). The
 * array is bounded like a served batch: at most `server.maxBatchSize` elements. Otherwise it is
 * one error object, under the call's id when a single call could be read, else id `null`:
 * - a body refused for its byte size, unreadable or unparsable (it was never parsed, so there is
 *   nothing to split);
 * - a batch over `server.maxBatchSize` (answering each element would let a client make svc write
 *   far more than it was sent);
 * - an empty array (there is nothing to map, and `[]` would read as success).
 *
 * When the refusal came before the body was read (the route, auth, drain), the body is read only
 * to find the ids, and only up to {@link REFUSED_BODY_LIMIT}: a refused client cannot make svc
 * buffer `server.maxBodySize`.
 */
import type Koa from 'koa';
import type { SvcError } from '../wire/errors.ts';
import { toJsonRpcError } from '../wire/errors-wire.ts';
import { readRequestBody } from './http-io.ts';
import { parseRequestBody, serializeError, type ParsedBody, type ParseLimits } from '../wire/jsonrpc.ts';

/** Most bytes of a refused caller's body read to find its ids (1 MiB, or `server.maxBodySize` when smaller). */
export const REFUSED_BODY_LIMIT = 1024 * 1024;

/** The server limits an early refusal answers within. */
export interface RefusalLimits {
  /** `server.maxBodySize`, bytes. */
  maxBodySize: number;
  /** `server.maxBatchSize`: the longest array answered element by element. */
  maxBatchSize: number;
  /** JSON parse limits (`server.maxJsonDepth`). */
  parse: ParseLimits;
  /** `server.includeErrorDetails`. */
  details: boolean;
}

/**
 * The answer (status and body) of a request refused as a whole. Never throws.
 * @param k the Koa context (its body is read here when `body` is undefined)
 * @param err the refusal
 * @param limits the server's limits
 * @param body the request body: `undefined` when it was not read yet (it is read here, bounded by
 *   {@link REFUSED_BODY_LIMIT}); `null` when reading or parsing it failed (one object, id null)
 * @returns the HTTP status, the body and whether it is an array (for the response headers)
 */
export async function answerRefusal(
  k: Koa.Context,
  err: SvcError,
  limits: RefusalLimits,
  body?: ParsedBody | null,
): Promise<{ status: number; body: string; batch: boolean }> {
  const wire = toJsonRpcError(err, undefined, limits.details);
  let parsed = body;
  if (parsed === undefined) {
    try {
      const read = await readRequestBody(k, Math.min(limits.maxBodySize, REFUSED_BODY_LIMIT));
      parsed = parseRequestBody(read.text, limits.parse, read.raw);
    } catch {
      parsed = null;
    }
  }
  const calls = parsed?.calls;
  if (parsed?.batch && calls && calls.length > 0 && calls.length <= limits.maxBatchSize) {
    return { status: err.httpStatus, body: `[${calls.map((c) => serializeError(c.idRaw, wire)).join(',')}]`, batch: true };
  }
  return { status: err.httpStatus, body: serializeError(parsed && !parsed.batch ? (calls?.[0]?.idRaw ?? 'null') : 'null', wire), batch: false };
}
