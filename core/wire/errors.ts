/**
 * The one error hierarchy of svc (docs/architecture.md, spec §7): every error a client can see is an {@link SvcError} subclass named
 * as in the spec, so names, codes, HTTP statuses and retryability live in one place (the README table is written from `ERROR_TABLE`).
 */
import { redactText } from '../../lib/redact.ts';
import { SvcError, type SvcErrorOptions } from './error-base.ts';

export { isSvcError, type RefusalAnswer, SVC_ERROR_BRAND, SvcError, type SvcErrorOptions, type UpstreamErrorRaw } from './error-base.ts';

// --- Client / request errors ---

/** Body is not valid JSON (spec §4.2 #5, §7). HTTP 400, -32700, id null. */
export class ErrJsonRpcRequestUnmarshal extends SvcError {
  static override readonly defaultCode = -32700;
  static override readonly httpStatus = 400;
}

/** Request object missing `"jsonrpc":"2.0"` or a string `method`; batch too large. HTTP 400, -32600. */
export class ErrInvalidRequest extends SvcError {
  static override readonly defaultCode = -32600;
  static override readonly httpStatus = 400;
}

/** Body larger than `server.maxBodySize`. HTTP 413, -32600. */
export class ErrRequestTooLarge extends SvcError {
  static override readonly defaultCode = -32600;
  static override readonly httpStatus = 413;
}

/** A request `Content-Encoding` the server does not decode (the compression plugin decodes gzip, deflate and br). HTTP 415 (as in eRPC), -32600. */
export class ErrUnsupportedContentEncoding extends SvcError {
  static override readonly defaultCode = -32600;
  static override readonly httpStatus = 415;
}

/** svc is draining after SIGTERM (spec §3.2): retry on another replica. HTTP 503 with `Connection: close`, -32603. */
export class ErrServiceShuttingDown extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly httpStatus = 503;
}

/**
 * Upstream answers being read already hold `server.maxResponseBytesInFlight` bytes (spec §7, §8): refused so memory stays bounded. svc's
 * capacity, not the upstream's: not charged, not retried elsewhere (same bytes). HTTP 503, -32005; retry later.
 */
export class ErrResponseBytesInFlightExceeded extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 503;
}

/** A config reload cannot run: svc was not started from a config file, or it is shutting down. HTTP 503, -32603. */
export class ErrReloadUnavailable extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly httpStatus = 503;
}

/** Unknown project in the URL (spec §4.1). HTTP 404, -32602. */
export class ErrProjectNotFound extends SvcError {
  static override readonly defaultCode = -32602;
  static override readonly httpStatus = 404;
}

/** Unknown network / chain (spec §4.1, §7). HTTP 404, -32602. */
export class ErrNetworkNotSupported extends SvcError {
  static override readonly defaultCode = -32602;
  static override readonly httpStatus = 404;
}

/** Caller failed authentication (spec §5). HTTP 401, -32016. */
export class ErrAuthUnauthorized extends SvcError {
  static override readonly defaultCode = -32016;
  static override readonly httpStatus = 401;
}

/** svc's own rate limit for a caller: the base of the three below. HTTP 429, -32005. */
export class ErrRateLimitRuleExceeded extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 429;
}

/** Over the budget of the auth strategy or API key that let the caller in. HTTP 429, -32005. */
export class ErrAuthRateLimitRuleExceeded extends ErrRateLimitRuleExceeded {}

/** Over the project's `rateLimitBudget`. HTTP 429, -32005. */
export class ErrProjectRateLimitRuleExceeded extends ErrRateLimitRuleExceeded {}

/** Over the network's `rateLimitBudget`. HTTP 429, -32005. */
export class ErrNetworkRateLimitRuleExceeded extends ErrRateLimitRuleExceeded {}

/**
 * Over an upstream's own `rateLimitBudget`: skipped undialled (outcome `rate_limited`), counted toward neither its error rate nor its
 * breaker. Retryable on the next upstream. -32005.
 */
export class ErrUpstreamRateLimitRuleExceeded extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly retryable = true;
}

/** Stateful method with several candidate upstreams (spec §2.8 #4, §7). -32601. */
export class ErrNotImplemented extends SvcError {
  static override readonly defaultCode = -32601;
}

/** eth_getLogs / trace_filter block range over `getLogsMaxAllowedRange` (spec §2.8 #8). -32012, HTTP 200. */
export class ErrGetLogsExceededMaxAllowedRange extends SvcError {
  static override readonly defaultCode = -32012;
}
/** eth_getLogs address list longer than `getLogsMaxAllowedAddresses`. -32012. */
export class ErrGetLogsExceededMaxAllowedAddresses extends SvcError {
  static override readonly defaultCode = -32012;
}
/** eth_getLogs topics longer than `getLogsMaxAllowedTopics`. -32012. */
export class ErrGetLogsExceededMaxAllowedTopics extends SvcError {
  static override readonly defaultCode = -32012;
}

/** svc's own code failed for one call (spec §4.2 #6). -32603, id null in a batch. */
export class ErrInternal extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly httpStatus = 500;
}

// --- Upstream errors: normalised once, where they arrive ---

/** HTTP 5xx, transport failure, or an unclassified vendor error. -32603 (or vendor code). Retryable. */
export class ErrEndpointServerSideException extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
}

/** HTTP 429 or a rate-limit message. -32005, HTTP 429. Skipped to the next upstream. */
export class ErrEndpointCapacityExceeded extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 429;
  static override readonly retryable = true;
}

/** HTTP 402 or a billing/quota message. -32005. */
export class ErrEndpointBillingIssue extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly retryable = true;
}

/** Method not supported by the upstream (-32601, HTTP 405/415...). Next upstream may support it. */
export class ErrEndpointUnsupported extends SvcError {
  static override readonly defaultCode = -32601;
  static override readonly retryable = true;
}

/** Method excluded by the upstream's `ignoreMethods`/`allowMethods`. -32601. */
export class ErrUpstreamMethodIgnored extends SvcError {
  static override readonly defaultCode = -32601;
  static override readonly retryable = true;
}

/** Execution error (a revert, code 3): the upstream's code, message and data reach the caller intact; never retried elsewhere. */
export class ErrEndpointExecutionException extends SvcError {
  static override readonly defaultCode = 3;
}

/** Nonce too low / already known. -32003, not retried elsewhere. */
export class ErrEndpointNonceException extends SvcError {
  static override readonly defaultCode = -32003;
}

/** Invalid params as judged by the upstream. -32602, not retried. */
export class ErrEndpointClientSideException extends SvcError {
  static override readonly defaultCode = -32602;
}

/** Upstream lacks the data (missing trie node, unknown block). -32014, retryable. */
export class ErrEndpointMissingData extends SvcError {
  static override readonly defaultCode = -32014;
  static override readonly retryable = true;
}

/** Upstream refused the range as too large. -32012, retryable (another upstream or a split). */
export class ErrEndpointRequestTooLarge extends SvcError {
  static override readonly defaultCode = -32012;
  static override readonly retryable = true;
}

/** HTTP 401/403, invalid API key. -32016, HTTP 401. */
export class ErrEndpointUnauthorized extends SvcError {
  static override readonly defaultCode = -32016;
  static override readonly httpStatus = 401;
  static override readonly retryable = true;
}

/**
 * The upstream refused the request for its size (HTTP 413, or a hang-up mid-send): a fact about the request, never counted toward
 * health or a breaker; the next upstream may accept it. -32600, HTTP 413, retryable.
 */
export class ErrUpstreamRequestTooLarge extends SvcError {
  static override readonly defaultCode = -32600;
  static override readonly httpStatus = 413;
  static override readonly retryable = true;
}

/** Upstream answered something that is not a JSON-RPC response. -32603, retryable. */
export class ErrUpstreamMalformedResponse extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
}

/** One upstream request ran out of time (deadline or socket). -32603, retryable. */
export class ErrEndpointRequestTimeout extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
}

/** A response failed a validation check (spec §7). -32603, retryable. */
export class ErrEndpointContentValidation extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
}

/** One group of identical answers in a consensus round: `error.data.groups[]` of the consensus errors. */
export interface ConsensusGroupSummary {
  /** First 16 hex digits of the group's canonical hash (`jsonrpc:<code>` for an error that voted). */
  hash: string;
  /** Upstream ids that answered this, in arrival order. */
  upstreams: string[];
  /** Votes (one per upstream). */
  count: number;
}

/** Base of the consensus errors: retryable by an outer retry only when some slot's error was (as eRPC does). */
export abstract class ConsensusError extends SvcError {
  static override readonly defaultCode = -32603;
  /** The slots' own errors (infrastructure failures and errors that voted). */
  readonly causes: readonly SvcError[];
  /**
   * @param groups the round's groups, written as `error.data.groups`
   * @param causes the slots' errors
   */
  constructor(message: string, groups: readonly ConsensusGroupSummary[], causes: readonly SvcError[], details?: Record<string, unknown>) {
    super(message, { data: { groups, ...details }, cause: causes.length ? [...causes] : undefined });
    this.causes = causes;
  }
  override get retryable(): boolean {
    return this.causes.some((c) => c.retryable);
  }
}

/** Enough upstreams answered but no answer reached `agreementThreshold` (`disputeBehavior: returnError`). HTTP 200, -32603. */
export class ErrConsensusDispute extends ConsensusError {}

/** Fewer valid answers than `agreementThreshold` (`lowParticipantsBehavior: returnError`, or nothing valid). HTTP 200, -32603. */
export class ErrConsensusLowParticipants extends ConsensusError {}

/** A failsafe `timeout` policy fired. -32603. */
export class ErrFailsafeTimeoutExceeded extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
}

/** The upstream's circuit breaker is open: skipped without dialling. -32603. */
export class ErrFailsafeCircuitBreakerOpen extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
}

/** The attempt was cancelled (a losing hedge leg, or the client went away). */
export class ErrCancelled extends SvcError {
  static override readonly defaultCode = -32603;
}

/** Every upstream failed (spec §7): code of the most frequent cause (-32603 without one); HTTP 429 when capacity-exceeded dominates. */
export class ErrUpstreamsExhausted extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly retryable = true;
  /** One error per failed attempt, in attempt order. */
  readonly causes: readonly SvcError[];
  /** The most frequent cause by code (first on ties), whose code this error carries. */
  readonly dominantCause?: SvcError;

  constructor(causes: readonly SvcError[], message?: string, opts: SvcErrorOptions = {}) {
    const dominant = dominantCause(causes);
    super(message ?? exhaustedMessage(causes), { ...opts, cause: causes.length ? [...causes] : undefined, code: dominant?.code ?? -32603 });
    this.causes = causes;
    this.dominantCause = dominant;
  }

  override get httpStatus(): number {
    return this.dominantCause instanceof ErrEndpointCapacityExceeded ? 429 : 200;
  }

  override get retryable(): boolean {
    return this.causes.length === 0 || this.causes.some((c) => c.retryable);
  }
}

/** Most frequent cause by code; ties broken by first occurrence. Skips/ignored methods do not vote. */
function dominantCause(causes: readonly SvcError[]): SvcError | undefined {
  const counts = new Map<number, { n: number; first: SvcError }>();
  for (const c of causes) {
    if (c instanceof ErrUpstreamMethodIgnored || c instanceof ErrCancelled) continue;
    const e = counts.get(c.code);
    if (e) e.n++;
    else counts.set(c.code, { n: 1, first: c });
  }
  let best: { n: number; first: SvcError } | undefined;
  for (const v of counts.values()) if (!best || v.n > best.n) best = v;
  return best?.first ?? causes[0];
}

function exhaustedMessage(causes: readonly SvcError[]): string {
  if (causes.length === 0) return 'all upstream attempts failed (no upstream available)';
  const counts = new Map<string, number>();
  for (const c of causes) counts.set(c.name, (counts.get(c.name) ?? 0) + 1);
  const summary = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
  return `all upstream attempts failed (${summary})`;
}

/** Wraps anything thrown into a named error (SvcErrors pass through), redacting a foreign message: it may quote a connection string or URL. */
export function asSvcError(err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  const e = err instanceof Error ? err : new Error(String(err));
  return new ErrInternal(`internal error: ${redactText(e.message)}`, { cause: e });
}
