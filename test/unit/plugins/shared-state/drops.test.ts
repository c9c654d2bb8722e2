/**
 * Dropped shared-state entries: every drop is counted under its reason, and each reason is
 * logged at most once per interval (with how many were dropped since its last line).
 */
import { expect } from 'chai';
import { DROP_REASONS, type DropReason, DropTally } from '../../../../plugins/shared-state/index.ts';

describe('shared-state dropped entries', () => {
  it('counts every drop, logs each reason at most once per interval', () => {
    let now = 0;
    const counted: DropReason[] = [];
    const logged: Array<[DropReason, number]> = [];
    const tally = new DropTally({ count: (r) => counted.push(r), log: (r, n) => logged.push([r, n]) }, 1000, () => now);
    for (let i = 0; i < 500; i++) tally.drop('malformed');
    tally.drop('stale');
    now = 999;
    tally.drop('malformed');
    now = 1000;
    tally.drop('malformed');
    expect(counted.filter((r) => r === 'malformed')).to.have.length(502);
    expect(logged).to.deep.equal([
      ['malformed', 1],
      ['stale', 1],
      ['malformed', 501],
    ]);
  });

  it('has a small fixed set of reasons (bounded label values)', () => {
    expect(DROP_REASONS).to.deep.equal(['malformed', 'oversized', 'out_of_range', 'stale', 'unknown', 'implausible']);
    expect(DropTally.reasons).to.equal(DROP_REASONS);
  });
});
