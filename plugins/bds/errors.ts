/**
 * A failed BDS call → svc's named upstream error, as eRPC maps them (common/grpc_errors.go): the BDS error code of the status
 * details first, the gRPC status code when there is none. What the upstream wrote (its message) is redacted and bounded before it
 * reaches a message.
 *
 * One departure from eRPC: a `CANCELLED` status that reaches svc is never svc's own cancellation (the transport names that from the
 * attempt's signal before it looks at the status), but the server's or a proxy's on the way (a load balancer resetting the stream).
 * It is an upstream fault like `UNAVAILABLE`: retried, charged, and the call fails over, where `ErrCancelled` would end the call.
 */
import { status as Status, type StatusObject } from '@grpc/grpc-js';
import {
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointMissingData,
  ErrEndpointRequestTimeout,
  ErrEndpointRequestTooLarge,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  type SvcError,
  type SvcErrorOptions,
} from 'svc-proxy/plugin/errors';
import type { BdsErrorDetails } from './proto.ts';

/**
 * The BDS upstream serves the method but cannot carry this call's params: a block tag in `eth_getLogs`, a malformed hash (refused
 * before sending), or a server's `UNSUPPORTED_BLOCK_TAG`. An {@link ErrEndpointUnsupported} (-32601, retryable: the call goes to
 * another upstream; not charged) under its own name, because `autoIgnoreUnsupportedMethods` switches a method off on an upstream
 * for the life of the process when it answers `ErrEndpointUnsupported` itself: one call's params must not switch off `eth_getLogs`.
 */
export class ErrEndpointParamsUnsupported extends ErrEndpointUnsupported {}

type ErrorClass = new (message: string, opts?: SvcErrorOptions) => SvcError;

/** BDS `ErrorCode` → svc error (eRPC's first switch). */
const BY_BDS_CODE: Readonly<Record<string, ErrorClass>> = {
  UNSUPPORTED_BLOCK_TAG: ErrEndpointParamsUnsupported,
  UNSUPPORTED_METHOD: ErrEndpointUnsupported,
  RANGE_OUTSIDE_AVAILABLE: ErrEndpointMissingData,
  INVALID_PARAMETER: ErrEndpointClientSideException,
  INVALID_REQUEST: ErrEndpointClientSideException,
  RATE_LIMITED: ErrEndpointCapacityExceeded,
  TIMEOUT_ERROR: ErrEndpointRequestTimeout,
  RANGE_TOO_LARGE: ErrEndpointRequestTooLarge,
  INTERNAL_ERROR: ErrEndpointServerSideException,
};

/** gRPC status code → svc error (eRPC's fallback switch, less `CANCELLED`: see the module comment); any code not listed is a server-side exception. */
const BY_GRPC_CODE: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [Status.UNIMPLEMENTED, ErrEndpointUnsupported],
  [Status.INVALID_ARGUMENT, ErrEndpointClientSideException],
  [Status.RESOURCE_EXHAUSTED, ErrEndpointCapacityExceeded],
  [Status.DEADLINE_EXCEEDED, ErrEndpointRequestTimeout],
  [Status.UNAUTHENTICATED, ErrEndpointUnauthorized],
  [Status.PERMISSION_DENIED, ErrEndpointUnauthorized],
  [Status.NOT_FOUND, ErrEndpointMissingData],
  [Status.OUT_OF_RANGE, ErrEndpointMissingData],
]);

/** Longest upstream message kept in an error, characters. */
const MAX_MESSAGE = 300;

/**
 * The svc error of a failed call.
 * @param st the call's status (code, details, metadata)
 * @param bds the BDS error of its status details, if any
 * @param upstream the upstream's id, in the message and details
 * @param method the JSON-RPC method, in details
 * @param redact removes the upstream's secrets from text it sent
 */
export function errorOfStatus(
  st: Pick<StatusObject, 'code' | 'details'>,
  bds: BdsErrorDetails | undefined,
  upstream: string,
  method: string,
  redact: (text: string) => string,
): SvcError {
  const grpcCode = Status[st.code] ?? String(st.code);
  const text = redact(String(bds?.message || st.details || '')).slice(0, MAX_MESSAGE);
  const cls = (bds && BY_BDS_CODE[String(bds.code)]) || BY_GRPC_CODE.get(st.code) || ErrEndpointServerSideException;
  const details: Record<string, unknown> = { upstream, method, grpcCode };
  if (bds) details.bdsErrorCode = bds.code;
  return new cls(`upstream ${upstream} (BDS gRPC) failed ${method}: ${grpcCode}${bds ? `/${String(bds.code)}` : ''}${text ? ` ${text}` : ''}`, {
    details,
  });
}
