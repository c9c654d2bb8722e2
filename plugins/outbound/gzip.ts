/**
 * `upstreams[].jsonRpc.enableGzip`: request bodies gzipped (`Content-Encoding: gzip`, on zlib's thread pool so a large body does not
 * stall other calls) and gzip answers asked for and inflated as they stream in. The handler behind gets the inflated bytes, so
 * `maxResponseSize` and the response-bytes budget count what an answer decompresses to: a zip bomb stops at the limit, as a larger
 * answer does, without the rest being inflated.
 */
import { buffer } from 'node:stream/consumers';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { createGunzip, gzip, type Gunzip } from 'node:zlib';
import type { Dispatcher } from 'undici';
import type { RequestDispatcher } from 'svc-proxy/plugin/contracts';
import { ErrUpstreamMalformedResponse } from 'svc-proxy/plugin/errors';

const gzipAsync = promisify(gzip);

/** Sends through another dispatcher (the origin's pool or a proxy pool) with gzip both ways. */
export class GzipDispatcher implements RequestDispatcher {
  readonly secrets?: readonly string[];

  /**
   * @param inner where the gzipped requests go
   * @param upstream the upstream's id, for error messages
   * @param owned whether `inner` is this dispatcher's to close (a proxy pool; not the origin's pool, which core owns)
   */
  constructor(
    private readonly inner: RequestDispatcher,
    private readonly upstream: string,
    private readonly owned: boolean,
  ) {
    this.secrets = inner.secrets;
  }

  /**
   * Gzips the body, then sends it. The reader gets its abort at once, so a call aborted while its body is being gzipped is never sent.
   * @param limit the answer's cap, bytes: also the most compressed bytes read
   */
  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler, limit?: number): boolean {
    const { 'content-length': _, ...headers } = (opts.headers ?? {}) as Record<string, string>;
    const body = opts.body as string | Buffer | Readable | null | undefined;
    const gunzip = new GunzipHandler(handler, this.upstream, limit);
    const bytes = typeof body === 'string' || Buffer.isBuffer(body) || body == null ? Promise.resolve(body ?? '') : buffer(body);
    bytes
      .then((b) => gzipAsync(b))
      .then(
        (zipped) => {
          if (gunzip.abortedBeforeSend()) return;
          this.inner.dispatch({ ...opts, headers: { ...headers, 'content-encoding': 'gzip', 'accept-encoding': 'gzip' }, body: zipped }, gunzip, limit);
        },
        (e: Error) => gunzip.onError(e),
      );
    return true;
  }

  async close(): Promise<void> {
    if (this.owned) await this.inner.close?.();
  }

  async destroy(): Promise<void> {
    if (this.owned) await this.inner.destroy?.();
  }
}

/** A header's value from undici's raw list (names and values alternating), names compared lower-cased. */
function rawHeader(raw: ReadonlyArray<Buffer | string>, name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) if (String(raw[i]).toLowerCase() === name) return String(raw[i + 1]);
  return undefined;
}

/**
 * Inflates a gzip answer between undici and the handler that reads it (legacy handler API, as core's answer reader uses), with the
 * socket paused while zlib is behind. The reader hears exactly one end (`onComplete` or `onError`), whatever comes first: its own
 * abort (even once undici has the whole body and only zlib is still working), a refusal it throws, a body that does not inflate.
 */
class GunzipHandler implements Dispatcher.DispatchHandler {
  private z: Gunzip | undefined;
  /** undici's abort, once the request is on a connection. */
  private abortRequest: ((err: Error) => void) | undefined;
  /** An abort of the reader's that came before the request was sent. */
  private cancelled: Error | undefined;
  private resume: (() => void) | undefined;
  private ended = false;
  private wire = 0;

  /**
   * @param limit the most compressed bytes read, bytes (the reader caps what they inflate to)
   */
  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly upstream: string,
    private readonly limit: number | undefined,
  ) {
    this.inner.onConnect?.((e?: Error) => this.cancel(e ?? new Error('request aborted')));
  }

  /** True (and the reader told) when the reader aborted while the body was being gzipped: the request is not sent. */
  abortedBeforeSend(): boolean {
    if (this.cancelled) this.end(this.cancelled);
    return this.ended;
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortRequest = abort;
    if (this.cancelled) this.end(this.cancelled);
  }

  onHeaders(status: number, raw: Buffer[] | string[] | null, resume: () => void, statusText: string): boolean {
    const encoding = raw ? rawHeader(raw, 'content-encoding')?.trim().toLowerCase() : undefined;
    if (raw && encoding && encoding !== 'identity') {
      if (encoding !== 'gzip' && encoding !== 'x-gzip') {
        throw new ErrUpstreamMalformedResponse(
          `upstream ${this.upstream} answered Content-Encoding "${encoding.slice(0, 40)}", which svc did not ask for (it asks for gzip)`,
          { details: { upstream: this.upstream } },
        );
      }
      this.z = this.gunzip();
      this.resume = resume;
      // The length and coding were the compressed body's: the reader gets the inflated one.
      const kept: Array<Buffer | string> = [];
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const name = String(raw[i]).toLowerCase();
        if (name !== 'content-encoding' && name !== 'content-length') kept.push(raw[i] as Buffer, raw[i + 1] as Buffer);
      }
      raw = kept as Buffer[];
    }
    return this.inner.onHeaders?.(status, raw as Buffer[], resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    if (!this.z) return this.inner.onData?.(chunk) ?? true;
    this.wire += chunk.length;
    if (this.limit !== undefined && this.wire > this.limit) {
      throw new ErrUpstreamMalformedResponse(
        `upstream ${this.upstream} answered more than maxResponseSize (${this.limit} bytes; over ${this.limit} bytes compressed)`,
        { details: { upstream: this.upstream, maxResponseSize: this.limit } },
      );
    }
    // false pauses the socket until zlib drains.
    return this.z.write(chunk);
  }

  onComplete(trailers: string[] | null): void {
    if (!this.z) {
      if (!this.ended) {
        this.ended = true;
        this.inner.onComplete?.(trailers);
      }
    } else this.z.end();
  }

  onError(err: Error): void {
    this.end(err);
  }

  /** The reader's abort: before the request is sent it only marks it; after, the answer ends now (undici may have finished reading). */
  private cancel(err: Error): void {
    if (this.abortRequest) this.end(err);
    else this.cancelled ??= err;
  }

  private gunzip(): Gunzip {
    const z = createGunzip();
    z.on('data', (c: Buffer) => {
      if (this.ended) return;
      // The reader refuses past maxResponseSize or the budget by throwing, as it does from undici's own call.
      try {
        this.inner.onData?.(c);
      } catch (e) {
        this.end(e as Error);
      }
    });
    z.on('drain', () => this.resume?.());
    z.on('error', (e: Error) =>
      this.end(
        new ErrUpstreamMalformedResponse(`upstream ${this.upstream} answered a gzip body that does not decompress: ${e.message}`, {
          details: { upstream: this.upstream },
        }),
      ),
    );
    z.on('end', () => {
      if (this.ended) return;
      this.ended = true;
      this.inner.onComplete?.(null);
    });
    return z;
  }

  /** Ends the answer with an error, once: the reader hears it, zlib stops, the request (if still running) is aborted. */
  private end(err: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.z?.destroy();
    this.inner.onError?.(err);
    try {
      this.abortRequest?.(err);
    } catch {
      // undici has already finished the request.
    }
  }
}
