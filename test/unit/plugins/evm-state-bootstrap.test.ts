/**
 * The start-up window of a network's head (docs/evm.md "Head plausibility"): before any upstream's head is vouched for, the first
 * upstream to answer a client's head call would decide what that client is served. A head call waits, bounded, for the state polls
 * to vouch a head, so a liar answering first is judged like later and never served.
 */
import { expect } from 'chai';
import { chainStateOf } from '../../../plugins/evm-state/chain.ts';
import { FIRST_VOUCH_WAIT_MS, vouched, whenVouched } from '../../../plugins/evm-state/vouch-wait.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startStubProxy, type StubProxy } from '../../helpers/stub-proxy.ts';
import { waitFor } from '../../helpers/svc.ts';

const FAR = '0x7fffffff';
const HEAD = '0x10';
const block = (n: string) => ({ number: n, hash: `0x${n.slice(2).padStart(64, '0')}`, parentHash: `0x${'00'.repeat(32)}`, timestamp: '0x1' });

describe('evm-state: a head call at start-up waits for a vouched head', function () {
  this.timeout(20_000);
  let stub: StubProxy | undefined;
  afterEach(async () => {
    await stub?.close();
    stub = undefined;
  });

  it('a liar answering first, before the honest upstreams have reported, is never served: the call waits and gets the vouched head', async () => {
    // The honest nodes answer their first head only once released: until then nothing but the liar has spoken.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const honest = async (method: string) => {
      await released;
      return method === 'eth_blockNumber' ? HEAD : method === 'eth_getBlockByNumber' ? block(HEAD) : null;
    };
    const liar = (method: string) => (method === 'eth_blockNumber' ? FAR : method === 'eth_getBlockByNumber' ? block(FAR) : null);
    stub = await startStubProxy({ liar, b: honest, c: honest }, defaultPreset());
    const st = chainStateOf(stub.net);
    expect(st.vouchedLatest, 'nothing vouched before the honest nodes answer').to.equal(0);
    const call = stub.run('eth_blockNumber', []);
    setTimeout(release, 200);
    const { result, error } = await call;
    expect(error, error?.message).to.equal(undefined);
    expect(result?.result).to.equal(HEAD);
    expect(st.vouchedLatest).to.equal(0x10);
  });

  it('a chain at block 0 has a vouched head once two upstreams agree on it: head calls no longer wait', async () => {
    const genesis = (method: string) => (method === 'eth_blockNumber' ? '0x0' : method === 'eth_getBlockByNumber' ? block('0x0') : null);
    stub = await startStubProxy({ a: genesis, b: genesis }, defaultPreset());
    const st = chainStateOf(stub.net);
    await waitFor(() => st.anyVouched, 10_000);
    expect(st.vouchedLatest, 'vouched, at block 0').to.equal(0);
    // Already vouched: the wait is a promise that has settled before any timer could run.
    const settled = await Promise.race([whenVouched(st, 60_000).then(() => true), new Promise((r) => setImmediate(() => r(false)))]);
    expect(settled).to.equal(true);
    expect((await stub.run('eth_blockNumber', [])).result?.result).to.equal('0x0');
  });

  it('whenVouched resolves at once with a vouched head, on the first vouching, or after its bound', async () => {
    stub = await startStubProxy({ a: () => HEAD }, defaultPreset());
    const st = chainStateOf(stub.net);
    const t0 = Date.now();
    const waiting = whenVouched(st, 60_000);
    vouched(st);
    await waiting;
    expect(Date.now() - t0).to.be.below(FIRST_VOUCH_WAIT_MS);
    // A bound of 0 never waits; a short bound ends the wait without a vouching.
    await whenVouched(st, 0);
    await whenVouched(st, 5);
  });
});
