/**
 * svc's one hedge (lib/hedge.ts), on fake timers: extra tries on the delay schedule up to
 * `maxCount`, the first answer wins and the running tries are aborted, a final error ends the
 * race, a fallback answer waits for the others, an idle race starts its next try early or waits
 * for the timer, and the error of a race every try lost.
 */
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { hedge } from '../../../lib/hedge.ts';

/** A try the test settles by hand, with the signal the hedge gave it. */
interface Try {
  n: number;
  signal: AbortSignal;
  resolve(v: string): void;
  reject(e: unknown): void;
}

/** A `tryOnce` that records each try for the test to settle. */
function tries(): { list: Try[]; tryOnce: (signal: AbortSignal, n: number) => Promise<string> } {
  const list: Try[] = [];
  return {
    list,
    tryOnce: (signal, n) =>
      new Promise<string>((resolve, reject) => {
        list.push({ n, signal, resolve, reject });
      }),
  };
}

describe('lib/hedge: one hedged race', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.uninstall());

  it('starts an extra try every delay up to maxCount, asking the delay of each; the first answer wins and the others are aborted', async () => {
    const t = tries();
    const asked: number[] = [];
    const hedges: number[] = [];
    let won: string | undefined;
    const p = hedge(t.tryOnce, {
      maxCount: 2,
      delayMs: (n) => {
        asked.push(n);
        return n * 100;
      },
      onHedge: (n) => hedges.push(n),
      onWin: (v) => (won = v),
    });
    expect(t.list.map((x) => x.n)).to.deep.equal([0]);
    await clock.tickAsync(99);
    expect(t.list).to.have.length(1);
    await clock.tickAsync(1);
    expect(t.list.map((x) => x.n)).to.deep.equal([0, 1]);
    await clock.tickAsync(200);
    expect(t.list.map((x) => x.n)).to.deep.equal([0, 1, 2]);
    await clock.tickAsync(10_000);
    expect(t.list, 'no more than maxCount extra').to.have.length(3);
    expect(asked).to.deep.equal([1, 2]);
    expect(hedges).to.deep.equal([1, 2]);

    t.list[1]?.resolve('second');
    expect(await p).to.equal('second');
    expect(won).to.equal('second');
    expect(t.list.map((x) => x.signal.aborted)).to.deep.equal([true, false, true]);
    expect(clock.countTimers()).to.equal(0);
  });

  it('an answer before the delay starts no extra try', async () => {
    const t = tries();
    const p = hedge(t.tryOnce, { maxCount: 3, delayMs: () => 50 });
    t.list[0]?.resolve('fast');
    expect(await p).to.equal('fast');
    await clock.tickAsync(1000);
    expect(t.list).to.have.length(1);
    expect(t.list[0]?.signal.aborted).to.equal(false);
  });

  it('losers are aborted with lostReason, built once', async () => {
    const t = tries();
    let built = 0;
    const reason = new Error('lost');
    const p = hedge(t.tryOnce, {
      maxCount: 2,
      delayMs: () => 10,
      lostReason: () => {
        built++;
        return reason;
      },
    });
    await clock.tickAsync(20);
    t.list[2]?.resolve('third');
    expect(await p).to.equal('third');
    expect(built).to.equal(1);
    expect(t.list.slice(0, 2).map((x) => x.signal.reason)).to.deep.equal([reason, reason]);
  });

  it('a final error ends the race at once with that error (asError applied first)', async () => {
    const t = tries();
    const p = hedge(t.tryOnce, {
      maxCount: 2,
      delayMs: () => 10,
      asError: (e) => new Error(`wrapped ${(e as Error).message}`),
      isFinal: (e) => (e as Error).message.includes('revert'),
    });
    await clock.tickAsync(10);
    t.list[0]?.reject(new Error('timeout'));
    await clock.tickAsync(0);
    t.list[1]?.reject(new Error('revert'));
    const err = await p.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.equal('wrapped revert');
    await clock.tickAsync(100);
    expect(t.list, 'no try after a final error').to.have.length(2);
  });

  it('every try failed: the last error, or allFailed of all of them in order', async () => {
    const t = tries();
    const p = hedge(t.tryOnce, { maxCount: 1, delayMs: () => 10 });
    await clock.tickAsync(10);
    t.list[1]?.reject(new Error('b'));
    t.list[0]?.reject(new Error('a'));
    const last = (await p.catch((e: unknown) => e)) as Error;
    expect(last.message).to.equal('a');

    const u = tries();
    const q = hedge(u.tryOnce, { maxCount: 1, delayMs: () => 10, allFailed: (errors) => new AggregateError(errors, 'all') });
    await clock.tickAsync(10);
    u.list[0]?.reject(new Error('x'));
    u.list[1]?.reject(new Error('y'));
    const all = (await q.catch((e: unknown) => e)) as AggregateError;
    expect(all.errors.map((e: Error) => e.message)).to.deep.equal(['x', 'y']);
  });

  it('by default a race whose tries all failed waits for the timer to start the next one', async () => {
    const t = tries();
    const p = hedge(t.tryOnce, { maxCount: 1, delayMs: () => 100 });
    t.list[0]?.reject(new Error('refused'));
    await clock.tickAsync(50);
    expect(t.list).to.have.length(1);
    await clock.tickAsync(50);
    expect(t.list).to.have.length(2);
    t.list[1]?.resolve('ok');
    expect(await p).to.equal('ok');
  });

  it('startWhenIdle: the next try starts as soon as nothing runs, and the timer restarts from it', async () => {
    const t = tries();
    const p = hedge(t.tryOnce, { maxCount: 2, delayMs: () => 100, startWhenIdle: true });
    await clock.tickAsync(30);
    t.list[0]?.reject(new Error('refused'));
    await clock.tickAsync(0);
    expect(t.list.map((x) => x.n)).to.deep.equal([0, 1]);
    await clock.tickAsync(99);
    expect(t.list).to.have.length(2);
    await clock.tickAsync(1);
    expect(t.list.map((x) => x.n)).to.deep.equal([0, 1, 2]);
    t.list[2]?.resolve('third');
    expect(await p).to.equal('third');
  });

  it('startWhenIdle does not start early once the signal aborted; the race ends with the errors', async () => {
    const t = tries();
    const parent = new AbortController();
    const p = hedge(t.tryOnce, { maxCount: 2, delayMs: () => 100, startWhenIdle: true, signal: parent.signal });
    parent.abort(new Error('deadline'));
    expect(t.list[0]?.signal.aborted, 'tries get a child of the signal').to.equal(true);
    t.list[0]?.reject(new Error('cancelled'));
    expect(((await p.catch((e: unknown) => e)) as Error).message).to.equal('cancelled');
    expect(t.list).to.have.length(1);
  });

  it('canStart refuses extra tries (timer or early start); with nothing running the race settles', async () => {
    const t = tries();
    let left = 1;
    const p = hedge(t.tryOnce, { maxCount: 3, delayMs: () => 10, canStart: () => left > 0, onHedge: () => left-- });
    await clock.tickAsync(10);
    expect(t.list).to.have.length(2);
    await clock.tickAsync(100);
    expect(t.list, 'canStart false: no third try').to.have.length(2);
    t.list[0]?.reject(new Error('a'));
    t.list[1]?.reject(new Error('b'));
    expect(((await p.catch((e: unknown) => e)) as Error).message).to.equal('b');
  });

  it('a fallback answer wins only when nothing else runs; a later full answer beats it', async () => {
    const t = tries();
    const p = hedge(t.tryOnce, { maxCount: 1, delayMs: () => 10, isFallback: (v) => v === '' });
    await clock.tickAsync(10);
    t.list[0]?.resolve('');
    await clock.tickAsync(0);
    t.list[1]?.resolve('full');
    expect(await p).to.equal('full');

    const u = tries();
    const q = hedge(u.tryOnce, { maxCount: 1, delayMs: () => 10, isFallback: (v) => v === '' });
    await clock.tickAsync(10);
    u.list[0]?.resolve('');
    await clock.tickAsync(0);
    u.list[1]?.reject(new Error('refused'));
    expect(await q, 'the kept fallback once every other try failed').to.equal('');
  });

  it('unref: the delay timers do not keep the process alive (by default they do)', async () => {
    const fake = globalThis.setTimeout;
    const armed: NodeJS.Timeout[] = [];
    globalThis.setTimeout = ((fn: () => void, ms: number) => {
      const timer = fake(fn, ms);
      armed.push(timer);
      return timer;
    }) as typeof setTimeout;
    try {
      for (const unref of [true, false]) {
        const t = tries();
        const p = hedge(t.tryOnce, { maxCount: 2, delayMs: () => 10, unref });
        await clock.tickAsync(10);
        t.list[1]?.resolve('x');
        expect(await p).to.equal('x');
      }
    } finally {
      globalThis.setTimeout = fake;
    }
    expect(armed.map((x) => x.hasRef())).to.deep.equal([false, false, true, true]);
  });
});
