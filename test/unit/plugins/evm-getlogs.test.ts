/**
 * Unit tests of the evm-getlogs plugin (spec §2.8 #8): filter inspection and
 * limit checks (pure), the split executor against a fake inner handler (order, bounded
 * concurrency, recursion, failure), then the plugin in a real svc in front of a fake upstream
 * that refuses ranges wider than a few blocks.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { newExecutionRecord, type CallContext } from '../../../core/pipeline/context.ts';
import {
  ErrCancelled,
  ErrEndpointRequestTooLarge,
  ErrEndpointServerSideException,
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedRange,
  ErrGetLogsExceededMaxAllowedTopics,
  ErrUpstreamMalformedResponse,
  ErrUpstreamsExhausted,
  type SvcError,
} from '../../../core/wire/errors.ts';
import { chainStateOf } from '../../../plugins/evm-state/chain.ts';
import type { CallHandler } from '../../../core/pipeline/hooks.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import type { Network } from '../../../core/registry/project.ts';
import {
  checkGetLogsLimits,
  countAddresses,
  countTopics,
  DEFAULT_MAX_ALLOWED_RANGE,
  DEFAULT_SPLIT_CONCURRENCY,
  evmGetLogsPlugin,
  getLogsSettingsOf,
  isRequestTooLarge,
  jobFilter,
  resolveFilterRange,
  splitGetLogs,
  splitJob,
  type GetLogsSettings,
  type LogsJob,
  type SplitDimension,
} from '../../../plugins/evm-getlogs/index.ts';
import { evmInterpolationPlugin } from '../../../plugins/evm-interpolation/index.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startSvc, type SvcHandle } from '../../helpers/svc.ts';

const A1 = '0x1111111111111111111111111111111111111111';
const A2 = '0x2222222222222222222222222222222222222222';
const A3 = '0x3333333333333333333333333333333333333333';
const T = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;
const hex = (n: number) => `0x${n.toString(16)}`;
const SETTINGS: GetLogsSettings = {
  maxAllowedRange: 100,
  maxAllowedAddresses: 2,
  maxAllowedTopics: 3,
  splitOnError: true,
  splitConcurrency: 10,
  traceSplitOnError: true,
  traceSplitConcurrency: 10,
  logsSplit: { splitOnError: true, concurrency: 10 },
  traceSplit: { splitOnError: true, concurrency: 10 },
};
const NO_HEADS = { latest: 0, finalized: 0 };

describe('evm-getlogs: filter inspection and limits (pure)', () => {
  it('counts addresses: array length, a single string is 1, absent is 0', () => {
    expect(countAddresses({ address: [A1, A2, A3] })).to.equal(3);
    expect(countAddresses({ address: A1 })).to.equal(1);
    expect(countAddresses({})).to.equal(0);
    expect(countAddresses({ address: null })).to.equal(0);
  });

  it('counts topic values over every position: OR-lists count each entry, null wildcards count 0', () => {
    expect(countTopics({})).to.equal(0);
    expect(countTopics({ topics: [] })).to.equal(0);
    expect(countTopics({ topics: [T(1)] })).to.equal(1);
    expect(countTopics({ topics: [[T(1), T(2)], null, T(3)] })).to.equal(3);
    expect(countTopics({ topics: [null, [T(1), null, T(2)], [T(3), T(4)]] })).to.equal(4);
  });

  it('resolves ranges: hex numbers, latest/finalized from the known heads, earliest as 0 (not splittable)', () => {
    const heads = { latest: 500, finalized: 436 };
    expect(resolveFilterRange('eth_getLogs', { fromBlock: '0x10', toBlock: '0x20' }, heads)).to.deep.equal({ from: 16, to: 32, splittable: true });
    expect(resolveFilterRange('eth_getLogs', { fromBlock: 'finalized', toBlock: 'latest' }, heads)).to.deep.equal({ from: 436, to: 500, splittable: true });
    expect(resolveFilterRange('eth_getLogs', { fromBlock: 'earliest', toBlock: '0x20' }, heads)).to.deep.equal({ from: 0, to: 32, splittable: false });
    expect(resolveFilterRange('eth_getLogs', { fromBlock: '0x1', toBlock: 'safe' }, heads)).to.deep.equal({ from: 1, splittable: false });
    expect(resolveFilterRange('eth_getLogs', { fromBlock: '0x1', toBlock: 'pending' }, heads)).to.deep.equal({ from: 1, splittable: false });
  });

  it('eth_getLogs defaults missing ends to latest; trace_filter leaves them unresolved', () => {
    expect(resolveFilterRange('eth_getLogs', {}, { latest: 9, finalized: 0 })).to.deep.equal({ from: 9, to: 9, splittable: true });
    expect(resolveFilterRange('trace_filter', { toBlock: '0x5' }, { latest: 9, finalized: 0 })).to.deep.equal({ to: 5, splittable: false });
  });

  it('a tag whose head is unknown (0) stays unresolved', () => {
    expect(resolveFilterRange('eth_getLogs', { fromBlock: '0x0', toBlock: 'latest' }, NO_HEADS)).to.deep.equal({ from: 0, splittable: false });
    expect(resolveFilterRange('eth_getLogs', { fromBlock: 'finalized', toBlock: '0x5' }, { latest: 9, finalized: 0 })).to.deep.equal({
      to: 5,
      splittable: false,
    });
  });

  it('range: to - from + 1 over the limit is ErrGetLogsExceededMaxAllowedRange (-32012, HTTP 200); at the limit passes', () => {
    const over = checkGetLogsLimits('eth_getLogs', {}, { from: 0, to: 100, splittable: true }, SETTINGS, true);
    expect(over).to.be.instanceOf(ErrGetLogsExceededMaxAllowedRange);
    expect(over!.code).to.equal(-32012);
    expect(over!.httpStatus).to.equal(200);
    expect(over!.message).to.match(/^getLogs request exceeded max allowed range: 101 blocks/);
    expect(over!.details).to.include({ requestRange: 101, maxAllowedRange: 100 });
    expect(checkGetLogsLimits('eth_getLogs', {}, { from: 0, to: 99, splittable: true }, SETTINGS, true)).to.equal(undefined);
    // The trace methods are bounded by the same range (spec §2.8 #8); address and topic limits are eth_getLogs's alone.
    expect(checkGetLogsLimits('trace_filter', {}, { from: 1, to: 101, splittable: true }, SETTINGS, true)).to.be.instanceOf(ErrGetLogsExceededMaxAllowedRange);
    expect(checkGetLogsLimits('arbtrace_filter', {}, { from: 1, to: 101, splittable: true }, SETTINGS, true)).to.be.instanceOf(
      ErrGetLogsExceededMaxAllowedRange,
    );
    expect(checkGetLogsLimits('trace_filter', { fromAddress: [A1, A2, A3] }, { from: 1, to: 2, splittable: true }, SETTINGS, true)).to.equal(undefined);
  });

  it('range: skipped when not enforced, when an end is unresolved, when inverted, or when the limit is 0', () => {
    expect(checkGetLogsLimits('eth_getLogs', {}, { from: 0, to: 1000, splittable: true }, SETTINGS, false)).to.equal(undefined);
    expect(checkGetLogsLimits('eth_getLogs', {}, { from: 0, splittable: false }, SETTINGS, true)).to.equal(undefined);
    expect(checkGetLogsLimits('eth_getLogs', {}, { from: 1000, to: 0, splittable: true }, SETTINGS, true)).to.equal(undefined);
    expect(checkGetLogsLimits('eth_getLogs', {}, { from: 0, to: 10 ** 9, splittable: true }, { ...SETTINGS, maxAllowedRange: 0 }, true)).to.equal(undefined);
  });

  it('addresses and topics over their limits are rejected whatever enforceRange says; 0 = unlimited', () => {
    const r = { from: 0, to: 1, splittable: true };
    expect(checkGetLogsLimits('eth_getLogs', { address: [A1, A2, A3] }, r, SETTINGS, false)).to.be.instanceOf(ErrGetLogsExceededMaxAllowedAddresses);
    expect(checkGetLogsLimits('eth_getLogs', { address: [A1, A2] }, r, SETTINGS, true)).to.equal(undefined);
    expect(
      checkGetLogsLimits(
        'eth_getLogs',
        {
          topics: [
            [T(1), T(2)],
            [T(3), T(4)],
          ],
        },
        r,
        SETTINGS,
        false,
      ),
    ).to.be.instanceOf(ErrGetLogsExceededMaxAllowedTopics);
    expect(checkGetLogsLimits('eth_getLogs', { topics: [[T(1), T(2)], null, T(3)] }, r, SETTINGS, true)).to.equal(undefined);
    expect(
      checkGetLogsLimits(
        'eth_getLogs',
        { address: [A1, A2, A3], topics: [T(1), T(2), T(3), T(4)] },
        r,
        { ...SETTINGS, maxAllowedAddresses: 0, maxAllowedTopics: 0 },
        true,
      ),
    ).to.equal(undefined);
    for (const E of [ErrGetLogsExceededMaxAllowedAddresses, ErrGetLogsExceededMaxAllowedTopics]) expect(new E('x').code).to.equal(-32012);
  });

  it('recognises a too-large refusal directly, inside ErrUpstreamsExhausted and in a cause chain; never svc’s own limit errors', () => {
    const tl = new ErrEndpointRequestTooLarge('query returned more than 10000 results');
    expect(isRequestTooLarge(tl)).to.equal(true);
    expect(isRequestTooLarge(new ErrUpstreamsExhausted([new ErrEndpointServerSideException('x'), tl]))).to.equal(true);
    expect(isRequestTooLarge(new ErrUpstreamsExhausted([new ErrUpstreamsExhausted([tl])]))).to.equal(true);
    expect(isRequestTooLarge(new ErrCancelled('wrapped', { cause: tl }))).to.equal(true);
    expect(isRequestTooLarge(new ErrUpstreamsExhausted([new ErrEndpointServerSideException('x')]))).to.equal(false);
    expect(isRequestTooLarge(new ErrGetLogsExceededMaxAllowedRange('x'))).to.equal(false);
    expect(isRequestTooLarge(new Error('x'))).to.equal(false);
    expect(isRequestTooLarge(undefined)).to.equal(false);
  });

  it('splits the block range in halves, then (one block) the address list, then the topics[0] OR-list', () => {
    expect(splitJob('eth_getLogs', { from: 10, to: 19, filter: {} })!.parts.map((p) => [p.from, p.to])).to.deep.equal([
      [10, 14],
      [15, 19],
    ]);
    expect(splitJob('eth_getLogs', { from: 10, to: 20, filter: {} })!.parts.map((p) => [p.from, p.to])).to.deep.equal([
      [10, 14],
      [15, 20],
    ]);
    expect(splitJob('eth_getLogs', { from: 10, to: 11, filter: {} })!.parts.map((p) => [p.from, p.to])).to.deep.equal([
      [10, 10],
      [11, 11],
    ]);
    const byAddr = splitJob('eth_getLogs', { from: 7, to: 7, filter: { address: [A1, A2, A3], topics: [[T(1), T(2)]] } })!;
    expect(byAddr.dimension).to.equal('addresses');
    expect(byAddr.parts.map((p) => p.filter.address)).to.deep.equal([[A1], [A2, A3]]);
    const byTopic = splitJob('eth_getLogs', { from: 7, to: 7, filter: { address: [A1], topics: [[T(1), T(2), T(3)], T(9)] } })!;
    expect(byTopic.dimension).to.equal('topics0');
    expect(byTopic.parts.map((p) => p.filter.topics)).to.deep.equal([
      [[T(1)], T(9)],
      [[T(2), T(3)], T(9)],
    ]);
    expect(splitJob('eth_getLogs', { from: 7, to: 7, filter: { address: A1, topics: [T(1)] } })).to.equal(undefined);
    expect(splitJob('trace_filter', { from: 7, to: 7, filter: { fromAddress: [A1, A2] } })).to.equal(undefined);
    expect(jobFilter({ from: 16, to: 31, filter: { address: A1, fromBlock: 'latest' } })).to.deep.equal({ address: A1, fromBlock: '0x10', toBlock: '0x1f' });
  });

  it('reads settings from network.config.settings.evm with defaults for missing keys', () => {
    const net = (evm: unknown) => ({ config: { settings: { evm } } }) as unknown as Network;
    expect(getLogsSettingsOf(net(undefined))).to.deep.equal({
      maxAllowedRange: DEFAULT_MAX_ALLOWED_RANGE,
      maxAllowedAddresses: 0,
      maxAllowedTopics: 0,
      splitOnError: true,
      splitConcurrency: DEFAULT_SPLIT_CONCURRENCY,
      traceSplitOnError: true,
      traceSplitConcurrency: DEFAULT_SPLIT_CONCURRENCY,
      logsSplit: { splitOnError: true, concurrency: DEFAULT_SPLIT_CONCURRENCY },
      traceSplit: { splitOnError: true, concurrency: DEFAULT_SPLIT_CONCURRENCY },
    });
    expect(
      getLogsSettingsOf(
        net({
          getLogsMaxAllowedRange: 5,
          getLogsSplitOnError: false,
          getLogsSplitConcurrency: 2,
          getLogsMaxAllowedTopics: 4,
          traceFilterSplitOnError: false,
          traceFilterSplitConcurrency: 3,
        }),
      ),
    ).to.deep.equal({
      maxAllowedRange: 5,
      maxAllowedAddresses: 0,
      maxAllowedTopics: 4,
      splitOnError: false,
      splitConcurrency: 2,
      traceSplitOnError: false,
      traceSplitConcurrency: 3,
      logsSplit: { splitOnError: false, concurrency: 2 },
      traceSplit: { splitOnError: false, concurrency: 3 },
    });
  });
});

// ---------------------------------------------------------------------------------------

interface Log {
  blockNumber: string;
  logIndex: string;
  address: string;
  data: string;
}

/** Two logs in every block divisible by 3 (one per address A1, A2), none elsewhere. */
function logsIn(from: number, to: number, addresses: readonly string[] = [A1, A2]): Log[] {
  const out: Log[] = [];
  for (let b = from; b <= to; b++) {
    if (b % 3 !== 0) continue;
    [A1, A2].forEach((a, i) => {
      if (addresses.includes(a)) out.push({ blockNumber: hex(b), logIndex: hex(i), address: a, data: hex(b * 10 + i) });
    });
  }
  return out;
}

function fakeCtx(params: unknown[], method = 'eth_getLogs', signal: AbortSignal = new AbortController().signal): CallContext {
  return {
    request: { idRaw: '7', method, params },
    directives: {},
    signal,
    deadline: Date.now() + 60_000,
    record: newExecutionRecord(method),
    finality: 'unknown',
    internal: false,
    state: new Map(),
  } as unknown as CallContext;
}

interface FakeInner {
  handler: CallHandler;
  calls: { from: number; to: number; filter: Record<string, unknown>; params: unknown[]; ctx: CallContext }[];
  maxInFlight: number;
}

/**
 * An inner handler that refuses ranges wider than `maxRange` blocks (and, when `maxAddresses`
 * is set, address lists longer than that) and answers {@link logsIn} otherwise, after a delay.
 */
function fakeInner(
  maxRange: number,
  opts: { maxAddresses?: number; delayMs?: number; fail?: (from: number, to: number) => SvcError | undefined; result?: unknown } = {},
): FakeInner {
  const state: FakeInner = { handler: async () => new RpcResult(null), calls: [], maxInFlight: 0 };
  let inFlight = 0;
  state.handler = async (ctx) => {
    const params = ctx.request.params as unknown[];
    const f = params[0] as Record<string, unknown>;
    const from = Number.parseInt(f.fromBlock as string, 16);
    const to = Number.parseInt(f.toBlock as string, 16);
    state.calls.push({ from, to, filter: f, params, ctx });
    inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, inFlight);
    try {
      await new Promise((r) => setTimeout(r, opts.delayMs ?? 2));
      if (ctx.signal.aborted) throw new ErrCancelled('aborted');
      const failure = opts.fail?.(from, to);
      if (failure) throw failure;
      if (to - from + 1 > maxRange) throw new ErrUpstreamsExhausted([new ErrEndpointRequestTooLarge('query returned more than 10000 results')]);
      const addr = Array.isArray(f.address) ? (f.address as string[]) : [A1, A2];
      if (opts.maxAddresses !== undefined && addr.length > opts.maxAddresses) throw new ErrEndpointRequestTooLarge('too many results');
      const r = new RpcResult(opts.result !== undefined ? opts.result : logsIn(from, to, addr));
      r.upstreamId = `up-${from}`;
      return r;
    } finally {
      inFlight--;
    }
  };
  return state;
}

describe('evm-getlogs: splitGetLogs (fake inner handler)', () => {
  const refusal = new ErrEndpointRequestTooLarge('refused');

  it('halves recursively until parts pass, and merges them in block order', async () => {
    const inner = fakeInner(4);
    const dims: SplitDimension[] = [];
    const r = await splitGetLogs(
      fakeCtx([{ fromBlock: '0x0', toBlock: '0x3f' }]),
      inner.handler,
      { from: 0, to: 63, filter: { fromBlock: '0x0', toBlock: '0x3f' } },
      refusal,
      {
        concurrency: 10,
        onSplit: (d) => dims.push(d),
      },
    );
    expect(r.result).to.deep.equal(logsIn(0, 63));
    expect(r.upstreamId).to.equal('up-0');
    // 64 blocks -> parts of 4: 16 leaves; 15 splits; the leaves cover the range exactly once.
    expect(dims).to.have.length(15);
    expect(dims.every((d) => d === 'block_range')).to.equal(true);
    const leaves = inner.calls.filter((c) => c.to - c.from + 1 <= 4).sort((x, y) => x.from - y.from);
    expect(leaves.map((c) => [c.from, c.to])).to.deep.equal(Array.from({ length: 16 }, (_, i) => [i * 4, i * 4 + 3]));
  });

  it('uneven ranges are covered exactly, every block once', async () => {
    const inner = fakeInner(3);
    const r = await splitGetLogs(fakeCtx([{}]), inner.handler, { from: 5, to: 42, filter: {} }, refusal, { concurrency: 4 });
    expect(r.result).to.deep.equal(logsIn(5, 42));
    const leaves = inner.calls.filter((c) => c.to - c.from + 1 <= 3).sort((x, y) => x.from - y.from);
    let next = 5;
    for (const l of leaves) {
      expect(l.from).to.equal(next);
      next = l.to + 1;
    }
    expect(next).to.equal(43);
  });

  it('keeps at most getLogsSplitConcurrency parts in flight', async () => {
    const inner = fakeInner(1, { delayMs: 10 });
    await splitGetLogs(fakeCtx([{}]), inner.handler, { from: 0, to: 31, filter: {} }, refusal, { concurrency: 3 });
    expect(inner.maxInFlight).to.equal(3);
    const one = fakeInner(1, { delayMs: 5 });
    await splitGetLogs(fakeCtx([{}]), one.handler, { from: 0, to: 7, filter: {} }, refusal, { concurrency: 1 });
    expect(one.maxInFlight).to.equal(1);
  });

  it('child contexts: own request and state, the same record, params after the filter kept, client params untouched', async () => {
    const inner = fakeInner(2);
    const clientFilter = { fromBlock: '0x0', toBlock: '0x3', address: [A1, A2] };
    const params = [clientFilter, 'extra'];
    const ctx = fakeCtx(params);
    await splitGetLogs(ctx, inner.handler, { from: 0, to: 3, filter: clientFilter }, refusal, { concurrency: 2 });
    expect(inner.calls.map((c) => c.params)).to.deep.equal([
      [{ fromBlock: '0x0', toBlock: '0x1', address: [A1, A2] }, 'extra'],
      [{ fromBlock: '0x2', toBlock: '0x3', address: [A1, A2] }, 'extra'],
    ]);
    for (const c of inner.calls) {
      expect(c.ctx.record).to.equal(ctx.record);
      expect(c.ctx.state).to.not.equal(ctx.state);
      expect(c.ctx.request).to.not.equal(ctx.request);
      expect(c.ctx.request.idRaw).to.equal('7');
    }
    expect(ctx.request.params).to.equal(params);
    expect(clientFilter).to.deep.equal({ fromBlock: '0x0', toBlock: '0x3', address: [A1, A2] });
  });

  it('a single refused block is split by addresses and re-sorted by logIndex', async () => {
    const inner = fakeInner(1, { maxAddresses: 1 });
    const dims: SplitDimension[] = [];
    const r = await splitGetLogs(fakeCtx([{}]), inner.handler, { from: 3, to: 6, filter: { address: [A2, A1] } }, refusal, {
      concurrency: 10,
      onSplit: (d) => dims.push(d),
    });
    expect(r.result).to.deep.equal(logsIn(3, 6));
    expect(dims.filter((d) => d === 'addresses')).to.have.length(4);
  });

  it('a part that fails for another reason fails the call with its error and aborts the running parts', async () => {
    const boom = new ErrEndpointServerSideException('boom');
    const inner = fakeInner(2, { delayMs: 15, fail: (from) => (from === 0 ? boom : undefined) });
    let err: unknown;
    try {
      await splitGetLogs(fakeCtx([{}]), inner.handler, { from: 0, to: 15, filter: {} }, refusal, { concurrency: 2 });
    } catch (e) {
      err = e;
    }
    expect(err).to.equal(boom);
    // Only the first wave (two parts) ever started; the queued ones were not dialled.
    await new Promise((r) => setTimeout(r, 50));
    expect(inner.calls.filter((c) => c.to - c.from + 1 <= 2).length).to.be.lessThan(8);
  });

  it('a single block still refused fails the call with the refusal', async () => {
    const inner = fakeInner(0);
    let err: unknown;
    try {
      await splitGetLogs(fakeCtx([{}]), inner.handler, { from: 0, to: 1, filter: {} }, refusal, { concurrency: 2 });
    } catch (e) {
      err = e;
    }
    expect(isRequestTooLarge(err)).to.equal(true);
  });

  it('a job that cannot be split rethrows the original cause without calling inner', async () => {
    const inner = fakeInner(0);
    let err: unknown;
    try {
      await splitGetLogs(fakeCtx([{}]), inner.handler, { from: 9, to: 9, filter: { address: A1 } }, refusal, { concurrency: 2 });
    } catch (e) {
      err = e;
    }
    expect(err).to.equal(refusal);
    expect(inner.calls).to.have.length(0);
  });

  it('a part answering a non-array fails with ErrUpstreamMalformedResponse; null counts as empty', async () => {
    let err: unknown;
    try {
      await splitGetLogs(fakeCtx([{}]), fakeInner(1, { result: { not: 'logs' } }).handler, { from: 0, to: 1, filter: {} }, refusal, { concurrency: 2 });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ErrUpstreamMalformedResponse);
    const r = await splitGetLogs(fakeCtx([{}]), fakeInner(1, { result: null }).handler, { from: 0, to: 1, filter: {} }, refusal, { concurrency: 2 });
    expect(r.result).to.deep.equal([]);
  });

  it('the call being aborted stops the split', async () => {
    const ac = new AbortController();
    const inner = fakeInner(1, { delayMs: 20 });
    const p = splitGetLogs(fakeCtx([{}], 'eth_getLogs', ac.signal), inner.handler, { from: 0, to: 63, filter: {} }, refusal, { concurrency: 2 });
    setTimeout(() => ac.abort(new ErrCancelled('client left')), 30);
    let err: unknown;
    try {
      await p;
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ErrCancelled);
    expect(inner.calls.length).to.be.lessThan(20);
  });
});

// ---------------------------------------------------------------------------------------

interface RefusingUpstream {
  url: string;
  calls: { method: string; params: unknown }[];
  /** Answer every eth_getLogs/trace_filter with this JSON-RPC error instead. */
  failWith?: { code: number; message: string };
  close(): Promise<void>;
}

/**
 * A fake upstream on node:http: eth_chainId answers 31337; eth_getLogs/trace_filter wider than
 * `maxRange` blocks get -32005 "query returned more than 10000 results", narrower ones
 * {@link logsIn}; anything else answers `0x1`.
 */
async function startRefusing(maxRange: number): Promise<RefusingUpstream> {
  const up: RefusingUpstream = { url: '', calls: [], close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown; method: string; params: unknown[] };
      up.calls.push({ method: body.method, params: body.params });
      const reply = (payload: object) => {
        const text = JSON.stringify({ jsonrpc: '2.0', id: body.id, ...payload });
        res.writeHead(200, { 'content-type': 'application/json' }).end(text);
      };
      if (body.method === 'eth_chainId') return reply({ result: '0x7a69' });
      if (body.method === 'eth_getLogs' || body.method === 'trace_filter' || body.method === 'arbtrace_filter') {
        if (up.failWith) return reply({ error: up.failWith });
        const f = body.params[0] as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
        if (f.blockHash !== undefined) return reply({ result: [] });
        const num = (v: unknown) => (typeof v === 'string' && /^0x[0-9a-f]+$/i.test(v) ? Number.parseInt(v, 16) : Number.NaN);
        const from = num(f.fromBlock);
        const to = num(f.toBlock);
        // Tags (earliest, safe, pending...) are "wide" for this fake: refused.
        if (!(to - from + 1 <= maxRange))
          return reply({ error: { code: -32005, message: 'query returned more than 10000 results. Try with this block range [0x1, 0x2]' } });
        return reply({ result: logsIn(from, to) });
      }
      return reply({ result: '0x1' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  up.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return up;
}

describe('evm-getlogs: plugin in svc (fake upstream refusing ranges wider than 8 blocks)', function () {
  this.timeout(15_000);
  let up: RefusingUpstream;
  let svc: SvcHandle;
  let network: Network;
  const path = '/main/evm/31337';
  const body = (method: string, params: unknown[]) => ({ jsonrpc: '2.0', id: 1, method, params });
  const plugins = () => [
    ...defaultPreset().filter((p) => !['evm-interpolation', 'evm-getlogs'].includes(p.name)),
    evmInterpolationPlugin(),
    evmGetLogsPlugin(),
  ];

  async function start(evm: Record<string, unknown>, extra: Record<string, unknown> = {}, upstreamEvm: Record<string, unknown> = {}): Promise<void> {
    up = await startRefusing(8);
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337, ...evm }, ...extra }],
            upstreams: [{ id: 'refusing', endpoint: up.url, evm: { chainId: 31337, ...upstreamEvm } }],
          },
        ],
      },
      { plugins: plugins() },
    );
    network = svc.proxy.projects.get('main')!.networks.get('evm:31337')!;
  }
  async function stop(): Promise<void> {
    await svc?.close();
    await up?.close();
  }
  const getLogsCalls = () => up.calls.filter((c) => c.method === 'eth_getLogs' || c.method === 'trace_filter' || c.method === 'arbtrace_filter');

  describe('limits (getLogsMaxAllowedRange 100, addresses 2, topics 3)', () => {
    before(() => start({ getLogsMaxAllowedRange: 100, getLogsMaxAllowedAddresses: 2, getLogsMaxAllowedTopics: 3 }));
    after(stop);
    beforeEach(() => {
      up.calls.length = 0;
    });

    it('the resolved settings carry the configured values and the defaults', () => {
      expect(getLogsSettingsOf(network)).to.deep.equal({
        maxAllowedRange: 100,
        maxAllowedAddresses: 2,
        maxAllowedTopics: 3,
        splitOnError: true,
        splitConcurrency: 10,
        traceSplitOnError: true,
        traceSplitConcurrency: 10,
        logsSplit: { splitOnError: true, concurrency: 10 },
        traceSplit: { splitOnError: true, concurrency: 10 },
      });
    });

    it('a range over the limit is rejected before forwarding: -32012, HTTP 200, ErrGetLogsExceededMaxAllowedRange', async () => {
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x64' }]));
      expect(res.status).to.equal(200);
      expect(res.json.error.code).to.equal(-32012);
      expect(res.json.error.message).to.match(/exceeded max allowed range: 101 blocks/);
      expect(res.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedRange');
      expect(getLogsCalls()).to.have.length(0);
    });

    it('trace_filter and arbtrace_filter over the range are rejected the same way', async () => {
      for (const method of ['trace_filter', 'arbtrace_filter']) {
        const res = await svc.post(path, body(method, [{ fromBlock: '0x10', toBlock: '0x1000' }]));
        expect(res.status).to.equal(200);
        expect(res.json.error.code, method).to.equal(-32012);
        expect(res.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedRange');
      }
      expect(getLogsCalls()).to.have.length(0);
    });

    it('a range at the limit is forwarded (and split, since the upstream refuses it)', async () => {
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x63' }]));
      expect(res.json.result).to.deep.equal(logsIn(0, 99));
    });

    it('the request cannot turn the check off: enforce-getlogs-range header and query are ignored', async () => {
      const h = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1000' }]), { 'x-svc-enforce-getlogs-range': 'false' });
      expect(h.json.error.code).to.equal(-32012);
      const q = await svc.post(`${path}?enforce-getlogs-range=false`, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1000' }]));
      expect(q.json.error.code).to.equal(-32012);
      expect(getLogsCalls()).to.have.length(0);
    });

    it('too many addresses or topics: ErrGetLogsExceededMaxAllowedAddresses / ...Topics', async () => {
      const a = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1', address: [A1, A2, A3] }]));
      expect(a.status).to.equal(200);
      expect(a.json.error.code).to.equal(-32012);
      expect(a.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedAddresses');
      const t = await svc.post(
        path,
        body('eth_getLogs', [
          {
            fromBlock: '0x0',
            toBlock: '0x1',
            topics: [
              [T(1), T(2)],
              [T(3), T(4)],
            ],
          },
        ]),
      );
      expect(t.json.error.code).to.equal(-32012);
      expect(t.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedTopics');
      expect(getLogsCalls()).to.have.length(0);
    });

    it('latest is resolved from the chain state for the check; an unknown head skips it', async () => {
      const unknown = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }]));
      // Forwarded: the upstream refuses it and, with no number to split, the refusal reaches the client.
      // One upstream refused: its error itself reaches the client (single-cause exhausted unwrapped).
      expect(unknown.json.error.data.code).to.equal('ErrEndpointRequestTooLarge');
      expect(getLogsCalls()).to.have.length(1);
      const s = chainStateOf(network);
      for (const u of network.upstreams) s.observeLatest(u, 5000);
      const known = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }]));
      expect(known.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedRange');
      expect(getLogsCalls()).to.have.length(1);
    });

    it('a blockHash filter bypasses every check', async () => {
      const res = await svc.post(path, body('eth_getLogs', [{ blockHash: `0x${'ab'.repeat(32)}`, address: [A1, A2, A3] }]));
      expect(res.json.result).to.deep.equal([]);
      expect(getLogsCalls()).to.have.length(1);
    });
  });

  describe('splitting (getLogsSplitConcurrency 3)', () => {
    before(() => start({ getLogsSplitConcurrency: 3 }));
    after(stop);
    beforeEach(() => {
      up.calls.length = 0;
      up.failWith = undefined;
    });

    it('a refused range is split and merged in block order; the attempts aggregate in the headers', async () => {
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x40', address: [A1, A2] }]));
      expect(res.status).to.equal(200);
      expect(res.json.result).to.deep.equal(logsIn(1, 64));
      const calls = getLogsCalls();
      // 1 refused whole + every split level; every leaf at most 8 blocks.
      expect(calls.length).to.be.greaterThan(8);
      expect(Number(res.headers['x-svc-upstream-attempts'])).to.equal(calls.length);
      expect(res.headers['x-svc-upstream']).to.equal('refusing');
      const metrics = await svc.proxy.metrics.getSingleMetricAsString('svc_network_getlogs_splits_total');
      expect(metrics).to.match(/svc_network_getlogs_splits_total\{project="main",network="evm:31337",method="eth_getLogs",dimension="block_range"\} \d+/);
    });

    it('trace_filter ranges are split too', async () => {
      const res = await svc.post(path, body('trace_filter', [{ fromBlock: '0x0', toBlock: '0x1f' }]));
      expect(res.json.result).to.deep.equal(logsIn(0, 31));
    });

    it('arbtrace_filter ranges are split like trace_filter', async () => {
      const res = await svc.post(path, body('arbtrace_filter', [{ fromBlock: '0x0', toBlock: '0x1f' }]));
      expect(res.json.result).to.deep.equal(logsIn(0, 31));
      expect(getLogsCalls().length).to.be.greaterThan(4);
    });

    it('trace_filter with after/count paging is not split', async () => {
      const res = await svc.post(path, body('trace_filter', [{ fromBlock: '0x0', toBlock: '0x1f', count: 10 }]));
      expect(res.json.error).to.be.an('object');
      expect(getLogsCalls()).to.have.length(1);
    });

    it('earliest, safe and pending skip splitting: the refusal reaches the client', async () => {
      for (const f of [
        { fromBlock: 'earliest', toBlock: '0x1f' },
        { fromBlock: '0x0', toBlock: 'safe' },
        { fromBlock: '0x0', toBlock: 'pending' },
      ]) {
        up.calls.length = 0;
        const res = await svc.post(path, body('eth_getLogs', [f]));
        expect(res.json.error, JSON.stringify(f)).to.be.an('object');
        expect(getLogsCalls()).to.have.length(1);
      }
    });

    it('an upstream error that is not a refusal is not split', async () => {
      up.failWith = { code: -32000, message: 'internal boom' };
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1f' }]));
      expect(res.json.error).to.be.an('object');
      expect(getLogsCalls()).to.have.length(1);
    });

    // Runs last in this block: it makes the network head known (40).
    it('with a known head, parts are never asked above it; a range starting above it is not split', async () => {
      const s = chainStateOf(network);
      for (const u of network.upstreams) s.observeLatest(u, 40);
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x10', toBlock: '0x3f' }]));
      expect(res.json.result).to.deep.equal(logsIn(16, 40));
      const parts = getLogsCalls().slice(1);
      const highest = Math.max(...parts.map((c) => Number.parseInt((c.params as { toBlock: string }[])[0]!.toBlock, 16)));
      expect(highest).to.equal(40);
      up.calls.length = 0;
      const above = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x29', toBlock: '0x3f' }]));
      expect(above.json.error).to.be.an('object');
      expect(getLogsCalls()).to.have.length(1);
    });
  });

  describe('getLogsSplitOnError false', () => {
    before(() => start({ getLogsSplitOnError: false }));
    after(stop);

    it('the refusal reaches the client unsplit (-32012 from the upstream normalisation)', async () => {
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1f' }]));
      expect(res.status).to.equal(200);
      expect(res.json.error.code).to.equal(-32012);
      expect(res.json.error.data.code).to.equal('ErrEndpointRequestTooLarge');
      expect(getLogsCalls()).to.have.length(1);
    });
  });

  describe('traceFilterSplitOnError false (getLogsSplitOnError on)', () => {
    before(() => start({ traceFilterSplitOnError: false }));
    after(stop);

    it('a refused trace_filter or arbtrace_filter reaches the client unsplit; eth_getLogs is still split', async () => {
      for (const method of ['trace_filter', 'arbtrace_filter']) {
        up.calls.length = 0;
        const res = await svc.post(path, body(method, [{ fromBlock: '0x0', toBlock: '0x1f' }]));
        expect(res.json.error.data.code, method).to.equal('ErrEndpointRequestTooLarge');
        expect(getLogsCalls()).to.have.length(1);
      }
      const logs = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1f' }]));
      expect(logs.json.result).to.deep.equal(logsIn(0, 31));
    });
  });

  describe('upstreams[].evm.traceFilterAutoSplittingRangeThreshold 8 (proactive trace split)', () => {
    before(() => start({ traceFilterSplitConcurrency: 2 }, {}, { traceFilterAutoSplittingRangeThreshold: 8 }));
    after(stop);
    beforeEach(() => {
      up.calls.length = 0;
    });

    it('a trace range wider than the threshold is sent as consecutive chunks of 8 blocks, joined in block order, none refused', async () => {
      for (const method of ['trace_filter', 'arbtrace_filter']) {
        up.calls.length = 0;
        const res = await svc.post(path, body(method, [{ fromBlock: '0x0', toBlock: '0x1f', fromAddress: [A1] }]));
        expect(res.json.result, method).to.deep.equal(logsIn(0, 31));
        const ranges = getLogsCalls().map((c) => {
          const f = (c.params as Record<string, unknown>[])[0]!;
          expect(f.fromAddress, 'the filter is kept').to.deep.equal([A1]);
          return [f.fromBlock, f.toBlock];
        });
        expect(ranges.sort()).to.deep.equal([
          ['0x0', '0x7'],
          ['0x10', '0x17'],
          ['0x18', '0x1f'],
          ['0x8', '0xf'],
        ]);
      }
      const metrics = await svc.proxy.metrics.getSingleMetricAsString('svc_network_getlogs_splits_total');
      expect(metrics).to.match(/svc_network_getlogs_splits_total\{project="main",network="evm:31337",method="trace_filter",dimension="proactive"\} 1/);
    });

    it('eth_getLogs does not read the trace threshold; paged trace_filter (after/count) is sent whole', async () => {
      await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x7' }]));
      expect(getLogsCalls()).to.have.length(1);
      up.calls.length = 0;
      const paged = await svc.post(path, body('trace_filter', [{ fromBlock: '0x0', toBlock: '0x1f', after: 0, count: 5 }]));
      expect(paged.json.error, 'the upstream refuses the whole range').to.be.an('object');
      expect(getLogsCalls()).to.have.length(1);
    });
  });

  describe('no range limit (getLogsMaxAllowedRange 0), upstream threshold 1', () => {
    before(() => start({ getLogsMaxAllowedRange: 0 }, {}, { getLogsAutoSplittingRangeThreshold: 1, traceFilterAutoSplittingRangeThreshold: 1 }));
    after(stop);

    it('a range needing more than MAX_PROACTIVE_CHUNKS chunks is sent whole, not planned as 20,001 requests', async () => {
      up.failWith = { code: -32000, message: 'internal boom' };
      for (const method of ['eth_getLogs', 'trace_filter']) {
        up.calls.length = 0;
        const res = await svc.post(path, body(method, [{ fromBlock: '0x0', toBlock: '0x4e20' }]));
        expect(res.json.error, method).to.be.an('object');
        expect(getLogsCalls(), method).to.have.length(1);
      }
      up.failWith = undefined;
    });
  });

  describe('directiveDefaults.enforceGetLogsBlockRange false', () => {
    before(() => start({ getLogsMaxAllowedRange: 10 }, { directiveDefaults: { enforceGetLogsBlockRange: false } }));
    after(stop);

    it('an over-range request is forwarded (and split on refusal)', async () => {
      const res = await svc.post(path, body('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1f' }]));
      expect(res.json.result).to.deep.equal(logsIn(0, 31));
    });
  });
});
