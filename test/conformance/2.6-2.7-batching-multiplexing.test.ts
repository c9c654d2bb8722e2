/**
 * Conformance, spec §2.6 (outbound batching fields) and §2.7 (multiplexing switches): one svc
 * with one project per setting, each in front of its own counting upstream that answers after
 * a short delay (so concurrent calls overlap) and records every POST it receives.
 */
import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
/**
 * batchMaxWait of the `batch` project, ms: long beside the upstream's 60 ms and svc's own time,
 * so "flushed at once" and "waited it out" stay apart on a busy machine (parallel test workers).
 */
const WAIT_MS = 1000;

/** A fake upstream that records each POST (array or not, element count, methods). */
interface Counting {
  url: string;
  posts: Array<{ batch: boolean; methods: string[] }>;
  server: Server;
}

async function counting(delayMs = 60): Promise<Counting> {
  const posts: Counting['posts'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const doc = JSON.parse(Buffer.concat(chunks).toString()) as unknown;
      const els = (Array.isArray(doc) ? doc : [doc]) as Array<{ id: unknown; method: string }>;
      const answer = (e: { id: unknown; method: string }) => ({
        jsonrpc: '2.0',
        id: e.id,
        result: e.method === 'eth_chainId' ? `0x${CHAIN.toString(16)}` : '0x1',
      });
      if (els.every((e) => e.method !== 'eth_chainId')) posts.push({ batch: Array.isArray(doc), methods: els.map((e) => e.method) });
      setTimeout(() => res.end(JSON.stringify(Array.isArray(doc) ? els.map(answer) : answer(els[0]!))), delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, posts, server };
}

describe('conformance: §2.6 outbound batching fields, §2.7 multiplexing switches', function () {
  this.timeout(20_000);
  const names = ['batch', 'sized', 'nobatch', 'zero', 'zeroWait', 'muxDefault', 'muxOff', 'muxInherited', 'muxOverride'] as const;
  const up: Record<string, Counting> = {};
  let svc: SvcHandle;

  before(async () => {
    for (const n of names) up[n] = await counting();
    const project = (id: string, upstream: Record<string, unknown> = {}, network: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
      id,
      networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, ...network }],
      upstreams: [{ id: `${id}-up`, endpoint: up[id]!.url, evm: { chainId: CHAIN, statePollerInterval: 0 }, ...upstream }],
      ...extra,
    });
    svc = await startSvc({
      logLevel: 'error',
      database: { evmJsonRpcCache: { connectors: [], policies: [] } },
      projects: [
        project('batch', { jsonRpc: { supportsBatch: true, batchMaxSize: 3, batchMaxWait: `${WAIT_MS}ms` } }),
        // Waits longer than this suite's timeout: three calls answered were flushed by size.
        project('sized', { jsonRpc: { supportsBatch: true, batchMaxSize: 3, batchMaxWait: '60s' } }),
        project('nobatch'),
        project('zero', { jsonRpc: { supportsBatch: true } }),
        // batchMaxWait unset (0): each call flushes as it is queued, so a size of 3 is never reached.
        project('zeroWait', { jsonRpc: { supportsBatch: true, batchMaxSize: 3 } }),
        project('muxDefault'),
        project('muxOff', {}, { multiplexing: false }),
        project('muxInherited', {}, {}, { networkDefaults: { multiplexing: false } }),
        project('muxOverride', {}, { multiplexing: true }, { networkDefaults: { multiplexing: false } }),
      ],
    });
  });
  after(async () => {
    await svc?.close();
    for (const c of Object.values(up)) {
      c.server.closeAllConnections();
      c.server.close();
    }
  });
  beforeEach(() => {
    for (const c of Object.values(up)) c.posts.length = 0;
  });

  /** n concurrent calls with distinct params (never multiplexed). */
  const distinct = (project: string, n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        svc.post(`/${project}/evm/${CHAIN}`, {
          jsonrpc: '2.0',
          id: i,
          method: 'eth_getBalance',
          params: [`0x${(i + 1).toString(16).padStart(40, '0')}`, '0x1'],
        }),
      ),
    );
  /** n concurrent identical calls. */
  const same = (project: string, n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        svc.post(`/${project}/evm/${CHAIN}`, { jsonrpc: '2.0', id: i, method: 'eth_getBalance', params: [`0x${'1'.padStart(40, '0')}`, '0x1'] }),
      ),
    );
  const balancePosts = (n: string) => up[n]!.posts.filter((p) => p.methods.includes('eth_getBalance'));

  it('§2.6 supportsBatch — true queues calls and sends them as batches; unset means no batching', async () => {
    const batched = await distinct('batch', 3);
    expect(batched).to.have.length(3);
    for (const r of batched) expect(r.json.result).to.equal('0x1');
    expect(balancePosts('batch')).to.deep.equal([{ batch: true, methods: ['eth_getBalance', 'eth_getBalance', 'eth_getBalance'] }]);
    await distinct('nobatch', 3);
    expect(balancePosts('nobatch')).to.deep.equal(Array.from({ length: 3 }, () => ({ batch: false, methods: ['eth_getBalance'] })));
  });

  it('§2.6 batchMaxSize — the queue length that flushes at once (well before batchMaxWait); 0 (the default) flushes every call alone', async () => {
    // `sized` waits 60 s, beyond this suite's timeout: an answer means the flush came at size 3.
    const sized = await distinct('sized', 3);
    expect(sized.map((r) => r.json.result)).to.deep.equal(['0x1', '0x1', '0x1']);
    expect(balancePosts('sized'), 'one batch of 3').to.deep.equal([{ batch: true, methods: ['eth_getBalance', 'eth_getBalance', 'eth_getBalance'] }]);
    await distinct('zero', 3);
    expect(balancePosts('zero')).to.have.length(3);
    expect(balancePosts('zero').every((p) => p.methods.length === 1)).to.equal(true);
  });

  it('§2.6 batchMaxWait — time from the first queued call to the forced flush; 0 (the default) fires at once', async () => {
    const t0 = performance.now();
    const [r] = await distinct('batch', 1);
    expect(r!.json.result).to.equal('0x1');
    expect(performance.now() - t0, 'a lone call waits out batchMaxWait').to.be.at.least(WAIT_MS - 10);
    // batchMaxWait 0 with batchMaxSize 3: three concurrent calls each flush as they are queued
    // (a wait of any length would gather them into one batch).
    const zero = await distinct('zeroWait', 3);
    expect(zero.map((r) => r.json.result)).to.deep.equal(['0x1', '0x1', '0x1']);
    expect(balancePosts('zeroWait').map((p) => p.methods)).to.deep.equal([['eth_getBalance'], ['eth_getBalance'], ['eth_getBalance']]);
  });

  it('§2.7 networks[].multiplexing — unset means enabled; only an explicit false disables', async () => {
    await same('muxDefault', 5);
    expect(balancePosts('muxDefault')).to.have.length(1);
    await same('muxOff', 5);
    expect(balancePosts('muxOff')).to.have.length(5);
    await same('muxOverride', 5);
    expect(balancePosts('muxOverride'), 'a network true overrides networkDefaults false').to.have.length(1);
  });

  it('§2.7 networkDefaults.multiplexing — inherited by networks that do not set the field', async () => {
    const rs = await same('muxInherited', 5);
    expect(rs).to.have.length(5);
    for (const r of rs) expect(r.json.result).to.equal('0x1');
    expect(balancePosts('muxInherited')).to.have.length(5);
  });
});
