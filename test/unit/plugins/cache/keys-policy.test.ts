/**
 * Cache keys and policy matching: what a call is keyed by, which methods are
 * never cached, what counts as empty, and which policies may read and write a call.
 */
import { expect } from 'chai';
import { answeredBlock, callKey, isEmptyJson, neverCached } from '../../../../plugins/cache/keys.ts';
import { Policy } from '../../../../plugins/cache/policy.ts';
import type { PolicyConfig } from '../../../../plugins/cache/schema.ts';

const NET = 'evm:1';
const H = `0x${'ab'.repeat(32)}`;

function policy(over: Partial<PolicyConfig> = {}): Policy {
  return new Policy({ id: 'p', connector: 'c', network: '*', method: '*', finality: 'finalized', empty: 'ignore', appliesTo: 'both', ttl: 0, ...over });
}

describe('cache keys', () => {
  it('partition is network + block reference; range is method + params hash, never the id', () => {
    expect(callKey(NET, 'eth_getBlockByNumber', ['0x10', false], 'h')).to.deep.include({
      partition: 'evm:1:16',
      range: 'eth_getBlockByNumber:h',
      reverse: false,
      blockNumber: 16,
    });
    expect(callKey(NET, 'eth_getBalance', ['0xabc', 'latest'], 'h')).to.deep.include({ partition: 'evm:1:latest', tag: 'latest' });
    expect(callKey(NET, 'eth_getBalance', ['0xabc'], 'h')).to.deep.include(
      { partition: 'evm:1:latest', tag: 'latest' },
      'an omitted block param is the node default, latest',
    );
    expect(callKey(NET, 'eth_call', [{}, { blockHash: H }], 'h')).to.deep.include({ partition: `evm:1:${H}`, reverse: false });
    expect(callKey(NET, 'eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x5' }], 'h')).to.deep.include({ partition: 'evm:1:1-5', blockNumber: 5 });
    expect(callKey(NET, 'eth_getLogs', [{ fromBlock: '0x1', toBlock: 'latest' }], 'h')).to.deep.include({ tag: 'latest' });
    expect(callKey(NET, 'eth_blockNumber', [], 'h')).to.deep.include({ partition: 'evm:1:latest', tag: 'latest' });
    expect(callKey(NET, 'eth_chainId', [], 'h')).to.deep.include({ partition: 'evm:1:_', reverse: false });
  });

  it('a call reading the pending block is never cached (a nonce changes with every transaction sent)', () => {
    expect(callKey(NET, 'eth_getTransactionCount', ['0xabc', 'pending'], 'h')).to.equal(undefined);
    expect(callKey(NET, 'eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }], 'h')).to.equal(undefined);
    expect(callKey(NET, 'eth_getTransactionCount', ['0xabc', 'latest'], 'h')).to.not.equal(undefined);
  });

  it('the scope names the project as well as the network: two projects never share entries', () => {
    expect(callKey('dev/evm:1', 'eth_getBlockByNumber', ['0x10', false], 'h')?.partition).to.equal('dev/evm:1:16');
    expect(callKey('prod/evm:1', 'eth_getBlockByNumber', ['0x10', false], 'h')?.partition).to.equal('prod/evm:1:16');
  });

  it('lookups by transaction or block hash go through the reverse index', () => {
    for (const m of ['eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_getBlockByHash', 'debug_traceTransaction']) {
      expect(callKey(NET, m, [H], 'h'), m).to.deep.include({ partition: 'evm:1:*', reverse: true });
    }
  });

  it('never cached: writes, signing, the stateful filter methods and node administration', () => {
    for (const m of [
      'eth_sendRawTransaction',
      'eth_sendRawTransactionSync',
      'eth_sendTransaction',
      'eth_sendUserOperation',
      'eth_newFilter',
      'eth_getFilterChanges',
      'eth_getFilterLogs',
      'eth_uninstallFilter',
      'eth_newBlockFilter',
      'personal_sign',
      'anvil_mine',
      'evm_mine',
      'eth_subscribe',
    ]) {
      expect(neverCached(m), m).to.equal(true);
    }
    for (const m of ['eth_getBlockByNumber', 'eth_call', 'eth_getLogs', 'eth_getTransactionReceipt', 'debug_traceTransaction'])
      expect(neverCached(m), m).to.equal(false);
  });

  it('empty is null, "", "0x", "0x0", [] and {} (and nothing else)', () => {
    for (const e of ['null', '""', '"0x"', '"0x0"', '[]', '{}', '[ ]']) expect(isEmptyJson(e), e).to.equal(true);
    for (const e of ['"0x00"', '0', 'false', '"0x1"', '[null]', '{"a":1}', '"0x0000000000"']) expect(isEmptyJson(e), e).to.equal(false);
  });

  it('the block an answer names: a block by number/hash, a receipt by blockNumber/blockHash, a log list by its last block', () => {
    expect(answeredBlock('eth_getBlockByHash', { number: '0x10', hash: H, parentHash: '0x' })).to.deep.equal({ number: 16, hash: H });
    expect(answeredBlock('eth_getTransactionReceipt', { blockNumber: '0x11', blockHash: H, transactionHash: '0x1' })).to.deep.equal({ number: 17, hash: H });
    expect(answeredBlock('eth_getTransactionByBlockNumberAndIndex', { blockNumber: '0x11', blockHash: H, hash: '0x99' })).to.deep.equal({
      number: 17,
      hash: H,
    });
    expect(
      answeredBlock('eth_getLogs', [
        { blockNumber: '0x1', blockHash: H },
        { blockNumber: '0x3', blockHash: `0x${'cd'.repeat(32)}` },
      ]),
    ).to.deep.equal({ number: 3 });
    expect(
      answeredBlock('eth_getBlockReceipts', [
        { blockNumber: '0x3', blockHash: H },
        { blockNumber: '0x3', blockHash: H },
      ]),
    ).to.deep.equal({ number: 3, hash: H });
    expect(answeredBlock('eth_getTransactionReceipt', null)).to.deep.equal({});
  });
});

describe('cache policies', () => {
  it('reads: finalized ← finalized|unfinalized, realtime ← realtime, unknown ← any, unfinalized ← unfinalized', () => {
    const pol = {
      finalized: policy({ finality: 'finalized' }),
      unfinalized: policy({ finality: 'unfinalized' }),
      realtime: policy({ finality: 'realtime' }),
      unknown: policy({ finality: 'unknown' }),
    };
    const readable = (call: 'finalized' | 'unfinalized' | 'realtime' | 'unknown') =>
      Object.entries(pol)
        .filter(([, p]) => p.readable(call))
        .map(([k]) => k);
    expect(readable('finalized')).to.deep.equal(['finalized', 'unfinalized']);
    expect(readable('realtime')).to.deep.equal(['realtime']);
    expect(readable('unknown')).to.deep.equal(['finalized', 'unfinalized', 'realtime', 'unknown']);
    expect(readable('unfinalized')).to.deep.equal(['unfinalized']);
  });

  it('writes: exactly the call finality; appliesTo get never writes and set never reads', () => {
    expect(policy({ finality: 'finalized' }).writable('finalized', false, 10)).to.equal(true);
    expect(policy({ finality: 'unfinalized' }).writable('finalized', false, 10)).to.equal(false);
    expect(policy({ finality: 'finalized' }).writable('unknown', false, 10)).to.equal(false);
    expect(policy({ appliesTo: 'get' }).writable('finalized', false, 10)).to.equal(false);
    expect(policy({ appliesTo: 'set' }).readable('finalized')).to.equal(false);
    expect(policy({ appliesTo: 'set' }).writable('finalized', false, 10)).to.equal(true);
  });

  it('empty: ignore (default) skips empty answers, allow takes both, only takes only empty ones', () => {
    expect(policy().writable('finalized', true, 4)).to.equal(false);
    expect(policy({ empty: 'allow' }).writable('finalized', true, 4)).to.equal(true);
    expect(policy({ empty: 'allow' }).writable('finalized', false, 4)).to.equal(true);
    expect(policy({ empty: 'only' }).writable('finalized', true, 4)).to.equal(true);
    expect(policy({ empty: 'only' }).writable('finalized', false, 4)).to.equal(false);
  });

  it('minItemSize and maxItemSize bound the result bytes', () => {
    const p = policy({ minItemSize: 10, maxItemSize: 100 });
    expect(p.writable('finalized', false, 9)).to.equal(false);
    expect(p.writable('finalized', false, 10)).to.equal(true);
    expect(p.writable('finalized', false, 100)).to.equal(true);
    expect(p.writable('finalized', false, 101)).to.equal(false);
  });

  it('network and method globs (with |), params matchers by position and by key', () => {
    const p = policy({ network: 'evm:1|evm:10', method: 'eth_getBlock*|eth_call', params: ['0x1*', { to: '0xdead*' }] });
    expect(p.coversNetwork('evm:1')).to.equal(true);
    expect(p.coversNetwork('evm:137')).to.equal(false);
    expect(p.coversMethod('eth_getBlockByNumber')).to.equal(true);
    expect(p.coversMethod('eth_call')).to.equal(true);
    expect(p.coversMethod('eth_getLogs')).to.equal(false);
    expect(p.coversParams(['0x12', { to: '0xdeadbeef', data: '0x' }])).to.equal(true);
    expect(p.coversParams(['0x22', { to: '0xdeadbeef' }])).to.equal(false);
    expect(p.coversParams(['0x12', { to: '0xbeef' }])).to.equal(false);
    expect(policy({ params: ['*', 'latest'] }).coversParams(['0xabc', 'latest'])).to.equal(true);
    expect(policy({ params: ['*', 'latest'] }).coversParams(['0xabc', '0x1'])).to.equal(false);
  });

  it('a params matcher costs linear time and bounded input: a huge param does not match a glob', () => {
    const p = policy({ params: ['*a*a*a*a*a*a*a*b'] });
    const t = performance.now();
    expect(p.coversParams(['a'.repeat(100_000)])).to.equal(false);
    expect(p.coversParams(['a'.repeat(4000)])).to.equal(false);
    expect(performance.now() - t).to.be.below(200);
  });
});
