/**
 * Unit tests of the proactive getLogs split (`upstreams[].evm.getLogsAutoSplittingRangeThreshold`,
 * eRPC's rule): the effective threshold (smallest above 0 among the upstreams, capped by
 * `getLogsMaxAllowedRange`), the chunking, and the chunk executor on a fake inner handler
 * (concurrency bound, block order, refused chunks halved only with `getLogsSplitOnError`,
 * one failing chunk fails the call).
 */
import { expect } from 'chai';
import { newExecutionRecord, type CallContext } from '../../../core/pipeline/context.ts';
import { ErrEndpointRequestTooLarge, ErrEndpointServerSideException, ErrUpstreamsExhausted } from '../../../core/wire/errors.ts';
import type { CallHandler } from '../../../core/pipeline/hooks.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { autoSplitThresholdOf, chunkJob, runProactiveSplit, type SplitDimension } from '../../../plugins/evm-getlogs/index.ts';

const hex = (n: number) => `0x${n.toString(16)}`;
const up = (evm: Record<string, unknown> | undefined) => ({ config: { settings: evm === undefined ? {} : { evm } } }) as unknown as Upstream;

function fakeCtx(): CallContext {
  return {
    request: { idRaw: '1', method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x63', address: '0xabc' }] },
    directives: {},
    signal: new AbortController().signal,
    deadline: Date.now() + 60_000,
    record: newExecutionRecord('eth_getLogs'),
    finality: 'unknown',
    internal: false,
    state: new Map(),
  } as unknown as CallContext;
}

/** An inner handler answering one log per block, refusing ranges wider than `maxRange`, failing `failBlock`. */
function fakeInner(maxRange: number, failBlock?: number) {
  const calls: { from: number; to: number; filter: Record<string, unknown> }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const handler: CallHandler = async (ctx) => {
    const f = (ctx.request.params as Record<string, unknown>[])[0]!;
    const from = Number.parseInt(f.fromBlock as string, 16);
    const to = Number.parseInt(f.toBlock as string, 16);
    calls.push({ from, to, filter: f });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      // Later chunks answer first: the merge must still keep block order.
      await new Promise((r) => setTimeout(r, 1 + Math.max(0, 20 - from)));
      if (failBlock !== undefined && from <= failBlock && failBlock <= to) throw new ErrEndpointServerSideException('database read failed');
      if (to - from + 1 > maxRange) throw new ErrUpstreamsExhausted([new ErrEndpointRequestTooLarge('query returned more than 10000 results')]);
      const logs = [];
      for (let b = from; b <= to; b++) logs.push({ blockNumber: hex(b) });
      const r = new RpcResult(logs);
      r.upstreamId = 'u';
      return r;
    } finally {
      inFlight--;
    }
  };
  return { handler, calls, maxInFlight: () => maxInFlight };
}

describe('evm-getlogs: proactive split threshold and chunks', () => {
  it('the threshold is the smallest above 0 among the upstreams, capped by getLogsMaxAllowedRange', () => {
    expect(autoSplitThresholdOf([], 30_000)).to.equal(0);
    expect(autoSplitThresholdOf([up(undefined), up({ getLogsAutoSplittingRangeThreshold: 0 })], 30_000)).to.equal(0);
    expect(
      autoSplitThresholdOf(
        [up({ getLogsAutoSplittingRangeThreshold: 0 }), up({ getLogsAutoSplittingRangeThreshold: 500 }), up({ getLogsAutoSplittingRangeThreshold: 200 })],
        30_000,
      ),
    ).to.equal(200);
    expect(autoSplitThresholdOf([up({ getLogsAutoSplittingRangeThreshold: 5000 })], 1000)).to.equal(1000);
    expect(autoSplitThresholdOf([up({ getLogsAutoSplittingRangeThreshold: 5000 })], 0)).to.equal(5000);
  });

  it('chunks are consecutive, of the threshold size, the last one shorter', () => {
    const chunks = chunkJob({ from: 10, to: 31, filter: { address: '0xabc' } }, 10);
    expect(chunks.map((c) => [c.from, c.to])).to.deep.equal([
      [10, 19],
      [20, 29],
      [30, 31],
    ]);
    expect(chunks[2]!.filter).to.deep.equal({ address: '0xabc' });
    expect(chunkJob({ from: 5, to: 5, filter: {} }, 3).map((c) => [c.from, c.to])).to.deep.equal([[5, 5]]);
  });
});

describe('evm-getlogs: runProactiveSplit (fake inner handler)', () => {
  it('asks each chunk once with the filter kept, at most `concurrency` in flight, and merges in block order', async () => {
    const inner = fakeInner(1000);
    const r = await runProactiveSplit(fakeCtx(), inner.handler, { from: 0, to: 99, filter: { address: '0xabc' } }, 10, true, { concurrency: 3 });
    expect(inner.calls).to.have.length(10);
    expect(inner.calls.every((c) => c.to - c.from + 1 === 10 && c.filter.address === '0xabc')).to.equal(true);
    expect(inner.maxInFlight()).to.equal(3);
    expect((r.result as { blockNumber: string }[]).map((l) => Number.parseInt(l.blockNumber, 16))).to.deep.equal(Array.from({ length: 100 }, (_, i) => i));
    expect(r.upstreamId).to.equal('u');
  });

  it('a chunk still refused as too large is halved when getLogsSplitOnError is on', async () => {
    const inner = fakeInner(5);
    const dims: SplitDimension[] = [];
    const r = await runProactiveSplit(fakeCtx(), inner.handler, { from: 0, to: 19, filter: {} }, 10, true, { concurrency: 4, onSplit: (d) => dims.push(d) });
    expect((r.result as unknown[]).length).to.equal(20);
    expect(dims).to.deep.equal(['block_range', 'block_range']);
  });

  it('with getLogsSplitOnError off a refused chunk fails the call', async () => {
    const inner = fakeInner(5);
    const err = await runProactiveSplit(fakeCtx(), inner.handler, { from: 0, to: 19, filter: {} }, 10, false, { concurrency: 4 }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ErrUpstreamsExhausted);
  });

  it('one failing chunk fails the whole call: no partial result', async () => {
    const inner = fakeInner(1000, 35);
    const err = await runProactiveSplit(fakeCtx(), inner.handler, { from: 0, to: 99, filter: {} }, 10, true, { concurrency: 2 }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ErrEndpointServerSideException);
  });

  it('a range of a billion blocks costs `concurrency` requests in flight: chunks are cut as they are taken, and the first failure ends it', async () => {
    const inner = fakeInner(1000, 45);
    const t0 = Date.now();
    const err = await runProactiveSplit(fakeCtx(), inner.handler, { from: 0, to: 1e9, filter: {} }, 1, true, { concurrency: 3 }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ErrEndpointServerSideException);
    expect(inner.maxInFlight()).to.equal(3);
    // The chunks asked are the ones taken before block 45 failed (a few beyond it at most), not 10^9.
    expect(inner.calls.length).to.be.within(46, 48);
    expect(Date.now() - t0, 'no list of a billion chunks was built').to.be.below(10_000);
  });

  it('the trace methods read their own upstream key, capped by getLogsMaxAllowedRange the same way', () => {
    const ups = [
      up({ getLogsAutoSplittingRangeThreshold: 100, traceFilterAutoSplittingRangeThreshold: 5000 }),
      up({ traceFilterAutoSplittingRangeThreshold: 0 }),
    ];
    expect(autoSplitThresholdOf(ups, 30_000, 'traceFilterAutoSplittingRangeThreshold')).to.equal(5000);
    expect(autoSplitThresholdOf(ups, 1000, 'traceFilterAutoSplittingRangeThreshold')).to.equal(1000);
    expect(autoSplitThresholdOf(ups, 1000)).to.equal(100);
  });
});
