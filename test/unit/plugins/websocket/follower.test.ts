/**
 * The head follower against a fake block source: one far-future `latest` answer is neither
 * emitted nor freezes the heads (head plausibility, docs/evm.md); an implausible far block never
 * moves it; a far block read twice is jumped to; a follower stuck above the real chain re-syncs;
 * every `logs` feed of a network shares one `eth_getLogs` per block, filtered locally with the
 * node's matching rules (address list, topics with null and alternatives).
 */
import { expect } from 'chai';
import type { HeadVerdict } from 'svc-proxy/plugins/evm-state';
import { matchLog, parseLogFilter } from '../../../../plugins/websocket/subscriptions/filter.ts';
import { HeadFollower, type LogsTarget, MAX_GAP, RESYNC_READS } from '../../../../plugins/websocket/subscriptions/follower.ts';

const hex = (n: number) => `0x${n.toString(16)}`;
const hash = (n: number, fork = 0) => `0x${(fork * 1_000_000 + n).toString(16).padStart(64, '0')}`;
const block = (n: number, fork = 0) => ({ number: hex(n), hash: hash(n, fork), parentHash: hash(n - 1, fork), timestamp: hex(n) });
const A = `0x${'a'.repeat(40)}`;
const B = `0x${'b'.repeat(40)}`;
const X = `0x${'1'.repeat(64)}`;
const Y = `0x${'2'.repeat(64)}`;

/** A chain with head `head`; `lies` are `latest` answers served before the real one (one each). */
class Source {
  head = 10;
  lies: Array<Record<string, unknown>> = [];
  /** When set, every `latest` answer is this block (a wrong chain that stays). */
  stuck?: Record<string, unknown>;
  calls: string[] = [];
  readonly fetch = async (method: string, params: unknown[]): Promise<unknown> => {
    this.calls.push(method);
    const ref = params[0] as string;
    if (method === 'eth_getBlockByNumber') {
      if (ref === 'latest') return this.lies.shift() ?? this.stuck ?? block(this.head);
      const n = Number.parseInt(ref, 16);
      return n <= this.head ? block(n) : null;
    }
    if (method === 'eth_getLogs') {
      const h = (params[0] as { blockHash: string }).blockHash;
      return [
        { address: A, topics: [X], blockHash: h, logIndex: '0x0' },
        { address: B, topics: [Y, X], blockHash: h, logIndex: '0x1' },
        { address: A, topics: [], blockHash: h, logIndex: '0x2' },
      ];
    }
    throw new Error(`unexpected ${method}`);
  };
}

function start(src: Source, judge?: (n: number) => HeadVerdict, logs: LogsTarget[] = []): { f: HeadFollower; heads: number[] } {
  const heads: number[] = [];
  const f = new HeadFollower(
    src.fetch,
    { heads: () => ({ publish: (j: string) => heads.push(Number.parseInt((JSON.parse(j) as { number: string }).number, 16)) }), logs: () => logs },
    { pollIntervalMs: 5, judge },
  );
  f.start();
  return { f, heads };
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe('websocket plugin: head follower', () => {
  let f: HeadFollower | undefined;
  afterEach(() => f?.stop());

  it('one far-future latest answer is not emitted and does not freeze the heads: the real heads keep coming', async () => {
    const src = new Source();
    const s = start(src);
    f = s.f;
    await f.ready(1000);
    src.lies.push(block(0x7fffffff, 9));
    await until(() => src.lies.length === 0);
    for (let i = 0; i < 3; i++) {
      src.head++;
      await until(() => s.heads.length === i + 1);
    }
    expect(s.heads).to.deep.equal([11, 12, 13]);
  });

  it('an implausible far block never moves the follower, however often it is read', async () => {
    const src = new Source();
    const s = start(src, (n) => (n > 1000 ? 'implausible' : 'plausible'));
    f = s.f;
    await f.ready(1000);
    for (let i = 0; i < 4; i++) src.lies.push(block(10 + MAX_GAP + 50, 9));
    await until(() => src.lies.length === 0);
    src.head++;
    await until(() => s.heads.length === 1);
    expect(s.heads).to.deep.equal([11]);
    expect(f.headNumber).to.equal(11);
  });

  it('a far block read twice (a long outage) is jumped to; a confirmed one at once', async () => {
    const src = new Source();
    const s = start(src);
    f = s.f;
    await f.ready(1000);
    src.head = 10 + MAX_GAP + 100;
    await until(() => s.heads.length === 1);
    expect(s.heads).to.deep.equal([src.head]);
    const src2 = new Source();
    const reads: number[] = [];
    const s2 = start(src2, (n) => {
      reads.push(n);
      return 'confirmed';
    });
    await s2.f.ready(1000);
    src2.head = 10 + MAX_GAP + 100;
    await until(() => s2.heads.length === 1);
    s2.f.stop();
    expect(reads).to.deep.equal([src2.head]);
  });

  it(`a chain that stays below the emitted head for ${RESYNC_READS} reads is re-synced to (the real head is emitted, then followed)`, async () => {
    const src = new Source();
    src.stuck = block(500, 9);
    const s = start(src);
    f = s.f;
    await f.ready(1000);
    expect(f.headNumber).to.equal(500);
    src.stuck = undefined;
    await until(() => s.heads.length === 1);
    expect(s.heads).to.deep.equal([10]);
    src.head++;
    await until(() => s.heads.length === 2);
    expect(s.heads).to.deep.equal([10, 11]);
  });

  it('every logs feed shares one eth_getLogs per block, each filtered locally by the node rules', async () => {
    const src = new Source();
    const got = new Map<string, string[]>();
    const target = (name: string, raw: unknown): LogsTarget => {
      got.set(name, []);
      return { filter: parseLogFilter(raw), publish: (j) => got.get(name)?.push((JSON.parse(j) as { logIndex: string }).logIndex) };
    };
    const targets = [
      target('all', {}),
      target('a', { address: A }),
      target('xFirst', { topics: [X] }),
      target('anyThenX', { topics: [null, X] }),
      target('ab-xy', { address: [A, B], topics: [[X, Y]] }),
      target('none', { address: `0x${'c'.repeat(40)}` }),
    ];
    const s = start(src, undefined, targets);
    f = s.f;
    await f.ready(1000);
    const before = src.calls.filter((c) => c === 'eth_getLogs').length;
    src.head += 2;
    await until(() => s.heads.length === 2);
    expect(src.calls.filter((c) => c === 'eth_getLogs').length - before).to.equal(2);
    expect(Object.fromEntries(got)).to.deep.equal({
      all: ['0x0', '0x1', '0x2', '0x0', '0x1', '0x2'],
      a: ['0x0', '0x2', '0x0', '0x2'],
      xFirst: ['0x0', '0x0'],
      anyThenX: ['0x1', '0x1'],
      'ab-xy': ['0x0', '0x1', '0x0', '0x1'],
      none: [],
    });
  });

  it('matchLog: address case-insensitive; a null position still needs a topic there', () => {
    expect(matchLog(parseLogFilter({ address: A.toUpperCase().replace('0X', '0x') }), { address: A, topics: [] })).to.equal(true);
    expect(matchLog(parseLogFilter({ topics: [null, X] }), { address: A, topics: [X] })).to.equal(false);
    expect(matchLog(parseLogFilter({ topics: [X.toUpperCase().replace('0X', '0x')] }), { address: A, topics: [X] })).to.equal(true);
  });
});
