/**
 * End-to-end health tracking: real client traffic through svc feeds the
 * project's health tracker (`proxy.projects.get('main').health`) per (upstream, method) cell and
 * the upstream's `*` cell. Proves: successes record latency; reverts from a real node (anvil)
 * count as successes; 429s count as throttles, not errors; transport faults, 5xx, malformed
 * answers and timeouts count as errors; client errors are neutral; cancelled hedge legs,
 * breaker-open skips and svc's own chain-id probes count as nothing; cordons show in snapshots.
 * With the selection plugin (default preset minus evm-state, see {@link HEALTH_PRESET}): a
 * cordoned upstream gets no traffic from the very next call (no evaluation tick in between), is
 * no fallback, a method cordon scopes to that method, and the next evaluation records step
 * `removeCordoned`, reason `cordoned`.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer, type FaultStep } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import type { HealthTracker } from '../../lib/health-window.ts';
import { upstreamBreakers } from '../../plugins/failsafe/index.ts';
import { evaluateSelection, selectionDecisions, selectionState } from '../../plugins/selection/index.ts';
import { NOPE_REVERT_DATA, REVERT_INIT, deployDirect, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const ADDR = '0x0000000000000000000000000000000000000001';

/** The trace as `id=reason:outcome[:won]` strings. */
function shape(res: SvcResponse): string[] {
  const h = res.headers['x-svc-upstreams'];
  if (!h) return [];
  return h.split(';').map((seg) => {
    const eq = seg.lastIndexOf('=');
    const [reason, outcome, , won] = seg.slice(eq + 1).split(':');
    return `${seg.slice(0, eq)}=${reason}:${outcome}${won === 'won' ? ':won' : ''}`;
  });
}

/**
 * The plugins of every svc here: the default preset without evm-state. Health is the subject,
 * not chain state: the fake upstreams tell themselves apart by their `eth_blockNumber` answers
 * (which tip enforcement would raise to the highest known head), share a network with anvil
 * (whose head is far below theirs), and the state poller's requests would consume scripted
 * fault steps and add health samples of their own.
 */
const HEALTH_PRESET = () => presetWithout('evm-state');

/** A fake upstream answering non-empty values for the methods these tests use. */
function fault(value: string): Promise<FaultServer> {
  const named = new Set(['eth_blockNumber', 'eth_getBalance', 'eth_gasPrice', 'eth_getCode', 'eth_getStorageAt', 'eth_getTransactionCount']);
  return startFaultServer({ handler: (req) => (named.has(req.method) ? value : undefined) });
}

describe('e2e health: real traffic feeds the health tracker', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let revertAddr: string;
  let a: FaultServer;
  let b: FaultServer;
  let brk: FaultServer;
  let svc: SvcHandle;
  let health: HealthTracker;

  const post = (method: string, params: unknown[] = [], headers?: Record<string, string>) => svc.post(PATH, rpcBody(method, params), headers);

  before(async () => {
    anvil = await startAnvil();
    revertAddr = await deployDirect(anvil, REVERT_INIT);
    a = await fault('0xa');
    b = await fault('0xb');
    brk = await fault('0xc');
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        server: { includeErrorDetails: true },
        projects: [
          {
            id: 'main',
            networks: [
              {
                architecture: 'evm',
                evm: { chainId: CHAIN },
                failsafe: [{ matchMethod: 'eth_getBalance', hedge: { delay: '100ms', maxCount: 1 } }],
                // No tick during the suite: the order stays the config order while `a` scores errors.
                selectionPolicy: { evalInterval: '1h' },
              },
            ],
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: CHAIN }, failsafe: [{ timeout: { duration: '250ms' } }] },
              { id: 'b', endpoint: b.url, evm: { chainId: CHAIN } },
              // Reached only through X-SVC-Use-Upstream.
              { id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } },
              {
                id: 'brk',
                endpoint: brk.url,
                evm: { chainId: CHAIN },
                failsafe: [
                  {
                    circuitBreaker: {
                      failureThresholdCount: 1,
                      failureThresholdCapacity: 1,
                      halfOpenAfter: '10m',
                      successThresholdCount: 1,
                      successThresholdCapacity: 1,
                    },
                  },
                ],
              },
              // Same fake node as `b` under another id, placed after `brk` for the breaker test.
              { id: 'b2', endpoint: b.url, evm: { chainId: CHAIN } },
            ],
          },
        ],
      },
      { plugins: HEALTH_PRESET() },
    );
    health = svc.proxy.projects.get('main')!.health;
  });
  beforeEach(() => {
    a.reset();
    b.reset();
    brk.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await brk?.close();
    await svc?.close();
    await anvil?.stop();
  });

  it("svc's own chain-id probes are not client traffic and are not scored", async () => {
    await waitFor(() => svc.proxy.projects.get('main')!.upstreams.get('a')!.state === 'ready');
    expect(health.snapshot('a', 'eth_chainId').requests).to.equal(0);
    expect(health.snapshot('b', 'eth_chainId').requests).to.equal(0);
  });

  it('a success is counted in the method cell and the `*` cell, with its latency', async () => {
    const before = health.snapshot('a', '*').requests;
    a.script({ kind: 'delay', ms: 40 });
    const res = await post('eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xa');
    const s = health.snapshot('a', 'eth_blockNumber');
    expect(s.requests).to.equal(1);
    expect(s.errorRate).to.equal(0);
    expect(s.throttleRate).to.equal(0);
    expect(s.p50).to.be.within(0.03, 1);
    expect(s.p99).to.be.at.least(s.p50);
    expect(health.snapshot('a', '*').requests).to.equal(before + 1);
    expect(health.snapshot('b', 'eth_blockNumber').requests, 'b was not asked').to.equal(0);
  });

  it('reverts from a real node count as successes', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await post('eth_call', [{ to: revertAddr, data: '0x' }, 'latest'], { 'X-SVC-Use-Upstream': 'anvil' });
      expect(res.json.error?.data, res.text).to.equal(NOPE_REVERT_DATA);
      expect(shape(res)).to.deep.equal(['anvil=primary:exec_revert']);
    }
    const s = health.snapshot('anvil', 'eth_call');
    expect(s.requests).to.equal(3);
    expect(s.errorRate).to.equal(0);
    expect(s.throttleRate).to.equal(0);
    expect(s.p50, 'revert latency is sampled like a success').to.be.greaterThan(0);
  });

  it('429s count as throttles, not errors; the next upstream scores a success', async () => {
    a.script({ kind: 'status', status: 429, body: 'Too Many Requests' }, { kind: 'rpcError', code: -32005, message: 'rate limit exceeded' });
    for (let i = 0; i < 2; i++) {
      const res = await post('eth_gasPrice');
      expect(res.json.result, res.text).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['a=primary:rate_limited', 'b=sweep:success:won']);
    }
    const s = health.snapshot('a', 'eth_gasPrice');
    expect(s.requests).to.equal(2);
    expect(s.throttleRate).to.equal(1);
    expect(s.errorRate).to.equal(0);
    expect(health.snapshot('b', 'eth_gasPrice')).to.include({ requests: 2, errorRate: 0, throttleRate: 0 });
  });

  it('transport faults, 5xx and malformed answers count as errors', async () => {
    const steps: FaultStep[] = [
      { kind: 'reset' },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 503, body: 'unavailable' },
      { kind: 'garbage' },
      { kind: 'wrongId' },
      { kind: 'truncated' },
    ];
    a.script(...steps);
    for (let i = 0; i < steps.length; i++) {
      const res = await post('eth_getCode', [ADDR, 'latest']);
      expect(res.json.result, res.text).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['a=primary:error', 'b=sweep:success:won']);
    }
    const s = health.snapshot('a', 'eth_getCode');
    expect(s.requests).to.equal(steps.length);
    expect(s.errorRate).to.equal(1);
    expect(s.throttleRate).to.equal(0);
    expect(s.p50, 'failures carry no latency sample').to.equal(0);
  });

  it('a timeout (hang ended by the upstream timeout) counts as an error', async () => {
    a.script({ kind: 'hang' }, { kind: 'delay', ms: 1000 });
    for (let i = 0; i < 2; i++) {
      const res = await post('eth_getStorageAt', [ADDR, '0x0', 'latest']);
      expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=sweep:success:won']);
    }
    expect(health.snapshot('a', 'eth_getStorageAt')).to.include({ requests: 2, errorRate: 1 });
  });

  it('a client error (invalid params) is neutral: counted, neither error nor throttle', async () => {
    a.script({ kind: 'rpcError', code: -32602, message: 'invalid argument 0: hex string has length 3' });
    const res = await post('eth_getTransactionCount', ['0x123', 'latest']);
    expect(res.json.error?.code, res.text).to.equal(-32602);
    expect(health.snapshot('a', 'eth_getTransactionCount')).to.include({ requests: 1, errorRate: 0, throttleRate: 0 });
  });

  it('a cancelled hedge leg counts as nothing; the winning hedge leg is a success', async () => {
    a.setDefault({ kind: 'delay', ms: 1000 });
    // The hedge fires at 100 ms and `b` answers at once, well before the 250 ms upstream timeout of `a`.
    for (let i = 0; i < 3; i++) {
      const res = await post('eth_getBalance', [ADDR, 'latest']);
      expect(res.json.result, res.text).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=hedge:success:won']);
    }
    await waitFor(() => a.calls.filter((c) => c.method === 'eth_getBalance').length === 3);
    await new Promise((r) => setTimeout(r, 100));
    expect(health.snapshot('a', 'eth_getBalance').requests).to.equal(0);
    expect(health.snapshot('b', 'eth_getBalance')).to.include({ requests: 3, errorRate: 0 });
  });

  it('a breaker-open skip (never dialled) counts as nothing', async () => {
    brk.script({ kind: 'status', status: 500 });
    const use = { 'X-SVC-Use-Upstream': 'brk|b2' };
    let res = await post('eth_blockNumber', [], use);
    expect(shape(res)).to.deep.equal(['brk=primary:error', 'b2=sweep:success:won']);
    expect(upstreamBreakers(svc.proxy, svc.proxy.projects.get('main')!.upstreams.get('brk')!)[0]!.state).to.equal('open');
    for (let i = 0; i < 3; i++) {
      res = await post('eth_blockNumber', [], use);
      expect(res.json.result).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['b2=sweep:success:won']);
    }
    expect(brk.calls.filter((c) => c.method === 'eth_blockNumber')).to.have.length(1);
    expect(health.snapshot('brk', 'eth_blockNumber')).to.include({ requests: 1, errorRate: 1 });
  });

  it('cordons show in the snapshot of the method cell, and `*` covers every method', () => {
    expect(health.snapshot('b', 'eth_call').cordoned).to.equal(false);
    expect(health.cordon('b', 'eth_call', 'test: method cordon')).to.equal(true);
    expect(health.snapshot('b', 'eth_call')).to.include({ cordoned: true, cordonReason: 'test: method cordon' });
    expect(health.snapshot('b', 'eth_blockNumber').cordoned).to.equal(false);
    expect(health.cordon('b', '*', 'test: all')).to.equal(true);
    expect(health.snapshot('b', 'eth_blockNumber')).to.include({ cordoned: true, cordonReason: 'test: all' });
    expect(health.snapshot('b', 'eth_call').cordonReason, '`*` overrides the method cordon').to.equal('test: all');
    expect(health.uncordon('b', '*')).to.be.a('number');
    expect(health.uncordon('b', 'eth_call')).to.be.a('number');
    expect(health.snapshot('b', 'eth_call').cordoned).to.equal(false);
  });
});

describe('e2e health: a cordoned upstream gets no traffic at once (spec §3.1)', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;
  let health: HealthTracker;
  const NET = `evm:${CHAIN}`;
  const served = (fs: FaultServer, method: string) => fs.calls.filter((c) => c.method === method).length;
  const post = (method: string, params: unknown[] = []) => svc.post(PATH, rpcBody(method, params));

  beforeEach(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        server: { includeErrorDetails: true },
        projects: [
          {
            id: 'main',
            // An hour between ticks: whatever changes before the next call changes on the request path.
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: CHAIN } },
              { id: 'b', endpoint: b.url, evm: { chainId: CHAIN } },
            ],
          },
        ],
      },
      { plugins: HEALTH_PRESET() },
    );
    health = svc.proxy.projects.get('main')!.health;
  });
  afterEach(async () => {
    await a?.close();
    await b?.close();
    await svc?.close();
  });

  it('a `*` cordon takes the upstream out from the very next call, before any evaluation tick', async () => {
    let res = await post('eth_blockNumber');
    expect(shape(res)).to.deep.equal(['a=primary:success:won']);
    const evaluatedAt = selectionState(svc.proxy, 'main', NET)!.evaluatedAt;
    health.cordon('a', '*', 'e2e: maintenance');
    for (let i = 0; i < 5; i++) {
      res = await post('eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['b=primary:success:won']);
    }
    expect(served(a, 'eth_blockNumber')).to.equal(1);
    expect(selectionState(svc.proxy, 'main', NET)!.evaluatedAt, 'no tick happened in between').to.equal(evaluatedAt);
  });

  it('the cordoned upstream is not a fallback either: when the others fail the call fails', async () => {
    health.cordon('b', '*', 'e2e');
    a.script({ kind: 'status', status: 500 });
    const res = await post('eth_blockNumber');
    // One upstream was tried: the client sees its error itself (a single-cause exhausted error is unwrapped).
    expect(res.json.error?.data?.code, res.text).to.equal('ErrEndpointServerSideException');
    expect(shape(res)).to.deep.equal(['a=primary:error']);
    expect(served(b, 'eth_blockNumber')).to.equal(0);
  });

  it('a method cordon excludes the upstream for that method only', async () => {
    health.cordon('a', 'eth_getBalance', 'e2e: method');
    let res = await post('eth_getBalance', [ADDR, 'latest']);
    expect(shape(res)).to.deep.equal(['b=primary:success:won']);
    res = await post('eth_blockNumber');
    expect(shape(res)).to.deep.equal(['a=primary:success:won']);
    expect(served(a, 'eth_getBalance')).to.equal(0);
  });

  it('every upstream cordoned: ErrUpstreamsExhausted without dialling anything', async () => {
    health.cordon('a', '*', 'e2e');
    health.cordon('b', 'eth_blockNumber', 'e2e');
    const res = await post('eth_blockNumber');
    expect(res.json.error?.data?.code, res.text).to.equal('ErrUpstreamsExhausted');
    expect(res.json.error.message).to.match(/cordoned/);
    expect(served(a, 'eth_blockNumber') + served(b, 'eth_blockNumber')).to.equal(0);
  });

  it('the next evaluation records it as excluded by step removeCordoned, reason cordoned; uncordoned it serves again', async () => {
    health.cordon('a', '*', 'e2e');
    await evaluateSelection(svc.proxy, 'main', NET);
    const st = selectionState(svc.proxy, 'main', NET)!;
    expect(st.order).to.deep.equal(['b']);
    expect(st.excluded).to.deep.equal({ a: 'cordoned' });
    expect(
      selectionDecisions(svc.proxy, 'main', NET)
        .filter((d) => d.upstream === 'a')
        .map((d) => [d.step, d.reason]),
    ).to.deep.include(['removeCordoned', 'cordoned']);
    expect(shape(await post('eth_blockNumber'))).to.deep.equal(['b=primary:success:won']);

    expect(health.uncordon('a', '*')).to.be.a('number');
    await evaluateSelection(svc.proxy, 'main', NET);
    expect(selectionState(svc.proxy, 'main', NET)!.order[0]).to.equal('a');
    expect(shape(await post('eth_blockNumber'))).to.deep.equal(['a=primary:success:won']);
  });
});
