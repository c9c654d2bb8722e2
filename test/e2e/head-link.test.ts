/**
 * Parent-hash link confirmation (head plausibility, docs/evm.md), against anvil behind lying
 * proxies: an upstream whose head jumps beyond what the block time allows, while the other
 * upstreams lag, is believed once its blocks chain by parent hash down to a block svc recorded;
 * a forged head in the same range, whose blocks do not exist, never is.
 */
import { expect } from 'chai';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import { UNKNOWN_BLOCK_TIME_ALLOWANCE } from '../../plugins/evm-state/plausibility.ts';
import { LINK_MAX_BLOCKS } from '../../plugins/evm-state/link.ts';
import { hex, startLying, type LyingDeployment } from '../chaos/lying.ts';
import { NO_CACHE, waitFor } from '../helpers/svc.ts';

/** Blocks the honest upstream runs ahead: beyond every start-up allowance, within a walk's reach. */
const JUMP = UNKNOWN_BLOCK_TIME_ALLOWANCE + 500;

describe('e2e: parent-hash link confirmation of a far head (docs/evm.md head plausibility)', function () {
  this.timeout(90_000);
  let d: LyingDeployment | undefined;
  afterEach(async () => {
    await d?.stop();
    d = undefined;
  });

  const stateOf = (dep: LyingDeployment) => chainStateOf(dep.svc.proxy.projects.get('main')!.networks.get('evm:31337')!);
  const upstream = (dep: LyingDeployment, id: string) => dep.svc.proxy.projects.get('main')!.upstreams.get(id)!;

  it('an upstream far ahead of two lagging ones is believed once its blocks link to a recorded block, and svc serves its head', async () => {
    expect(JUMP).to.be.below(LINK_MAX_BLOCKS);
    d = await startLying({ blocks: 5, config: NO_CACHE });
    const dep = d;
    const st = stateOf(dep);
    await waitFor(() => st.highestLatest === 5 && st.hashAt(5) !== undefined, 5000);
    // b and c are frozen at block 5 (lagging nodes); a is too while the blocks are mined (anvil
    // mines them one by one: seen gradually, each step would be plausible), then tells the truth.
    const old = await dep.node.rpc('eth_getBlockByNumber', ['0x5', false]);
    for (const p of dep.proxies) {
      p.lie('eth_getBlockByNumber', (call) => (call.params[0] === 'latest' ? old : undefined));
      p.lie('eth_blockNumber', () => '0x5');
    }
    // Over a thousand blocks: anvil takes seconds for them on a loaded machine.
    await dep.node.rpc('anvil_mine', [hex(JUMP)], 60_000);
    const head = 5 + JUMP;
    dep.proxies[0]!.truth();
    await waitFor(() => st.of(upstream(dep, 'a')).linked === head, 40_000);
    await waitFor(() => st.highestLatest === head, 5000);
    expect((await dep.rpc('eth_blockNumber', [])).json?.result).to.equal(hex(head));
  });

  it('a forged head in walking range, whose blocks the upstream does not have, is never believed nor served', async () => {
    d = await startLying({ blocks: 5, config: NO_CACHE });
    const dep = d;
    const st = stateOf(dep);
    await waitFor(() => st.highestLatest === 5 && st.hashAt(5) !== undefined, 5000);
    const real = (await dep.node.rpc('eth_getBlockByNumber', ['latest', false])) as Record<string, unknown>;
    const forged = { ...real, number: hex(5 + JUMP), hash: `0x${'5a'.repeat(32)}`, parentHash: `0x${'a5'.repeat(32)}` };
    const liar = dep.proxies[0]!;
    liar.lie('eth_getBlockByNumber', (call) => (call.params[0] === 'latest' ? forged : undefined));
    liar.lie('eth_blockNumber', () => hex(5 + JUMP));
    // The walk asked the liar for the block below its forged head (and found none).
    await waitFor(() => liar.calls.some((c) => c.method === 'eth_getBlockByNumber' && c.params[0] === hex(4 + JUMP)), 5000);
    const answers: unknown[] = [];
    for (let i = 0; i < 20; i++) answers.push((await dep.rpc('eth_blockNumber', [])).json?.result);
    expect(answers.filter((h) => h === hex(5 + JUMP))).to.have.length(0);
    expect(st.of(upstream(dep, 'a')).linked).to.equal(0);
    expect(st.highestLatest).to.equal(5);
  });
});
