/**
 * Answers every client can trust (spec §4.2, §2.8): no request decides what other clients are
 * served. Real anvil nodes behind the default preset (memory cache and multiplexing on).
 *
 * - One parse, one truth: a body with a member given twice is refused before anything is keyed
 *   or sent, so a later plain call never gets another call's answer from the cache.
 * - Provenance: an answer obtained with `use-upstream` or `skip-consensus` is neither written to
 *   nor read from the shared cache; a pin matching nothing is `ErrUpstreamsExhausted`.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

/** Runtime code that returns its calldata: CALLDATASIZE PUSH0 PUSH0 CALLDATACOPY CALLDATASIZE PUSH0 RETURN. */
const ECHO_CODE = '0x365f5f37365ff3';
const ECHO = '0x00000000000000000000000000000000000ec40a';
const WHO = '0x00000000000000000000000000000000000b0b0b';
const RICH = '0x00000000000000000000000000000000000c0c0c';
const PATH = '/main/evm/31337';

describe('e2e: answers every client can trust (anvil, default preset)', () => {
  let a: AnvilHandle;
  let b: AnvilHandle;
  let svc: SvcHandle;
  before(async () => {
    [a, b] = await Promise.all([startAnvil({ chainId: 31337 }), startAnvil({ chainId: 31337 })]);
    // A few blocks, so svc knows a head (a realtime answer rests on one; at genesis none is cached).
    for (const node of [a, b]) {
      await node.rpc('anvil_mine', ['0x5']);
      await node.rpc('anvil_setCode', [ECHO, ECHO_CODE]);
    }
    // The two nodes disagree about WHO's balance: which one answered is visible in the result.
    await a.rpc('anvil_setBalance', [WHO, '0x1111']);
    await b.rpc('anvil_setBalance', [WHO, '0x2222']);
    for (const node of [a, b]) await node.rpc('anvil_setBalance', [RICH, '0x3333']);
    svc = await startSvc({
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [
            { id: 'a', endpoint: a.url, evm: { chainId: 31337 } },
            { id: 'b', endpoint: b.url, evm: { chainId: 31337 } },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  describe('one parse, one truth (spec §4.2)', () => {
    const data = (byte: string) => `0x${byte.repeat(40 * 1024)}`; // 40 KiB of calldata: params over 64 KiB of JSON text
    const params = (byte: string) => `[{"to":"${ECHO}","data":"${data(byte)}"},"latest"]`;

    it('params A then params B is refused with -32600 naming "params"; a later plain call with B gets B, never A from the cache', async () => {
      const dup = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":${params('aa')},"params":${params('bb')}}`;
      const refused = await svc.post(PATH, dup);
      expect(refused.json?.error?.code, refused.text.slice(0, 300)).to.equal(-32600);
      expect(refused.json.error.message).to.contain('"params"');
      const plain = await svc.post(PATH, `{"jsonrpc":"2.0","id":2,"method":"eth_call","params":${params('bb')}}`);
      expect(plain.json?.result, plain.text.slice(0, 200)).to.equal(data('bb'));
      expect(plain.headers['x-svc-cache']).to.not.equal('HIT');
    });

    it('"method" twice and "id" twice are refused in a batch element only; the neighbour succeeds', async () => {
      const body = `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"anvil_mine"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"},{"jsonrpc":"2.0","id":3,"id":4,"method":"eth_chainId"}]`;
      const res = await svc.post(PATH, body);
      expect(res.status).to.equal(200);
      const [m, ok, id] = res.json as Array<{ id: unknown; error?: { code: number; message: string }; result?: string }>;
      expect(m!.id).to.equal(1);
      expect(m!.error?.code).to.equal(-32600);
      expect(m!.error?.message).to.contain('"method"');
      expect(ok!.result).to.equal('0x7a69');
      expect(id!.id).to.equal(null);
      expect(id!.error?.message).to.contain('"id"');
    });
  });

  describe("the shared cache holds only answers obtained under the network's rules (spec §2.8)", () => {
    const balance = (id: number) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [WHO, 'latest'] });

    it('an answer pinned with use-upstream is not written: the next plain call is not a HIT', async () => {
      const pinned = await svc.post(PATH, balance(1), { 'X-SVC-Use-Upstream': 'b' });
      expect(pinned.json.result).to.equal('0x2222');
      const plain = await svc.post(PATH, balance(2));
      expect(plain.headers['x-svc-cache']).to.not.equal('HIT');
      expect(plain.headers['x-svc-upstream']).to.not.equal(undefined);
    });

    it('a pinned call never reads the cache: a pin matching nothing is ErrUpstreamsExhausted even when a plain answer is cached', async () => {
      // A plain answer is in the cache (its write follows the answer asynchronously).
      await waitFor(async () => (await svc.post(PATH, balance(3))).headers['x-svc-cache'] === 'HIT', 5000);
      const pinned = await svc.post(PATH, balance(5), { 'X-SVC-Use-Upstream': 'nope' });
      expect(pinned.json.error?.message ?? '', pinned.text).to.match(/exhausted|no upstream/i);
      expect(pinned.headers['x-svc-cache']).to.not.equal('HIT');
      // and a pin that does match asks its upstream, not the cache
      const pinnedB = await svc.post(PATH, balance(6), { 'X-SVC-Use-Upstream': 'b' });
      expect(pinnedB.headers['x-svc-cache']).to.not.equal('HIT');
      expect(pinnedB.headers['x-svc-upstream']).to.equal('b');
    });

    it('an answer fetched with skip-consensus is not written back', async () => {
      const params = [RICH, 'latest'];
      const skipped = await svc.post(PATH, { jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params }, { 'X-SVC-Skip-Consensus': 'true' });
      expect(skipped.json.result).to.equal('0x3333');
      const plain = await svc.post(PATH, { jsonrpc: '2.0', id: 8, method: 'eth_getBalance', params });
      expect(plain.headers['x-svc-cache']).to.equal('MISS');
    });
  });
});
