/**
 * The failsafe plugin's circuit breaker: the per-upstream state machine and
 * which errors count as failures. The breaker ignores rate limits, timeouts and cancelled hedge
 * legs: they say nothing about whether the upstream works; and it never counts a fact about the
 * request (core/pipeline/blame.ts), nor more than `maxClientShare` of the failures from one client
 * (client-share.ts). No hooks here; `upstream.ts` taps one breaker per failsafe entry with a
 * `circuitBreaker` into the `upstream` hook.
 */
import {
  ErrCancelled,
  ErrEndpointBillingIssue,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrUpstreamMalformedResponse,
  type SvcError,
} from 'svc-proxy/plugin/errors';
import { isRequestFact } from 'svc-proxy/plugin/contracts';
import { type BreakerState, CountBreaker } from 'svc-proxy/util';
import { ClientShare } from './client-share.ts';
import type { FailsafeEntry } from './schema.ts';

/**
 * An upstream's circuit breaker: svc's one breaker state machine ({@link CountBreaker}) over a
 * ring of the last `failureThresholdCapacity` outcomes, closing early on
 * `successThresholdCount` half-open successes, plus the one-client bound.
 * States: closed → open (failures in ring ≥ threshold) → half-open after `halfOpenAfter` →
 * closed after `successThresholdCount` successes within `successThresholdCapacity` trials; any
 * failure while half-open reopens it.
 */
export class CircuitBreaker {
  private readonly machine: CountBreaker;
  /** The one-client bound; undefined when `maxClientShare` is 1 (off). */
  readonly clients?: ClientShare;

  /**
   * @param cfg thresholds (ms for `halfOpenAfter` and `clientShareWindow`)
   * @param now clock in ms
   */
  constructor(
    readonly cfg: NonNullable<FailsafeEntry['circuitBreaker']>,
    now: () => number = Date.now,
  ) {
    this.machine = new CountBreaker(
      {
        failureThresholdCount: cfg.failureThresholdCount,
        failureThresholdCapacity: cfg.failureThresholdCapacity,
        halfOpenAfter: cfg.halfOpenAfter,
        successThresholdCount: cfg.successThresholdCount,
        successThresholdCapacity: cfg.successThresholdCapacity,
      },
      now,
    );
    const share = cfg.maxClientShare ?? DEFAULT_MAX_CLIENT_SHARE;
    if (share < 1) this.clients = new ClientShare(share, cfg.clientShareWindow ?? DEFAULT_CLIENT_SHARE_WINDOW_MS, now);
  }

  /** Current state. */
  get state(): BreakerState {
    return this.machine.state;
  }

  /** Whether a call may be dialled now (moves open → half-open once `halfOpenAfter` passed). */
  allow(): boolean {
    return this.machine.permit();
  }

  /**
   * Records a counted outcome (`true` = failure).
   * @param client the calling client's key (user id, else client address); undefined for svc's
   *   own calls, which the one-client bound never applies to
   */
  record(failure: boolean, client?: string): void {
    if (this.clients && client !== undefined) {
      if (!failure) this.clients.success(client);
      // Over its share of the failures while others are served: not counted (client-share.ts).
      else if (!this.clients.failure(client)) return;
    }
    this.machine.record(failure);
  }
}

/** Default `circuitBreaker.maxClientShare`: one client may cause at most half of the counted failures. */
export const DEFAULT_MAX_CLIENT_SHARE = 0.5;
/** Default `circuitBreaker.clientShareWindow`, ms. */
export const DEFAULT_CLIENT_SHARE_WINDOW_MS = 60_000;

/**
 * How an error counts for the breaker: `true` failure (5xx, transport, malformed, unauthorised,
 * billing), `false` success, `undefined` not counted (rate limits, timeouts, client errors,
 * cancellations, lost hedge legs, and any fact about the request: an unknown tracer, an error a
 * second upstream confirmed).
 */
export function breakerOutcome(err: SvcError | undefined): boolean | undefined {
  if (!err) return false;
  if (err.confirmed === true) return undefined;
  if (err instanceof ErrEndpointServerSideException && isRequestFact(err)) return undefined;
  if (
    err instanceof ErrEndpointServerSideException ||
    err instanceof ErrUpstreamMalformedResponse ||
    err instanceof ErrEndpointUnauthorized ||
    err instanceof ErrEndpointBillingIssue
  )
    return true;
  if (err.retryable) return undefined; // rate limits, timeouts, missing data, unsupported...
  if (err instanceof ErrCancelled) return undefined;
  // Reverts and other deterministic answers prove the upstream works.
  return err.code === 3 || err.name === 'ErrEndpointExecutionException' || err.name === 'ErrEndpointNonceException' ? false : undefined;
}
