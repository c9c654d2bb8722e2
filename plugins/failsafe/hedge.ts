/**
 * The failsafe plugin's hedge: how the legs race (the delay
 * before each extra leg is computed by adaptive.ts), on svc's one hedge primitive (`hedge` of
 * svc-proxy/util). Legs share one pass over the selected upstreams (one cursor), a
 * non-empty pending answer beats an empty one, and a deterministic error settles the call.
 * Never used for writes (`WRITE_METHODS`). No hooks here; `network.ts` taps it into the
 * `attempt` hook at `AttemptStage.HEDGE`.
 */
import type { AttemptHandler, CallContext, Leg, RpcResult } from 'svc-proxy/plugin';
import { asSvcError, ErrCancelled, ErrUpstreamsExhausted, type SvcError } from 'svc-proxy/plugin/errors';
import { hedge } from 'svc-proxy/util';

/**
 * Runs a primary leg and up to `maxCount` hedge legs on the same cursor. The first usable
 * answer wins and the other legs are aborted (their sockets closed); an empty answer only wins
 * when no other leg is still pending; a deterministic error (a revert) settles the call.
 * @param delayMs wait before each extra leg (static `delay`, or adaptive: adaptive.ts); a leg that fails over every upstream sooner starts the next at once
 * @param maxCount extra legs at most
 * @param onHedge called as each extra leg starts (counters)
 * @returns the winning answer; rejects with the deterministic error that settled the race, the
 *   single cause, or ErrUpstreamsExhausted over every leg's causes
 */
export function runHedged(ctx: CallContext, leg: Leg, inner: AttemptHandler, delayMs: number, maxCount: number, onHedge: () => void): Promise<RpcResult> {
  return hedge<RpcResult>((signal, n) => inner(ctx, { cursor: leg.cursor, reason: n > 0 ? 'hedge' : leg.reason, signal }), {
    maxCount,
    delayMs: () => delayMs,
    signal: leg.signal,
    // Legs share the cursor: a leg can only start while an upstream is left to it.
    canStart: () => leg.cursor.remaining > 0,
    // A leg that failed over its upstreams before the delay: no point waiting for the timer.
    startWhenIdle: true,
    asError: asSvcError,
    isFinal: (e) => !(e as SvcError).retryable && !(e instanceof ErrCancelled),
    isFallback: (r) => r.isEmpty(),
    onHedge,
    onWin: (winner) => {
      for (const a of ctx.record.attempts) if (a.won && a.upstreamId !== winner.upstreamId) a.won = false;
    },
    allFailed: (errors) => {
      const causes = errors as SvcError[];
      return causes.length === 1 ? causes[0] : new ErrUpstreamsExhausted(flatten(causes));
    },
    lostReason: () => new ErrCancelled('hedge leg lost the race'),
  });
}

/** The causes of a failed race, with nested ErrUpstreamsExhausted unwrapped into their own causes. */
export function flatten(causes: readonly SvcError[]): SvcError[] {
  return causes.flatMap((c) => (c instanceof ErrUpstreamsExhausted ? [...c.causes] : [c]));
}
