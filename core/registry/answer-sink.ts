/**
 * Reads one upstream answer straight from undici's dispatcher into bytes, within `maxResponseSize` and the process's response-bytes
 * budget (spec §8). undici's promise API wraps every answer in a response stream, an async resource and an abort listener closure; svc
 * reads every answer whole, so a dispatch handler that collects the chunks saves a proxy call about 3 KB of garbage and the stream work.
 */
import type { Dispatcher } from 'undici';
import { RESPONSE_BYTES } from '../../lib/body.ts';
import { ErrResponseBytesInFlightExceeded, ErrUpstreamMalformedResponse } from '../wire/errors.ts';
import type { RequestDispatcher } from './outbound.ts';

/** What an answer came back as: the HTTP status and the body bytes (the caller releases `bytes.length` from the budget). */
export interface UpstreamAnswer {
  status: number;
  bytes: Buffer;
}

/** A header's value from undici's raw header list (name and value Buffers, alternating); names compared lower-cased. */
function rawHeader(raw: ReadonlyArray<Buffer | string>, name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const n = raw[i] as Buffer | string;
    // Cheap length test first.
    if (n.length === name.length && n.toString().toLowerCase() === name) return (raw[i + 1] as Buffer | string).toString();
  }
  return undefined;
}

/** `content-length` as a number when it is one. */
function declaredLength(raw: ReadonlyArray<Buffer | string>): number | undefined {
  const v = rawHeader(raw, 'content-length');
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined;
}

/**
 * undici's (legacy, native) dispatch handler for one answer; an EventListener object on the call's signal, so aborting needs no closure.
 * Throwing from `onHeaders`/`onData` makes undici abort the request with that error (then `onError`).
 */
/** A signal that never aborts, for requests nothing cancels (an outbound batch shared by many calls): the sink does not listen to it. */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;

class AnswerSink implements Dispatcher.DispatchHandler {
  private status = 0;
  private declared: number | undefined;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** Bytes of this answer held in the budget. */
  private taken = 0;
  private abortRequest: ((err: Error) => void) | undefined;
  private settled = false;

  constructor(
    private readonly resolve: (a: UpstreamAnswer) => void,
    private readonly reject: (e: unknown) => void,
    private readonly signal: AbortSignal,
    private readonly limit: number,
    private readonly upstream: string,
  ) {
    if (signal !== NEVER_ABORTED) signal.addEventListener('abort', this, { once: true });
  }

  /** The call's signal aborted: undici aborts the request with its reason (now, or once connected). */
  handleEvent(): void {
    this.abortRequest?.(this.signal.reason as Error);
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.signal.aborted) abort(this.signal.reason as Error);
    else this.abortRequest = abort;
  }

  onHeaders(status: number, headers: Buffer[] | string[] | null): boolean {
    this.status = status;
    const len = headers ? declaredLength(headers) : undefined;
    if (len !== undefined) {
      if (len > this.limit) throw this.tooLarge(String(len));
      if (!RESPONSE_BYTES.take(len)) throw this.overBudget();
      this.taken = len;
      this.declared = len;
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.size += chunk.length;
    if (this.size > this.limit) throw this.tooLarge(`over ${this.limit}`);
    if (this.declared === undefined) {
      if (!RESPONSE_BYTES.take(chunk.length)) throw this.overBudget();
      this.taken += chunk.length;
    }
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.settled) return;
    this.done();
    if (this.declared !== undefined && this.size < this.declared) {
      this.giveBack();
      this.reject(
        new ErrUpstreamMalformedResponse(`upstream ${this.upstream} answered a truncated body (${this.size} of ${this.declared} bytes)`, {
          details: { upstream: this.upstream },
        }),
      );
      return;
    }
    const c = this.chunks;
    const bytes = c.length === 1 ? (c[0] as Buffer) : Buffer.concat(c, this.size);
    // The caller releases exactly `bytes.length` (a body longer than declared is counted as read).
    if (this.taken !== bytes.length) RESPONSE_BYTES.inFlight += bytes.length - this.taken;
    this.resolve({ status: this.status, bytes });
  }

  onError(err: Error): void {
    if (this.settled) return;
    this.done();
    this.giveBack();
    this.reject(err);
  }

  private done(): void {
    this.settled = true;
    if (this.signal !== NEVER_ABORTED) this.signal.removeEventListener('abort', this);
  }

  private giveBack(): void {
    RESPONSE_BYTES.release(this.taken);
    this.taken = 0;
  }

  private tooLarge(size: string): ErrUpstreamMalformedResponse {
    return tooLarge(this.upstream, this.limit, size);
  }

  private overBudget(): ErrResponseBytesInFlightExceeded {
    return overBudget();
  }
}

function tooLarge(upstream: string, limit: number, size: string): ErrUpstreamMalformedResponse {
  return new ErrUpstreamMalformedResponse(`upstream ${upstream} answered more than maxResponseSize (${limit} bytes; ${size} bytes)`, {
    details: { upstream, maxResponseSize: limit },
  });
}

function overBudget(): ErrResponseBytesInFlightExceeded {
  const b = RESPONSE_BYTES;
  return new ErrResponseBytesInFlightExceeded(
    `svc is reading ${b.inFlight} bytes of upstream answers, at server.maxResponseBytesInFlight (${b.limit} bytes); retry later`,
    { details: { maxResponseBytesInFlight: b.limit } },
  );
}

/**
 * Sends one request through its dispatcher (the origin's pool or a plugin's) and reads its answer whole.
 * @param pool the upstream's undici pool, or a plugin's {@link RequestDispatcher}
 * @param opts path, method, headers and body of the request (and `origin` for a plugin's dispatcher)
 * @param signal aborts the request (undici fails it with the signal's reason)
 * @param limit `maxResponseSize`, bytes, of the bytes the handler is given (a plugin's dispatcher that decodes gives it decoded bytes)
 * @param upstream the upstream's id, for error messages
 * @throws (rejects with) ErrUpstreamMalformedResponse over the limit or on a truncated body; ErrResponseBytesInFlightExceeded over the
 *   process budget; the dispatcher's error or the signal's reason otherwise
 */
export function fetchAnswer(
  pool: RequestDispatcher,
  opts: Dispatcher.DispatchOptions,
  signal: AbortSignal,
  limit: number,
  upstream: string,
): Promise<UpstreamAnswer> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<UpstreamAnswer>((resolve, reject) => {
    pool.dispatch(opts, new AnswerSink(resolve, reject, signal, limit, upstream), limit);
  });
}
