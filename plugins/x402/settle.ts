/**
 * Settlement after the answer (spec §5 item 1): a payment is settled when its calls were served — at least one answered from an upstream
 * or the cache (an execution revert included: the node ran the call) — and none failed on svc's side or an upstream's; then the payer
 * pays the whole price, calls refused for their own input (an invalid element, a budget, a range) included, so appending a bad call to a
 * batch never makes it free. A request with an svc-side or upstream failure, or with nothing served, is not settled: its authorization is
 * left to expire. The answer waits for the settlement at most `settleTimeout`: a settlement refused within it withholds the answer (402,
 * as x402's own servers do); past it the answer goes without a receipt and settlement goes on. A settlement that fails to reach the
 * facilitator or chain is retried with backoff while the authorization is valid; every outcome is counted, a failure logged.
 */
import type { ExecutionRecord, HeaderSink } from 'svc-proxy/plugin';
import {
  ErrEndpointClientSideException,
  ErrEndpointExecutionException,
  ErrEndpointNonceException,
  ErrEndpointRequestTooLarge,
  ErrEndpointUnsupported,
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedRange,
  ErrGetLogsExceededMaxAllowedTopics,
  ErrInvalidRequest,
  ErrJsonRpcRequestUnmarshal,
  ErrNetworkNotSupported,
  ErrNotImplemented,
  ErrRateLimitRuleExceeded,
  ErrRequestTooLarge,
  ErrUpstreamMethodIgnored,
  type SvcError,
} from 'svc-proxy/plugin/errors';
import { backoffDelay, sleep } from 'svc-proxy/util';
import type { Facilitator, Settlement } from './facilitator.ts';
import { ErrPaymentRequired, type Accepted } from './payment.ts';

/** Refusals caused by the call itself (what it asks, or its caller's budget): they do not make a served request free. */
const CALLERS_OWN: ReadonlyArray<abstract new (...a: never[]) => SvcError> = [
  ErrJsonRpcRequestUnmarshal,
  ErrInvalidRequest,
  ErrRequestTooLarge,
  ErrNetworkNotSupported,
  ErrRateLimitRuleExceeded,
  ErrNotImplemented,
  ErrGetLogsExceededMaxAllowedRange,
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedTopics,
  ErrEndpointClientSideException,
  ErrEndpointNonceException,
  ErrEndpointRequestTooLarge,
  ErrEndpointUnsupported,
  ErrUpstreamMethodIgnored,
];

/** Between settlement retries: 0.5 s, doubling, at most 8 s, ±100 ms. */
const SETTLE_BACKOFF = { initialMs: 500, factor: 2, maxMs: 8_000, jitterMs: 100 } as const;

/** How a paid request ended, the `outcome` label of `svc_x402_payments_total`. */
export type SettleOutcome = 'settled' | 'settle_failed' | 'unsettled';

/** What settling needs. */
export interface SettleDeps {
  facilitator: Facilitator;
  /** Longest the answer waits, ms. */
  timeoutMs: number;
  /** Retries of a settlement that threw (transport, timeout), not of one the chain or facilitator refused. */
  retries: number;
  /** Counts and logs the final outcome (called once per paid request). */
  done(outcome: SettleOutcome, accepted: Accepted, settlement?: Settlement, error?: string): void;
  /** Counts one retry. */
  retried(): void;
  /** Encodes the receipt header. */
  encode(settlement: Settlement): string;
  /** Tracks a settlement still running when the answer went (drained at shutdown). */
  track(settling: Promise<unknown>): void;
}

/**
 * Whether a request's calls are to be paid for: at least one served (a result or an execution revert) and none failed on svc's or an
 * upstream's side (see the module comment).
 */
export function settleable(records: readonly ExecutionRecord[]): boolean {
  let served = false;
  for (const r of records) {
    const e = r.error;
    if (!e || e instanceof ErrEndpointExecutionException) served = true;
    else if (!CALLERS_OWN.some((c) => e instanceof c)) return false;
  }
  return served;
}

/** Settles with retries; resolves with the last outcome, never rejects. */
async function settleWithRetries(deps: SettleDeps, a: Accepted): Promise<{ settlement?: Settlement; error?: string }> {
  let error = '';
  for (let attempt = 0; attempt <= deps.retries; attempt++) {
    if (attempt > 0) {
      if (Date.now() / 1000 >= a.validBefore) break;
      deps.retried();
      await sleep(backoffDelay(SETTLE_BACKOFF, attempt));
    }
    try {
      return { settlement: await deps.facilitator.settle(a.payment, a.requirements) };
    } catch (e) {
      error = (e instanceof Error ? e.message : String(e)).slice(0, 300);
      // A facilitator's refusal (HTTP 4xx with a body) is an answer, not a transport failure: retrying would not change it.
      if (e instanceof Error && e.name === 'SettleError') break;
    }
  }
  return { error };
}

/**
 * The answered task of a paid request: settles when its calls were served, sets the receipt header when the settlement finished in time.
 * Headers: `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1) with the settlement (its `transaction` is the hash), and
 * `X-SVC-Payment-Outcome`: `settled`, `pending` (still settling when the answer went), `failed`, or `not-settled`.
 * @returns a 402 that withholds the answer when the settlement was refused in time
 */
export async function settleAnswered(
  deps: SettleDeps,
  a: Accepted,
  records: readonly ExecutionRecord[],
  sink: HeaderSink,
): Promise<ErrPaymentRequired | undefined> {
  if (!settleable(records)) {
    sink.set('X-SVC-Payment-Outcome', 'not-settled');
    deps.done('unsettled', a);
    return undefined;
  }
  const settling = settleWithRetries(deps, a).then((r) => {
    const ok = r.settlement?.success === true;
    deps.done(ok ? 'settled' : 'settle_failed', a, r.settlement, r.error ?? r.settlement?.errorReason);
    return r;
  });
  const waited = new AbortController();
  const r = await Promise.race([settling, sleep(deps.timeoutMs, waited.signal, true).then(() => undefined)]);
  waited.abort();
  if (!r) {
    deps.track(settling);
    sink.set('X-SVC-Payment-Outcome', 'pending');
    return undefined;
  }
  if (r.settlement?.success) {
    sink.set(a.responseHeader, deps.encode(r.settlement));
    sink.set('X-SVC-Payment-Outcome', 'settled');
    return undefined;
  }
  // Refused (or never through) in time: the answer is withheld, as an x402 server withholds a resource it could not charge for.
  const reason = r.settlement?.errorReason ?? r.error ?? 'unknown';
  const headers: Record<string, string> = { 'X-SVC-Payment-Outcome': 'failed', 'Cache-Control': 'no-store' };
  if (r.settlement) headers[a.responseHeader] = deps.encode(r.settlement);
  return new ErrPaymentRequired(`payment settlement failed: ${reason}`, {
    answer: { body: JSON.stringify({ x402Version: a.payment.x402Version, error: `payment settlement failed: ${reason}` }), headers },
  });
}
