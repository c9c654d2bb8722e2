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

  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const { 'content-length': _, ...headers } = (opts.headers ?? {}) as Record<string, string>;
    const body = opts.body as string | Buffer | Readable | null | undefined;
    const bytes = typeof body === 'string' || Buffer.isBuffer(body) || body == null ? Promise.resolve(body ?? '') : buffer(body);
    bytes
      .then((b) => gzipAsync(b))
      .then(
        (zipped) =>
          this.inner.dispatch(
            { ...opts, headers: { ...headers, 'content-encoding': 'gzip', 'accept-encoding': 'gzip' }, body: zipped },
            new GunzipHandler(handler, this.upstream),
          ),
        (e: Error) => handler.onError?.(e),
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

/** Inflates a gzip answer between undici and the handler that reads it (legacy handler API, as core's answer reader uses). */
class GunzipHandler implements Dispatcher.DispatchHandler {
  private z: Gunzip | undefined;
  private abort: ((err: Error) => void) | undefined;
  private failed = false;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly upstream: string,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    this.inner.onConnect?.((e?: Error) => {
      this.z?.destroy();
      abort(e);
    });
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
    this.z.write(chunk);
    return true;
  }

  onComplete(trailers: string[] | null): void {
    if (!this.z) this.inner.onComplete?.(trailers);
    else this.z.end();
  }

  onError(err: Error): void {
    this.z?.destroy();
    if (this.failed) return;
    this.failed = true;
    this.inner.onError?.(err);
  }

  private gunzip(): Gunzip {
    const z = createGunzip();
    z.on('data', (c: Buffer) => {
      if (this.failed) return;
      // The reader refuses past maxResponseSize or the budget by throwing, as it does from undici's own call.
      try {
        this.inner.onData?.(c);
      } catch (e) {
        this.fail(e as Error);
      }
    });
    z.on('error', (e: Error) =>
      this.fail(
        new ErrUpstreamMalformedResponse(`upstream ${this.upstream} answered a gzip body that does not decompress: ${e.message}`, {
          details: { upstream: this.upstream },
        }),
      ),
    );
    z.on('end', () => {
      if (!this.failed) this.inner.onComplete?.(null);
    });
    return z;
  }

  /** Fails the answer once: the reader gets the error, the request (if still running) is aborted. */
  private fail(err: Error): void {
    if (this.failed) return;
    this.failed = true;
    this.z?.destroy();
    this.inner.onError?.(err);
    this.abort?.(err);
  }
}
