/**
 * `svc-proxy/plugin/contracts`: what the core itself offers plugins beyond `svc-proxy/plugin` (attempt recording, blame and charging, upstream health,
 * chain state, how an upstream's requests are dispatched, the transport seam of non-HTTP upstreams and the process's response-bytes budget they count in); a contract between plugins lives on its plugin's entry `svc-proxy/plugins/<name>`. Versioned with svc like `svc-proxy/plugin`.
 */
import { RESPONSE_BYTES } from '../lib/body.ts';

export { createSweep, finishAttempt, outcomeOf, startAttempt, traceOutcome, tryUpstream, type TraceOutcome } from './pipeline/sweep.ts';
export { isCharged, isRequestFact, type AttemptCharge, type Blame } from './pipeline/blame.ts';
export { isDeferred, settleFailedAttempt, whenCharged, wouldConfirm } from './pipeline/charge.ts';
export type { CordonChange, HealthClassifier, HealthOutcome, HealthSnapshot, HealthTracker } from '../lib/health-window.ts';
export type { Reachability } from '../lib/reachability.ts';
export { isDeadline, type TransportRequest, type UpstreamTransport } from './registry/upstream.ts';
export { leaveNetworks } from './pipeline/probe.ts';
export type { RequestDispatcher, UpstreamPoolOptions } from './registry/outbound.ts';
export type { BodyCoding } from './pipeline/hooks.ts';

/**
 * The process's bound on upstream answer bytes held while being read and decoded (`server.maxResponseBytesInFlight`), for a
 * transport that reads answers itself ({@link UpstreamTransport}): the core's HTTP transport counts every answer in it, so a
 * plugin's answers must count too, or they pass the bound the operator set. Take before holding bytes, release once they are
 * dropped (the answer converted); over the bound, fail the call with `ErrResponseBytesInFlightExceeded`.
 */
export interface ResponseBytesBudget {
  /**
   * Takes `bytes` if they fit under the limit.
   * @returns false (nothing taken) when they do not
   */
  take(bytes: number): boolean;
  /** Gives back `bytes` taken earlier (exactly what was taken, once). */
  release(bytes: number): void;
  /** Bytes taken and not yet released, over the whole process. */
  readonly inFlight: number;
  /** `server.maxResponseBytesInFlight`, bytes. */
  readonly limit: number;
}

/** The process's {@link ResponseBytesBudget} (one per process, shared with the core's HTTP transport). */
export const responseBytes: ResponseBytesBudget = Object.freeze({
  take: (bytes: number) => RESPONSE_BYTES.take(bytes),
  release: (bytes: number) => RESPONSE_BYTES.release(bytes),
  get inFlight() {
    return RESPONSE_BYTES.inFlight;
  },
  get limit() {
    return RESPONSE_BYTES.limit;
  },
});
