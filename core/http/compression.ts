/**
 * HTTP compression (`server.enableGzip`, as eRPC users expect): request bodies in gzip, deflate or br are decoded with `server.maxBodySize`
 * applied to the decoded bytes (a zip bomb gets 413, never memory), another `Content-Encoding` gets 415; answers over {@link GZIP_MIN_BYTES}
 * are gzipped on zlib's thread pool (strings) or as a stream (batches, large raw results).
 */
import { pipeline, type Readable } from 'node:stream';
import { promisify } from 'node:util';
import { constants, createBrotliDecompress, createGunzip, createGzip, createInflate, gzip } from 'node:zlib';
import type { Transform } from 'node:stream';
import { ErrUnsupportedContentEncoding } from '../wire/errors.ts';

/** Answers at most this many bytes go uncompressed (gzip would not pay for itself). */
export const GZIP_MIN_BYTES = 1024;

/** gzip level: zlib's default, the ratio eRPC users see (getLogs and trace answers shrink 5-10×). */
const GZIP_LEVEL = constants.Z_DEFAULT_COMPRESSION;

const gzipAsync = promisify(gzip);

/**
 * The decoder of a request's `Content-Encoding`, or undefined for an identity body.
 * @param header the `Content-Encoding` header value
 * @throws ErrUnsupportedContentEncoding (HTTP 415) for an encoding other than gzip, x-gzip, deflate, br or identity
 */
export function requestDecoder(header: string | undefined): Transform | undefined {
  if (header === undefined) return undefined;
  switch (header.trim().toLowerCase()) {
    case '':
    case 'identity':
      return undefined;
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      throw new ErrUnsupportedContentEncoding(
        `unsupported request Content-Encoding ${JSON.stringify(header.slice(0, 64))}: send gzip, deflate, br or an uncompressed body`,
      );
  }
}

/** Pipes a request into its decoder and returns the decoder; a failure of either side surfaces as the decoder's 'error'. */
export function decodeRequest(req: Readable, decoder: Transform): Transform {
  pipeline(req, decoder, () => undefined);
  return decoder;
}

/** Whether an `Accept-Encoding` header (bounded by Node's header size limit) accepts gzip: `gzip` or `*`, with a q-value above 0. */
export function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  for (const part of header.split(',')) {
    const [name, ...params] = part.split(';');
    const coding = (name ?? '').trim().toLowerCase();
    if (coding !== 'gzip' && coding !== 'x-gzip' && coding !== '*') continue;
    const q = params.map((p) => p.trim()).find((p) => p.toLowerCase().startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

/**
 * Gzips an answer body (a string, or a stream of batch elements or raw result bytes) when worth it.
 * @param length the byte length of a stream when known
 * @returns the compressed body, or undefined when the body stays as it is
 */
export async function gzipAnswer(body: string | Readable, length: number | undefined): Promise<Buffer | Readable | undefined> {
  if (typeof body === 'string') {
    // `length` of a string is at most its UTF-8 byte length: a cheap lower bound first.
    if (body.length <= GZIP_MIN_BYTES && Buffer.byteLength(body) <= GZIP_MIN_BYTES) return undefined;
    return gzipAsync(body, { level: GZIP_LEVEL });
  }
  if (length !== undefined && length <= GZIP_MIN_BYTES) return undefined;
  const gz = createGzip({ level: GZIP_LEVEL });
  pipeline(body, gz, () => undefined);
  return gz;
}
