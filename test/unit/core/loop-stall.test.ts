/**
 * Timeouts svc causes itself (lib/loop-stall.ts, core/pipeline/blame.ts): when its event loop stalls for a
 * real share of an attempt, the attempt's timeout is charged to nobody (no health error, not in
 * svc_upstream_request_errors_total); other failures, and timeouts without a stall, still count.
 */
import { expect } from 'chai';
import { healthOutcome, isCharged } from '../../../core/pipeline/blame.ts';
import { ErrEndpointRequestTimeout, ErrEndpointServerSideException, ErrFailsafeTimeoutExceeded } from '../../../core/wire/errors.ts';
import { noteStall, resetLoopStalls, stalledDuring, watchLoopStalls } from '../../../lib/loop-stall.ts';

/** A finished, dialled attempt over [startedAt, startedAt + durationMs]. */
function attempt(error: Error, startedAt: number, durationMs: number, outcome: 'timeout' | 'error' = 'timeout') {
  return { dialled: true, outcome, error, startedAt, durationMs } as Parameters<typeof healthOutcome>[0];
}

describe('loop stalls: a timeout svc caused is charged to no upstream', () => {
  beforeEach(() => resetLoopStalls());
  after(() => resetLoopStalls());

  it('stalledDuring: a stall covering at least a tenth of the span counts; a short or outside one does not', () => {
    const t = performance.now() - 10_000;
    noteStall(t + 100, t + 400); // 300 ms
    expect(stalledDuring(t, t + 1000)).to.equal(true); // 30 %
    expect(stalledDuring(t, t + 5000)).to.equal(false); // 6 %
    expect(stalledDuring(t + 500, t + 900)).to.equal(false); // after it
  });

  it('a timeout during a stall is ignored for health and not charged; a 5xx, or a timeout without a stall, still counts', () => {
    const t = performance.now() - 10_000;
    noteStall(t + 100, t + 600);
    const stalled = attempt(new ErrEndpointRequestTimeout('timed out'), t, 1000);
    expect(healthOutcome(stalled)).to.equal('ignore');
    expect(isCharged(stalled)).to.equal(false);
    expect(healthOutcome(attempt(new ErrFailsafeTimeoutExceeded('timeout policy'), t, 1000))).to.equal('ignore');
    const server = attempt(new ErrEndpointServerSideException('boom'), t, 1000, 'error');
    expect(healthOutcome(server)).to.equal('error');
    expect(isCharged(server)).to.equal(true);
    const calm = attempt(new ErrEndpointRequestTimeout('timed out'), t + 2000, 1000);
    expect(healthOutcome(calm)).to.equal('error');
    expect(isCharged(calm)).to.equal(true);
  });

  it('the watch notices a real stall of the loop (a 300 ms synchronous task), also while it is still going on', async () => {
    watchLoopStalls();
    await new Promise((r) => setTimeout(r, 120));
    const t0 = performance.now();
    while (performance.now() - t0 < 300) {
      // busy: the loop cannot run the watch
    }
    // Still inside the stall's aftermath, before the watch ticked: counted as in progress.
    expect(stalledDuring(t0, performance.now())).to.equal(true);
    await new Promise((r) => setTimeout(r, 80));
    expect(stalledDuring(t0, t0 + 400)).to.equal(true);
  });
});
