/**
 * eRPC's selection-policy parity against anvil: a YAML policy's `misbehaviorRateAbove` reads the
 * rounds an upstream lost in real consensus rounds (a lying upstream in front of the same node
 * as two honest ones) over its requests, as eRPC's rate does, so once it has lost them the policy
 * drops it and the calls it served go to another upstream; `blockSecondsLagAbove` drops an upstream whose block lag, times the block
 * time svc estimated from the heads it saw, is above the bound (two anvil nodes, blocks mined on
 * one); and `evalScope: network-method` gives one method's calls the order of their own
 * evaluation, once an upstream answered that method, while the other methods keep the network's.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startAnvilCluster } from '../helpers/anvil-cluster.ts';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import { startLyingProxy, type LyingProxy } from '../helpers/lying-proxy.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { evaluateSelection, selectionState } from '../../plugins/selection/index.ts';
import { CONSENSUS_MISBEHAVIOR_SERVICE } from '../../plugins/consensus/api.ts';
import { ADDR1, ADDR2, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const NET = `evm:${CHAIN}`;
const PATH = `/main/evm/${CHAIN}`;

describe("e2e: eRPC's misbehaviour and seconds-lag predicates and evalScope in a YAML policy, against anvil", function () {
  this.timeout(60_000);
  let node: AnvilHandle;
  let proxies: LyingProxy[] = [];
  let svc: SvcHandle | undefined;

  before(async () => {
    node = await startAnvil({ chainId: CHAIN });
    proxies = [await startLyingProxy(node.url), await startLyingProxy(node.url), await startLyingProxy(node.url)];
  });
  after(async () => {
    await svc?.close();
    for (const p of proxies) await p.close();
    await node?.stop();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    for (const p of proxies) p.truth();
  });

  /** svc with the given upstreams (ids -> proxy), no cache (every read reaches an upstream), and network settings. */
  async function start(ids: string[], network: Record<string, unknown>): Promise<SvcHandle> {
    const s = await startSvc({
      metrics: { enabled: false },
      database: { evmJsonRpcCache: { connectors: [], policies: [] } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, ...network }],
          upstreams: ids.map((id, i) => ({ id, endpoint: proxies[i]!.url, evm: { chainId: CHAIN } })),
        },
      ],
    });
    const net = s.proxy.projects.get('main')!.networks.get(NET)!;
    await waitFor(() => net.upstreams.every((u) => u.state === 'ready'), 10_000);
    return s;
  }

  it('misbehaviorRateAbove: an upstream outvoted in consensus rounds is dropped, and its calls move to another upstream', async () => {
    svc = await start(['liar', 'honest-1', 'honest-2'], {
      failsafe: [{ matchMethod: 'eth_getBalance', consensus: { maxParticipants: 3, agreementThreshold: 2 } }],
      selectionPolicy: { evalInterval: '1h', evalTimeout: '5s', evalFunc: '(upstreams, ctx) => upstreams.excludeIf(misbehaviorRateAbove(0.25))' },
    });
    const s = svc;
    expect(selectionState(s.proxy, 'main', NET)!.order).to.deep.equal(['liar', 'honest-1', 'honest-2']);
    // Not voted on: served by the head of the order.
    const before = await s.post(PATH, rpcBody('eth_getTransactionCount', [ADDR1, 'latest'], 1));
    expect(before.json.result, before.text).to.match(/^0x/);
    expect(before.headers['x-svc-upstream']).to.equal('liar');

    proxies[0]!.lie('eth_getBalance', () => '0x1');
    // The honest answers wait for the round's lie: a round stops at two agreeing votes, and a
    // liar answering last would have its slot cancelled unrecorded.
    for (const honest of [proxies[1]!, proxies[2]!]) {
      let seen = 0;
      honest.hold('eth_getBalance', () => {
        const round = ++seen;
        return waitFor(() => proxies[0]!.told('eth_getBalance') >= round, 10_000);
      });
    }
    for (let i = 0; i < 3; i++) {
      const r = await s.post(PATH, rpcBody('eth_getBalance', [ADDR2, 'latest'], 10 + i));
      expect(r.json.result, r.text).to.not.equal('0x1');
    }
    const project = s.proxy.projects.get('main')!;
    const misbehavior = s.proxy.services.get(CONSENSUS_MISBEHAVIOR_SERVICE)!;
    const liar = project.upstreams.get('liar')!;
    // eRPC's rate: misbehaviours over the upstream's requests in the same health cell.
    expect(misbehavior.counts(project, liar, 'eth_getBalance')).to.deep.equal({ rounds: 3, misbehaviors: 3, requests: 3, rate: 1 });
    const all = misbehavior.counts(project, liar);
    expect(all).to.deep.include({ rounds: 3, misbehaviors: 3, requests: project.health.snapshot('liar').requests });
    // Over every method the share is smaller: the start-up probe and state poller calls count as requests too.
    expect(all.rate)
      .to.equal(3 / all.requests)
      .and.be.above(0.25);

    expect(await evaluateSelection(s.proxy, 'main', NET)).to.equal(true);
    expect(selectionState(s.proxy, 'main', NET)!.order).to.deep.equal(['honest-1', 'honest-2']);
    const after = await s.post(PATH, rpcBody('eth_getTransactionCount', [ADDR1, 'latest'], 2));
    expect(after.json.result, after.text).to.equal(before.json.result);
    expect(after.headers['x-svc-upstream']).to.equal('honest-1');
  });

  it('blockSecondsLagAbove: once the block time is estimated, an upstream more seconds behind than the bound is dropped', async () => {
    const cluster = await startAnvilCluster({ chainId: CHAIN, ids: ['lag', 'lead'] });
    try {
      svc = await startSvc({
        metrics: { enabled: false },
        database: { evmJsonRpcCache: { connectors: [], policies: [] } },
        projects: [
          {
            id: 'main',
            networks: [
              {
                architecture: 'evm',
                evm: { chainId: CHAIN },
                selectionPolicy: { evalInterval: '1h', evalTimeout: '5s', evalFunc: '(upstreams) => upstreams.excludeIf(blockSecondsLagAbove(1))' },
              },
            ],
            upstreams: cluster.upstreams({ evm: { statePollerInterval: '100ms' } }),
          },
        ],
      });
      const s = svc;
      const network = s.proxy.projects.get('main')!.networks.get(NET)!;
      await waitFor(() => network.upstreams.length === 2 && network.upstreams.every((u) => u.state === 'ready'), 10_000);
      const servedBy = async () => (await s.post(PATH, rpcBody('net_version', []))).headers['x-svc-upstream'];
      expect(await servedBy()).to.equal('lag');
      // Blocks on the leader only, one at a time and spaced, so svc sees a block time (>= 10 ms a block counts).
      const st = chainStateOf(network);
      for (let n = 1; st.blockTimeMs === undefined; n++) {
        expect(n, 'no block time estimated after 10 blocks').to.be.below(10);
        await cluster.mine('lead', 1);
        await waitFor(() => st.highestLatest === n);
        await new Promise((r) => setTimeout(r, 150));
      }
      const head = st.highestLatest;
      // A sudden jump (under 10 ms a block, not a sample) leaves the lagging node far behind in seconds.
      await cluster.mine('lead', 30);
      const health = s.proxy.projects.get('main')!.health;
      await waitFor(() => health.snapshot('lag').blockHeadLag === head + 30);
      expect(((head + 30) * st.blockTimeMs!) / 1000).to.be.greaterThan(1);
      await evaluateSelection(s.proxy, 'main', NET);
      expect(selectionState(s.proxy, 'main', NET)).to.deep.include({ order: ['lead'] });
      expect(await servedBy()).to.equal('lead');
    } finally {
      await svc?.close();
      svc = undefined;
      await cluster.stop();
    }
  });

  it("evalScope network-method: eth_getBalance's own evaluation puts another upstream first; other methods keep the network's order", async () => {
    svc = await start(['first', 'second'], {
      selectionPolicy: {
        evalScope: 'network-method',
        evalInterval: '1h',
        evalTimeout: '5s',
        evalFunc: `(upstreams, ctx) => methodMatches('eth_getBalance') ? upstreams.slice().reverse() : upstreams`,
      },
    });
    const s = svc;
    const served = async (method: string, id: number) => {
      const r = await s.post(PATH, rpcBody(method, [ADDR1, 'latest'], id));
      expect(r.json.result, r.text).to.match(/^0x/);
      return r.headers['x-svc-upstream'];
    };
    // No upstream answered eth_getBalance yet: no scope, the network's order.
    expect(await served('eth_getBalance', 1)).to.equal('first');
    expect(selectionState(s.proxy, 'main', NET)!.scopes).to.deep.equal([]);
    // The call that opens the scope gets the network's order too; the scope is evaluated right after.
    expect(await served('eth_getBalance', 2)).to.equal('first');
    await waitFor(() => selectionState(s.proxy, 'main', NET)!.scopes.some((x) => x.method === 'eth_getBalance' && x.order.length === 2));
    expect(await served('eth_getBalance', 2)).to.equal('second');
    expect(await served('eth_getTransactionCount', 3)).to.equal('first');
    const st = selectionState(s.proxy, 'main', NET)!;
    expect(st.order).to.deep.equal(['first', 'second']);
    expect(st.scopes.find((x) => x.method === 'eth_getBalance')).to.deep.include({ finality: 'unknown', order: ['second', 'first'] });
  });
});
