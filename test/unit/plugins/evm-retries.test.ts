/**
 * Unit tests of the evm-retries plugin (spec §2.8 #1 #2, §6): the pure rules (pending
 * transaction, truthful empty beyond the head, cap resolution) and the whole pipeline of a
 * started proxy whose upstream transports are replaced by scripted in-process stubs (no
 * sockets to upstreams).
 */
import { expect } from 'chai';
import type { CallContext } from '../../../core/pipeline/context.ts';
import { failsafePlugin } from '../../../plugins/failsafe/index.ts';
import { createLogger } from '../../../lib/logger.ts';
import { ErrEndpointClientSideException, ErrEndpointMissingData, ErrEndpointServerSideException } from '../../../core/wire/errors.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { Network } from '../../../core/registry/project.ts';
import { chainStateOf } from '../../../plugins/evm-state/chain.ts';
import type { Plugin } from '../../../core/plugin-api.ts';
import { CHAIN_STATE_SERVICE } from 'svc-proxy/plugins/evm-state';
import { presetWithout } from '../../helpers/svc.ts';
import { startStubProxy, type Script, type StubProxy } from '../../helpers/stub-proxy.ts';
import {
  DEFAULT_EMPTY_RESULT_MAX_ATTEMPTS,
  DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE,
  EMPTY_RETRY_METHODS,
  PENDING_RETRY_METHODS,
  evmRetriesPlugin,
  isPendingTransaction,
  isRetryRejection,
  isTruthfulEmpty,
  maxRetryableBlockDistanceOf,
  RETRY_KEEP_STAGE,
  UPSTREAM_RETRIES_METRIC,
  upstreamRetriesCounter,
} from '../../../plugins/evm-retries/index.ts';
import { evmMethodsPlugin } from '../../../plugins/evm-methods/index.ts';
import { CallStage } from '../../../core/pipeline/stages.ts';

const TX_HASH = `0x${'ab'.repeat(32)}`;
const MINED_TX = { hash: TX_HASH, blockNumber: '0x5', blockHash: `0x${'cd'.repeat(32)}`, transactionIndex: '0x0' };
const PENDING_TX = { hash: TX_HASH, blockNumber: null, blockHash: null, transactionIndex: null };
const RECEIPT = { transactionHash: TX_HASH, blockNumber: '0x5', status: '0x1' };

interface Harness extends StubProxy {
  /** Value of the retry counter for a reason (all other labels summed). */
  retries(reason: string): Promise<number>;
}

async function harness(scripts: Record<string, Script>, networkExtra: Record<string, unknown> = {}): Promise<Harness> {
  // No evm-state: the stubs model no chain head (its state poller would call them and score
  // them); tests that need a head set it by hand with chainStateOf(...).observeLatest, which
  // this stand-in provides as the chain state service (host.chainState) in evm-state's place.
  const chain: Plugin = { name: 'chain-state', apply: (h) => h.services.provide(CHAIN_STATE_SERVICE, { of: (n) => chainStateOf(n) }) };
  const stub = await startStubProxy(
    scripts,
    [chain, ...presetWithout('evm-state', 'evm-retries', 'evm-methods'), evmRetriesPlugin(), evmMethodsPlugin()],
    networkExtra,
  );
  return {
    ...stub,
    async retries(reason) {
      const m = await upstreamRetriesCounter(stub.proxy).get();
      return m.values.filter((v) => v.labels.reason === reason).reduce((s, v) => s + v.value, 0);
    },
  };
}

/** `<upstream>:<outcome>[:won]` per attempt. */
function trace(ctx: CallContext): string[] {
  return ctx.record.attempts.map((a) => `${a.upstreamId}:${a.outcome}${a.won ? ':won' : ''}`);
}

describe('evm-retries plugin: rules', () => {
  it('lists the methods an empty answer may be retried for (retry-empty) and the four §2.8 #2 methods for retry-pending', () => {
    expect([...EMPTY_RETRY_METHODS].sort()).to.deep.equal(
      [
        'debug_traceTransaction',
        'eth_getBlockByHash',
        'eth_getBlockByNumber',
        'eth_getTransactionByBlockHashAndIndex',
        'eth_getTransactionByBlockNumberAndIndex',
        'eth_getTransactionByHash',
        'eth_getTransactionReceipt',
        'trace_block',
        'trace_transaction',
      ].sort(),
    );
    expect([...PENDING_RETRY_METHODS].sort()).to.deep.equal(
      ['eth_getTransactionByBlockHashAndIndex', 'eth_getTransactionByBlockNumberAndIndex', 'eth_getTransactionByHash', 'eth_getTransactionReceipt'].sort(),
    );
    expect(DEFAULT_EMPTY_RESULT_MAX_ATTEMPTS).to.equal(2);
    expect(DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE).to.equal(128);
    expect(RETRY_KEEP_STAGE).to.equal(CallStage.TIP_ENFORCEMENT - 20);
  });

  it('isPendingTransaction: an object with a null or missing blockNumber; null and {} are empty, not pending', () => {
    expect(isPendingTransaction(PENDING_TX)).to.equal(true);
    expect(isPendingTransaction({ hash: TX_HASH })).to.equal(true);
    expect(isPendingTransaction(MINED_TX)).to.equal(false);
    expect(isPendingTransaction(null)).to.equal(false);
    expect(isPendingTransaction({})).to.equal(false);
    expect(isPendingTransaction([])).to.equal(false);
    expect(isPendingTransaction('0x')).to.equal(false);
  });

  it('isTruthfulEmpty: only a concrete block more than maxDistance beyond a known head', () => {
    // head unknown: always retried
    expect(isTruthfulEmpty('eth_getBlockByNumber', ['0xffffff', false], 0, 128)).to.equal(false);
    // head 100, distance 128: 228 is still retryable, 229 is truthful
    expect(isTruthfulEmpty('eth_getBlockByNumber', ['0xe4', false], 100, 128)).to.equal(false);
    expect(isTruthfulEmpty('eth_getBlockByNumber', ['0xe5', false], 100, 128)).to.equal(true);
    expect(isTruthfulEmpty('eth_getTransactionByBlockNumberAndIndex', ['0x1000', '0x0'], 100, 128)).to.equal(true);
    expect(isTruthfulEmpty('trace_block', ['0x1000'], 100, 128)).to.equal(true);
    // tags and hashes never
    expect(isTruthfulEmpty('eth_getBlockByNumber', ['latest', false], 100, 128)).to.equal(false);
    expect(isTruthfulEmpty('eth_getBlockByHash', [TX_HASH, false], 100, 0)).to.equal(false);
    expect(isTruthfulEmpty('eth_getTransactionReceipt', [TX_HASH], 100, 0)).to.equal(false);
  });

  it('maxRetryableBlockDistanceOf: networks[].evm.maxRetryableBlockDistance, else 128', () => {
    const net = (settings: Record<string, unknown>) => ({ config: { settings } }) as unknown as Network;
    expect(maxRetryableBlockDistanceOf(net({}))).to.equal(128);
    expect(maxRetryableBlockDistanceOf(net({ evm: { chainId: 1 } }))).to.equal(128);
    expect(maxRetryableBlockDistanceOf(net({ evm: { maxRetryableBlockDistance: 5 } }))).to.equal(5);
    expect(maxRetryableBlockDistanceOf(net({ evm: { maxRetryableBlockDistance: 0 } }))).to.equal(0);
  });
});

describe('evm-retries plugin: retry-empty through the pipeline', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('an empty receipt from the first upstream is retried on the second; the trace shows both; one empty_result retry counted', async () => {
    h = await harness({ a: () => null, b: () => RECEIPT });
    const { ctx, result, error } = await h.run('eth_getTransactionReceipt', [TX_HASH], { retryEmpty: true });
    expect(error).to.equal(undefined);
    expect(result!.result).to.deep.equal(RECEIPT);
    expect(trace(ctx)).to.deep.equal(['a:error', 'b:success:won']);
    expect(ctx.record.attempts[0]!.error).to.be.instanceOf(ErrEndpointMissingData);
    expect(isRetryRejection(ctx.record.attempts[0]!.error)).to.equal(true);
    expect(ctx.record.upstream).to.equal('b');
    expect(await h.retries('empty_result')).to.equal(1);
    expect(await h.retries('pending_tx')).to.equal(0);
  });

  it('without the directive the null comes back from the first upstream and the second is never asked', async () => {
    h = await harness({ a: () => null, b: () => RECEIPT });
    const { result } = await h.run('eth_getTransactionReceipt', [TX_HASH], {});
    expect(result!.result).to.equal(null);
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a']);
    const explicitFalse = await h.run('eth_getTransactionReceipt', [TX_HASH], { retryEmpty: false });
    expect(explicitFalse.result!.result).to.equal(null);
    expect(await h.retries('empty_result')).to.equal(0);
  });

  it('methods where empty is a normal answer are not retried (eth_getLogs [], eth_getCode 0x)', async () => {
    h = await harness({ a: (m) => (m === 'eth_getLogs' ? [] : '0x'), b: () => ['never'] });
    expect((await h.run('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2' }], { retryEmpty: true })).result!.result).to.deep.equal([]);
    expect((await h.run('eth_getCode', ['0x' + '11'.repeat(20), '0x1'], { retryEmpty: true })).result!.result).to.equal('0x');
    expect(h.calls.every((c) => c.upstream === 'a')).to.equal(true);
  });

  it('the cap is emptyResultMaxAttempts tries including the first (default 2): the second empty answer is the answer', async () => {
    h = await harness({ a: () => null, b: () => null, c: () => MINED_TX });
    const { ctx, result } = await h.run('eth_getTransactionByHash', [TX_HASH], { retryEmpty: true });
    expect(result!.result).to.equal(null);
    expect(trace(ctx)).to.deep.equal(['a:error', 'b:success:won']);
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a', 'b']);
    expect(await h.retries('empty_result')).to.equal(1);
  });

  it('failsafe[].retry.emptyResultMaxAttempts raises the cap (3 tries reach the third upstream)', async () => {
    h = await harness(
      { a: () => null, b: () => null, c: () => MINED_TX },
      { failsafe: [{ matchMethod: '*', retry: { maxAttempts: 1, emptyResultMaxAttempts: 3 } }] },
    );
    const { ctx, result } = await h.run('eth_getTransactionByHash', [TX_HASH], { retryEmpty: true });
    expect(result!.result).to.deep.equal(MINED_TX);
    expect(trace(ctx)).to.deep.equal(['a:error', 'b:error', 'c:success:won']);
    expect(await h.retries('empty_result')).to.equal(2);
  });

  it('emptyResultMaxAttempts 1 disables the retry', async () => {
    h = await harness({ a: () => null, b: () => MINED_TX }, { failsafe: { retry: { emptyResultMaxAttempts: 1 } } });
    const { result } = await h.run('eth_getTransactionByHash', [TX_HASH], { retryEmpty: true });
    expect(result!.result).to.equal(null);
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a']);
  });

  it('when no upstream has the data the empty answer is the answer (no error), with no retry counted for a retry that never happened', async () => {
    h = await harness({ a: () => null });
    const { ctx, result, error } = await h.run('eth_getBlockByHash', [TX_HASH, false], { retryEmpty: true });
    expect(error).to.equal(undefined);
    expect(result!.result).to.equal(null);
    expect(trace(ctx)).to.deep.equal(['a:success:won']);
    expect(ctx.record.upstream).to.equal('a');
    expect(await h.retries('empty_result')).to.equal(0);
  });

  it('with a network retry policy and one upstream, the retry round asks it again and then accepts the empty answer', async () => {
    h = await harness({ a: () => null }, { failsafe: { retry: { maxAttempts: 3, delay: '1ms' } } });
    const { ctx, result } = await h.run('eth_getBlockByHash', [TX_HASH, false], { retryEmpty: true });
    expect(result!.result).to.equal(null);
    expect(h.calls.length).to.equal(2);
    expect(trace(ctx)).to.deep.equal(['a:error', 'a:success:won']);
    expect(await h.retries('empty_result')).to.equal(1);
  });

  it('an empty answer beats a failing second upstream (a transient error is not the better answer)', async () => {
    h = await harness({
      a: () => null,
      b: () => {
        throw new ErrEndpointServerSideException('boom');
      },
    });
    const { ctx, result, error } = await h.run('eth_getTransactionReceipt', [TX_HASH], { retryEmpty: true });
    expect(error).to.equal(undefined);
    expect(result!.result).to.equal(null);
    expect(trace(ctx)).to.deep.equal(['a:success:won', 'b:error']);
    expect(await h.retries('empty_result')).to.equal(1);
  });

  it('a deterministic error from the next upstream still reaches the client', async () => {
    h = await harness({
      a: () => null,
      b: () => {
        throw new ErrEndpointClientSideException('invalid argument 0: hex string has length 2');
      },
    });
    const { error } = await h.run('eth_getTransactionReceipt', [TX_HASH], { retryEmpty: true });
    expect(error).to.be.instanceOf(ErrEndpointClientSideException);
  });

  it('a block more than maxRetryableBlockDistance beyond the head is truthfully empty: not retried', async () => {
    h = await harness({ a: () => null, b: () => ({ number: '0x1000' }) });
    chainStateOf(h.net).observeLatest(h.net.upstreams[0]!, 100);
    const beyond = await h.run('eth_getBlockByNumber', ['0x1000', false], { retryEmpty: true });
    expect(beyond.result!.result).to.equal(null);
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a']);
    // within the distance: retried
    const within = await h.run('eth_getBlockByNumber', ['0xe4', false], { retryEmpty: true });
    expect(within.result!.result).to.deep.equal({ number: '0x1000' });
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a', 'a', 'b']);
  });

  it('with an unknown head (highestLatest 0) a far block is retried normally', async () => {
    h = await harness({ a: () => null, b: () => ({ number: '0xffffff' }) });
    const { result } = await h.run('eth_getBlockByNumber', ['0xffffff', false], { retryEmpty: true });
    expect(result!.result).to.deep.equal({ number: '0xffffff' });
  });

  it('maxRetryableBlockDistance is read from networks[].evm (owned by evm-state)', async () => {
    h = await harness({ a: () => null, b: () => ({ number: '0x70' }) });
    chainStateOf(h.net).observeLatest(h.net.upstreams[0]!, 100);
    (h.net.config.settings as { evm?: Record<string, unknown> }).evm = { ...(h.net.config.settings.evm as object), maxRetryableBlockDistance: 5 };
    const { result } = await h.run('eth_getBlockByNumber', ['0x70', false], { retryEmpty: true });
    expect(result!.result).to.equal(null);
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a']);
  });
});

describe('evm-retries plugin: retry-pending through the pipeline', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('a pending transaction is retried and the mined one is returned; one pending_tx retry counted', async () => {
    h = await harness({ a: () => PENDING_TX, b: () => MINED_TX });
    const { ctx, result } = await h.run('eth_getTransactionByHash', [TX_HASH], { retryPending: true });
    expect(result!.result).to.deep.equal(MINED_TX);
    expect(trace(ctx)).to.deep.equal(['a:error', 'b:success:won']);
    expect(await h.retries('pending_tx')).to.equal(1);
    expect(await h.retries('empty_result')).to.equal(0);
  });

  it('without the directive the pending transaction is returned', async () => {
    h = await harness({ a: () => PENDING_TX, b: () => MINED_TX });
    const { result } = await h.run('eth_getTransactionByHash', [TX_HASH], { retryEmpty: true });
    expect(result!.result).to.deep.equal(PENDING_TX);
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['a']);
  });

  it('when the other upstream does not know the transaction at all, the pending answer is served rather than its null', async () => {
    h = await harness({ a: () => PENDING_TX, b: () => null });
    const only = await h.run('eth_getTransactionByHash', [TX_HASH], { retryPending: true });
    expect(only.result!.result).to.deep.equal(PENDING_TX);
    expect(trace(only.ctx)).to.deep.equal(['a:success:won', 'b:success']);
    const both = await h.run('eth_getTransactionByHash', [TX_HASH], { retryPending: true, retryEmpty: true });
    expect(both.result!.result).to.deep.equal(PENDING_TX);
    expect(both.ctx.record.upstream).to.equal('a');
  });

  it('every upstream pending: the pending answer is the answer', async () => {
    h = await harness({ a: () => PENDING_TX, b: () => PENDING_TX });
    const { result, error } = await h.run('eth_getTransactionByHash', [TX_HASH], { retryPending: true });
    expect(error).to.equal(undefined);
    expect(result!.result).to.deep.equal(PENDING_TX);
  });

  it('the `pending` block tag is pending by definition: not retried', async () => {
    h = await harness({ a: () => PENDING_TX, b: () => MINED_TX });
    const { result } = await h.run('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x0'], { retryPending: true });
    expect(result!.result).to.deep.equal(PENDING_TX);
    expect(h.calls.length).to.equal(1);
  });

  it('non-transaction methods with a null blockNumber are not touched', async () => {
    h = await harness({ a: () => ({ foo: 1 }), b: () => ({ foo: 2 }) });
    const { result } = await h.run('eth_getBlockByHash', [TX_HASH, false], { retryPending: true });
    expect(result!.result).to.deep.equal({ foo: 1 });
  });
});

describe('evm-retries plugin: the shared retry counter', () => {
  it('upstreamRetriesCounter returns one counter per proxy registry (get-or-create)', async () => {
    const proxy = createProxy({ config: { metrics: { enabled: false } }, plugins: [failsafePlugin(), evmRetriesPlugin()], logger: createLogger('silent') });
    const c = upstreamRetriesCounter(proxy);
    expect(upstreamRetriesCounter(proxy)).to.equal(c);
    expect(proxy.metrics.getSingleMetric(UPSTREAM_RETRIES_METRIC)).to.equal(c);
    c.inc({ project: 'p', network: 'evm:1', category: 'x', reason: 'integrity_validation' });
    expect(await proxy.metrics.getSingleMetricAsString(UPSTREAM_RETRIES_METRIC)).to.contain('reason="integrity_validation"');
  });
});
