/**
 * The response cache end to end: svc's default preset with the
 * zero-config memory cache in front of a real anvil node. Counters come from the response
 * headers (spec §4.5): a hit has no upstream attempt and one cache attempt.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import { CACHE_SERVICE, type MemoryConnector } from '../../plugins/cache/index.ts';
import type { NetworkChainState } from '../../plugins/evm-state/chain.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const DEV0 = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const DEV1 = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
const hex = (n: number) => `0x${n.toString(16)}`;

describe('e2e: response cache, zero config, against anvil', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let st: NetworkChainState;
  let id = 0;

  const call = (method: string, params: unknown[], headers: Record<string, string> = {}, query = ''): Promise<SvcResponse> =>
    svc.post(`${PATH}${query}`, { jsonrpc: '2.0', id: ++id, method, params }, headers);
  const expectHit = (r: SvcResponse, what: string) => {
    expect(r.headers['x-svc-cache'], `${what}: X-SVC-Cache`).to.equal('HIT');
    expect(r.headers['x-svc-upstream-attempts'], `${what}: no upstream attempt`).to.equal('0');
    expect(r.headers['x-svc-upstream'], `${what}: no winning upstream`).to.equal(undefined);
  };
  const expectMiss = (r: SvcResponse, what: string) => {
    expect(r.headers['x-svc-cache'], `${what}: X-SVC-Cache`).to.equal('MISS');
    expect(Number(r.headers['x-svc-upstream-attempts']), `${what}: went upstream`).to.be.at.least(1);
  };
  /** Waits for the write that follows an answer (it never delays the answer). */
  const settle = () => new Promise((r) => setTimeout(r, 20));

  before(async () => {
    anvil = await startAnvil();
    // anvil's finalized block trails latest by 64: with 120 blocks, 0..56 are finalized.
    await anvil.rpc('anvil_mine', [hex(120)]);
    svc = await startSvc({
      logLevel: 'error',
      server: { includeErrorDetails: true },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN, statePollerInterval: '100ms' } }],
        },
      ],
    });
    st = chainStateOf(svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!);
    await waitFor(() => st.highestFinalized > 0 && st.highestLatest >= 120, 10_000);
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('a finalized block: MISS, then HIT with the same bytes under the caller own id; X-SVC-Attempts counts the cache read', async () => {
    const params = [hex(10), false];
    const first = await call('eth_getBlockByNumber', params);
    expectMiss(first, 'first');
    expect(first.headers['x-svc-attempts']).to.equal('2');
    await settle();
    const second = await call('eth_getBlockByNumber', params);
    expectHit(second, 'second');
    expect(second.headers['x-svc-attempts'], 'one cache operation').to.equal('1');
    expect(second.headers['x-svc-cache-attempts']).to.equal('1');
    expect(second.json.id).to.equal(id);
    expect(second.json.result).to.deep.equal(first.json.result);
    expect(second.text).to.equal(first.text.replace(`"id":${id - 1}`, `"id":${id}`));
  });

  it('a batch of hits and a miss: X-SVC-Cache PARTIAL:<hits>; all hits: HIT', async () => {
    const body = (n: number[]) => n.map((b) => ({ jsonrpc: '2.0', id: ++id, method: 'eth_getBlockByNumber', params: [hex(b), false] }));
    await svc.post(PATH, body([11, 12]));
    await settle();
    const mixed = await svc.post(PATH, body([11, 12, 13]));
    expect(mixed.headers['x-svc-cache']).to.equal('PARTIAL:2');
    await settle();
    const all = await svc.post(PATH, body([11, 12, 13]));
    expect(all.headers['x-svc-cache']).to.equal('HIT');
    expect(all.headers['x-svc-upstream-attempts']).to.equal('0');
  });

  it('a leader cache hit is delivered to its multiplexing followers (spec §4.6 #5)', async () => {
    const params = [hex(14), false];
    await call('eth_getBlockByNumber', params);
    await settle();
    const metric = async () =>
      Number(
        /svc_network_multiplexed_request_total\{[^}]*category="eth_getBlockByNumber"[^}]*\} (\d+)/.exec(await (await fetch(svc.metricsUrl!)).text())?.[1] ?? 0,
      );
    const before = await metric();
    const batch = [1, 2, 3].map((i) => ({ jsonrpc: '2.0', id: `m${i}`, method: 'eth_getBlockByNumber', params }));
    const r = await svc.post(PATH, batch);
    expect(r.headers['x-svc-cache']).to.equal('HIT');
    expect(r.headers['x-svc-upstream-attempts']).to.equal('0');
    expect((r.json as Array<{ id: string }>).map((a) => a.id)).to.deep.equal(['m1', 'm2', 'm3']);
    expect(await metric()).to.equal(before + 2);
  });

  describe('skip-cache-read (spec §2.8 #3)', () => {
    const params = [hex(20), false];
    before(async () => {
      await call('eth_getBlockByNumber', params);
      await settle();
    });

    it('§2.8 #3 — true skips every read, from the header or the query (whose value is trimmed)', async () => {
      expectMiss(await call('eth_getBlockByNumber', params, { 'x-svc-skip-cache-read': 'true' }), 'header true');
      expectMiss(await call('eth_getBlockByNumber', params, {}, '?skip-cache-read=%20true%20'), 'query " true "');
      // The header is not trimmed by svc (HTTP itself strips the value's outer whitespace, so only
      // the directive parser's own unit test can show it); "tr ue" is a glob matching no connector.
      expectHit(await call('eth_getBlockByNumber', params, { 'x-svc-skip-cache-read': 'tr ue' }), 'header "tr ue"');
    });

    it('§2.8 #3 — false or empty uses the cache; any other value is a glob on connector ids not to read', async () => {
      expectHit(await call('eth_getBlockByNumber', params, { 'x-svc-skip-cache-read': 'false' }), 'false');
      expectHit(await call('eth_getBlockByNumber', params, {}, '?skip-cache-read='), 'empty');
      expectMiss(await call('eth_getBlockByNumber', params, { 'x-svc-skip-cache-read': 'memory-*' }), 'memory-*');
      expectMiss(await call('eth_getBlockByNumber', params, { 'x-svc-skip-cache-read': 'redis-*|memory-cache' }), 'alternation');
      expectHit(await call('eth_getBlockByNumber', params, { 'x-svc-skip-cache-read': 'redis-*' }), 'redis-*');
    });

    it('§2.8 #3 — write-back still happens when reads are skipped', async () => {
      const fresh = [hex(21), false];
      expectMiss(await call('eth_getBlockByNumber', fresh, { 'x-svc-skip-cache-read': 'true' }), 'skipped');
      await settle();
      expectHit(await call('eth_getBlockByNumber', fresh), 'next call');
    });
  });

  it('realtime: eth_blockNumber is cached until the poller sees a newer head, never going backwards', async () => {
    const a = await call('eth_blockNumber', []);
    await settle();
    const b = await call('eth_blockNumber', []);
    expectHit(b, 'same head');
    expect(b.json.result).to.equal(a.json.result);
    const before = st.highestLatest;
    await anvil.rpc('anvil_mine', ['0x1']);
    await waitFor(() => st.highestLatest > before, 5000);
    const c = await call('eth_blockNumber', []);
    expectMiss(c, 'after a new head');
    expect(Number.parseInt(c.json.result as string, 16)).to.be.above(Number.parseInt(a.json.result as string, 16));
  });

  it('an empty answer (a fresh account balance "0x0") is not cached by the default policies', async () => {
    const params = ['0x000000000000000000000000000000000000dEaD', hex(15)];
    const a = await call('eth_getBalance', params);
    expect(a.json.result).to.equal('0x0');
    await settle();
    expectMiss(await call('eth_getBalance', params), 'empty');
  });

  it('a JSON-RPC error is never cached; eth_sendRawTransaction is never cached', async () => {
    const a = await call('eth_getBlockByNumber', [{ not: 'a block' }, false]);
    expect(a.json.error).to.not.equal(undefined);
    await settle();
    const b = await call('eth_getBlockByNumber', [{ not: 'a block' }, false]);
    expect(Number(b.headers['x-svc-upstream-attempts'])).to.be.at.least(1);
    const raw = await call('eth_sendRawTransaction', ['0x00']);
    expect(raw.json.error).to.not.equal(undefined);
    const raw2 = await call('eth_sendRawTransaction', ['0x00']);
    expect(raw2.headers['x-svc-cache']).to.equal(undefined);
    expect(Number(raw2.headers['x-svc-upstream-attempts'])).to.be.at.least(1);
  });

  it('a receipt looked up by hash: re-classified from its block, served through the reverse index', async () => {
    const hash = (await anvil.rpc('eth_sendTransaction', [{ from: DEV0, to: DEV1, value: '0x1' }])) as string;
    // Finalized once 64 blocks sit on top of it and the poller has seen that.
    // The receipt exists once anvil mined the transaction (not always by the time it answers the send).
    let receipt: { blockNumber: string } | null = null;
    await waitFor(async () => (receipt = (await anvil.rpc('eth_getTransactionReceipt', [hash])) as { blockNumber: string } | null) !== null, 5000);
    const mined = Number.parseInt((receipt as unknown as { blockNumber: string }).blockNumber, 16);
    await anvil.rpc('anvil_mine', [hex(70)]);
    await waitFor(() => st.highestFinalized >= mined, 5000);
    const a = await call('eth_getTransactionReceipt', [hash]);
    expectMiss(a, 'first');
    await settle();
    const b = await call('eth_getTransactionReceipt', [hash]);
    expectHit(b, 'second');
    expect(b.json.result).to.deep.equal(a.json.result);
    const metrics = await (await fetch(svc.metricsUrl!)).text();
    expect(metrics).to.match(
      /svc_cache_set_success_total\{project="main",network="evm:31337",category="eth_getTransactionReceipt",connector="memory-cache",policy="finalized"\} 1/,
    );
    expect(metrics).to.match(
      /svc_cache_get_hit_total\{project="main",network="evm:31337",category="eth_getTransactionReceipt",connector="memory-cache",policy="finalized"\} 1/,
    );
    // The memory tier's own accounting, as scraped: what it charges against maxTotalSize and holds.
    const tier = svc.proxy.services.require(CACHE_SERVICE).connector('memory-cache') as MemoryConnector;
    expect(tier.size, 'the entry and its reverse-index pointer at least').to.be.at.least(2);
    expect(metrics).to.include(`svc_cache_memory_bytes{connector="memory-cache"} ${tier.totalSize}\n`);
    expect(metrics).to.include(`svc_cache_memory_entries{connector="memory-cache"} ${tier.size}\n`);
  });

  it('a reorg under a cached unfinalized block: the next read is a miss and returns the new block', async () => {
    // anvil's own head (svc's view may lag a poll behind it), once svc has seen it: the block read
    // below must sit inside the 5 blocks the reorg replaces.
    const head = Number.parseInt((await anvil.rpc('eth_blockNumber', [])) as string, 16);
    await waitFor(() => st.highestLatest >= head, 5000);
    const n = head - 2;
    const params = [hex(n), false];
    const a = await call('eth_getBlockByNumber', params);
    expectMiss(a, 'first');
    await settle();
    expectHit(await call('eth_getBlockByNumber', params), 'before the reorg');
    // Re-mine the top 5 blocks with a transaction in the first, so every replaced block differs.
    await anvil.rpc('anvil_reorg', [5, [[{ from: DEV0, to: DEV1, value: '0x1' }, 0]]]);
    const replaced = ((await anvil.rpc('eth_getBlockByNumber', [hex(n), false])) as { hash: string }).hash;
    expect(replaced).to.not.equal((a.json.result as { hash: string }).hash);
    await waitFor(() => st.lastReorg !== undefined, 5000);
    const c = await call('eth_getBlockByNumber', params);
    expectMiss(c, 'after the reorg');
    expect((c.json.result as { hash: string }).hash).to.equal(replaced);
  });
});

describe('e2e: cache policies with params matchers, behind interpolation', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  before(async () => {
    anvil = await startAnvil();
    await anvil.rpc('anvil_mine', [hex(80)]);
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN, statePollerInterval: '100ms' } }],
        },
      ],
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'mem', driver: 'memory' }],
          policies: [{ connector: 'mem', finality: 'realtime', method: 'eth_getBalance', params: ['*', 'latest'], ttl: '5s' }],
        },
      },
    });
    const st = chainStateOf(svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!);
    await waitFor(() => st.highestLatest >= 80 && st.isHeadFresh(), 10_000);
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('a write matches the params the client sent, not the interpolated ones: `latest` matched on read is matched on write', async () => {
    const body = { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [DEV0, 'latest'] };
    const first = await svc.post(PATH, body);
    expect(first.headers['x-svc-cache']).to.equal('MISS');
    await new Promise((r) => setTimeout(r, 20));
    const second = await svc.post(PATH, body);
    expect(second.headers['x-svc-cache']).to.equal('HIT');
    expect(second.json.result).to.equal(first.json.result);
    // A params matcher that does not match: never cached.
    const other = { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: [DEV0, hex(5)] };
    await svc.post(PATH, other);
    await new Promise((r) => setTimeout(r, 20));
    expect((await svc.post(PATH, other)).headers['x-svc-cache']).to.equal('MISS');
  });
});

describe('e2e: response cache on a young anvil chain (finalized block 0)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;

  before(async () => {
    anvil = await startAnvil();
    // Five blocks: anvil's finalized block (latest − 64, floored) is the genesis.
    await anvil.rpc('anvil_mine', [hex(5)]);
    svc = await startSvc({
      logLevel: 'error',
      metrics: { enabled: true, port: 0 },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN, statePollerInterval: '1h' } }],
        },
      ],
    });
    const st = chainStateOf(svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!);
    await waitFor(() => st.finalizedKnown && st.highestLatest >= 5, 10_000);
    expect(st.highestFinalized).to.equal(0);
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  const call = (method: string, params: unknown[]) => svc.post(PATH, { jsonrpc: '2.0', id: 1, method, params });
  const settle = () => new Promise((r) => setTimeout(r, 20));

  it('blocks by number are cached: block 0 as finalized, later blocks as unfinalized', async () => {
    for (const n of [0, 3]) {
      expect((await call('eth_getBlockByNumber', [hex(n), false])).headers['x-svc-cache'], `block ${n}, first`).to.equal('MISS');
      await settle();
      expect((await call('eth_getBlockByNumber', [hex(n), false])).headers['x-svc-cache'], `block ${n}, second`).to.equal('HIT');
    }
  });

  it('an answer stored nowhere is counted with its reason: svc_cache_skipped_total{reason}', async () => {
    // An empty answer for a block beyond the head: "not there yet" is not a fact worth keeping.
    expect((await call('eth_getBlockByNumber', [hex(1000), false])).json.result).to.equal(null);
    await settle();
    const text = await (await fetch(svc.metricsUrl!)).text();
    expect(text).to.match(/svc_cache_skipped_total\{project="main",network="evm:31337",category="eth_getBlockByNumber",reason="beyond_head"\} 1/);
  });
});
