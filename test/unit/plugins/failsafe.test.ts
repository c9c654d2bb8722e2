/**
 * Unit tests of the failsafe plugin's pure parts: the circuit breaker state
 * machine on an injected clock, the breaker's outcome classification, the retry back-off,
 * failsafe entry matching, and the health tracker's outcome classification
 * (lib/health-window.ts, classified by core/pipeline/blame.ts), which the breaker's rules mirror.
 */
import { expect } from 'chai';
import picomatch from 'picomatch';
import type { AttemptRecord, Finality } from '../../../core/pipeline/context.ts';
import {
  ErrCancelled,
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointNonceException,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  ErrFailsafeCircuitBreakerOpen,
  ErrFailsafeTimeoutExceeded,
  ErrUpstreamMalformedResponse,
  ErrUpstreamsExhausted,
  type SvcError,
} from '../../../core/wire/errors.ts';
import { healthOutcome } from '../../../core/pipeline/blame.ts';
import { breakerOutcome, CircuitBreaker, isRetryable, matchEntry, retryDelay, WRITE_METHODS, type FailsafeEntry } from '../../../plugins/failsafe/index.ts';

type BreakerCfg = NonNullable<FailsafeEntry['circuitBreaker']>;
type RetryCfg = NonNullable<FailsafeEntry['retry']>;

/** A breaker on a hand-driven clock. */
function breaker(cfg: Partial<BreakerCfg> = {}): { b: CircuitBreaker; clock: { t: number } } {
  const clock = { t: 1_000_000 };
  const full: BreakerCfg = {
    failureThresholdCount: 3,
    failureThresholdCapacity: 5,
    halfOpenAfter: 300,
    successThresholdCount: 2,
    successThresholdCapacity: 10,
    ...cfg,
  };
  return { b: new CircuitBreaker(full, () => clock.t), clock };
}

/** Records a sequence: `F` failure, `S` success. */
function feed(b: CircuitBreaker, seq: string): void {
  for (const ch of seq) b.record(ch === 'F');
}

/** Entries compiled the way the plugin compiles them (picomatch, bash + dot). */
function compiled(entries: Array<Partial<FailsafeEntry>>): Parameters<typeof matchEntry>[0] {
  return entries.map((e) => {
    const entry = { matchMethod: '*', ...e } as FailsafeEntry;
    return { entry, matchMethod: picomatch(entry.matchMethod, { bash: true, dot: true }) };
  });
}

function retryCfg(r: Partial<RetryCfg> = {}): RetryCfg {
  return { maxAttempts: 3, delay: 100, backoffFactor: 2, backoffMaxDelay: 1000, jitter: 0, emptyResultMaxAttempts: 2, ...r };
}

function attempt(outcome: AttemptRecord['outcome'], error?: SvcError, dialled = true): Pick<AttemptRecord, 'outcome' | 'error' | 'dialled'> {
  return { outcome, error, dialled };
}

describe('failsafe plugin: CircuitBreaker state machine (injected clock)', () => {
  it('starts closed and allows calls', () => {
    const { b } = breaker();
    expect(b.state).to.equal('closed');
    expect(b.allow()).to.equal(true);
  });

  it('stays closed below the failure threshold and opens when the ring holds failureThresholdCount failures', () => {
    const { b } = breaker();
    feed(b, 'FSF');
    expect(b.state).to.equal('closed');
    expect(b.allow()).to.equal(true);
    feed(b, 'F');
    expect(b.state).to.equal('open');
    expect(b.allow()).to.equal(false);
  });

  it('failures must be within the ring: old failures slide out of failureThresholdCapacity', () => {
    const { b } = breaker();
    // Ring of 5: F F S S S, then F pushes the first F out: still 2 failures in the ring.
    feed(b, 'FFSSS');
    feed(b, 'F');
    expect(b.state, 'the oldest failure left the ring').to.equal('closed');
    // F F F... : [S S S F F] then [S S F F F] -> 3 failures.
    feed(b, 'F');
    expect(b.state).to.equal('closed');
    feed(b, 'F');
    expect(b.state).to.equal('open');
  });

  it('never opens when failures are spread wider than the ring', () => {
    const { b } = breaker();
    for (let i = 0; i < 20; i++) feed(b, 'FSSSS');
    expect(b.state).to.equal('closed');
  });

  it('ignores outcomes recorded while open', () => {
    const { b, clock } = breaker();
    feed(b, 'FFF');
    feed(b, 'SSSSSSSSSS');
    expect(b.state).to.equal('open');
    clock.t += 299;
    expect(b.allow()).to.equal(false);
    expect(b.state).to.equal('open');
  });

  it('half-opens once halfOpenAfter has passed (on the next allow())', () => {
    const { b, clock } = breaker();
    feed(b, 'FFF');
    clock.t += 299;
    expect(b.allow()).to.equal(false);
    clock.t += 1;
    expect(b.allow()).to.equal(true);
    expect(b.state).to.equal('half-open');
    // Half-open lets trial calls through.
    expect(b.allow()).to.equal(true);
  });

  it('closes after successThresholdCount successes while half-open, with a fresh ring', () => {
    const { b, clock } = breaker();
    feed(b, 'FFF');
    clock.t += 300;
    b.allow();
    feed(b, 'S');
    expect(b.state).to.equal('half-open');
    feed(b, 'S');
    expect(b.state).to.equal('closed');
    // The old failures are gone: two more failures do not reopen it.
    feed(b, 'FF');
    expect(b.state).to.equal('closed');
    feed(b, 'F');
    expect(b.state).to.equal('open');
  });

  it('a failure while half-open reopens it and restarts the halfOpenAfter wait', () => {
    const { b, clock } = breaker();
    feed(b, 'FFF');
    clock.t += 300;
    expect(b.allow()).to.equal(true);
    feed(b, 'SF');
    expect(b.state).to.equal('open');
    expect(b.allow()).to.equal(false);
    clock.t += 299;
    expect(b.allow(), 'the wait restarts at the reopen').to.equal(false);
    clock.t += 1;
    expect(b.allow()).to.equal(true);
    expect(b.state).to.equal('half-open');
    // A new half-open period starts counting from zero.
    feed(b, 'S');
    expect(b.state).to.equal('half-open');
    feed(b, 'S');
    expect(b.state).to.equal('closed');
  });

  it('reopens when the half-open trials (successThresholdCapacity) run out before enough successes', () => {
    const { b, clock } = breaker({ successThresholdCount: 3, successThresholdCapacity: 2 });
    feed(b, 'FFF');
    clock.t += 300;
    b.allow();
    feed(b, 'S');
    expect(b.state).to.equal('half-open');
    feed(b, 'S');
    expect(b.state).to.equal('open');
    expect(b.allow()).to.equal(false);
  });

  it('opens at once with a threshold of one', () => {
    const { b } = breaker({ failureThresholdCount: 1, failureThresholdCapacity: 1 });
    feed(b, 'F');
    expect(b.state).to.equal('open');
  });
});

describe('failsafe plugin: breakerOutcome (what the breaker counts)', () => {
  const failures: Array<[string, SvcError]> = [
    ['HTTP 5xx / transport', new ErrEndpointServerSideException('boom')],
    ['malformed answer', new ErrUpstreamMalformedResponse('garbage')],
    ['unauthorised', new ErrEndpointUnauthorized('bad key')],
    ['billing', new ErrEndpointBillingIssue('pay up')],
  ];
  for (const [what, err] of failures) {
    it(`counts ${what} (${err.name}) as a failure`, () => {
      expect(breakerOutcome(err)).to.equal(true);
    });
  }

  const notCounted: Array<[string, SvcError]> = [
    ['a rate limit', new ErrEndpointCapacityExceeded('429')],
    ['an upstream request timeout', new ErrEndpointRequestTimeout('slow')],
    ['a failsafe timeout', new ErrFailsafeTimeoutExceeded('slow')],
    ['a client error', new ErrEndpointClientSideException('invalid params')],
    ['a cancellation (lost hedge leg)', new ErrCancelled('hedge leg lost the race')],
    ['missing data', new ErrEndpointMissingData('missing trie node')],
    ['an unsupported method', new ErrEndpointUnsupported('method not found')],
  ];
  for (const [what, err] of notCounted) {
    it(`does not count ${what} (${err.name})`, () => {
      expect(breakerOutcome(err)).to.equal(undefined);
    });
  }

  it('counts a success as a success', () => {
    expect(breakerOutcome(undefined)).to.equal(false);
  });

  it('counts a revert (the node worked) as a success', () => {
    expect(breakerOutcome(new ErrEndpointExecutionException('execution reverted', { code: 3 }))).to.equal(false);
    // A revert classified from a message, with a vendor code other than 3.
    expect(breakerOutcome(new ErrEndpointExecutionException('execution reverted', { code: -32000 }))).to.equal(false);
    expect(breakerOutcome(new ErrEndpointNonceException('nonce too low'))).to.equal(false);
  });
});

describe('failsafe plugin: isRetryable and WRITE_METHODS', () => {
  it('retries transport faults, timeouts, rate limits and exhausted rounds, never reverts, client errors or cancellations', () => {
    expect(isRetryable(new ErrEndpointServerSideException('x'))).to.equal(true);
    expect(isRetryable(new ErrFailsafeTimeoutExceeded('x'))).to.equal(true);
    expect(isRetryable(new ErrEndpointCapacityExceeded('x'))).to.equal(true);
    expect(isRetryable(new ErrFailsafeCircuitBreakerOpen('x'))).to.equal(true);
    expect(isRetryable(new ErrUpstreamsExhausted([new ErrEndpointServerSideException('x')]))).to.equal(true);
    expect(isRetryable(new ErrEndpointExecutionException('execution reverted'))).to.equal(false);
    expect(isRetryable(new ErrEndpointClientSideException('invalid params'))).to.equal(false);
    expect(isRetryable(new ErrEndpointNonceException('nonce too low'))).to.equal(false);
    expect(isRetryable(new ErrCancelled('gone'))).to.equal(false);
    expect(isRetryable(new Error('not an svc error'))).to.equal(false);
  });

  it('lists the write methods that are never hedged', () => {
    for (const m of ['eth_sendRawTransaction', 'eth_sendTransaction']) expect(WRITE_METHODS.has(m), m).to.equal(true);
    for (const m of ['eth_call', 'eth_getBalance', 'eth_blockNumber']) expect(WRITE_METHODS.has(m), m).to.equal(false);
  });
});

describe('failsafe plugin: retryDelay', () => {
  it('grows as delay × factor^(n-1)', () => {
    const r = retryCfg();
    expect(retryDelay(r, 1)).to.equal(100);
    expect(retryDelay(r, 2)).to.equal(200);
    expect(retryDelay(r, 3)).to.equal(400);
    expect(retryDelay(r, 4)).to.equal(800);
  });

  it('is capped at backoffMaxDelay', () => {
    const r = retryCfg();
    expect(retryDelay(r, 5)).to.equal(1000);
    expect(retryDelay(r, 30)).to.equal(1000);
  });

  it('a factor of 1 keeps the delay constant; a zero delay stays zero', () => {
    expect(retryDelay(retryCfg({ backoffFactor: 1 }), 7)).to.equal(100);
    expect(retryDelay(retryCfg({ delay: 0 }), 5)).to.equal(0);
  });

  it('adds jitter in [0, jitter], on top of the cap', () => {
    const r = retryCfg({ jitter: 50 });
    expect(retryDelay(r, 1, () => 0)).to.equal(100);
    expect(retryDelay(r, 1, () => 0.5)).to.equal(125);
    expect(retryDelay(r, 1, () => 0.999999)).to.be.closeTo(150, 0.001);
    expect(retryDelay(r, 10, () => 0.5)).to.equal(1025);
    for (let i = 0; i < 200; i++) {
      const d = retryDelay(r, 2);
      expect(d).to.be.at.least(200).and.at.most(250);
    }
  });

  it('ignores the random source when jitter is 0', () => {
    let called = false;
    expect(
      retryDelay(retryCfg(), 2, () => {
        called = true;
        return 0.9;
      }),
    ).to.equal(200);
    expect(called).to.equal(false);
  });
});

describe('failsafe plugin: matchEntry', () => {
  const fin = (f: Finality) => f;

  it('matches method globs (*, prefixes, alternation)', () => {
    const entries = compiled([
      { matchMethod: 'eth_getLogs', timeout: { duration: 1 } },
      { matchMethod: 'eth_get*', timeout: { duration: 2 } },
      { matchMethod: '(trace|debug)_*', timeout: { duration: 3 } },
      { matchMethod: '*', timeout: { duration: 4 } },
    ]);
    expect(matchEntry(entries, 'eth_getLogs', 'unknown')?.timeout?.duration).to.equal(1);
    expect(matchEntry(entries, 'eth_getBalance', 'unknown')?.timeout?.duration).to.equal(2);
    expect(matchEntry(entries, 'trace_block', 'unknown')?.timeout?.duration).to.equal(3);
    expect(matchEntry(entries, 'debug_traceTransaction', 'unknown')?.timeout?.duration).to.equal(3);
    expect(matchEntry(entries, 'eth_call', 'unknown')?.timeout?.duration).to.equal(4);
  });

  it('first match wins, even when a later entry is more specific', () => {
    const entries = compiled([
      { matchMethod: '*', retry: retryCfg({ maxAttempts: 1 }) },
      { matchMethod: 'eth_call', retry: retryCfg({ maxAttempts: 9 }) },
    ]);
    expect(matchEntry(entries, 'eth_call', 'unknown')?.retry?.maxAttempts).to.equal(1);
  });

  it('a remembered match is the same as a fresh one, per finality, past the memo bound and for misses', () => {
    const entries = compiled([
      { matchMethod: 'eth_call', matchFinality: ['finalized'], timeout: { duration: 1 } },
      { matchMethod: 'eth_*', timeout: { duration: 2 } },
    ]);
    for (let round = 0; round < 2; round++) {
      expect(matchEntry(entries, 'eth_call', 'finalized')?.timeout?.duration).to.equal(1);
      expect(matchEntry(entries, 'eth_call', 'realtime')?.timeout?.duration).to.equal(2);
      expect(matchEntry(entries, 'net_version', 'unknown')).to.equal(undefined);
    }
    // Over 1024 distinct client method names: later ones are matched every time, still correctly.
    for (let i = 0; i < 1100; i++) expect(matchEntry(entries, `eth_m${i}`, 'unknown')?.timeout?.duration).to.equal(2);
    expect(matchEntry(entries, 'x_1099', 'unknown')).to.equal(undefined);
  });

  it('returns undefined when nothing matches, or with no entries', () => {
    expect(matchEntry(compiled([{ matchMethod: 'eth_call' }]), 'eth_blockNumber', 'unknown')).to.equal(undefined);
    expect(matchEntry([], 'eth_call', 'unknown')).to.equal(undefined);
  });

  it('matchFinality restricts an entry to the listed finality classes', () => {
    const entries = compiled([
      { matchMethod: '*', matchFinality: ['realtime', 'unfinalized'], timeout: { duration: 1 } },
      { matchMethod: '*', matchFinality: ['finalized'], timeout: { duration: 2 } },
      { matchMethod: '*', timeout: { duration: 3 } },
    ]);
    expect(matchEntry(entries, 'eth_call', fin('realtime'))?.timeout?.duration).to.equal(1);
    expect(matchEntry(entries, 'eth_call', fin('unfinalized'))?.timeout?.duration).to.equal(1);
    expect(matchEntry(entries, 'eth_call', fin('finalized'))?.timeout?.duration).to.equal(2);
    expect(matchEntry(entries, 'eth_call', fin('unknown'))?.timeout?.duration).to.equal(3);
  });

  it('an empty matchFinality list matches every finality', () => {
    const entries = compiled([{ matchMethod: '*', matchFinality: [], timeout: { duration: 1 } }]);
    for (const f of ['finalized', 'unfinalized', 'realtime', 'unknown'] as const) expect(matchEntry(entries, 'eth_call', f)?.timeout?.duration, f).to.equal(1);
  });

  it('method and finality must both match', () => {
    const entries = compiled([
      { matchMethod: 'eth_getLogs', matchFinality: ['finalized'], timeout: { duration: 1 } },
      { matchMethod: 'eth_*', timeout: { duration: 2 } },
    ]);
    expect(matchEntry(entries, 'eth_getLogs', 'finalized')?.timeout?.duration).to.equal(1);
    expect(matchEntry(entries, 'eth_getLogs', 'realtime')?.timeout?.duration).to.equal(2);
    expect(matchEntry(entries, 'eth_call', 'finalized')?.timeout?.duration).to.equal(2);
  });
});

describe('health tracker: healthOutcome classification', () => {
  it('successes and reverts are successes', () => {
    expect(healthOutcome(attempt('success'))).to.equal('success');
    expect(healthOutcome(attempt('exec_revert', new ErrEndpointExecutionException('execution reverted', { code: 3 })))).to.equal('success');
  });

  it('rate limits are throttles', () => {
    expect(healthOutcome(attempt('rate_limited', new ErrEndpointCapacityExceeded('429')))).to.equal('throttle');
  });

  it('transport faults, 5xx, timeouts, malformed answers and billing are errors', () => {
    expect(healthOutcome(attempt('error', new ErrEndpointServerSideException('502')))).to.equal('error');
    expect(healthOutcome(attempt('timeout', new ErrEndpointRequestTimeout('slow')))).to.equal('error');
    expect(healthOutcome(attempt('timeout', new ErrFailsafeTimeoutExceeded('slow')))).to.equal('error');
    expect(healthOutcome(attempt('error', new ErrUpstreamMalformedResponse('garbage')))).to.equal('error');
    expect(healthOutcome(attempt('error', new ErrEndpointBillingIssue('402')))).to.equal('error');
  });

  it('client errors and other deterministic answers are neutral', () => {
    expect(healthOutcome(attempt('error', new ErrEndpointClientSideException('invalid params')))).to.equal('neutral');
    expect(healthOutcome(attempt('error', new ErrEndpointUnsupported('method not found')))).to.equal('neutral');
  });

  it('cancellations (lost hedge legs, client gone), pending and undialled attempts count as nothing', () => {
    expect(healthOutcome(attempt('cancelled', new ErrCancelled('hedge leg lost the race')))).to.equal('ignore');
    expect(healthOutcome(attempt('error', new ErrCancelled('gone')))).to.equal('ignore');
    expect(healthOutcome(attempt('pending'))).to.equal('ignore');
    expect(healthOutcome(attempt('skipped'))).to.equal('ignore');
    expect(healthOutcome(attempt('error'))).to.equal('ignore');
    // A breaker-open skip never reached the wire.
    expect(healthOutcome(attempt('error', new ErrFailsafeCircuitBreakerOpen('open'), false))).to.equal('ignore');
    expect(healthOutcome(attempt('success', undefined, false))).to.equal('ignore');
  });
});
