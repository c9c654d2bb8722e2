/**
 * Hostile class 9 (lying upstream), across a fleet and over WebSocket: a head of 900,000,000
 * published raw on the shared-state channel, or a far-future head told by one upstream to one
 * replica only, never becomes any replica's head (nor a freshly started one's, through the
 * snapshot); one bogus far-future `latest` block never freezes `newHeads` for the subscribers.
 * The HTTP cases are in 9-lying-upstream.test.ts.
 */
import { expect } from 'chai';
import { createClient } from 'redis';
import WebSocket from 'ws';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startLyingProxy, type LyingProxy } from '../helpers/lying-proxy.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { NO_CACHE, httpRequest, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { LYING_PATH, hex, startLying } from './lying.ts';
import { chaosClass, pick } from './summary.ts';

/** A head no node of the test reaches: 2^31 - 1 (told by an upstream). */
const FAR = 0x7fffffff;
/** The head published raw on the channel. */
const PUBLISHED = 900_000_000;
/** Any answer at or above this is one of the lies. */
const BOGUS = 100_000_000;
/** Cluster key of the fleet's Redis entries. */
const CLUSTER = 'lying';

/** A gauge's value from a replica's /metrics (the first series), or undefined. */
async function gauge(svc: SvcHandle, name: string): Promise<number | undefined> {
  const text = (await httpRequest('GET', svc.metricsUrl!)).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** `replica 1: 300, replica 4: 90`: how many bogus answers each replica gave. */
function summary(bad: string[]): string {
  const per = new Map<string, number>();
  for (const b of bad) per.set(b.slice(0, b.indexOf(':')), (per.get(b.slice(0, b.indexOf(':'))) ?? 0) + 1);
  return [...per].map(([r, n]) => `${r}: ${n}`).join(', ');
}

describe('chaos [9] lying upstream: a fleet and its subscribers', function () {
  this.timeout(120_000);
  const cls = chaosClass(9, 'lying upstream');

  describe('three replicas sharing Redis', () => {
    let node: AnvilHandle;
    let redis: RedisHandle;
    let liar: LyingProxy;
    const replicas: SvcHandle[] = [];

    /** A replica: upstreams `a` (replica 1's through the liar) and `b`, polled every 100 ms. */
    const replica = (a: string) =>
      startSvc({
        logLevel: 'error',
        metrics: { enabled: true },
        ...NO_CACHE,
        sharedState: { redis: { uri: redis.url }, clusterKey: CLUSTER, snapshotInterval: '300ms' },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: [
              { id: 'a', endpoint: a, evm: { chainId: 31337, statePollerInterval: '100ms' } },
              { id: 'b', endpoint: node.url, evm: { chainId: 31337, statePollerInterval: '100ms' } },
            ],
          },
        ],
      });
    const connected = (r: SvcHandle) => waitFor(async () => (await gauge(r, 'svc_shared_state_connected')) === 1, 10_000);

    /**
     * eth_blockNumber answers of each replica over `ms` (several snapshot intervals), the ones
     * at or above {@link BOGUS} as `<replica>: <head>`.
     */
    async function bogusAnswers(rs: SvcHandle[], ms: number): Promise<string[]> {
      const bad: string[] = [];
      const until = Date.now() + ms;
      while (Date.now() < until) {
        for (const [i, r] of rs.entries()) {
          const got = await r.post(LYING_PATH, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
          cls.attack();
          const n = Number(got.json?.result);
          if (!(n < BOGUS)) bad.push(`replica ${replicas.indexOf(r) + 1 || i + 1}: ${got.text.slice(0, 80)}`);
        }
      }
      return bad;
    }

    beforeEach(async function () {
      this.timeout(60_000);
      [node, redis] = await Promise.all([startAnvil(), startRedis()]);
      await node.rpc('anvil_mine', ['0x5']);
      liar = await startLyingProxy(node.url);
      replicas.push(await replica(liar.url), ...(await Promise.all([replica(node.url), replica(node.url)])));
      await Promise.all(replicas.map(connected));
    });

    afterEach(async function () {
      this.timeout(30_000);
      await Promise.all(replicas.splice(0).map((r) => r.close().catch(() => undefined)));
      await liar?.close();
      await Promise.all([node?.stop(), redis?.stop()]);
    });

    it('a raw PUBLISH of a head of 900,000,000 makes no replica (nor one started later) answer it', async () => {
      const pub = createClient({ url: redis.url });
      await pub.connect();
      try {
        const msg = {
          replica: 'intruder',
          at: Date.now(),
          heads: ['a', 'b'].map((upstream) => ({ project: 'main', upstream, latest: PUBLISHED, finalized: PUBLISHED - 64 })),
        };
        await pub.publish(`${CLUSTER}:state`, JSON.stringify(msg));
        cls.attack();
      } finally {
        await pub.quit();
      }
      const bad = await bogusAnswers(replicas, pick(1500, 5000));
      replicas.push(await replica(node.url));
      await connected(replicas[3]!);
      bad.push(...(await bogusAnswers([replicas[3]!], pick(1000, 3000))));
      expect(bad.slice(0, 6), `${bad.length} answers at or above ${BOGUS} (${summary(bad)})`).to.deep.equal([]);
    });

    it('a far-future head told by one upstream to one replica only makes no replica (nor one started later) answer it', async () => {
      const real = (await node.rpc('eth_getBlockByNumber', ['latest', false])) as Record<string, unknown>;
      liar.lie('eth_getBlockByNumber', (c) => (c.params[0] === 'latest' ? { ...real, number: hex(FAR), hash: `0x${'88'.repeat(32)}` } : undefined), 3);
      // Replica 1's poller of `a` reads it every 100 ms; a fixed svc may stop asking the liar.
      await waitFor(() => liar.told() === 3, 5000).catch(() => undefined);
      expect(liar.told(), 'the lie was told').to.be.at.least(1);
      cls.attack(liar.told());
      const bad = await bogusAnswers(replicas, pick(1500, 5000));
      replicas.push(await replica(node.url));
      await connected(replicas[3]!);
      bad.push(...(await bogusAnswers([replicas[3]!], pick(1000, 3000))));
      expect(bad.slice(0, 6), `${bad.length} answers at or above ${BOGUS} (${summary(bad)})`).to.deep.equal([]);
    });
  });

  it('a newHeads subscriber keeps receiving the real heads after one bogus far-future latest block', async () => {
    // The liar is first in selection order and its own state poller idles (1 h), so the
    // follower's read of the latest block (every 100 ms) is the one it lies to.
    const d = await startLying({
      blocks: 5,
      config: { server: { websocket: { newHeadsPollInterval: '100ms' } } },
      upstream: (id, p) => ({ wsEndpoint: p.wsUrl, ...(id === 'a' ? { evm: { chainId: 31337, statePollerInterval: '1h' } } : {}) }),
    });
    const ws = new WebSocket(`${d.svc.url.replace(/^http/, 'ws')}${LYING_PATH}`);
    try {
      const heads: number[] = [];
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as { params?: { result?: { number?: string } } };
        if (m.params?.result?.number) heads.push(Number(m.params.result.number));
      });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }));
      // Subscribed once a mined block reaches it (a subscription sees blocks after it).
      await waitFor(async () => {
        if (heads.length > 0) return true;
        await d.node.rpc('anvil_mine', ['0x1']);
        return false;
      }, 10_000);

      const liar = d.proxies[0]!;
      const real = (await d.node.rpc('eth_getBlockByNumber', ['latest', false])) as Record<string, unknown>;
      const bogus = { ...real, number: hex(FAR), hash: `0x${'99'.repeat(32)}`, parentHash: `0x${'98'.repeat(32)}` };
      liar.lie('eth_getBlockByNumber', (c) => (c.params[0] === 'latest' ? bogus : undefined), 1);
      // Its WebSocket feed announces the block too, waking the follower at once.
      const pushed = liar.pushNewHead(bogus);
      await waitFor(() => liar.told() === 1, 5000);
      cls.attack(1 + pushed);

      const mined: number[] = [];
      for (let i = 0; i < pick(3, 10); i++) {
        await d.node.rpc('anvil_mine', ['0x1']);
        mined.push(Number(await d.node.rpc('eth_blockNumber')));
      }
      // The follower polls every 100 ms: 5 s is dozens of polls even on a busy machine.
      await waitFor(() => mined.every((n) => heads.includes(n)), 5000).catch(() => undefined);
      expect(
        { missed: mined.filter((n) => !heads.includes(n)), bogus: heads.filter((n) => n >= BOGUS) },
        `real heads mined ${mined.join(' ')}; heads received ${heads.join(' ')}`,
      ).to.deep.equal({ missed: [], bogus: [] });
    } finally {
      ws.terminate();
      await d.stop();
    }
  });
});
