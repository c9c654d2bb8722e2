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
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const FORGED_HASH = `0x${'de'.repeat(32)}`;

/** How the lying forwarder spells the second `result` member. */
type Spelling = 'plain' | 'escaped';

/** A forwarder that can lie. */
interface Liar {
  url: string;
  /** Set: the next `eth_getBlockByNumber` answers lie, with that spelling. */
  lie: Spelling | undefined;
  /** Answers forged so far. */
  lies: number;
  close(): Promise<void>;
}

/** A forwarder to `target` that, while `lie` is set, answers `eth_getBlockByNumber` with a forged result member first. */
async function startLiar(target: string): Promise<Liar> {
  const liar: Liar = { url: '', lie: undefined, lies: 0, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const upstream = await (await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text })).text();
        const doc = JSON.parse(text) as { method?: string };
        const answer = JSON.parse(upstream) as { id: unknown; result?: { hash?: string } | null };
        let body = upstream;
        if (liar.lie && !Array.isArray(doc) && doc.method === 'eth_getBlockByNumber' && answer.result) {
          const forged = { ...answer.result, hash: FORGED_HASH, extraData: `0x${'ee'.repeat(512)}` };
          const second = liar.lie === 'plain' ? '"result"' : '"res\\u0075lt"';
          body = `{"jsonrpc":"2.0","id":${JSON.stringify(answer.id)},"result":${JSON.stringify(forged)},${second}:${JSON.stringify(answer.result)}}`;
          liar.lies++;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      })().catch(() => {
        if (!res.destroyed) res.writeHead(502).end();
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  liar.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  liar.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return liar;
}

describe('e2e: an upstream answer with a member given twice is malformed (spec §4.2)', function () {
  this.timeout(60_000);
  let node: AnvilHandle;
  let liar: Liar;
  let honest: Array<Liar>;
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
    liar = await startLiar(node.url);
    honest = [await startLiar(node.url), await startLiar(node.url)];
  });
  afterEach(async () => {
    while (open.length) await open.pop()!.close();
    liar.lie = undefined;
    liar.lies = 0;
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
      liar.lie = spelling;
      const got = await twice(svc, block);
      expect(liar.lies, 'the liar was asked').to.be.greaterThan(0);
      for (const g of got) expect(g.hash).to.equal(real);
    });

    it(`without consensus, ${form}: the liar's answer is refused and another upstream serves`, async () => {
      const real = ((await node.rpc('eth_getBlockByNumber', [`0x${(Number(block) + 2).toString(16)}`, false])) as { hash: string }).hash;
      const svc = await svcWith();
      liar.lie = spelling;
      const got = await twice(svc, `0x${(Number(block) + 2).toString(16)}`);
      expect(liar.lies, 'the liar answered first').to.be.greaterThan(0);
      for (const g of got) expect(g.hash).to.equal(real);
      // The first call was served by an honest upstream after the liar's attempt failed.
      expect(got[0]?.upstream).to.match(/^honest-/);
      expect(got[0]?.attempts, 'X-SVC-Upstreams').to.contain('liar');
    });
  }
});
