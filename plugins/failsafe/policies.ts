/**
 * Retry and timeout helpers of the failsafe plugin, shared by the network
 * scope (`network.ts`, `attempt` hook) and the upstream scope (`upstream.ts`, `upstream` hook):
 * the backoff delay of a retry, which errors a retry policy may retry, and a deadline wrapper
 * whose inner work sees an aborted signal. No hooks here.
 */
import type { CallContext, RpcResult, UpstreamCall, UpstreamSender } from 'svc-proxy/plugin';
import { ErrCancelled, ErrEndpointMissingData, ErrEndpointRequestTimeout, ErrUpstreamsExhausted, SvcError } from 'svc-proxy/plugin/errors';
import { backoffDelay, linkedController } from 'svc-proxy/util';
import type { FailsafeMetrics, TimeoutScope } from './metrics.ts';
import type { FailsafeEntry } from './schema.ts';

/** Delay before retry number `n` (1-based): delay × factor^(n-1), capped, plus jitter (ms). */
export function retryDelay(r: NonNullable<FailsafeEntry['retry']>, n: number, random: () => number = Math.random): number {
  return backoffDelay({ initialMs: r.delay, factor: r.backoffFactor, maxMs: r.backoffMaxDelay, jitterMs: r.jitter }, n, random);
}

/** Whether an error may be retried by a retry policy: never a revert or a client error. */
export function isRetryable(err: unknown): boolean {
  return err instanceof SvcError && err.retryable && !(err instanceof ErrCancelled);
}

/**
 * Whether a failed network round failed only because the data is not on the upstreams yet
 * (eRPC's `empty_result` / `missing_data` retry reasons): a missing-data answer (an empty answer
 * rejected under `retry-empty` is one), or an exhausted sweep whose every cause is one. A pending
 * transaction (`retry-pending`) is not: it backs off like any other retry, as in eRPC.
 */
export function isDataUnavailable(err: unknown): boolean {
  if (err instanceof ErrEndpointMissingData) return err.details?.reason !== 'pending_tx';
  if (!(err instanceof ErrUpstreamsExhausted)) return false;
  let missing = 0;
  for (const c of err.causes) {
    // A hedge leg that lost or was cut says nothing about the data.
    if (c instanceof ErrCancelled) continue;
    if (!isDataUnavailable(c)) return false;
    missing++;
  }
  return missing > 0;
}

/**
 * The wait before the next network round after a "data not there yet" failure (eRPC's
 * `computeDelay`): one block time once the chain's block time is estimated, else
 * `retry.emptyResultDelay` when set; undefined means the ordinary backoff applies.
 * @param err the round's error
 * @param r the retry policy
 * @param blockTimeMs the network's estimated block time, ms (undefined while unknown)
 */
export function dataUnavailableDelay(err: unknown, r: NonNullable<FailsafeEntry['retry']>, blockTimeMs: number | undefined): number | undefined {
  if (!isDataUnavailable(err)) return undefined;
  if (blockTimeMs !== undefined && blockTimeMs > 0) return blockTimeMs;
  if (r.emptyResultDelay !== undefined && r.emptyResultDelay > 0) return r.emptyResultDelay;
  return undefined;
}

/** Builds the error a timeout policy fails with (network scope: failsafe; upstream scope: the request's). */
export type TimeoutError = new (message: string, opts?: { cause?: unknown }) => SvcError;

/**
 * Wraps a promise-producing function with a deadline; the inner work sees an aborted signal.
 * @param ms the deadline, ms
 * @param parent the caller's signal (its abort is passed through, not turned into a timeout)
 * @param what the work, for the error message (e.g. `eth_call on evm:1`)
 * @param error the class of the error thrown at the deadline
 * @param run the work, given the signal that aborts at the deadline
 * @param onFire called once when the deadline fired (the timeout metric), with `ctx` and `scope`
 */
export async function withTimeout<T>(
  ms: number,
  parent: AbortSignal,
  what: string,
  error: TimeoutError,
  run: (signal: AbortSignal) => Promise<T>,
  onFire?: (ctx: CallContext, scope: TimeoutScope) => void,
  ctx?: CallContext,
  scope?: TimeoutScope,
): Promise<T> {
  const link = linkedController(parent);
  // The error (a stack capture, several µs) is only built when the deadline fires.
  const timer = setTimeout(abortOnTimeout, ms, link.controller, ms, what, error);
  try {
    return await run(link.signal);
  } catch (e) {
    // The link aborts only through this timer or its parent: aborted while the parent is not
    // means the deadline fired, and the reason is the timer's error.
    if (link.signal.aborted && !parent.aborted) {
      if (onFire && ctx && scope) onFire(ctx, scope);
      const reason = link.signal.reason as SvcError;
      throw new (reason.constructor as TimeoutError)(reason.message, { cause: e });
    }
    throw e;
  } finally {
    clearTimeout(timer);
    link.dispose();
  }
}

/**
 * One upstream attempt within a deadline (the upstream scope's timeout): the attempt's own call object gets, for the time of `inner`, a
 * signal that also aborts at the deadline, and gets its caller's signal back after. No copy of the call, no closure and no message
 * string per attempt: the attempt is the hot path, and the timeout almost never fires.
 * @param inner the wrapped sender
 * @param call the attempt (its `signal` is swapped for the time of `inner`, then restored)
 * @param ms the deadline, ms
 * @param upstreamId the upstream, for the error message
 * @param metrics counts a deadline that fired (`timeoutFired`)
 * @throws ErrEndpointRequestTimeout when the deadline fired first; otherwise what `inner` threw
 */
export async function attemptWithin(inner: UpstreamSender, call: UpstreamCall, ms: number, upstreamId: string, metrics: FailsafeMetrics): Promise<RpcResult> {
  const parent = call.signal;
  const link = linkedController(parent);
  const timer = setTimeout(abortAttempt, ms, link.controller, ms, call.method, upstreamId);
  call.signal = link.signal;
  try {
    return await inner(call);
  } catch (e) {
    if (link.signal.aborted && !parent.aborted) {
      metrics.timeoutFired(call.ctx, 'upstream');
      const reason = link.signal.reason as SvcError;
      throw new ErrEndpointRequestTimeout(reason.message, { cause: e });
    }
    throw e;
  } finally {
    call.signal = parent;
    clearTimeout(timer);
    link.dispose();
  }
}

/** Timer callback of {@link attemptWithin}: one upstream request ran out of its time, the request's own timeout error. */
function abortAttempt(controller: AbortController, ms: number, method: string, upstreamId: string): void {
  controller.abort(new ErrEndpointRequestTimeout(`${method} on upstream ${upstreamId} exceeded the failsafe timeout of ${ms} ms`));
}

/** Timer callback of {@link withTimeout} (module-level, so no closure is allocated per call). */
function abortOnTimeout(controller: AbortController, ms: number, what: string, error: TimeoutError): void {
  controller.abort(new error(`${what} exceeded the failsafe timeout of ${ms} ms`));
}
