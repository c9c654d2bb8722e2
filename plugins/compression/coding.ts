/**
 * The proxy port's compression: request bodies in gzip, deflate or br decoded (`server.maxBodySize` applies to the decoded bytes, so a
 * zip bomb gets 413, never memory); answers over {@link GZIP_MIN_BYTES} gzipped for clients that accept it, on zlib's thread pool
 * (strings) or as a stream (batches, large raw results).
 */
import { pipeline, type Readable } from 'node:stream';
import { promisify } from 'node:util';
import { constants, createBrotliDecompress, createGunzip, createGzip, createInflate, gzip } from 'node:zlib';
import type { BodyCoding } from 'svc-proxy/plugin/contracts';

/** Answers at most this many bytes go uncompressed (gzip would not pay for itself). */
export const GZIP_MIN_BYTES = 1024;

/** gzip level: zlib's default, the ratio eRPC users see (getLogs and trace answers shrink 5-10×). */
const GZIP_LEVEL = constants.Z_DEFAULT_COMPRESSION;

const gzipAsync = promisify(gzip);

const DECODERS: Readonly<Record<string, () => NodeJS.ReadWriteStream & Readable>> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** Pipes a request into the decoder of its `Content-Encoding`; a failure of either side surfaces as the decoder's 'error'. */
function decode(encoding: string, body: Readable): Readable | undefined {
  const create = Object.hasOwn(DECODERS, encoding) ? DECODERS[encoding] : undefined;
  if (!create) return undefined;
  const decoder = create();
  pipeline(body, decoder, () => undefined);
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

/**
 * The body coding of the proxy port.
 * @param gzipAnswers `server.enableGzip`: gzip answers too (request bodies are decoded either way)
 */
export function bodyCoding(gzipAnswers: boolean): BodyCoding {
  return {
    decodes: ['gzip', 'deflate', 'br'],
    decode,
    answers: gzipAnswers ? { name: 'gzip', accepts: acceptsGzip, encode: gzipAnswer } : undefined,
  };
}
