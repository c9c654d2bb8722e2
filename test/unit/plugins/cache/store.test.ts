/**
 * Cache reads and writes across tiers: the first acceptable hit wins, a slow
 * or failing tier is a miss, realtime entries never go backwards, reorged unfinalized entries
 * are dropped, and writes re-classify lookups by hash and never store a tag as finalized.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { newExecutionRecord, type CallContext, type Finality } from '../../../../core/pipeline/context.ts';
import { NetworkChainState } from '../../../../plugins/evm-state/chain.ts';
import type { Network } from '../../../../core/registry/project.ts';
import type { Upstream } from '../../../../core/registry/upstream.ts';
import { MemoryConnector } from '../../../../plugins/cache/connectors/memory.ts';
import { connectionRedactor, decodeEntry, encodeEntry, type CacheEntry, type Connector } from '../../../../plugins/cache/connectors/types.ts';
import { callKey } from '../../../../plugins/cache/keys.ts';
import { Policy } from '../../../../plugins/cache/policy.ts';
import { cacheConfigOf, defaultCacheConfig, type PolicyConfig } from '../../../../plugins/cache/schema.ts';
import {
  acceptable,
  readEntry,
  writeEntry,
  WriteQueue,
  type PendingWrite,
  type ReadEvent,
  type Reader,
  type SkipReason,
  type StoreSink,
} from '../../../../plugins/cache/store.ts';
import type { ResolvedConfig } from '../../../../config/types.ts';

const H1 = `0x${'11'.repeat(32)}`;
const H2 = `0x${'22'.repeat(32)}`;
const NET = 'evm:1';
/** A cacheable call's key (these tests never read `pending`). */
const keyOf = (...a: Parameters<typeof callKey>) => callKey(...a) as NonNullable<ReturnType<typeof callKey>>;

function ctxOf(method: string, params: unknown[]): CallContext {
  return {
    request: { idRaw: '1', method, params },
    network: { id: NET } as Network,
    project: { id: 'main' },
    directives: {},
    record: newExecutionRecord(method),
    internal: false,
    state: new Map(),
  } as unknown as CallContext;
}

/** A chain whose single upstream reports the given heads. */
function chain(latest: number, finalized: number, now: () => number = Date.now): NetworkChainState {
  const u = { id: 'u' } as Upstream;
  const st = new NetworkChainState({ upstreams: [u] } as unknown as Network, now);
  st.observeLatest(u, latest);
  st.observeFinalized(u, finalized);
  return st;
}

function recorder(): StoreSink & { reads: Array<[string, ReadEvent]>; writes: Array<[string, boolean]>; skips: SkipReason[] } {
  const reads: Array<[string, ReadEvent]> = [];
  const writes: Array<[string, boolean]> = [];
  const skips: SkipReason[] = [];
  return {
    reads,
    writes,
    skips,
    read: (_c, r, e) => reads.push([r.connector.id, e]),
    wrote: (_c, c, _p, ok) => writes.push([c.id, ok]),
    skipped: (_c, reason) => skips.push(reason),
  };
}

function policy(over: Partial<PolicyConfig> = {}): Policy {
  return new Policy({ id: 'p', connector: 'mem', network: '*', method: '*', finality: 'finalized', empty: 'ignore', appliesTo: 'both', ttl: 0, ...over });
}

const entry = (over: Partial<CacheEntry> = {}): CacheEntry => ({ wire: '"0x1"', finality: 'finalized', writtenAt: Date.now(), ...over });

/** A remote-like connector answering after a delay, or never, or failing. */
function slow(id: string, behaviour: 'never' | 'fail' | { after: number; entry?: CacheEntry }): Connector {
  const get = (): Promise<CacheEntry | undefined> =>
    behaviour === 'never'
      ? new Promise(() => undefined)
      : behaviour === 'fail'
        ? Promise.reject(new Error('down'))
        : new Promise((r) => setTimeout(() => r(behaviour.entry), behaviour.after));
  return { id, driver: 'redis', open: async () => {}, close: async () => {}, get, getReverse: get, set: async () => {}, delete: async () => {} };
}

describe('cache store', () => {
  describe('acceptable entries', () => {
    it('a realtime entry for a block below the highest known latest block is a miss (never backwards)', () => {
      const st = chain(100, 90);
      expect(acceptable(entry({ finality: 'realtime', blockNumber: 100 }), st).ok).to.equal(true);
      expect(acceptable(entry({ finality: 'realtime', blockNumber: 99 }), st).ok).to.equal(false);
      expect(acceptable(entry({ finality: 'realtime', blockNumber: 99 }), chain(0, 0)).ok, 'head unknown: the TTL alone decides').to.equal(true);
    });

    it('an unfinalized entry whose height the poller has since seen with another hash is a miss and is dropped', () => {
      const st = chain(100, 90);
      st.observeBlockHash(95, H1);
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 95, blockHash: H1 }), st)).to.deep.equal({ ok: true, drop: false });
      st.observeBlockHash(95, H2);
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 95, blockHash: H1 }), st)).to.deep.equal({ ok: false, drop: true });
    });

    it('an unfinalized entry written before a reorg reaching its height is a miss, even without a hash of its own', () => {
      let now = 1000;
      const st = chain(100, 90, () => now);
      st.observeBlockHash(99, H1);
      st.observeBlockHash(100, H2, H1);
      const old = entry({ finality: 'unfinalized', blockNumber: 97, writtenAt: 1000 });
      expect(acceptable(old, st).ok).to.equal(true);
      now = 2000;
      // A new head whose parent is not the recorded block 99: the fork depth is unknown, everything above finalized is suspect.
      st.observeBlockHash(100, `0x${'33'.repeat(32)}`, `0x${'44'.repeat(32)}`);
      expect(st.lastReorg).to.deep.equal({ at: 2000, from: 91 });
      expect(acceptable(old, st)).to.deep.equal({ ok: false, drop: true });
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 97, writtenAt: 2500 }), st).ok, 'written after the reorg').to.equal(true);
      expect(acceptable(entry({ finality: 'finalized', blockNumber: 50, writtenAt: 1000 }), st).ok, 'finalized entries are never suspect').to.equal(true);
    });

    it('fresh means fresh: once the next block is due, a realtime entry serves at most a tenth of a block time after it was written', () => {
      let now = 0;
      const u = { id: 'u' } as Upstream;
      const st = new NetworkChainState({ upstreams: [u] } as unknown as Network, () => now);
      // Heads one second apart: the block-time estimate settles at 1000 ms.
      for (let n = 1; n <= 5; n++) {
        now = n * 1000;
        st.observeLatest(u, n);
      }
      expect(st.blockTimeMs).to.equal(1000);
      // An answer still said 5 at 5800 and 6 was first seen at 6000: 6 was produced after 5800,
      // so 7 is due by 6800 at the latest, taken early by the margin (0.8 of a block time): 6600.
      now = 5800;
      st.confirmHead(5);
      now = 6000;
      st.observeLatest(u, 6);
      expect(st.nextBlockDueAt).to.equal(6600);
      const e = entry({ finality: 'realtime', blockNumber: 6, writtenAt: 6000 });
      expect(acceptable(e, st, 6500).ok, 'before block 7 is due').to.equal(true);
      expect(acceptable(e, st, 6600), 'block 7 is due: ask an upstream').to.deep.equal({ ok: false, drop: false });
      const late = entry({ finality: 'realtime', blockNumber: 6, writtenAt: 6850 });
      expect(acceptable(late, st, 6900).ok, 'written while the block is late: reused briefly').to.equal(true);
      expect(acceptable(late, st, 6950).ok, 'then asked again').to.equal(false);
      now = 7200;
      st.observeLatest(u, 7);
      expect(acceptable(e, st, now), 'a newer head seen: dead in every tier').to.deep.equal({ ok: false, drop: true });
    });

    it('a realtime entry without a block to rest on is never served, and none is written while svc knows no head', () => {
      expect(acceptable(entry({ finality: 'realtime' }), chain(100, 90)).ok).to.equal(false);
      const mem = new MemoryConnector('mem', { maxItems: 10, maxTotalSize: 1 << 20 });
      const c = ctxOf('eth_gasPrice', []);
      const k = keyOf('main/evm:1', 'eth_gasPrice', [], 'h');
      writeEntry(
        c,
        k,
        'realtime',
        { wire: '"0x5"', value: () => '0x5' },
        [policy({ finality: 'realtime', connector: 'mem' })],
        new Map([['mem', mem]]),
        chain(0, 0),
        recorder(),
      );
      expect(mem.get(k.partition, k.range)).to.equal(undefined);
    });

    it('the latest block rests on its hash: the same height re-mined (a reorg at the head) drops it', () => {
      const st = chain(100, 90);
      st.observeBlockHash(100, H1);
      const e = entry({ finality: 'realtime', blockNumber: 100, blockHash: H1 });
      expect(acceptable(e, st).ok).to.equal(true);
      st.observeBlockHash(100, H2);
      expect(acceptable(e, st)).to.deep.equal({ ok: false, drop: true });
    });

    it('an unfinalized entry written before this process watched the chain is a miss unless its hash is the canonical one', () => {
      const now = 5000;
      const st = chain(100, 90, () => now);
      st.observeBlockHash(100, H1);
      expect(st.watchingSince).to.equal(5000);
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 97, writtenAt: 4000 }), st), 'another replica, before this one watched').to.deep.equal({
        ok: false,
        drop: false,
      });
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 100, blockHash: H1, writtenAt: 4000 }), st).ok, 'its hash is the canonical one').to.equal(
        true,
      );
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 97, writtenAt: 5500 }), st).ok, 'written while watching').to.equal(true);
      expect(
        acceptable(entry({ finality: 'unfinalized', blockNumber: 97, writtenAt: 5500 }), chain(100, 90)).ok,
        'never watched (no poller): no guess',
      ).to.equal(false);
    });

    it('a write rests an unfinalized state read on the canonical hash at its height; an answer from another fork is not kept', () => {
      const st = chain(100, 90);
      st.observeBlockHash(95, H1);
      const mem = new MemoryConnector('mem', { maxItems: 10, maxTotalSize: 1 << 20 });
      const pol = [policy({ finality: 'unfinalized', connector: 'mem' })];
      const bal = ctxOf('eth_getBalance', ['0xabc', '0x5f']);
      const kb = keyOf('main/evm:1', 'eth_getBalance', ['0xabc', '0x5f'], 'b');
      writeEntry(bal, kb, 'unfinalized', { wire: '"0x7"', value: () => '0x7' }, pol, new Map([['mem', mem]]), st, recorder());
      expect((mem.get(kb.partition, kb.range) as CacheEntry).blockHash).to.equal(H1);
      const blk = ctxOf('eth_getBlockByNumber', ['0x5f', false]);
      const kk = keyOf('main/evm:1', 'eth_getBlockByNumber', ['0x5f', false], 'k');
      writeEntry(blk, kk, 'unfinalized', { wire: 'x', value: () => ({ number: '0x5f', hash: H2 }) }, pol, new Map([['mem', mem]]), st, recorder());
      expect(mem.get(kk.partition, kk.range), 'a block on another fork').to.equal(undefined);
    });

    it('a replaced head whose parent is unchanged pins the fork at that height', () => {
      const st = chain(100, 90);
      st.observeBlockHash(99, H1);
      st.observeBlockHash(100, H2, H1);
      st.observeBlockHash(100, `0x${'55'.repeat(32)}`, H1);
      expect(st.lastReorg?.from).to.equal(100);
      expect(st.hashAt(99)).to.equal(H1);
    });
  });

  describe('reorgs seen across polls that skip blocks', () => {
    it('a replaced block seen again without a parent link is a reorg of unknown depth (everything above finalized)', () => {
      let now = 1000;
      const st = chain(120, 90, () => now);
      st.observeBlockHash(100, H1);
      // The next poll lands at 103: block 100 is unverified and the poller fetches it again.
      st.observeBlockHash(103, `0x${'66'.repeat(32)}`, `0x${'77'.repeat(32)}`);
      expect(st.unverifiedBelow(103)).to.equal(undefined, 'the parent 102 is recorded now');
      expect(st.unverifiedBelow(110)).to.equal(103);
      now = 2000;
      st.observeBlockHash(100, H2);
      expect(st.lastReorg).to.deep.equal({ at: 2000, from: 91 });
      expect(acceptable(entry({ finality: 'unfinalized', blockNumber: 100, blockHash: H1, writtenAt: 1000 }), st).ok).to.equal(false);
    });

    it('an earlier, deeper reorg still counts after a later, shallower one', () => {
      let now = 1000;
      const st = chain(200, 90, () => now);
      st.observeBlockHash(150, H1);
      now = 2000;
      st.observeBlockHash(150, H2); // depth unknown: from 91
      now = 3000;
      st.observeBlockHash(180, H1);
      st.observeBlockHash(181, H2, H1);
      st.observeBlockHash(181, `0x${'88'.repeat(32)}`, H1); // exactly at 181
      expect(st.lastReorg?.from).to.equal(181);
      expect(st.reorgedSince(1500, 120), 'written before the deep reorg').to.equal(true);
      expect(st.reorgedSince(2500, 120), 'written after it, below the shallow one').to.equal(false);
    });

    it('unverifiedBelow names nothing at or below the finalized block', () => {
      const st = chain(200, 150);
      st.observeBlockHash(140, H1);
      expect(st.unverifiedBelow(160)).to.equal(undefined);
    });
  });

  describe('reads', () => {
    it('the memory tier answers synchronously; on its hit the remote tiers are not awaited', () => {
      const mem = new MemoryConnector('mem', { maxItems: 10, maxTotalSize: 1 << 20 });
      const ctx = ctxOf('eth_getBlockByNumber', ['0x5', false]);
      const key = keyOf(NET, 'eth_getBlockByNumber', ['0x5', false], 'h');
      mem.set(key.partition, key.range, entry({ wire: '{"number":"0x5"}' }), 0);
      const sink = recorder();
      const readers: Reader[] = [
        { connector: slow('redis', 'never'), policy: policy({ connector: 'redis' }) },
        { connector: mem, policy: policy() },
      ];
      const got = readEntry(ctx, key, readers, undefined, sink);
      expect(got).to.not.be.instanceOf(Promise);
      expect((got as { entry: CacheEntry }).entry.wire).to.equal('{"number":"0x5"}');
      expect(sink.reads).to.deep.equal([['mem', 'hit']]);
    });

    it('tiers are read in parallel: the first acceptable hit wins, however the others end', async () => {
      const ctx = ctxOf('eth_getBlockByNumber', ['0x5', false]);
      const key = keyOf(NET, 'eth_getBlockByNumber', ['0x5', false], 'h');
      const sink = recorder();
      const readers: Reader[] = [
        { connector: slow('a', { after: 40, entry: entry({ wire: '"late"' }) }), policy: policy({ connector: 'a' }) },
        { connector: slow('b', { after: 5, entry: entry({ wire: '"early"' }) }), policy: policy({ connector: 'b' }) },
        { connector: slow('c', 'fail'), policy: policy({ connector: 'c' }) },
      ];
      const hit = await readEntry(ctx, key, readers, undefined, sink);
      expect(hit?.entry.wire).to.equal('"early"');
      expect(sink.reads).to.deep.include(['b', 'hit']);
      expect(sink.reads).to.deep.include(['c', 'error']);
    });

    it('a tier that does not answer within 1 s is a miss counted as an error, not a stuck call', async () => {
      const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
      try {
        const ctx = ctxOf('eth_getBlockByNumber', ['0x5', false]);
        const key = keyOf(NET, 'eth_getBlockByNumber', ['0x5', false], 'h');
        const sink = recorder();
        const p = readEntry(ctx, key, [{ connector: slow('stuck', 'never'), policy: policy({ connector: 'stuck' }) }], undefined, sink) as Promise<unknown>;
        await clock.tickAsync(999);
        expect(sink.reads).to.deep.equal([]);
        await clock.tickAsync(1);
        expect(await p).to.equal(undefined);
        expect(sink.reads).to.deep.equal([['stuck', 'error']]);
      } finally {
        clock.uninstall();
      }
    });

    it('a stale realtime entry is a miss; a reorged one is dropped from the tier', () => {
      const mem = new MemoryConnector('mem', { maxItems: 10, maxTotalSize: 1 << 20 });
      const st = chain(100, 90);
      st.observeBlockHash(95, H2);
      const key = keyOf(NET, 'eth_getBlockByNumber', ['0x5f', false], 'h');
      mem.set(key.partition, key.range, entry({ finality: 'unfinalized', blockNumber: 95, blockHash: H1 }), 0);
      const sink = recorder();
      expect(
        readEntry(ctxOf('eth_getBlockByNumber', ['0x5f', false]), key, [{ connector: mem, policy: policy({ finality: 'unfinalized' }) }], st, sink),
      ).to.equal(undefined);
      expect(mem.get(key.partition, key.range)).to.equal(undefined);
      expect(sink.reads).to.deep.equal([['mem', 'miss']]);
    });
  });

  describe('writes', () => {
    const mem = () => new MemoryConnector('mem', { maxItems: 100, maxTotalSize: 1 << 20 });
    const answer = (value: unknown) => ({ wire: JSON.stringify(value), value: () => value });

    it('a receipt looked up by hash is re-classified from its blockNumber and stored under that block, with a reverse pointer', () => {
      const m = mem();
      const st = chain(100, 90);
      const ctx = ctxOf('eth_getTransactionReceipt', [H1]);
      const key = keyOf(NET, 'eth_getTransactionReceipt', [H1], 'h');
      const sink = recorder();
      writeEntry(
        ctx,
        key,
        'unknown',
        answer({ blockNumber: '0x50', blockHash: H2, status: '0x1' }),
        [policy({ finality: 'unfinalized' }), policy({ finality: 'finalized' })],
        new Map([['mem', m]]),
        st,
        sink,
      );
      expect(sink.writes).to.deep.equal([['mem', true]]);
      const got = m.getReverse(NET, key.range);
      expect(got).to.deep.include({ finality: 'finalized', blockNumber: 80, blockHash: H2 });
      expect(m.get('evm:1:80', key.range)).to.deep.equal(got);
    });

    it('the same receipt above the finalized block is unfinalized and goes only to unfinalized policies', () => {
      const m = mem();
      const key = keyOf(NET, 'eth_getTransactionReceipt', [H1], 'h');
      writeEntry(
        ctxOf('eth_getTransactionReceipt', [H1]),
        key,
        'unknown',
        answer({ blockNumber: '0x5f', blockHash: H2 }),
        [policy({ finality: 'finalized' })],
        new Map([['mem', m]]),
        chain(100, 90),
        recorder(),
      );
      expect(m.getReverse(NET, key.range)).to.equal(undefined);
      writeEntry(
        ctxOf('eth_getTransactionReceipt', [H1]),
        key,
        'unknown',
        answer({ blockNumber: '0x5f', blockHash: H2 }),
        [policy({ finality: 'unfinalized' })],
        new Map([['mem', m]]),
        chain(100, 90),
        recorder(),
      );
      expect(m.getReverse(NET, key.range)).to.deep.include({ finality: 'unfinalized', blockNumber: 95, blockHash: H2 });
    });

    it('a young chain that finalized only block 0: a receipt at block 3 is unfinalized and stored; with no finalized block known it is skipped as finality_unknown', () => {
      const m = mem();
      const key = keyOf(NET, 'eth_getTransactionReceipt', [H1], 'h');
      const young = chain(5, 0);
      expect(young.finalizedKnown).to.equal(true);
      const write = (st: NetworkChainState, sink: ReturnType<typeof recorder>) =>
        writeEntry(
          ctxOf('eth_getTransactionReceipt', [H1]),
          key,
          'unknown',
          answer({ blockNumber: '0x3', blockHash: H2 }),
          [policy({ finality: 'unfinalized' })],
          new Map([['mem', m]]),
          st,
          sink,
        );
      const unknown = recorder();
      const u = { id: 'u' } as Upstream;
      const fresh = new NetworkChainState({ upstreams: [u] } as unknown as Network);
      fresh.observeLatest(u, 5);
      write(fresh, unknown);
      expect(unknown.skips).to.deep.equal(['finality_unknown']);
      expect(m.getReverse(NET, key.range)).to.equal(undefined);
      const known = recorder();
      write(young, known);
      expect(known.skips).to.deep.equal([]);
      expect(m.getReverse(NET, key.range)).to.deep.include({ finality: 'unfinalized', blockNumber: 3 });
    });

    it('every answer stored nowhere is counted once with its reason', () => {
      const m = mem();
      const tiers = new Map([['mem', m]]);
      const addr = '0x0000000000000000000000000000000000000001';
      const reasons = (method: string, params: unknown[], value: unknown, st: NetworkChainState, finality: Finality, policies = [policy({ finality })]) => {
        const sink = recorder();
        writeEntry(ctxOf(method, params), keyOf(NET, method, params, 'h'), finality, answer(value), policies, tiers, st, sink);
        return sink.skips;
      };
      const none = new NetworkChainState({ upstreams: [] } as unknown as Network);
      const forked = chain(100, 90);
      forked.observeBlockHash(0x5f, H1);
      expect(reasons('eth_blockNumber', [], null, none, 'realtime')).to.deep.equal(['head_unknown']);
      expect(
        reasons('eth_getBlockByNumber', ['0x70', false], null, chain(100, 90), 'unfinalized', [policy({ finality: 'unfinalized', empty: 'allow' })]),
      ).to.deep.equal(['beyond_head']);
      expect(reasons('eth_getBlockByNumber', ['0x5f', false], { number: '0x5f', hash: H2 }, forked, 'unfinalized')).to.deep.equal(['non_canonical']);
      expect(reasons('eth_getBalance', [addr, '0x5f'], '0x1', chain(100, 90), 'unfinalized', [policy({ finality: 'finalized' })])).to.deep.equal([
        'no_matching_policy',
      ]);
      expect(reasons('eth_getBalance', [addr, '0x5f'], '0x1', chain(100, 90), 'unfinalized')).to.deep.equal([]);
    });

    it('a block tag is never written as finalized; its realtime entry rests on the head it was read at', () => {
      const m = mem();
      const key = keyOf(NET, 'eth_getBlockByNumber', ['finalized', false], 'h');
      const sink = recorder();
      writeEntry(
        ctxOf('eth_getBlockByNumber', ['finalized', false]),
        key,
        'finalized',
        answer({ number: '0x5a', hash: H1 }),
        [policy({ finality: 'finalized' })],
        new Map([['mem', m]]),
        chain(100, 90),
        sink,
      );
      expect(sink.writes).to.deep.equal([]);
      writeEntry(
        ctxOf('eth_getBlockByNumber', ['finalized', false]),
        key,
        'realtime',
        answer({ number: '0x5a', hash: H1 }),
        [policy({ finality: 'realtime', ttl: 2000 })],
        new Map([['mem', m]]),
        chain(100, 90),
        sink,
      );
      expect(m.get(key.partition, key.range)).to.deep.include({ finality: 'realtime', blockNumber: 100 });
    });

    it('an empty answer: not stored by default, stored where the policy allows it, never for a block beyond the head', () => {
      const m = mem();
      const conns = new Map([['mem', m]]);
      const ok = keyOf(NET, 'eth_getBlockByNumber', ['0x10', false], 'a');
      writeEntry(ctxOf('eth_getBlockByNumber', ['0x10', false]), ok, 'finalized', answer(null), [policy()], conns, chain(100, 90), recorder());
      expect(m.get(ok.partition, ok.range)).to.equal(undefined);
      writeEntry(
        ctxOf('eth_getBlockByNumber', ['0x10', false]),
        ok,
        'finalized',
        answer(null),
        [policy({ empty: 'allow' })],
        conns,
        chain(100, 90),
        recorder(),
      );
      expect(m.get(ok.partition, ok.range)).to.deep.include({ wire: 'null' });
      const future = keyOf(NET, 'eth_getBlockByNumber', ['0x1000', false], 'b');
      writeEntry(
        ctxOf('eth_getBlockByNumber', ['0x1000', false]),
        future,
        'unknown',
        answer(null),
        [policy({ empty: 'allow', finality: 'unknown' })],
        conns,
        chain(100, 90),
        recorder(),
      );
      expect(m.get(future.partition, future.range)).to.equal(undefined);
    });

    it('a log range rests on its end, not on its last log: a range reaching above the finalized block is never finalized', () => {
      const m = mem();
      const params = [{ fromBlock: '0x1', toBlock: '0xc8' }];
      const key = keyOf(NET, 'eth_getLogs', params, 'h');
      const logs = [{ blockNumber: '0x64', blockHash: H1, logIndex: '0x0' }];
      writeEntry(
        ctxOf('eth_getLogs', params),
        key,
        'unknown',
        answer(logs),
        [policy({ finality: 'finalized' }), policy({ connector: 'mem', finality: 'unfinalized', id: 'u' })],
        new Map([['mem', m]]),
        chain(300, 150),
        recorder(),
      );
      expect(m.get(key.partition, key.range)).to.deep.include({ finality: 'unfinalized', blockNumber: 200 });
      expect(m.get(key.partition, key.range)?.blockHash, 'a range rests on no single hash').to.equal(undefined);
    });

    it('realtime answers rest on the head, not on their value: eth_gasPrice is not a block number', () => {
      const m = mem();
      const key = keyOf(NET, 'eth_gasPrice', [], 'h');
      writeEntry(
        ctxOf('eth_gasPrice', []),
        key,
        'realtime',
        answer('0x3b9aca00'),
        [policy({ finality: 'realtime', ttl: 2000 })],
        new Map([['mem', m]]),
        chain(100, 90),
        recorder(),
      );
      expect(m.get(key.partition, key.range)).to.deep.include({ blockNumber: 100 });
      const bn = keyOf(NET, 'eth_blockNumber', [], 'b');
      writeEntry(
        ctxOf('eth_blockNumber', []),
        bn,
        'realtime',
        answer('0x63'),
        [policy({ finality: 'realtime', ttl: 2000 })],
        new Map([['mem', m]]),
        chain(100, 90),
        recorder(),
      );
      expect(m.get(bn.partition, bn.range)).to.deep.include({ blockNumber: 99 });
    });

    it('one write per connector, to the first policy that takes the answer (its ttl)', () => {
      const m = mem();
      const sink = recorder();
      const key = keyOf(NET, 'eth_getBlockByNumber', ['0x10', false], 'a');
      writeEntry(
        ctxOf('eth_getBlockByNumber', ['0x10', false]),
        key,
        'finalized',
        answer({ number: '0x10' }),
        [policy({ id: 'one' }), policy({ id: 'two' })],
        new Map([['mem', m]]),
        chain(100, 90),
        sink,
      );
      expect(sink.writes).to.deep.equal([['mem', true]]);
    });

    it('a failing tier write is counted, never thrown', async () => {
      const bad: Connector = { ...slow('bad', 'fail'), set: () => Promise.reject(new Error('down')) };
      const sink = recorder();
      const key = keyOf(NET, 'eth_getBlockByNumber', ['0x10', false], 'a');
      writeEntry(
        ctxOf('eth_getBlockByNumber', ['0x10', false]),
        key,
        'finalized',
        answer({ number: '0x10' }),
        [policy({ connector: 'bad' })],
        new Map([['bad', bad]]),
        chain(100, 90),
        sink,
      );
      await new Promise((r) => setImmediate(r));
      expect(sink.writes).to.deep.equal([['bad', false]]);
    });
  });

  describe('tiers and config', () => {
    it('the memory tier is an LRU bounded in entries and in bytes, with per-entry TTLs', async () => {
      const byCount = new MemoryConnector('m', { maxItems: 2, maxTotalSize: 1 << 20 });
      byCount.set('p', 'a', entry(), 0);
      byCount.set('p', 'b', entry(), 0);
      byCount.get('p', 'a');
      byCount.set('p', 'c', entry(), 0);
      expect(byCount.get('p', 'b'), 'least recently used evicted').to.equal(undefined);
      expect(byCount.get('p', 'a')).to.not.equal(undefined);
      const bySize = new MemoryConnector('m', { maxItems: 1000, maxTotalSize: 4096 });
      for (let i = 0; i < 20; i++) bySize.set('p', `k${i}`, entry({ wire: `"${'f'.repeat(1000)}"` }), 0);
      expect(bySize.totalSize).to.be.at.most(4096);
      expect(bySize.size).to.be.below(5);
      const ttl = new MemoryConnector('m', { maxItems: 10, maxTotalSize: 1 << 20 });
      ttl.set('p', 'x', entry(), 30);
      expect(ttl.get('p', 'x')).to.not.equal(undefined);
      await new Promise((r) => setTimeout(r, 50));
      expect(ttl.get('p', 'x')).to.equal(undefined);
    });

    it('the memory tier gives back every field of an entry as written: small answers packed in one string, large or byte answers as they are', () => {
      const m = new MemoryConnector('m', { maxItems: 100, maxTotalSize: 1 << 24 });
      const cases: CacheEntry[] = [
        entry({ wire: '{"a":"x,y\\nz"}', finality: 'unfinalized', blockNumber: 7, blockHash: H1, writtenAt: 123 }),
        entry({ wire: '"0x0"', finality: 'realtime', blockNumber: 0, writtenAt: 1 }),
        entry({ wire: '[]', finality: 'unknown', blockHash: H1, writtenAt: 2 }),
        entry({ wire: '"0x1"', finality: 'finalized', writtenAt: 3 }),
        entry({ wire: `"${'ab'.repeat(40_000)}"`, finality: 'finalized', blockNumber: 9, writtenAt: 4 }),
        entry({ wire: Buffer.from('{"big":true}'), finality: 'finalized', writtenAt: 5 }),
      ];
      cases.forEach((e, i) => m.set('p', `r${i}`, e, 0, 'evm:1'));
      cases.forEach((e, i) => {
        expect(m.get('p', `r${i}`), `entry ${i}`).to.deep.equal(e);
        expect(m.getReverse('evm:1', `r${i}`), `entry ${i} by the reverse index`).to.deep.equal(e);
      });
      // A reverse-index pointer is never read as an entry, and an entry never as a pointer.
      expect(m.get('p', 'r0')).to.not.equal(undefined);
      expect(m.getReverse('evm:2', 'r0')).to.equal(undefined);
    });

    it('a tier error never shows the connection URI, its password or its address', () => {
      const r = connectionRedactor('redis://user:s3cret-pw@cache.internal:6380/0');
      const out = r('connect ECONNREFUSED cache.internal:6380 (redis://user:s3cret-pw@cache.internal:6380/0) auth s3cret-pw');
      expect(out).to.not.match(/s3cret|cache\.internal|6380/);
      expect(connectionRedactor('redis://h:1', 'pass-word')('bad pass-word')).to.equal('bad #redacted');
    });

    it('the shared-tier encoding keeps the result bytes untouched', () => {
      const e = entry({ wire: '{"a": [1, 2]}', finality: 'unfinalized', blockNumber: 7, blockHash: H1, writtenAt: 123 });
      expect(decodeEntry(encodeEntry(e))).to.deep.equal(e);
      expect(decodeEntry('not an entry')).to.equal(undefined);
    });

    it('zero config: connector memory-cache (100000 items, 256 MiB), finalized forever, unfinalized 10 s, realtime 2 s, unknown not cached', () => {
      const c = defaultCacheConfig();
      expect(c.connectors).to.deep.equal([{ id: 'memory-cache', driver: 'memory', memory: { maxItems: 100_000, maxTotalSize: 256 * 1024 * 1024 } }]);
      expect(c.policies.map((p) => [p.finality, p.ttl])).to.deep.equal([
        ['finalized', 0],
        ['unfinalized', 10_000],
        ['realtime', 2_000],
      ]);
    });

    it('a policy naming no connector, and a duplicate connector id, fail start-up naming the path', () => {
      const cfg = (db: unknown) => ({ settings: { database: { evmJsonRpcCache: db } } }) as unknown as ResolvedConfig;
      expect(() =>
        cacheConfigOf(
          cfg({
            connectors: [{ id: 'a', driver: 'memory' }],
            policies: [{ connector: 'b', network: '*', method: '*', finality: 'finalized', empty: 'ignore', appliesTo: 'both', ttl: 0 }],
          }),
        ),
      ).to.throw(/policies\[0\]\.connector: no connector with id "b"/);
      expect(() =>
        cacheConfigOf(
          cfg({
            connectors: [
              { id: 'a', driver: 'memory' },
              { id: 'a', driver: 'memory' },
            ],
            policies: [],
          }),
        ),
      ).to.throw(/connectors\[1\]\.id: duplicate connector id "a"/);
      expect(() => cacheConfigOf(cfg({ connectors: [{ driver: 'redis' }], policies: [] }))).to.throw(/needs a `redis: \{uri\}` block/);
      expect(cacheConfigOf(cfg({ connectors: [{ driver: 'memory' }], policies: [] })).connectors[0]?.id).to.equal('memory-cache');
    });
  });

  describe('WriteQueue (write-backs after the answer)', () => {
    const w = (n: number) => ({ params: [n] }) as unknown as PendingWrite;

    it('runs the writes of one loop turn together, after the turn, in order', async () => {
      const seen: unknown[] = [];
      const q = new WriteQueue((x) => seen.push(x.params));
      q.push(w(1));
      q.push(w(2));
      // Nothing is written on the call's path.
      expect(seen).to.deep.equal([]);
      await new Promise((r) => setImmediate(r));
      expect(seen).to.deep.equal([[1], [2]]);
      q.push(w(3));
      await new Promise((r) => setImmediate(r));
      expect(seen).to.deep.equal([[1], [2], [3]]);
    });

    it('a write that throws does not stop the others', async () => {
      const seen: unknown[] = [];
      const q = new WriteQueue((x) => {
        if ((x.params as number[])[0] === 1) throw new Error('tier broke');
        seen.push(x.params);
      });
      q.push(w(1));
      q.push(w(2));
      await new Promise((r) => setImmediate(r));
      expect(seen).to.deep.equal([[2]]);
    });
  });
});
