/**
 * A lying upstream for the hostile suite: node:http on 127.0.0.1 in front of a real node
 * (anvil) that forwards every call as is, except those a lie set with {@link LyingProxy.lie}
 * answers first, with bytes of the test's choosing (a forged block, a duplicated `result`
 * member, a head from the future, a `null`). WebSocket upgrades on the same port are piped to
 * the node's WebSocket (anvil serves it on its HTTP port), and {@link LyingProxy.pushWs} sends
 * a forged message to every open socket (a bogus `newHeads` notification). Batches are split and
 * each element goes through the same rules. {@link LyingProxy.retarget} moves the forwarding to
 * another node (a load balancer that switches networks after the probe).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';

/** One JSON-RPC call the proxy received. */
export interface LiedCall {
  id: unknown;
  method: string;
  params: unknown[];
}

/**
 * A lie: given a call, the raw JSON text of the whole answer to send instead of the node's, or
 * `undefined` to forward. {@link LyingProxy.lie} wraps a `result` value; a raw lie is needed for
 * bytes JSON.stringify cannot write (two members of one name).
 */
export type Lie = (call: LiedCall) => string | undefined | Promise<string | undefined>;

/** A running lying proxy. */
export interface LyingProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** `ws://127.0.0.1:<port>` (piped to the node's WebSocket). */
  wsUrl: string;
  /** Calls received, in arrival order (the last 10,000). */
  calls: LiedCall[];
  /**
   * Answers calls of `method` for which `result` returns a value with `{"result": <that value>}`
   * instead of forwarding, at most `times` times (default: until {@link LyingProxy.truth}).
   * @param result the forged result (JSON-encoded), or `undefined` to forward this call
   */
  lie(method: string, result: (call: LiedCall) => unknown, times?: number): void;
  /** As {@link LyingProxy.lie}, with the whole answer's raw text (`id` is the call's, JSON-encoded). */
  lieRaw(method: string, answer: (call: LiedCall, id: string) => string | undefined, times?: number): void;
  /**
   * Holds each call of `method` until `release(call)` settles, then forwards it (an upstream
   * deterministically slower than another), until {@link LyingProxy.truth}.
   */
  hold(method: string, release: (call: LiedCall) => Promise<unknown>): void;
  /** Stops every lie and hold. */
  truth(): void;
  /** How many answers were forged so far (of one method, or all). */
  told(method?: string): number;
  /** Forwards everything from now on to another node (HTTP and new WebSockets). */
  retarget(url: string): void;
  /** Sends a raw text message to every open client WebSocket. */
  pushWs(text: string): void;
  /**
   * Sends a forged `newHeads` notification (the block as its header) on every `newHeads`
   * subscription a client opened through the proxy, under the node's subscription id.
   * @returns how many notifications were sent
   */
  pushNewHead(block: unknown): number;
  /** Sends one call to the current target directly (for a lie built from a real answer). */
  forward(method: string, params?: unknown[]): Promise<any>;
  close(): Promise<void>;
}

const MAX_CALLS = 10_000;

/** The JSON value of a text, or undefined when it is not JSON. */
function parseOr(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Starts a lying proxy in front of a node.
 * @param target the node's HTTP URL (its WebSocket is the same address with `ws:`)
 */
export async function startLyingProxy(target: string): Promise<LyingProxy> {
  let node = target;
  const lies = new Map<string, { lie: Lie; left: number }>();
  const told = new Map<string, number>();
  const sockets = new Set<WebSocket>();
  /** Per client socket: ids of its pending `eth_subscribe newHeads` calls, and the node's subscription ids. */
  const newHeads = new Map<WebSocket, { pending: Set<unknown>; subs: Set<string> }>();

  async function forwardText(text: string): Promise<string> {
    const r = await fetch(node, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
    return r.text();
  }

  async function one(doc: unknown): Promise<string> {
    const d = doc as { id?: unknown; method?: unknown; params?: unknown };
    if (typeof d === 'object' && d !== null && typeof d.method === 'string') {
      const call: LiedCall = { id: d.id ?? null, method: d.method, params: Array.isArray(d.params) ? d.params : [] };
      proxy.calls.push(call);
      if (proxy.calls.length > MAX_CALLS) proxy.calls.splice(0, proxy.calls.length - MAX_CALLS);
      const rule = lies.get(call.method);
      if (rule && rule.left > 0) {
        const forged = await rule.lie(call);
        if (forged !== undefined) {
          rule.left--;
          told.set(call.method, (told.get(call.method) ?? 0) + 1);
          return forged;
        }
      }
    }
    return forwardText(JSON.stringify(doc));
  }

  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const doc = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
        const body = Array.isArray(doc) ? `[${(await Promise.all(doc.map(one))).join(',')}]` : await one(doc);
        if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      })().catch(() => {
        if (!res.destroyed) res.writeHead(502).end();
      });
    });
  });

  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (client) => {
      const up = new WebSocket(node.replace(/^http/, 'ws'));
      const queued: string[] = [];
      sockets.add(client);
      up.on('open', () => queued.splice(0).forEach((m) => up.send(m)));
      const heads = { pending: new Set<unknown>(), subs: new Set<string>() };
      newHeads.set(client, heads);
      up.on('message', (m) => {
        const text = m.toString();
        const doc = parseOr(text) as { id?: unknown; result?: unknown } | undefined;
        if (doc && heads.pending.delete(doc.id) && typeof doc.result === 'string') heads.subs.add(doc.result);
        if (client.readyState === WebSocket.OPEN) client.send(text);
      });
      client.on('message', (m) => {
        const text = m.toString();
        const doc = parseOr(text) as { id?: unknown; method?: unknown; params?: unknown[] } | undefined;
        if (doc?.method === 'eth_subscribe' && doc.params?.[0] === 'newHeads') heads.pending.add(doc.id);
        if (up.readyState === WebSocket.OPEN) up.send(text);
        else queued.push(text);
      });
      const end = () => {
        newHeads.delete(client);
        sockets.delete(client);
        client.terminate();
        up.terminate();
      };
      up.on('close', end);
      up.on('error', end);
      client.on('close', end);
      client.on('error', end);
    });
  });

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  const proxy: LyingProxy = {
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    calls: [],
    lie: (method, result, times = Infinity) =>
      proxy.lieRaw(
        method,
        (call, id) => {
          const v = result(call);
          return v === undefined ? undefined : `{"jsonrpc":"2.0","id":${id},"result":${JSON.stringify(v)}}`;
        },
        times,
      ),
    lieRaw: (method, answer, times = Infinity) => {
      lies.set(method, { lie: (call) => answer(call, JSON.stringify(call.id)), left: times });
    },
    hold: (method, release) => {
      lies.set(method, {
        lie: async (call) => {
          await release(call).catch(() => undefined);
          return undefined;
        },
        left: Infinity,
      });
    },
    truth: () => lies.clear(),
    told: (method) => (method ? (told.get(method) ?? 0) : [...told.values()].reduce((a, b) => a + b, 0)),
    retarget: (url) => {
      node = url;
    },
    pushWs: (text) => {
      for (const s of sockets) if (s.readyState === WebSocket.OPEN) s.send(text);
    },
    pushNewHead: (block) => {
      let sent = 0;
      for (const [s, h] of newHeads) {
        for (const sub of h.subs) {
          if (s.readyState !== WebSocket.OPEN) continue;
          s.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: sub, result: block } }));
          sent++;
        }
      }
      return sent;
    },
    forward: async (method, params = []) => {
      const doc = JSON.parse(await forwardText(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }))) as { result?: unknown; error?: { message: string } };
      if (doc.error) throw new Error(`lying proxy: ${method} failed upstream: ${doc.error.message}`);
      return doc.result;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return proxy;
}
