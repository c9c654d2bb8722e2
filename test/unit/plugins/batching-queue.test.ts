/**
 * The outbound batch queue (spec §3.5, §4.7), on its own with a scripted
 * sender: flush by size and by wait, the duplicate-id flush, the batch deadline, cancellation
 * before, during and after queueing, and the grace window of a shared transport failure.
 */
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { ErrCancelled, ErrEndpointRequestTimeout, ErrEndpointServerSideException, type SvcError } from '../../../core/wire/errors.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import { BatchQueue, type QueuedCall } from '../../../plugins/batching/queue.ts';

function harness(
  maxSize: number,
  maxWaitMs: number,
  answer: (calls: readonly QueuedCall[]) => Array<RpcResult | SvcError> = (cs) => cs.map((c) => new RpcResult(c.method)),
  uniqueIds = false,
) {
  const batches: string[][] = [];
  let release: (() => void) | undefined;
  let hold = false;
  const q = new BatchQueue({
    maxSize,
    maxWaitMs,
    uniqueIds,
    send: async (calls) => {
      batches.push(calls.map((c) => c.id));
      if (hold) await new Promise<void>((r) => (release = r));
      return answer(calls);
    },
  });
  const call = (id: string, extra: Partial<QueuedCall> = {}): QueuedCall => ({
    id,
    method: `m${id}`,
    params: [],
    deadline: Date.now() + 10_000,
    signal: new AbortController().signal,
    ...extra,
  });
  return { q, batches, call, holdNext: () => (hold = true), release: () => release?.() };
}

describe('batching: BatchQueue (spec §3.5, §4.7)', () => {
  it('flushes when the queue reaches batchMaxSize; the rest waits for batchMaxWait', async () => {
    const h = harness(3, 30);
    const ps = ['1', '2', '3', '4', '5'].map((id) => h.q.add(h.call(id)));
    expect(h.batches).to.deep.equal([['1', '2', '3']]);
    const t0 = Date.now();
    const rs = await Promise.all(ps);
    expect(rs.map((r) => r.result)).to.deep.equal(['m1', 'm2', 'm3', 'm4', 'm5']);
    expect(h.batches).to.deep.equal([
      ['1', '2', '3'],
      ['4', '5'],
    ]);
    expect(Date.now() - t0).to.be.at.least(20);
  });

  it('batchMaxSize 0 or batchMaxWait 0: every call flushes at once', async () => {
    for (const h of [harness(0, 50), harness(10, 0)]) {
      await Promise.all([h.q.add(h.call('a')), h.q.add(h.call('b'))]);
      expect(h.batches).to.deep.equal([['a'], ['b']]);
    }
  });

  it('a call whose id is already pending flushes the queue first', async () => {
    const h = harness(10, 1000);
    const a = h.q.add(h.call('7'));
    const b = h.q.add(h.call('8'));
    const c = h.q.add(h.call('7'));
    expect(h.batches).to.deep.equal([['7', '8']]);
    h.q.flush();
    await Promise.all([a, b, c]);
    expect(h.batches).to.deep.equal([['7', '8'], ['7']]);
  });

  it('the batch deadline is the earliest of the queued calls: when it passes, every queued call fails with ErrEndpointRequestTimeout', async () => {
    const h = harness(10, 5000);
    const a = h.q.add(h.call('a', { deadline: Date.now() + 20 }));
    const b = h.q.add(h.call('b', { deadline: Date.now() + 10_000 }));
    for (const p of [a, b]) {
      const e = await p.catch((x: unknown) => x);
      expect(e).to.be.instanceOf(ErrEndpointRequestTimeout);
    }
    expect(h.batches).to.deep.equal([]);
  });

  it('a cancelled call no longer sets the batch deadline: the others wait for their own or for the flush', async () => {
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const h = harness(10, 100);
      const ac = new AbortController();
      const early = h.q.add(h.call('a', { deadline: Date.now() + 20, signal: ac.signal }));
      const mid = h.q.add(h.call('b', { deadline: Date.now() + 60 }));
      const late = h.q.add(h.call('c', { deadline: Date.now() + 10_000 }));
      ac.abort();
      expect(await early.catch((e: unknown) => e)).to.be.instanceOf(ErrCancelled);
      await clock.tickAsync(30);
      expect(h.q.length, 'nothing failed at the cancelled call deadline').to.equal(2);
      await clock.tickAsync(40);
      for (const p of [mid, late]) expect(await p.catch((e: unknown) => e)).to.be.instanceOf(ErrEndpointRequestTimeout);
      expect(h.batches).to.deep.equal([]);
      // Deadlines after the flush: the wait timer sends the batch and no call fails.
      const x = h.q.add(h.call('x', { deadline: Date.now() + 10_000 }));
      await clock.tickAsync(100);
      expect((await x).result).to.equal('mx');
      expect(h.batches).to.deep.equal([['x']]);
    } finally {
      clock.uninstall();
    }
  });

  it('uniqueIds: the caller numbers its calls, so a repeated id does not flush the queue', async () => {
    const h = harness(10, 20, undefined, true);
    // The same id twice (which the caller promised not to do) stays in one batch: the queue did not look.
    const a = h.q.add(h.call('1'));
    const b = h.q.add(h.call('1'));
    await Promise.all([a, b]);
    expect(h.batches).to.deep.equal([['1', '1']]);
  });

  it('an already-cancelled call fails at once and is not queued; one cancelled while queued is removed', async () => {
    const h = harness(10, 30);
    const dead = new AbortController();
    dead.abort();
    expect(await h.q.add(h.call('x', { signal: dead.signal })).catch((e: unknown) => e)).to.be.instanceOf(ErrCancelled);
    expect(h.q.length).to.equal(0);
    const ac = new AbortController();
    const gone = h.q.add(h.call('y', { signal: ac.signal }));
    const kept = h.q.add(h.call('z'));
    ac.abort();
    expect(await gone.catch((e: unknown) => e)).to.be.instanceOf(ErrCancelled);
    expect((await kept).result).to.equal('mz');
    expect(h.batches).to.deep.equal([['z']]);
  });

  it('a call cancelled after the flush has its answer discarded; the shared send goes on for the others', async () => {
    const h = harness(2, 1000);
    h.holdNext();
    const ac = new AbortController();
    const a = h.q.add(h.call('a', { signal: ac.signal }));
    const b = h.q.add(h.call('b'));
    expect(h.batches).to.deep.equal([['a', 'b']]);
    ac.abort();
    expect(await a.catch((e: unknown) => e)).to.be.instanceOf(ErrCancelled);
    h.release();
    expect((await b).result).to.equal('mb');
  });

  it('a transport failure (one error for every call) reaches them after a 5 ms grace window; missing answers fail only their calls', async () => {
    const down = new ErrEndpointServerSideException('connection reset');
    const h = harness(2, 1000, (cs) => cs.map(() => down));
    // Fake timers: a real 5 ms timer may fire early against performance.now() (libuv's loop
    // clock is read once per loop turn, later on a busy machine).
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      let settled = false;
      const all = Promise.allSettled([h.q.add(h.call('a')), h.q.add(h.call('b'))]).then((rs) => {
        settled = true;
        return rs;
      });
      await clock.tickAsync(4);
      expect(settled, 'settled 4 ms after the flush').to.equal(false);
      await clock.tickAsync(1);
      expect(settled, 'settled 5 ms after the flush').to.equal(true);
      const rs = await all;
      expect(rs.map((r) => (r as PromiseRejectedResult).reason)).to.deep.equal([down, down]);
    } finally {
      clock.uninstall();
    }
    const partial = harness(2, 1000, (cs) => [new RpcResult('ok'), new ErrEndpointServerSideException(`no response for request id ${cs[1]!.id}`)]);
    const [ok, missing] = await Promise.allSettled([partial.q.add(partial.call('a')), partial.q.add(partial.call('b'))]);
    expect((ok as PromiseFulfilledResult<RpcResult>).value.result).to.equal('ok');
    expect(String((missing as PromiseRejectedResult).reason.message)).to.include('no response for request id b');
  });
});
