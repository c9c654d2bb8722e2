/**
 * End-to-end `rateLimitAutoTune` (eRPC's rate-limit auto-tuner), seen from a client: a real svc
 * (default preset without evm-state, so no state poll spends the budget) in front of an upstream
 * that answers HTTP 429 (test/helpers/fault-server.ts) and, second, a real anvil node. The 429
 * upstream has budget `up` (96 a second) with `rateLimitAutoTune: {adjustmentPeriod: 500ms,
 * decreaseFactor: 0.5, increaseFactor: 2, minBudget: 24}`:
 * - every call is answered (by anvil) while the budget is halved each window of 429s:
 *   `svc_rate_limiter_budget_max_count{budget="up"}` goes 96, 48, 24 (minBudget);
 * - over the lowered budget the 429 upstream is skipped undialled: of a burst of 40 calls it
 *   receives at most 24, and `svc_rate_limited_total{scope="upstream"}` counts the rest;
 * - once it stops answering 429, a clean window doubles the budget again (48) and it serves.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const ACCOUNT = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const BALANCE = '0x21e19e0c9bab2400000';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('e2e: rateLimitAutoTune lowers an upstream budget on 429s and raises it back', function () {
  this.timeout(30_000);
  let node: AnvilHandle;
  let limited: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    node = await startAnvil({ chainId: CHAIN });
    limited = await startFaultServer({ chainId: CHAIN, handler: ({ method }) => (method === 'eth_getBalance' ? BALANCE : undefined) });
    limited.setDefault({ kind: 'status', status: 429, body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"too many requests"}}' });
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        rateLimiters: { budgets: [{ id: 'up', rules: [{ method: '*', maxCount: 96, period: 'second' }] }] },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [], multiplexing: false, selectionPolicy: { evalInterval: '1h' } }],
            upstreams: [
              {
                id: 'limited',
                endpoint: limited.url,
                evm: { chainId: CHAIN },
                failsafe: [],
                rateLimitBudget: 'up',
                rateLimitAutoTune: { adjustmentPeriod: '500ms', decreaseFactor: 0.5, increaseFactor: 2, minBudget: 24 },
              },
              { id: 'node', endpoint: node.url, evm: { chainId: CHAIN }, failsafe: [] },
            ],
          },
        ],
      },
      { plugins: presetWithout('evm-state') },
    );
  });
  after(async () => {
    await svc?.close();
    await limited?.close();
    await node?.stop();
  });

  const balance = () => svc.post(PATH, rpcBody('eth_getBalance', [ACCOUNT, 'latest']));
  const burst = (n: number) => Promise.all(Array.from({ length: n }, balance));
  const scrape = async () => (await fetch(svc.metricsUrl as string)).text();
  const series = (text: string, name: string, ...labels: string[]): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.every((f) => l.includes(f)));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  const budget = async () => series(await scrape(), 'svc_rate_limiter_budget_max_count', 'budget="up"');
  const allAnswered = (rs: SvcResponse[]) => rs.every((r) => r.json.result === BALANCE);
  /** One tuner window: 11 answers, then one more after the adjustment period closes it. */
  const window = async () => {
    const rs = await burst(11);
    await sleep(520);
    rs.push(await balance());
    return rs;
  };

  it('halves the budget each window of 429s down to minBudget, while anvil answers every call', async () => {
    expect(await budget()).to.equal(96);
    expect((await balance()).headers['x-svc-upstream']).to.equal('node'); // opens the window
    const first = await window();
    expect(allAnswered(first)).to.equal(true);
    expect(first.every((r) => (r.headers['x-svc-upstreams'] ?? '').startsWith('limited=primary:rate_limited'))).to.equal(true);
    expect(await budget()).to.equal(48);
    expect(allAnswered(await window())).to.equal(true);
    expect(await budget()).to.equal(24);
  });

  it('skips the upstream undialled over the lowered budget', async () => {
    const before = limited.calls.length;
    const skippedBefore = series(await scrape(), 'svc_rate_limited_total', 'scope="upstream"', 'budget="up"');
    const rs = await burst(40);
    expect(allAnswered(rs)).to.equal(true);
    const reached = limited.calls.length - before;
    expect(reached).to.be.within(1, 24);
    expect(series(await scrape(), 'svc_rate_limited_total', 'scope="upstream"', 'budget="up"') - skippedBefore).to.equal(40 - reached);
  });

  it('doubles it again after a window without 429s, and the upstream serves', async () => {
    limited.setDefault({ kind: 'ok' });
    await sleep(1000); // the budget's window rolls over; the tuner's window (of 429s) is over too
    await balance(); // closes the 429 window: no lower than minBudget
    expect(await budget()).to.equal(24);
    const clean = await window();
    expect(clean.every((r) => r.json.result === BALANCE && r.headers['x-svc-upstream'] === 'limited')).to.equal(true);
    expect(await budget()).to.equal(48);
  });
});
