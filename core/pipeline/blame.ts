/**
 * Who an attempt's error is charged to (README "Errors"). Health, breakers and `svc_upstream_request_errors_total` move only for
 * the upstream's own faults, never for a fact about the request, so a client cannot degrade an upstream by sending bad calls.
 * charge.ts defers an unclassified node error until a second upstream's answer shows whether it is a request fact too.
 */
import type { HealthOutcome } from '../../lib/health-window.ts';
import { stalledDuring } from '../../lib/loop-stall.ts';
import type { AttemptRecord } from './context.ts';
import {
  ErrCancelled,
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointContentValidation,
  ErrEndpointExecutionException,
  ErrEndpointNonceException,
  ErrEndpointRequestTimeout,
  ErrEndpointRequestTooLarge,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrFailsafeTimeoutExceeded,
  ErrInternal,
  ErrUpstreamMalformedResponse,
  ErrUpstreamRequestTooLarge,
  type SvcError,
} from '../wire/errors.ts';

/**
 * Who an error is charged to: `upstream` (health, breaker, error counter), `request` (a fact about what the client sent: never
 * charged), `none` (svc's own failures, cancellations, skips, capability answers such as an unsupported method: not errors).
 */
export type Blame = 'upstream' | 'request' | 'none';

/**
 * Lower-cased fragments of node messages that name a request fact under a generic code (-32603, -32000): unknown tracers and
 * options, undecodable params. geth and anvil evaluate an unknown tracer as JavaScript (`ReferenceError: fooTracer is not
 * defined`); serde-based nodes (reth) answer `unknown variant`, `unknown field`, `missing field`, `invalid type`.
 */
export const REQUEST_FACT_MESSAGES: readonly string[] = [
  'tracer not found',
  'unknown tracer',
  'unsupported tracer',
  'invalid tracer',
  'tracer not supported',
  'tracer is not supported',
  'failed to evaluate js code',
  'referenceerror',
  'syntaxerror',
  'unsupported option',
  'unknown option',
  'unrecognized option',
  'unrecognised option',
  'unknown field',
  'unknown variant',
  'missing field',
  'invalid type: ',
  'cannot unmarshal',
  'invalid argument',
  'invalid params',
  'invalid input',
];

/** The node's own JSON-RPC error code of an error built from its error object, else undefined (transport failures, bare HTTP statuses). */
export function nodeCode(err: SvcError): number | undefined {
  const c = err.details?.upstreamCode;
  return typeof c === 'number' ? c : undefined;
}

/**
 * True for a fact about the request (never charged): execution, nonce and params errors, a request refused for its size, an
 * error a second upstream confirmed, a generic-code node error whose message is in {@link REQUEST_FACT_MESSAGES}.
 */
export function isRequestFact(err: SvcError): boolean {
  if (err.confirmed === true) return true;
  if (
    err instanceof ErrEndpointExecutionException ||
    err instanceof ErrEndpointNonceException ||
    err instanceof ErrEndpointClientSideException ||
    err instanceof ErrUpstreamRequestTooLarge ||
    err instanceof ErrEndpointRequestTooLarge
  ) {
    return true;
  }
  if (!(err instanceof ErrEndpointServerSideException) || nodeCode(err) === undefined) return false;
  const m = err.message.length > MAX_MESSAGE_IN ? err.message.slice(0, MAX_MESSAGE_IN).toLowerCase() : err.message.toLowerCase();
  return REQUEST_FACT_MESSAGES.some((f) => m.includes(f));
}

/**
 * Who an attempt's error is charged to ({@link Blame}). `upstream`: server errors, transport failures, timeouts, malformed answers,
 * billing, auth or rate-limit answers, failed integrity checks. `request`: {@link isRequestFact}. Anything else: `none`.
 */
export function blameOf(err: SvcError): Blame {
  if (isRequestFact(err)) return 'request';
  if (
    err instanceof ErrEndpointServerSideException ||
    err instanceof ErrEndpointRequestTimeout ||
    err instanceof ErrFailsafeTimeoutExceeded ||
    err instanceof ErrUpstreamMalformedResponse ||
    err instanceof ErrEndpointBillingIssue ||
    err instanceof ErrEndpointUnauthorized ||
    err instanceof ErrEndpointCapacityExceeded ||
    err instanceof ErrEndpointContentValidation
  ) {
    return 'upstream';
  }
  return 'none';
}

/** Charged to its upstream: dialled, failed, not waived, blamed on the upstream ({@link blameOf}); `svc_upstream_request_errors_total` counts these. */
export function isCharged(a: AttemptCharge): boolean {
  if (!a.dialled || !a.error || a.charge === 'waived') return false;
  if (a.outcome !== 'error' && a.outcome !== 'timeout' && a.outcome !== 'rate_limited') return false;
  if (svcStalled(a)) return false;
  return blameOf(a.error) === 'upstream';
}

/** What {@link isCharged} and {@link healthOutcome} read of an attempt (its span: when given). */
export type AttemptCharge = Pick<AttemptRecord, 'dialled' | 'outcome' | 'error' | 'charge'> & Partial<Pick<AttemptRecord, 'startedAt' | 'durationMs'>>;

/** A timeout during an event-loop stall (lib/loop-stall.ts) is nobody's: whoever overloads svc must not degrade the upstreams' health. */
function svcStalled(a: AttemptCharge): boolean {
  if (a.startedAt === undefined || !(a.error instanceof ErrEndpointRequestTimeout || a.error instanceof ErrFailsafeTimeoutExceeded)) return false;
  return stalledDuring(a.startedAt, a.durationMs !== undefined && a.durationMs > 0 ? a.startedAt + a.durationMs : undefined);
}

/** Longest message prefix normalised, characters (node messages are bounded before any regex runs). */
const MAX_MESSAGE_IN = 1024;
/** Longest normalised message kept, characters. */
export const MAX_NORMALISED_MESSAGE = 256;

const QUOTED = /"[^"]*"|`[^`]*`|(?<![a-z0-9])'[^']*'/g;
const HEX = /0x[0-9a-f]*/g;
const BARE_HASH = /\b[0-9a-f]{16,}\b/g;
/** Digits, except the `0` of a collapsed hex value (`0x…`). */
const NUMBER = /\d+(?!x…)/g;
const SPACE = /\s+/g;

/**
 * A node message reduced to what two upstreams answering the same call would both say: lower-cased; quoted fragments to `"…"`,
 * hex values to `0x…`, bare hashes (16+ hex digits) to `…`, numbers to `#`, whitespace runs to one space. Reads at most 1024
 * characters, returns at most {@link MAX_NORMALISED_MESSAGE}; every pattern is linear in its bounded input.
 */
export function normaliseErrorMessage(message: string): string {
  const s = (message.length > MAX_MESSAGE_IN ? message.slice(0, MAX_MESSAGE_IN) : message)
    .toLowerCase()
    .replace(QUOTED, '"…"')
    .replace(HEX, '0x…')
    .replace(BARE_HASH, '…')
    .replace(NUMBER, '#')
    .replace(SPACE, ' ')
    .trim();
  return s.length > MAX_NORMALISED_MESSAGE ? s.slice(0, MAX_NORMALISED_MESSAGE) : s;
}

/** `<code> <normalised message>` of an error the node sent as a JSON-RPC error object; undefined for transport failures and bare HTTP statuses. */
export function errorSignature(err: SvcError): string | undefined {
  const code = nodeCode(err);
  return code === undefined ? undefined : `${code} ${normaliseErrorMessage(err.message)}`;
}

/**
 * The signature under which a second upstream's identical answer confirms an error as a request fact (charge.ts). Only for a
 * node's `ErrEndpointServerSideException` below HTTP 500: two upstreams failing alike with a 5xx is an outage, not a verdict.
 */
export function agreementSignature(err: SvcError): string | undefined {
  if (!(err instanceof ErrEndpointServerSideException) || err.confirmed === true) return undefined;
  if (err.upstreamStatus !== undefined && err.upstreamStatus >= 500) return undefined;
  return errorSignature(err);
}

/** A definite verdict on the request (revert, nonce or params error): another upstream's unclassified error is then charged at once (charge.ts). */
export function isDefiniteAnswer(err: SvcError): boolean {
  return err instanceof ErrEndpointExecutionException || err instanceof ErrEndpointNonceException || err instanceof ErrEndpointClientSideException;
}

/**
 * Classifies an attempt for health scoring: only the upstream's own failures are errors; reverts are successes, rate limits
 * throttles; request facts are neutral; cancellations, svc's own failures and timeouts during a loop stall count as nothing.
 */
export function healthOutcome(a: AttemptCharge): HealthOutcome {
  if (!a.dialled) return 'ignore';
  if (a.outcome === 'success' || a.outcome === 'exec_revert') return 'success';
  if (a.outcome === 'cancelled' || a.outcome === 'pending' || a.outcome === 'skipped') return 'ignore';
  const e: SvcError | undefined = a.error;
  if (!e || e instanceof ErrCancelled || e instanceof ErrInternal || e instanceof ErrUpstreamRequestTooLarge) return 'ignore';
  if (a.charge === 'waived' || isRequestFact(e)) return 'neutral';
  if (svcStalled(a)) return 'ignore';
  if (e instanceof ErrEndpointCapacityExceeded) return 'throttle';
  if (
    e instanceof ErrEndpointServerSideException ||
    e instanceof ErrEndpointRequestTimeout ||
    e instanceof ErrFailsafeTimeoutExceeded ||
    e instanceof ErrUpstreamMalformedResponse ||
    e instanceof ErrEndpointBillingIssue
  ) {
    return 'error';
  }
  return 'neutral';
}
