/**
 * End-to-end chain state and tip enforcement (spec §2.8 #7): three
 * real anvil nodes as upstreams of one network, driven apart with `evm_setAutomine`,
 * `anvil_mine`, `evm_mine` and `anvil_setBlockTimestampInterval`. The lagging node is asked
 * first (a selection function keeps config order), yet `eth_blockNumber` and
 * `eth_getBlockByNumber(latest)` never go backwards through svc, `finalized` never answers below
 * the highest known finalized block (anvil answers latest − 64, genesis before that), a block a
 * node does not have yet is served by one that has it, a block far beyond the head is `null`
 * without an upstream call, and losing the leader does not turn the head back or into an error.
 */
import { expect } from 'chai';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import type { Network } from '../../core/registry/project.ts';
import { evmStatePlugin } from '../../plugins/evm-state/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const hex = (n: number) => `0x${n.toString(16)}`;
const num = (h: unknown) => Number.parseInt(String(h), 16);
const rpc = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id: 1, method, params });
/** anvil's `finalized` tag: latest − 2 × 32 slots, genesis before that. */
const anvilFinalized = (latest: number) => Math.max(0, latest - 64);

/** The trace as `id=reason:outcome[:won]` strings. */
function trace(res: SvcResponse): string[] {
  const h = res.headers['x-svc-upstreams'];
  if (!h) return [];
  return h.split(';').map((seg) => {
    const eq = seg.lastIndexOf('=');
    const [reason, outcome, , won] = seg.slice(eq + 1).split(':');
    return `${seg.slice(0, eq)}=${reason}:${outcome}${won === 'won' ? ':won' : ''}`;
  });
}

describe('e2e evm-state: anvil nodes driven apart', function () {
  this.timeout(30_000);
  let cluster: AnvilCluster | undefined;
  let svc: SvcHandle | undefined;

  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await cluster?.stop();
    cluster = undefined;
  });

  /**
   * Starts `lag` (asked first, automine off), `mid` and `lead`, mines them to the given heads,
   * then svc with 100 ms polls, and waits until svc knows every head.
   */
  async function setup(heads: { lag: number; mid: number; lead: number }, net: Record<string, unknown> = {}): Promise<{ c: AnvilCluster; network: Network }> {
    const c = await startAnvilCluster({ ids: ['lag', 'mid', 'lead'], chainId: CHAIN });
    cluster = c;
    await c.setAutomine('lag', false);
    for (const id of ['lag', 'mid', 'lead'] as const) if (heads[id] > 0) await c.mine(id, heads[id]);
    expect(await c.heads()).to.deep.equal([heads.lag, heads.mid, heads.lead]);
    svc = await startSvc(
      {
        // Upstream traffic is what these tests observe: a repeated call must not be a cache hit.
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
                // Config order, cordons honoured: the lagging node is always asked first.
                selectionPolicy: { evalInterval: '1h', evalFunc: (ups: { removeCordoned(): unknown }) => ups.removeCordoned() },
                ...net,
              },
            ],
            upstreams: c.upstreams({ evm: { statePollerInterval: '100ms' } }),
          },
        ],
      },
      { plugins: [...defaultPreset().filter((p) => p.name !== 'evm-state'), evmStatePlugin()] },
    );
    const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    const st = chainStateOf(network);
    // Every node polled, and the leader's heads are the network's (its finalized block too: a test
    // may ask for `finalized` at once, before a later poll would have recorded it).
    await waitFor(
      () =>
        network.upstreams.every((u) => u.state === 'ready' && st.peek(u)?.lastPollAt) &&
        st.highestLatest === heads.lead &&
        st.highestFinalized === anvilFinalized(heads.lead),
    );
    return { c, network };
  }

  it('a lagging upstream never makes eth_blockNumber or latest go backwards while the nodes keep mining apart', async () => {
    const { c, network } = await setup({ lag: 2, mid: 20, lead: 40 });
    const st = chainStateOf(network);
    // The leader's blocks get timestamps 12 s apart, like mainnet; the others keep wall time.
    await c.node('lead').rpc('anvil_setBlockTimestampInterval', [12]);
    let driving = true;
    const driver = (async () => {
      for (let i = 0; driving; i++) {
        await c.node('lead').rpc('evm_mine');
        if (i % 2 === 0) await c.mine('mid', 1);
        if (i % 7 === 0) await c.mine('lag', 1);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    let floor = 40;
    let calls = 0;
    try {
      const until = Date.now() + 2000;
      while (Date.now() < until) {
        const bn = await svc!.post(PATH, rpc('eth_blockNumber'));
        expect(bn.json.error, JSON.stringify(bn.json.error)).to.equal(undefined);
        const n = num(bn.json.result);
        expect(n, 'eth_blockNumber went backwards').to.be.at.least(floor);
        floor = n;
        const lb = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
        expect(lb.json.error, JSON.stringify(lb.json.error)).to.equal(undefined);
        const m = num(lb.json.result.number);
        expect(m, 'latest block went backwards').to.be.at.least(floor);
        floor = m;
        calls += 2;
      }
    } finally {
      driving = false;
      await driver;
    }
    expect(calls).to.be.greaterThan(20);
    const [lag, mid, lead] = await c.heads();
    expect(lead).to.be.greaterThan(mid!);
    expect(mid).to.be.greaterThan(lag!);
    expect(floor).to.be.at.most(lead!);
    // The lagging node really was asked first and re-routed: enforcement did the work.
    const metrics = await (await fetch(svc!.metricsUrl!)).text();
    const stale = /svc_upstream_stale_block_total\{[^}]*upstream="lag"[^}]*\} (\d+)/.exec(metrics);
    expect(Number(stale?.[1] ?? 0)).to.be.greaterThan(0);
    // Block time is estimated from the heads svc saw (the leader mined every ~25-50 ms).
    await waitFor(() => st.blockTimeMs !== undefined, 3000);
    expect(st.blockTimeMs).to.be.within(10, 2000);
    // And the lags reached the health tracker.
    const health = svc!.proxy.projects.get('main')!.health;
    await waitFor(() => health.snapshot('lag').blockHeadLag > 0);
    expect(health.snapshot('lead').blockHeadLag).to.equal(0);
  });

  it('§2.8 #7 — finalized never answers below the highest known finalized block; the directive off gives the first answer', async () => {
    await setup({ lag: 10, mid: 100, lead: 200 });
    const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['finalized', false]));
    expect(num(r.json.result.number)).to.equal(anvilFinalized(200));
    expect(r.headers['x-svc-upstream']).to.equal('lead');
    expect(trace(r)).to.deep.equal(['lag=primary:error', 'mid=sweep:error', 'lead=sweep:success:won']);
    const off = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['finalized', false]), { 'x-svc-enforce-highest-block': 'false' });
    expect(num(off.json.result.number)).to.equal(anvilFinalized(10));
    expect(off.headers['x-svc-upstream']).to.equal('lag');
  });

  it('a block a node does not have yet is served by a node that has it; far beyond the head is null without a call', async () => {
    await setup({ lag: 2, mid: 20, lead: 40 });
    const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(30), false]));
    expect(num(r.json.result.number)).to.equal(30);
    expect(trace(r)).to.deep.equal(['lead=primary:success:won']);
    const bal = await svc!.post(PATH, rpc('eth_getBalance', ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', hex(15)]));
    expect(bal.json.error).to.equal(undefined);
    expect(trace(bal).map((s) => s.split('=')[0])).to.deep.equal(['mid']);
    // Without the poller's knowledge anvil would answer null here: a real gap was avoided.
    expect(await cluster!.node('lag').rpc('eth_getBlockByNumber', [hex(30), false])).to.equal(null);
    const far = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(40 + 129), false]));
    expect(far.json.result).to.equal(null);
    expect(trace(far)).to.deep.equal([]);
    const near = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(40 + 128), false]));
    expect(near.json.result).to.equal(null);
    expect(trace(near).length).to.be.greaterThan(0);
  });

  it('losing the leader does not turn the head back nor into an error', async () => {
    const { c } = await setup({ lag: 2, mid: 20, lead: 40 });
    await c.stopNode('lead');
    const bn = await svc!.post(PATH, rpc('eth_blockNumber'));
    expect(bn.json.result).to.equal(hex(40));
    const lb = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
    expect(lb.json.error).to.equal(undefined);
    expect(num(lb.json.result.number)).to.equal(20);
    expect(lb.headers['x-svc-upstream']).to.equal('mid');
  });
});
