/** How svc's errors reach the wire (spec §7): the error a client is shown, its JSON-RPC error object, and the README's error table. */
import {
  ErrAuthUnauthorized,
  ErrConsensusDispute,
  ErrConsensusLowParticipants,
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointContentValidation,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointNonceException,
  ErrEndpointRequestTimeout,
  ErrEndpointRequestTooLarge,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  ErrFailsafeCircuitBreakerOpen,
  ErrFailsafeTimeoutExceeded,
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedRange,
  ErrGetLogsExceededMaxAllowedTopics,
  ErrInternal,
  ErrInvalidRequest,
  ErrJsonRpcRequestUnmarshal,
  ErrNetworkNotSupported,
  ErrNotImplemented,
  ErrProjectNotFound,
  ErrAuthRateLimitRuleExceeded,
  ErrRateLimitRuleExceeded,
  ErrProjectRateLimitRuleExceeded,
  ErrNetworkRateLimitRuleExceeded,
  ErrUpstreamRateLimitRuleExceeded,
  ErrRequestTooLarge,
  ErrUnsupportedContentEncoding,
  ErrResponseBytesInFlightExceeded,
  ErrServiceShuttingDown,
  ErrReloadUnavailable,
  ErrUpstreamMalformedResponse,
  ErrUpstreamMethodIgnored,
  ErrUpstreamRequestTooLarge,
  ErrUpstreamsExhausted,
  type SvcError,
} from './errors.ts';

/** JSON-RPC error object as written on the wire (JSON-RPC 2.0 §5.1). */
export interface JsonRpcErrorObject {
  /** Integer JSON-RPC error code. */
  code: number;
  /** Human-readable message. */
  message: string;
  /** Upstream revert bytes or svc's cause chain; omitted when empty. */
  data?: unknown;
  /** Exact JSON text to write when the object passes through from an upstream byte for byte (`code`/`message`/`data` describe it). */
  raw?: string;
}

/** The error a client is shown (as eRPC does): an `ErrUpstreamsExhausted` with exactly one cause is that cause; anything else is itself. */
export function wireError(err: SvcError): SvcError {
  let e = err;
  for (let i = 0; i < 8 && e instanceof ErrUpstreamsExhausted && e.causes.length === 1; i++) e = e.causes[0] as SvcError;
  return e;
}

/** Methods whose `error.data` clients read as revert bytes: never filled with svc's details. */
const REVERT_DATA_METHODS = new Set(['eth_call', 'eth_estimateGas']);

/**
 * Errors that are facts about the request (reverts, nonce, funds, gas, fee, invalid params, unsupported method, missing data, or
 * `SvcError.confirmed`): the client gets the upstream's own error byte for byte; svc's name stays in traces, headers and labels.
 */
export function isPassThrough(err: SvcError): boolean {
  return (
    err.confirmed === true ||
    err instanceof ErrEndpointExecutionException ||
    err instanceof ErrEndpointNonceException ||
    err instanceof ErrEndpointClientSideException ||
    err instanceof ErrEndpointUnsupported ||
    err instanceof ErrEndpointMissingData
  );
}

/**
 * The wire error object for a call. A pass-through error ({@link isPassThrough}, itself or an exhausted error's dominant cause) is the
 * upstream's object as `raw`, svc's cause chain added as `data` only where it sent none (never on an `exact` one). Others carry svc's
 * code and message; `data` is the upstream's, else the cause chain when allowed (never for `eth_call`/`eth_estimateGas`: revert bytes).
 * @param err the named error
 * @param method the call's method, or undefined when unknown
 * @param includeErrorDetails `server.includeErrorDetails`
 */
export function toJsonRpcError(err: SvcError, method: string | undefined, includeErrorDetails: boolean): JsonRpcErrorObject {
  const detailsAllowed = includeErrorDetails && !(method && REVERT_DATA_METHODS.has(method));
  const fact = passThroughOf(err);
  if (fact) {
    const raw = fact.upstreamError;
    const out: JsonRpcErrorObject = { code: fact.code, message: fact.message };
    if (fact.upstreamData !== undefined) out.data = fact.upstreamData;
    else if (detailsAllowed && raw?.exact !== true) out.data = err.toDetails();
    if (raw) {
      out.code = Number(raw.code);
      const end = raw.whole.lastIndexOf('}');
      out.raw =
        raw.data !== undefined || out.data === undefined || end < 0 ? raw.whole : `${raw.whole.slice(0, end).trimEnd()},"data":${JSON.stringify(out.data)}}`;
    }
    return out;
  }
  const out: JsonRpcErrorObject = { code: err.code, message: err.message };
  if (err.upstreamData !== undefined) out.data = err.upstreamData;
  else if (err.data !== undefined) out.data = detailsAllowed ? { ...(err.data as object), details: err.toDetails() } : err.data;
  else if (detailsAllowed) out.data = err.toDetails();
  return out;
}

/** The pass-through error a client should see for `err`: itself, or an exhausted error's dominant cause. */
function passThroughOf(err: SvcError): SvcError | undefined {
  if (isPassThrough(err)) return err;
  if (err instanceof ErrUpstreamsExhausted) {
    const d = err.dominantCause;
    if (d && isPassThrough(d)) return d;
  }
  return undefined;
}

/** One row of the README error table. */
export interface ErrorTableRow {
  name: string;
  code: number;
  httpStatus: number | string;
  retryable: boolean;
  when: string;
}

/** The README's error table: name, JSON-RPC code, HTTP status of a single call (spec §7). */
export const ERROR_TABLE: readonly ErrorTableRow[] = [
  row(ErrJsonRpcRequestUnmarshal, 'body is not valid JSON (id null)'),
  row(
    ErrInvalidRequest,
    'no `"jsonrpc":"2.0"`, no string `method`, a method name over 256 characters or outside `[A-Za-z0-9_.:-]`, nesting over `server.maxJsonDepth`, batch over `server.maxBatchSize`',
  ),
  row(ErrRequestTooLarge, 'body over `server.maxBodySize` (after decompression for a compressed body)'),
  row(ErrUnsupportedContentEncoding, 'request `Content-Encoding` other than gzip, deflate, br or identity'),
  row(ErrResponseBytesInFlightExceeded, 'upstream answers being read already hold `server.maxResponseBytesInFlight` bytes; retry later'),
  row(ErrServiceShuttingDown, 'svc is draining after SIGTERM (after `server.waitBeforeShutdown`); sent with `Connection: close`, retry on another replica'),
  row(ErrReloadUnavailable, 'admin `svc_reloadConfig` on an svc not started from a config file, or shutting down'),
  row(ErrProjectNotFound, 'unknown project in the URL'),
  row(ErrNetworkNotSupported, 'unknown network / chain id'),
  row(ErrAuthUnauthorized, 'caller failed authentication'),
  row(ErrEndpointUnauthorized, 'upstream answered 401/403 or "invalid api key"'),
  row(ErrEndpointCapacityExceeded, 'upstream answered 429 or a rate-limit message'),
  row(ErrUpstreamsExhausted, 'every upstream failed; code of the most frequent cause; 429 when rate limits dominate', '200 / 429'),
  row(ErrEndpointServerSideException, 'upstream HTTP 5xx, transport failure, unclassified vendor error (vendor code passed through)'),
  row(ErrEndpointBillingIssue, 'upstream HTTP 402 or a billing/quota message'),
  row(ErrEndpointUnsupported, 'upstream does not support the method'),
  row(
    ErrUpstreamMethodIgnored,
    'method excluded by `ignoreMethods`/`allowMethods`, or a node administration method no `allowMethods` names (refused before any upstream is dialled)',
  ),
  row(ErrEndpointExecutionException, 'revert: the upstream code, message and data reach the client intact'),
  row(ErrEndpointNonceException, 'nonce too low / already known'),
  row(ErrEndpointClientSideException, 'upstream says the params are invalid'),
  row(ErrEndpointMissingData, 'upstream lacks the block/state (retried elsewhere)'),
  row(ErrEndpointRequestTooLarge, 'upstream refused a range as too large'),
  row(
    ErrUpstreamMalformedResponse,
    'upstream answered something that is not JSON-RPC (a top-level member given twice included), or more than `maxResponseSize`',
  ),
  row(ErrUpstreamRequestTooLarge, 'upstream refused the request for its size (HTTP 413, or hung up mid-send); not counted against it'),
  row(ErrEndpointRequestTimeout, 'an upstream request ran past its deadline'),
  row(ErrFailsafeTimeoutExceeded, 'a failsafe `timeout` policy fired'),
  row(ErrFailsafeCircuitBreakerOpen, "the upstream's circuit breaker is open"),
  row(
    ErrEndpointContentValidation,
    'an answer failed an integrity check (`integrity` directive); retried on another upstream, the error only when none passes',
  ),
  row(
    ErrConsensusDispute,
    'consensus: enough upstreams answered, none of the answers reached `agreementThreshold` (groups in `error.data`); retryable when a slot error was',
  ),
  row(ErrConsensusLowParticipants, 'consensus: fewer valid answers than `agreementThreshold` (groups in `error.data`); retryable when a slot error was'),
  row(ErrNotImplemented, 'stateful filter method with several candidate upstreams'),
  row(ErrGetLogsExceededMaxAllowedRange, 'eth_getLogs/trace_filter range over the limit'),
  row(ErrGetLogsExceededMaxAllowedAddresses, 'eth_getLogs address list over the limit'),
  row(ErrGetLogsExceededMaxAllowedTopics, 'eth_getLogs topics over the limit'),
  row(ErrRateLimitRuleExceeded, "svc's own rate limit (the base of the three below; a plugin's own budget may throw it)"),
  row(ErrAuthRateLimitRuleExceeded, "over the budget of the caller's auth strategy or API key"),
  row(ErrProjectRateLimitRuleExceeded, "over the project's rateLimitBudget"),
  row(ErrNetworkRateLimitRuleExceeded, "over the network's rateLimitBudget"),
  row(ErrUpstreamRateLimitRuleExceeded, "over an upstream's rateLimitBudget: that upstream is skipped, not counted against it"),
  row(ErrInternal, "svc's own code failed for one call (id null in a batch)"),
];

function row(cls: { name: string; defaultCode: number; httpStatus: number; retryable: boolean }, when: string, httpStatus?: string): ErrorTableRow {
  return { name: cls.name, code: cls.defaultCode, httpStatus: httpStatus ?? cls.httpStatus, retryable: cls.retryable, when };
}
