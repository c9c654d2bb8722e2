/**
 * svc's one retry backoff (lib/backoff.ts): growth per retry, the cap, jitter drawn only when
 * asked for, and the forms its users rely on (the failsafe's shrinking factor, the providers'
 * spec §8 schedule, a doubling reconnect with a bounded exponent).
 */
import { expect } from 'chai';
import { backoffDelay } from '../../../lib/backoff.ts';

describe('lib/backoff: backoffDelay', () => {
  it('initialMs × factor^(n-1), capped at maxMs; n below 1 counts as 1', () => {
    const b = { initialMs: 100, factor: 2, maxMs: 1000 };
    expect([0, 1, 2, 3, 4, 5, 6].map((n) => backoffDelay(b, n))).to.deep.equal([100, 100, 200, 400, 800, 1000, 1000]);
    expect(backoffDelay({ initialMs: 100, factor: 2 }, 11), 'no cap').to.equal(102_400);
  });

  it('a factor below 1 shrinks the waits (as eRPC allows)', () => {
    expect([1, 2, 3].map((n) => backoffDelay({ initialMs: 1000, factor: 0.5, maxMs: 3000 }, n))).to.deep.equal([1000, 500, 250]);
  });

  it('jitter adds random() × jitterMs; without jitter random is never called', () => {
    let calls = 0;
    const random = () => {
      calls++;
      return 0.25;
    };
    expect(backoffDelay({ initialMs: 100, factor: 1, jitterMs: 40 }, 3, random)).to.equal(110);
    expect(calls).to.equal(1);
    expect(backoffDelay({ initialMs: 100, factor: 1 }, 3, random)).to.equal(100);
    expect(backoffDelay({ initialMs: 100, factor: 1, jitterMs: 0 }, 3, random)).to.equal(100);
    expect(calls).to.equal(1);
  });

  it('a zero start stays zero however large n is (no NaN), jitter still applies', () => {
    expect(backoffDelay({ initialMs: 0, factor: 10, maxMs: 5 }, 10_000)).to.equal(0);
    expect(backoffDelay({ initialMs: 0, factor: 2, jitterMs: 10 }, 3, () => 0.5)).to.equal(5);
  });

  it('a huge n reaches the cap, not Infinity or NaN', () => {
    expect(backoffDelay({ initialMs: 50, factor: 2, maxMs: 2000 }, 5000)).to.equal(2000);
  });

  it("the providers' bootstrap schedule (spec §8): 3 s, ×1.5 per failure, at most 130 s", () => {
    const b = { initialMs: 3000, factor: 1.5, maxMs: 130_000 };
    expect([1, 2, 3, 10, 11].map((n) => backoffDelay(b, n))).to.deep.equal([3000, 4500, 6750, 3000 * 1.5 ** 9, 130_000]);
  });
});
