/**
 * Unit tests of the evm-answer-sanity plugin (spec §7, answers that cannot be right): the
 * known-block and blind-logs rules on a hand-made chain state, and the composed pipeline on stub
 * upstreams (a null state read moves on and is charged; all null is an error, never the null).
 */
import { expect } from 'chai';
import { isBlindLogsAnswer, isKnownBlock, isLaggingOnUnknownHash, numberOfKnownHash } from '../../../plugins/evm-answer-sanity/index.ts';
import type { NetworkChainState, UpstreamChainState } from 'svc-proxy/plugins/evm-state';
import { NO_CHAIN_STATE } from 'svc-proxy/plugins/evm-state';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { blameOf } from '../../../core/pipeline/blame.ts';
import { presetWithout } from '../../helpers/svc.ts';
import { startStubProxy, type StubProxy } from '../../helpers/stub-proxy.ts';

const HASH5 = `0x${'ab'.repeat(32)}`;
const ADDR = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

/** A chain state with head 10, block 5 known by {@link HASH5}, and per-upstream heads. */
function chain(heads: Record<string, number>): NetworkChainState {
  return {
    ...NO_CHAIN_STATE,
    highestLatest: 10,
    hashAt: (n: number) => (n === 5 ? HASH5 : undefined),
    peek: (u: Upstream) => (u.id in heads ? ({ latest: heads[u.id], finalized: 0, syncing: false, lastPollAt: 0 } as UpstreamChainState) : undefined),
  };
}
const up = (id: string) => ({ id }) as Upstream;

describe('evm-answer-sanity', () => {
  it('knows tags (not pending), numbers up to the head and recent hashes', () => {
    const c = chain({});
    expect(isKnownBlock('eth_getBalance', [ADDR, 'latest'], c)).to.equal(true);
    expect(isKnownBlock('eth_getBalance', [ADDR, 'pending'], c)).to.equal(false);
    expect(isKnownBlock('eth_getBalance', [ADDR, '0xa'], c)).to.equal(true);
    expect(isKnownBlock('eth_getBalance', [ADDR, '0xb'], c)).to.equal(false);
    expect(isKnownBlock('eth_getBalance', [ADDR, { blockHash: HASH5 }], c)).to.equal(true);
    expect(isKnownBlock('eth_getBalance', [ADDR, { blockHash: `0x${'cd'.repeat(32)}` }], c)).to.equal(false);
    expect(numberOfKnownHash(c, HASH5.toUpperCase().replace('0X', '0x'))).to.equal(5);
    // With no head known, only tags are known.
    expect(isKnownBlock('eth_getBalance', [ADDR, '0x1'], NO_CHAIN_STATE)).to.equal(false);
  });

  it('an empty eth_getLogs by blockHash is blind only from an upstream whose head is below the block', () => {
    const c = chain({ low: 4, at5: 5, lagging: 9, unknown: 0 });
    expect(isBlindLogsAnswer([{ blockHash: HASH5 }], c, up('low'))).to.equal(true);
    expect(isBlindLogsAnswer([{ blockHash: HASH5 }], c, up('at5'))).to.equal(false);
    // Hash not among the recent ones: judged against the network head.
    const other = `0x${'ef'.repeat(32)}`;
    expect(isBlindLogsAnswer([{ blockHash: other }], c, up('lagging'))).to.equal(true);
    expect(isBlindLogsAnswer([{ blockHash: other }], chain({ top: 10 }), up('top'))).to.equal(false);
    // An upstream whose head is unknown is believed; a range filter is never judged here.
    expect(isBlindLogsAnswer([{ blockHash: HASH5 }], c, up('unknown'))).to.equal(false);
    expect(isBlindLogsAnswer([{ fromBlock: '0x1', toBlock: '0x2' }], c, up('low'))).to.equal(false);
  });

  it('a null at a hash svc has not recorded is a lagging answer only from an upstream behind the network head', () => {
    const c = chain({ lagging: 9, top: 10, unknown: 0 });
    const other = { blockHash: `0x${'ef'.repeat(32)}` };
    expect(isLaggingOnUnknownHash('eth_getBalance', [ADDR, other], c, up('lagging'))).to.equal(true);
    expect(isLaggingOnUnknownHash('eth_getBalance', [ADDR, other], c, up('top'))).to.equal(false);
    expect(isLaggingOnUnknownHash('eth_getBalance', [ADDR, other], c, up('unknown'))).to.equal(false);
    expect(isLaggingOnUnknownHash('eth_getBalance', [ADDR, '0x3'], c, up('lagging'))).to.equal(false);
  });

  describe('in the composed pipeline (stub upstreams, no chain head)', () => {
    let stub: StubProxy | undefined;
    afterEach(async () => {
      await stub?.close();
      stub = undefined;
    });

    it('a null eth_getBalance at latest moves to the next upstream, charged to the first', async () => {
      stub = await startStubProxy({ liar: () => null, honest: () => '0x10' }, presetWithout('evm-state'));
      const { result, error, ctx } = await stub.run('eth_getBalance', [ADDR, 'latest']);
      expect(error?.message).to.equal(undefined);
      expect(result?.result).to.equal('0x10');
      const first = ctx.record.attempts.find((a) => a.upstreamId === 'liar');
      expect(first?.error && blameOf(first.error as never)).to.equal('upstream');
    });

    it('when every upstream answers null, the client gets an error, not null', async () => {
      stub = await startStubProxy({ a: () => null, b: () => null }, presetWithout('evm-state'));
      const { result, error } = await stub.run('eth_getCode', [ADDR, 'latest']);
      expect(result).to.equal(undefined);
      expect(error?.name).to.equal('ErrUpstreamsExhausted');
      expect(error?.message).to.match(/ErrEndpointContentValidation/);
    });

    it('a null eth_getBalance at the pending tag is served as it is', async () => {
      stub = await startStubProxy({ a: () => null }, presetWithout('evm-state'));
      const { result } = await stub.run('eth_getBalance', [ADDR, 'pending']);
      expect(result?.result).to.equal(null);
    });
  });
});
