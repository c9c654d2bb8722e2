/**
 * A fake JSON-RPC upstream that leaks its own credentials back: plain
 * node:http on 127.0.0.1, port picked by the kernel. `eth_chainId` / `net_version` are answered
 * normally; every other method answers with an "echo" of what the request carried that a
 * provider could consider secret: the request URL (path + query, raw and percent-encoded), the
 * `Authorization` header (and, for Basic, the decoded `user:pass`) and the `x-api-key` header.
 *
 * The answer's shape is picked by the method name (see {@link EchoMode}); any other method
 * (svc's own state polls included) gets the `otherMethods` shape (default `echo_rpcError`).
 */
import { listenOnLoopback } from './ports.ts';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Echo shapes by method name:
 * - `echo_rpcError`: HTTP 200, `error: {code: -32000, message: <echo>}`;
 * - `echo_data`: HTTP 200, `error: {code: -32000, message: 'echo data', data: {<echo pieces>, nested: {...}}}`;
 * - `echo_dataString`: HTTP 200, `error: {code: -32000, message: 'echo data string', data: <echo>}`;
 * - `echo_revert`: HTTP 200, `error: {code: 3, message: 'execution reverted: <echo>', data: <echo>}`
 *   (a pass-through error: the client gets the upstream's own error object);
 * - `echo_badCode`: HTTP 200, `error: {code: 'E_LEAK', message: {text: <echo>}, data: {...}}`
 *   (neither an integer code nor a string message);
 * - `echo_500`: HTTP 500, `text/plain` <echo>;
 * - `echo_garbage`: HTTP 200, non-JSON `<html>` + <echo>;
 * - `echo_garbageLong`: HTTP 200, non-JSON, padded so that the URL's path secret straddles
 *   character 200 of the trimmed body (where svc cuts its excerpt);
 * - `echo_result`: HTTP 200, `result: <echo>` (a successful answer whose text is the echo).
 */
export type EchoMode =
  | 'echo_rpcError'
  | 'echo_data'
  | 'echo_dataString'
  | 'echo_revert'
  | 'echo_badCode'
  | 'echo_500'
  | 'echo_garbage'
  | 'echo_garbageLong'
  | 'echo_result';

/** One request as the echo upstream saw it. */
export interface EchoRequest {
  /** Path and query as received. */
  url: string;
  headers: IncomingHttpHeaders;
  /** Header names and values as sent (repeated headers kept), see `IncomingMessage.rawHeaders`. */
  rawHeaders: string[];
  /** JSON-RPC methods of the body (one, or one per batch element). */
  methods: string[];
}

/** A running echo upstream. */
export interface EchoUpstream {
  /** `http://127.0.0.1:<port>` (no credentials, no path). */
  origin: string;
  port: number;
  /** Every HTTP request received, in order. */
  requests: EchoRequest[];
  /** Destroys every socket and closes the server. */
  close(): Promise<void>;
}

/** The pieces of a request that the upstream echoes. */
export interface EchoPieces {
  url: string;
  urlEncoded: string;
  authorization: string;
  /** For `Authorization: Basic`, the decoded `user:pass`; else empty. */
  basicDecoded: string;
  apiKey: string;
}

/** The echo pieces of a request. */
export function echoPieces(url: string, headers: IncomingHttpHeaders): EchoPieces {
  const authorization = String(headers.authorization ?? '');
  const basic = /^Basic\s+(.+)$/i.exec(authorization);
  return {
    url,
    urlEncoded: encodeURIComponent(url),
    authorization,
    basicDecoded: basic ? Buffer.from(basic[1] as string, 'base64').toString('utf8') : '',
    apiKey: String(headers['x-api-key'] ?? ''),
  };
}

/** The echo as one line of text. */
export function echoText(p: EchoPieces): string {
  return `url=${p.url} encoded=${p.urlEncoded} authorization=${p.authorization} basic=${p.basicDecoded} x-api-key=${p.apiKey}`;
}

/** Status, content type and body of the echo answer for one method. */
function answer(method: string, idRaw: string, p: EchoPieces): { status: number; type: string; body: string } {
  const text = echoText(p);
  const json = (o: unknown) => ({ status: 200, type: 'application/json', body: `{"jsonrpc":"2.0","id":${idRaw},${JSON.stringify(o).slice(1, -1)}}` });
  switch (method) {
    case 'echo_data':
      return json({ error: { code: -32000, message: 'echo data', data: { ...p, nested: { list: [text, { deeper: p.authorization }] } } } });
    case 'echo_dataString':
      return json({ error: { code: -32000, message: 'echo data string', data: text } });
    case 'echo_revert':
      return json({ error: { code: 3, message: `execution reverted: ${text}`, data: text } });
    case 'echo_badCode':
      return json({ error: { code: 'E_LEAK', message: { text }, data: { ...p } } });
    case 'echo_500':
      return { status: 500, type: 'text/plain', body: `internal error while serving ${text}` };
    case 'echo_garbage':
      return { status: 200, type: 'text/plain', body: `<html><body>bad gateway: ${text}</body></html>` };
    case 'echo_garbageLong': {
      // The URL path secret (the segment after `/v2/`) starts 5 characters before the cut at 200.
      const seg = p.url.split('/')[2] ?? '';
      const prefix = 'x'.repeat(200 - 5 - '/v2/'.length);
      return { status: 200, type: 'text/plain', body: `${prefix}/v2/${seg} and more text after the secret` };
    }
    case 'echo_result':
      return json({ result: text });
    default:
      return json({ error: { code: -32000, message: `echo ${text}` } });
  }
}

/** Options of {@link startEchoUpstream}. */
export interface EchoUpstreamOptions {
  /** Answered to `eth_chainId` / `net_version` (default 31337 = 0x7a69). */
  chainId?: number;
  /** Shape for methods that are not `echo_*` (svc's state polls), default `echo_rpcError`. */
  otherMethods?: EchoMode;
  /** When set, `eth_chainId` is answered in this shape instead of with the chain id. */
  chainIdMode?: EchoMode;
}

/**
 * Starts the echo upstream on 127.0.0.1 with a kernel-picked port.
 * @param opts chain id and the shape for non-`echo_*` methods
 */
export async function startEchoUpstream(opts: EchoUpstreamOptions = {}): Promise<EchoUpstream> {
  const chainId = opts.chainId ?? 31337;
  const other = opts.otherMethods ?? 'echo_rpcError';
  const requests: EchoRequest[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      const p = echoPieces(url, req.headers);
      let doc: unknown;
      try {
        doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        doc = undefined;
      }
      const els = (Array.isArray(doc) ? doc : [doc]) as ({ method?: unknown; id?: unknown } | undefined)[];
      const methods = els.map((e) => (typeof e?.method === 'string' ? e.method : ''));
      requests.push({ url, headers: req.headers, rawHeaders: req.rawHeaders, methods });
      const one = (e: { method?: unknown; id?: unknown } | undefined, method: string) => {
        const idRaw = JSON.stringify(e?.id ?? null);
        if (method === 'eth_chainId' && opts.chainIdMode) return answer(opts.chainIdMode, idRaw, p);
        if (method === 'eth_chainId')
          return { status: 200, type: 'application/json', body: `{"jsonrpc":"2.0","id":${idRaw},"result":"0x${chainId.toString(16)}"}` };
        if (method === 'net_version') return { status: 200, type: 'application/json', body: `{"jsonrpc":"2.0","id":${idRaw},"result":"${chainId}"}` };
        return answer(method.startsWith('echo_') ? method : other, idRaw, p);
      };
      let out: { status: number; type: string; body: string };
      if (Array.isArray(doc)) {
        // A batch is answered element-wise with JSON answers only (a non-JSON shape answers the whole request).
        const parts = els.map((e, i) => one(e, methods[i] as string));
        const nonJson = parts.find((x) => x.type !== 'application/json' || x.status !== 200);
        out = nonJson ?? { status: 200, type: 'application/json', body: `[${parts.map((x) => x.body).join(',')}]` };
      } else out = one(els[0], methods[0] as string);
      res.writeHead(out.status, { 'content-type': out.type, 'content-length': Buffer.byteLength(out.body) });
      res.end(out.body);
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  const port = await listenOnLoopback(server, 'echo upstream');
  return {
    origin: `http://127.0.0.1:${port}`,
    port: port,
    requests,
    close: async () => {
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await done;
    },
  };
}
