/**
 * The lockstep anvil helper (test/helpers/lockstep-anvil.ts) on its own: two real anvil nodes
 * mined together produce the same block hashes (with transactions and logs in them), a reorg
 * made on both keeps them equal, and a node killed with SIGKILL leaves the other one mining.
 */
import { expect } from 'chai';
import { decodeEventLog, type Address } from 'viem';
import { startLockstepAnvil, TICK_ABI, TICK_INIT_CODE, TICK_TOPIC, type LockstepAnvil, type LockstepBlock } from '../helpers/lockstep-anvil.ts';

describe('e2e: lockstep anvil helper', function () {
  this.timeout(30_000);
  let l: LockstepAnvil;
  let tick: Address;
  before(async () => {
    l = await startLockstepAnvil();
    tick = await l.deploy(TICK_INIT_CODE);
  });
  after(async () => l?.stop());

  it('mines 5 blocks with the same hashes on both nodes, each with a Tick log carrying its number', async () => {
    for (let i = 0; i < 5; i++) {
      const b = await l.mine([await l.signCall(tick)]);
      const [a, z] = await Promise.all([l.block(Number(b.number), 0), l.block(Number(b.number), 1)]);
      expect(a.hash).to.equal(z.hash).and.to.equal(b.hash);
      const logs = (await l.node(1).rpc('eth_getLogs', [{ blockHash: b.hash, address: tick }])) as Array<{ topics: string[]; data: `0x${string}` }>;
      expect(logs).to.have.length(1);
      const log = logs[0]!;
      expect(log.topics[0]).to.equal(TICK_TOPIC);
      const event = decodeEventLog({ abi: TICK_ABI, data: log.data, topics: log.topics as [`0x${string}`] });
      expect(event.args?.blockNumber).to.equal(BigInt(b.number));
    }
  });

  it('reorgs both nodes alike: new hashes at the reorged heights, equal on both, the calls in the named blocks', async () => {
    const head = await l.head();
    const before = await Promise.all([head - 1, head].map((n) => l.block(n)));
    const replaced = await l.reorg(2, [{ to: tick, blockOffset: 1 }]);
    expect(replaced.map((b) => Number(b.number))).to.deep.equal([head - 1, head]);
    expect(replaced[0]!.hash).to.not.equal(before[0]!.hash);
    expect(replaced[1]!.hash).to.not.equal(before[1]!.hash);
    expect(replaced.map((b) => b.transactions.length)).to.deep.equal([0, 1]);
    // Lockstep mining goes on from the new head (nonces follow the reorged chain).
    const next = await l.mine([await l.signCall(tick)]);
    expect(Number(next.number)).to.equal(head + 1);
    expect(next.parentHash).to.equal(replaced[1]!.hash);
  });

  it('a node killed mid-stream leaves the other mining', async () => {
    const mined: LockstepBlock[] = [];
    l.startMining(100, { txsFor: async () => [await l.signCall(tick)], onBlock: (b) => mined.push(b) });
    while (mined.length < 2) await new Promise((r) => setTimeout(r, 20));
    await l.kill('anvil-a');
    expect(l.alive().map((n) => n.port)).to.deep.equal([l.node('anvil-b').port]);
    const at = mined.length;
    while (mined.length < at + 3) await new Promise((r) => setTimeout(r, 20));
    await l.stopMining();
    await l
      .node('anvil-a')
      .rpc('eth_blockNumber')
      .then(
        () => expect.fail('the killed node still answers'),
        () => undefined,
      );
    const numbers = mined.map((b) => Number(b.number));
    expect(numbers).to.deep.equal(numbers.map((_, i) => numbers[0]! + i));
    expect(await l.head()).to.equal(numbers.at(-1));
  });
});
