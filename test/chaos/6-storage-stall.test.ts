/**
 * Hostile class 6: storage that stalls (docs/caching.md: a tier that stalls; docs/fault-tolerance.md
 * "Storage that stalls": store deadlines and breakers). Redis (a cache tier, the rate-limit store, the API keys and SIWE
 * nonces of `gated`) and PostgreSQL (a cache tier) are stopped with SIGSTOP under load: sockets
 * stay up and nothing answers, the worst case for a client library. An attacker who can slow a
 * shared store (or just a bad day) must not stall calls that need no storage: cache misses
 * answered by the nodes, memory-tier hits and calls with a cached API key keep their latency;
 * checks that do need the store fail closed and fast; after SIGCONT every tier is used again.
 */
import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { expect } from 'chai';
import { GATED, MAIN, TIERS } from './config.ts';
import { hex, useDeployment, waitFor, type SvcResponse } from './harness.ts';
import { chaosClass, pick, scale } from './summary.ts';

/** Longer than any store deadline (lookups 500 ms, admin writes 2 s): a call this slow waited on a stalled store. */
const STUCK_MS = 3000;
const KEY = `k_chaos_${randomBytes(16).toString('hex')}`;
/** A finalized block: its answer is cached in every tier before the stall. */
const BLOCK = hex(34);

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length * q) - 1)] ?? 0;
const fmt = (xs: number[]) => `p50/p99/max ${[0.5, 0.99, 1].map((q) => quantile(xs, q).toFixed(1)).join('/')} ms`;

describe('chaos [6] storage stalls: calls that need no storage keep going', function () {
  this.timeout(pick(60_000, 180_000));
  const cls = chaosClass(6, 'storage stalls (SIGSTOP Redis and PostgreSQL)');
  const dep = useDeployment();

  /** A call and its latency; a call still unanswered after {@link STUCK_MS} fails the test at once. */
  const timed = async (f: () => Promise<SvcResponse>): Promise<{ r: SvcResponse; ms: number }> => {
    const t0 = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`a call was still unanswered after ${STUCK_MS} ms: it waited on a stalled store`)), STUCK_MS);
    });
    try {
      const r = await Promise.race([f(), stuck]);
      return { r, ms: performance.now() - t0 };
    } finally {
      clearTimeout(timer);
    }
  };
  const withKey = (key: string) => ({ authorization: `Bearer ${key}` });

  /**
   * Calls that need no storage, from 4 concurrent clients, until `calls` were made and at least
   * `minMs` passed: cache misses on `main` (a fresh address each, answered by a node), memory
   * hits on `main`, and misses on `gated` with the cached API key. Latencies in ms.
   */
  async function load(calls: number, minMs = 0): Promise<number[]> {
    const out: number[] = [];
    const until = performance.now() + minMs;
    let made = 0;
    const worker = async (w: number) => {
      while (made < calls || performance.now() < until) {
        const i = made++;
        const addr = `0x${randomBytes(20).toString('hex')}`;
        const kind = (i + w) % 3;
        const { r, ms } = await timed(() =>
          kind === 0
            ? dep().rpc('eth_getTransactionCount', [addr, BLOCK])
            : kind === 1
              ? dep().rpc('eth_getBlockByNumber', [BLOCK, false], { 'x-svc-skip-cache-read': 'redis-cache|pg-cache' })
              : dep().post(GATED, { jsonrpc: '2.0', id: i, method: 'eth_getTransactionCount', params: [addr, BLOCK] }, withKey(KEY)),
        );
        expect(r.status, r.text.slice(0, 200)).to.equal(200);
        expect(r.json.error, r.text.slice(0, 200)).to.equal(undefined);
        expect(r.json.result, r.text.slice(0, 200)).to.not.equal(undefined);
        if (kind === 1) expect(r.headers['x-svc-cache']).to.equal('HIT');
        out.push(ms);
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    cls.attack(out.length);
    return out;
  }

  after(() => {
    // Whatever failed, the stores answer again for the classes that follow.
    dep().signalStorage('SIGCONT');
  });

  it('under SIGSTOP of Redis and PostgreSQL, calls that need no storage keep their latency; store checks fail closed and fast; after SIGCONT every tier serves again', async () => {
    await dep().settled();
    expect((await dep().admin('svc_addApiKey', [{ projectId: 'gated', connectorId: 'keys', apiKey: KEY, userId: 'chaos' }])).json?.result?.success).to.equal(
      true,
    );
    // The block in every tier, the key in the replica's key cache.
    const blockCall = () => dep().rpc('eth_getBlockByNumber', [BLOCK, false]);
    expect((await blockCall()).json.result.number).to.equal(BLOCK);
    for (const tier of TIERS)
      await waitFor(async () => (await dep().rpc('eth_getBlockByNumber', [BLOCK, false], dep().onlyTier(tier))).headers['x-svc-cache'] === 'HIT', 5000);
    await load(100);
    // The loop this svc shares with its clients (one process): its delay in each window measures
    // what the machine took from both, whatever else runs on it.
    const loop = monitorEventLoopDelay({ resolution: 5 });
    loop.enable();
    const healthy = await load(scale(600));
    const healthyLoop99 = loop.percentile(99) / 1e6;
    loop.reset();

    dep().signalStorage('SIGSTOP');
    const stallMs = pick(0, 10_000);
    // Store checks during the stall: unknown keys, a new key, SIWE-free admin listing.
    const unknownKeys = async () => {
      const out: Array<{ r: SvcResponse; ms: number }> = [];
      for (let i = 0; i < scale(4); i++)
        out.push(
          await timed(() =>
            dep().post(GATED, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, withKey(`k_unknown_${randomBytes(8).toString('hex')}`)),
          ),
        );
      return out;
    };
    const [stalled, unknown, addKey] = await Promise.all([
      load(scale(1000), stallMs),
      unknownKeys(),
      timed(() =>
        dep().admin('svc_addApiKey', [{ projectId: 'gated', connectorId: 'keys', apiKey: `k_new_${randomBytes(8).toString('hex')}`, userId: 'chaos' }]),
      ),
    ]);
    cls.attack(unknown.length + 1);
    const stalledLoop99 = loop.percentile(99) / 1e6;
    loop.disable();

    // Calls that need no storage: the stall shows neither in their tail nor in their worst case.
    // A call crosses this loop at least twice (request in, answer out): the extra loop delay the
    // machine caused in the stalled window (not svc: a stalled store is waited on off the loop)
    // may show twice in a call's latency.
    const [h99, s99] = [quantile(healthy, 0.99), quantile(stalled, 0.99)];
    const contention = 2 * Math.max(0, stalledLoop99 - healthyLoop99);
    const loops = `loop delay p99 healthy ${healthyLoop99.toFixed(1)} ms, stalled ${stalledLoop99.toFixed(1)} ms`;
    cls.note(`healthy ${fmt(healthy)}, stalled ${fmt(stalled)} over ${stalled.length} calls; ${loops}`);
    expect(s99, `healthy ${fmt(healthy)}; stalled ${fmt(stalled)}; ${loops}`).to.be.at.most(2 * h99 + 5 + contention);
    expect(quantile(stalled, 1), `no call waited out more than one store deadline: ${fmt(stalled)}`).to.be.below(1500);
    // Checks that need the store: refused (fail closed) within one lookup deadline.
    for (const { r, ms } of unknown) {
      expect(r.status, r.text).to.equal(401);
      expect(ms, loops).to.be.below(600 + contention);
    }
    expect(addKey.ms, 'an admin write gives up within its 2 s deadline').to.be.below(2500);
    expect(addKey.r.json?.error, addKey.r.text).to.be.an('object');

    dep().signalStorage('SIGCONT');
    // Every breaker probes after its back-off and closes once a probe succeeds.
    const states = async () => {
      const text = (await fetch(dep().metricsUrl).then((r) => r.text())).split('\n').filter((l) => l.startsWith('svc_storage_breaker_state{'));
      return text;
    };
    await waitFor(async () => {
      await Promise.all([
        load(6),
        dep().post(GATED, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, withKey(`k_probe_${randomBytes(8).toString('hex')}`)),
      ]);
      const s = await states();
      return s.length >= 4 && s.every((l) => l.endsWith(' 0'));
    }, 10_000).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${(await states()).join('; ')}`);
    });
    // The tiers serve again: a fresh finalized answer is written to and read from each.
    const fresh = hex(35 + Math.floor(Math.random() * 10));
    await dep().rpc('eth_getBlockByNumber', [fresh, true]);
    for (const tier of TIERS) {
      await waitFor(async () => (await dep().rpc('eth_getBlockByNumber', [fresh, true], dep().onlyTier(tier))).headers['x-svc-cache'] === 'HIT', 5000).catch(
        (e: Error) => {
          throw new Error(`${tier} is not used again after SIGCONT: ${e.message}`);
        },
      );
    }
    const again = `k_after_${randomBytes(8).toString('hex')}`;
    expect((await dep().admin('svc_addApiKey', [{ projectId: 'gated', connectorId: 'keys', apiKey: again, userId: 'chaos' }])).json?.result?.success).to.equal(
      true,
    );
    expect((await dep().post(GATED, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, withKey(again))).status).to.equal(200);
  });
});
