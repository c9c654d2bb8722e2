/**
 * Per-call state (docs/architecture.md): every JSON-RPC call, each element of a batch, gets one
 * {@link CallContext}. Plugins write to its {@link ExecutionRecord}; the headers plugin only reads it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Slot } from './slots.ts';
import type { SvcError } from './errors.ts';
import type { ParsedCall } from './jsonrpc.ts';
import type { Network } from './registry/network.ts';
import type { Project } from './registry/project.ts';
import type { Upstream } from './registry/upstream.ts';

/** Finality class of a call; `unknown` until the EVM plugins classify it. */
export type Finality = 'finalized' | 'unfinalized' | 'realtime' | 'unknown';

/**
 * The call's finality (slot `evm.finality`): written by the evm-state plugin before anything
 * matches on it (`DirectiveStage.FINALITY`), read by failsafe matching, metrics and caching
 * (a feature's field lives in a slot, not in the core's `CallContext`).
 */
export const FINALITY = new Slot<Finality>('evm.finality', 'unknown');

/**
 * Resolved request directives (spec §2.8), by field: what the directives plugin resolved for a
 * call from config defaults and the request (unset means "the honouring plugin's default", so
 * tri-state config survives resolution). The core names no directive: each plugin declares the
 * ones it honours and reads them with a typed `Directive` (the directives plugin's contract, `svc/plugins/directives`).
 */
export interface Directives {
  /** A declared directive's value, by its field name. */
  [field: string]: boolean | string | undefined;
}

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
   * The client's address: the socket peer, or behind a trusted forwarder the first untrusted
   * address of its forwarding header (lib/client-address.ts); normalised (`::ffff:` removed),
   * '' when unknown. Auth `network` strategies and `perIP` budgets use this.
   */
  clientAddress: string;
  /** Host header without port, lower-cased. */
  host: string;
  /** Raw path of the request. */
  path: string;
  /**
   * Network the URL names (`evm:31337` for `/main/evm/31337` or an alias of it), set once the
   * route is resolved and before `authenticate` runs; undefined when the body's `networkId` must
   * name it, and on routes of other doors (admin, healthcheck). The `siwe` strategy binds a
   * message's `chainId` to it.
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
   * Whether the error is charged to the upstream, when that waited for another upstream's answer
   * (core/charge.ts): `deferred` while waiting, `charged` once it counts, `waived` when a second
   * upstream gave the same error (a fact about the request: never counted). Unset: the error's
   * class decides at once (core/blame.ts).
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
  /**
   * Network-scope rounds: the core's request path counts the first when it hands the call to the
   * `attempt` chain, a plugin starting another round (the failsafe retry) adds one.
   */
  networkAttempts: number;
  /**
   * Plugin-owned counters and facts of this call (retries and hedges of the failsafe plugin,
   * cache, consensus, integrity...), by slot (core/slots.ts, the shared ones in
   * the owning plugin's contract, `svc/plugins/<name>`); created on first write.
   */
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
  return {
    attempts: [],
    upstreamAttempts: 0,
    networkAttempts: 0,
    startedAt: performance.now(),
    durationMs: 0,
    method,
    routed: false,
  };
}

/** Everything about one JSON-RPC call, built by the server and passed through every stage. */
export interface CallContext {
  /** Project serving the call. */
  project: Project;
  /** Network serving the call. */
  network: Network;
  /** The call as the client sent it (params may be rewritten by interpolation). */
  request: ParsedCall;
  /** Directives resolved for this call (spec §2.8). */
  directives: Directives;
  /** Caller identity, when an auth plugin ran. */
  identity?: Identity;
  /** HTTP facts; synthetic for internal calls. */
  http: HttpRequestInfo;
  /** Aborted at the call deadline (`server.maxTimeout`) or when the client leaves. */
  signal: AbortSignal;
  /** Absolute deadline, `Date.now()` ms. */
  deadline: number;
  /** What happened; written by plugins. */
  record: ExecutionRecord;
  /** Internal traffic (probes, state polls): not client-visible, not counted as client calls. */
  internal: boolean;
  /**
   * Per-call scratch space for plugins, keyed by a symbol the plugin owns (private
   * state stays inside the plugin).
   */
  state: Map<symbol, unknown>;
}

/** Upstream choice passed to an attempt. */
export type { Upstream };
