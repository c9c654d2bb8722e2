/**
 * Unit tests of the evm-methods plugin (spec §2.8 #4): local `eth_chainId`, the
 * stateful filter guard, the unsupported-method guard and `eth_sendRawTransaction`
 * idempotency, through the pipeline of a started proxy whose upstream transports are scripted
 * in-process stubs, plus the pure helpers.
 */
import { expect } from 'chai';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  ErrEndpointExecutionException,
  ErrEndpointNonceException,
  ErrEndpointServerSideException,
  ErrEndpointUnsupported,
  ErrNotImplemented,
  ErrUpstreamsExhausted,
} from '../../../core/wire/errors.ts';
import { CallStage, SelectStage } from '../../../core/pipeline/stages.ts';
import { presetWithout } from '../../helpers/svc.ts';
import { startStubProxy, type Script, type StubProxy } from '../../helpers/stub-proxy.ts';
import {
  classifyBroadcastFailure,
  DEFAULT_UNSUPPORTED_METHODS,
  evmMethodsPlugin,
  IDEMPOTENT_BROADCAST_STAGE,
  STATEFUL_GUARD_SELECT_STAGE,
  STATEFUL_METHODS,
  transactionHashOf,
  type EvmMethodsPluginOptions,
} from '../../../plugins/evm-methods/index.ts';
import { evmRetriesPlugin } from '../../../plugins/evm-retries/index.ts';

type Harness = StubProxy;

async function harness(scripts: Record<string, Script>, opts: EvmMethodsPluginOptions = {}): Promise<Harness> {
  // No evm-state: the stubs model no chain head (its state poller would call them and score
  // them); tests that need a head set it by hand with chainStateOf(...).observeLatest. No filters
  // plugin: the guard under test is what filter methods meet without it (or with it turned off).
  return startStubProxy(scripts, [...presetWithout('evm-state', 'evm-retries', 'evm-methods', 'filters'), evmRetriesPlugin(), evmMethodsPlugin(opts)]);
}

const PK0 = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

/** A signed EIP-1559 transfer from anvil dev account #0. */
async function signedTx(nonce: number, value = 1n): Promise<Hex> {
  return privateKeyToAccount(PK0).signTransaction({
    chainId: 31337,
    type: 'eip1559',
    to: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    value,
    nonce,
    gas: 21000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
  });
}

/** A nonce exception as the normaliser builds it from anvil's answer. */
const nonceErr = (message: string) => new ErrEndpointNonceException(message, { details: { upstreamCode: -32003 } });

describe('evm-methods plugin: helpers', () => {
  it('lists the six stateful filter methods and the default unsupported methods', () => {
    expect([...STATEFUL_METHODS].sort()).to.deep.equal(
      ['eth_getFilterChanges', 'eth_getFilterLogs', 'eth_newBlockFilter', 'eth_newFilter', 'eth_newPendingTransactionFilter', 'eth_uninstallFilter'].sort(),
    );
    expect(DEFAULT_UNSUPPORTED_METHODS).to.deep.equal(['eth_accounts', 'eth_sign']);
    expect(STATEFUL_GUARD_SELECT_STAGE).to.be.greaterThan(SelectStage.USE_UPSTREAM).and.greaterThan(SelectStage.AVAILABILITY);
    expect(IDEMPOTENT_BROADCAST_STAGE).to.be.lessThan(CallStage.LOCAL_METHODS).and.greaterThan(CallStage.TIP_ENFORCEMENT);
  });

  it('transactionHashOf: keccak-256 of the raw signed bytes, as a node computes it', async () => {
    const raw = await signedTx(0);
    expect(await transactionHashOf([raw])).to.equal(keccak256(raw));
    expect(await transactionHashOf([raw])).to.match(/^0x[0-9a-f]{64}$/);
    expect(await transactionHashOf([])).to.equal(undefined);
    expect(await transactionHashOf(['0x123'])).to.equal(undefined);
    expect(await transactionHashOf(['nothex'])).to.equal(undefined);
    expect(await transactionHashOf({ raw })).to.equal(undefined);
  });

  it('classifyBroadcastFailure: already known / nonce too low, through exhausted causes; never a revert', () => {
    expect(classifyBroadcastFailure(nonceErr('transaction already imported'))).to.equal('already_known');
    expect(classifyBroadcastFailure(nonceErr('already known'))).to.equal('already_known');
    expect(classifyBroadcastFailure(nonceErr('known transaction: 0xabc'))).to.equal('already_known');
    expect(classifyBroadcastFailure(nonceErr('tx already in mempool'))).to.equal('already_known');
    expect(classifyBroadcastFailure(nonceErr('nonce too low'))).to.equal('nonce_too_low');
    expect(classifyBroadcastFailure(nonceErr('nonce has already been used'))).to.equal('nonce_too_low');
    expect(classifyBroadcastFailure(new ErrUpstreamsExhausted([new ErrEndpointServerSideException('boom'), nonceErr('nonce too low')]))).to.equal(
      'nonce_too_low',
    );
    expect(classifyBroadcastFailure(new ErrUpstreamsExhausted([nonceErr('nonce too low'), nonceErr('already known')]))).to.equal('already_known');
    // -32003 execution errors without revert data are read; reverts (code 3) never
    expect(classifyBroadcastFailure(new ErrEndpointExecutionException('nonce is too low', { code: -32003 }))).to.equal('nonce_too_low');
    expect(classifyBroadcastFailure(new ErrEndpointExecutionException('execution reverted: already known', { code: 3, upstreamData: '0x08c379a0' }))).to.equal(
      undefined,
    );
    expect(classifyBroadcastFailure(new ErrEndpointExecutionException('replacement transaction underpriced', { code: -32003 }))).to.equal(undefined);
    expect(classifyBroadcastFailure(new ErrEndpointServerSideException('already known'))).to.equal(undefined);
    expect(classifyBroadcastFailure(new Error('already known'))).to.equal(undefined);
  });

  it('rejects a malformed unsupportedMethods option at construction', () => {
    expect(() => evmMethodsPlugin({ unsupportedMethods: 'eth_accounts' as unknown as string[] })).to.throw(TypeError);
  });
});

describe('evm-methods plugin: local methods and guards through the pipeline', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('eth_chainId is answered from config with no upstream attempt', async () => {
    h = await harness({ a: () => '0x1' });
    const { ctx, result } = await h.run('eth_chainId', []);
    expect(result!.result).to.equal('0x7a69');
    expect(result!.json()).to.equal('"0x7a69"');
    expect(ctx.record.attempts).to.deep.equal([]);
    expect(h.calls).to.deep.equal([]);
  });

  it('eth_chainId with skip-cache-read: true is forwarded (as in eRPC); a glob value is not', async () => {
    h = await harness({ a: () => '0x7a69' });
    await h.run('eth_chainId', [], { skipCacheRead: 'memory*' });
    expect(h.calls.length).to.equal(0);
    const { result } = await h.run('eth_chainId', [], { skipCacheRead: 'true' });
    expect(result!.result).to.equal('0x7a69');
    expect(h.calls.map((c) => c.method)).to.deep.equal(['eth_chainId']);
  });

  it('eth_accounts and eth_sign are refused with ErrEndpointUnsupported (-32601) without an upstream call', async () => {
    h = await harness({ a: () => ['0x1'] });
    for (const m of ['eth_accounts', 'eth_sign']) {
      const { error } = await h.run(m, []);
      expect(error, m).to.be.instanceOf(ErrEndpointUnsupported);
      expect(error!.code).to.equal(-32601);
    }
    expect(h.calls).to.deep.equal([]);
  });

  it('unsupportedMethods: [] forwards eth_accounts', async () => {
    h = await harness({ a: () => ['0x1'] }, { unsupportedMethods: [] });
    const { result } = await h.run('eth_accounts', []);
    expect(result!.result).to.deep.equal(['0x1']);
  });

  it('stateful filter methods with several candidates fail with ErrNotImplemented, listing the candidates', async () => {
    h = await harness({ a: () => '0x1', b: () => '0x2' });
    for (const m of STATEFUL_METHODS) {
      const { error } = await h.run(m, m === 'eth_newFilter' ? [{}] : m.startsWith('eth_new') ? [] : ['0x1']);
      expect(error, m).to.be.instanceOf(ErrNotImplemented);
      expect(error!.code).to.equal(-32601);
      expect(error!.details).to.deep.include({ candidates: ['a', 'b'] });
    }
    expect(h.calls).to.deep.equal([]);
  });

  it('with use-upstream narrowing to one upstream the filter method goes to it', async () => {
    h = await harness({ a: () => '0x1', b: () => '0x2' });
    const { result } = await h.run('eth_newBlockFilter', [], { useUpstream: 'b' });
    expect(result!.result).to.equal('0x2');
    expect(h.calls.map((c) => c.upstream)).to.deep.equal(['b']);
    // a selector matching both is still ambiguous
    const both = await h.run('eth_getFilterChanges', ['0x2'], { useUpstream: '*' });
    expect(both.error).to.be.instanceOf(ErrNotImplemented);
  });

  it('a network with a single upstream serves filter methods without a directive; other methods are not guarded', async () => {
    h = await harness({ only: () => '0x9' });
    expect((await h.run('eth_newFilter', [{}])).result!.result).to.equal('0x9');
    await h.close();
    h = await harness({ a: () => '0x1', b: () => '0x2' });
    expect((await h.run('eth_blockNumber', [])).result!.result).to.equal('0x1');
  });
});

describe('evm-methods plugin: eth_sendRawTransaction idempotency through the pipeline', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('an "already imported" answer becomes success with the transaction hash, with no lookup', async () => {
    const raw = await signedTx(1);
    h = await harness({
      a: () => {
        throw nonceErr('transaction already imported');
      },
    });
    const { result, error } = await h.run('eth_sendRawTransaction', [raw]);
    expect(error).to.equal(undefined);
    expect(result!.result).to.equal(keccak256(raw));
    expect(h.calls.map((c) => c.method)).to.deep.equal(['eth_sendRawTransaction']);
  });

  it('"nonce too low" for a transaction eth_getTransactionByHash finds becomes success; the lookup shows in the trace', async () => {
    const raw = await signedTx(0);
    const hash = keccak256(raw);
    h = await harness({
      a: (m, p) => {
        if (m === 'eth_getTransactionByHash') return { hash: (p as string[])[0], blockNumber: '0x1' };
        throw nonceErr('nonce too low');
      },
    });
    const { ctx, result } = await h.run('eth_sendRawTransaction', [raw]);
    expect(result!.result).to.equal(hash);
    expect(h.calls.map((c) => `${c.method}:${JSON.stringify(c.params)}`)).to.deep.equal([
      `eth_sendRawTransaction:${JSON.stringify([raw])}`,
      `eth_getTransactionByHash:${JSON.stringify([hash])}`,
    ]);
    expect(ctx.record.attempts.map((a) => `${a.upstreamId}:${a.method}:${a.outcome}`)).to.deep.equal([
      'a:eth_sendRawTransaction:exec_revert',
      'a:eth_getTransactionByHash:success',
    ]);
  });

  it('the lookup asks the next upstream when the first does not know the transaction (retry-empty forced on)', async () => {
    const raw = await signedTx(0);
    h = await harness({
      a: (m) => {
        if (m === 'eth_getTransactionByHash') return null;
        throw nonceErr('nonce too low');
      },
      b: (_m, p) => ({ hash: (p as string[])[0], blockNumber: '0x1' }),
    });
    const { result } = await h.run('eth_sendRawTransaction', [raw]);
    expect(result!.result).to.equal(keccak256(raw));
    expect(h.calls.map((c) => `${c.upstream}:${c.method}`)).to.deep.equal([
      'a:eth_sendRawTransaction',
      'a:eth_getTransactionByHash',
      'b:eth_getTransactionByHash',
    ]);
  });

  it('"nonce too low" for a transaction nobody has (another transaction used the nonce) stays an error', async () => {
    const raw = await signedTx(0, 99n);
    h = await harness({
      a: (m) => {
        if (m === 'eth_getTransactionByHash') return null;
        throw nonceErr('nonce too low');
      },
      b: () => null,
    });
    const { error } = await h.run('eth_sendRawTransaction', [raw]);
    expect(error).to.be.instanceOf(ErrEndpointNonceException);
    expect(error!.message).to.equal('nonce too low');
  });

  it('a failing lookup leaves the nonce error as it was', async () => {
    const raw = await signedTx(0);
    h = await harness({
      a: (m) => {
        if (m === 'eth_getTransactionByHash') throw new ErrEndpointServerSideException('down');
        throw nonceErr('nonce too low');
      },
    });
    const { error } = await h.run('eth_sendRawTransaction', [raw]);
    expect(error).to.be.instanceOf(ErrEndpointNonceException);
  });

  it('reverts and other errors pass through unchanged', async () => {
    const raw = await signedTx(0);
    const revert = new ErrEndpointExecutionException('execution reverted: nope', { code: 3, upstreamData: '0x08c379a0' });
    h = await harness({
      a: () => {
        throw revert;
      },
    });
    const { error } = await h.run('eth_sendRawTransaction', [raw]);
    expect(error).to.equal(revert);
  });

  it('a duplicate with unparsable params is not turned into success', async () => {
    h = await harness({
      a: () => {
        throw nonceErr('already known');
      },
    });
    const { error } = await h.run('eth_sendRawTransaction', ['0xzz']);
    expect(error).to.be.instanceOf(ErrEndpointNonceException);
  });

  it('idempotentBroadcast: false keeps the node error', async () => {
    const raw = await signedTx(1);
    h = await harness(
      {
        a: () => {
          throw nonceErr('already known');
        },
      },
      { idempotentBroadcast: false },
    );
    const { error } = await h.run('eth_sendRawTransaction', [raw]);
    expect(error).to.be.instanceOf(ErrEndpointNonceException);
  });
});
