/**
 * The answer to a request refused as a whole before any call was routed (spec §4.1, §4.2, §5), with the refusal's own HTTP status (404,
 * 401, 503, 400, 413) so a load balancer or client can tell it from a served batch. An array a batch client can map back gets one error
 * per element under its id (null for a non-object); one error object (the single call's id, else null) answers an unread or unparsable
 * body, an empty array (`[]` would read as success) and a batch over `server.maxBatchSize` (one error each would let a client make svc
 * write far more than it sent).
 * A body not read yet (route, auth or drain refusal) is read only up to {@link REFUSED_BODY_LIMIT}, so a refused client cannot make svc
 * buffer `server.maxBodySize`.
 */
import type { IncomingMessage } from 'node:http';
import type { SvcError } from '../wire/errors.ts';
import { toJsonRpcError } from '../wire/errors-wire.ts';
import { readBody } from './http-io.ts';
import type { BodyCoding } from '../pipeline/hooks.ts';
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
  /** The server's body coding (a compressed body is decoded to find its ids). */
  coding?: BodyCoding;
}

/**
 * The status, body and batch flag (for the response headers) of a request refused as a whole. Never throws.
 * @param body the parsed body; `undefined` when not read yet (read here, bounded by {@link REFUSED_BODY_LIMIT}); `null` when unreadable
 */
export async function answerRefusal(
  req: IncomingMessage,
  err: SvcError,
  limits: RefusalLimits,
  body?: ParsedBody | null,
): Promise<{ status: number; body: string; batch: boolean }> {
  const wire = toJsonRpcError(err, undefined, limits.details);
  let parsed = body;
  if (parsed === undefined) {
    try {
      const read = await readBody(req, Math.min(limits.maxBodySize, REFUSED_BODY_LIMIT), limits.coding);
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
