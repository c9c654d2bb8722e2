/**
 * Retry and timeout helpers of the failsafe plugin, shared by the network
 * scope (`network.ts`, `attempt` hook) and the upstream scope (`upstream.ts`, `upstream` hook):
 * the backoff delay of a retry, which errors a retry policy may retry, and a deadline wrapper
 * whose inner work sees an aborted signal. No hooks here.
 */
import type { CallContext } from 'svc/plugin';
import { ErrCancelled, ErrEndpointMissingData, ErrUpstreamsExhausted, SvcError } from 'svc/plugin/errors';
import { backoffDelay, linkedController } from 'svc/util';
import type { TimeoutScope } from './metrics.ts';
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

/** Timer callback of {@link withTimeout} (module-level, so no closure is allocated per call). */
function abortOnTimeout(controller: AbortController, ms: number, what: string, error: TimeoutError): void {
  controller.abort(new error(`${what} exceeded the failsafe timeout of ${ms} ms`));
}
