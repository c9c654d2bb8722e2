/**
 * `svc/plugin/contracts`: the contracts the core itself offers plugins beyond `svc/plugin`: the
 * attempt-recording helpers the failsafe plugin and the state poller use, attempt blame and
 * charging, upstream health, and chain state. A contract one plugin provides to others lives with
 * that plugin, on its own entry `svc/plugins/<name>` (docs/plugins.md, "Contracts between plugins").
 *
 * Versioned with svc like `svc/plugin`.
 */
export { createSweep, finishAttempt, outcomeOf, startAttempt, traceOutcome, tryUpstream, type TraceOutcome } from './pipeline/sweep.ts';
export { isCharged, isRequestFact, type AttemptCharge, type Blame } from './pipeline/blame.ts';
export { isDeferred, settleFailedAttempt, whenCharged, wouldConfirm } from './pipeline/charge.ts';
export type { CordonChange, HealthClassifier, HealthOutcome, HealthSnapshot, HealthTracker } from '../lib/health-window.ts';
export { isDeadline } from './registry/upstream.ts';
export { leaveNetworks } from './pipeline/probe.ts';
