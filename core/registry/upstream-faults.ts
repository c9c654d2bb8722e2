/**
 * What an upstream's failure becomes before any rule names it: a transport failure (timeout, reset, refused size) as svc's own error,
 * a JSON-RPC error object as an {@link UpstreamFault} with its raw pieces kept for pass-through. Secrets are redacted here, where the
 * text arrives, so no log line or answer downstream can carry them.
 */
import { errors as undiciErrors } from 'undici';
import {
  ErrCancelled,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrUpstreamRequestTooLarge,
  SvcError,
  type UpstreamErrorRaw,
} from '../wire/errors.ts';
import type { UpstreamFault } from '../wire/fault.ts';
import { extractTopLevelValue } from '../../lib/json-scan.ts';
import type { Redactor } from '../../lib/redact.ts';
import { isDeadline } from './deadline.ts';

/** Request bodies at least this large that lose their connection mid-send were refused for size, bytes. */
const LARGE_REQUEST_BYTES = 1024 * 1024;

/**
 * The error of a request that got no answer: a deadline, a cancellation, a socket timeout, a large body cut off, or a transport failure.
 * @param bodyBytes size of the request body, bytes
 * @param id the upstream's id, in messages and details
 */
export function transportError(e: unknown, bodyBytes: number, signal: AbortSignal, id: string, redactor: Redactor): SvcError {
  if (e instanceof SvcError) return e;
  if (signal.aborted) {
    const r: unknown = signal.reason;
    if (r instanceof SvcError) return r;
    if (isDeadline(r)) return new ErrEndpointRequestTimeout(`upstream ${id} did not answer before the deadline`, { details: { upstream: id } });
    return new ErrCancelled(`request to upstream ${id} was cancelled`, { details: { upstream: id } });
  }
  if (e instanceof undiciErrors.HeadersTimeoutError || e instanceof undiciErrors.BodyTimeoutError || e instanceof undiciErrors.ConnectTimeoutError) {
    return new ErrEndpointRequestTimeout(`upstream ${id} timed out: ${redactor.text((e as Error).message)}`, { details: { upstream: id } });
  }
  const err = e as NodeJS.ErrnoException;
  const code = err.code ?? '';
  // The upstream hung up while svc was still writing a large body: it refused the size.
  if (bodyBytes >= LARGE_REQUEST_BYTES && (code === 'EPIPE' || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET')) {
    return new ErrUpstreamRequestTooLarge(`upstream ${id} closed the connection while receiving a ${bodyBytes}-byte request (${code})`, {
      details: { upstream: id, errno: code },
    });
  }
  return new ErrEndpointServerSideException(
    `transport error talking to upstream ${id}: ${code} ${redactor.text(err.message ?? '')}`.replace(/\s+/g, ' ').trim(),
    { details: { upstream: id, errno: err.code } },
  );
}

/**
 * The fault a JSON-RPC error object states (spec §7): code, redacted message and data, and the raw pieces a pass-through error keeps.
 * @param text the whole answer, from which the error's raw members are cut
 */
export function rpcErrorFault(
  status: number,
  text: string,
  e: { code?: unknown; message?: unknown; data?: unknown },
  method: string,
  redactor: Redactor,
): UpstreamFault {
  const code = typeof e.code === 'number' && Number.isInteger(e.code) ? e.code : undefined;
  const message = redactor.text(typeof e.message === 'string' ? e.message : (JSON.stringify(e) ?? ''));
  let data = e.data;
  let raw: UpstreamErrorRaw | undefined;
  const errText = extractTopLevelValue(text, 'error');
  if (errText !== undefined && code !== undefined && typeof e.message === 'string') {
    const codeRaw = extractTopLevelValue(errText, 'code');
    const msgRaw = extractTopLevelValue(errText, 'message');
    const dataRaw = extractTopLevelValue(errText, 'data');
    if (codeRaw !== undefined && msgRaw !== undefined) {
      raw = { whole: redactor.text(errText), code: codeRaw, message: redactor.text(msgRaw) };
      if (dataRaw !== undefined) {
        raw.data = redactor.text(dataRaw);
        if (raw.data !== dataRaw) data = safeParse(raw.data);
      }
    }
  } else if (data !== undefined && !redactor.empty) {
    const t = JSON.stringify(data);
    if (t !== undefined && redactor.text(t) !== t) data = safeParse(redactor.text(t));
  }
  return { status, code, message, data, method, raw };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
