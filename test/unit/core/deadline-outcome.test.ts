/**
 * A deadline is a timeout, not a cancellation (spec §4.7 #2, §4.5, §7): `callFailure` turns the
 * failure of a call whose own deadline passed into `ErrEndpointRequestTimeout` and leaves every
 * other failure alone (a client that left stays `ErrCancelled`); `traceOutcome` writes only the
 * spec's trace words for attempts that did not answer in time.
 */
import { expect } from 'chai';
import { ErrCancelled, ErrEndpointRequestTimeout, ErrEndpointServerSideException, ErrUpstreamsExhausted } from '../../../core/wire/errors.ts';
import { DeadlineReason } from '../../../core/registry/upstream.ts';
import { callFailure, traceOutcome } from '../../../core/pipeline/sweep.ts';

function aborted(reason: unknown): AbortSignal {
  const c = new AbortController();
  c.abort(reason);
  return c.signal;
}

describe('deadline outcome (core/pipeline/sweep.ts)', () => {
  it('§4.7 #2 — a call failed after its deadline passed is ErrEndpointRequestTimeout, its path error kept as the cause', () => {
    const exhausted = new ErrUpstreamsExhausted([new ErrEndpointRequestTimeout('a'), new ErrEndpointRequestTimeout('b')]);
    const e = callFailure(aborted(new DeadlineReason('call exceeded server.maxTimeout (1500 ms)')), exhausted);
    expect(e).to.be.instanceOf(ErrEndpointRequestTimeout);
    expect((e as ErrEndpointRequestTimeout).cause).to.equal(exhausted);
    const cancelled = callFailure(aborted(new DeadlineReason()), new ErrCancelled('call cancelled while waiting for a multiplexed answer'));
    expect(cancelled).to.be.instanceOf(ErrEndpointRequestTimeout);
  });

  it('§4.7 #2 — a timeout stays as it is; a client that left stays ErrCancelled; a failure before the deadline is kept', () => {
    const t = new ErrEndpointRequestTimeout('x');
    expect(callFailure(aborted(new DeadlineReason()), t)).to.equal(t);
    const c = new ErrCancelled('client left');
    expect(callFailure(aborted(new Error('client closed the connection')), c)).to.equal(c);
    const s = new ErrEndpointServerSideException('boom');
    expect(callFailure(new AbortController().signal, s)).to.equal(s);
  });

  it('§4.5 X-SVC-Upstreams — trace outcomes: spec words pass through, cancelled/pending/skipped show timeout, error stays error', () => {
    for (const o of ['success', 'timeout', 'exec_revert', 'rate_limited', 'error'] as const) expect(traceOutcome({ outcome: o })).to.equal(o);
    for (const o of ['cancelled', 'pending', 'skipped'] as const) expect(traceOutcome({ outcome: o })).to.equal('timeout');
  });
});
