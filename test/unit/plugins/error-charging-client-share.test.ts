/**
 * Unit tests of the breaker's one-client bound (plugins/failsafe/client-share.ts,
 * `circuitBreaker.maxClientShare` / `clientShareWindow`) on fake timers: a client causing more
 * than its share of an upstream's recent failures while others are served cannot open (or
 * reopen) the breaker; one client alone, or an outage failing everyone, still opens it; memory
 * stays bounded whatever the number of clients.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { CircuitBreaker, type FailsafeEntry } from '../../../plugins/failsafe/index.ts';
import { ClientShare, MAX_TRACKED_CLIENTS } from '../../../plugins/failsafe/client-share.ts';

type BreakerCfg = NonNullable<FailsafeEntry['circuitBreaker']>;

const CFG: BreakerCfg = {
  failureThresholdCount: 5,
  failureThresholdCapacity: 20,
  halfOpenAfter: 300_000,
  successThresholdCount: 2,
  successThresholdCapacity: 10,
  maxClientShare: 0.5,
  clientShareWindow: 60_000,
};

describe('error charging: the breaker bound on one client (fake timers)', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ toFake: ['Date'] });
  });
  afterEach(() => clock.uninstall());

  it('a client flooding failures while another client is served cannot open the breaker', () => {
    const b = new CircuitBreaker(CFG);
    b.record(false, 'good');
    for (let i = 0; i < 100; i++) {
      clock.tick(100);
      b.record(true, 'bad');
      if (i % 10 === 0) b.record(false, 'good');
    }
    expect(b.state).to.equal('closed');
  });

  it('one client alone (nobody else answered in the window) still opens it', () => {
    const b = new CircuitBreaker(CFG);
    for (let i = 0; i < 5; i++) b.record(true, 'only');
    expect(b.state).to.equal('open');
  });

  it("an outage opens it: once the other client's last success is older than the window, the flooding client counts again", () => {
    const b = new CircuitBreaker(CFG);
    b.record(false, 'good');
    for (let i = 0; i < 10; i++) b.record(true, 'bad');
    expect(b.state, 'bounded while the other client was served recently').to.equal('closed');
    clock.tick(60_001);
    for (let i = 0; i < 5; i++) b.record(true, 'bad');
    expect(b.state).to.equal('open');
  });

  it('the other clients still count: failures spread over several clients open it', () => {
    const b = new CircuitBreaker(CFG);
    b.record(false, 'x');
    for (let i = 0; i < 20; i++) b.record(true, 'flood');
    expect(b.state).to.equal('closed');
    for (const c of ['c1', 'c2', 'c3', 'c4', 'c5']) b.record(true, c);
    expect(b.state).to.equal('open');
  });

  it("svc's own calls (no client key) are never bounded", () => {
    const b = new CircuitBreaker(CFG);
    b.record(false, 'good');
    for (let i = 0; i < 5; i++) b.record(true);
    expect(b.state).to.equal('open');
  });

  it('while half-open, a bounded client cannot reopen it', () => {
    const b = new CircuitBreaker(CFG);
    for (let i = 0; i < 5; i++) b.record(true, 'a');
    expect(b.state).to.equal('open');
    clock.tick(300_000);
    expect(b.allow()).to.equal(true);
    expect(b.state).to.equal('half-open');
    b.record(false, 'good');
    b.record(true, 'a');
    expect(b.state, "a's failures are most of the window's while good is served").to.equal('half-open');
    b.record(false, 'good');
    expect(b.state).to.equal('closed');
  });

  it('maxClientShare 1 turns the bound off', () => {
    const b = new CircuitBreaker({ ...CFG, maxClientShare: 1 });
    expect(b.clients).to.equal(undefined);
    b.record(false, 'good');
    for (let i = 0; i < 5; i++) b.record(true, 'bad');
    expect(b.state).to.equal('open');
  });

  it('ClientShare: shares are over a sliding window of two halves; failures older than the window are forgotten', () => {
    const s = new ClientShare(0.5, 60_000, Date.now);
    s.success('good');
    expect(s.failure('bad'), 'first failure: 100% of the window while good is served').to.equal(false);
    expect(s.failure('o1'), '1 of 2').to.equal(true);
    expect(s.failure('o2'), '1 of 3').to.equal(true);
    clock.tick(30_000);
    s.success('good');
    // The earlier half still counts: 2 of 4 is within the share, 3 of 5 is over it.
    expect(s.failure('bad'), '2 of 4').to.equal(true);
    expect(s.failure('bad'), '3 of 5').to.equal(false);
    clock.tick(61_000);
    s.success('good');
    // Both halves rolled out: bad starts again at 100% of the window.
    expect(s.failure('bad')).to.equal(false);
    expect(s.failure('o1')).to.equal(true);
  });

  it('memory is bounded: thousands of failing clients track at most two halves of MAX_TRACKED_CLIENTS keys', () => {
    const s = new ClientShare(0.5, 60_000, Date.now);
    for (let i = 0; i < 5000; i++) {
      if (i % 100 === 0) clock.tick(20_000);
      s.success(`ok-${i}`);
      s.failure(`client-${i}`);
    }
    expect(s.trackedClients).to.be.at.most(2 * MAX_TRACKED_CLIENTS);
  });
});
