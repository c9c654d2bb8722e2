/**
 * `svc-proxy/plugin/contracts`: what the core itself offers plugins beyond `svc-proxy/plugin` (attempt recording, blame and charging, upstream health,
 * chain state, how an upstream's requests are dispatched, the transport seam of non-HTTP upstreams); a contract between plugins lives on its plugin's entry `svc-proxy/plugins/<name>`. Versioned with svc like `svc-proxy/plugin`.
 */
export { createSweep, finishAttempt, outcomeOf, startAttempt, traceOutcome, tryUpstream, type TraceOutcome } from './pipeline/sweep.ts';
export { isCharged, isRequestFact, type AttemptCharge, type Blame } from './pipeline/blame.ts';
export { isDeferred, settleFailedAttempt, whenCharged, wouldConfirm } from './pipeline/charge.ts';
export type { CordonChange, HealthClassifier, HealthOutcome, HealthSnapshot, HealthTracker } from '../lib/health-window.ts';
export type { Reachability } from '../lib/reachability.ts';
export { isDeadline, type TransportRequest, type UpstreamTransport } from './registry/upstream.ts';
export { leaveNetworks } from './pipeline/probe.ts';
export type { RequestDispatcher, UpstreamPoolOptions } from './registry/outbound.ts';
export type { BodyCoding } from './pipeline/hooks.ts';
