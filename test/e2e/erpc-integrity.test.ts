/**
 * End-to-end eRPC `integrity` block (level, invalidBehavior, observeOnly, headerMode) through the
 * real server against two real anvil nodes on different chains of 70 blocks (anvil finalizes
 * latest − 64, so blocks up to 6 are finalized): a node on another fork is asked first, then two
 * upstreams on the honest node. At `corroborated` the forked block fails the comparison with the
 * other upstreams; what the client gets follows eRPC's per-finality verdict.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

const CHAIN = 31337;
const BLOCKS = 70;

/** Sum of `svc_integrity_flagged_total` for a project and outcome. */
async function flagged(svc: SvcHandle, project: string, outcome: string): Promise<number> {
  const text = await (await fetch(svc.metricsUrl!)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('svc_integrity_flagged_total{') && l.includes(`project="${project}"`) && l.includes(`outcome="${outcome}"`))
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe("e2e: eRPC's integrity block (level, invalidBehavior, observeOnly, headerMode)", function () {
  this.timeout(30_000);
  let honest: AnvilHandle;
  let fork: AnvilHandle;
  let svc: SvcHandle;

  const up = (id: string, endpoint: string) => ({ id, endpoint, evm: { chainId: CHAIN, statePollerInterval: '200ms' } });
  const projectWith = (id: string, integrity: Record<string, unknown>) => ({
    id,
    // Config order: the node on another fork is asked first.
    networks: [
      {
        architecture: 'evm',
        evm: { chainId: CHAIN },
        selectionPolicy: { evalInterval: '1h', evalFunc: (u: { removeCordoned(): unknown }) => u.removeCordoned() },
        integrity,
      },
    ],
    upstreams: [up('fork', fork.url), up('honest', honest.url), up('honest-2', honest.url)],
  });
  const rpc = (project: string, method: string, params: unknown[], headers: Record<string, string> = {}): Promise<SvcResponse> =>
    svc.post(`/${project}/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method, params }, headers);
  const hashOf = async (a: AnvilHandle, n: number): Promise<string> => (await a.rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).hash;

  before(async () => {
    [honest, fork] = await Promise.all([startAnvil({ chainId: CHAIN }), startAnvil({ chainId: CHAIN, args: ['--timestamp', '1600000000'] })]);
    await Promise.all([honest.rpc('anvil_mine', [`0x${BLOCKS.toString(16)}`]), fork.rpc('anvil_mine', [`0x${BLOCKS.toString(16)}`])]);
    expect(await hashOf(fork, 1)).to.not.equal(await hashOf(honest, 1));
    svc = await startSvc({
      logLevel: 'error',
      ...NO_CACHE,
      projects: [
        // eRPC's defaults: reject on finalized blocks, soft-flag on unfinalized ones; headers off.
        projectWith('erpc-defaults', { level: 'corroborated' }),
        projectWith('strict', { level: 'corroborated', invalidBehavior: { unfinalized: 'reject' } }),
        projectWith('observe', { level: 'corroborated', invalidBehavior: { finalized: 'reject', unfinalized: 'reject' }, observeOnly: true }),
        projectWith('skip-tip', { level: 'corroborated', invalidBehavior: { unfinalized: 'off' } }),
      ],
    });
    for (const p of ['erpc-defaults', 'strict', 'observe', 'skip-tip']) {
      const net = svc.proxy.projects.get(p)!.networks.get(`evm:${CHAIN}`)!;
      const st = networkChainState(svc.proxy, net);
      await waitFor(() => net.upstreams.every((u) => u.state === 'ready') && st.highestFinalized >= 6 && st.highestLatest >= BLOCKS);
    }
  });

  after(async () => {
    await svc?.close();
    await Promise.all([honest?.stop(), fork?.stop()]);
  });

  it("level corroborated with eRPC's defaults: a forked finalized block is rejected (the honest one is served)", async () => {
    const r = await rpc('erpc-defaults', 'eth_getBlockByNumber', ['0x1', false]);
    expect(r.headers['x-svc-integrity']).to.equal('corroborated');
    // Either honest upstream (the same node twice): which one the policy puts first depends on their latency scores.
    expect(r.headers['x-svc-upstream']).to.be.oneOf(['honest', 'honest-2']);
    expect(r.json.result.hash).to.equal(await hashOf(honest, 1));
  });

  it('...and a forked unfinalized block is soft-flagged: served from the fork, counted in svc_integrity_flagged_total', async () => {
    const before = await flagged(svc, 'erpc-defaults', 'soft_flag');
    const r = await rpc('erpc-defaults', 'eth_getBlockByNumber', [`0x${BLOCKS.toString(16)}`, false]);
    expect(r.headers['x-svc-upstream']).to.equal('fork');
    expect(r.json.result.hash).to.equal(await hashOf(fork, BLOCKS));
    expect(await flagged(svc, 'erpc-defaults', 'soft_flag')).to.equal(before + 1);
  });

  it("headerMode off (eRPC's default with level): a request cannot lower the level", async () => {
    const r = await rpc('erpc-defaults', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'off' });
    expect(r.headers['x-svc-integrity']).to.equal('corroborated');
    expect(r.headers['x-svc-upstream']).to.be.oneOf(['honest', 'honest-2']);
  });

  it('invalidBehavior.unfinalized reject: the forked tip block is rejected too', async () => {
    const r = await rpc('strict', 'eth_getBlockByNumber', [`0x${BLOCKS.toString(16)}`, false]);
    expect(r.headers['x-svc-upstream']).to.be.oneOf(['honest', 'honest-2']);
    expect(r.json.result.hash).to.equal(await hashOf(honest, BLOCKS));
  });

  it('invalidBehavior.unfinalized off: the comparison is skipped at the tip, still made on finalized blocks', async () => {
    const tip = await rpc('skip-tip', 'eth_getBlockByNumber', [`0x${BLOCKS.toString(16)}`, false]);
    expect(tip.headers['x-svc-upstream']).to.equal('fork');
    expect(await flagged(svc, 'skip-tip', 'soft_flag')).to.equal(0);
    expect((await rpc('skip-tip', 'eth_getBlockByNumber', ['0x2', false])).headers['x-svc-upstream']).to.be.oneOf(['honest', 'honest-2']);
  });

  it('observeOnly: even a finalized forked block is served, counted as would_reject', async () => {
    const before = await flagged(svc, 'observe', 'would_reject');
    const r = await rpc('observe', 'eth_getBlockByNumber', ['0x1', false]);
    expect(r.headers['x-svc-upstream']).to.equal('fork');
    expect(r.json.result.hash).to.equal(await hashOf(fork, 1));
    expect(await flagged(svc, 'observe', 'would_reject')).to.equal(before + 1);
  });
});
