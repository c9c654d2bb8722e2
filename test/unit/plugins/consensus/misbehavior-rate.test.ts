/**
 * The consensus plugin's misbehaviour record (the selection policy's `misbehaviorRate`, eRPC's
 * rolling misbehaviour count): per upstream, rounds answered and rounds whose winning answer
 * differed from its data answer, over the project's health window, on an explicit clock. A round
 * without a winner blames nobody; an error differing from the winner is no misbehaviour.
 */
import { expect } from 'chai';
import { MisbehaviorRecord, type Vote } from '../../../../plugins/consensus/index.ts';
import { HealthTracker } from '../../../../lib/health-window.ts';
import { healthOutcome } from '../../../../core/pipeline/blame.ts';
import type { Project } from '../../../../core/registry/project.ts';
import { ErrEndpointClientSideException } from '../../../../core/wire/errors.ts';

const vote = (upstreamId: string, hash: string, error = false): Vote => ({
  upstreamId,
  hash,
  empty: false,
  size: 10,
  ...(error ? { error: new ErrEndpointClientSideException('execution reverted') } : {}),
});
const won = (...votes: Vote[]) => ({ winningGroup: { hash: votes[0]!.hash, votes, empty: false, isError: false, size: 10 } });

describe('consensus: misbehaviour record (misbehaviorRate)', () => {
  let now = 1_000_000;
  const record = () => new MisbehaviorRecord(() => now);
  // A 60 s health window in 10 buckets of 6 s.
  const project = () => ({ health: new HealthTracker(healthOutcome, 60_000, 10) }) as unknown as Project;
  beforeEach(() => (now = 1_000_000));

  it('counts rounds answered and rounds lost per upstream; the rate is lost / rounds', () => {
    const r = record();
    const p = project();
    const [a, b, c] = [vote('a', 'x'), vote('b', 'x'), vote('c', 'y')];
    r.record(p, won(a, b), [a, b, c]);
    r.record(p, won(a, b), [a, b, c]);
    r.record(p, won(a, c), [a, vote('c', 'x')]);
    expect(r.counts(p, 'a')).to.deep.equal({ rounds: 3, lost: 0, rate: 0 });
    expect(r.counts(p, 'c')).to.deep.equal({ rounds: 3, lost: 2, rate: 2 / 3 });
    expect(r.counts(p, 'never')).to.deep.equal({ rounds: 0, lost: 0, rate: 0 });
  });

  it('a dispute (no winner) blames nobody; an error vote that differs from the winner is no misbehaviour', () => {
    const r = record();
    const p = project();
    r.record(p, {}, [vote('a', 'x'), vote('b', 'y')]);
    const a = vote('a', 'x');
    r.record(p, won(a), [a, vote('b', 'jsonrpc:3', true)]);
    expect(r.counts(p, 'b')).to.deep.equal({ rounds: 2, lost: 0, rate: 0 });
  });

  it('an upstream with several slots in one round counts one round', () => {
    const r = record();
    const p = project();
    const a = vote('a', 'x');
    r.record(p, won(a), [a, vote('b', 'y'), vote('b', 'y')]);
    expect(r.counts(p, 'b')).to.deep.equal({ rounds: 1, lost: 1, rate: 1 });
  });

  it("ages out with the project's health window, bucket by bucket", () => {
    const r = record();
    const p = project();
    const a = vote('a', 'x');
    r.record(p, won(a), [a, vote('b', 'y')]);
    now += 30_000;
    const bx = vote('b', 'x');
    r.record(p, won(a, bx), [a, bx]);
    expect(r.counts(p, 'b')).to.deep.include({ rounds: 2, lost: 1 });
    now += 31_000;
    expect(r.counts(p, 'b')).to.deep.equal({ rounds: 1, lost: 0, rate: 0 });
    now += 60_000;
    expect(r.counts(p, 'b')).to.deep.equal({ rounds: 0, lost: 0, rate: 0 });
  });

  it('keeps projects apart (each by its own health tracker)', () => {
    const r = record();
    const [p1, p2] = [project(), project()];
    const a = vote('a', 'x');
    r.record(p1, won(a), [a, vote('b', 'y')]);
    expect(r.counts(p2, 'b').rounds).to.equal(0);
  });
});
