/**
 * Retry and timeout helpers of the failsafe plugin (issue #3 item 3), shared by the network
 * scope (`network.ts`, `attempt` hook) and the upstream scope (`upstream.ts`, `upstream` hook):
 * the backoff delay of a retry, which errors a retry policy may retry, and a deadline wrapper
 * whose inner work sees an aborted signal. No hooks here.
 */
import { ErrCancelled, linkedController, SvcError } from 'svc/plugin';
import type { FailsafeEntry } from './schema.ts';

/** Delay before retry number `n` (1-based): delay × factor^(n-1), capped, plus jitter (ms). */
export function retryDelay(r: NonNullable<FailsafeEntry['retry']>, n: number, random: () => number = Math.random): number {
  const base = Math.min(r.backoffMaxDelay, r.delay * r.backoffFactor ** Math.max(0, n - 1));
  return base + (r.jitter > 0 ? random() * r.jitter : 0);
}

/** Whether an error may be retried by a retry policy: never a revert or a client error. */
export function isRetryable(err: unknown): boolean {
  return err instanceof SvcError && err.retryable && !(err instanceof ErrCancelled);
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
 */
export async function withTimeout<T>(ms: number, parent: AbortSignal, what: string, error: TimeoutError, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const link = linkedController(parent);
  // The error (a stack capture, several µs) is only built when the deadline fires.
  const timer = setTimeout(abortOnTimeout, ms, link.controller, ms, what, error);
  try {
    return await run(link.signal);
  } catch (e) {
    // The link aborts only through this timer or its parent: aborted while the parent is not
    // means the deadline fired, and the reason is the timer's error.
    if (link.signal.aborted && !parent.aborted) {
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
