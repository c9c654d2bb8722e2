/**
 * The innermost network handler: walks a leg's upstreams in `select` order until one answers (spec §1.3). A retryable failure moves
 * on (reason `sweep`); a non-retryable one (revert, client error, confirmed error) ends the call; all failed: `ErrUpstreamsExhausted`.
 */
import { FINALITY, type AttemptOutcome, type AttemptReason, type AttemptRecord, type CallContext } from './context.ts';
import {
  asSvcError,
  ErrCancelled,
  ErrEndpointCapacityExceeded,
  ErrUpstreamRateLimitRuleExceeded,
  ErrEndpointExecutionException,
  ErrEndpointNonceException,
  ErrEndpointRequestTimeout,
  ErrFailsafeTimeoutExceeded,
  ErrUpstreamsExhausted,
  type SvcError,
} from '../wire/errors.ts';
import type { AttemptHandler, Leg, ProxyHooks, UpstreamCall } from './hooks.ts';
import { settleFailedAttempt } from './charge.ts';
import { sendUpstream } from './chains.ts';
import type { RpcResult } from '../wire/jsonrpc.ts';
import { isDeadline, type Upstream } from '../registry/upstream.ts';

/** Opens an attempt record for one upstream request and appends it to the call's trace. */
export function startAttempt(ctx: CallContext, u: Upstream, reason: AttemptReason): AttemptRecord {
  const a: AttemptRecord = {
    upstreamId: u.id,
    vendor: u.vendor,
    method: ctx.request.method,
    projectId: ctx.project.id,
    networkId: ctx.network.id,
    reason,
    outcome: 'pending',
    startedAt: performance.now(),
    durationMs: 0,
    won: false,
    dialled: false,
    finality: FINALITY.get(ctx),
    internal: ctx.internal,
  };
  ctx.record.attempts.push(a);
  return a;
}

/** Trace outcome for an error (spec §4.5). */
export function outcomeOf(err: SvcError): AttemptOutcome {
  if (err instanceof ErrCancelled) return 'cancelled';
  if (err instanceof ErrEndpointRequestTimeout || err instanceof ErrFailsafeTimeoutExceeded) return 'timeout';
  if (err instanceof ErrEndpointExecutionException || err instanceof ErrEndpointNonceException) return 'exec_revert';
  if (err instanceof ErrEndpointCapacityExceeded || err instanceof ErrUpstreamRateLimitRuleExceeded) return 'rate_limited';
  return 'error';
}

/** An outcome word of the `X-SVC-Upstreams` trace (spec §4.5), plus svc's `error`. */
export type TraceOutcome = 'success' | 'timeout' | 'exec_revert' | 'rate_limited' | 'error';

/**
 * The word the `X-SVC-Upstreams` trace shows for an attempt (spec §4.5). `pending`, `cancelled` and `skipped` did not answer in
 * time: `timeout`. `error` (server error, malformed answer, refused connection) has no spec word that would not blame the wrong cause.
 */
export function traceOutcome(a: Pick<AttemptRecord, 'outcome'>): TraceOutcome {
  switch (a.outcome) {
    case 'success':
    case 'timeout':
    case 'exec_revert':
    case 'rate_limited':
    case 'error':
      return a.outcome;
    default:
      return 'timeout';
  }
}

/**
 * The error a failed call ends with (spec §4.7 #2, §7): past its own deadline it is `ErrEndpointRequestTimeout` whatever path failed
 * it (hedge, consensus, multiplexing, a queued batch), caused by that path's error. Other errors and failsafe timeouts are kept.
 * @param signal the call's own signal (aborted with a deadline reason at `server.maxTimeout`)
 */
export function callFailure(signal: AbortSignal, e: unknown): unknown {
  if (!signal.aborted || !isDeadline(signal.reason) || e instanceof ErrEndpointRequestTimeout || e instanceof ErrFailsafeTimeoutExceeded) return e;
  const err = asSvcError(e);
  return new ErrEndpointRequestTimeout(`call exceeded its deadline (server.maxTimeout) before an upstream answered: ${err.message}`, { cause: err });
}

/** Closes an attempt record. */
export function finishAttempt(a: AttemptRecord, outcome: AttemptOutcome, err?: SvcError): void {
  a.durationMs = performance.now() - a.startedAt;
  a.outcome = outcome;
  if (err) a.error = err;
}

/**
 * Sends one call to one upstream through its chain, runs `validate` and records the attempt.
 * @param maxResponseSize a cap on this answer below the upstream's own, bytes (state polls)
 * @throws SvcError normalised (svc's own exceptions become `ErrInternal`); a confirmed copy when a second upstream gave the same error
 */
export async function tryUpstream(
  hooks: ProxyHooks,
  ctx: CallContext,
  u: Upstream,
  reason: AttemptReason,
  signal: AbortSignal,
  maxResponseSize?: number,
): Promise<RpcResult> {
  // Upstream-scope retries replace `call.attempt` per try, so this closes the last try's record.
  const call: UpstreamCall = { ctx, method: ctx.request.method, params: ctx.request.params, signal, attempt: startAttempt(ctx, u, reason) };
  if (maxResponseSize !== undefined) call.maxResponseSize = maxResponseSize;
  let r: RpcResult;
  try {
    r = await sendUpstream(u, call);
    const invalid = hooks.validate.call(ctx, r, u);
    if (invalid) throw invalid;
  } catch (e) {
    const err = asSvcError(e);
    finishAttempt(
      call.attempt,
      signal.aborted && !(err instanceof ErrEndpointRequestTimeout) && !(err instanceof ErrFailsafeTimeoutExceeded) ? 'cancelled' : outcomeOf(err),
      err,
    );
    // `attemptDone` now, or at the verdict (charge.ts); a second upstream's identical error comes back confirmed.
    throw settleFailedAttempt(hooks, ctx, call.attempt, err);
  }
  finishAttempt(call.attempt, 'success');
  // A hedge race may later flip a losing leg back to false.
  call.attempt.won = true;
  hooks.attemptDone.call(call.attempt);
  return r;
}

/** Builds the core sweep over a leg's upstreams (`hooks` for `validate` and `attemptDone`). */
export function createSweep(hooks: ProxyHooks): AttemptHandler {
  return async function sweep(ctx: CallContext, leg: Leg): Promise<RpcResult> {
    const causes: SvcError[] = [];
    let reason: AttemptReason = leg.reason;
    for (let u = leg.cursor.next(); u; u = leg.cursor.next()) {
      if (leg.signal.aborted) break;
      try {
        const r = await tryUpstream(hooks, ctx, u, reason, leg.signal);
        ctx.record.upstream = u.id;
        r.upstreamId ??= u.id;
        return r;
      } catch (err) {
        const e = err as SvcError;
        if (!e.retryable) throw e;
        causes.push(e);
      }
      // Precedence (spec §4.5): hedge > sweep > retry > primary.
      if (reason !== 'hedge' && reason !== 'consensus_slot') reason = 'sweep';
    }
    if (causes.length === 0 && leg.signal.aborted) {
      const r: unknown = leg.signal.reason;
      if (r instanceof Error) throw asSvcError(r);
      throw isDeadline(r)
        ? new ErrEndpointRequestTimeout('call deadline passed before any upstream answered')
        : new ErrCancelled('call cancelled before any upstream answered');
    }
    throw new ErrUpstreamsExhausted(causes);
  };
}
