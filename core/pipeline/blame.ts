/**
 * Who an upstream attempt's error is charged to (README "Errors": "What counts against an
 * upstream"). An upstream's health window (error rate, score), its circuit breakers and
 * `svc_upstream_request_errors_total` only move for errors that are the upstream's fault; a fact
 * about the request (a revert, invalid params, an unknown tracer, a request too large) never
 * counts, whatever the upstream, so a client cannot degrade an upstream by sending bad calls.
 *
 * This module classifies; core/pipeline/charge.ts defers the charge of an unclassified node error until
 * it is known whether a second upstream gives the same answer (then it is a request fact too).
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
 * Who an error is charged to: `upstream` (its health, breaker and error counter), `request` (a
 * fact about what the client sent: never charged), `none` (svc's own failures, cancellations,
 * skips, and capability answers such as an unsupported method or missing data, which are
 * neither a fault nor the client's doing; they are counted as they always were, not as errors).
 */
export type Blame = 'upstream' | 'request' | 'none';

/**
 * Lower-cased fragments of node messages that name a fact about the request although the node
 * sent a generic code (-32603, -32000): tracers and options the node does not know, params it
 * could not decode. geth and anvil evaluate an unknown tracer name as JavaScript
 * (`failed to evaluate JS code: ReferenceError: fooTracer is not defined`); reth and other
 * serde-based nodes answer `unknown variant`, `unknown field`, `missing field`, `invalid type`.
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
 * True for an error that is a fact about the request (never charged to any upstream): reverts
 * and other execution errors, nonce errors, invalid params, a request or range the upstream
 * refused for its size, an error a second upstream confirmed ({@link SvcError.confirmed}), and a
 * node error under a generic code whose message is in {@link REQUEST_FACT_MESSAGES}.
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
  for (const f of REQUEST_FACT_MESSAGES) if (m.includes(f)) return true;
  return false;
}

/**
 * Who an attempt's error is charged to (see {@link Blame}). `upstream`: an unclassified or 5xx
 * server error, a transport failure, a timeout, a malformed answer, a billing, auth or rate-limit
 * answer, an answer that failed an integrity check. `request`: {@link isRequestFact}. Everything
 * else (svc's `ErrInternal`, cancellations, breaker/budget skips, ignored or unsupported methods,
 * missing data): `none`.
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

/**
 * Whether a finished attempt is charged to its upstream: dialled, failed (error, timeout or rate
 * limited), not waived because a second upstream confirmed the error ({@link AttemptRecord.charge}),
 * and blamed on the upstream ({@link blameOf}). `svc_upstream_request_errors_total` counts exactly these.
 */
export function isCharged(a: AttemptCharge): boolean {
  if (!a.dialled || !a.error || a.charge === 'waived') return false;
  if (a.outcome !== 'error' && a.outcome !== 'timeout' && a.outcome !== 'rate_limited') return false;
  if (svcStalled(a)) return false;
  return blameOf(a.error) === 'upstream';
}

/** What {@link isCharged} and {@link healthOutcome} read of an attempt (its span: when given). */
export type AttemptCharge = Pick<AttemptRecord, 'dialled' | 'outcome' | 'error' | 'charge'> & Partial<Pick<AttemptRecord, 'startedAt' | 'durationMs'>>;

/**
 * Whether an attempt's timeout is svc's own doing: its event loop stalled for a real share of the
 * attempt (lib/loop-stall.ts), so the answer may have sat unread while the deadline fired. Such a
 * timeout is charged to nobody: whoever overloads svc must not degrade the upstreams' health.
 */
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
 * A node message reduced to what two upstreams answering the same call would both say:
 * lower-cased; quoted fragments (`"…"`, `` `…` ``, `'…'`) collapsed to `"…"`; hex values
 * (addresses, hashes, quantities) to `0x…`, bare hashes of 16+ hex digits to `…`; numbers to `#`;
 * whitespace runs to one space; the input read up to 1024 characters and the result cut to
 * {@link MAX_NORMALISED_MESSAGE}. Every pattern is linear in its (bounded) input.
 * @param message the node's `error.message`
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

/**
 * The answer an error stands for, as `<code> <normalised message>`, for an error the node sent as
 * a JSON-RPC error object; undefined for transport failures and bare HTTP statuses.
 */
export function errorSignature(err: SvcError): string | undefined {
  const code = nodeCode(err);
  return code === undefined ? undefined : `${code} ${normaliseErrorMessage(err.message)}`;
}

/**
 * The signature under which a second upstream's identical answer confirms an error as a fact
 * about the request (core/pipeline/charge.ts): only for `ErrEndpointServerSideException` the node sent
 * as a JSON-RPC error object with an HTTP status below 500 (a 5xx says the server failed, and
 * two upstreams failing alike is an outage, not a verdict on the request). Undefined otherwise.
 */
export function agreementSignature(err: SvcError): string | undefined {
  if (!(err instanceof ErrEndpointServerSideException) || err.confirmed === true) return undefined;
  if (err.upstreamStatus !== undefined && err.upstreamStatus >= 500) return undefined;
  return errorSignature(err);
}

/**
 * Whether an error is the node evaluating the request and saying something definite about it
 * (a revert, a nonce or params error): such an answer differs from an unclassified error another
 * upstream gave, so that other upstream's error is charged at once (core/pipeline/charge.ts).
 */
export function isDefiniteAnswer(err: SvcError): boolean {
  return err instanceof ErrEndpointExecutionException || err instanceof ErrEndpointNonceException || err instanceof ErrEndpointClientSideException;
}

/**
 * Classifies an attempt for health scoring: only genuine failures of the upstream (transport,
 * 5xx, timeouts, malformed answers, billing) are errors; reverts and other execution errors are
 * successes; rate limits are throttles; cancellations (client or lost hedge legs) count as
 * nothing, and so do svc's own failures and requests refused for their size. A fact about the
 * request is never an error, whatever the upstream (`isRequestFact` above: invalid params,
 * an unknown tracer, an error a second upstream confirmed: `charge` `waived`), so nothing a client
 * sends counts against an upstream. A timeout while svc's own event loop stalled (overload) counts
 * as nothing either (lib/loop-stall.ts).
 */
export function healthOutcome(a: AttemptCharge): HealthOutcome {
  if (!a.dialled) return 'ignore';
  if (a.outcome === 'success' || a.outcome === 'exec_revert') return 'success';
  if (a.outcome === 'cancelled' || a.outcome === 'pending' || a.outcome === 'skipped') return 'ignore';
  const e: SvcError | undefined = a.error;
  if (!e || e instanceof ErrCancelled || e instanceof ErrInternal || e instanceof ErrUpstreamRequestTooLarge) return 'ignore';
  // The node answered; the answer is about the request.
  if (a.charge === 'waived' || isRequestFact(e)) return 'neutral';
  // A timeout while svc's own loop was stalled: svc was slow, not the upstream.
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
