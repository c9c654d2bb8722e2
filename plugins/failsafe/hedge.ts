/**
 * The failsafe plugin's hedge: how the legs race (the delay
 * before each extra leg is computed by adaptive.ts). Legs share one pass over the selected upstreams (one cursor), a
 * non-empty pending answer beats an empty one, and a deterministic error settles the call.
 * Never used for writes (`WRITE_METHODS`). No hooks here; `network.ts` taps it into the
 * `attempt` hook at `AttemptStage.HEDGE`.
 */
import { type AttemptHandler, type CallContext, type Leg, type RpcResult } from 'svc/plugin';
import { asSvcError, ErrCancelled, ErrUpstreamsExhausted, type SvcError } from 'svc/plugin/errors';
import { linkedController } from 'svc/util';

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
  return new Promise<RpcResult>((resolve, reject) => {
    const links: Array<ReturnType<typeof linkedController> & { done?: boolean }> = [];
    let pending = 0;
    let settled = false;
    let emptyFallback: RpcResult | undefined;
    const causes: SvcError[] = [];
    let timer: NodeJS.Timeout | undefined;
    let hedgesStarted = 0;

    const finish = (fn: () => void, winner?: RpcResult) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      // Only legs still in flight lost: the error (a stack capture) is built only when one is.
      let lost: ErrCancelled | undefined;
      for (const l of links) {
        if (!l.done && !l.signal.aborted) l.controller.abort((lost ??= new ErrCancelled('hedge leg lost the race')));
        l.dispose();
      }
      if (winner) for (const a of ctx.record.attempts) if (a.won && a.upstreamId !== winner.upstreamId) a.won = false;
      fn();
    };

    const settleIfDone = () => {
      if (pending > 0 || settled) return;
      if (leg.cursor.remaining > 0 && hedgesStarted < maxCount && !leg.signal.aborted) {
        // A leg failed over its upstreams before the delay: no point waiting for the timer.
        startLeg(true);
        return;
      }
      if (emptyFallback) finish(() => resolve(emptyFallback as RpcResult), emptyFallback);
      else finish(() => reject(causes.length === 1 ? causes[0] : new ErrUpstreamsExhausted(flatten(causes))));
    };

    const startLeg = (hedge: boolean) => {
      if (settled || leg.cursor.remaining === 0) return;
      if (hedge) {
        hedgesStarted++;
        onHedge();
      }
      const link: ReturnType<typeof linkedController> & { done?: boolean } = linkedController(leg.signal);
      links.push(link);
      pending++;
      inner(ctx, { cursor: leg.cursor, reason: hedge ? 'hedge' : leg.reason, signal: link.signal }).then(
        (r) => {
          link.done = true;
          pending--;
          if (settled) return;
          if (r.isEmpty() && pending > 0) {
            emptyFallback ??= r;
            return;
          }
          finish(() => resolve(r), r);
        },
        (e: unknown) => {
          link.done = true;
          pending--;
          if (settled) return;
          const err = asSvcError(e);
          if (!err.retryable && !(err instanceof ErrCancelled)) {
            finish(() => reject(err));
            return;
          }
          causes.push(err);
          settleIfDone();
        },
      );
      if (hedgesStarted < maxCount) scheduleHedge();
    };

    const scheduleHedge = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        if (!settled && hedgesStarted < maxCount && leg.cursor.remaining > 0) startLeg(true);
      }, delayMs);
    };

    startLeg(false);
  });
}

/** The causes of a failed race, with nested ErrUpstreamsExhausted unwrapped into their own causes. */
export function flatten(causes: readonly SvcError[]): SvcError[] {
  return causes.flatMap((c) => (c instanceof ErrUpstreamsExhausted ? [...c.causes] : [c]));
}
