/**
 * End-to-end adaptive (quantile-based) failsafe policies, eRPC's `timeout.quantile`,
 * `minDuration`, `maxDuration` and hedge `quantile`, seen from a client: a real svc (default
 * preset without evm-state, so no state poll disturbs the scripted upstream) in front of a
 * scriptable slow upstream (test/helpers/fault-server.ts) and a real anvil node.
 *
 * - Network timeout `{duration 300ms, quantile 0.9, minDuration 100ms}`: before any sample a
 *   stalled call is cut at duration + minDuration (~400 ms); after answers of ~350 ms the same
 *   method is cut at duration + p90 (~650 ms), another method still at ~400 ms;
 *   `svc_network_timeout_fired_total{scope="network"}` and
 *   `svc_network_timeout_duration_seconds` count them.
 * - Upstream timeout on the slow upstream, anvil second: a stall is cut at ~500 ms cold and at
 *   ~700 ms once the method answers in ~300 ms, and the client gets anvil's real answer
 *   (trace `slow=primary:timeout:<ms>;node=sweep:success:<ms>:won`).
 * - Hedge `{delay 100ms, quantile 0.9, minDelay 100ms}`: cold, anvil answers for a stalled
 *   primary after ~200 ms; once the method's answers take ~500 ms, only after ~600 ms
 *   (`X-SVC-Network-Hedges: 1`, trace `node=hedge:success:…:won`).
 * Multiplexing is off so that concurrent identical warm-up calls each reach the upstream.
 * Timings are asserted with generous upper margins (a loaded CI machine) and tight lower ones
 * (a deadline never fires early).
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** anvil's first dev account and its balance (10 000 ETH). */
const ACCOUNT = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const BALANCE = '0x21e19e0c9bab2400000';

/** A timed POST of one call. */
async function call(svc: SvcHandle, method: string, params: unknown[], headers?: Record<string, string>): Promise<{ res: SvcResponse; ms: number }> {
  const t0 = performance.now();
  const res = await svc.post(PATH, rpcBody(method, params), headers);
  return { res, ms: performance.now() - t0 };
}

/** The duration (ms) of one upstream's segment in `X-SVC-Upstreams`, with its reason and outcome. */
function segment(res: SvcResponse, id: string): { reason: string; outcome: string; ms: number; won: boolean } | undefined {
  for (const seg of (res.headers['x-svc-upstreams'] ?? '').split(';')) {
    const eq = seg.lastIndexOf('=');
    if (seg.slice(0, eq) !== id) continue;
    const [reason, outcome, ms, won] = seg.slice(eq + 1).split(':');
    return { reason: reason!, outcome: outcome!, ms: Number(ms), won: won === 'won' };
  }
  return undefined;
}

/** The value of one series of a metric in a scrape (labels given as `k="v"` fragments). */
function metric(text: string, name: string, ...labels: string[]): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.every((f) => l.includes(f)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

describe('e2e: adaptive (quantile-based) timeouts and hedges', function () {
  this.timeout(30_000);
  let node: AnvilHandle;
  let slow: FaultServer;
  const handles: SvcHandle[] = [];

  before(async () => {
    node = await startAnvil({ chainId: CHAIN });
    // The slow upstream answers what anvil answers for the dev account.
    slow = await startFaultServer({
      chainId: CHAIN,
      handler: ({ method }) =>
        method === 'eth_getBalance' ? BALANCE : method === 'eth_getCode' ? '0x' : method === 'eth_getTransactionCount' ? '0x0' : undefined,
    });
  });
  afterEach(async () => {
    for (const h of handles.splice(0)) await h.close();
    slow.reset();
  });
  after(async () => {
    await slow.close();
    await node.stop();
  });

  const start = async (networkFailsafe: unknown, upstreams: Array<Record<string, unknown>>): Promise<SvcHandle> => {
    const svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        server: { includeErrorDetails: true },
        projects: [
          {
            id: 'main',
            networks: [
              { architecture: 'evm', evm: { chainId: CHAIN }, failsafe: networkFailsafe, selectionPolicy: { evalInterval: '1h' }, multiplexing: false },
            ],
            upstreams,
          },
        ],
      },
      { plugins: presetWithout('evm-state') },
    );
    handles.push(svc);
    return svc;
  };
  const scrape = async (svc: SvcHandle) => (await fetch(svc.metricsUrl as string)).text();

  it('network timeout: duration + minDuration before any sample, duration + the p90 of the method once warm, per method', async () => {
    const svc = await start(
      [{ matchMethod: '*', timeout: { duration: '300ms', quantile: 0.9, minDuration: '100ms', maxDuration: '2s' } }],
      [{ id: 'slow', endpoint: slow.url, evm: { chainId: CHAIN }, failsafe: [] }],
    );
    slow.setDefault({ kind: 'hang' });
    const cold = await call(svc, 'eth_getBalance', [ACCOUNT, 'latest']);
    expect(cold.res.json.error.data.code).to.equal('ErrFailsafeTimeoutExceeded');
    expect(cold.ms).to.be.within(395, 700);
    // Ten answers of ~350 ms (within the cold deadline) make the method's p90 ~350 ms.
    slow.setDefault({ kind: 'delay', ms: 350, then: { kind: 'ok' } });
    const warm = await Promise.all(Array.from({ length: 10 }, () => call(svc, 'eth_getBalance', [ACCOUNT, 'latest'])));
    expect(warm.every((w) => w.res.json.result === BALANCE)).to.equal(true);
    slow.setDefault({ kind: 'hang' });
    const [hot, other] = await Promise.all([call(svc, 'eth_getBalance', [ACCOUNT, 'latest']), call(svc, 'eth_getCode', [ACCOUNT, 'latest'])]);
    expect(hot.res.json.error.data.code).to.equal('ErrFailsafeTimeoutExceeded');
    expect(hot.ms).to.be.within(640, 1000); // 300 + ~350 (DDSketch: ±2 %)
    expect(other.res.json.error.data.code).to.equal('ErrFailsafeTimeoutExceeded');
    expect(other.ms).to.be.within(395, 640); // eth_getCode has no sample yet
    const text = await scrape(svc);
    expect(metric(text, 'svc_network_timeout_fired_total', 'category="eth_getBalance"', 'scope="network"')).to.equal(2);
    expect(metric(text, 'svc_network_timeout_fired_total', 'category="eth_getCode"', 'scope="network"')).to.equal(1);
    expect(metric(text, 'svc_network_timeout_duration_seconds_count', 'category="eth_getBalance"', 'scope="network"')).to.equal(12);
    expect(metric(text, 'svc_network_timeout_duration_seconds_bucket', 'category="eth_getBalance"', 'le="0.5"')).to.equal(11);
  });

  it('upstream timeout: the slow upstream is cut at duration + minDuration cold, at duration + p99 once warm, and anvil answers', async () => {
    const svc = await start(
      [],
      [
        {
          id: 'slow',
          endpoint: slow.url,
          evm: { chainId: CHAIN },
          failsafe: [{ timeout: { duration: '400ms', quantile: 0.99, minDuration: '100ms', maxDuration: '2s' } }],
        },
        { id: 'node', endpoint: node.url, evm: { chainId: CHAIN }, failsafe: [] },
      ],
    );
    slow.setDefault({ kind: 'hang' });
    const cold = await call(svc, 'eth_getBalance', [ACCOUNT, 'latest']);
    expect(cold.res.json.result).to.equal(BALANCE);
    expect(cold.res.headers['x-svc-upstream']).to.equal('node');
    const coldSlow = segment(cold.res, 'slow')!;
    expect(coldSlow.outcome).to.equal('timeout');
    expect(coldSlow.ms).to.be.within(495, 700);
    expect(segment(cold.res, 'node')).to.include({ reason: 'sweep', outcome: 'success', won: true });
    // The latency is the network's (eRPC's per network x method): anvil's fast answer counts, so
    // the deadline is now ~400 ms; ten answers of ~300 ms from the slow upstream make the p99 ~300 ms.
    slow.setDefault({ kind: 'delay', ms: 300, then: { kind: 'ok' } });
    const warm = await Promise.all(Array.from({ length: 10 }, () => call(svc, 'eth_getBalance', [ACCOUNT, 'latest'])));
    expect(warm.every((w) => w.res.headers['x-svc-upstream'] === 'slow')).to.equal(true);
    slow.setDefault({ kind: 'hang' });
    const hot = await call(svc, 'eth_getBalance', [ACCOUNT, 'latest']);
    expect(hot.res.json.result).to.equal(BALANCE);
    const hotSlow = segment(hot.res, 'slow')!;
    expect(hotSlow.outcome).to.equal('timeout');
    expect(hotSlow.ms).to.be.within(690, 1000); // 400 + ~300
    const text = await scrape(svc);
    expect(metric(text, 'svc_network_timeout_fired_total', 'category="eth_getBalance"', 'scope="upstream"')).to.equal(2);
  });

  it('hedge: delay + minDelay before any sample, delay + the p90 of the method once warm; anvil wins the hedge', async () => {
    const svc = await start(
      [{ matchMethod: '*', hedge: { delay: '100ms', quantile: 0.9, minDelay: '100ms', maxDelay: '2s', maxCount: 1 } }],
      [
        { id: 'slow', endpoint: slow.url, evm: { chainId: CHAIN }, failsafe: [] },
        { id: 'node', endpoint: node.url, evm: { chainId: CHAIN }, failsafe: [] },
      ],
    );
    slow.setDefault({ kind: 'hang' });
    const cold = await call(svc, 'eth_getTransactionCount', [ACCOUNT, 'latest']);
    expect(cold.res.json.result).to.equal('0x0');
    expect(cold.res.headers['x-svc-network-hedges']).to.equal('1');
    expect(segment(cold.res, 'node')).to.include({ reason: 'hedge', outcome: 'success', won: true });
    expect(cold.ms).to.be.within(195, 450);
    // Answers of ~500 ms pinned to the slow upstream (one candidate: no hedge) make the p90 ~500 ms.
    slow.setDefault({ kind: 'delay', ms: 500, then: { kind: 'ok' } });
    const warm = await Promise.all(
      Array.from({ length: 8 }, () => call(svc, 'eth_getTransactionCount', [ACCOUNT, 'latest'], { 'x-svc-use-upstream': 'slow' })),
    );
    expect(warm.every((w) => w.res.headers['x-svc-upstream'] === 'slow')).to.equal(true);
    slow.setDefault({ kind: 'hang' });
    const hot = await call(svc, 'eth_getTransactionCount', [ACCOUNT, 'latest']);
    expect(hot.res.json.result).to.equal('0x0');
    expect(hot.res.headers['x-svc-network-hedges']).to.equal('1');
    expect(segment(hot.res, 'node')).to.include({ reason: 'hedge', outcome: 'success', won: true });
    expect(hot.ms).to.be.within(590, 1000); // 100 + ~500
  });
});
