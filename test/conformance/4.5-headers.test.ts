/**
 * Conformance of the response headers of proxy calls (docs/interface.md §4.5) against real anvil
 * nodes: the diagnostic headers with their values and when they appear (single and batch), the
 * trace, its truncation, and the opt-in cost headers. Network evm:31337 is two anvil upstreams
 * (consensus on eth_getCode); network evm:1 is two fake upstreams that answer after 200 ms, with a
 * 50 ms hedge on eth_getTransactionCount and a 300 ms timeout on eth_getStorageAt; upstream s1's
 * next answer is scripted for the trace outcomes. A second svc with `executionHeaders: off` shows the
 * version headers stay.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer, type FaultStep } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { VERSION } from '../../core/wire/version.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const SLOW = '/main/evm/1';
const call = (id: unknown, method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });
const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;
const COUNTERS = [
  'x-svc-upstream-attempts',
  'x-svc-upstream-retries',
  'x-svc-upstream-hedges',
  'x-svc-network-attempts',
  'x-svc-network-retries',
  'x-svc-network-hedges',
];
/** A trace segment with the spec's words only (§4.5): reason, then outcome. */
const SEGMENT = /^[A-Za-z0-9_.:-]+=(primary|hedge|retry|consensus_slot|sweep):(success|timeout|exec_revert|rate_limited):\d+(:won)?$/;

describe('conformance §4.5: response headers', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  let s1: FaultServer;
  let s2: FaultServer;
  let svc: SvcHandle;
  let off: SvcHandle;
  let n = 100;
  /** A fresh address: an uncached, unmultiplexed call. */
  const fresh = () => addr(++n);

  before(async () => {
    [anvil, s1, s2] = await Promise.all([startAnvil({ chainId: CHAIN }), startFaultServer({ chainId: 1 }), startFaultServer({ chainId: 1 })]);
    for (const s of [s1, s2]) s.setDefault({ kind: 'delay', ms: 200 });
    const networks = [
      {
        architecture: 'evm',
        evm: { chainId: CHAIN },
        failsafe: [{ matchMethod: 'eth_getCode', consensus: { maxParticipants: 2, agreementThreshold: 2 } }, { matchMethod: '*' }],
      },
      {
        architecture: 'evm',
        evm: { chainId: 1 },
        failsafe: [
          { matchMethod: 'eth_getTransactionCount', hedge: { delay: '50ms', maxCount: 1 } },
          { matchMethod: 'eth_getStorageAt', timeout: { duration: '300ms' } },
          { matchMethod: '*' },
        ],
      },
    ];
    const upstreams = [
      { id: 'a', endpoint: anvil.url, vendorName: 'acme', evm: { chainId: CHAIN } },
      { id: 'a2', endpoint: anvil.url, vendorName: 'acme', evm: { chainId: CHAIN } },
      { id: 's1', endpoint: s1.url, evm: { chainId: 1, statePollerInterval: 0 } },
      { id: 's2', endpoint: s2.url, evm: { chainId: 1, statePollerInterval: 0 } },
    ];
    svc = await startSvc({
      logLevel: 'error',
      server: { executionHeaders: 'all', costHeaders: true, responseHeaders: { 'X-Conformance': 'yes' } },
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'mem', driver: 'memory' }],
          // Every finality: a node's finalized block may not be known yet right after start.
          policies: ['finalized', 'unfinalized', 'realtime', 'unknown'].map((finality) => ({
            connector: 'mem',
            finality,
            method: 'eth_getBalance',
            ttl: '1m',
            empty: 'allow',
          })),
        },
      },
      projects: [{ id: 'main', networks, upstreams }],
    });
    off = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: { executionHeaders: 'off' },
      projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }], upstreams: [upstreams[0]] }],
    });
  });
  after(async () => {
    await Promise.all([svc?.close(), off?.close()]);
    await Promise.all([anvil?.stop(), s1?.close(), s2?.close()]);
  });

  it('§4.5 X-SVC-Version, X-SVC-Commit — on every answer, even with executionHeaders off; Content-Type and server.responseHeaders always', async () => {
    for (const h of [svc, off]) {
      for (const r of [
        await h.post(PATH, call(1, 'eth_blockNumber')),
        await h.post(PATH, [call(1, 'eth_blockNumber')]),
        await h.post('/main/evm/999', call(1, 'eth_chainId')),
        await h.post(PATH, '{oops'),
      ]) {
        expect(r.headers['x-svc-version']).to.equal(VERSION);
        expect(r.headers['x-svc-commit']).to.be.a('string').and.not.equal('');
        expect(r.headers['content-type']).to.equal('application/json');
      }
    }
    expect((await svc.post(PATH, call(1, 'eth_blockNumber'))).headers['x-conformance']).to.equal('yes');
    const quiet = await off.post(PATH, call(1, 'eth_blockNumber'));
    expect(quiet.headers['x-svc-attempts']).to.equal(undefined);
    expect(quiet.headers['x-svc-upstreams']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Attempts — total physical operations, upstream plus cache', async () => {
    const r = await svc.post(PATH, call(1, 'eth_getBalance', [fresh(), '0x0']));
    const cache = Number(r.headers['x-svc-cache-attempts'] ?? 0);
    expect(cache).to.be.at.least(1);
    expect(Number(r.headers['x-svc-attempts'])).to.equal(Number(r.headers['x-svc-upstream-attempts']) + cache);
    const plain = await svc.post(PATH, call(2, 'eth_blockNumber'));
    expect(plain.headers['x-svc-attempts']).to.equal(plain.headers['x-svc-upstream-attempts']);
  });

  it('§4.5 X-SVC-Upstream-Attempts / -Retries / -Hedges — counters on every answer', async () => {
    const r = await svc.post(PATH, call(1, 'eth_blockNumber'));
    expect(r.headers['x-svc-upstream-attempts']).to.equal('1');
    expect(r.headers['x-svc-upstream-retries']).to.equal('0');
    expect(r.headers['x-svc-upstream-hedges']).to.equal('0');
    // A network hedge is a second upstream request: two upstream attempts.
    const hedged = await svc.post(SLOW, call(2, 'eth_getTransactionCount', [fresh(), '0x1']));
    expect(hedged.headers['x-svc-upstream-attempts']).to.equal('2');
    expect(hedged.headers['x-svc-upstream-hedges']).to.match(/^\d+$/);
  });

  it('§4.5 X-SVC-Network-Attempts / -Retries / -Hedges — counters on every answer, errors and batches included', async () => {
    for (const r of [
      await svc.post(PATH, call(1, 'eth_blockNumber')),
      await svc.post(PATH, call(2, 'eth_nope')),
      await svc.post(PATH, [call(3, 'eth_blockNumber'), call(4, 'eth_blockNumber')]),
    ]) {
      for (const h of COUNTERS) expect(r.headers[h], h).to.match(/^\d+$/);
    }
    const hedged = await svc.post(SLOW, call(5, 'eth_getTransactionCount', [fresh(), '0x1']));
    expect(hedged.headers['x-svc-network-attempts']).to.equal('1');
    expect(hedged.headers['x-svc-network-hedges']).to.equal('1');
    expect(hedged.headers['x-svc-network-retries']).to.equal('0');
  });

  it('§4.5 X-SVC-Cache-Attempts / -Retries / -Hedges — only when > 0', async () => {
    const cached = await svc.post(PATH, call(1, 'eth_getBalance', [fresh(), '0x0']));
    expect(Number(cached.headers['x-svc-cache-attempts'])).to.be.above(0);
    const none = await svc.post(PATH, call(2, 'eth_blockNumber'));
    expect(none.headers['x-svc-cache-attempts']).to.equal(undefined);
    expect(none.headers['x-svc-cache-retries']).to.equal(undefined);
    expect(none.headers['x-svc-cache-hedges']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Consensus-Slots / -Disputes / -Low-Participants — only when > 0', async () => {
    const r = await svc.post(PATH, call(1, 'eth_getCode', [fresh(), 'latest']));
    expect(r.json.result).to.equal('0x');
    expect(r.headers['x-svc-consensus-slots']).to.equal('2');
    expect(r.headers['x-svc-consensus-disputes']).to.equal(undefined);
    expect(r.headers['x-svc-consensus-low-participants']).to.equal(undefined);
    const plain = await svc.post(PATH, call(2, 'eth_blockNumber'));
    expect(plain.headers['x-svc-consensus-slots']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Cache — MISS then HIT; PARTIAL:<n> on a batch with some hits', async () => {
    const who = fresh();
    expect((await svc.post(PATH, call(1, 'eth_getBalance', [who, '0x0']))).headers['x-svc-cache']).to.equal('MISS');
    expect((await svc.post(PATH, call(2, 'eth_getBalance', [who, '0x0']))).headers['x-svc-cache']).to.equal('HIT');
    const batch = await svc.post(PATH, [call(3, 'eth_getBalance', [who, '0x0']), call(4, 'eth_getBalance', [fresh(), '0x0'])]);
    expect(batch.headers['x-svc-cache']).to.match(/^PARTIAL:\d+$/);
  });

  it('§4.5 X-SVC-Upstream — the winning upstream on single answers, absent on batches', async () => {
    const r = await svc.post(PATH, call(1, 'eth_blockNumber'), { 'x-svc-use-upstream': 'a2' });
    expect(r.headers['x-svc-upstream']).to.equal('a2');
    const batch = await svc.post(PATH, [call(2, 'eth_blockNumber'), call(3, 'eth_blockNumber')]);
    expect(batch.headers['x-svc-upstream']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Duration — milliseconds on normal answers; a batch carries its slowest sub-call', async () => {
    const r = await svc.post(PATH, call(1, 'eth_blockNumber'));
    expect(r.headers['x-svc-duration']).to.match(/^\d+$/);
    // Four sub-calls to upstreams that each answer after 200 ms, run in parallel: the slowest
    // sub-call took at least 200 ms, and no more than the whole batch took as the client saw it.
    // A sum of the sub-calls would be at least 800 ms, more than the batch's wall time unless
    // the machine stalled for 400 ms or more: a busy core only makes the bounds looser, never
    // the correct value fall outside them.
    const t0 = performance.now();
    const batch = await svc.post(
      SLOW,
      [1, 2, 3, 4].map((i) => call(i + 1, 'eth_getBalance', [fresh(), '0x1'])),
    );
    const wall = performance.now() - t0;
    expect(batch.json).to.have.length(4);
    for (const e of batch.json) expect(e.result, JSON.stringify(e)).to.be.a('string');
    const d = Number(batch.headers['x-svc-duration']);
    expect(d, 'at least the slowest sub-call (200 ms upstream delay; timer slack)').to.be.at.least(195);
    expect(d, `not beyond the batch's wall time (${wall} ms)`).to.be.at.most(Math.ceil(wall));
  });

  it('§4.5 X-SVC-Upstreams — per-attempt trace <upstreamId>=<reason>:<outcome>:<durationMs>[:won] joined by ;', async () => {
    const r = await svc.post(PATH, call(1, 'eth_blockNumber'), { 'x-svc-use-upstream': 'a' });
    expect(r.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won$/);
    const hedged = await svc.post(SLOW, call(2, 'eth_getTransactionCount', [fresh(), '0x1']));
    // maxCount 1: the primary attempt and one hedge, one of them won, the other lost the race.
    const segs = hedged.headers['x-svc-upstreams']!.split(';');
    expect(segs).to.have.length(2);
    for (const s of segs) expect(s).to.match(SEGMENT);
    expect(segs.map((s) => /=(\w+):/.exec(s)![1])).to.deep.equal(['primary', 'hedge']);
    expect(segs.filter((s) => s.endsWith(':won'))).to.have.length(1);
    expect(segs.filter((s) => /:success:\d+:won$/.test(s))).to.have.length(1);
    const consensus = await svc.post(PATH, call(3, 'eth_getCode', [fresh(), 'latest']));
    const slots = consensus.headers['x-svc-upstreams']!.split(';');
    expect(slots, 'maxParticipants 2').to.have.length(2);
    for (const s of slots) expect(s).to.match(/^a2?=consensus_slot:success:\d+:won$/);
    // The other outcome words, one upstream attempt each (s1 pinned, its next answer scripted).
    const outcome = async (step: FaultStep, method = 'eth_getBalance'): Promise<string | undefined> => {
      s1.script(step);
      const r = await svc.post(`${SLOW}?use-upstream=s1`, call(4, method, method === 'eth_getBalance' ? [fresh(), '0x1'] : [fresh(), '0x0', '0x1']));
      expect(s1.pendingSteps(), 'the scripted answer was used').to.equal(0);
      return r.headers['x-svc-upstreams'];
    };
    expect(await outcome({ kind: 'hang' }, 'eth_getStorageAt'), 'past the 300 ms failsafe timeout').to.match(/^s1=primary:timeout:\d+$/);
    expect(await outcome({ kind: 'rpcError', code: 3, message: 'execution reverted', data: '0x' })).to.match(/^s1=primary:exec_revert:\d+$/);
    expect(await outcome({ kind: 'status', status: 429 })).to.match(/^s1=primary:rate_limited:\d+$/);
    // svc's own word `error` (a declared deviation, exceptions.ts README_DEVIATIONS §4.5): a
    // failure that is neither a timeout, a revert nor a rate limit (here an HTTP 500).
    expect(await outcome({ kind: 'status', status: 500 })).to.match(/^s1=primary:error:\d+$/);
  });

  it('§4.5 X-SVC-Upstreams-Truncated — a batch trace keeps 50 segments and counts the dropped ones', async () => {
    const batch = Array.from({ length: 60 }, (_, i) => call(i, 'eth_getTransactionCount', [fresh(), '0x0']));
    const r = await svc.post(PATH, batch);
    expect(r.headers['x-svc-upstreams']!.split(';')).to.have.length(50);
    expect(r.headers['x-svc-upstreams-truncated']).to.equal('10');
    const small = await svc.post(PATH, batch.slice(0, 3));
    expect(small.headers['x-svc-upstreams-truncated']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Calls — routed sub-calls in the answer, single and batch; absent on early errors that routed no call', async () => {
    expect((await svc.post(PATH, call(1, 'eth_blockNumber'))).headers['x-svc-calls']).to.equal('1');
    expect((await svc.post(PATH, [call(2, 'eth_blockNumber'), call(3, 'eth_getBalance', [fresh(), '0x0'])])).headers['x-svc-calls']).to.equal('2');
    for (const r of [
      await svc.post('/main/evm/999', call(4, 'eth_blockNumber')),
      await svc.post(PATH, '{oops'),
      await svc.post('/main/evm/999', [call(5, 'eth_blockNumber')]),
    ]) {
      expect(r.headers['x-svc-calls']).to.equal(undefined);
      expect(r.headers['x-svc-billable']).to.equal(undefined);
      expect(r.headers['x-svc-credits']).to.equal(undefined);
    }
  });

  it('§4.5 X-SVC-Billable — successes and cache hits count', async () => {
    const who = fresh();
    await svc.post(PATH, call(1, 'eth_getBalance', [who, '0x0']));
    const r = await svc.post(PATH, [call(2, 'eth_getBalance', [who, '0x0']), call(3, 'eth_blockNumber')]);
    expect(r.headers['x-svc-cache']).to.match(/^PARTIAL:/);
    expect(r.headers['x-svc-billable']).to.equal('2');
  });

  it('§4.5 X-SVC-Methods — distinct methods, sorted, comma-joined', async () => {
    const r = await svc.post(PATH, [call(1, 'eth_getBalance', [fresh(), '0x0']), call(2, 'eth_blockNumber'), call(3, 'eth_getBalance', [fresh(), '0x0'])]);
    expect(r.headers['x-svc-methods']).to.equal('eth_blockNumber,eth_getBalance');
  });

  it('§4.5 X-SVC-Credits — <vendor>:<method>=<units> sorted, joined by ;; a vendor without a price table costs 1 per request; a cache hit accrues nothing', async () => {
    const who = fresh();
    const r = await svc.post(PATH, [call(1, 'eth_getBalance', [who, '0x0']), call(2, 'eth_blockNumber', []), call(3, 'eth_getBalance', [fresh(), '0x0'])]);
    expect(r.headers['x-svc-credits']).to.equal('acme:eth_blockNumber=1;acme:eth_getBalance=2');
    const hit = await svc.post(PATH, call(4, 'eth_getBalance', [who, '0x0']));
    expect(hit.headers['x-svc-cache']).to.equal('HIT');
    expect(hit.headers['x-svc-credits']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Credits-Total — the grand total, present with X-SVC-Credits', async () => {
    const r = await svc.post(PATH, [call(1, 'eth_blockNumber'), call(2, 'eth_getBalance', [fresh(), '0x0'])]);
    expect(r.headers['x-svc-credits-total']).to.equal('2');
    const hit = await svc.post(PATH, call(3, 'eth_getBalance', [addr(101), '0x0']));
    expect(hit.headers['x-svc-credits-total']).to.equal(undefined);
  });

  it('§4.5 X-SVC-Credits-Version — the version that shipped the price tables, present with X-SVC-Credits', async () => {
    const r = await svc.post(PATH, call(1, 'eth_blockNumber'));
    expect(r.headers['x-svc-credits']).to.equal('acme:eth_blockNumber=1');
    expect(r.headers['x-svc-credits-version']).to.equal(VERSION);
  });
});
