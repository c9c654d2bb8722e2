/**
 * Settlement after the answer (spec §5 item 1): a payment is settled only when every call it paid for was answered — from an upstream or
 * the cache, an execution revert included (the node ran the call: billable, as `X-SVC-Billable` counts it) — and never when one failed on
 * svc's side or an upstream's; then its authorization is left to expire unsettled. The answer waits for the settlement at most
 * `settleTimeout`; past it the answer goes without a receipt and settlement goes on. A settlement that fails to reach the chain is
 * retried with backoff while the authorization is valid; every outcome is counted and a failure logged.
 */
import type { ExecutionRecord, HeaderSink } from 'svc-proxy/plugin';
import { backoffDelay, sleep } from 'svc-proxy/util';
import type { Facilitator, Settlement } from './facilitator.ts';
import type { Accepted } from './payment.ts';

/** The node executed the call: the client is billed for it (as the cost plugin's `X-SVC-Billable`). */
const BILLABLE_ERRORS: ReadonlySet<string> = new Set(['ErrEndpointExecutionException']);

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
}

/** True when every call answered without a failure the client is not billed for. */
export function allAnswered(records: readonly ExecutionRecord[]): boolean {
  for (const r of records) if (r.error && !BILLABLE_ERRORS.has(r.error.name)) return false;
  return records.length > 0;
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
    }
  }
  return { error };
}

/**
 * The answered task of a paid request: settles when every call answered, sets the receipt header when the settlement finished in time.
 * Headers: `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1) with the settlement (its `transaction` is the hash), and
 * `X-SVC-Payment-Outcome`: `settled`, `pending` (still settling when the answer went), `failed`, or `not-settled` (a call failed).
 */
export async function settleAnswered(deps: SettleDeps, a: Accepted, records: readonly ExecutionRecord[], sink: HeaderSink): Promise<void> {
  if (!allAnswered(records)) {
    sink.set('X-SVC-Payment-Outcome', 'not-settled');
    deps.done('unsettled', a);
    return;
  }
  const settling = settleWithRetries(deps, a).then((r) => {
    const ok = r.settlement?.success === true;
    deps.done(ok ? 'settled' : 'settle_failed', a, r.settlement, r.error ?? r.settlement?.errorReason);
    return r;
  });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, deps.timeoutMs, undefined);
  });
  const r = await Promise.race([settling, late]);
  clearTimeout(timer);
  if (!r) {
    sink.set('X-SVC-Payment-Outcome', 'pending');
    return;
  }
  if (r.settlement) sink.set(a.responseHeader, deps.encode(r.settlement));
  sink.set('X-SVC-Payment-Outcome', r.settlement?.success ? 'settled' : 'failed');
}
