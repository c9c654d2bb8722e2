/**
 * The select plugin's node-administration deny list (plugins/select/method-guard.ts): which
 * methods are refused by default, how `networks[].allowMethods` and an upstream's `allowMethods`
 * lift it, and what error a refused call gets. End to end against anvil:
 * test/e2e/admin-methods-deny.test.ts.
 */
import { expect } from 'chai';
import { ErrUpstreamMethodIgnored, ErrUpstreamsExhausted } from '../../../core/wire/errors.ts';
import type { Network } from '../../../core/registry/project.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { compileDenyList, DEFAULT_DENIED_METHODS, explicitAllowOf, MethodGuard } from '../../../plugins/select/index.ts';

/** An upstream as the guard sees it: id, `allowMethods`, and method support (`ignoreMethods` here). */
function upstream(id: string, allowMethods: string[] = [], ignored: string[] = []): Upstream {
  return { id, config: { allowMethods }, supportsMethod: (m: string) => !ignored.includes(m) } as unknown as Upstream;
}

function network(ups: Upstream[], allowMethods?: string[]): Network {
  return { id: 'evm:31337', upstreams: ups, config: { settings: allowMethods ? { allowMethods } : {} } } as unknown as Network;
}

/** Methods that change a node's state or use its keys, one or more per family of the default list. */
const ADMIN = [
  'anvil_mine',
  'anvil_setBalance',
  'anvil_impersonateAccount',
  'hardhat_mine',
  'hardhat_setBalance',
  'evm_snapshot',
  'evm_revert',
  'evm_mine',
  'evm_increaseTime',
  'evm_setNextBlockTimestamp',
  'evm_setAutomine',
  'debug_setHead',
  'debug_setGCPercent',
  'debug_startCPUProfile',
  'debug_writeMemProfile',
  'debug_chaindbCompact',
  'admin_addPeer',
  'admin_stopHTTP',
  'personal_unlockAccount',
  'personal_sendTransaction',
  'personal_sign',
  'miner_start',
  'miner_setEtherbase',
  'txpool_clear',
  'engine_forkchoiceUpdatedV3',
  'engine_newPayloadV4',
  'clique_propose',
  'clique_discard',
  'parlia_propose',
  'les_addBalance',
  'eth_sendTransaction',
  'eth_signTransaction',
  'eth_signTypedData_v4',
  'db_putString',
  'tenderly_setBalance',
];

/** Reads clients and indexers use, which must stay forwarded. */
const READS = [
  'eth_call',
  'eth_getBalance',
  'eth_blockNumber',
  'eth_getLogs',
  'eth_sendRawTransaction',
  'net_version',
  'web3_clientVersion',
  'debug_traceTransaction',
  'debug_traceCall',
  'debug_getRawBlock',
  'trace_block',
  'txpool_content',
  'txpool_contentFrom',
  'txpool_inspect',
  'txpool_status',
  'txpool_besuTransactions',
  'clique_getSigners',
  'clique_getSnapshot',
  'clique_status',
  'parlia_getValidators',
  'eth_evm_mine',
  'xanvil_mine',
];

describe('select plugin: node administration deny list', () => {
  const denied = compileDenyList(DEFAULT_DENIED_METHODS);

  it('denies every family of node administration methods by default', () => {
    for (const m of ADMIN) expect(denied(m), m).to.equal(true);
  });

  it('keeps reads forwarded: txpool and clique/parlia reads, tracing, ordinary eth_*', () => {
    for (const m of READS) expect(denied(m), m).to.equal(false);
  });

  it('a `!` entry takes names back out of the list; [] denies nothing', () => {
    const d = compileDenyList(['foo_*', '!foo_read*']);
    expect(d('foo_write')).to.equal(true);
    expect(d('foo_readAll')).to.equal(false);
    expect(d('bar_write')).to.equal(false);
    expect(compileDenyList([])('anvil_mine')).to.equal(false);
    expect(compileDenyList(['!x'])('x')).to.equal(false);
    expect(() => compileDenyList([1] as unknown as string[])).to.throw(TypeError);
  });

  it("an upstream's bare `*` does not lift the list; a named family does", () => {
    expect(explicitAllowOf(['*'])('anvil_mine')).to.equal(false);
    expect(explicitAllowOf(['**', 'eth_*'])('anvil_mine')).to.equal(false);
    expect(explicitAllowOf(['anvil_*', 'evm_*'])('anvil_mine')).to.equal(true);
    expect(explicitAllowOf(['anvil_*', 'evm_*'])('evm_snapshot')).to.equal(true);
    expect(explicitAllowOf(['anvil_*'])('debug_setHead')).to.equal(false);
  });

  it('a denied method with no allowance anywhere is ErrUpstreamMethodIgnored (-32601, HTTP 200), naming the way to allow it', () => {
    const guard = new MethodGuard();
    const ups = [upstream('a'), upstream('b', ['*'])];
    const net = network(ups);
    expect(guard.restricted(net, 'evm_mine')).to.equal(true);
    expect(guard.restricted(net, 'eth_call')).to.equal(false);
    let err: unknown;
    try {
      guard.filter(ups, net, 'evm_mine');
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ErrUpstreamMethodIgnored);
    const e = err as ErrUpstreamMethodIgnored;
    expect(e.code).to.equal(-32601);
    expect(e.httpStatus).to.equal(200);
    expect(e.message).to.contain('evm_mine').and.contain('allowMethods');
    expect(e.details).to.deep.equal({ method: 'evm_mine', network: 'evm:31337' });
  });

  it('networks[].allowMethods lifts the named families for every upstream, and only those', () => {
    const guard = new MethodGuard();
    const net = network([upstream('a')], ['anvil_*', 'evm_*']);
    expect(guard.restricted(net, 'anvil_mine')).to.equal(false);
    expect(guard.restricted(net, 'evm_snapshot')).to.equal(false);
    expect(guard.restricted(net, 'debug_setHead')).to.equal(true);
    expect(guard.restricted(net, 'admin_addPeer')).to.equal(true);
    // `*` on the network turns the list off there.
    expect(new MethodGuard().restricted(network([], ['*']), 'admin_addPeer')).to.equal(false);
  });

  it("an upstream's allowMethods lets the method through to that upstream only", () => {
    const guard = new MethodGuard();
    const dev = upstream('dev', ['anvil_*', 'evm_*']);
    const ups = [upstream('paid'), dev, upstream('other', ['*'])];
    const net = network(ups);
    expect(guard.restricted(net, 'anvil_mine')).to.equal(true);
    expect(guard.filter(ups, net, 'anvil_mine').map((u) => u.id)).to.deep.equal(['dev']);
    // An upstream that does not serve the method at all (learnt unsupported) is not given it.
    const ignoring = upstream('dev2', ['anvil_*'], ['anvil_mine']);
    expect(() => guard.filter([ignoring], network([ignoring]), 'anvil_mine')).to.throw(ErrUpstreamMethodIgnored);
  });

  it('when the allowing upstream is not a candidate now (cordoned, not selected) the call is exhausted, not ignored', () => {
    const guard = new MethodGuard();
    const dev = upstream('dev', ['anvil_*']);
    const other = upstream('other');
    expect(() => guard.filter([other], network([other, dev]), 'anvil_mine'))
      .to.throw(ErrUpstreamsExhausted)
      .with.property('message')
      .that.contains('dev');
  });

  it('a custom list replaces the default one', () => {
    const guard = new MethodGuard(['trace_*']);
    const net = network([upstream('a')]);
    expect(guard.restricted(net, 'trace_block')).to.equal(true);
    expect(guard.restricted(net, 'anvil_mine')).to.equal(false);
    expect(new MethodGuard([]).restricted(net, 'admin_addPeer')).to.equal(false);
  });

  it('verdicts are cached per method but bounded: a flood of distinct names keeps answering right', () => {
    const guard = new MethodGuard();
    const net = network([upstream('a')]);
    for (let i = 0; i < 3000; i++) expect(guard.restricted(net, `anvil_x${i}`)).to.equal(true);
    for (let i = 0; i < 3000; i++) expect(guard.restricted(net, `eth_x${i}`)).to.equal(false);
  });
});
