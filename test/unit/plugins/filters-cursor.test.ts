/**
 * Unit tests of a filter's cursor (plugins/filters/cursor.ts): how one eth_getFilterChanges moves
 * it over a scripted chain read through a fake pipeline. What a node's filter gives is the
 * reference: each new block (hash, or its logs) once and in order, a reorg's abandoned logs again
 * with `removed: true` (newest block first, each block's logs in reverse, as geth), nothing lost
 * when a read fails.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { keccak256 } from 'viem';
import {
  EMPTY_CONFIRM_DEPTH,
  MAX_POLL_BYTES,
  mayMatch,
  READ_CONCURRENCY,
  MAX_GAP,
  MAX_KEPT_LOG_BYTES,
  pollChanges,
  startWindow,
  WINDOW_BLOCKS,
  type ChainRead,
  type WindowBlock,
} from '../../../plugins/filters/cursor.ts';

const hex = (n: number) => `0x${n.toString(16)}`;
const hashOf = (branch: string, n: number) => `0x${branch.repeat(2)}${n.toString(16).padStart(62, '0')}`;

interface Block {
  number: string;
  hash: string;
  parentHash: string;
  logsBloom?: string;
}

/** A header's logsBloom holding `values` (addresses, topics), by the Yellow Paper's M3:2048 (§4.3.1). */
function bloomOf(values: string[]): string {
  const bits = new Uint8Array(256);
  for (const v of values) {
    const h = keccak256(v as `0x${string}`, 'bytes');
    for (let i = 0; i < 6; i += 2) {
      const bit = (((h[i] as number) << 8) | (h[i + 1] as number)) & 2047;
      bits[255 - (bit >> 3)] = (bits[255 - (bit >> 3)] as number) | (1 << (bit & 7));
    }
  }
  return `0x${Buffer.from(bits).toString('hex')}`;
}
const A = `0x${'11'.repeat(20)}`;
const B = `0x${'22'.repeat(20)}`;

/** A chain of blocks 0..head on a branch; `fork(at, branch)` replaces blocks from `at` on. */
class FakeChain {
  readonly blocks: Block[] = [];
  /** Logs per block hash: one log per block (address A, topic T), plus extras. */
  readonly logs = new Map<string, Array<Record<string, unknown>>>();
  reads: Array<{ method: string; params: unknown[]; retryEmpty?: boolean }> = [];
  /** Reads in flight now, and the most at once. */
  inFlight = 0;
  maxInFlight = 0;
  /** Fails the read for which it returns true. */
  failOn?: (method: string, params: unknown[]) => boolean;
  /** Overrides what `latest` answers. */
  latestAt?: number;

  constructor(head: number, branch = 'a') {
    for (let n = 0; n <= head; n++) this.push(branch);
  }

  push(branch: string, logsPerBlock = 1): Block {
    const n = this.blocks.length;
    const b = { number: hex(n), hash: hashOf(branch, n), parentHash: n === 0 ? hashOf('0', 0) : (this.blocks[n - 1] as Block).hash };
    this.blocks.push(b);
    this.logs.set(
      b.hash,
      Array.from({ length: logsPerBlock }, (_, i) => ({ address: '0xaa', blockNumber: b.number, blockHash: b.hash, logIndex: hex(i), removed: false })),
    );
    return b;
  }

  /** Replaces blocks from `at` on with a new branch of the same length (or `length`). */
  fork(at: number, branch: string, length = this.blocks.length - at): void {
    this.blocks.length = at;
    for (let i = 0; i < length; i++) this.push(branch);
  }

  get head(): number {
    return this.blocks.length - 1;
  }

  read: ChainRead = async (method, params, options) => {
    this.reads.push({ method, params, retryEmpty: options?.retryEmpty });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await Promise.resolve();
    this.inFlight--;
    if (this.failOn?.(method, params)) throw new Error(`read failed: ${method}`);
    if (method === 'eth_getBlockByNumber') {
      const ref = params[0] as string;
      const n = ref === 'latest' ? (this.latestAt ?? this.head) : Number.parseInt(ref, 16);
      return this.blocks[n] ?? null;
    }
    if (method === 'eth_getBlockByHash') return this.blocks.find((b) => b.hash === params[0]) ?? null;
    if (method === 'eth_getLogs') return this.logs.get((params[0] as { blockHash: string }).blockHash) ?? [];
    throw new Error(`unexpected ${method}`);
  };
}

describe('filters: cursor', () => {
  it('a new filter starts at the latest block; a block filter then gets each new block hash once, in order', async () => {
    const chain = new FakeChain(5);
    let window = await startWindow(chain.read);
    expect(window).to.deep.equal([{ n: 5, h: hashOf('a', 5) }]);
    for (let i = 0; i < 3; i++) chain.push('a');
    const first = await pollChanges(chain.read, window, undefined, 64);
    expect(first.changes).to.deep.equal([6, 7, 8].map((n) => hashOf('a', n)));
    window = first.window;
    const second = await pollChanges(chain.read, window, undefined, 64);
    expect(second.changes).to.deep.equal([]);
    expect(second.moved).to.equal(false);
  });

  it('a log filter reads each new block’s logs by block hash with its own address and topics, only within fromBlock..toBlock', async () => {
    const chain = new FakeChain(2);
    const window = await startWindow(chain.read);
    for (let i = 0; i < 6; i++) chain.push('a');
    const polled = await pollChanges(chain.read, window, { address: ['0xaa'], topics: [['0xt']], from: 4, to: 6 }, 64);
    expect(polled.changes.map((l) => (l as { blockNumber: string }).blockNumber)).to.deep.equal(['0x4', '0x5', '0x6']);
    const logReads = chain.reads.filter((r) => r.method === 'eth_getLogs').map((r) => r.params[0]);
    expect(logReads).to.deep.equal([4, 5, 6].map((n) => ({ blockHash: hashOf('a', n), address: ['0xaa'], topics: [['0xt']] })));
    expect(polled.window.at(-1)).to.include({ n: 8 });
  });

  it('reads at most maxBlocks new blocks per poll; the rest come with the next polls, none twice', async () => {
    const chain = new FakeChain(0);
    let window = await startWindow(chain.read);
    for (let i = 0; i < 10; i++) chain.push('a');
    const got: unknown[] = [];
    const sizes: number[] = [];
    for (let i = 0; i < 4; i++) {
      const p = await pollChanges(chain.read, window, undefined, 4);
      sizes.push(p.changes.length);
      got.push(...p.changes);
      window = p.window;
    }
    expect(sizes).to.deep.equal([4, 4, 2, 0]);
    expect(got).to.deep.equal(Array.from({ length: 10 }, (_, i) => hashOf('a', i + 1)));
  });

  it('a poll stops reading when its wall-time budget is spent or its client left, and delivers what it read; the next poll goes on (none twice)', async () => {
    const clock = FakeTimers.install({ toFake: ['Date'] });
    try {
      const chain = new FakeChain(0);
      let window = await startWindow(chain.read);
      for (let i = 0; i < 20; i++) chain.push('a');
      // Every read takes 1 s of wall time; a poll may spend 5 s.
      const slow: ChainRead = async (m, p) => {
        clock.tick(1000);
        return chain.read(m, p);
      };
      const got: unknown[] = [];
      for (let i = 0; i < 20 && got.length < 20; i++) {
        const polled = await pollChanges(slow, window, undefined, 64, { until: Date.now() + 5000 });
        expect(polled.changes.length, `poll ${i}`).to.be.within(1, 8);
        got.push(...polled.changes);
        window = polled.window;
      }
      expect(got).to.deep.equal(Array.from({ length: 20 }, (_, i) => hashOf('a', i + 1)));
      const left = new AbortController();
      chain.push('a');
      const reads = chain.reads.length;
      left.abort();
      const none = await pollChanges(chain.read, window, undefined, 64, { signal: left.signal });
      expect(none).to.deep.include({ changes: [], moved: false });
      expect(chain.reads.length - reads, 'no read once the client left').to.be.at.most(1);
    } finally {
      clock.uninstall();
    }
  });

  it('a reorg gives the abandoned blocks’ logs again with removed: true, newest block first and each block’s logs in reverse, then the new branch', async () => {
    const chain = new FakeChain(3);
    let window = await startWindow(chain.read);
    chain.push('a', 2);
    chain.push('a', 2);
    const before = await pollChanges(chain.read, window, {}, 64);
    expect(before.changes).to.have.length(4);
    window = before.window;
    // Blocks 4 and 5 replaced, and block 6 on top: the poll sees 6, whose parent is unknown.
    chain.fork(4, 'b', 3);
    const after = await pollChanges(chain.read, window, {}, 64);
    const seen = after.changes.map((l) => {
      const o = l as { blockHash: string; logIndex: string; removed: boolean };
      return `${o.blockHash === hashOf('a', 5) ? 'a5' : o.blockHash === hashOf('a', 4) ? 'a4' : `b${Number.parseInt(o.blockHash.slice(-4), 16)}`}:${o.logIndex}:${o.removed}`;
    });
    expect(seen).to.deep.equal(['a5:0x1:true', 'a5:0x0:true', 'a4:0x1:true', 'a4:0x0:true', 'b4:0x0:false', 'b5:0x0:false', 'b6:0x0:false']);
    expect(after.window.map((b) => b.h).slice(-3)).to.deep.equal([4, 5, 6].map((n) => hashOf('b', n)));
  });

  it('a latest block at the cursor’s height with another hash is a reorg too; a block filter gets the new hash', async () => {
    const chain = new FakeChain(4);
    const window = await startWindow(chain.read);
    chain.fork(4, 'b');
    const p = await pollChanges(chain.read, window, undefined, 64);
    expect(p.changes).to.deep.equal([hashOf('b', 4)]);
  });

  it('a latest block below the cursor (an upstream behind the others) delivers nothing and keeps the cursor', async () => {
    const chain = new FakeChain(9);
    const window = await startWindow(chain.read);
    chain.latestAt = 7;
    const p = await pollChanges(chain.read, window, {}, 64);
    expect(p).to.deep.include({ changes: [], moved: false });
  });

  it('a read failing mid-poll delivers what was read before it; the next poll resumes there (nothing lost, nothing twice)', async () => {
    const chain = new FakeChain(0);
    let window = await startWindow(chain.read);
    for (let i = 0; i < 5; i++) chain.push('a');
    chain.failOn = (m, p) => m === 'eth_getLogs' && (p[0] as { blockHash: string }).blockHash === hashOf('a', 3);
    const first = await pollChanges(chain.read, window, {}, 64);
    expect(first.changes.map((l) => (l as { blockNumber: string }).blockNumber)).to.deep.equal(['0x1', '0x2']);
    window = first.window;
    chain.failOn = undefined;
    const second = await pollChanges(chain.read, window, {}, 64);
    expect(second.changes.map((l) => (l as { blockNumber: string }).blockNumber)).to.deep.equal(['0x3', '0x4', '0x5']);
  });

  it('a poll whose first read fails throws that error and leaves the window as it was', async () => {
    const chain = new FakeChain(3);
    const window = await startWindow(chain.read);
    const copy = structuredClone(window);
    chain.push('a');
    chain.failOn = () => true;
    let err: unknown;
    await pollChanges(chain.read, window, {}, 64).catch((e: unknown) => (err = e));
    expect(String(err)).to.contain('read failed');
    expect(window).to.deep.equal(copy);
  });

  it('an answer holding a log of another block is refused: nothing of that block is delivered', async () => {
    const chain = new FakeChain(1);
    const window = await startWindow(chain.read);
    const b = chain.push('a');
    chain.logs.set(b.hash, [{ blockHash: hashOf('z', 2), blockNumber: '0x2' }]);
    let err: unknown;
    await pollChanges(chain.read, window, {}, 64).catch((e: unknown) => (err = e));
    expect(String(err)).to.contain('another block');
  });

  it(`a gap of more than ${MAX_GAP} blocks is not replayed: the cursor jumps to the latest block`, async () => {
    const chain = new FakeChain(1);
    const window = await startWindow(chain.read);
    for (let i = 0; i < MAX_GAP + 5; i++) chain.push('a');
    const p = await pollChanges(chain.read, window, undefined, 64);
    expect(p.changes).to.deep.equal([]);
    expect(p.window).to.deep.equal([{ n: chain.head, h: hashOf('a', chain.head) }]);
    expect(p.jumped, 'the blocks skipped, for the warning and metric').to.equal(MAX_GAP + 4);
  });

  it(`reads a poll’s headers ${READ_CONCURRENCY} at a time, still delivering one linked chain in order`, async () => {
    const chain = new FakeChain(0);
    const window = await startWindow(chain.read);
    for (let i = 0; i < 20; i++) chain.push('a');
    const p = await pollChanges(chain.read, window, undefined, 64);
    expect(p.changes).to.deep.equal(Array.from({ length: 20 }, (_, i) => hashOf('a', i + 1)));
    expect(chain.maxInFlight).to.be.within(2, READ_CONCURRENCY);
  });

  it('skips eth_getLogs for a block whose logsBloom cannot match the filter (address and every topic position)', async () => {
    const T = `0x${'33'.repeat(32)}`;
    expect(mayMatch(bloomOf([A, T]), { address: [A], topics: [[T]] })).to.equal(true);
    expect(mayMatch(bloomOf([A]), { address: [A], topics: [[T]] })).to.equal(false);
    expect(mayMatch(bloomOf([B]), { address: [A, B] })).to.equal(true);
    expect(mayMatch(`0x${'0'.repeat(512)}`, {})).to.equal(false);
    expect(mayMatch(undefined, { address: [A] }), 'no bloom: may').to.equal(true);
    const chain = new FakeChain(0);
    const window = await startWindow(chain.read);
    for (let i = 1; i <= 4; i++) (chain.push('a') as Block).logsBloom = bloomOf([i === 2 ? A : B]);
    const p = await pollChanges(chain.read, window, { address: [A] }, 64);
    const logReads = chain.reads.filter((r) => r.method === 'eth_getLogs').map((r) => (r.params[0] as { blockHash: string }).blockHash);
    expect(logReads).to.deep.equal([hashOf('a', 2)]);
    expect(p.changes.map((l) => (l as { blockNumber: string }).blockNumber)).to.deep.equal(['0x2']);
    expect(p.window.at(-1)?.n).to.equal(4);
  });

  it(`an empty eth_getLogs for a block whose bloom matches is read again with retryEmpty; still empty within ${EMPTY_CONFIRM_DEPTH} blocks of the head, the poll stops before it`, async () => {
    const chain = new FakeChain(0);
    let window = await startWindow(chain.read);
    const lagging = chain.push('a');
    lagging.logsBloom = bloomOf([A]);
    chain.logs.set(lagging.hash, []);
    const held = await pollChanges(chain.read, window, { address: [A] }, 64);
    expect(held).to.deep.include({ changes: [], moved: false });
    expect(chain.reads.filter((r) => r.method === 'eth_getLogs').map((r) => r.retryEmpty)).to.deep.equal([undefined, true]);
    // The upstreams catch up: the next poll delivers the block's logs.
    chain.logs.set(lagging.hash, [{ address: A, blockNumber: lagging.number, blockHash: lagging.hash, logIndex: '0x0', removed: false }]);
    const caught = await pollChanges(chain.read, window, { address: [A] }, 64);
    expect(caught.changes).to.have.length(1);
    // Never any log: once the block is deep enough the bloom was a false positive, and the poll goes on.
    const fp = chain.push('a');
    fp.logsBloom = bloomOf([A]);
    chain.logs.set(fp.hash, []);
    window = caught.window;
    expect((await pollChanges(chain.read, window, { address: [A] }, 64)).moved).to.equal(false);
    for (let i = 0; i < EMPTY_CONFIRM_DEPTH; i++) chain.push('a');
    const past = await pollChanges(chain.read, window, { address: [A] }, 64);
    expect(past.window.at(-1)?.n).to.equal(chain.head);
  });

  it(`one poll delivers at most ${MAX_POLL_BYTES} bytes of logs (at least one block); the next poll goes on`, async () => {
    const chain = new FakeChain(0);
    let window: WindowBlock[] = await startWindow(chain.read);
    for (let i = 0; i < 5; i++) chain.push('a', 12_000);
    const perBlock = JSON.stringify(chain.logs.get(hashOf('a', 1))).length;
    const got: unknown[] = [];
    let polls = 0;
    while (got.length < 5 * 12_000 && polls < 10) {
      const p = await pollChanges(chain.read, window, {}, 64);
      expect(JSON.stringify(p.changes).length).to.be.at.most(Math.max(perBlock, MAX_POLL_BYTES) + 2);
      got.push(...p.changes);
      window = p.window;
      polls++;
    }
    expect(polls).to.be.greaterThan(1);
    expect(got).to.have.length(5 * 12_000);
  });

  it(`the window keeps ${WINDOW_BLOCKS} blocks and at most ${MAX_KEPT_LOG_BYTES} bytes of delivered logs`, async () => {
    const chain = new FakeChain(0);
    let window: WindowBlock[] = await startWindow(chain.read);
    for (let i = 0; i < WINDOW_BLOCKS + 20; i++) chain.push('a', 200);
    for (let i = 0; i < 3; i++) window = (await pollChanges(chain.read, window, {}, 64)).window;
    expect(window).to.have.length(WINDOW_BLOCKS);
    expect(window.at(-1)?.n).to.equal(chain.head);
    const kept = window.filter((b) => b.logs).reduce((sum, b) => sum + JSON.stringify(b.logs).length, 0);
    expect(kept).to.be.at.most(MAX_KEPT_LOG_BYTES);
    // The newest blocks keep theirs (a shallow reorg still re-delivers them as removed).
    expect(window.at(-1)?.logs).to.have.length(200);
    // Each kept block's size is recorded when it is delivered (never measured again).
    for (const b of window.filter((x) => x.logs)) expect(b.b).to.equal(JSON.stringify(b.logs).length);
    expect(
      window.some((b) => !b.logs),
      'the oldest blocks’ logs were forgotten',
    ).to.equal(true);
  });
});
