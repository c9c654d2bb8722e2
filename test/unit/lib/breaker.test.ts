/**
 * svc's one circuit-breaker state machine (lib/breaker.ts), in the three shapes its users give
 * it: the failsafe plugin's upstream breaker (closes early), eRPC's connector-failsafe breaker
 * (full window, judged at capacity, bounded trials) and the storage breaker (n in a row, one
 * probe, the wait doubling per failed probe).
 */
import { expect } from 'chai';
import { type BreakerState, CountBreaker } from '../../../lib/breaker.ts';

describe('CountBreaker (lib/breaker.ts)', () => {
  let now = 0;
  const clock = () => now;

  it('opens on the failures of the ring, waits halfOpenAfter, closes early on enough half-open successes; a failed trial reopens it', () => {
    now = 0;
    const edges: BreakerState[] = [];
    const b = new CountBreaker(
      { failureThresholdCount: 2, failureThresholdCapacity: 3, halfOpenAfter: 100, successThresholdCount: 2, successThresholdCapacity: 3 },
      clock,
      (to) => edges.push(to),
    );
    b.record(true);
    b.record(false);
    expect(b.state).to.equal('closed');
    b.record(true);
    expect(b.state).to.equal('open');
    expect(b.permit()).to.equal(false);
    now = 100;
    expect(b.permit()).to.equal(true);
    expect(b.state).to.equal('half-open');
    expect(b.permit(), 'unbounded trials by default').to.equal(true);
    b.record(false);
    b.record(false);
    expect(b.state).to.equal('closed');
    now = 150;
    b.record(true);
    b.record(true);
    expect(b.state).to.equal('open');
    now = 249;
    expect(b.permit()).to.equal(false);
    now = 250;
    expect(b.permit()).to.equal(true);
    b.record(true);
    expect(b.state).to.equal('open');
    expect(edges).to.deep.equal(['open', 'half-open', 'closed', 'open', 'half-open', 'open']);
  });

  it('with fullWindow it opens only once the ring is full; judged at capacity it closes only after every trial, with bounded trials', () => {
    now = 0;
    const b = new CountBreaker(
      {
        failureThresholdCount: 2,
        failureThresholdCapacity: 4,
        fullWindow: true,
        halfOpenAfter: 10,
        successThresholdCount: 2,
        successThresholdCapacity: 3,
        halfOpen: 'judge-at-capacity',
        maxTrials: 3,
      },
      clock,
    );
    b.record(true);
    b.record(true);
    b.record(false);
    expect(b.state, 'ring not full').to.equal('closed');
    b.record(false);
    expect(b.state).to.equal('open');
    now = 10;
    expect([b.permit(), b.permit(), b.permit(), b.permit()]).to.deep.equal([true, true, true, false]);
    b.record(false);
    b.record(false);
    expect(b.state, 'two successes, not yet judged').to.equal('half-open');
    b.release();
    expect(b.permit(), 'a released slot is free again').to.equal(true);
    b.record(true);
    expect(b.state, '2 of 3 trials succeeded: closed').to.equal('closed');
  });

  it('as n-in-a-row with one probe and a doubling wait (capped), reset when it closes', () => {
    now = 0;
    const b = new CountBreaker(
      {
        failureThresholdCount: 3,
        failureThresholdCapacity: 3,
        fullWindow: true,
        halfOpenAfter: 100,
        successThresholdCount: 1,
        successThresholdCapacity: 1,
        maxTrials: 1,
        backoffFactor: 2,
        maxHalfOpenAfter: 300,
      },
      clock,
    );
    b.record(true);
    b.record(true);
    b.record(false);
    b.record(true);
    b.record(true);
    expect(b.state, 'a success breaks the run').to.equal('closed');
    b.record(true);
    expect(b.state).to.equal('open');
    expect(b.openWait).to.equal(100);
    now = 100;
    expect([b.permit(), b.permit()]).to.deep.equal([true, false]);
    b.record(true);
    expect(b.openWait).to.equal(200);
    now = 300;
    expect(b.permit()).to.equal(true);
    b.record(true);
    expect(b.openWait).to.equal(300);
    now = 600;
    expect(b.permit()).to.equal(true);
    b.record(true);
    expect(b.openWait, 'capped').to.equal(300);
    now = 900;
    expect(b.permit()).to.equal(true);
    b.record(false);
    expect(b.state).to.equal('closed');
    expect(b.openWait).to.equal(100);
  });
});
