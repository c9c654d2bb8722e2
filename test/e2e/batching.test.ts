/**
 * Outbound batching through the real server (spec §2.6, §4.7): a counting fake
 * upstream that answers JSON-RPC batches, with modes for the failure shapes of §4.7 #4-5.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';
import { createProxy } from '../../core/host/create.ts';
import { createLogger } from '../../lib/logger.ts';
import { defaultPreset } from '../../presets/default.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

type Mode = 'ok' | 'single' | 'garbage' | 'drop-last';

describe('e2e: outbound batching (spec §4.7)', function () {
  this.timeout(20_000);
  let server: Server;
  let url: string;
  let mode: Mode = 'ok';
  let posts: Array<{ batch: boolean; size: number; ids: unknown[] }> = [];
  let svc: SvcHandle;

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const doc = JSON.parse(Buffer.concat(chunks).toString()) as unknown;
        const els = (Array.isArray(doc) ? doc : [doc]) as Array<{ id: unknown; method: string; params: unknown[] }>;
        if (!Array.isArray(doc) && els[0]!.method === 'eth_chainId')
          return res.end(JSON.stringify({ jsonrpc: '2.0', id: els[0]!.id, result: `0x${CHAIN.toString(16)}` }));
        posts.push({ batch: Array.isArray(doc), size: els.length, ids: els.map((e) => e.id) });
        const answer = (e: { id: unknown; params: unknown[] }) => ({ jsonrpc: '2.0', id: e.id, result: e.params?.[0] ?? null });
        if (!Array.isArray(doc)) return res.end(JSON.stringify(answer(els[0]!)));
        if (mode === 'garbage') return res.end('<html>oops</html>');
        if (mode === 'single') return res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batches not allowed' } }));
        const out = els.map(answer);
        if (mode === 'drop-last') out.pop();
        res.end(JSON.stringify(out.reverse())); // any order: matched by id
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [
            {
              id: 'b',
              endpoint: url,
              evm: { chainId: CHAIN, statePollerInterval: 0 },
              jsonRpc: { supportsBatch: true, batchMaxSize: 5, batchMaxWait: '20ms' },
            },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });
  beforeEach(() => {
    posts = [];
    mode = 'ok';
  });

  // Distinct params, so multiplexing does not merge them; the same client id on purpose.
  const calls = (n: number) => Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: 1, method: 'web3_sha3', params: [`0x${(i + 1).toString(16)}`] }));

  it('N calls cost ceil(N / batchMaxSize) POSTs; answers are matched by svc ids even when clients share an id', async () => {
    const res = await svc.post(PATH, calls(12));
    expect(res.json.map((a: { result: string }) => a.result)).to.deep.equal(calls(12).map((c) => c.params[0]));
    expect(posts.map((p) => p.size).sort()).to.deep.equal([2, 5, 5]);
    expect(posts.every((p) => p.batch)).to.equal(true);
    const ids = posts.flatMap((p) => p.ids);
    expect(new Set(ids).size).to.equal(12);
    // Each batched call counted as one upstream attempt.
    expect(res.headers['x-svc-upstream-attempts']).to.equal('12');
  });

  it('a single object answering a batch fails every queued call; a non-JSON answer gives ErrUpstreamMalformedResponse to all', async () => {
    mode = 'single';
    const single = await svc.post(PATH, calls(5));
    expect(single.json.every((a: { error?: unknown }) => a.error)).to.equal(true);
    mode = 'garbage';
    const garbage = await svc.post(PATH, calls(5));
    for (const a of garbage.json as Array<{ error: { data: { code: string } } }>) expect(a.error.data.code).to.equal('ErrUpstreamMalformedResponse');
  });

  it('a missing answer fails only its call, naming the id', async () => {
    mode = 'drop-last';
    const res = await svc.post(PATH, calls(5));
    const failed = (res.json as Array<{ error?: { message: string } }>).filter((a) => a.error);
    expect(failed).to.have.length(1);
    expect(failed[0]!.error!.message).to.match(/no response for request id \d+/);
  });

  it('svc validate warns when supportsBatch is on with batchMaxSize or batchMaxWait at 0', () => {
    const proxy = createProxy({
      config: { projects: [{ id: 'main', upstreams: [{ endpoint: url, evm: { chainId: CHAIN }, jsonRpc: { supportsBatch: true } }] }] },
      plugins: defaultPreset(),
      logger: createLogger('silent'),
    });
    expect(proxy.config.warnings.join('\n')).to.match(/supportsBatch is on with batchMaxSize 0 and batchMaxWait 0 ms/);
  });
});
