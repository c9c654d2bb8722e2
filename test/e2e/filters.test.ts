/**
 * Filters that survive failover, with real clients over HTTP: svc in front of anvil nodes mined
 * in lockstep (test/helpers/lockstep-anvil.ts: the same chain, hash for hash) and a contract
 * logging `Tick(blockNumber)` in every block.
 *
 * 1. viem's `watchContractEvent` (eth_newFilter + eth_getFilterChanges), ethers' `provider.on(filter)`
 *    (its filter-id subscriber: the same two methods) and a raw block filter, while the upstream
 *    that served the filters' reads is SIGKILLed mid-stream and the other keeps mining: every Tick
 *    once and in order, every block hash once and in order, the survivor's hashes. viem's
 *    `watchBlocks` (over HTTP it polls the head rather than using a block filter) sees every block
 *    once too, with the survivor's hashes.
 * 2. `anvil_reorg` of depth 2: a raw log filter gets the abandoned logs again with `removed: true`
 *    (newest first), then the replacement blocks' logs; a block filter gets the new hashes.
 * 3. A pending-transaction filter sticks to the upstream that made it; once that upstream dies the
 *    id is "filter not found". The per-client bound refuses one filter too many; in a batch a bad
 *    filter call fails alone.
 * 4. A fleet: two svc replicas with one Redis (`sharedState`): a filter made on one is polled on
 *    either, each Tick delivered once, also when both replicas are polled at once.
 */
import { expect } from 'chai';
import { JsonRpcProvider, type Log as EthersLog } from 'ethers';
import { createPublicClient, http, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startLockstepAnvil, TICK_ABI, TICK_INIT_CODE, TICK_TOPIC, type LockstepAnvil } from '../helpers/lockstep-anvil.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** A log as a client saw it. */
interface SeenLog {
  blockNumber: number;
  blockHash: string;
  removed: boolean;
  /** The Tick event's argument (the block number it was emitted in). */
  tick: number;
}

const seenOf = (l: { blockNumber: string; blockHash: string; removed?: boolean; data: string }): SeenLog => ({
  blockNumber: Number(l.blockNumber),
  blockHash: l.blockHash,
  removed: l.removed === true,
  tick: Number(BigInt(l.data)),
});

/** One JSON-RPC call to svc; the whole answer. */
async function rpc(url: string, method: string, params: unknown[] = []): Promise<{ result?: any; error?: { code: number; message: string } }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as { result?: any; error?: { code: number; message: string } };
}

/** A metric's samples summed by one label, for samples whose labels include `match`. */
async function metricBy(svc: SvcHandle, name: string, match: string, by: string): Promise<Record<string, number>> {
  const text = await (await fetch(svc.metricsUrl as string)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (!m || !m[1]?.includes(match)) continue;
    const key = new RegExp(`${by}="([^"]*)"`).exec(m[1])?.[1] ?? '';
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

/** A raw poller of one filter id: every result kept in order, polled every `ms`. */
function poller(url: string, id: string, ms: number, out: unknown[], errors: unknown[]): () => void {
  let stop = false;
  void (async () => {
    while (!stop) {
      const r = await rpc(url, 'eth_getFilterChanges', [id]).catch((e: unknown) => ({ error: e }));
      if ('result' in r && Array.isArray(r.result)) out.push(...(r.result as unknown[]));
      else errors.push(r.error);
      await new Promise((res) => setTimeout(res, ms));
    }
  })();
  return () => {
    stop = true;
  };
}

describe('e2e: filters over HTTP across an upstream SIGKILL and a reorg (real anvil nodes, viem, ethers)', function () {
  this.timeout(90_000);
  let chain: LockstepAnvil;
  let svc: SvcHandle;
  let tick: Address;
  let url: string;
  let viem: PublicClient;
  let ethers: JsonRpcProvider;
  const stops: Array<() => void> = [];
  const errors: unknown[] = [];
  const viemLogs: SeenLog[] = [];
  const ethersLogs: SeenLog[] = [];
  const rawBlocks: string[] = [];
  const viemBlocks: Array<{ number: number; hash: string }> = [];
  const rawLogs: unknown[] = [];
  let from = 0;

  before(async () => {
    chain = await startLockstepAnvil();
    tick = await chain.deploy(TICK_INIT_CODE);
    svc = await startSvc({
      metrics: { enabled: true, port: 0 },
      projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: chain.chainId } }], upstreams: chain.upstreams() }],
    });
    url = `${svc.url}/main/evm/${chain.chainId}`;
    viem = createPublicClient({ transport: http(url, { retryCount: 0 }), pollingInterval: 200 });
    stops.push(
      viem.watchContractEvent({
        address: tick,
        abi: TICK_ABI,
        eventName: 'Tick',
        poll: true,
        onLogs: (logs) => {
          for (const l of logs)
            viemLogs.push({ blockNumber: Number(l.blockNumber), blockHash: l.blockHash as Hex, removed: l.removed, tick: Number(l.args.blockNumber) });
        },
        onError: (e) => errors.push(e),
      }),
    );
    stops.push(
      viem.watchBlocks({
        poll: true,
        emitMissed: true,
        onBlock: (b) => viemBlocks.push({ number: Number(b.number), hash: b.hash as string }),
        onError: (e) => errors.push(e),
      }),
    );
    ethers = new JsonRpcProvider(url, chain.chainId, { staticNetwork: true, pollingInterval: 200 });
    await ethers.on({ address: tick, topics: [TICK_TOPIC] }, (l: EthersLog) =>
      ethersLogs.push({ blockNumber: l.blockNumber, blockHash: l.blockHash, removed: l.removed, tick: Number(BigInt(l.data)) }),
    );
    const blockFilter = (await rpc(url, 'eth_newBlockFilter')).result as string;
    const logFilter = (await rpc(url, 'eth_newFilter', [{ address: tick, topics: [TICK_TOPIC] }])).result as string;
    stops.push(poller(url, blockFilter, 200, rawBlocks, errors), poller(url, logFilter, 200, rawLogs, errors));

    // Every client is live once it has seen a Tick; the checked range starts after that.
    chain.startMining(300, { txsFor: async () => [await chain.signCall(tick)] });
    await waitFor(() => viemLogs.length > 0 && ethersLogs.length > 0 && rawBlocks.length > 0 && rawLogs.length > 0 && viemBlocks.length > 0, 20_000);
    from = (await chain.head()) + 1;
  });

  after(async () => {
    for (const s of stops) s();
    ethers?.destroy();
    await chain?.stopMining().catch(() => undefined);
    await svc?.close();
    await chain?.stop();
  });

  it('viem and ethers really use filters: svc served their eth_newFilter and eth_getFilterChanges, and no eth_getLogs fallback', async () => {
    const received = await metricBy(svc, 'svc_network_request_received_total', 'project="main"', 'category');
    // viem's, ethers' and the raw log filter.
    expect(received.eth_newFilter).to.be.at.least(3);
    expect(received.eth_getFilterChanges).to.be.greaterThan(3);
    expect(received.eth_getLogs ?? 0).to.equal(0);
  });

  it('kills the upstream serving the filters’ reads mid-stream: every Tick once and in order for viem and ethers, every block hash once with the survivor’s hashes', async () => {
    // Bounded waits: a mining loop that failed (its error comes out of stopMining) fails the test instead of hanging it.
    const reach = async (n: number) => {
      try {
        await waitFor(async () => (await chain.head()) >= n, 30_000);
      } catch (e) {
        await chain.stopMining();
        throw e;
      }
    };
    await reach(from + 2);
    // The upstream the filters read from: the one whose eth_getLogs count grows faster (only
    // filter polls read logs by block hash; the clients themselves send no eth_getLogs).
    const r0 = await metricBy(svc, 'svc_upstream_request_total', 'category="eth_getLogs"', 'upstream');
    const [a, b] = chain.ids as [string, string];
    let r1 = r0;
    const grown = (u: string) => (r1[u] ?? 0) - (r0[u] ?? 0);
    await waitFor(async () => {
      r1 = await metricBy(svc, 'svc_upstream_request_total', 'category="eth_getLogs"', 'upstream');
      return grown(a) + grown(b) >= 4;
    }, 10_000);
    const victim = (r1[a] ?? 0) - (r0[a] ?? 0) >= (r1[b] ?? 0) - (r0[b] ?? 0) ? a : b;
    expect((r1[victim] ?? 0) - (r0[victim] ?? 0)).to.be.greaterThan(0);
    await chain.kill(victim);
    const killedAt = await chain.head();
    await reach(killedAt + 6);
    await chain.stopMining();
    const to = await chain.head();
    const hashes = await Promise.all(range(from, to).map(async (n) => (await chain.block(n)).hash));
    await waitFor(
      () =>
        [viemLogs, ethersLogs].every((s) => s.some((l) => l.blockNumber === to)) &&
        rawBlocks.includes(hashes.at(-1) as string) &&
        viemBlocks.some((b) => b.number === to) &&
        rawLogs.some((l) => Number((l as { blockNumber: string }).blockNumber) === to),
      20_000,
    );
    for (const [name, logs] of [
      ['viem', viemLogs],
      ['ethers', ethersLogs],
      ['raw', rawLogs.map((l) => seenOf(l as never))],
    ] as const) {
      const live = logs.filter((l) => l.blockNumber >= from && l.blockNumber <= to);
      expect(
        live.map((l) => l.tick),
        name,
      ).to.deep.equal(range(from, to));
      expect(
        live.every((l) => !l.removed && l.blockHash === hashes[l.blockNumber - from]),
        name,
      ).to.equal(true);
    }
    const viemLive = viemBlocks.filter((b) => b.number >= from && b.number <= to);
    expect(
      viemLive.map((b) => b.number),
      'viem watchBlocks',
    ).to.deep.equal(range(from, to));
    expect(
      viemLive.map((b) => b.hash),
      'viem watchBlocks',
    ).to.deep.equal(hashes);
    const fromAt = rawBlocks.indexOf(hashes[0] as string);
    expect(fromAt).to.be.greaterThan(-1);
    expect(rawBlocks.slice(fromAt, fromAt + hashes.length)).to.deep.equal(hashes);
    expect(new Set(rawBlocks).size).to.equal(rawBlocks.length);
    // No filter was lost when its upstream died: no poll, viem's or raw, got "filter not found".
    const text = (e: unknown) => (e instanceof Error ? e.message : JSON.stringify(e));
    expect(errors.map(text).filter((e) => /filter not found/i.test(e))).to.deep.equal([]);
  });

  it('anvil_reorg of depth 2: the abandoned Ticks again with removed: true (newest first), then the replacement blocks’ Ticks and hashes', async () => {
    const head = await chain.head();
    const abandoned = await Promise.all([head - 1, head].map(async (n) => (await chain.block(n)).hash));
    const logsBefore = rawLogs.length;
    const blocksBefore = rawBlocks.length;
    const replaced = await chain.reorg(2, [
      { to: tick, blockOffset: 0 },
      { to: tick, blockOffset: 1 },
    ]);
    await waitFor(() => rawLogs.length >= logsBefore + 4 && rawBlocks.length >= blocksBefore + 2, 20_000);
    const after = rawLogs.slice(logsBefore).map((l) => seenOf(l as never));
    expect(after.map((l) => [l.blockHash, l.removed])).to.deep.equal([
      [abandoned[1], true],
      [abandoned[0], true],
      [replaced[0]?.hash, false],
      [replaced[1]?.hash, false],
    ]);
    expect(after.map((l) => l.tick)).to.deep.equal([head, head - 1, head - 1, head]);
    expect(rawBlocks.slice(blocksBefore)).to.deep.equal(replaced.map((b) => b.hash));
  });
});

describe('e2e: pending-transaction filters, bounds and batches (real anvil nodes)', function () {
  this.timeout(60_000);
  let chain: LockstepAnvil;
  let svc: SvcHandle;
  let url: string;

  before(async () => {
    chain = await startLockstepAnvil();
    svc = await startSvc({
      metrics: { enabled: true, port: 0 },
      projects: [
        { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: chain.chainId } }], upstreams: chain.upstreams() },
        { id: 'bounded', networks: [{ architecture: 'evm', evm: { chainId: chain.chainId }, filters: { maxPerClient: 2 } }], upstreams: chain.upstreams() },
      ],
    });
    url = `${svc.url}/main/evm/${chain.chainId}`;
  });

  after(async () => {
    await svc?.close();
    await chain?.stop();
  });

  it('the per-client bound refuses one filter too many (-32005) until one is uninstalled', async () => {
    const bounded = `${svc.url}/bounded/evm/${chain.chainId}`;
    const first = (await rpc(bounded, 'eth_newBlockFilter')).result as string;
    expect((await rpc(bounded, 'eth_newFilter', [{}])).result).to.match(/^0x[0-9a-f]{32}$/);
    const over = await rpc(bounded, 'eth_newBlockFilter');
    expect(over.error?.code).to.equal(-32005);
    expect(over.error?.message).to.contain('maxPerClient');
    expect((await rpc(bounded, 'eth_uninstallFilter', [first])).result).to.equal(true);
    expect((await rpc(bounded, 'eth_newBlockFilter')).result).to.match(/^0x[0-9a-f]{32}$/);
  });

  it('in a batch a malformed filter call gets -32602 and the others are answered', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_newFilter', params: [{ address: 'not an address' }] },
        { jsonrpc: '2.0', id: 2, method: 'eth_newBlockFilter', params: [] },
        { jsonrpc: '2.0', id: 3, method: 'eth_getFilterChanges', params: ['0x' + '0'.repeat(32)] },
      ]),
    });
    const answers = (await res.json()) as Array<{ id: number; result?: unknown; error?: { code: number; message: string } }>;
    expect(res.status).to.equal(200);
    expect(answers.find((a) => a.id === 1)?.error?.code).to.equal(-32602);
    expect(answers.find((a) => a.id === 2)?.result).to.match(/^0x[0-9a-f]{32}$/);
    expect(answers.find((a) => a.id === 3)?.error).to.deep.include({ code: -32000, message: 'filter not found' });
  });

  it('a pending-transaction filter sticks to the upstream that made it; once that upstream is killed its id is "filter not found"', async () => {
    const id = (await rpc(url, 'eth_newPendingTransactionFilter')).result as string;
    expect(id).to.match(/^0x[0-9a-f]{32}$/);
    // A transfer from dev account #1 into both pools (never mined here).
    const raw = await privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d').signTransaction({
      chainId: chain.chainId,
      type: 'eip1559',
      to: chain.from,
      value: 1n,
      nonce: 0,
      gas: 21_000n,
      maxFeePerGas: 100_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
    const hashes = await Promise.all(chain.alive().map((n) => n.rpc('eth_sendRawTransaction', [raw])));
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) seen.push(...(((await rpc(url, 'eth_getFilterChanges', [id])).result as string[]) ?? []));
    expect(seen).to.deep.equal([hashes[0]]);
    const polled = await metricBy(svc, 'svc_upstream_request_total', 'category="eth_getFilterChanges"', 'upstream');
    const used = Object.keys(polled).filter((u) => (polled[u] ?? 0) > 0);
    expect(used).to.have.length(1);
    await chain.kill(used[0] as string);
    expect((await rpc(url, 'eth_getFilterChanges', [id])).error).to.deep.include({ code: -32000, message: 'filter not found' });
    // A new one lands on the survivor.
    const again = (await rpc(url, 'eth_newPendingTransactionFilter')).result as string;
    expect((await rpc(url, 'eth_getFilterChanges', [again])).result).to.deep.equal([]);
  });
});

describe('e2e: a fleet of two replicas sharing filters through Redis (sharedState)', function () {
  this.timeout(60_000);
  let chain: LockstepAnvil;
  let redis: RedisHandle;
  const replicas: SvcHandle[] = [];
  let tick: Address;
  const urls: string[] = [];

  before(async () => {
    redis = await startRedis();
    chain = await startLockstepAnvil({ ids: ['solo'] });
    tick = await chain.deploy(TICK_INIT_CODE);
    for (let i = 0; i < 2; i++) {
      const svc = await startSvc({
        metrics: { enabled: true, port: 0 },
        sharedState: { redis: { uri: redis.url }, clusterKey: 'filters-e2e' },
        projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: chain.chainId } }], upstreams: chain.upstreams() }],
      });
      replicas.push(svc);
      urls.push(`${svc.url}/main/evm/${chain.chainId}`);
      // Filters live in Redis: each replica is connected before the first filter call.
      await waitFor(async () => (await fetch(svc.metricsUrl as string).then((r) => r.text())).includes('svc_shared_state_connected 1'), 10_000);
    }
  });

  after(async () => {
    for (const r of replicas) await r.close();
    await chain?.stop();
    await redis?.stop();
  });

  it('a log filter made on one replica is polled on either: every Tick once and in order, also when both are polled at once', async () => {
    const [one, two] = urls as [string, string];
    const made = await rpc(one, 'eth_newFilter', [{ address: tick, topics: [TICK_TOPIC] }]);
    const id = made.result as string;
    expect(id).to.match(/^0x[0-9a-f]{32}$/);
    const start = (await chain.head()) + 1;
    const got: SeenLog[] = [];
    const poll = async (url: string) => got.push(...((await rpc(url, 'eth_getFilterChanges', [id])).result as never[]).map(seenOf));
    for (let i = 0; i < 6; i++) {
      await chain.mine([await chain.signCall(tick)]);
      await poll(i % 2 === 0 ? two : one);
    }
    // Three blocks, then both replicas at once: between them each Tick once.
    for (let i = 0; i < 3; i++) await chain.mine([await chain.signCall(tick)]);
    const both = await Promise.all([rpc(one, 'eth_getFilterChanges', [id]), rpc(two, 'eth_getFilterChanges', [id])]);
    for (const r of both) got.push(...(r.result as never[]).map(seenOf));
    const last = await chain.head();
    // Whatever a concurrent poll left (it answered [] while the other held the filter), or a poll
    // made before the state poller saw the newest block, comes with the next polls.
    let polls = 0;
    await waitFor(async () => {
      await poll(polls++ % 2 === 0 ? two : one);
      return got.length >= last - start + 1;
    }, 10_000);
    expect(got.map((l) => l.tick).sort((x, y) => x - y)).to.deep.equal(range(start, last));
    expect((await rpc(two, 'eth_uninstallFilter', [id])).result).to.equal(true);
    expect((await rpc(one, 'eth_getFilterChanges', [id])).error).to.deep.include({ code: -32000, message: 'filter not found' });
  });
});
