/**
 * Conformance of outbound batching (docs/interface.md §4.7). The upstream is a thin front of a
 * real anvil node that forwards each JSON-RPC batch to it and hands back anvil's answers in
 * reverse order, or, per test, answers a batch with one object, with non-JSON, with one answer
 * missing, or drops the connection. §4.7 #3 and the 5 ms grace window of #6 are checked on the
 * queue itself (a cancelled context cannot be timed from outside).
 */
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { ErrCancelled, ErrEndpointRequestTimeout, ErrEndpointServerSideException } from '../../core/wire/errors.ts';
import { RpcResult } from '../../core/wire/jsonrpc.ts';
import { BatchQueue, type QueuedCall } from '../../plugins/batching/queue.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
type Mode = 'ok' | 'single' | 'garbage' | 'drop-last' | 'reset';
const code = (e: any): string | undefined => e?.error?.data?.code;

describe('conformance §4.7: outbound batching', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  let server: Server;
  let mode: Mode = 'ok';
  let posts: Array<{ size: number; ids: unknown[] }> = [];
  let svc: SvcHandle;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        const text = Buffer.concat(chunks).toString();
        const doc = JSON.parse(text) as unknown;
        if (Array.isArray(doc)) posts.push({ size: doc.length, ids: doc.map((e: { id: unknown }) => e.id) });
        if (Array.isArray(doc) && mode === 'reset') return req.socket.destroy();
        if (Array.isArray(doc) && mode === 'garbage') return res.end('<html>oops</html>');
        if (Array.isArray(doc) && mode === 'single')
          return res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batches not allowed' } }));
        const answer = await (await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text })).json();
        if (!Array.isArray(answer)) return res.end(JSON.stringify(answer));
        if (mode === 'drop-last') answer.pop();
        res.end(JSON.stringify(answer.reverse()));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      // The calls' deadline (the queue of project `slow` waits 5 s). Every other call here must
      // finish well within it on a machine with one core busy: 2 s, still far below the 5 s wait.
      server: { maxTimeout: '2s' },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
          upstreams: [
            {
              id: 'b',
              endpoint: url,
              evm: { chainId: CHAIN, statePollerInterval: 0 },
              jsonRpc: { supportsBatch: true, batchMaxSize: 5, batchMaxWait: '20ms' },
            },
          ],
        },
        {
          id: 'slow',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
          // A queue that waits far longer than the calls' 2 s deadline.
          upstreams: [
            {
              id: 'slow',
              endpoint: url,
              evm: { chainId: CHAIN, statePollerInterval: 0 },
              jsonRpc: { supportsBatch: true, batchMaxSize: 100, batchMaxWait: '5s' },
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
    await anvil?.stop();
  });
  beforeEach(() => {
    posts = [];
    mode = 'ok';
  });

  // Distinct params so that multiplexing does not merge them; every client uses id 1 on purpose.
  const calls = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [`0x${(i + 1).toString(16).padStart(40, '0')}`, '0x0'] }));

  it('§4.7 #1 — one HTTP POST carries the array; answers (in any order) are matched by id', async () => {
    const res = await svc.post(PATH, calls(5));
    expect(posts).to.have.length(1);
    expect(posts[0]!.size).to.equal(5);
    expect(new Set(posts[0]!.ids).size).to.equal(5);
    expect(res.json).to.have.length(5);
    for (const e of res.json) expect(e).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x0' });
    // Distinguishable answers come back to the right callers although anvil's answers were reversed.
    const mixed = await svc.post(PATH, [
      { jsonrpc: '2.0', id: 'n', method: 'net_version', params: [] },
      { jsonrpc: '2.0', id: 'b', method: 'eth_getBalance', params: ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', '0x0'] },
      { jsonrpc: '2.0', id: 'c', method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000abc', '0x0'] },
    ]);
    expect(mixed.json.map((e: { id: string }) => e.id)).to.deep.equal(['n', 'b', 'c']);
    expect(mixed.json[0].result).to.equal(String(CHAIN));
    expect(BigInt(mixed.json[1].result) > 0n).to.equal(true);
    expect(mixed.json[2].result).to.equal('0x0');
  });

  it('§4.7 #2 — the batch deadline is the earliest deadline among queued calls; passing it fails them all with ErrEndpointRequestTimeout', async () => {
    // The queue waits 5 s and the calls' deadline is 2 s: had the queue not failed them at the
    // deadline, they would have been flushed (one post) and answered.
    const res = await svc.post(`/slow/evm/${CHAIN}`, calls(3));
    expect(posts).to.have.length(0);
    expect(res.json).to.have.length(3);
    for (const e of res.json) expect(code(e), JSON.stringify(e)).to.equal('ErrEndpointRequestTimeout');
  });

  it('§4.7 #2 — on the queue: the earliest deadline fails every queued call, nothing is sent', async () => {
    const sent: string[][] = [];
    const q = new BatchQueue({ maxSize: 10, maxWaitMs: 5000, send: async (cs) => (sent.push(cs.map((c) => c.id)), cs.map(() => new RpcResult('0x1'))) });
    const call = (id: string, deadline: number): QueuedCall => ({ id, method: 'm', params: [], deadline, signal: new AbortController().signal });
    const rs = await Promise.allSettled([q.add(call('a', Date.now() + 20)), q.add(call('b', Date.now() + 10_000))]);
    expect(rs).to.have.length(2);
    for (const r of rs) expect((r as PromiseRejectedResult).reason).to.be.instanceOf(ErrEndpointRequestTimeout);
    expect(sent).to.deep.equal([]);
  });

  it('§4.7 #3 — a call whose context is already cancelled when queued fails at once and is not batched', async () => {
    const sent: string[][] = [];
    const q = new BatchQueue({ maxSize: 10, maxWaitMs: 20, send: async (cs) => (sent.push(cs.map((c) => c.id)), cs.map(() => new RpcResult('0x1'))) });
    const dead = new AbortController();
    dead.abort();
    // "At once": settled before any timer could fire. The clock is fake and never advanced, so
    // an answer that waited for batchMaxWait (or any timer) would still be pending below.
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    let e: unknown = 'pending';
    try {
      q.add({ id: 'x', method: 'm', params: [], deadline: Date.now() + 10_000, signal: dead.signal }).then(
        () => (e = 'answered'),
        (x: unknown) => (e = x),
      );
      await new Promise((r) => setImmediate(r));
      expect(clock.now, 'no time passed').to.equal(0);
      expect(q.length, 'not queued').to.equal(0);
      expect(clock.countTimers(), 'no timer armed').to.equal(0);
    } finally {
      clock.uninstall();
    }
    expect(e).to.be.instanceOf(ErrCancelled);
    expect((await q.add({ id: 'y', method: 'm', params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal })).result).to.equal('0x1');
    expect(sent).to.deep.equal([['y']]);
  });

  it('§4.7 #4 — an array answer is normal; a single object fails every queued call; non-JSON gives each ErrUpstreamMalformedResponse', async () => {
    const ok = await svc.post(PATH, calls(5));
    expect(ok.json).to.have.length(5);
    for (const e of ok.json) expect(e).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x0' });
    mode = 'single';
    const single = await svc.post(PATH, calls(5));
    expect(single.json).to.have.length(5);
    // The one object (the upstream's refusal) is every queued call's error.
    for (const e of single.json) {
      expect(e).not.to.have.property('result');
      expect(e.error, JSON.stringify(e)).to.deep.include({ code: -32600, message: 'batches not allowed' });
    }
    mode = 'garbage';
    const garbage = await svc.post(PATH, calls(5));
    expect(garbage.json).to.have.length(5);
    for (const e of garbage.json) expect(code(e)).to.equal('ErrUpstreamMalformedResponse');
  });

  it('§4.7 #5 — fewer answers than requests: only the missing one fails, its message says no response was received for its request id', async () => {
    mode = 'drop-last';
    const res = await svc.post(PATH, calls(5));
    expect(posts).to.have.length(1);
    expect(posts[0]!.ids).to.have.length(5);
    expect(res.json).to.have.length(5);
    // The upstream dropped the answer to the last request of the batch: that call alone fails.
    expect(res.json.slice(0, 4)).to.deep.equal(Array.from({ length: 4 }, () => ({ jsonrpc: '2.0', id: 1, result: '0x0' })));
    const missing = res.json[4];
    expect(missing).not.to.have.property('result');
    expect(missing.error.message).to.equal(`upstream b sent no response for request id ${String(posts[0]!.ids[4])} in a batch`);
  });

  it('§4.7 #6 — a network error reaches every queued call', async () => {
    mode = 'reset';
    const res = await svc.post(PATH, calls(5));
    // One POST carried the five calls (no failsafe: no retry); its transport error reaches each.
    expect(posts).to.have.length(1);
    expect(posts[0]!.size).to.equal(5);
    expect(res.json).to.have.length(5);
    for (const e of res.json) {
      expect(e).not.to.have.property('result');
      expect(code(e), JSON.stringify(e)).to.equal('ErrEndpointServerSideException');
    }
  });

  it('§4.7 #6 — on the queue: the shared network error arrives after the 5 ms grace window', async () => {
    const down = new ErrEndpointServerSideException('connection reset');
    const q = new BatchQueue({ maxSize: 3, maxWaitMs: 1000, send: async (cs) => cs.map(() => down) });
    const call = (id: string): QueuedCall => ({ id, method: 'm', params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
    // Fake timers: a real 5 ms timer may fire early against performance.now() (libuv's loop
    // clock is read once per loop turn, later on a busy machine).
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      let settled = false;
      const all = Promise.allSettled([q.add(call('a')), q.add(call('b')), q.add(call('c'))]).then((rs) => {
        settled = true;
        return rs;
      });
      await clock.tickAsync(4);
      expect(settled, 'settled 4 ms after the flush').to.equal(false);
      await clock.tickAsync(1);
      expect(settled, 'settled 5 ms after the flush').to.equal(true);
      const rs = await all;
      expect(rs.map((r) => (r as PromiseRejectedResult).reason)).to.deep.equal([down, down, down]);
    } finally {
      clock.uninstall();
    }
  });
});
