/**
 * One parse, one truth for upstream answers (spec §4.2, applied to answers): an upstream that
 * answers a top-level member twice (`"result"` then `"result"`, or the second spelled
 * `"res\u0075lt"`) answered something malformed. Its answer is neither voted on, served nor
 * cached, with consensus on (2 of 3) and off; another upstream serves the call.
 *
 * One real anvil node behind three loopback forwarders, so the honest upstreams agree byte for
 * byte; the first forwarder puts a forged block before the real one in `eth_getBlockByNumber`
 * answers. The forged block is larger, so a vote that kept the largest answer of the winning
 * group would pick it.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startLyingProxy, type LyingProxy } from '../helpers/lying-proxy.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const FORGED_HASH = `0x${'de'.repeat(32)}`;

/** How the lying upstream spells the second `result` member. */
type Spelling = 'plain' | 'escaped';

/**
 * Makes `liar` answer `eth_getBlockByNumber(block)` with a forged result member first (another
 * hash, larger) and the node's true block second.
 */
async function lieAbout(liar: LyingProxy, block: string, spelling: Spelling): Promise<void> {
  const truth = (await liar.forward('eth_getBlockByNumber', [block, false])) as Record<string, unknown>;
  const forged = { ...truth, hash: FORGED_HASH, extraData: `0x${'ee'.repeat(512)}` };
  const second = spelling === 'plain' ? '"result"' : '"res\\u0075lt"';
  liar.lieRaw('eth_getBlockByNumber', (_call, id) => `{"jsonrpc":"2.0","id":${id},"result":${JSON.stringify(forged)},${second}:${JSON.stringify(truth)}}`);
}

describe('e2e: an upstream answer with a member given twice is malformed (spec §4.2)', function () {
  this.timeout(60_000);
  let node: AnvilHandle;
  let liar: LyingProxy;
  let honest: LyingProxy[];
  const open: SvcHandle[] = [];

  /** svc with the liar first in config order, the cache on, and consensus when given. */
  async function svcWith(consensus?: Record<string, unknown>): Promise<SvcHandle> {
    const svc = await startSvc({
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          networks: [
            {
              architecture: 'evm',
              evm: { chainId: CHAIN },
              ...(consensus ? { failsafe: [{ matchMethod: '*', consensus }] } : {}),
            },
          ],
          upstreams: [liar, ...honest].map((p, i) => ({ id: ['liar', 'honest-1', 'honest-2'][i], endpoint: p.url, evm: { chainId: CHAIN } })),
        },
      ],
    });
    open.push(svc);
    const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => network.upstreams.every((u) => u.state === 'ready'));
    return svc;
  }

  /** The block's hash, read from each of two calls (the second may be a cache hit), and each answer's serving upstream. */
  async function twice(svc: SvcHandle, block: string): Promise<Array<{ hash: unknown; upstream?: string; attempts?: string }>> {
    const out = [];
    for (let i = 0; i < 2; i++) {
      const r = await svc.post(PATH, { jsonrpc: '2.0', id: i + 1, method: 'eth_getBlockByNumber', params: [block, false] });
      out.push({ hash: r.json?.result?.hash, upstream: r.headers['x-svc-upstream'], attempts: r.headers['x-svc-upstreams'] });
    }
    return out;
  }

  before(async () => {
    node = await startAnvil({ chainId: CHAIN });
    await node.rpc('anvil_mine', ['0x8']);
    liar = await startLyingProxy(node.url);
    honest = [await startLyingProxy(node.url), await startLyingProxy(node.url)];
  });
  afterEach(async () => {
    while (open.length) await open.pop()!.close();
    liar.truth();
  });
  after(async () => {
    await Promise.all([liar?.close(), ...(honest ?? []).map((h) => h.close())]);
    await node?.stop();
  });

  for (const [block, spelling] of [
    ['0x2', 'plain'],
    ['0x3', 'escaped'],
  ] as const) {
    const form = spelling === 'plain' ? '"result" twice' : '"result" then "res\\u0075lt"';

    it(`with 2-of-3 consensus, ${form}: the forged block is never served nor cached`, async () => {
      const real = ((await node.rpc('eth_getBlockByNumber', [block, false])) as { hash: string }).hash;
      const svc = await svcWith({ maxParticipants: 3, agreementThreshold: 2 });
      await lieAbout(liar, block, spelling);
      const before = liar.told();
      const got = await twice(svc, block);
      expect(liar.told() - before, 'the liar was asked').to.be.greaterThan(0);
      for (const g of got) expect(g.hash).to.equal(real);
    });

    it(`without consensus, ${form}: the liar's answer is refused and another upstream serves`, async () => {
      const other = `0x${(Number(block) + 2).toString(16)}`;
      const real = ((await node.rpc('eth_getBlockByNumber', [other, false])) as { hash: string }).hash;
      const svc = await svcWith();
      await lieAbout(liar, other, spelling);
      const before = liar.told();
      const got = await twice(svc, other);
      expect(liar.told() - before, 'the liar answered first').to.be.greaterThan(0);
      for (const g of got) expect(g.hash).to.equal(real);
      // The first call was served by an honest upstream after the liar's attempt failed.
      expect(got[0]?.upstream).to.match(/^honest-/);
      expect(got[0]?.attempts, 'X-SVC-Upstreams').to.contain('liar');
    });
  }
});
