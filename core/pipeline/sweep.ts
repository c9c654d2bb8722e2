/**
 * The innermost network handler: walks a leg's upstreams in the order the `select` hook
 * returned until one answers (spec §1.3). Retryable failures move to the next
 * upstream (trace reason `sweep`); a non-retryable answer (a revert, a client error, or an
 * error a second upstream confirmed: core/pipeline/charge.ts) ends the call at once; when every upstream
 * failed the call fails with `ErrUpstreamsExhausted`.
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
 * The word the `X-SVC-Upstreams` trace shows for an attempt (spec §4.5: `success`, `timeout`,
 * `exec_revert`, `rate_limited`). svc's internal outcomes outside that vocabulary map to the
 * closest word: an attempt still `pending` when the answer is written, or `cancelled` (the call's
 * deadline passed, it lost a hedge race, or its call ended another way) did not answer in time,
 * so it shows `timeout`; `skipped` (never dialled) shows `timeout` too. `error` (the upstream
 * answered with a failure that is none of the above: a server error, a malformed answer, a
 * refused connection) has no spec word that would not blame the wrong cause, so it stays `error`.
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
 * The error a failed call ends with (spec §4.7 #2, §7): a call whose own deadline
 * (`server.maxTimeout`) passed before it was answered gets `ErrEndpointRequestTimeout`, whatever
 * path it took — hedge legs exhausted by the deadline, a consensus round short of participants,
 * a multiplexing follower, a queued outbound batch — with the path's own error as its cause.
 * `ErrCancelled` stays only for a client that went away; an error raised before the deadline,
 * and a failsafe timeout, are kept as they are.
 * @param signal the call's own signal (aborted with a deadline reason at `server.maxTimeout`)
 * @param e what the call chain threw
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
 * Sends one call to one upstream through its composed chain, runs the `validate` hook and
 * records the attempt. Throws the normalised error on failure; an exception from svc's own code
 * (a hook tap, serialising) becomes `ErrInternal`, which never counts against the upstream. An
 * unclassified node error's charge may wait for another upstream's answer (core/pipeline/charge.ts); when
 * a second upstream already gave the same error, the confirmed (non-retryable) copy is thrown.
 * @param maxResponseSize a cap on this answer below the upstream's own, bytes (state polls)
 */
export async function tryUpstream(
  hooks: ProxyHooks,
  ctx: CallContext,
  u: Upstream,
  reason: AttemptReason,
  signal: AbortSignal,
  maxResponseSize?: number,
): Promise<RpcResult> {
  // Upstream-scope retries replace `call.attempt` with a fresh record for each new try, so
  // this function always closes the record of the last try.
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
    // `attemptDone` now, or once another upstream's answer says whom the error is charged to;
    // a second upstream's identical error comes back confirmed (not retryable).
    throw settleFailedAttempt(hooks, ctx, call.attempt, err);
  }
  finishAttempt(call.attempt, 'success');
  // A hedge race may later flip a losing leg back to false.
  call.attempt.won = true;
  hooks.attemptDone.call(call.attempt);
  return r;
}

/**
 * Builds the core sweep over a leg's upstreams.
 * @param hooks the proxy's hooks (for `validate` and `attemptDone`)
 */
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
