/**
 * The facts of one call (docs/architecture.md): who called, over what request, and the execution record of its attempts. Plain data
 * with no reference to the registry or the pipeline, so every layer (and lib/'s health window) can read it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { SvcError } from './errors.ts';

/** Finality class of a call; `unknown` until the EVM plugins classify it. */
export type Finality = 'finalized' | 'unfinalized' | 'realtime' | 'unknown';

/** Who is calling (spec §5); filled by auth plugins, `undefined` when no auth runs. */
export interface Identity {
  /** User id used for per-user metrics and limits. */
  userId: string;
  /** Auth strategy that authenticated the caller. */
  strategy?: string;
  /** Strategy-level `allowClientDirectives` granted to this caller (spec §2.8 rule c). */
  allowClientDirectives?: string;
  /** Rate-limit budget id, if any. */
  rateLimitBudget?: string;
}

/** The HTTP facts a call may need, shared by every call of one HTTP request. */
export interface HttpRequestInfo {
  /** Lower-cased request headers. */
  headers: IncomingHttpHeaders;
  /** Parsed query string (first value of each key). */
  query: Readonly<Record<string, string>>;
  /** Remote address of the client socket. */
  remoteAddress: string;
  /**
   * The client's address: the socket peer, or behind a trusted forwarder the first untrusted address of its forwarding header
   * (lib/client-address.ts); `::ffff:` removed, '' when unknown. Used by auth `network` strategies and `perIP` budgets.
   */
  clientAddress: string;
  /** Host header without port, lower-cased. */
  host: string;
  /** Raw path of the request. */
  path: string;
  /**
   * Network the URL names (`evm:31337` for `/main/evm/31337` or an alias), set before `authenticate` runs; undefined when the body's
   * `networkId` must name it, and on admin and healthcheck routes. The `siwe` strategy binds a message's `chainId` to it.
   */
  networkId?: string;
}

/** Why an attempt was made (spec §4.5 trace reasons, in increasing precedence). */
export type AttemptReason = 'primary' | 'retry' | 'sweep' | 'hedge' | 'consensus_slot';
/** How an attempt ended (spec §4.5 trace outcomes). */
export type AttemptOutcome = 'pending' | 'success' | 'timeout' | 'exec_revert' | 'rate_limited' | 'error' | 'cancelled' | 'skipped';

/** One physical upstream request (or a skip that never dialled). */
export interface AttemptRecord {
  /** Upstream id. */
  upstreamId: string;
  /** Upstream `vendorName` or `unknown`. */
  vendor: string;
  /** Method sent. */
  method: string;
  /** Project id and network id of the call. */
  projectId: string;
  networkId: string;
  /** Trace reason (spec §4.5). */
  reason: AttemptReason;
  /** Trace outcome; `pending` while in flight. */
  outcome: AttemptOutcome;
  /** Start time, `performance.now()` milliseconds. */
  startedAt: number;
  /** Duration in milliseconds, set when it ends. */
  durationMs: number;
  /** True when this attempt's answer reached the client (`:won`). */
  won: boolean;
  /** True when the request actually went to the wire (false for breaker-open skips). */
  dialled: boolean;
  /** The error it ended with, if any. */
  error?: SvcError;
  /**
   * Whether the error is charged to the upstream when that waited for another's answer (core/pipeline/charge.ts): `deferred`, then
   * `charged`, or `waived` when a second upstream gave the same error. Unset: the error's class decides at once (core/pipeline/blame.ts).
   */
  charge?: 'deferred' | 'charged' | 'waived';
  /** The call's finality when known. */
  finality: Finality;
  /** Internal (state poller, probe) rather than client traffic. */
  internal: boolean;
}

/** What happened while serving one call (docs/architecture.md); read by headers and metrics. */
export interface ExecutionRecord {
  /** Trace of upstream attempts in start order. */
  attempts: AttemptRecord[];
  /** Physical upstream requests (counted by the core's transport). */
  upstreamAttempts: number;
  /** Network-scope rounds: the core counts the first as it hands the call to the `attempt` chain; each further round (failsafe retry) adds one. */
  networkAttempts: number;
  /** Plugin-owned counters and facts of this call (failsafe, cache, consensus...) by slot (core/registry/slots.ts); created on first write. */
  slots?: Map<symbol, unknown>;
  /** Winning upstream id. */
  upstream?: string;
  /** Start, `performance.now()` ms. */
  startedAt: number;
  /** Total duration in ms, set when the call ends. */
  durationMs: number;
  /** Method of the call (for batch cost/method headers). */
  method: string;
  /** True when the call was routed to a network (not an early error). */
  routed: boolean;
  /** The final error, if the call failed. */
  error?: SvcError;
}

/** A fresh, zeroed execution record. */
export function newExecutionRecord(method: string): ExecutionRecord {
  return { attempts: [], upstreamAttempts: 0, networkAttempts: 0, startedAt: performance.now(), durationMs: 0, method, routed: false };
}
