/**
 * The answer to a request no auth strategy accepted (spec §4.2, §5; issue #13 item 1): nothing is
 * forwarded. A single request gets HTTP 401 with JSON-RPC -32016 `ErrAuthUnauthorized` under its
 * own id; a batch stays HTTP 200 (spec §4.2) and each element carries that error with its own id.
 * To tell the two apart the body is read, but only up to {@link UNAUTHORIZED_BODY_LIMIT}: an
 * unauthenticated client cannot make svc buffer `server.maxBodySize`. A larger or unparsable
 * body gets the single-request answer with id null.
 */
import type Koa from 'koa';
import { ErrAuthUnauthorized } from './errors.ts';
import { toJsonRpcError } from './errors-wire.ts';
import { readRequestBody } from './http-io.ts';
import { parseRequestBody, serializeError, type ParseLimits } from './jsonrpc.ts';

/** Most bytes of a rejected caller's body read to find its ids (1 MiB, or maxBodySize when smaller). */
export const UNAUTHORIZED_BODY_LIMIT = 1024 * 1024;

/**
 * Writes the rejection of an unauthenticated request.
 * @param k the Koa context (headers not sent yet)
 * @param err the strategies' rejection
 * @param maxBodySize `server.maxBodySize`, bytes
 * @param limits JSON parse limits
 * @param details `server.includeErrorDetails`
 * @returns whether the answer was a batch (for the response headers)
 */
export async function answerUnauthorized(k: Koa.Context, err: ErrAuthUnauthorized, maxBodySize: number, limits: ParseLimits, details: boolean): Promise<boolean> {
  const wire = toJsonRpcError(err, undefined, details);
  let calls: Array<{ idRaw: string }> | undefined;
  let batch = false;
  try {
    const body = await readRequestBody(k, Math.min(maxBodySize, UNAUTHORIZED_BODY_LIMIT));
    const parsed = parseRequestBody(body.text, limits, body.raw);
    calls = parsed.calls;
    batch = parsed.batch;
  } catch {
    calls = undefined;
  }
  if (batch && calls && calls.length > 0) {
    k.status = 200;
    k.body = `[${calls.map((c) => serializeError(c.idRaw, wire)).join(',')}]`;
    return true;
  }
  k.status = err.httpStatus;
  k.body = serializeError(calls?.[0]?.idRaw ?? 'null', wire);
  return false;
}
