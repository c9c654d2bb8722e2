/**
 * One poll at a time per filter (plugins/filters/serial.ts): calls of one key run in arrival
 * order; a caller whose client leaves, or whose deadline passes, while it waits stops waiting at
 * once (ErrCancelled / ErrEndpointRequestTimeout) and never runs, without letting a later caller
 * overtake the one still running.
 */
import { expect } from 'chai';
import { ErrCancelled, ErrEndpointRequestTimeout } from '../../../core/wire/errors.ts';
import { Serial } from '../../../plugins/filters/serial.ts';

describe('filters: one poll at a time per filter', () => {
  it('runs calls of one key in order; a waiting caller that is aborted stops at once and never runs; the next still waits for the running one', async () => {
    const serial = new Serial();
    const ran: string[] = [];
    let finishFirst!: () => void;
    const first = serial.run('f', new AbortController().signal, Date.now() + 60_000, async () => {
      ran.push('first');
      await new Promise<void>((r) => (finishFirst = r));
    });
    const leaving = new AbortController();
    const second = serial.run('f', leaving.signal, Date.now() + 60_000, async () => void ran.push('second'));
    const third = serial.run('f', new AbortController().signal, Date.now() + 60_000, async () => void ran.push('third'));
    leaving.abort();
    expect(
      await second.then(
        () => undefined,
        (e: unknown) => e,
      ),
    ).to.be.instanceOf(ErrCancelled);
    await new Promise((r) => setImmediate(r));
    expect(ran, 'the third waits for the first, still running').to.deep.equal(['first']);
    finishFirst();
    await Promise.all([first, third]);
    expect(ran).to.deep.equal(['first', 'third']);
    expect(serial.size).to.equal(0);
  });

  it('a caller whose deadline passed while it waited ends with ErrEndpointRequestTimeout', async () => {
    const serial = new Serial();
    let finish!: () => void;
    const busy = serial.run('f', new AbortController().signal, Date.now() + 60_000, () => new Promise<void>((r) => (finish = r)));
    const late = new AbortController();
    const waiting = serial.run('f', late.signal, Date.now() - 1, async () => 'ran');
    late.abort();
    expect(
      await waiting.then(
        () => undefined,
        (e: unknown) => e,
      ),
    ).to.be.instanceOf(ErrEndpointRequestTimeout);
    finish();
    await busy;
  });
});
