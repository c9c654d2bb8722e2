/**
 * A lying upstream for tests: a small HTTP proxy on a free loopback port in front of a real node
 * (anvil), forwarding every request and answering what the node answered, except where the test
 * says otherwise. It plays the real-world faults the hostile suite's "lying upstream" class
 * attacks: a node that reports a far-future head, a load balancer that routes to another chain,
 * an answer with a member given twice. Single calls only are rewritten; batches pass through.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { listenOnLoopback } from './ports.ts';

/** One call as the proxy saw it, with the node's answer. */
export interface ProxiedCall {
  /** The JSON-RPC method. */
  method: string;
  /** The params as sent. */
  params: unknown;
  /** The id as sent (svc's own id). */
  id: unknown;
}

/**
 * Rewrites one answer: returns the body to send instead (text, sent as is), or undefined to pass
 * the node's answer through.
 * @param call the call
 * @param answer the node's answer, parsed
 * @param text the node's answer as sent
 */
export type Rewrite = (call: ProxiedCall, answer: { id?: unknown; result?: unknown; error?: unknown }, text: string) => string | undefined;

/** A running lying proxy. */
export interface LyingProxy {
  /** `http://127.0.0.1:<port>/`. */
  url: string;
  /** Single calls received, in order. */
  calls: ProxiedCall[];
  /** The rewrite in force (undefined: an honest proxy). */
  rewrite: Rewrite | undefined;
  /** Where requests go; may be changed while running (a load balancer switching nodes). */
  target: string;
  /** Closes the proxy and its sockets. */
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/**
 * Starts a lying proxy in front of `target`.
 * @param target the node's URL
 * @param rewrite the initial rewrite (default none)
 * @returns the running proxy
 */
export async function startLyingProxy(target: string, rewrite?: Rewrite): Promise<LyingProxy> {
  const sockets = new Set<Socket>();
  const proxy: LyingProxy = {
    url: '',
    calls: [],
    rewrite,
    target,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const body = await readBody(req);
      let call: ProxiedCall | undefined;
      try {
        const doc = JSON.parse(body) as unknown;
        if (doc && typeof doc === 'object' && !Array.isArray(doc)) {
          const o = doc as { method?: unknown; params?: unknown; id?: unknown };
          call = { method: String(o.method), params: o.params, id: o.id };
          proxy.calls.push(call);
        }
      } catch {
        /* forwarded as is: the node answers the parse error */
      }
      const upstream = await fetch(proxy.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const text = await upstream.text();
      let out = text;
      if (call && proxy.rewrite) {
        try {
          out = proxy.rewrite(call, JSON.parse(text) as { id?: unknown; result?: unknown; error?: unknown }, text) ?? text;
        } catch {
          out = text;
        }
      }
      res.writeHead(upstream.status, { 'content-type': 'application/json' });
      res.end(out);
    })().catch(() => {
      res.writeHead(502);
      res.end();
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listenOnLoopback(server, 'lying proxy');
  proxy.url = `http://127.0.0.1:${port}/`;
  return proxy;
}

/**
 * A JSON-RPC answer text with `result` given twice: the forged value first (what a byte-level
 * reader takes), the true one last (what `JSON.parse` keeps).
 * @param id the request id (as sent by svc)
 * @param forged the first `result`
 * @param truth the second `result`
 * @param escaped spell the second name `res\u0075lt`, which decodes to the same name
 */
export function duplicateResult(id: unknown, forged: unknown, truth: unknown, escaped = false): string {
  const second = escaped ? '"res\\u0075lt"' : '"result"';
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${JSON.stringify(forged)},${second}:${JSON.stringify(truth)}}`;
}
