/**
 * Reading a whole HTTP body into one Buffer under a size cap, for inbound
 * requests (core/http/server.ts) and upstream answers (core/registry/transport.ts). With a declared
 * length the Buffer is allocated once and each chunk is copied in and released as it arrives,
 * so a body costs its size once instead of chunks plus a concatenated copy.
 */

import { isAscii } from 'node:buffer';

/** Bodies at least this large and pure ASCII are decoded as latin1 (see {@link decodeBody}). */
const EXTERNAL_DECODE_BYTES = 1024 * 1024;

/**
 * Decodes a body as UTF-8 text. A large ASCII body (the usual JSON-RPC body: hex and ASCII
 * keys) is decoded as latin1, which is the same text but which Node keeps outside the V8 heap
 * (an external string), so a 50 MiB answer does not grow the heap by 50 MiB.
 */
export function decodeBody(bytes: Buffer): string {
  return bytes.length >= EXTERNAL_DECODE_BYTES && isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8');
}

/** The readable side of a body: a Node request or an undici response body. */
export interface BodyStream {
  on(event: 'data', fn: (chunk: Buffer) => void): unknown;
  on(event: 'end', fn: () => void): unknown;
  on(event: 'error', fn: (e: Error) => void): unknown;
  destroy(err?: Error): unknown;
  pause(): unknown;
}

/** Why a body could not be read. */
export type BodyFailure =
  /** Declared or streamed size passed the limit; `size` is the declared length or `over <limit>`. */
  | { kind: 'too-large'; size: string }
  /** Fewer bytes than declared arrived. */
  | { kind: 'short'; size: string }
  /** The stream failed (connection reset, aborted). */
  | { kind: 'error'; error: Error }
  /** Taking the body would pass the {@link ByteBudget}'s limit; `inFlight` bytes were held then. */
  | { kind: 'over-budget'; inFlight: number; limit: number };

/**
 * A count of bytes held at once across every body read with it (one per process: the global
 * bound on response bytes in flight, `server.maxResponseBytesInFlight`). Per body it costs an
 * add per chunk and one subtraction, no allocation.
 */
export class ByteBudget {
  /** Bytes taken and not yet released. */
  inFlight = 0;
  /** @param limit most bytes held at once, bytes */
  constructor(public limit: number) {}
  /**
   * Takes `n` bytes if they fit under the limit.
   * @returns false (nothing taken) when they do not
   */
  take(n: number): boolean {
    if (this.inFlight + n > this.limit) return false;
    this.inFlight += n;
    return true;
  }
  /** Gives back `n` bytes taken earlier. */
  release(n: number): void {
    this.inFlight = Math.max(0, this.inFlight - n);
  }
}

/** Default `server.maxResponseBytesInFlight`, bytes: room for a few of the largest answers at once. */
export const DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT = 512 * 1024 * 1024;

/**
 * Bytes of upstream answers being read and parsed, over every upstream of the process (spec §8,
 * global bound on response bytes in flight). Its limit is `server.maxResponseBytesInFlight`, set
 * by the server at start and reload; an answer that would pass it fails the call with
 * `ErrResponseBytesInFlightExceeded` instead of growing memory.
 */
export const RESPONSE_BYTES = new ByteBudget(DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT);

/** Options of {@link readBodyCapped}. */
export interface ReadBodyOptions {
  /** The Content-Length header, if any. */
  declared: string | string[] | undefined;
  /** Largest body accepted, bytes. */
  limit: number;
  /**
   * What to do with the stream when the limit is passed: `destroy` (an upstream: stop the
   * transfer) or `pause` (a client: stop reading so an answer can still be written).
   */
  onTooLarge: 'destroy' | 'pause';
  /** Builds the error a failure rejects with. */
  fail: (f: BodyFailure) => Error;
  /**
   * Counts the body's bytes against a shared bound: a declared length is taken before reading,
   * streamed bytes chunk by chunk. On success the caller owns the taken bytes (exactly the
   * returned buffer's length) and must `release` them; on failure they are released here.
   */
  budget?: ByteBudget;
}

/**
 * Reads a body into one Buffer.
 * @returns the body bytes
 * @throws what `opts.fail` builds: over the limit (declared or streamed), short, or a stream error
 */
export function readBodyCapped(body: BodyStream, opts: ReadBodyOptions): Promise<Buffer> {
  const { declared, limit } = opts;
  const len = typeof declared === 'string' && /^\d+$/.test(declared) ? Number(declared) : undefined;
  const { budget } = opts;
  const stop = () => (opts.onTooLarge === 'destroy' ? body.destroy() : body.pause());
  if (len !== undefined && len > limit) {
    stop();
    return Promise.reject(opts.fail({ kind: 'too-large', size: String(len) }));
  }
  if (budget && len !== undefined && !budget.take(len)) {
    stop();
    return Promise.reject(opts.fail({ kind: 'over-budget', inFlight: budget.inFlight, limit: budget.limit }));
  }
  // Bytes of this body held in the budget: the declared length up front, else what streamed in.
  let taken = budget && len !== undefined ? len : 0;
  const giveBack = () => {
    budget?.release(taken);
    taken = 0;
  };
  return new Promise<Buffer>((resolve, reject) => {
    let size = 0;
    let filled = 0;
    let done = false;
    const whole = len !== undefined && len > 0 ? Buffer.allocUnsafe(len) : undefined;
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer) => {
      if (done) return;
      if (whole && chunks.length === 0 && filled + chunk.length <= whole.length) {
        chunk.copy(whole, filled);
        filled += chunk.length;
      } else chunks.push(chunk);
      size += chunk.length;
      if (size > limit) {
        done = true;
        stop();
        giveBack();
        reject(opts.fail({ kind: 'too-large', size: `over ${limit}` }));
        return;
      }
      if (budget && len === undefined) {
        if (!budget.take(chunk.length)) {
          done = true;
          stop();
          const inFlight = budget.inFlight;
          giveBack();
          reject(opts.fail({ kind: 'over-budget', inFlight, limit: budget.limit }));
          return;
        }
        taken += chunk.length;
      }
    });
    body.on('error', (e: Error) => {
      if (done) return;
      done = true;
      giveBack();
      reject(opts.fail({ kind: 'error', error: e }));
    });
    body.on('end', () => {
      if (done) return;
      done = true;
      if (len !== undefined && size < len) {
        giveBack();
        reject(opts.fail({ kind: 'short', size: `${size} of ${len}` }));
        return;
      }
      let out: Buffer;
      if (whole && chunks.length === 0) out = filled === whole.length ? whole : whole.subarray(0, filled);
      else if (len === 0) out = Buffer.alloc(0);
      else {
        const parts = whole ? [whole.subarray(0, filled), ...chunks] : chunks;
        out = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
      }
      // The caller releases exactly `out.length` (a body longer than declared is counted as read).
      if (budget && taken !== out.length) budget.inFlight += out.length - taken;
      resolve(out);
    });
  });
}
