/**
 * Deferred charging (README "Errors"): a node's generic-code error below HTTP 500 may be a failure or a verdict on the request,
 * known only once another upstream answered. The same error ({@link agreementSignature}) makes it a request fact: nobody is
 * charged, no third upstream is tried, the client gets a `confirmed` copy. A different answer charges it at once; otherwise
 * it is charged at `callDone`. Meanwhile its `attemptDone` is held back and breakers park with {@link whenCharged}.
 * One ledger per call, in a slot of its record, made on the first such error; internal calls are never deferred.
 */
import type { AttemptRecord, CallContext } from './context.ts';
import type { SvcError } from '../wire/errors.ts';
import type { ProxyHooks } from './hooks.ts';
import { Slot } from '../registry/slots.ts';
import { agreementSignature, isDefiniteAnswer, isRequestFact } from './blame.ts';

/** One attempt whose charge is (or was) tied to the other answers of its call. */
interface Entry {
  attempt: AttemptRecord;
  /** The request it was sent for: only answers to the same request object agree (a split getLogs part is another request). */
  request: object;
  /** Its {@link agreementSignature}; undefined while only the breaker registered it. */
  sig?: string;
  /** True until charged or waived. */
  open: boolean;
  /** Its `attemptDone` is held back until the verdict. */
  owed: boolean;
  /** Run when it is charged (breakers park their failure here). */
  onCharge?: Array<() => void>;
}

/** The per-call ledger of deferred charges. */
class Ledger {
  readonly entries: Entry[] = [];
  /** Set at `callDone`: later errors of the call are charged at once. */
  closed = false;
  constructor(readonly hooks: ProxyHooks) {}

  entryOf(a: AttemptRecord, request: object): Entry {
    for (const e of this.entries) if (e.attempt === a) return e;
    const e: Entry = { attempt: a, request, open: true, owed: false };
    this.entries.push(e);
    return e;
  }

  charge(e: Entry): void {
    if (!e.open) return;
    e.open = false;
    e.attempt.charge = 'charged';
    if (e.onCharge) for (const fn of e.onCharge) fn();
    e.onCharge = undefined;
    this.release(e);
  }

  waive(e: Entry): void {
    if (!e.open) return;
    e.open = false;
    e.attempt.charge = 'waived';
    e.onCharge = undefined;
    this.release(e);
  }

  private release(e: Entry): void {
    if (!e.owed) return;
    e.owed = false;
    this.hooks.attemptDone.call(e.attempt);
  }

  /** Charges every open entry (the call ended). */
  settle(): void {
    this.closed = true;
    for (const e of this.entries) this.charge(e);
  }
}

/** The call's ledger, in a slot of its execution record (`core.charges`). */
const CHARGES = new Slot<Ledger | undefined>('core.charges', undefined);

/** Proxies whose `callDone` settles ledgers (tapped on the first deferral). */
const settling = new WeakSet<ProxyHooks>();

/** Stage of the settling `callDone` tap: before observers, so they see the verdicts. */
const SETTLE_STAGE = -1000;

function settleCall(ctx: CallContext): void {
  CHARGES.get(ctx.record)?.settle();
}

function ledgerOf(hooks: ProxyHooks, ctx: CallContext): Ledger {
  let l = CHARGES.get(ctx.record);
  if (!l) {
    if (!settling.has(hooks)) {
      settling.add(hooks);
      hooks.callDone.tap({ name: 'core:charges', stage: SETTLE_STAGE }, settleCall);
    }
    l = new Ledger(hooks);
    CHARGES.set(ctx.record, l);
  }
  return l;
}

/** True once the call ended (its duration is set before `callDone`) or its ledger closed. */
function ended(ctx: CallContext): boolean {
  return ctx.record.durationMs > 0 || CHARGES.get(ctx.record)?.closed === true;
}

/** Whether an error's charge waits for another upstream's answer: a running client call, an {@link agreementSignature}, no request fact. */
export function isDeferred(ctx: CallContext, err: SvcError): boolean {
  return !ctx.internal && !isRequestFact(err) && agreementSignature(err) !== undefined && !ended(ctx);
}

/**
 * Parks a charge until the verdict on a deferred error ({@link isDeferred}): `fn` (a breaker failure) runs if it is charged, never if
 * waived. The ledger settles on `hooks.callDone`.
 */
export function whenCharged(hooks: ProxyHooks, ctx: CallContext, a: AttemptRecord, fn: () => void): void {
  const e = ledgerOf(hooks, ctx).entryOf(a, ctx.request);
  if (!e.open) {
    if (a.charge === 'charged') fn();
    return;
  }
  (e.onCharge ??= []).push(fn);
}

/** Whether another upstream already gave this call the same error: then the upstream-scope retry does not ask again (a request fact). */
export function wouldConfirm(ctx: CallContext, upstreamId: string, err: SvcError): boolean {
  const sig = agreementSignature(err);
  const l = sig === undefined ? undefined : CHARGES.get(ctx.record);
  if (!l) return false;
  for (const e of l.entries) if (e.sig === sig && e.request === ctx.request && e.attempt.upstreamId !== upstreamId) return true;
  return false;
}

/**
 * Closes the charge of a finished failed attempt and runs `attemptDone` for it, now or at the verdict.
 * @returns the error to throw: the same one, or a confirmed copy when a second upstream gave the same error
 */
export function settleFailedAttempt(hooks: ProxyHooks, ctx: CallContext, a: AttemptRecord, err: SvcError): SvcError {
  const sig = a.outcome === 'error' && !ctx.internal ? agreementSignature(err) : undefined;
  const l = CHARGES.get(ctx.record);
  if (sig === undefined || ended(ctx)) {
    if (l) {
      const own = l.entries.find((e) => e.attempt === a);
      // Registered by a breaker but not deferred after all (cancelled meanwhile, call over): decide now.
      if (own && a.outcome === 'error') l.charge(own);
      else if (own) l.waive(own);
      // A revert or a params error from this upstream: the others' unclassified errors were not about the request.
      if (isDefiniteAnswer(err)) for (const e of l.entries) if (e.request === ctx.request) l.charge(e);
    }
    hooks.attemptDone.call(a);
    return err;
  }
  const ledger = l ?? ledgerOf(hooks, ctx);
  let confirmed = false;
  for (const e of ledger.entries) {
    if (e.attempt === a || e.request !== ctx.request || e.sig === undefined) continue;
    if (e.sig === sig) confirmed ||= e.attempt.upstreamId !== a.upstreamId;
    // Another upstream answered this request differently: that one's error was its own.
    else ledger.charge(e);
  }
  const own = ledger.entryOf(a, ctx.request);
  own.sig = sig;
  if (confirmed) {
    for (const e of ledger.entries) if (e.sig === sig && e.request === ctx.request) ledger.waive(e);
    const copy = confirmedCopy(err);
    a.error = copy;
    hooks.attemptDone.call(a);
    return copy;
  }
  if (isRequestFact(err)) {
    // Never charged; kept so a second upstream's same answer stops the call.
    ledger.waive(own);
    hooks.attemptDone.call(a);
    return err;
  }
  a.charge = 'deferred';
  own.owed = true;
  return err;
}

/** A copy marked `confirmed` (not retryable, never charged): one error object may be shared by several calls (an outbound batch). */
function confirmedCopy(err: SvcError): SvcError {
  const copy = Object.create(Object.getPrototypeOf(err) as object, Object.getOwnPropertyDescriptors(err)) as SvcError;
  copy.confirmed = true;
  return copy;
}
