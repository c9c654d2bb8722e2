/**
 * Conformance, spec §3.4 (multiplexer entry), §3.5 (outbound batch queue) and §3.6 (zero-config
 * injection). §3.4 and §3.6 run through a real svc in front of a counting upstream that answers
 * after a delay (so calls overlap) and a loopback endpoints catalog; §3.5 drives the batch queue
 * on its own with a recording sender (its states are not observable from outside but by timing).
 */
import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import { RpcResult } from '../../core/jsonrpc.ts';
import { BatchQueue, type QueuedCall } from '../../plugins/batching/queue.ts';
import { repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;

describe('conformance: §3.4 multiplexer entry, §3.5 batch queue, §3.6 zero-config injection', function () {
  this.timeout(20_000);

  describe('§3.4 multiplexer entry', () => {
    let server: Server;
    let received: string[] = [];
    let svc: SvcHandle;
    before(async () => {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const m = JSON.parse(Buffer.concat(chunks).toString()) as { id: unknown; method: string; params: unknown[] };
          if (m.method === 'eth_chainId') return res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: '0x7a69' }));
          received.push(m.method);
          setTimeout(() => res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { n: received.length, nested: { v: [1, 2] } } })), 150);
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      svc = await startSvc({ ...NO_CACHE, logLevel: 'error', metrics: { enabled: true, port: 0 }, projects: [{ id: 'm', networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }], upstreams: [{ id: 'u', endpoint: url, evm: { chainId: CHAIN, statePollerInterval: 0 } }] }] });
    });
    after(async () => {
      await svc?.close();
      server?.closeAllConnections();
      server?.close();
    });
    beforeEach(() => (received = []));
    const call = (id: unknown) => svc.post(`/m/evm/${CHAIN}`, { jsonrpc: '2.0', id, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', '0x1'] });
    const followers = async () => {
      const text = await (await fetch(svc.metricsUrl as string)).text();
      const line = text.split('\n').find((l) => l.startsWith('svc_network_multiplexed_request_total{') && l.includes('project="m"'));
      return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
    };

    it('§3.4 none — the first request with a hash is the leader: it dispatches to the upstream', async () => {
      const first = call(1);
      // The leader is in flight (the upstream answers after 150 ms): an identical call joins it
      // instead of dispatching, which it could not if the first had not become a leader.
      await new Promise((r) => setTimeout(r, 40));
      const [r, joined] = await Promise.all([first, call(2)]);
      expect(r.json.result.n).to.equal(1);
      expect(received).to.deep.equal(['eth_getBalance']);
      expect(r.headers['x-svc-upstream']).to.equal('u');
      expect(joined.json.result.n, 'the identical call got the leader\'s answer').to.equal(1);
    });

    it('§3.4 in-flight / identical request arrives — the follower waits for the leader; the follower counter +1 each', async () => {
      const before = await followers();
      const leader = call('L');
      await new Promise((r) => setTimeout(r, 40));
      const rs = await Promise.all([leader, call('F1'), call('F2')]);
      expect(received).to.have.length(1);
      expect(rs.map((r) => r.json.result.n)).to.deep.equal([1, 1, 1]);
      expect(await followers()).to.equal(before + 2);
    });

    it('§3.4 in-flight / leader completes — followers get deep copies under their own id, with the leader metadata', async () => {
      const rs = await Promise.all([call('a'), call('b'), call(7)]);
      expect(rs.map((r) => r.json.id)).to.deep.equal(['a', 'b', 7]);
      for (const r of rs) {
        expect(r.json.result).to.deep.equal({ n: 1, nested: { v: [1, 2] } });
        expect(r.headers['x-svc-upstream']).to.equal('u');
      }
    });

    it('§3.4 closed — a request after the entry closed becomes a new leader', async () => {
      await Promise.all([call(1), call(2)]);
      const late = await call(3);
      expect(received).to.have.length(2);
      expect(late.json.result.n).to.equal(2);
    });
  });

  describe('§3.5 outbound batch queue', () => {
    function harness(maxSize: number, maxWaitMs: number) {
      const batches: Array<{ ids: string[]; at: number }> = [];
      const q = new BatchQueue({ maxSize, maxWaitMs, send: async (calls) => (batches.push({ ids: calls.map((c) => c.id), at: performance.now() }), calls.map((c) => new RpcResult(c.method))) });
      const call = (id: string): QueuedCall => ({ id, method: `m${id}`, params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
      return { q, batches, call };
    }

    it('§3.5 empty — the first queued request starts the batchMaxWait timer', async () => {
      const h = harness(10, 60);
      const t0 = performance.now();
      const p = h.q.add(h.call('1'));
      expect(h.batches).to.deep.equal([]);
      await new Promise((r) => setTimeout(r, 30));
      const p2 = h.q.add(h.call('2'));
      await Promise.all([p, p2]);
      expect(h.batches.map((b) => b.ids)).to.deep.equal([['1', '2']]);
      expect(h.batches[0]!.at - t0, 'timed from the first call, not the last').to.be.within(50, 85);
    });

    it('§3.5 pending / queue length reaches batchMaxSize — immediate flush, the queue is empty again', async () => {
      const h = harness(2, 10_000);
      const ps = [h.q.add(h.call('1')), h.q.add(h.call('2'))];
      expect(h.batches.map((b) => b.ids)).to.deep.equal([['1', '2']]);
      await Promise.all(ps);
      const p3 = h.q.add(h.call('3'));
      expect(h.batches).to.have.length(1);
      h.q.flush();
      await p3;
    });

    it('§3.5 pending / timer fires — flush', async () => {
      const h = harness(10, 30);
      const rs = await Promise.all([h.q.add(h.call('1')), h.q.add(h.call('2'))]);
      expect(rs.map((r) => r.result)).to.deep.equal(['m1', 'm2']);
      expect(h.batches.map((b) => b.ids)).to.deep.equal([['1', '2']]);
    });

    it('§3.5 pending / queued request has a JSON-RPC id already pending — flush first, then re-queue', async () => {
      const h = harness(10, 30);
      const a = h.q.add(h.call('7'));
      const c = h.q.add(h.call('7'));
      expect(h.batches.map((b) => b.ids)).to.deep.equal([['7']]);
      await Promise.all([a, c]);
      expect(h.batches.map((b) => b.ids)).to.deep.equal([['7'], ['7']]);
    });
  });

  describe('§3.6 zero-config injection', () => {
    let up: FaultServer;
    let catalog: Server;
    let catalogHits = 0;
    let svc: SvcHandle;
    before(async () => {
      up = await startFaultServer({ chainId: 1 });
      catalog = createServer((_q, res) => {
        catalogHits++;
        res.end(JSON.stringify({ '1': { endpoints: [up.url] } }));
      });
      await new Promise<void>((r) => catalog.listen(0, '127.0.0.1', () => r()));
      const catalogUrl = `http://127.0.0.1:${(catalog.address() as { port: number }).port}/`;
      svc = await startSvc(
        { ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'z' }] },
        { plugins: [...presetWithout('vendor-repository'), repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: catalogUrl } })] },
      );
    });
    after(async () => {
      await svc?.close();
      catalog?.close();
      await up?.close();
    });

    it('§3.6 project with no providers/upstreams/endpoint flags — project set-up gives it providers public and hyper, with a warning', () => {
      const ids = (svc.proxy.config.projects[0]?.settings.providers as Array<{ id: string }>).map((p) => p.id);
      expect(ids).to.deep.equal(['public', 'hyper']);
      expect(svc.proxy.config.warnings.some((w) => /zero-config/.test(w))).to.equal(true);
    });

    it('§3.6 first request for a chain — schedules the bootstrap tasks and is served once an upstream is ready', async () => {
      expect(catalogHits, 'nothing fetched before the first request').to.equal(0);
      expect(svc.proxy.projects.get('z')?.upstreams.size ?? 0).to.equal(0);
      const r = await svc.post('/z/evm/1', { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
      expect(r.status).to.equal(200);
      expect(r.json.result).to.equal('0x10');
      expect(catalogHits).to.equal(1);
      expect(up.calls.some((c) => c.method === 'eth_blockNumber')).to.equal(true);
    });
  });
});
