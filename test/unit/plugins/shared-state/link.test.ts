/**
 * shared-state connectivity (plugins/shared-state/link.ts): one report per transition, a failure
 * at start reported once (a connection coming up before the others is not one), and the PING
 * watch that notices a frozen Redis (PING unanswered past the timeout) and its recovery, with one
 * PING outstanding at most.
 */
import { expect } from 'chai';
import { LinkState, PingWatch } from '../../../../plugins/shared-state/index.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('shared-state connectivity', () => {
  it('LinkState: unknown until a full up or a failure; then one report per transition', () => {
    const reports: Array<[boolean, boolean]> = [];
    const link = new LinkState((up, atStart) => reports.push([up, atStart]));
    link.update(false, false); // one connection ready, others still connecting
    expect(reports).to.deep.equal([]);
    expect(link.connected).to.equal(false);
    link.update(false, true); // the first attempt failed
    link.update(false, true);
    link.update(true, false);
    link.update(true, false);
    link.update(false, true);
    expect(reports).to.deep.equal([
      [false, true],
      [true, false],
      [false, false],
    ]);
  });

  it('LinkState: a first success is reported as at start (no log line) and the gauge reads connected', () => {
    const reports: Array<[boolean, boolean]> = [];
    const link = new LinkState((up, atStart) => reports.push([up, atStart]));
    link.update(true, false);
    expect(link.connected).to.equal(true);
    expect(reports).to.deep.equal([[true, true]]);
  });

  it('PingWatch: an unanswered PING marks frozen once; the answer thaws; one PING outstanding at most', async () => {
    let pings = 0;
    let answer: (() => void) | undefined;
    const events: string[] = [];
    const watch = new PingWatch({
      ping: () => {
        pings++;
        return new Promise<void>((r) => (answer = r));
      },
      timeoutMs: 30,
      onFrozen: () => events.push('frozen'),
      onThawed: () => events.push('thawed'),
    });
    watch.tick();
    await sleep(60);
    watch.tick();
    watch.tick();
    expect(pings).to.equal(1);
    expect(watch.frozen).to.equal(true);
    expect(events).to.deep.equal(['frozen']);
    answer?.();
    await sleep(0);
    expect(watch.frozen).to.equal(false);
    expect(events).to.deep.equal(['frozen', 'thawed']);
    // A prompt answer: nothing reported.
    watch.tick();
    expect(pings).to.equal(2);
    answer?.();
    await sleep(50);
    expect(events).to.deep.equal(['frozen', 'thawed']);
  });

  it('PingWatch: a failed PING is not an answer; reset forgets the verdict and a stale answer', async () => {
    const events: string[] = [];
    const answers: Array<() => void> = [];
    let fail = true;
    const watch = new PingWatch({
      ping: () => (fail ? Promise.reject(new Error('closed')) : new Promise<void>((r) => answers.push(r))),
      timeoutMs: 20,
      onFrozen: () => events.push('frozen'),
      onThawed: () => events.push('thawed'),
    });
    watch.tick();
    await sleep(40);
    expect(watch.frozen).to.equal(false);
    fail = false;
    watch.tick();
    await sleep(40);
    expect(watch.frozen).to.equal(true);
    watch.reset();
    expect(watch.frozen).to.equal(false);
    answers[0]?.(); // the old connection's answer
    await sleep(0);
    expect(events).to.deep.equal(['frozen']);
    watch.tick();
    expect(answers.length).to.equal(2);
  });
});
