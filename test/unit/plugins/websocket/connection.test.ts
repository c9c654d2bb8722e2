/**
 * The WebSocket connection and message splitting (plugins/websocket) without sockets: a fake
 * `ws` socket, host and subscription hub. Batches holding subscription calls are split and put
 * back in order with ids byte for byte; the subscription cap, unsubscribe, the send-buffer cap
 * (1008), ping/pong liveness, the in-flight cap (the socket is paused) and a subscribe that
 * resolves after the connection closed (nothing left feeding a dead sink).
 */
import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { Counter, Registry } from 'prom-client';
import type WebSocket from 'ws';
import type { Identity, JsonRpcInput, JsonRpcOutput, Network, PluginHost } from '../../../../core/plugin-api.ts';
import { ErrAuthRateLimitRuleExceeded, ErrAuthUnauthorized, ErrEndpointServerSideException, ErrEndpointUnsupported } from '../../../../core/plugin-errors.ts';
import type { RateLimitService } from 'svc-proxy/plugins/rate-limit';
import { MAX_IN_FLIGHT, WsConnection } from '../../../../plugins/websocket/connection.ts';
import { createWebSocketHooks } from '../../../../plugins/websocket/hooks.ts';
import { answerMessage, type MessageHandlers } from '../../../../plugins/websocket/messages.ts';
import type { SubscriptionHub, SubscriptionSink, SubscriptionType } from '../../../../plugins/websocket/subscriptions/types.ts';

/** A socket double: records sends, pings and closes; bufferedAmount is settable. */
class FakeSocket extends EventEmitter {
  readyState = 1;
  bufferedAmount = 0;
  sent: string[] = [];
  pings = 0;
  closedWith?: [number, string];
  terminated = false;
  paused = false;
  send(t: string): void {
    this.sent.push(t);
  }
  ping(): void {
    this.pings++;
  }
  close(code: number, reason: string): void {
    this.closedWith = [code, reason];
    this.readyState = 2;
  }
  terminate(): void {
    this.terminated = true;
    this.readyState = 3;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
}

/** A hub double: ids `0x1`, `0x2`...; `hold` makes subscribe wait until released. */
class FakeHub implements SubscriptionHub {
  subs = new Map<string, SubscriptionSink>();
  dropped = 0;
  hold?: Promise<void>;
  private n = 0;
  networkReplaced(): void {}
  upstreamLeft(): void {}
  async subscribe(_n: Network, sink: SubscriptionSink, params: unknown): Promise<string> {
    if (!Array.isArray(params) || params[0] === 'newPendingTransactions') throw new ErrEndpointUnsupported('no pending feed');
    await this.hold;
    const id = `0x${(++this.n).toString(16)}`;
    this.subs.set(id, sink);
    return id;
  }
  unsubscribe(sink: SubscriptionSink, id: string): boolean {
    return this.subs.get(id) === sink && this.subs.delete(id);
  }
  dropSink(sink: SubscriptionSink): void {
    this.dropped++;
    for (const [id, s] of this.subs) if (s === sink) this.subs.delete(id);
  }
  counts(): Record<SubscriptionType, number> {
    return { newHeads: this.subs.size, logs: 0, newPendingTransactions: 0 };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const settings = {
  enabled: true,
  maxSubscriptionsPerConnection: 2,
  maxBufferedBytes: 1000,
  pingIntervalMs: 1000,
  newHeadsPollIntervalMs: 1000,
  maxConnections: 10,
  maxConnectionsPerClient: 10,
  maxConnectionLifetimeMs: 0,
  authRecheckIntervalMs: 0,
};

/** What a test changes of the connection's world: settings, the budgets, the auth hook's answer. */
interface SetupOptions {
  settings?: Partial<typeof settings>;
  rateLimit?: RateLimitService;
  /** Answers the `authenticate` hook (present: the project has strategies, the caller an identity). */
  authenticate?: () => Promise<Identity>;
  /** The identity of the upgrade (default `{userId: 'u1'}` when `authenticate` is set). */
  identity?: Identity;
}
const network = { id: 'evm:1' } as Network;

function setup(
  serve: (input: JsonRpcInput) => Promise<JsonRpcOutput> = async (i) => ({
    body: `{"served":${JSON.stringify(i.body)}}`,
    batch: false,
    status: 200,
    records: [],
  }),
  opts: SetupOptions = {},
) {
  const registry = new Registry();
  const authenticate = opts.authenticate;
  const host = {
    config: { server: { maxBatchSize: 100, maxJsonDepth: 16, includeErrorDetails: false } },
    logger: { error: () => undefined },
    metrics: registry,
    serveJsonRpc: serve,
    hooks: { authenticate: { isUsed: () => authenticate !== undefined, promise: () => (authenticate as () => Promise<Identity>)() } },
  } as unknown as PluginHost;
  const hub = new FakeHub();
  const socket = new FakeSocket();
  const hooks = createWebSocketHooks(host);
  const events: string[] = [];
  hooks.close.tap('t', (_c, code) => events.push(`close ${code}`));
  hooks.subscribe.tap('t', (_c, type) => events.push(`subscribe ${type}`));
  const messages = new Counter({ name: 'm', help: 'm', labelNames: ['project', 'direction'], registers: [registry] });
  let closed = 0;
  const closedBySvc: string[] = [];
  const conn = new WsConnection(
    socket as unknown as WebSocket,
    {
      target: { project: { id: 'main' } as never, network },
      info: { clientAddress: '10.0.0.1' } as never,
      identity: opts.identity ?? (authenticate ? { userId: 'u1' } : undefined),
    },
    {
      host,
      hub,
      hooks,
      settings: { ...settings, ...opts.settings },
      messages,
      closed: () => closed++,
      rateLimit: opts.rateLimit,
      closedBySvc: (r) => closedBySvc.push(r),
    },
  );
  const say = async (text: string): Promise<any> => {
    const before = socket.sent.length;
    socket.emit('message', Buffer.from(text), false);
    for (let i = 0; i < 50 && socket.sent.length === before; i++) await new Promise((r) => setImmediate(r));
    return JSON.parse(socket.sent.at(-1) as string);
  };
  return { conn, socket, hub, events, say, closedCount: () => closed, closedBySvc };
}

describe('websocket plugin: connection', () => {
  it('answers eth_subscribe/eth_unsubscribe from the hub with the caller id as written; the hook sees the type', async () => {
    const { say, events, hub, socket } = setup();
    expect(await say('{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_subscribe","params":["newHeads"]}')).to.include({ result: '0x1' });
    expect(socket.sent[0]).to.equal('{"jsonrpc":"2.0","id":12345678901234567890,"result":"0x1"}');
    expect(await say('{"jsonrpc":"2.0","id":1.50,"method":"eth_subscribe","params":["newHeads"]}')).to.include({ result: '0x2' });
    expect(socket.sent[1]).to.equal('{"jsonrpc":"2.0","id":1.50,"result":"0x2"}');
    expect(events).to.deep.equal(['subscribe newHeads', 'subscribe newHeads']);
    expect(await say('{"jsonrpc":"2.0","id":"u","method":"eth_unsubscribe","params":["0x1"]}')).to.deep.equal({ jsonrpc: '2.0', id: 'u', result: true });
    expect(await say('{"jsonrpc":"2.0","id":"u","method":"eth_unsubscribe","params":["0x1"]}')).to.include({ result: false });
    await say('{"jsonrpc":"2.0","id":"u","method":"eth_unsubscribe","params":["0x2"]}');
    expect(hub.subs.size).to.equal(0);
    const bad = await say('{"jsonrpc":"2.0","id":7,"method":"eth_unsubscribe","params":[]}');
    expect(bad.error.code).to.equal(-32602);
    const refused = await say('{"jsonrpc":"2.0","id":8,"method":"eth_subscribe","params":["newPendingTransactions"]}');
    expect(refused).to.deep.include({ id: 8 });
    expect(refused.error.code).to.equal(-32601);
    expect((await say('{"jsonrpc":"1.0","id":9,"method":"eth_subscribe","params":["newHeads"]}')).error.code).to.equal(-32600);
  });

  it('refuses a subscription past maxSubscriptionsPerConnection with -32005; unsubscribing makes room', async () => {
    const { say } = setup();
    const sub = (id: number) => say(`{"jsonrpc":"2.0","id":${id},"method":"eth_subscribe","params":["newHeads"]}`);
    expect((await sub(1)).result).to.equal('0x1');
    expect((await sub(2)).result).to.equal('0x2');
    const over = await sub(3);
    expect(over.error.code).to.equal(-32005);
    expect(over.error.message).to.match(/maxSubscriptionsPerConnection/);
    await say('{"jsonrpc":"2.0","id":4,"method":"eth_unsubscribe","params":["0x1"]}');
    expect((await sub(5)).result).to.equal('0x3');
  });

  it('closes with 1008 when the send buffer is over maxBufferedBytes, drops its subscriptions and sends nothing more', async () => {
    const { conn, socket, hub, say, events, closedCount } = setup();
    await say('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}');
    socket.bufferedAmount = 1001;
    const before = socket.sent.length;
    conn.send('{"notification":1}');
    expect(socket.closedWith).to.deep.equal([1008, 'send buffer over 1000 bytes: client too slow']);
    expect(socket.sent.length).to.equal(before);
    expect(hub.subs.size).to.equal(0);
    conn.send('{"notification":2}');
    expect(socket.sent.length).to.equal(before);
    socket.emit('close', 1006, Buffer.from(''));
    expect(events.at(-1)).to.equal('close 1006');
    expect(closedCount()).to.equal(1);
  });

  it('pings each interval and cuts a peer that did not pong since the last ping', () => {
    const { conn, socket } = setup();
    conn.heartbeat();
    expect(socket.pings).to.equal(1);
    socket.emit('pong');
    conn.heartbeat();
    expect(socket.pings).to.equal(2);
    expect(socket.terminated).to.equal(false);
    conn.heartbeat();
    expect(socket.terminated).to.equal(true);
  });

  it(`stops reading past ${MAX_IN_FLIGHT} messages in flight and reads again once half are answered`, async () => {
    const waiting: Array<() => void> = [];
    const { socket } = setup((i) => new Promise((r) => waiting.push(() => r({ body: i.body, batch: false, status: 200, records: [] }))));
    for (let i = 0; i < MAX_IN_FLIGHT; i++) socket.emit('message', Buffer.from(`{"n":${i}}`));
    expect(socket.paused).to.equal(true);
    for (const w of waiting.splice(0, MAX_IN_FLIGHT / 2)) w();
    await new Promise((r) => setTimeout(r, 5));
    expect(socket.paused).to.equal(false);
    expect(socket.sent.length).to.equal(MAX_IN_FLIGHT / 2);
  });

  it('charges each eth_subscribe to the caller budgets (method eth_subscribe, its address and identity); over budget: -32005 and no subscription', async () => {
    const charged: string[] = [];
    let left = 2;
    const rateLimit: RateLimitService = {
      charge: async (n, method, caller) => {
        charged.push(`${n.id} ${method} ${caller.clientAddress}`);
        if (left-- <= 0) throw new ErrAuthRateLimitRuleExceeded('rate-limit exceeded');
      },
    };
    const { say, hub } = setup(undefined, { rateLimit, settings: { maxSubscriptionsPerConnection: 10 } });
    const sub = (id: number, params: unknown[]) => say(JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_subscribe', params }));
    expect((await sub(1, ['newHeads'])).result).to.equal('0x1');
    expect((await sub(2, ['logs', { address: `0x${'a'.repeat(40)}` }])).result).to.equal('0x2');
    const over = await sub(3, ['logs', { address: `0x${'b'.repeat(40)}` }]);
    expect(over.error.code).to.equal(-32005);
    expect(over.error.message).to.match(/rate-limit exceeded/);
    expect(hub.subs.size).to.equal(2);
    expect(charged).to.deep.equal(['evm:1 eth_subscribe 10.0.0.1', 'evm:1 eth_subscribe 10.0.0.1', 'evm:1 eth_subscribe 10.0.0.1']);
  });

  it('closes with 1001 once maxConnectionLifetime has passed, dropping its subscriptions', async () => {
    const { socket, say, hub, closedBySvc } = setup(undefined, { settings: { maxConnectionLifetimeMs: 40 } });
    await say('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}');
    expect(socket.closedWith).to.equal(undefined);
    for (let i = 0; i < 200 && !socket.closedWith; i++) await new Promise((r) => setTimeout(r, 5));
    expect(socket.closedWith).to.deep.equal([1001, 'connection lifetime reached: reconnect']);
    expect(hub.subs.size).to.equal(0);
    expect(closedBySvc).to.deep.equal(['lifetime']);
  });

  it('re-checks the credential every authRecheckInterval: a store failure keeps it open, a refusal closes it with 1008 and the reason', async () => {
    let answer: () => Promise<Identity> = async () => ({ userId: 'u1' });
    const { socket, closedBySvc } = setup(undefined, { settings: { authRecheckIntervalMs: 10 }, authenticate: () => answer() });
    await new Promise((r) => setTimeout(r, 40));
    answer = async () => {
      throw new ErrEndpointServerSideException('key store down');
    };
    await new Promise((r) => setTimeout(r, 40));
    expect(socket.closedWith).to.equal(undefined);
    answer = async () => {
      throw new ErrAuthUnauthorized('api key disabled');
    };
    for (let i = 0; i < 200 && !socket.closedWith; i++) await new Promise((r) => setTimeout(r, 5));
    expect(socket.closedWith).to.deep.equal([1008, 'credential no longer valid: api key disabled']);
    expect(closedBySvc).to.deep.equal(['auth']);
    socket.emit('close', 1008, Buffer.from(''));
  });

  it('does not re-check a SIWE identity (its message is single-use: presenting it again is a replay)', async () => {
    let asked = 0;
    const { socket } = setup(undefined, {
      settings: { authRecheckIntervalMs: 5 },
      identity: { userId: '0xabc', strategy: 'siwe' },
      authenticate: async () => {
        asked++;
        throw new ErrAuthUnauthorized('SIWE message was already used');
      },
    });
    await new Promise((r) => setTimeout(r, 40));
    expect(asked).to.equal(0);
    expect(socket.closedWith).to.equal(undefined);
    socket.emit('close', 1000, Buffer.from(''));
  });

  it('a subscription the hub grants after the connection closed is undone at once', async () => {
    const { socket, hub } = setup();
    let release!: () => void;
    hub.hold = new Promise((r) => (release = r));
    socket.emit('message', Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}'));
    socket.emit('close', 1000, Buffer.from(''));
    release();
    await new Promise((r) => setTimeout(r, 5));
    expect(hub.subs.size).to.equal(0);
  });
});

describe('websocket plugin: message splitting', () => {
  const handlers = (served: string[]): MessageHandlers => ({
    serve: async (body) => {
      served.push(body);
      const parsed = JSON.parse(body) as unknown;
      const answer = (el: { id?: unknown }) => `{"id":${JSON.stringify(el.id)},"result":"served"}`;
      return Array.isArray(parsed)
        ? { body: `[${parsed.map(answer).join(',')}]`, batch: true, status: 200, records: [] }
        : { body: answer(parsed as { id?: unknown }), batch: false, status: 200, records: [] };
    },
    subscription: async (text) => `{"hub":${text}}`,
    maxBatchSize: 10,
    maxJsonDepth: 4,
  });

  it('a message naming no subscription method goes whole to the pipeline, unparsed', async () => {
    const served: string[] = [];
    expect(await answerMessage('{"id":1,"method":"eth_chainId"}', handlers(served))).to.equal('{"id":1,"result":"served"}');
    expect(served).to.deep.equal(['{"id":1,"method":"eth_chainId"}']);
  });

  it('a batch is split: subscription elements to the hub, the rest as one sub-batch, answers in order', async () => {
    const served: string[] = [];
    const text =
      '[{"id":1,"method":"eth_chainId"}, {"id":2,"method":"eth_subscribe","params":["newHeads"]},{"id":3,"method":"eth_blockNumber"},{"id":4,"method":"eth_unsubscribe","params":["0x1"]}]';
    const out = JSON.parse(await answerMessage(text, handlers(served))) as unknown[];
    expect(out).to.deep.equal([
      { id: 1, result: 'served' },
      { hub: { id: 2, method: 'eth_subscribe', params: ['newHeads'] } },
      { id: 3, result: 'served' },
      { hub: { id: 4, method: 'eth_unsubscribe', params: ['0x1'] } },
    ]);
    expect(served).to.deep.equal(['[{"id":1,"method":"eth_chainId"},{"id":3,"method":"eth_blockNumber"}]']);
  });

  it('a batch of only subscription calls never reaches the pipeline; an over-deep one does (and is refused there)', async () => {
    const served: string[] = [];
    await answerMessage('[{"id":1,"method":"eth_subscribe","params":["newHeads"]}]', handlers(served));
    expect(served).to.deep.equal([]);
    await answerMessage('[{"id":1,"method":"eth_subscribe","params":["logs",{"a":[[[1]]]}]}]', handlers(served));
    expect(served).to.have.length(1);
  });

  it('an empty batch, an oversized one and unparsable text go whole to the pipeline', async () => {
    const served: string[] = [];
    const many = `[${Array.from({ length: 11 }, (_, i) => `{"id":${i},"method":"eth_subscribe"}`).join(',')}]`;
    for (const t of ['[]', many, '{"method":"eth_subscribe"']) {
      await answerMessage(t, { ...handlers(served), serve: async (b) => (served.push(b), { body: 'refused', batch: false, status: 400, records: [] }) });
    }
    expect(served).to.deep.equal(['[]', many, '{"method":"eth_subscribe"']);
  });
});
