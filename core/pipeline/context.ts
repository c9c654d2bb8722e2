/** Per-call state: every JSON-RPC call (each batch element) gets one {@link CallContext}; plugins write its {@link ExecutionRecord}. */
import { Slot } from '../registry/slots.ts';
import type { ParsedCall } from '../wire/jsonrpc.ts';
import type { Directives } from '../../config/types.ts';
import type { ExecutionRecord, Finality, HttpRequestInfo, Identity } from '../wire/records.ts';
import type { Network, Project } from '../registry/project.ts';
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

/** The call's finality: a slot, since it is evm-state's field (set at `DirectiveStage.FINALITY`), read by failsafe, metrics and cache. */
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
  /** Per-call scratch space for plugins, keyed by a symbol the plugin owns. */
  state: Map<symbol, unknown>;
}

/** Upstream choice passed to an attempt. */
export type { Upstream };
