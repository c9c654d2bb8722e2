/**
 * Unit tests of the filters plugin through the composed pipeline of a started proxy whose two
 * upstreams are scripted stubs over one chain (test/helpers/stub-proxy.ts): svc's own ids,
 * changes that keep coming when the upstream that served them fails, a node's "filter not found"
 * for unknown, foreign and expired ids, -32602 for malformed params, the per-client and
 * per-network bounds, pending-transaction filters sticky to one upstream, and the old behaviour
 * when pinned or turned off.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { ErrEndpointServerSideException, ErrNotImplemented, type SvcError } from '../../../core/wire/errors.ts';
import type { RpcResult } from '../../../core/wire/jsonrpc.ts';
import { CallStage } from '../../../core/pipeline/stages.ts';
import type { Plugin } from '../../../core/host/proxy.ts';
import { markProvenance, provenanceKey } from '../../../plugins/multiplex/api.ts';
import { presetWithout, waitFor } from '../../helpers/svc.ts';
import { startStubProxy, type StubProxy } from '../../helpers/stub-proxy.ts';
import {
  ErrFilterInvalidParams,
  ErrFilterLimitExceeded,
  ErrFilterNotFound,
  FilterLedger,
  type FilterState,
  MemoryFilterStore,
  SharedFilterStore,
  trimKeptLogs,
} from '../../../plugins/filters/index.ts';
import type { SharedValues } from '../../../plugins/shared-state/api.ts';
import { sha1Hex } from '../../../plugins/shared-state/values.ts';
import { SHARED_VALUES_SERVICE } from '../../../plugins/shared-state/api.ts';
import { ErrCancelled } from '../../../core/wire/errors.ts';

const hex = (n: number) => `0x${n.toString(16)}`;
const LOGGER = `0x${'11'.repeat(20)}`;
const hashOf = (n: number) => `0x${'ab'}${n.toString(16).padStart(62, '0')}`;

/** One chain both stubs answer from, and which upstreams are down. */
class Chain {
  head = 10;
  down = new Set<string>();
  /** Pending filters each upstream made (its own ids). */
  pending = new Map<string, Set<string>>();
  /** Node ids without the upstream's name (two nodes giving the same id), and changes naming the node. */
  plainIds = false;
  /** While set, pending-filter calls wait for it (so concurrent calls overlap). */
  hold: Promise<void> | undefined;
  /** While set, reads of a block by number (not `latest`) wait for it. */
  holdBlocks: Promise<void> | undefined;
  block(n: number) {
    return n > this.head || n < 0 ? null : { number: hex(n), hash: hashOf(n), parentHash: n === 0 ? `0x${'00'.repeat(32)}` : hashOf(n - 1) };
  }
  script = (id: string) => async (method: string, params: unknown) => {
    if (this.down.has(id)) throw new ErrEndpointServerSideException(`${id} is down`);
    if (this.hold && method !== 'eth_getBlockByNumber' && method !== 'eth_getLogs') await this.hold;
    const p = params as unknown[];
    switch (method) {
      case 'eth_getBlockByNumber':
        if (this.holdBlocks && p[0] !== 'latest') await this.holdBlocks;
        return this.block(p[0] === 'latest' ? this.head : Number.parseInt(p[0] as string, 16));
      case 'eth_getLogs': {
        // Every block has one log, of contract LOGGER.
        const q = p[0] as { blockHash?: string; fromBlock?: string; toBlock?: string; address?: string[] };
        if (q.address && !q.address.includes(LOGGER)) return [];
        if (q.blockHash) return [{ address: LOGGER, blockHash: q.blockHash, logIndex: '0x0', removed: false, upstream: id }];
        const at = (ref: string | undefined) => (ref === undefined || ref === 'latest' ? this.head : Number.parseInt(ref, 16));
        const blocks = Array.from({ length: Math.max(0, Math.min(at(q.toBlock), this.head) - at(q.fromBlock) + 1) }, (_, i) => at(q.fromBlock) + i);
        return blocks.map((n) => ({ address: LOGGER, blockNumber: hex(n), blockHash: hashOf(n), logIndex: '0x0', removed: false }));
      }
      case 'eth_newPendingTransactionFilter':
      case 'eth_newBlockFilter': {
        const fid = this.plainIds ? `0x${(this.pending.get(id)?.size ?? 0) + 1}` : `0x${id}${(this.pending.get(id)?.size ?? 0) + 1}`;
        this.pending.set(id, (this.pending.get(id) ?? new Set()).add(fid));
        return fid;
      }
      case 'eth_getFilterChanges':
        if (!this.pending.get(id)?.has(p[0] as string)) throw new ErrEndpointServerSideException('filter not found');
        return [this.plainIds ? `0x${id}` : `0x${'cd'.repeat(32)}`];
      case 'eth_uninstallFilter':
        return this.pending.get(id)?.delete(p[0] as string) ?? false;
      default:
        throw new ErrEndpointServerSideException(`unexpected ${method}`);
    }
  };
}

/** A shared-values stand-in (one Redis for every replica), its entries expiring by the faked clock. */
function fakeValues() {
  const kv = new Map<string, { value: string; ttlMs: number; until: number }>();
  const live = (k: string) => {
    const e = kv.get(k);
    if (e && e.until <= Date.now()) kv.delete(k);
    return kv.get(k);
  };
  const put = (k: string, value: string, ttlMs: number) => void kv.set(k, { value, ttlMs, until: Date.now() + ttlMs });
  const values: SharedValues = {
    enabled: true,
    get: async (k) => live(k)?.value,
    set: async (k, value, ttlMs) => put(k, value, ttlMs),
    delete: async (k) => Boolean(live(k)) && kv.delete(k),
    claim: async (k, ttlMs, token = '1') => !live(k) && (put(k, token, ttlMs), true),
    release: async (k, token) => live(k)?.value === token && kv.delete(k),
    replace: async (k, expected, value, ttlMs) => {
      const e = live(k);
      if (!e || sha1Hex(e.value) !== sha1Hex(expected)) return false;
      put(k, value, ttlMs);
      return true;
    },
  };
  return { kv, values };
}

describe('filters plugin: through the pipeline', () => {
  let chain: Chain;
  let stub: StubProxy;
  const call = async (
    method: string,
    params: unknown,
    opts: { userId?: string; client?: string; directives?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<{ result?: unknown; error?: SvcError }> => {
    const { ctx, done } = stub.proxy.internalContext(stub.net, method, params, 5000);
    ctx.internal = false;
    if (opts.signal) ctx.signal = opts.signal;
    ctx.directives = opts.directives ?? {};
    if (opts.userId) ctx.identity = { userId: opts.userId };
    if (opts.client) ctx.http = { ...ctx.http, clientAddress: opts.client };
    try {
      return { result: ((await stub.proxy.runCall(ctx)) as RpcResult).result };
    } catch (e) {
      return { error: e as SvcError };
    } finally {
      done();
    }
  };
  const start = async (filters: Record<string, unknown> = {}, extra: Plugin[] = []) => {
    chain = new Chain();
    stub = await startStubProxy({ a: chain.script('a'), b: chain.script('b') }, [...presetWithout('evm-state'), ...extra], {
      filters,
      selectionPolicy: { evalInterval: '1h' },
    });
  };
  afterEach(async () => {
    await stub?.close();
  });

  it('a block filter has svc’s own 16-byte id and gets each new block hash once; the polls keep working when the upstream that served them fails', async () => {
    await start();
    const { result: id } = await call('eth_newBlockFilter', []);
    expect(id).to.match(/^0x[0-9a-f]{32}$/);
    chain.head = 12;
    expect((await call('eth_getFilterChanges', [id])).result).to.deep.equal([hashOf(11), hashOf(12)]);
    const servedBy = stub.calls.at(-1)?.upstream;
    chain.down.add(servedBy as string);
    chain.head = 14;
    expect((await call('eth_getFilterChanges', [id])).result).to.deep.equal([hashOf(13), hashOf(14)]);
    expect((await call('eth_getFilterChanges', [id])).result).to.deep.equal([]);
  });

  it('concurrent polls of one filter never deliver a block twice (one poll at a time per filter)', async () => {
    await start();
    const { result: id } = await call('eth_newBlockFilter', []);
    chain.head = 15;
    const both = await Promise.all([call('eth_getFilterChanges', [id]), call('eth_getFilterChanges', [id])]);
    const delivered = both.flatMap((r) => r.result as string[]);
    expect(delivered).to.deep.equal([11, 12, 13, 14, 15].map(hashOf));
  });

  it('a client that leaves mid-poll gets those changes at its next poll (the cursor moves only when changes are delivered)', async () => {
    await start();
    const { result: id } = await call('eth_newBlockFilter', []);
    chain.head = 12;
    let open!: () => void;
    chain.holdBlocks = new Promise<void>((r) => (open = r));
    const client = new AbortController();
    const left = call('eth_getFilterChanges', [id], { signal: client.signal });
    await waitFor(() => stub.calls.some((c) => c.method === 'eth_getBlockByNumber' && (c.params as unknown[])[0] === '0xb'));
    client.abort();
    open();
    chain.holdBlocks = undefined;
    expect((await left).error).to.be.instanceOf(ErrCancelled);
    expect((await call('eth_getFilterChanges', [id])).result).to.deep.equal([hashOf(11), hashOf(12)]);
  });

  it('a log filter reads each new block’s logs with its address; eth_getFilterLogs asks eth_getLogs with the filter’s own range', async () => {
    await start();
    const { result: id } = await call('eth_newFilter', [{ address: LOGGER, fromBlock: '0x1' }]);
    const { result: other } = await call('eth_newFilter', [{ address: `0x${'22'.repeat(20)}`, fromBlock: '0x1' }]);
    chain.head = 11;
    const changes = (await call('eth_getFilterChanges', [id])).result as Array<{ blockHash: string }>;
    expect(changes.map((l) => l.blockHash)).to.deep.equal([hashOf(11)]);
    expect((await call('eth_getFilterChanges', [other])).result, 'another contract’s filter').to.deep.equal([]);
    const all = (await call('eth_getFilterLogs', [id])).result as Array<{ blockNumber: string }>;
    expect(all.map((l) => l.blockNumber)).to.deep.equal(Array.from({ length: 11 }, (_, i) => hex(i + 1)));
    expect((await call('eth_getFilterLogs', [other])).result).to.deep.equal([]);
  });

  it('eth_getFilterLogs over the network’s getLogs range limit is refused like that eth_getLogs (-32012), reading nothing', async () => {
    chain = new Chain();
    stub = await startStubProxy({ a: chain.script('a'), b: chain.script('b') }, presetWithout('evm-state'), {
      evm: { chainId: 31337, getLogsMaxAllowedRange: 5 },
      selectionPolicy: { evalInterval: '1h' },
    });
    const { result: id } = await call('eth_newFilter', [{ address: LOGGER, fromBlock: '0x1', toBlock: '0x9' }]);
    const before = stub.calls.filter((c) => c.method === 'eth_getLogs').length;
    const r = await call('eth_getFilterLogs', [id]);
    expect(r.error?.code).to.equal(-32012);
    expect(stub.calls.filter((c) => c.method === 'eth_getLogs').length).to.equal(before);
    const { result: narrow } = await call('eth_newFilter', [{ address: LOGGER, fromBlock: '0x5', toBlock: '0x9' }]);
    expect(((await call('eth_getFilterLogs', [narrow])).result as unknown[]).length).to.equal(5);
  });

  it('an unknown id, an id of another client and an uninstalled id get the node’s "filter not found" (-32000); uninstall answers false for them', async () => {
    await start();
    const { result: id } = await call('eth_newBlockFilter', [], { userId: 'alice' });
    for (const [params, who] of [
      [['0x' + '0'.repeat(32)], 'alice'],
      [['0x1234'], 'alice'],
      [[id], 'bob'],
    ] as const) {
      const r = await call('eth_getFilterChanges', params, { userId: who });
      expect(r.error).to.be.instanceOf(ErrFilterNotFound);
      expect(r.error).to.include({ code: -32000, message: 'filter not found' });
      expect((await call('eth_uninstallFilter', params, { userId: who })).result).to.equal(false);
    }
    expect((await call('eth_getFilterChanges', [id], { userId: 'alice' })).result).to.deep.equal([]);
    expect((await call('eth_uninstallFilter', [id], { userId: 'alice' })).result).to.equal(true);
    expect((await call('eth_getFilterChanges', [id], { userId: 'alice' })).error).to.be.instanceOf(ErrFilterNotFound);
  });

  it('malformed params get -32602 and create nothing', async () => {
    await start({ maxPerClient: 1 });
    for (const [method, params] of [
      ['eth_newFilter', [{ address: 'nope' }]],
      ['eth_newFilter', [{ topics: [1] }]],
      ['eth_newFilter', [{ address: Array.from({ length: 101 }, () => '0x' + '11'.repeat(20)) }]],
      ['eth_newFilter', [{ fromBlock: '0x5', toBlock: '0x1' }]],
      ['eth_newFilter', [{ blockHash: hashOf(1) }]],
      ['eth_newFilter', {}],
      ['eth_newBlockFilter', [1]],
      ['eth_getFilterChanges', [1]],
      ['eth_getFilterChanges', ['0x' + 'f'.repeat(200)]],
      ['eth_getFilterLogs', []],
      ['eth_uninstallFilter', [null]],
    ] as const) {
      const r = await call(method, params);
      expect(r.error, `${method} ${JSON.stringify(params)}`).to.be.instanceOf(ErrFilterInvalidParams);
      expect(r.error?.code).to.equal(-32602);
    }
    // Nothing was counted against the client: its one filter is still allowed.
    expect((await call('eth_newBlockFilter', [])).result).to.match(/^0x[0-9a-f]{32}$/);
  });

  it('bounds: maxPerClient per client (others unaffected, an uninstall frees a slot), maxTotal per network', async () => {
    await start({ maxPerClient: 2, maxTotal: 3 });
    const a1 = (await call('eth_newBlockFilter', [], { client: '10.0.0.1' })).result;
    await call('eth_newBlockFilter', [], { client: '10.0.0.1' });
    const over = await call('eth_newBlockFilter', [], { client: '10.0.0.1' });
    expect(over.error).to.be.instanceOf(ErrFilterLimitExceeded);
    expect(over.error?.code).to.equal(-32005);
    expect(over.error?.message).to.contain('maxPerClient');
    expect((await call('eth_newBlockFilter', [], { client: '10.0.0.2' })).result).to.be.a('string');
    expect((await call('eth_newBlockFilter', [], { client: '10.0.0.3' })).error).to.be.instanceOf(ErrFilterLimitExceeded);
    await call('eth_uninstallFilter', [a1], { client: '10.0.0.1' });
    expect((await call('eth_newBlockFilter', [], { client: '10.0.0.1' })).result).to.be.a('string');
  });

  it('a filter not polled for idleTimeout is gone ("filter not found")', async () => {
    await start({ idleTimeout: '50ms' });
    const clock = FakeTimers.install({ toFake: ['Date'] });
    try {
      const { result: id } = await call('eth_newBlockFilter', []);
      const { result: polled } = await call('eth_newBlockFilter', []);
      clock.tick(40);
      expect((await call('eth_getFilterChanges', [polled])).result, 'a poll starts the timeout over').to.deep.equal([]);
      clock.tick(40);
      expect((await call('eth_getFilterChanges', [id])).error).to.be.instanceOf(ErrFilterNotFound);
      expect((await call('eth_getFilterChanges', [polled])).result).to.deep.equal([]);
    } finally {
      clock.uninstall();
    }
  });

  it('a pending-transaction filter lives on one upstream: its polls go there with its id; when that upstream fails, "filter not found"', async () => {
    await start();
    const { result: id } = await call('eth_newPendingTransactionFilter', []);
    expect(id).to.match(/^0x[0-9a-f]{32}$/);
    const made = stub.calls.find((c) => c.method === 'eth_newPendingTransactionFilter');
    for (let i = 0; i < 3; i++) expect((await call('eth_getFilterChanges', [id])).result).to.deep.equal([`0x${'cd'.repeat(32)}`]);
    const polls = stub.calls.filter((c) => c.method === 'eth_getFilterChanges');
    expect(polls.map((c) => [c.upstream, c.params])).to.deep.equal(Array(3).fill([made?.upstream, [`0x${made?.upstream}1`]]));
    chain.down.add(made?.upstream as string);
    expect((await call('eth_getFilterChanges', [id])).error).to.be.instanceOf(ErrFilterNotFound);
    // A new one is made on the upstream still up.
    const again = await call('eth_newPendingTransactionFilter', []);
    expect(again.result).to.match(/^0x[0-9a-f]{32}$/);
    expect(stub.calls.filter((c) => c.method === 'eth_newPendingTransactionFilter').at(-1)?.upstream).to.not.equal(made?.upstream);
  });

  it('two clients making pending filters at once each get their own (creations are never multiplexed into one)', async () => {
    await start();
    let open!: () => void;
    chain.hold = new Promise<void>((r) => (open = r));
    const both = Promise.all([
      call('eth_newPendingTransactionFilter', [], { client: '10.0.0.1' }),
      call('eth_newPendingTransactionFilter', [], { client: '10.0.0.2' }),
    ]);
    await waitFor(() => stub.calls.filter((c) => c.method === 'eth_newPendingTransactionFilter').length === 2);
    open();
    const [one, two] = await both;
    expect(one.result, String(one.error)).to.match(/^0x[0-9a-f]{32}$/);
    expect(two.result, String(two.error)).to.match(/^0x[0-9a-f]{32}$/);
    expect(one.result).to.not.equal(two.result);
  });

  it('pending filters on two upstreams with the same node id: concurrent polls each reach their own upstream', async () => {
    await start();
    chain.plainIds = true;
    const alice = (await call('eth_newPendingTransactionFilter', [], { userId: 'alice' })).result;
    const first = stub.calls.filter((c) => c.method === 'eth_newPendingTransactionFilter').at(-1)?.upstream as string;
    chain.down.add(first);
    const bob = (await call('eth_newPendingTransactionFilter', [], { userId: 'bob' })).result;
    chain.down.delete(first);
    const second = stub.calls.filter((c) => c.method === 'eth_newPendingTransactionFilter').at(-1)?.upstream as string;
    expect(second).to.not.equal(first);
    let open!: () => void;
    chain.hold = new Promise<void>((r) => (open = r));
    const polls = Promise.all([call('eth_getFilterChanges', [alice], { userId: 'alice' }), call('eth_getFilterChanges', [bob], { userId: 'bob' })]);
    await waitFor(() => stub.calls.filter((c) => c.method === 'eth_getFilterChanges').length === 2);
    open();
    const [a, b] = await polls;
    expect(a.result).to.deep.equal([`0x${first}`]);
    expect(b.result).to.deep.equal([`0x${second}`]);
  });

  it('eth_getFilterLogs reads eth_getLogs under the client’s own provenance (its marks kept, so it is shared and cached only with calls of its rules)', async () => {
    const seen: string[] = [];
    const mark: Plugin = {
      name: 'test:mark',
      apply(proxy) {
        proxy.hooks.call.tap({ name: 'test:mark', stage: CallStage.STATIC_RESPONSES + 1 }, (inner) => (ctx) => {
          if (!ctx.internal) markProvenance(ctx, 'test-client', ctx.http.clientAddress);
          return inner(ctx);
        });
        proxy.hooks.call.tap({ name: 'test:seen', stage: CallStage.CACHE + 1 }, (inner) => (ctx) => {
          if (ctx.request.method === 'eth_getLogs' && !ctx.internal) seen.push(provenanceKey(ctx));
          return inner(ctx);
        });
      },
    };
    await start({}, [mark]);
    const id = (await call('eth_newFilter', [{ fromBlock: '0x1' }], { client: '10.0.0.7' })).result;
    expect((await call('eth_getFilterLogs', [id], { client: '10.0.0.7' })).result).to.be.an('array');
    expect(seen).to.deep.equal(['\0test-client=10.0.0.7']);
  });

  it('in a shared store: a filter uninstalled by another replica reads "filter not found" and leaves this replica’s bounds; a store failure after the lock is ErrFilterStoreUnavailable, not "not found"', async () => {
    const { kv, values } = fakeValues();
    const flaky: SharedValues = { ...values };
    const fleet: Plugin = { name: 'test:fleet-values', provides: [SHARED_VALUES_SERVICE], apply: (h) => h.services.provide(SHARED_VALUES_SERVICE, flaky) };
    chain = new Chain();
    stub = await startStubProxy({ a: chain.script('a'), b: chain.script('b') }, [...presetWithout('evm-state', 'shared-state'), fleet], {
      filters: { maxPerClient: 1 },
      selectionPolicy: { evalInterval: '1h' },
    });
    const { result: id } = await call('eth_newBlockFilter', []);
    expect(kv.has(`filter:${id}`)).to.equal(true);
    expect((await call('eth_newBlockFilter', [])).error).to.be.instanceOf(ErrFilterLimitExceeded);
    kv.delete(`filter:${id}`);
    expect((await call('eth_getFilterChanges', [id])).error).to.be.instanceOf(ErrFilterNotFound);
    const { result: next } = await call('eth_newBlockFilter', []);
    expect(next, 'the uninstalled filter no longer counts').to.match(/^0x[0-9a-f]{32}$/);
    // The first read (before the lock) answers; the read once locked fails.
    let reads = 0;
    flaky.get = (k) => (k === `filter:${next}` && ++reads === 2 ? Promise.reject(new Error('Redis down')) : values.get(k));
    const failed = await call('eth_getFilterChanges', [next]);
    expect(failed.error?.constructor.name).to.equal('ErrFilterStoreUnavailable');
    expect(failed.error?.code).to.equal(-32603);
    expect((await call('eth_getFilterChanges', [next])).result).to.deep.equal([]);
  });

  it('pinned with use-upstream, filter methods go to that node as before (its own id)', async () => {
    await start();
    const r = await call('eth_newBlockFilter', [], { directives: { useUpstream: 'b' } });
    expect(r.result).to.equal('0xb1');
    expect((await call('eth_getFilterChanges', ['0xb1'], { directives: { useUpstream: 'b' } })).result).to.deep.equal([`0x${'cd'.repeat(32)}`]);
  });

  it('filters.enabled false: a filter method with two candidate upstreams fails with ErrNotImplemented, as before', async () => {
    await start({ enabled: false });
    expect((await call('eth_newBlockFilter', [])).error).to.be.instanceOf(ErrNotImplemented);
  });
});

describe('filters: stores and ledger (clock driven by fake timers)', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ toFake: ['Date'] });
  });
  afterEach(() => clock.uninstall());

  it('a memory filter expires after its idle timeout; storing it again (a poll) starts the timeout over', async () => {
    const store = new MemoryFilterStore();
    const state = { v: 1, kind: 'blocks', seq: 0, owner: 'addr:x', net: 'main/evm:1', window: [{ n: 1, h: '0x1' }] } as const;
    await store.create('f', { ...state, window: [...state.window] }, 1000);
    clock.tick(900);
    const read = await store.get('f');
    expect(read).to.deep.include({ kind: 'blocks' });
    expect(await store.update('f', read as FilterState, read as FilterState, 1000)).to.equal(true);
    clock.tick(900);
    expect(await store.get('f')).to.not.equal(undefined);
    clock.tick(101);
    expect(await store.get('f')).to.equal(undefined);
    store.sweep();
    expect(store.size).to.equal(0);
  });

  it('the ledger counts live filters per network and owner, and forgets expired ones', () => {
    const ledger = new FilterLedger();
    ledger.touch('1', 'alice', 'n', 'logs', 1000);
    ledger.touch('2', 'alice', 'n', 'blocks', 2000);
    ledger.touch('3', 'bob', 'n', 'logs', 2000);
    ledger.touch('4', 'alice', 'other', 'logs', 2000);
    expect(ledger.count('n', 'alice')).to.deep.equal({ total: 3, owned: 2 });
    clock.tick(1000);
    expect(ledger.count('n', 'alice')).to.deep.equal({ total: 2, owned: 1 });
    expect(Object.fromEntries(ledger.byNetwork())).to.deep.equal({ n: { logs: 1, blocks: 1, pending: 0 }, other: { logs: 1, blocks: 0, pending: 0 } });
    ledger.forget('2');
    expect(ledger.count('n', 'alice')).to.deep.equal({ total: 1, owned: 0 });
  });

  it('the ledger sums the kept-log bytes of this replica’s filters (the replica budget), a filter’s own left out when it is stored again', () => {
    const ledger = new FilterLedger();
    ledger.touch('1', 'alice', 'n', 'logs', 1000, 300);
    ledger.touch('2', 'bob', 'n', 'logs', 1000, 500);
    expect(ledger.keptBytes()).to.equal(800);
    expect(ledger.keptBytes('2')).to.equal(300);
    ledger.touch('2', 'bob', 'n', 'logs', 1000);
    expect(ledger.keptBytes(), 'a refresh without a size keeps the last').to.equal(800);
    ledger.touch('2', 'bob', 'n', 'logs', 1000, 100);
    expect(ledger.keptBytes()).to.equal(400);
    ledger.forget('1');
    expect(ledger.keptBytes()).to.equal(100);
    // Trimmed to what the budget leaves: the oldest blocks' logs go first.
    const window = [1, 2, 3].map((n) => ({ n, h: hashOf(n), logs: [{ blockHash: hashOf(n) }], b: 100 }));
    expect(trimKeptLogs(window, 250)).to.equal(200);
    expect(window.map((w) => w.logs !== undefined)).to.deep.equal([false, true, true]);
  });

  const logState = (): FilterState => ({ v: 1, kind: 'logs', seq: 0, owner: 'addr:x', net: 'main/evm:1', window: [{ n: 1, h: hashOf(1) }] });

  it('fleet lock: one poll at a time; released only by its holder (a lock taken after it expired stays); CAS: a stale poll’s write is refused', async () => {
    const { values } = fakeValues();
    const a = new SharedFilterStore(values);
    const b = new SharedFilterStore(values);
    await a.create('0xab', logState(), 300_000);
    const releaseA = await a.lock('0xab', 20_000);
    expect(releaseA).to.be.a('function');
    expect(await b.lock('0xab', 20_000), 'contention').to.equal(undefined);
    clock.tick(20_000);
    // A's poll overran its lock: B takes it, and A's release does not free B's lock.
    const releaseB = await b.lock('0xab', 20_000);
    expect(releaseB, 'after expiry').to.be.a('function');
    await releaseA?.();
    expect(await a.lock('0xab', 20_000), 'A released only its own token').to.equal(undefined);
    // Both read seq 0; B stores first, A's write (the same cursor moved again) is refused.
    const readA = (await a.get('0xab')) as FilterState;
    const readB = (await b.get('0xab')) as FilterState;
    expect(await b.update('0xab', readB, { ...readB, window: [{ n: 2, h: hashOf(2) }] }, 300_000)).to.equal(true);
    expect(await a.update('0xab', readA, { ...readA, window: [{ n: 3, h: hashOf(3) }] }, 300_000)).to.equal(false);
    expect(await a.get('0xab')).to.deep.include({ seq: 1, window: [{ n: 2, h: hashOf(2) }] });
    await releaseB?.();
    expect(await a.lock('0xab', 20_000)).to.be.a('function');
  });

  it('a filter uninstalled on another replica while a poll runs is not resurrected by that poll', async () => {
    const { values } = fakeValues();
    const a = new SharedFilterStore(values);
    const b = new SharedFilterStore(values);
    await a.create('0xab', logState(), 300_000);
    const polling = (await a.get('0xab')) as FilterState;
    expect(await b.delete('0xab')).to.equal(true);
    expect(await a.update('0xab', polling, { ...polling, window: [{ n: 2, h: hashOf(2) }] }, 300_000)).to.equal(false);
    expect(await a.get('0xab')).to.equal(undefined);
    const memory = new MemoryFilterStore();
    await memory.create('0xab', logState(), 300_000);
    const read = (await memory.get('0xab')) as FilterState;
    await memory.delete('0xab');
    expect(await memory.update('0xab', read, read, 300_000)).to.equal(false);
    expect(await memory.get('0xab')).to.equal(undefined);
  });

  it('a shared store keeps filters as JSON under filter:<id> with the idle timeout as TTL; an entry that is not a filter svc could have written (corrupt criteria, hashes, window, logs, ids, size) reads as no filter', async () => {
    const { kv, values } = fakeValues();
    const store = new SharedFilterStore(values);
    const state = logState();
    await store.create('0xab', state, 300_000);
    expect(kv.get('filter:0xab')).to.deep.include({ value: JSON.stringify(state), ttlMs: 300_000 });
    expect(await store.get('0xab')).to.deep.equal(state);
    const log = (blockHash: string) => ({ address: `0x${'11'.repeat(20)}`, blockHash, logIndex: '0x0' });
    const corrupt: unknown[] = [
      { ...state, window: [] },
      { ...state, kind: 'pending' },
      { ...state, seq: -1 },
      { ...state, owner: 'x'.repeat(257) },
      { ...state, criteria: { address: ['0xnot-an-address'] } },
      { ...state, criteria: { address: [`0x${'AA'.repeat(20)}`] } },
      {
        ...state,
        criteria: {
          topics: Array(5)
            .fill(null)
            .concat([[`0x${'11'.repeat(32)}`]]),
        },
      },
      { ...state, criteria: { fromBlock: '0x5', toBlock: '0x1' } },
      { ...state, window: [{ n: 1, h: '0x1' }] },
      { ...state, window: Array.from({ length: 65 }, (_, i) => ({ n: i, h: hashOf(i) })) },
      {
        ...state,
        window: [
          { n: 2, h: hashOf(2) },
          { n: 1, h: hashOf(1) },
        ],
      },
      { ...state, window: [{ n: 1, h: hashOf(1), logs: [log(hashOf(2))] }] },
      { ...state, window: [{ n: 1, h: hashOf(1), logs: ['text'] }] },
      { ...state, window: [{ n: 1, h: hashOf(1), logs: [log(hashOf(1))], b: -5 }] },
      { v: 1, kind: 'pending', seq: 0, owner: 'addr:x', net: 'main/evm:1', upstream: { id: 'a', filter: `0x${'f'.repeat(200)}` } },
      { v: 1, kind: 'blocks', seq: 0, owner: 'addr:x', net: 'main/evm:1', criteria: {}, window: state.window },
    ];
    for (const bad of ['not json', '{"v":2}', ...corrupt.map((c) => JSON.stringify(c))]) {
      kv.set('filter:0xbad', { value: bad, ttlMs: 60_000, until: Date.now() + 60_000 });
      expect(await store.get('0xbad'), bad).to.equal(undefined);
    }
    // Valid entries of every kind read back.
    const good: FilterState[] = [
      { ...state, criteria: { address: [`0x${'aa'.repeat(20)}`], topics: [null, [`0x${'11'.repeat(32)}`]], fromBlock: '0x1' } },
      {
        ...state,
        window: [
          { n: 1, h: hashOf(1), logs: [log(hashOf(1))], b: 10 },
          { n: 2, h: hashOf(2) },
        ],
      },
      { v: 1, kind: 'pending', seq: 3, owner: 'addr:x', net: 'main/evm:1', upstream: { id: 'a', filter: '0x1' } },
    ];
    for (const ok of good) {
      kv.set('filter:0xok', { value: JSON.stringify(ok), ttlMs: 60_000, until: Date.now() + 60_000 });
      expect(await store.get('0xok'), JSON.stringify(ok)).to.deep.equal(ok);
    }
    // An entry over the size bound is never read whole: no filter.
    const big: SharedValues = { ...values, get: () => Promise.reject(new RangeError('over 1 MiB')) };
    expect(await new SharedFilterStore(big).get('0xab')).to.equal(undefined);
    expect(await store.delete('0xab')).to.equal(true);
    expect(await store.get('0xab')).to.equal(undefined);
  });
});
