/**
 * The seam for upstream transports other than HTTP: what a plugin that serves another endpoint scheme (`SchemaFragment.endpointSchemes`)
 * returns from the `upstreamTransport` hook. The core knows no protocol behind it.
 */
import type { RpcResult } from '../wire/jsonrpc.ts';

/** One request as a plugin's {@link UpstreamTransport} receives it. */
export interface TransportRequest {
  /** JSON-RPC method. */
  readonly method: string;
  /** Params (after interpolation), as JSON values. */
  readonly params: unknown;
  /** Aborts the request; an abort whose reason is a deadline (`isDeadline`, svc-proxy/plugin/contracts) must fail with `ErrEndpointRequestTimeout`. */
  readonly signal: AbortSignal;
  /** The call's deadline, `Date.now()` ms, for a protocol that sends one along (the abort of {@link signal} enforces it either way). */
  readonly deadline?: number;
  /** Largest answer to accept, bytes (the upstream's `maxResponseSize` or a smaller cap of this call). */
  readonly maxResponseSize: number;
  /** Extra headers of this one request (forwarded client headers, lower-cased names); a transport without headers may ignore them. */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The transport of an upstream whose endpoint is not http(s), given by the plugin that serves its scheme (the `upstreamTransport`
 * hook, `SchemaFragment.endpointSchemes`). It answers JSON-RPC as an HTTP node would: the result as the node's JSON (an
 * {@link RpcResult} with `upstreamId` set), or a named upstream error; the upstream's chain (failsafe, validation, cache) is the same.
 */
export interface UpstreamTransport {
  /**
   * Sends one request.
   * @returns the answer's result
   * @throws SvcError only (rejected): `ErrEndpointUnsupported` for a method the transport cannot carry (the call goes to another
   *   upstream), `ErrEndpointRequestTimeout` on a deadline, the other named upstream errors as the remote side's failure says
   */
  send(request: TransportRequest): Promise<RpcResult>;
  /** Secrets of this upstream beyond its endpoint's (header values), redacted from log lines about it. */
  readonly secrets?: readonly string[];
  /** Closes connections once in-flight requests end (shutdown, reload). */
  close(): Promise<void>;
  /** Aborts in-flight requests and closes connections at once. */
  destroy(): Promise<void>;
}
