/**
 * shared-state merge rules: heads only move forward per upstream across the fleet, a replica
 * never applies (or re-publishes) its own messages or what it learned from others, and malformed
 * messages are dropped.
 */
import { expect } from 'chai';
import { HeadLedger, headsToApply, parseMessage, parseSnapshotValue, type SharedHead } from '../../../../plugins/shared-state/index.ts';

const head = (latest: number, finalized: number, upstream = 'a'): SharedHead => ({ project: 'main', upstream, latest, finalized });

describe('shared-state merge rules', () => {
  it('applies only heads above what this replica knows (monotonic)', () => {
    const known = () => ({ latest: 100, finalized: 90 });
    expect(headsToApply({ replica: 'r2', heads: [head(101, 90)] }, 'r1', known)).to.deep.equal([head(101, 0)]);
    expect(headsToApply({ replica: 'r2', heads: [head(99, 95)] }, 'r1', known)).to.deep.equal([head(0, 95)]);
    expect(headsToApply({ replica: 'r2', heads: [head(100, 90), head(50, 10)] }, 'r1', known)).to.deep.equal([]);
  });

  it('ignores its own messages and unknown upstreams', () => {
    expect(headsToApply({ replica: 'r1', heads: [head(500, 400)] }, 'r1', () => ({ latest: 0, finalized: 0 }))).to.deep.equal([]);
    expect(headsToApply({ replica: 'r2', heads: [head(500, 400)] }, 'r1', () => undefined)).to.deep.equal([]);
  });

  it('publishes only heads that moved, never what was learned from another replica (no echo)', () => {
    const ledger = new HeadLedger();
    expect(ledger.changed([head(10, 5)])).to.deep.equal([head(10, 5)]);
    expect(ledger.changed([head(10, 5)])).to.deep.equal([]);
    ledger.learned(head(20, 15));
    // The local view now holds the applied head: nothing to publish.
    expect(ledger.changed([head(20, 15)])).to.deep.equal([]);
    expect(ledger.changed([head(21, 15)])).to.deep.equal([head(21, 15)]);
    // A lower local number never publishes a step back.
    expect(ledger.changed([head(3, 1)])).to.deep.equal([]);
  });

  it('drops malformed messages and numbers', () => {
    expect(parseMessage('not json')).to.equal(undefined);
    expect(parseMessage('{"heads":[]}')).to.equal(undefined);
    expect(parseMessage(JSON.stringify({ replica: 'x', heads: [{ project: 'main', upstream: 'a', latest: -1, finalized: 1.5 }, { project: 1 }] }))).to.deep.equal({
      replica: 'x',
      heads: [head(0, 0)],
    });
    expect(parseSnapshotValue('12,7')).to.deep.equal({ latest: 12, finalized: 7 });
    expect(parseSnapshotValue('x')).to.deep.equal({ latest: 0, finalized: 0 });
  });
});
