/**
 * The bytes of a proxy request and its answer, Koa side: the body read within `server.maxBodySize` (decoded by the server's body coding),
 * a Koa answer encoded, the Node server options.
 */
import type { IncomingMessage, ServerOptions } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import { Readable } from 'node:stream';
import type Koa from 'koa';
import { decodeBody, readBodyCapped } from '../../lib/body.ts';
import type { BodyCoding } from '../pipeline/hooks.ts';
import type { ResolvedConfig } from '../../config/types.ts';
import type { ClientAddressResolver } from '../../lib/client-address.ts';
import type { HttpRequestInfo } from '../pipeline/context.ts';
import { ErrInvalidRequest, ErrRequestTooLarge, ErrUnsupportedContentEncoding } from '../wire/errors.ts';

/** Where a Koa context carries the server's body coding (set on the app's context by the HTTP server). */
export const BODY_CODING = Symbol('svc.bodyCoding');

/**
 * Reads a request body within `limit` bytes (one pre-sized Buffer when the length is declared): its bytes, kept so large params go upstream
 * without being re-serialised, and its UTF-8 text, a leading byte-order mark dropped. A compressed body is decoded as the proxy port's
 * are (the `bodyCoding` hook).
 * @throws ErrRequestTooLarge over the limit; ErrInvalidRequest when the body cannot be read; ErrUnsupportedContentEncoding (415)
 */
export function readRequestBody(k: { readonly req: IncomingMessage }, limit: number): Promise<{ raw: Buffer; text: string }> {
  return readBody(k.req, limit, (k as { [BODY_CODING]?: BodyCoding })[BODY_CODING]);
}

/**
 * {@link readRequestBody} of a plain Node request (the proxy path, served without a Koa context).
 * @param coding the server's body coding; none: a compressed body is refused
 * @throws ErrRequestTooLarge over the limit; ErrInvalidRequest when the body cannot be read; ErrUnsupportedContentEncoding (415) for a
 *   `Content-Encoding` the coding does not decode
 */
export async function readBody(req: IncomingMessage, limit: number, coding?: BodyCoding): Promise<{ raw: Buffer; text: string }> {
  // A compressed body: the limit applies to the decoded bytes, so a zip bomb stops at `limit`;
  // its Content-Length counts compressed bytes, so it neither sizes the buffer nor checks the end.
  const header = req.headers['content-encoding'];
  const decoder = header === undefined ? undefined : requestDecoder(header, req, coding);
  const declared = req.headers['content-length'];
  if (decoder && declared !== undefined && Number(declared) > limit) {
    req.pause();
    throw new ErrRequestTooLarge(`request body exceeds server.maxBodySize (${limit} bytes)`);
  }
  const raw = await readBodyCapped(decoder ?? req, {
    declared: decoder ? undefined : declared,
    limit,
    onTooLarge: 'pause',
    fail: (f) =>
      f.kind === 'too-large'
        ? new ErrRequestTooLarge(`request body exceeds server.maxBodySize (${limit} bytes${decoder ? ' once decompressed' : ''})`)
        : new ErrInvalidRequest(
            `cannot read request body: ${f.kind === 'short' ? `request size did not match content length (${f.size} bytes)` : f.kind === 'error' ? f.error.message : 'over budget'}`,
          ),
  });
  const text = decodeBody(raw);
  return { raw, text: text.charCodeAt(0) === 0xfeff ? text.slice(1) : text };
}

/** A request body's decoded stream, undefined for identity. @throws ErrUnsupportedContentEncoding (HTTP 415) for one the coding does not decode */
function requestDecoder(header: string, req: IncomingMessage, coding: BodyCoding | undefined): Readable | undefined {
  const encoding = header.trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') return undefined;
  const decoded = coding?.decode(encoding, req);
  if (decoded) return decoded;
  const send = [...(coding?.decodes ?? []), 'an uncompressed body'];
  throw new ErrUnsupportedContentEncoding(
    `unsupported request Content-Encoding ${JSON.stringify(header.slice(0, 64))}: send ${send.length > 1 ? `${send.slice(0, -1).join(', ')} or ` : ''}${send.at(-1)}`,
  );
}

/**
 * Encodes a Koa answer for a client that accepts the server's answer coding; any encodable answer says `Vary: Accept-Encoding`.
 * @returns a promise only when the answer is being encoded (no promise for a client that does not ask for it)
 */
export function compressAnswer(k: Koa.Context, answers: NonNullable<BodyCoding['answers']>): Promise<void> | undefined {
  const body: unknown = k.body;
  if (typeof body !== 'string' && !(body instanceof Readable)) return undefined;
  const res = k.res;
  if (res.getHeader('Vary') === undefined) res.setHeader('Vary', 'Accept-Encoding');
  else k.vary('Accept-Encoding');
  if (!answers.accepts(k.req.headers['accept-encoding']) || res.getHeader('Content-Encoding') !== undefined) return undefined;
  return answers.encode(body, typeof body === 'string' ? undefined : k.response.length).then((encoded) => {
    if (encoded === undefined) return;
    k.remove('Content-Length');
    k.set('Content-Encoding', answers.name);
    k.body = encoded;
  });
}

/**
 * Node server options from `server.*`: `readTimeout` is Node's `requestTimeout` (headers and body within it, else 408), headers get at
 * most the same, and the expiry check runs often enough to keep the timeout within a quarter of itself (Node checks every 30 s by default).
 */
export function httpServerOptions(s: ResolvedConfig['server']): ServerOptions {
  const read = s.readTimeoutMs;
  return {
    requestTimeout: read,
    headersTimeout: read > 0 ? Math.min(read, 60_000) : 60_000,
    keepAliveTimeout: s.keepAliveTimeoutMs,
    connectionsCheckingInterval: read > 0 ? Math.min(1000, Math.max(50, Math.floor(read / 4))) : 30_000,
  };
}

/** Query of a request without a query string: shared, since `HttpRequestInfo.query` is read-only. */
const NO_QUERY: Readonly<Record<string, string>> = Object.freeze({});

/** The HTTP facts of a request (spec §5.5: credentials come from headers and query only), the client address through `clients`. */
export function httpInfo(k: Koa.Context, clients: ClientAddressResolver): HttpRequestInfo {
  return requestInfo(k.req, k.path, k.querystring, clients);
}

/**
 * {@link httpInfo} of a plain Node request whose path and query string are already split (Koa's `path` and `querystring`): a query
 * key's first value, as Koa's `query` gives it.
 */
export function requestInfo(req: IncomingMessage, path: string, querystring: string, clients: ClientAddressResolver): HttpRequestInfo {
  let query = NO_QUERY;
  if (querystring !== '') {
    const q: Record<string, string> = {};
    for (const [key, v] of Object.entries(parseQuery(querystring))) {
      const first = Array.isArray(v) ? v[0] : v;
      if (first !== undefined) q[key] = first;
    }
    query = q;
  }
  const hostHeader = req.headers.host ?? '';
  const peer = req.socket.remoteAddress ?? '';
  return {
    headers: req.headers,
    query,
    remoteAddress: peer,
    clientAddress: clients.resolve(peer, req.headers),
    host: hostHeader === '' ? '' : hostHeader.replace(/:\d+$/, '').toLowerCase(),
    path,
    // Set by the proxy route once resolved; declared here so every info has one shape.
    networkId: undefined,
  };
}

/** {@link httpInfo} of a plain Node request (a WebSocket upgrade, no Koa context); the query's first values come from the URL. */
export function nodeRequestInfo(req: IncomingMessage, clients: ClientAddressResolver): HttpRequestInfo {
  const url = new URL(req.url ?? '/', 'http://svc.invalid');
  let query = NO_QUERY;
  if (url.search !== '') {
    const q: Record<string, string> = {};
    for (const [key, v] of url.searchParams) if (!(key in q)) q[key] = v;
    query = q;
  }
  const peer = req.socket.remoteAddress ?? '';
  return {
    headers: req.headers,
    query,
    remoteAddress: peer,
    clientAddress: clients.resolve(peer, req.headers),
    host: (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase(),
    path: url.pathname,
    networkId: undefined,
  };
}
