/**
 * Whether an upstream answers at all (lib/reachability.ts, the health tracker's upstream-up
 * state): an answer of any kind says up, no answer (refused, timed out, HTTP 5xx) says down,
 * svc's own cancellations and refusals say nothing; the tracker reports each turn once.
 */
import { expect } from 'chai';
import { HealthTracker } from '../../../lib/health-window.ts';
import { reachabilityOf } from '../../../lib/reachability.ts';
import {
  ErrCancelled,
  ErrEndpointCapacityExceeded,
  ErrEndpointExecutionException,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrUpstreamRateLimitRuleExceeded,
  type SvcError,
} from '../../../core/wire/errors.ts';
import type { AttemptOutcome, AttemptRecord } from '../../../core/wire/records.ts';

const attempt = (outcome: AttemptOutcome, error?: SvcError, upstreamId = 'u'): AttemptRecord =>
  ({ projectId: 'p', upstreamId, method: 'eth_call', outcome, error, startedAt: 0, durationMs: 1 }) as unknown as AttemptRecord;

describe('upstream reachability', () => {
  it('an answer of any kind is up: a result, a revert, the node rate-limiting, a JSON-RPC error about the request', () => {
    expect(reachabilityOf(attempt('success'))).to.equal('up');
    expect(reachabilityOf(attempt('exec_revert', new ErrEndpointExecutionException('reverted')))).to.equal('up');
    expect(reachabilityOf(attempt('rate_limited', new ErrEndpointCapacityExceeded('429')))).to.equal('up');
    expect(reachabilityOf(attempt('error', new ErrEndpointServerSideException('node said -32000 boom', { upstreamStatus: 200 })))).to.equal('up');
  });

  it('no answer is down: a refused or reset connection, no answer before the deadline, HTTP 5xx', () => {
    expect(
      reachabilityOf(attempt('error', new ErrEndpointServerSideException('transport error: ECONNREFUSED', { details: { errno: 'ECONNREFUSED' } }))),
    ).to.equal('down');
    expect(reachabilityOf(attempt('timeout', new ErrEndpointRequestTimeout('no answer')))).to.equal('down');
    expect(reachabilityOf(attempt('error', new ErrEndpointRequestTimeout('no answer')))).to.equal('down');
    expect(reachabilityOf(attempt('error', new ErrEndpointServerSideException('HTTP 502', { upstreamStatus: 502 })))).to.equal('down');
  });

  it("svc's own cancellations and budget refusals say nothing", () => {
    expect(reachabilityOf(attempt('cancelled', new ErrCancelled('lost the race')))).to.equal(undefined);
    expect(reachabilityOf(attempt('rate_limited', new ErrUpstreamRateLimitRuleExceeded('over budget')))).to.equal(undefined);
    expect(reachabilityOf(attempt('skipped'))).to.equal(undefined);
  });

  it('the tracker reports each turn once, keeps the latest error while down, and its snapshot says down with the reason', () => {
    const t = new HealthTracker(() => 'neutral');
    const turns: string[] = [];
    t.reachabilityListeners.push((u, r) => turns.push(`${u}:${r.up ? 'up' : 'down'}`));
    t.record(attempt('success'));
    t.record(attempt('success'));
    const refused = new ErrEndpointServerSideException('transport error talking to upstream u: ECONNREFUSED', { details: { errno: 'ECONNREFUSED' } });
    t.record(attempt('error', refused));
    t.record(attempt('cancelled', new ErrCancelled('x')));
    t.record(attempt('timeout', new ErrEndpointRequestTimeout('upstream u did not answer before the deadline')));
    // Refused (unreachable), then timed out (reached, no answer): two down states, each reported.
    expect(turns).to.deep.equal(['u:up', 'u:down', 'u:down']);
    expect(t.snapshot('u')).to.include({ down: true, downReason: 'ErrEndpointRequestTimeout: upstream u did not answer before the deadline' });
    expect(t.snapshot('u').unreachable).to.equal(undefined);
    t.record(attempt('error', refused));
    expect(t.snapshot('u')).to.include({ down: true, unreachable: true });
    t.record(attempt('success'));
    expect(turns).to.deep.equal(['u:up', 'u:down', 'u:down', 'u:down', 'u:up']);
    expect(t.snapshot('u').down).to.equal(undefined);
    expect(t.reachability('other')).to.equal(undefined);
  });
});
