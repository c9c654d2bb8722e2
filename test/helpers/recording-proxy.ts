/**
 * A recording JSON-RPC forwarder for e2e tests: node:http on 127.0.0.1 in front of a real node
 * (anvil). Every single (non-batch) call is recorded (method, params) and forwarded as is,
 * unless `intercept` answers it first (for an upstream that behaves like a pruned node, say).
 * Batch bodies are forwarded unrecorded.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One call the forwarder received. */
export interface RecordedCall {
  method: string;
  params: unknown[];
}

/** A running forwarder. */
export interface RecordingProxy {
  url: string;
  /** Calls received, in arrival order. */
  calls: RecordedCall[];
  /** Calls of one method. */
  callsOf(method: string): RecordedCall[];
  /**
   * Answers a call without forwarding it when it returns a JSON-RPC `{result}` or `{error}`
   * object; `undefined` forwards. Settable at any time.
   */
  intercept?: (call: RecordedCall) => { result?: unknown; error?: { code: number; message: string } } | undefined;
  close(): Promise<void>;
}

/**
 * Starts a forwarder to `target`.
 * @param target the node's URL
 */
export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const proxy: RecordingProxy = {
    url: '',
    calls: [],
    callsOf: (m) => proxy.calls.filter((c) => c.method === m),
    close: async () => undefined,
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const send = (body: string) => {
          if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end(body);
        };
        const doc = JSON.parse(text) as { id?: unknown; method?: string; params?: unknown[] } | unknown[];
        if (!Array.isArray(doc) && typeof doc.method === 'string') {
          const call = { method: doc.method, params: Array.isArray(doc.params) ? doc.params : [] };
          proxy.calls.push(call);
          const own = proxy.intercept?.(call);
          if (own) return send(JSON.stringify({ jsonrpc: '2.0', id: doc.id, ...own }));
        }
        const r = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
        send(await r.text());
      })().catch(() => {
        if (!res.destroyed) res.writeHead(502).end();
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return proxy;
}
