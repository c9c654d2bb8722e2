/**
 * The misbehaviour cordon of consensus (`punishMisbehavior`) on fake timers:
 * `disputeThreshold` losses within `disputeWindow` cordon the upstream for every method with
 * reason `misbehaving in consensus`; `sitOutPenalty` later it is uncordoned; an operator's own
 * cordon is neither overwritten nor lifted.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { MISBEHAVING_REASON, Punisher } from '../../../../plugins/consensus/index.ts';
import { HealthTracker } from '../../../../lib/health-window.ts';
import { healthOutcome } from '../../../../core/pipeline/blame.ts';

describe('consensus: punishment cordon', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ now: 1_000_000, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => clock.uninstall());

  const punisher = () =>
    new Punisher({ now: () => Date.now(), setTimeout: (f, ms) => setTimeout(f, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) });

  it('cordons after disputeThreshold losses within the window and releases after sitOutPenalty', () => {
    const health = new HealthTracker(healthOutcome, 60_000);
    const p = punisher();
    expect(p.lost(health, 'u', 3, 10_000, 30_000)).to.equal(false);
    clock.tick(4_000);
    expect(p.lost(health, 'u', 3, 10_000, 30_000)).to.equal(false);
    clock.tick(4_000);
    expect(p.lost(health, 'u', 3, 10_000, 30_000)).to.equal(true);
    expect(health.cordonOf('u', 'eth_call')).to.equal(MISBEHAVING_REASON);
    clock.tick(29_999);
    expect(health.isCordoned('u', '*')).to.equal(true);
    clock.tick(1);
    expect(health.isCordoned('u', '*')).to.equal(false);
  });

  it('losses older than disputeWindow do not count', () => {
    const health = new HealthTracker(healthOutcome, 60_000);
    const p = punisher();
    p.lost(health, 'u', 2, 10_000, 30_000);
    clock.tick(10_001);
    expect(p.lost(health, 'u', 2, 10_000, 30_000)).to.equal(false);
    expect(health.isCordoned('u', '*')).to.equal(false);
  });

  it("an operator's cordon is left alone: not overwritten, not lifted", () => {
    const health = new HealthTracker(healthOutcome, 60_000);
    health.cordon('u', '*', 'maintenance');
    const p = punisher();
    expect(p.lost(health, 'u', 1, 10_000, 5_000)).to.equal(false);
    clock.tick(10_000);
    expect(health.cordonOf('u', '*')).to.equal('maintenance');
  });
});
