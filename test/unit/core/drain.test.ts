/**
 * The drain state machine (core/http/drain.ts, spec §3.2): serving → draining → closing → stopped,
 * with the in-flight count deciding how long closing lasts. Fake timers: no real waiting.
 */
import { EventEmitter } from 'node:events';
import type { Server } from 'node:http';
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { Drain } from '../../../core/http/drain.ts';

/** A stand-in server: emits `request` with a response that emits `close`. */
function fakeServer(): { server: Server; request(): () => void } {
  const server = new EventEmitter() as unknown as Server;
  return {
    server,
    request() {
      const res = new EventEmitter();
      server.emit('request', {}, res);
      return () => res.emit('close');
    },
  };
}

describe('core/drain: the SIGTERM state machine (spec §3.2)', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install();
  });
  afterEach(() => clock.uninstall());

  it('draining for waitBefore, then closing until the last in-flight request ends, then stop', async () => {
    const d = new Drain();
    const s = fakeServer();
    d.track(s.server);
    const finish = s.request();
    let stopped = false;
    const run = d.run({ waitBeforeMs: 1000, waitAfterMs: 10_000 }, async () => {
      stopped = true;
    });
    expect(d.state).to.equal('draining');
    await clock.tickAsync(999);
    expect(d.state).to.equal('draining');
    await clock.tickAsync(1);
    expect(d.state).to.equal('closing');
    expect(d.requestsInFlight).to.equal(1);
    await clock.tickAsync(3000);
    expect(stopped).to.equal(false);
    finish();
    await run;
    expect(stopped).to.equal(true);
    expect(d.state).to.equal('stopped');
  });

  it('closing gives in-flight requests at most waitAfter; run is idempotent', async () => {
    const d = new Drain();
    const s = fakeServer();
    d.track(s.server);
    s.request();
    let stops = 0;
    const stop = async () => {
      stops++;
    };
    const first = d.run({ waitBeforeMs: 0, waitAfterMs: 2000 }, stop);
    const second = d.run({ waitBeforeMs: 0, waitAfterMs: 2000 }, stop);
    expect(second).to.equal(first);
    await clock.tickAsync(1999);
    expect(stops).to.equal(0);
    await clock.tickAsync(1);
    await first;
    expect(stops).to.equal(1);
    expect(d.requestsInFlight).to.equal(1);
  });
});
