/**
 * Conformance, spec §3.4 (multiplexer entry), §3.5 (outbound batch queue) and §3.6 (zero-config
 * injection). §3.4 and §3.6 run through a real svc in front of a counting upstream that answers
 * after a delay (so calls overlap) and a loopback endpoints catalog; §3.5 drives the batch queue
 * on its own with a recording sender (its states are not observable from outside but by timing).
 */
import FakeTimers from '@sinonjs/fake-timers';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { expect } from 'chai';
import { RpcResult } from '../../core/wire/jsonrpc.ts';
import { BatchQueue, type QueuedCall } from '../../plugins/batching/queue.ts';
import { repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { MULTIPLEX_SERVICE, type MultiplexService } from '../../plugins/multiplex/index.ts';

const CHAIN = 31337;

describe('conformance: §3.4 multiplexer entry, §3.5 batch queue, §3.6 zero-config injection', function () {
  this.timeout(20_000);

  describe('§3.4 multiplexer entry', () => {
    let server: Server;
    let received: string[] = [];
    /** eth_getBalance answers held until {@link release}: followers join a leader still in flight. */
    let held: Array<{ id: unknown; res: ServerResponse }> = [];
    let svc: SvcHandle;
    before(async () => {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const m = JSON.parse(Buffer.concat(chunks).toString()) as { id: unknown; method: string; params: unknown[] };
          if (m.method !== 'eth_getBalance')
            return res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: m.method === 'eth_chainId' ? '0x7a69' : '0x1' }));
          received.push(m.method);
          held.push({ id: m.id, res });
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      svc = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: true, port: 0 },
        projects: [
          {
            id: 'm',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'u', endpoint: url, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
          },
        ],
      });
    });
    after(async () => {
      await svc?.close();
      server?.closeAllConnections();
      server?.close();
    });
    beforeEach(() => {
      received = [];
      held = [];
    });
    /** Answers every held call with `{n: <upstream calls so far>, nested}`. */
    const release = () => {
      for (const { id, res } of held.splice(0)) res.end(JSON.stringify({ jsonrpc: '2.0', id, result: { n: received.length, nested: { v: [1, 2] } } }));
    };
    const call = (id: unknown) =>
      svc.post(`/m/evm/${CHAIN}`, { jsonrpc: '2.0', id, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', '0x1'] });
    const mux = () => svc.proxy.services.require<MultiplexService>(MULTIPLEX_SERVICE);
    const net = () => svc.proxy.projects.get('m')!.networks.get(`evm:${CHAIN}`)!;
    const followers = async () => {
      const text = await (await fetch(svc.metricsUrl as string)).text();
      const line = text.split('\n').find((l) => l.startsWith('svc_network_multiplexed_request_total{') && l.includes('project="m"'));
      return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
    };
    /** Starts a leader and waits until its upstream call is in flight; its answer comes with {@link release}. */
    const leader = async (id: unknown): Promise<{ answer: Promise<SvcResponse> }> => {
      const answer = call(id);
      await waitFor(() => received.length === 1);
      return { answer };
    };

    it('§3.4 none — the first request with a hash is the leader: it dispatches to the upstream', async () => {
      expect(mux().inFlight(net()), 'no entry before').to.equal(0);
      const l = (await leader(1)).answer;
      expect(mux().inFlight(net()), 'the first request opened an entry').to.equal(1);
      // The entry is live: an identical request joins it instead of reaching the upstream
      // (with multiplexing off it would be a second upstream call).
      const f = call(2);
      await waitFor(() => mux().waiting(net()) === 1);
      release();
      const [rl, rf] = await Promise.all([l, f]);
      expect(received, 'one upstream call for both').to.deep.equal(['eth_getBalance']);
      expect(rl.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: { n: 1, nested: { v: [1, 2] } } });
      expect(rf.json).to.deep.equal({ jsonrpc: '2.0', id: 2, result: { n: 1, nested: { v: [1, 2] } } });
      expect(rl.headers['x-svc-upstream']).to.equal('u');
      expect(mux().inFlight(net()), 'the entry is removed once settled').to.equal(0);
    });

    it('§3.4 in-flight / identical request arrives — the follower waits for the leader; the follower counter +1 each', async () => {
      const before = await followers();
      const l = (await leader('L')).answer;
      const fs = [call('F1'), call('F2')];
      await waitFor(() => mux().waiting(net()) === 2);
      expect(received, 'followers do not reach the upstream').to.have.length(1);
      release();
      const rs = await Promise.all([l, ...fs]);
      expect(rs).to.have.length(3);
      expect(received).to.have.length(1);
      expect(rs.map((r) => r.json.result.n)).to.deep.equal([1, 1, 1]);
      expect(await followers()).to.equal(before + 2);
    });

    it('§3.4 in-flight / leader completes — followers get deep copies under their own id, with the leader metadata', async () => {
      const l = (await leader('a')).answer;
      const fs = [call('b'), call(7)];
      await waitFor(() => mux().waiting(net()) === 2);
      release();
      const rs = await Promise.all([l, ...fs]);
      expect(rs.map((r) => r.json.id)).to.deep.equal(['a', 'b', 7]);
      expect(rs).to.have.length(3);
      for (const r of rs) {
        expect(r.json.result).to.deep.equal({ n: 1, nested: { v: [1, 2] } });
        expect(r.headers['x-svc-upstream']).to.equal('u');
      }
      expect(mux().inFlight(net())).to.equal(0);
      expect(mux().waiting(net())).to.equal(0);
    });

    it('§3.4 closed — a request after the entry closed becomes a new leader', async () => {
      const l = (await leader(1)).answer;
      const f = call(2);
      await waitFor(() => mux().waiting(net()) === 1);
      release();
      await Promise.all([l, f]);
      const late = call(3);
      await waitFor(() => received.length === 2);
      expect(mux().waiting(net()), 'not a follower of the closed entry').to.equal(0);
      release();
      expect((await late).json.result.n).to.equal(2);
      expect(received).to.have.length(2);
    });
  });

  describe('§3.5 outbound batch queue', () => {
    function harness(maxSize: number, maxWaitMs: number) {
      const batches: Array<{ ids: string[]; at: number }> = [];
      const q = new BatchQueue({
        maxSize,
        maxWaitMs,
        send: async (calls) => (batches.push({ ids: calls.map((c) => c.id), at: performance.now() }), calls.map((c) => new RpcResult(c.method))),
      });
      const call = (id: string): QueuedCall => ({ id, method: `m${id}`, params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
      return { q, batches, call };
    }

    it('§3.5 empty — the first queued request starts the batchMaxWait timer', async () => {
      // A fake clock: the flush time is read exactly, whatever else the machine is doing.
      const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      try {
        const batches: Array<{ ids: string[]; at: number }> = [];
        const q = new BatchQueue({
          maxSize: 10,
          maxWaitMs: 60,
          send: async (calls) => (batches.push({ ids: calls.map((c) => c.id), at: Date.now() }), calls.map((c) => new RpcResult(c.method))),
        });
        const call = (id: string): QueuedCall => ({ id, method: `m${id}`, params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
        const p = q.add(call('1'));
        expect(batches).to.deep.equal([]);
        await clock.tickAsync(30);
        const p2 = q.add(call('2'));
        await clock.tickAsync(29);
        expect(batches, '59 ms after the first call').to.deep.equal([]);
        await clock.tickAsync(1);
        expect(batches, 'timed from the first call, not the last').to.deep.equal([{ ids: ['1', '2'], at: 60 }]);
        expect((await Promise.all([p, p2])).map((r) => r.result)).to.deep.equal(['m1', 'm2']);
      } finally {
        clock.uninstall();
      }
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

      // Through the batching plugin this trigger cannot occur: svc numbers every call it queues
      // for an upstream (plugins/batching/index.ts), so clients' ids, equal or not, never make a
      // queued id pending twice. Three calls that all carry client id 7 go out as one POST with
      // three distinct ids (forwarding the client id would flush at each duplicate: three POSTs).
      const up = await startFaultServer({ chainId: CHAIN });
      const s = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [
          {
            id: 'b',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
            upstreams: [
              {
                id: 'u',
                endpoint: up.url,
                evm: { chainId: CHAIN, statePollerInterval: 0 },
                jsonRpc: { supportsBatch: true, batchMaxSize: 3, batchMaxWait: '10s' },
              },
            ],
          },
        ],
      });
      try {
        const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;
        const rs = await Promise.all(
          [1, 2, 3].map((n) => s.post(`/b/evm/${CHAIN}`, { jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params: [addr(n), '0x1'] })),
        );
        expect(rs).to.have.length(3);
        for (const r of rs) expect(r.json).to.include({ jsonrpc: '2.0', id: 7 }).and.to.have.property('result');
        const batched = up.calls.filter((c) => c.method === 'eth_getBalance');
        expect(batched).to.have.length(3);
        expect(
          batched.every((c) => c.batch),
          'all three in a batch body',
        ).to.equal(true);
        expect(new Set(batched.map((c) => JSON.stringify(c.id))).size, 'three distinct ids on the wire').to.equal(3);
        expect(new Set(batched.map((c) => c.headers)).size, 'one POST (one request, one headers object)').to.equal(1);
      } finally {
        await s.close();
        await up.close();
      }
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
