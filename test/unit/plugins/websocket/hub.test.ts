/**
 * The subscription hub (plugins/websocket/subscriptions) against a fake network whose pipeline
 * answers from an in-memory chain the test controls: newHeads once each and in order, a gap
 * filled, a reorg (new heads at the same heights, the abandoned blocks' logs re-emitted with
 * `removed: true` before the new ones), feeds shared per filter (getLogs counted), unsubscribe and
 * dropSink stopping the follower, bad params refused, a failing pipeline resumed without a gap,
 * the per-connection cap; and the upstream WebSocket side with a fake `ws` node: newHeads
 * notifications wake the follower, newPendingTransactions passed through and moved to the next
 * upstream when the first dies.
 */
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { type Network, type PluginHost, RpcResult, type Upstream } from '../../../../core/plugin-api.ts';
import { ErrEndpointServerSideException, SvcError } from '../../../../core/plugin-errors.ts';
import { CHAIN_STATE_SERVICE, NO_CHAIN_STATE } from 'svc-proxy/plugins/evm-state';

/** A host's services with only the evm-state plugin's chain state service, answering `state` for every network. */
const chainService = (state: object) => ({ get: (k: unknown) => (k === CHAIN_STATE_SERVICE ? { of: () => state } : undefined) });
import { createSubscriptionHub } from '../../../../plugins/websocket/subscriptions/hub.ts';
import type { SubscriptionHub, SubscriptionSink } from '../../../../plugins/websocket/subscriptions/types.ts';

const ADDR_A = `0x${'a'.repeat(40)}`;
const ADDR_B = `0x${'b'.repeat(40)}`;
const TOPIC_X = `0x${'1'.repeat(64)}`;
const TOPIC_Y = `0x${'2'.repeat(64)}`;

interface FakeBlock {
  number: string;
  hash: string;
  parentHash: string;
  timestamp: string;
  transactions: string[];
  uncles: string[];
  size: string;
}
interface FakeLog {
  address: string;
  topics: string[];
  data: string;
  blockNumber: string;
  blockHash: string;
  logIndex: string;
  removed: boolean;
}

const hex = (n: number) => `0x${n.toString(16)}`;

/** An in-memory chain: canonical blocks by number, every block ever made by hash, logs per block. */
class Chain {
  canonical: FakeBlock[] = [];
  byHash = new Map<string, FakeBlock>();
  logs = new Map<string, FakeLog[]>();
  calls: Array<{ method: string; params: unknown[] }> = [];
  /** Calls that fail from now on (the pipeline throws); decremented per failure. */
  failures = 0;
  /** eth_getLogs calls that fail from now on; decremented per failure. */
  failLogs = 0;
  /** When set, answers `latest` with the block this many below the head (a lagging upstream). */
  lag = 0;
  /** When set, the `latest` answer (an upstream reporting a block from the future). */
  far?: FakeBlock;
  private made = 0;

  constructor(height = 5) {
    for (let i = 0; i <= height; i++) this.mine();
  }

  get head(): FakeBlock {
    return this.canonical.at(-1) as FakeBlock;
  }

  /** Appends a block with logs from the given addresses (one log each). */
  mine(addresses: string[] = []): FakeBlock {
    const n = this.canonical.length;
    const hash = `0x${(++this.made).toString(16).padStart(64, '0')}`;
    const b: FakeBlock = {
      number: hex(n),
      hash,
      parentHash: n === 0 ? `0x${'0'.repeat(64)}` : this.head.hash,
      timestamp: hex(1000 + n),
      transactions: [],
      uncles: [],
      size: '0x1',
    };
    this.canonical.push(b);
    this.byHash.set(hash, b);
    this.logs.set(
      hash,
      addresses.map((address, i) => ({
        address,
        topics: [TOPIC_X],
        data: hex(this.made),
        blockNumber: b.number,
        blockHash: hash,
        logIndex: hex(i),
        removed: false,
      })),
    );
    return b;
  }

  /** Replaces the last `depth` blocks by new ones (each with logs from `addresses`), same height plus `extra`. */
  reorg(depth: number, addresses: string[], extra = 0): void {
    this.canonical.splice(this.canonical.length - depth, depth);
    for (let i = 0; i < depth + extra; i++) this.mine(addresses);
  }

  handle(method: string, params: unknown[]): unknown {
    this.calls.push({ method, params });
    if (this.failures > 0) {
      this.failures--;
      throw new ErrEndpointServerSideException('upstream down');
    }
    if (method === 'eth_getBlockByNumber') {
      const ref = params[0] as string;
      if (ref === 'latest' && this.far) return this.far;
      if (ref === 'latest') return this.canonical[this.canonical.length - 1 - this.lag] ?? null;
      return this.canonical[Number.parseInt(ref, 16)] ?? null;
    }
    if (method === 'eth_getBlockByHash') return this.byHash.get(params[0] as string) ?? null;
    if (method === 'eth_getLogs') {
      if (this.failLogs > 0) {
        this.failLogs--;
        throw new ErrEndpointServerSideException('getLogs failed');
      }
      const f = params[0] as { blockHash: string; address?: string | string[]; topics?: unknown[] };
      const logs = this.logs.get(f.blockHash);
      if (!logs) throw new ErrEndpointServerSideException('unknown block');
      const addrs = f.address === undefined ? undefined : ([] as string[]).concat(f.address);
      return logs.filter((l) => !addrs || addrs.includes(l.address));
    }
    throw new Error(`unexpected ${method}`);
  }

  count(method: string): number {
    return this.calls.filter((c) => c.method === method).length;
  }
}

/** A fake network over a chain; upstreams only carry `wsEndpoint` settings. */
function networkOf(chain: Chain, wsEndpoints: string[] = []): Network {
  return {
    id: 'evm:1',
    chainId: 1,
    project: { id: 'main' },
    upstreams: wsEndpoints.map((url, i) => ({ id: `u${i}`, projectId: 'main', serving: true, config: { settings: { wsEndpoint: url } } })),
    handler: async (ctx: { request: { method: string; params: unknown[] } }) => new RpcResult(chain.handle(ctx.request.method, ctx.request.params)),
  } as unknown as Network;
}

const host = {
  logger: pino({ level: 'silent' }),
  internalContext: (network: Network, method: string, params: unknown) => ({ ctx: { network, request: { method, params } }, done: () => undefined }),
  // The fake network carries its own handler (a real one's chain is composed by the host).
  runCall: (ctx: { network: { handler: (ctx: unknown) => Promise<RpcResult> } }) => ctx.network.handler(ctx),
  services: chainService(NO_CHAIN_STATE),
} as unknown as PluginHost;

interface Frame {
  jsonrpc: string;
  method: string;
  params: { subscription: string; result: any };
}

/** A sink recording its frames (parsed) and raw texts. */
function sink(id = 'c1'): SubscriptionSink & { frames: Frame[]; texts: string[] } {
  const s = {
    id,
    frames: [] as Frame[],
    texts: [] as string[],
    send(text: string) {
      s.texts.push(text);
      s.frames.push(JSON.parse(text) as Frame);
    },
  };
  return s;
}

async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 2));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const numbers = (frames: Frame[], sub?: string) =>
  frames.filter((f) => !sub || f.params.subscription === sub).map((f) => Number.parseInt(f.params.result.number, 16));

describe('websocket plugin: subscription hub', () => {
  let hub: SubscriptionHub;
  afterEach(async () => {
    await hub?.close();
  });

  it('emits each new head once, in order, as a header, in the geth frame; the block known at subscribe time is not news', async () => {
    const chain = new Chain(5);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const s = sink();
    const id = await hub.subscribe(networkOf(chain), s, ['newHeads']);
    expect(id).to.match(/^0x[0-9a-f]{32}$/);
    for (let i = 0; i < 3; i++) {
      chain.mine();
      await until(() => s.frames.length === i + 1);
    }
    await sleep(30);
    expect(numbers(s.frames)).to.deep.equal([6, 7, 8]);
    const f = s.frames[0] as Frame;
    expect(s.texts[0]?.startsWith(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":{`)).to.equal(true);
    expect(f.params.result.hash).to.equal(chain.canonical[6]?.hash);
    expect(f.params.result).to.not.have.any.keys('transactions', 'uncles', 'size');
    expect(f.params.result).to.include.keys('parentHash', 'timestamp', 'number');
    expect(hub.counts()).to.deep.equal({ newHeads: 1, logs: 0, newPendingTransactions: 0 });
  });

  it('fills a gap: 5 blocks mined between two polls go out in order', async () => {
    const chain = new Chain(3);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const s = sink();
    await hub.subscribe(networkOf(chain), s, ['newHeads']);
    for (let i = 0; i < 5; i++) chain.mine();
    await until(() => s.frames.length >= 5);
    await sleep(30);
    expect(numbers(s.frames)).to.deep.equal([4, 5, 6, 7, 8]);
  });

  it('never goes backwards: a lagging answer for latest is ignored', async () => {
    const chain = new Chain(3);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const s = sink();
    await hub.subscribe(networkOf(chain), s, ['newHeads']);
    chain.mine();
    chain.mine();
    await until(() => s.frames.length === 2);
    chain.lag = 2;
    await sleep(30);
    chain.lag = 0;
    chain.mine();
    await until(() => s.frames.length === 3);
    await sleep(20);
    expect(numbers(s.frames)).to.deep.equal([4, 5, 6]);
  });

  it("asks the network's head plausibility rule (host.chainState judgeHead) before a far jump: an implausible far block read again and again is never emitted", async () => {
    const chain = new Chain(3);
    const judged: number[] = [];
    const judging = {
      ...host,
      services: chainService({
        ...NO_CHAIN_STATE,
        judgeHead: (n: number, kind: string) => {
          judged.push(n);
          expect(kind).to.equal('latest');
          return n > 1000 ? 'implausible' : 'plausible';
        },
      }),
    } as unknown as PluginHost;
    hub = createSubscriptionHub(judging, { pollIntervalMs: 5, maxPerConnection: 10 });
    const s = sink();
    await hub.subscribe(networkOf(chain), s, ['newHeads']);
    chain.far = { ...chain.head, number: hex(0x7fffffff), hash: `0x${'f'.repeat(64)}` };
    await until(() => judged.length >= 3);
    chain.far = undefined;
    chain.mine();
    await until(() => s.frames.length === 1);
    await sleep(20);
    expect(numbers(s.frames)).to.deep.equal([4]);
    expect(judged.every((n) => n === 0x7fffffff)).to.equal(true);
  });

  it('on a reorg of depth 2: the new heads at the same heights; the abandoned logs again with removed: true (newest first), then the new logs', async () => {
    const chain = new Chain(3);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const heads = sink('h');
    const logs = sink('l');
    const net = networkOf(chain);
    await hub.subscribe(net, heads, ['newHeads']);
    await hub.subscribe(net, logs, ['logs', { address: ADDR_A }]);
    for (let i = 0; i < 3; i++) chain.mine([ADDR_A, ADDR_B, ADDR_A]);
    await until(() => heads.frames.length === 3 && logs.frames.length === 6);
    const old = logs.frames.map((f) => f.params.result);
    expect(old.every((l) => l.address === ADDR_A && l.removed === false)).to.equal(true);
    chain.reorg(2, [ADDR_A], 1);
    await until(() => heads.frames.length === 6 && logs.frames.length === 6 + 4 + 3);
    await sleep(30);
    expect(numbers(heads.frames)).to.deep.equal([4, 5, 6, 5, 6, 7]);
    expect(heads.frames[3]?.params.result.hash).to.equal(chain.canonical[5]?.hash);
    expect(heads.frames[3]?.params.result.hash).to.not.equal(heads.frames[1]?.params.result.hash);
    const after = logs.frames.slice(6).map((f) => f.params.result);
    // Block 6's two logs, then block 5's, in reverse log order, removed.
    expect(after.slice(0, 4).map((l) => [Number.parseInt(l.blockNumber, 16), l.logIndex, l.removed])).to.deep.equal([
      [6, '0x2', true],
      [6, '0x0', true],
      [5, '0x2', true],
      [5, '0x0', true],
    ]);
    expect(after.slice(0, 4).map((l) => l.blockHash)).to.deep.equal([old[5].blockHash, old[4].blockHash, old[3].blockHash, old[2].blockHash]);
    expect(after.slice(4).map((l) => [Number.parseInt(l.blockNumber, 16), l.removed])).to.deep.equal([
      [5, false],
      [6, false],
      [7, false],
    ]);
  });

  it('shares one feed per (network, filter): every filter of the network shares one getLogs per block (two subscribers of one filter, then a third filter)', async () => {
    const chain = new Chain(3);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const net = networkOf(chain);
    const a = sink('a');
    const b = sink('b');
    const c = sink('c');
    const idA = await hub.subscribe(net, a, ['logs', { address: [ADDR_A, ADDR_B], topics: [TOPIC_X] }]);
    const idB = await hub.subscribe(net, b, ['logs', { address: [ADDR_B.toUpperCase().replace('0X', '0x'), ADDR_A], topics: [[TOPIC_X], null] }]);
    expect(idA).to.not.equal(idB);
    const before = chain.count('eth_getLogs');
    chain.mine([ADDR_A]);
    await until(() => a.frames.length === 1 && b.frames.length === 1);
    await sleep(20);
    expect(chain.count('eth_getLogs') - before).to.equal(1);
    expect(a.frames[0]?.params.subscription).to.equal(idA);
    expect(b.frames[0]?.params.subscription).to.equal(idB);
    expect(a.frames[0]?.params.result).to.deep.equal(b.frames[0]?.params.result);
    await hub.subscribe(net, c, ['logs', { address: ADDR_B }]);
    const mid = chain.count('eth_getLogs');
    chain.mine([ADDR_A, ADDR_B]);
    await until(() => a.frames.length === 3 && c.frames.length === 1);
    await sleep(20);
    expect(chain.count('eth_getLogs') - mid).to.equal(1);
    expect(c.frames.map((f) => f.params.result.address)).to.deep.equal([ADDR_B]);
    expect(hub.counts()).to.deep.equal({ newHeads: 0, logs: 3, newPendingTransactions: 0 });
  });

  it('unsubscribe and dropSink remove subscriptions; the follower stops with the last one', async () => {
    const chain = new Chain(3);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const net = networkOf(chain);
    const a = sink('a');
    const b = sink('b');
    const idA = await hub.subscribe(net, a, ['newHeads']);
    await hub.subscribe(net, b, ['newHeads']);
    await hub.subscribe(net, b, ['logs', {}]);
    expect(hub.unsubscribe(b, idA)).to.equal(false);
    expect(hub.unsubscribe(a, idA)).to.equal(true);
    expect(hub.unsubscribe(a, idA)).to.equal(false);
    chain.mine([ADDR_A]);
    await until(() => b.frames.length === 2);
    expect(a.frames).to.have.length(0);
    hub.dropSink(b);
    expect(hub.counts()).to.deep.equal({ newHeads: 0, logs: 0, newPendingTransactions: 0 });
    await sleep(20);
    const calls = chain.calls.length;
    chain.mine();
    await sleep(40);
    expect(chain.calls.length).to.equal(calls);
    expect(b.frames).to.have.length(2);
  });

  it('refuses bad params with -32602, newPendingTransactions without any wsEndpoint, and more than maxPerConnection', async () => {
    const chain = new Chain(1);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 2 });
    const net = networkOf(chain);
    const s = sink();
    const code = async (params: unknown) => {
      try {
        await hub.subscribe(net, s, params);
      } catch (e) {
        expect(e).to.be.instanceOf(SvcError);
        return (e as SvcError).code;
      }
      return 0;
    };
    expect(await code(['bogus'])).to.equal(-32602);
    expect(await code('newHeads')).to.equal(-32602);
    expect(await code([])).to.equal(-32602);
    expect(await code(['logs', { address: '0x1234' }])).to.equal(-32602);
    expect(await code(['logs', { address: Array.from({ length: 101 }, (_, i) => `0x${i.toString(16).padStart(40, '0')}`) }])).to.equal(-32602);
    expect(await code(['logs', { topics: [null, null, null, null, TOPIC_X] }])).to.equal(-32602);
    expect(await code(['logs', { topics: [Array.from({ length: 101 }, () => TOPIC_Y)] }])).to.equal(-32602);
    expect(await code(['logs', { topics: ['0xzz'] }])).to.equal(-32602);
    expect(await code(['logs', 'x'])).to.equal(-32602);
    expect(await code(['newPendingTransactions'])).to.equal(-32601);
    expect(hub.counts()).to.deep.equal({ newHeads: 0, logs: 0, newPendingTransactions: 0 });
    expect(await code(['newHeads'])).to.equal(0);
    expect(await code(['logs', { address: ADDR_A, topics: [null, [TOPIC_X, TOPIC_Y]] }])).to.equal(0);
    expect(await code(['newHeads'])).to.equal(-32005);
  });

  it('a failing pipeline (every call throws for a while) loses nothing: the next good poll resumes from the last emitted block', async () => {
    const chain = new Chain(3);
    hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
    const net = networkOf(chain);
    const heads = sink('h');
    const logs = sink('l');
    await hub.subscribe(net, heads, ['newHeads']);
    await hub.subscribe(net, logs, ['logs', { address: ADDR_A }]);
    chain.mine([ADDR_A]);
    await until(() => heads.frames.length === 1 && logs.frames.length === 1);
    chain.failures = 1_000_000;
    chain.mine([ADDR_A]);
    chain.mine([ADDR_A]);
    await sleep(30);
    expect(heads.frames).to.have.length(1);
    chain.failures = 0;
    chain.mine([ADDR_A]);
    await until(() => heads.frames.length === 4 && logs.frames.length === 4);
    // Now the getLogs of one block fails once: its head waits for its logs, nothing is repeated.
    for (let i = 0; i < 3; i++) chain.mine([ADDR_A]);
    chain.failLogs = 2;
    await until(() => heads.frames.length === 7 && logs.frames.length === 7);
    await sleep(30);
    expect(numbers(heads.frames)).to.deep.equal([4, 5, 6, 7, 8, 9, 10]);
    expect(logs.frames.map((f) => Number.parseInt(f.params.result.blockNumber, 16))).to.deep.equal([4, 5, 6, 7, 8, 9, 10]);
  });

  describe('upstream WebSocket feeds', () => {
    const servers: WebSocketServer[] = [];
    afterEach(() => {
      for (const s of servers.splice(0)) {
        for (const c of s.clients) c.terminate();
        s.close();
      }
    });

    /** A fake node's WebSocket: answers eth_subscribe with an id, records its sockets. */
    async function fakeNode(): Promise<{ url: string; server: WebSocketServer; subscribed: Array<{ ws: WebSocket; kind: string; id: string }> }> {
      const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
      servers.push(server);
      await new Promise((r) => server.once('listening', r));
      const subscribed: Array<{ ws: WebSocket; kind: string; id: string }> = [];
      server.on('connection', (ws) => {
        ws.on('message', (d) => {
          const m = JSON.parse(d.toString()) as { id: number; params: string[] };
          const id = `0x${(subscribed.length + 1).toString(16)}`;
          subscribed.push({ ws, kind: m.params[0] as string, id });
          ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: id }));
        });
      });
      return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`, server, subscribed };
    }
    const notify = (s: { ws: WebSocket; id: string }, result: unknown) =>
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: s.id, result } }));

    it('a newHeads notification from an upstream wakes the follower at once (the block is still read through the pipeline)', async () => {
      const node = await fakeNode();
      const chain = new Chain(3);
      hub = createSubscriptionHub(host, { pollIntervalMs: 60_000, maxPerConnection: 10 });
      const s = sink();
      await hub.subscribe(networkOf(chain, [node.url]), s, ['newHeads']);
      await until(() => node.subscribed.some((x) => x.kind === 'newHeads'));
      chain.mine();
      notify(node.subscribed[0] as never, { number: '0xdead', hash: '0xnot-trusted' });
      await until(() => s.frames.length === 1);
      expect(s.frames[0]?.params.result.hash).to.equal(chain.head.hash);
    });

    it('passes newPendingTransactions through from one upstream, one upstream subscription for all clients, and moves to the next upstream when it dies', async () => {
      const first = await fakeNode();
      const second = await fakeNode();
      const chain = new Chain(1);
      hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
      const net = networkOf(chain, [first.url, second.url]);
      const a = sink('a');
      const b = sink('b');
      const idA = await hub.subscribe(net, a, ['newPendingTransactions']);
      await hub.subscribe(net, b, ['newPendingTransactions']);
      await until(() => first.subscribed.length === 1);
      await sleep(20);
      expect(first.subscribed).to.have.length(1);
      expect(second.subscribed).to.have.length(0);
      const tx1 = `0x${'c'.repeat(64)}`;
      notify(first.subscribed[0] as never, tx1);
      await until(() => a.frames.length === 1 && b.frames.length === 1);
      expect(a.texts[0]).to.equal(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${idA}","result":"${tx1}"}}`);
      (first.subscribed[0] as { ws: WebSocket }).ws.terminate();
      await until(() => second.subscribed.length === 1, 3000);
      const tx2 = `0x${'d'.repeat(64)}`;
      notify(second.subscribed[0] as never, tx2);
      await until(() => a.frames.length === 2);
      expect(a.frames[1]?.params.result).to.equal(tx2);
      expect(hub.counts().newPendingTransactions).to.equal(2);
      hub.dropSink(a);
      hub.dropSink(b);
      await until(() => second.server.clients.size === 0);
    });

    it('an upstream that leaves its network (config reload) stops feeding at once: the feed moves to the next upstream', async () => {
      const first = await fakeNode();
      const second = await fakeNode();
      const chain = new Chain(1);
      hub = createSubscriptionHub(host, { pollIntervalMs: 5, maxPerConnection: 10 });
      const net = networkOf(chain, [first.url, second.url]);
      const a = sink('a');
      await hub.subscribe(net, a, ['newPendingTransactions']);
      await until(() => first.subscribed.length === 1);
      // u0 is removed from the network, then reported as gone.
      const gone = net.upstreams.shift() as Upstream;
      hub.upstreamLeft(gone);
      await until(() => first.server.clients.size === 0 && second.subscribed.length === 1, 3000);
      notify(second.subscribed[0] as never, `0x${'e'.repeat(64)}`);
      await until(() => a.frames.length === 1);
      // Another project's upstream of the same id changes nothing.
      hub.upstreamLeft({ id: 'u1', projectId: 'other' } as unknown as Upstream);
      await sleep(50);
      expect(second.server.clients.size).to.equal(1);
      hub.dropSink(a);
    });
  });
});
