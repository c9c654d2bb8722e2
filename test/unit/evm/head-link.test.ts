/**
 * Parent-hash link confirmation (head plausibility, docs/evm.md): `linksToKnown` believes a far
 * head only when the reporter's blocks chain by parent hash down to a recorded canonical block,
 * reads no more than it must, and stops at the first gap.
 */
import { expect } from 'chai';
import { LINK_MAX_BLOCKS, LINK_ROUND, type LinkHeader, linksToKnown } from '../../../plugins/evm-state/link.ts';

const hashOf = (n: number, fork = '') => `0x${fork}${n.toString(16).padStart(64 - fork.length, '0')}`;
/** A chain of headers 0..top whose hashes are `hashOf(n)`; `fork` changes hashes from height `forkAt` up. */
function chain(top: number, fork?: { at: number; tag: string }): Map<number, LinkHeader> {
  const m = new Map<number, LinkHeader>();
  const h = (n: number) => (fork && n >= fork.at ? hashOf(n, fork.tag) : hashOf(n));
  for (let n = 1; n <= top; n++) m.set(n, { hash: h(n), parentHash: h(n - 1) });
  return m;
}

describe('parent-hash link confirmation (docs/evm.md)', () => {
  const recorded = new Map([
    [100, hashOf(100)],
    [90, hashOf(90)],
  ]);
  const source = (headers: Map<number, LinkHeader>, asked: number[] = []) => ({
    header: async (n: number) => {
      asked.push(n);
      return headers.get(n);
    },
    hashAt: (n: number) => recorded.get(n),
    recordedBelow: (n: number) => [...recorded.keys()].filter((k) => k < n).sort((a, b) => b - a)[0],
  });

  it('a head whose blocks chain down to the highest recorded block links; only the blocks between are read', async () => {
    const headers = chain(1500);
    const asked: number[] = [];
    expect(await linksToKnown(1500, headers.get(1500)!, source(headers, asked))).to.equal(true);
    expect(Math.min(...asked)).to.equal(101);
    expect(asked).to.have.length(1500 - 101);
  });

  it("a missing block, a block whose hash is not its child's parent hash, or a chain that meets another hash at the recorded height does not link", async () => {
    const gap = chain(1500);
    gap.delete(700);
    expect(await linksToKnown(1500, gap.get(1500)!, source(gap))).to.equal(false);
    const forged = chain(1500);
    forged.set(1499, { hash: hashOf(1499, 'ff'), parentHash: hashOf(1498) });
    expect(await linksToKnown(1500, forged.get(1500)!, source(forged))).to.equal(false);
    // Another chain from height 95 on: it chains by itself but not to the recorded block 100.
    const other = chain(1500, { at: 95, tag: 'ee' });
    expect(await linksToKnown(1500, other.get(1500)!, source(other))).to.equal(false);
  });

  it('a forged head stops the walk at its first round; a head beyond reach, or with nothing recorded below, reads nothing', async () => {
    const asked: number[] = [];
    const fake: LinkHeader = { hash: hashOf(1500, 'aa'), parentHash: hashOf(1499, 'aa') };
    expect(await linksToKnown(1500, fake, source(chain(1500), asked))).to.equal(false);
    expect(asked).to.have.length(LINK_ROUND);
    const none: number[] = [];
    expect(await linksToKnown(101 + LINK_MAX_BLOCKS, fake, source(chain(10), none))).to.equal(false);
    expect(await linksToKnown(50, fake, { ...source(chain(10), none), recordedBelow: () => undefined })).to.equal(false);
    expect(none).to.have.length(0);
  });
});
