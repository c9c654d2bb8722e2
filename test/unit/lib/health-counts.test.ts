/**
 * The health tracker's cheap readers: `requestCounts` (a cell's requests and answered requests
 * over the window, without quantiles) and `methods` (an upstream's own method cells with
 * requests in the window: what eRPC's per-upstream metrics list), on an explicit clock.
 */
import { expect } from 'chai';
import { HealthTracker } from '../../../lib/health-window.ts';
import { healthOutcome } from '../../../core/pipeline/blame.ts';
import type { AttemptRecord } from '../../../core/wire/records.ts';
import { ErrEndpointServerSideException, ErrEndpointUnsupported } from '../../../core/wire/errors.ts';

describe('health tracker: requestCounts and methods', () => {
  let now = 1_000_000;
  // A 60 s window in 10 buckets of 6 s.
  const tracker = () => new HealthTracker(healthOutcome, 60_000, 10, () => now);
  const attempt = (upstreamId: string, method: string, error?: Error): AttemptRecord =>
    ({ upstreamId, method, dialled: true, durationMs: 5, startedAt: now, outcome: error ? 'error' : 'success', ...(error ? { error } : {}) }) as AttemptRecord;
  beforeEach(() => (now = 1_000_000));

  it('counts requests and answered ones per cell and for `*`; a method without a cell has none', () => {
    const h = tracker();
    h.record(attempt('a', 'eth_call'));
    h.record(attempt('a', 'eth_call', new ErrEndpointServerSideException('boom')));
    h.record(attempt('a', 'eth_foo', new ErrEndpointUnsupported('eth_foo is not supported')));
    expect(h.requestCounts('a', 'eth_call')).to.deep.equal({ requests: 2, answered: 1 });
    expect(h.requestCounts('a', 'eth_foo')).to.deep.equal({ requests: 1, answered: 0 });
    expect(h.requestCounts('a')).to.deep.equal({ requests: 3, answered: 1 });
    expect(h.requestCounts('a', 'eth_none')).to.deep.equal({ requests: 0, answered: 0 });
    expect(h.requestCounts('z')).to.deep.equal({ requests: 0, answered: 0 });
  });

  it("lists an upstream's method cells with requests in the window: not `*`, not a glob cordon's cell, not once aged out", () => {
    const h = tracker();
    h.record(attempt('a', 'eth_call'));
    h.cordon('a', 'eth_get*', 'operator');
    h.cordon('a', 'eth_getLogs', 'operator');
    expect(h.methods('a')).to.deep.equal(['eth_call']);
    now += 61_000;
    expect(h.methods('a')).to.deep.equal([]);
    expect(h.requestCounts('a', 'eth_call')).to.deep.equal({ requests: 0, answered: 0 });
    expect(h.methods('none')).to.deep.equal([]);
  });
});
