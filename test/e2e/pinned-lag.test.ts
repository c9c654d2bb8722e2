/**
 * End-to-end `X-SVC-Upstream-Lag` (select and headers plugins): a call pinned with
 * `X-SVC-Use-Upstream` cannot be re-routed to a fresher upstream, so when the pinned upstream is
 * behind the network's head the answer says by how many blocks. Two real anvil nodes; blocks are
 * mined on one only, directly on that node; svc learns both heads from its state poller (100 ms).
 */
import { expect } from 'chai';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const AHEAD = 6;

describe('e2e: a pinned call to a lagging upstream says how far behind it is', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let svc: SvcHandle;

  before(async () => {
    cluster = await startAnvilCluster({ chainId: CHAIN, ids: ['lead', 'lag'] });
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          // Default exposed headers: the diagnostics list, which must name X-SVC-Upstream-Lag.
          cors: { allowedOrigins: ['https://app.example'] },
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
          upstreams: cluster.upstreams({ evm: { statePollerInterval: '100ms' } }),
        },
      ],
    });
    const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => network.upstreams.length === 2 && network.upstreams.every((u) => u.state === 'ready'));
    // Only the leader mines, directly on the node; svc hears of it from its poller.
    await cluster.mine('lead', AHEAD);
    const st = chainStateOf(network);
    const lag = svc.proxy.projects.get('main')!.upstreams.get('lag')!;
    await waitFor(() => st.highestLatest === AHEAD && (st.peek(lag)?.lastPollAt ?? 0) > 0);
    expect(await cluster.heads()).to.deep.equal([AHEAD, 0]);
  });

  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });

  it('pinned to the lagging node: X-SVC-Upstream-Lag names the blocks it is behind', async () => {
    const res = await svc.post(PATH, rpcBody('net_version', []), { 'X-SVC-Use-Upstream': 'lag' });
    expect(res.json.result, res.text).to.equal(String(CHAIN));
    expect(res.headers['x-svc-upstream']).to.equal('lag');
    expect(res.headers['x-svc-upstream-lag']).to.equal(String(AHEAD));
  });

  it('pinned with the use-upstream query parameter, an old head comes with the header', async () => {
    const res = await svc.post(`${PATH}?use-upstream=lag`, rpcBody('eth_getBlockByNumber', ['latest', false]));
    expect(res.json.error, res.text).to.equal(undefined);
    expect(Number.parseInt(res.json.result.number, 16)).to.equal(0);
    expect(res.headers['x-svc-upstream']).to.equal('lag');
    expect(res.headers['x-svc-upstream-lag']).to.equal(String(AHEAD));
  });

  it('pinned to the leader, or not pinned: no header', async () => {
    const lead = await svc.post(PATH, rpcBody('net_version', []), { 'X-SVC-Use-Upstream': 'lead' });
    expect(lead.json.result, lead.text).to.equal(String(CHAIN));
    expect(lead.headers['x-svc-upstream']).to.equal('lead');
    expect(lead.headers).to.not.have.property('x-svc-upstream-lag');
    const free = await svc.post(PATH, rpcBody('eth_blockNumber', []));
    expect(Number.parseInt(free.json.result, 16)).to.equal(AHEAD);
    expect(free.headers).to.not.have.property('x-svc-upstream-lag');
  });

  it('a pinned batch carries the header once, with the lag', async () => {
    const res = await svc.post(PATH, [rpcBody('net_version', [], 1), rpcBody('eth_gasPrice', [], 2)], { 'X-SVC-Use-Upstream': 'lag' });
    expect(res.json.map((r: { error?: unknown }) => r.error)).to.deep.equal([undefined, undefined]);
    expect(res.headers['x-svc-upstream-lag']).to.equal(String(AHEAD));
  });

  it('the header is among the default CORS exposed headers', async () => {
    const res = await svc.post(PATH, rpcBody('net_version', []), { 'X-SVC-Use-Upstream': 'lag', origin: 'https://app.example' });
    expect(res.headers['access-control-expose-headers']).to.match(/\bX-SVC-Upstream-Lag\b/i);
  });

  it('once the node catches up, the header goes away', async () => {
    await cluster.mine('lag', AHEAD);
    const st = chainStateOf(svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!);
    const lag = svc.proxy.projects.get('main')!.upstreams.get('lag')!;
    await waitFor(() => st.peek(lag)?.latest === AHEAD);
    const res = await svc.post(PATH, rpcBody('net_version', []), { 'X-SVC-Use-Upstream': 'lag' });
    expect(res.headers['x-svc-upstream']).to.equal('lag');
    expect(res.headers).to.not.have.property('x-svc-upstream-lag');
  });
});
