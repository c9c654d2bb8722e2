/**
 * End-to-end: an upstream's health, circuit breaker and `svc_upstream_request_errors_total` only
 * move for errors that are the upstream's fault (docs/http-interface.md "What counts against
 * an upstream"). A real svc (default preset, cache off) in front of:
 * - three real anvil nodes, flooded with `debug_traceTransaction` calls naming a tracer the node
 *   does not know (anvil answers -32603 `failed to evaluate JS code: ReferenceError: …`): the
 *   client gets the node's error after at most two upstreams, no breaker opens, nothing is
 *   counted against any upstream; reverts and invalid params are not counted either;
 * - scriptable fake upstreams (test/helpers/fault-server.ts): an upstream answering HTTP 500 is
 *   still charged and its breaker opens; the same unclassified error from two upstreams is a
 *   fact about the request (no third upstream, nobody charged), while one answered differently
 *   elsewhere is charged to its upstream.
 */
import { expect } from 'chai';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { upstreamBreakers } from '../../plugins/failsafe/index.ts';
import { ADDR0, ADDR1, REVERT_INIT, deployDirect, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** A breaker that opens after 5 counted failures among the last 20 outcomes (the flood below is 32 calls). */
const BREAKER = { failureThresholdCount: 5, failureThresholdCapacity: 20, halfOpenAfter: '5m' };

/** Upstream ids dialled for a call, from `X-SVC-Upstreams` (`<id>=<reason>:<outcome>:<ms>[:won]`). */
function dialled(res: SvcResponse): string[] {
  const h = res.headers['x-svc-upstreams'];
  if (!h) return [];
  return h.split(';').map((seg) => seg.slice(0, seg.lastIndexOf('=')));
}

/** Sum of a metric's samples whose labels include every given pair. */
async function metric(svc: SvcHandle, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(svc.metricsUrl as string)).text();
  let n = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

/** svc with one project `main`, one network 31337, a breaker on every upstream and the config-order selection. */
async function startWith(upstreams: Array<Record<string, unknown>>): Promise<SvcHandle> {
  const svc = await startSvc({
    ...NO_CACHE,
    logLevel: 'error',
    metrics: { enabled: true, port: 0 },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
        upstreamDefaults: { failsafe: [{ matchMethod: '*', timeout: { duration: '10s' }, circuitBreaker: BREAKER }] },
        upstreams,
      },
    ],
  });
  const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
  await waitFor(() => network.upstreams.length === upstreams.length && network.upstreams.every((u) => u.state === 'ready'));
  return svc;
}

/** Breaker states of every upstream, by id. */
function breakerStates(svc: SvcHandle): Record<string, string> {
  const out: Record<string, string> = {};
  for (const u of svc.proxy.projects.get('main')!.upstreams.values())
    out[u.id] = upstreamBreakers(svc.proxy, u)
      .map((b) => b.state)
      .join(',');
  return out;
}

describe('e2e error charging: bad calls to three anvil nodes charge no upstream', function () {
  this.timeout(90_000);
  let cluster: AnvilCluster;
  let svc: SvcHandle;
  let txHash: string;
  let revertAddr: string;

  before(async () => {
    cluster = await startAnvilCluster({ count: 3 });
    for (const n of cluster.nodes) revertAddr = await deployDirect(n, REVERT_INIT);
    for (const n of cluster.nodes) txHash = (await n.rpc('eth_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x1' }])) as string;
    svc = await startWith(cluster.upstreams());
  });
  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });

  it('32 debug_traceTransaction calls with an unknown tracer: the node error each time after at most two upstreams; no breaker opens; no error counted; error rates stay 0', async () => {
    const params = [txHash, { tracer: 'noSuchTracer' }];
    // What the node itself answers.
    const direct = await fetch(cluster.nodes[0]!.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(rpcBody('debug_traceTransaction', params)),
    });
    const nodeError = ((await direct.json()) as { error: { code: number; message: string } }).error;
    expect(nodeError.code).to.equal(-32603);
    expect(nodeError.message).to.match(/noSuchTracer is not defined/);
    const requestsBefore = await metric(svc, 'svc_upstream_request_total', { category: 'debug_traceTransaction' });

    const N = 32;
    for (let i = 0; i < N; i++) {
      const res = await svc.post(PATH, rpcBody('debug_traceTransaction', params, i + 1));
      expect(res.json?.error?.code, res.text).to.equal(nodeError.code);
      expect(res.json.error.message, res.text).to.equal(nodeError.message);
      expect(res.json.id).to.equal(i + 1);
      const ids = dialled(res);
      expect(ids.length, `call ${i}: ${res.headers['x-svc-upstreams']}`).to.be.within(1, 2);
      expect(new Set(ids).size, 'two different upstreams').to.equal(ids.length);
    }

    expect(breakerStates(svc)).to.deep.equal({ 'anvil-0': 'closed', 'anvil-1': 'closed', 'anvil-2': 'closed' });
    expect(await metric(svc, 'svc_upstream_request_errors_total', { category: 'debug_traceTransaction' }), 'errors counted').to.equal(0);
    const sent = (await metric(svc, 'svc_upstream_request_total', { category: 'debug_traceTransaction' })) - requestsBefore;
    expect(sent, 'upstream requests').to.be.at.most(2 * N);
    const health = svc.proxy.projects.get('main')!.health;
    for (const id of cluster.ids) {
      expect(health.snapshot(id, 'debug_traceTransaction').errorRate, id).to.equal(0);
      expect(health.snapshot(id).errorRate, id).to.equal(0);
    }

    // The upstreams still serve.
    const ok = await svc.post(PATH, rpcBody('eth_getTransactionByHash', [txHash]));
    expect(ok.json?.result?.hash, ok.text).to.equal(txHash);
  });

  it('a revert and an invalid-params call are not counted in svc_upstream_request_errors_total', async () => {
    for (let i = 0; i < 8; i++) {
      const revert = await svc.post(PATH, rpcBody('eth_call', [{ to: revertAddr, data: '0x' }, 'latest']));
      expect(revert.json?.error?.code, revert.text).to.equal(3);
      const bad = await svc.post(PATH, rpcBody('eth_getBalance', ['0xzz', 'latest']));
      expect(bad.json?.error?.code, bad.text).to.equal(-32602);
    }
    expect(await metric(svc, 'svc_upstream_request_errors_total', { category: 'eth_call' }), 'reverts').to.equal(0);
    expect(await metric(svc, 'svc_upstream_request_errors_total', { category: 'eth_getBalance' }), 'invalid params').to.equal(0);
    expect(await metric(svc, 'svc_upstream_request_total', { category: 'eth_getBalance' }), 'the bad calls did reach an upstream').to.be.at.least(8);
    expect(breakerStates(svc)).to.deep.equal({ 'anvil-0': 'closed', 'anvil-1': 'closed', 'anvil-2': 'closed' });
  });
});

describe('e2e error charging: genuine faults are still charged; agreeing upstreams are not', function () {
  this.timeout(30_000);
  let a: FaultServer;
  let b: FaultServer;
  let c: FaultServer;
  let svc: SvcHandle;
  const calls = (fs: FaultServer, method: string) => fs.calls.filter((x) => x.method === method).length;

  beforeEach(async () => {
    const named = (v: string) => startFaultServer({ handler: (req) => (req.method === 'eth_blockNumber' || req.method === 'eth_getBalance' ? v : undefined) });
    [a, b, c] = await Promise.all([named('0xa'), named('0xb'), named('0xc')]);
    svc = await startWith([
      { id: 'a', endpoint: a.url, evm: { chainId: CHAIN } },
      { id: 'b', endpoint: b.url, evm: { chainId: CHAIN } },
      { id: 'c', endpoint: c.url, evm: { chainId: CHAIN } },
    ]);
  });
  afterEach(async () => {
    await svc?.close();
    await Promise.all([a?.close(), b?.close(), c?.close()]);
  });

  it('an upstream answering HTTP 500 is charged: its errors are counted and its breaker opens', async () => {
    a.setDefault({ kind: 'status', status: 500, body: 'internal server error' });
    for (let i = 0; i < 6; i++) {
      const res = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
      expect(res.json?.result, res.text).to.be.oneOf(['0xb', '0xc']);
    }
    expect(breakerStates(svc).a).to.equal('open');
    expect(await metric(svc, 'svc_upstream_request_errors_total', { upstream: 'a', error: 'ErrEndpointServerSideException' })).to.be.at.least(5);
    expect(svc.proxy.projects.get('main')!.health.snapshot('a', 'eth_getBalance').errorRate).to.be.above(0);
    expect(breakerStates(svc).b).to.equal('closed');
  });

  it('the same unclassified error from two upstreams is a fact about the request: the client gets it at once, no third upstream, nobody charged', async () => {
    // Same code; messages differ only in numbers and quoted fragments, which the normaliser collapses.
    a.setDefault({ kind: 'rpcError', code: -32000, message: 'trace too heavy for block 0x1f: took 5012ms over "limit"' });
    b.setDefault({ kind: 'rpcError', code: -32000, message: 'trace too heavy for block 0x1f: took 4870ms over "budget"' });
    for (let i = 0; i < 10; i++) {
      const res = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
      expect(res.json?.error?.code, res.text).to.equal(-32000);
      expect(res.json.error.message).to.match(/^trace too heavy for block 0x1f/);
      expect(dialled(res)).to.deep.equal(['a', 'b']);
    }
    expect(calls(c, 'eth_getBalance'), 'the third upstream is never asked').to.equal(0);
    expect(breakerStates(svc)).to.deep.equal({ a: 'closed', b: 'closed', c: 'closed' });
    expect(await metric(svc, 'svc_upstream_request_errors_total', { category: 'eth_getBalance' })).to.equal(0);
    const health = svc.proxy.projects.get('main')!.health;
    expect(health.snapshot('a', 'eth_getBalance').errorRate).to.equal(0);
    expect(health.snapshot('b', 'eth_getBalance').errorRate).to.equal(0);
  });

  it('an unclassified error another upstream answers differently is charged to its upstream', async () => {
    a.setDefault({ kind: 'rpcError', code: -32000, message: 'database corrupted' });
    for (let i = 0; i < 6; i++) {
      const res = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
      expect(res.json?.result, res.text).to.be.oneOf(['0xb', '0xc']);
    }
    expect(breakerStates(svc).a).to.equal('open');
    expect(
      await metric(svc, 'svc_upstream_request_errors_total', { upstream: 'a', category: 'eth_getBalance', error: 'ErrEndpointServerSideException' }),
    ).to.be.at.least(5);
    expect(svc.proxy.projects.get('main')!.health.snapshot('a', 'eth_getBalance').errorRate).to.be.above(0);
  });
});
