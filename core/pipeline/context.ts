/**
 * Per-call state (docs/architecture.md): every JSON-RPC call, each element of a batch, gets one
 * {@link CallContext}. Plugins write to its {@link ExecutionRecord}; the headers plugin only reads it.
 */
import { Slot } from '../registry/slots.ts';
import type { ParsedCall } from '../wire/jsonrpc.ts';
import type { Directives } from '../../config/types.ts';
import type { ExecutionRecord, Finality, HttpRequestInfo, Identity } from '../wire/records.ts';
import type { Network } from '../registry/project.ts';
import type { Project } from '../registry/project.ts';
import type { Upstream } from '../registry/upstream.ts';

export type { Directives } from '../../config/types.ts';
export {
  newExecutionRecord,
  type AttemptOutcome,
  type AttemptReason,
  type AttemptRecord,
  type ExecutionRecord,
  type Finality,
  type HttpRequestInfo,
  type Identity,
} from '../wire/records.ts';

/**
 * The call's finality (slot `evm.finality`): written by the evm-state plugin before anything
 * matches on it (`DirectiveStage.FINALITY`), read by failsafe matching, metrics and caching
 * (a feature's field lives in a slot, not in the core's `CallContext`).
 */
export const FINALITY = new Slot<Finality>('evm.finality', 'unknown');

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
