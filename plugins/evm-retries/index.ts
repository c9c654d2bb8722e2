/**
 * evm-retries plugin (spec §2.8 #1 `retry-empty`, #2 `retry-pending`, §6 `svc_upstream_request_retries_total`).
 * Declares the `retry-empty` and `retry-pending` directives ({@link RETRY_EMPTY}, {@link RETRY_PENDING}).
 * Taps: `validate` (stage {@link RETRY_VALIDATE_STAGE}: a null/empty answer, or a pending
 * transaction, from a method where that means "this node does not have it yet" becomes a
 * retryable `ErrEndpointMissingData`, so the sweep moves on to the next upstream) and `call`
 * (stage {@link RETRY_KEEP_STAGE}: when no upstream had better data, the kept empty/pending
 * answer is the call's answer instead of an exhausted error; counts the retries).
 * Both rules are capped per call by `failsafe[].retry.emptyResultMaxAttempts` (default 2).
 */
import {
  type AttemptRecord,
  type CallContext,
  type CallHandler,
  CallStage,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  type RpcResult,
  type Upstream,
  ValidateStage,
} from 'svc-proxy/plugin';
import { networkChainState, type NetworkChainState } from 'svc-proxy/plugins/evm-state';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import { ErrEndpointMissingData, SvcError } from 'svc-proxy/plugin/errors';
import { FAILSAFE_ENTRY } from 'svc-proxy/plugins/failsafe';
import { blockRefOf } from 'svc-proxy/util';
import { Counter } from 'prom-client';
import { emptyResultConfidenceSchema, isTruthfulEmptyFor } from './confidence.ts';

export {
  DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE,
  emptyResultConfidenceOf,
  emptyResultConfidenceSchema,
  isTruthfulEmpty,
  isTruthfulEmptyFor,
  maxRetryableBlockDistanceOf,
  type EmptyResultConfidence,
} from './confidence.ts';

/** Directive `retry-empty` (spec §2.8 #1): retry null/empty answers on another upstream. */
export const RETRY_EMPTY = new Directive<boolean>({
  field: 'retryEmpty',
  query: 'retry-empty',
  header: 'X-SVC-Retry-Empty',
  type: 'bool',
  fallback: false,
  spec: '#1',
  description: 'retry null/empty results on another upstream (default false)',
});

/** Directive `retry-pending` (spec §2.8 #2): retry pending-transaction lookups on another upstream. */
export const RETRY_PENDING = new Directive<boolean>({
  field: 'retryPending',
  query: 'retry-pending',
  header: 'X-SVC-Retry-Pending',
  type: 'bool',
  fallback: false,
  spec: '#2',
  description: 'retry pending-transaction lookups (default false)',
});

/**
 * Methods whose null/empty answer means "this node does not have it yet": retried on
 * another upstream under `retry-empty`. Methods where empty is a normal answer (`eth_getLogs`,
 * `eth_call`, `eth_getCode`...) are deliberately absent.
 */
export const EMPTY_RETRY_METHODS: ReadonlySet<string> = new Set([
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getTransactionByHash',
  'eth_getTransactionReceipt',
  'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex',
  'debug_traceTransaction',
  'trace_transaction',
  'trace_block',
]);

/** The four transaction lookups retried while the transaction is pending (spec §2.8 #2). */
export const PENDING_RETRY_METHODS: ReadonlySet<string> = new Set([
  'eth_getTransactionReceipt',
  'eth_getTransactionByHash',
  'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex',
]);

/**
 * Tries per call when no failsafe entry sets `retry.emptyResultMaxAttempts`, first try
 * included (eRPC HEAD default; also applies when no retry policy is configured).
 */
export const DEFAULT_EMPTY_RESULT_MAX_ATTEMPTS = 2;

/**
 * Stage of the `call` wrapper that returns a kept empty/pending answer: inside cache (700) and
 * tip enforcement (650), so those see the final answer; outside interpolation (600).
 */
export const RETRY_KEEP_STAGE = CallStage.RETRY_KEEP;

/**
 * Stage of the `validate` tap: after validators at the default stage 0, so stricter checks
 * (a null tagged block is an error, integrity) bail first and their errors win.
 */
export const RETRY_VALIDATE_STAGE = ValidateStage.EMPTY_RESULT;

/** `reason` label values of `svc_upstream_request_retries_total` written by this plugin (spec §6). */
export type RetryReason = 'empty_result' | 'pending_tx';

/** Name of the shared retry counter (spec §6). */
export const UPSTREAM_RETRIES_METRIC = 'svc_upstream_request_retries_total';

/** Labels of {@link UPSTREAM_RETRIES_METRIC}: `reason` (spec §6) plus project, network and method (`category`). */
export type UpstreamRetriesLabel = 'project' | 'network' | 'category' | 'reason';

/**
 * The `svc_upstream_request_retries_total` counter of a host, created on first use in
 * `host.metrics`. Other plugins that retry for their own reasons (integrity validation)
 * should take it from here rather than register the name a second time (prom-client throws
 * on a duplicate name).
 * @param host the plugin host whose registry holds the counter
 * @returns the counter, labels `project`, `network`, `category` (method) and `reason`
 */
export function upstreamRetriesCounter(host: PluginHost): Counter<UpstreamRetriesLabel> {
  const existing = host.metrics.getSingleMetric(UPSTREAM_RETRIES_METRIC);
  if (existing) return existing as Counter<UpstreamRetriesLabel>;
  return new Counter({
    name: UPSTREAM_RETRIES_METRIC,
    help: 'Calls retried on another upstream because an answer was not usable yet, by reason (empty_result, pending_tx, integrity_validation)',
    labelNames: ['project', 'network', 'category', 'reason'],
    registers: [host.metrics],
  });
}

/**
 * Whether a transaction lookup result describes a pending transaction: a non-empty object
 * whose `blockNumber` is null or absent (anvil, geth and reth answer `blockNumber: null`,
 * `blockHash: null` for a mempool transaction). A null result is "empty", not "pending".
 * @param result the parsed `result` of the answer
 */
export function isPendingTransaction(result: unknown): boolean {
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return false;
  const o = result as { blockNumber?: unknown };
  if (Object.keys(o).length === 0) return false;
  return o.blockNumber === null || o.blockNumber === undefined;
}

/**
 * The per-call cap of empty/pending tries, first try included: the matched failsafe entry's
 * `retry.emptyResultMaxAttempts`, else {@link DEFAULT_EMPTY_RESULT_MAX_ATTEMPTS}. With a cap of
 * N, the first N-1 empty/pending answers are rejected and the N-th is accepted as the answer.
 * @param ctx the call (its failsafe entry is matched by the failsafe plugin, when applied)
 */
export function emptyResultMaxAttemptsOf(ctx: CallContext): number {
  return FAILSAFE_ENTRY.get(ctx)?.retry?.emptyResultMaxAttempts ?? DEFAULT_EMPTY_RESULT_MAX_ATTEMPTS;
}

/** An answer this plugin turned away, kept as the call's fallback answer. */
interface KeptAnswer {
  result: RpcResult;
  upstream: Upstream;
  /** The attempt that produced it (its trace segment becomes `:won` when it is served). */
  attempt?: AttemptRecord;
  reason: RetryReason;
}

/** One rejection, counted in the metric once another attempt followed it. */
interface Rejection {
  reason: RetryReason;
  /** `ctx.record.attempts.length` when it was rejected. */
  attemptsSeen: number;
  counted: boolean;
}

/** Per-call state of this plugin (in `ctx.state` under a private symbol). */
interface RetryState {
  rejections: Rejection[];
  kept?: KeptAnswer;
}

const STATE = Symbol('svc.evm-retries');

/** Errors created by this plugin (never shown as such to a client when a kept answer exists). */
const OWN_ERRORS = new WeakSet<SvcError>();

/**
 * Whether an error was created by the evm-retries `validate` tap (an empty or pending answer
 * turned into a retry).
 * @param err any error
 */
export function isRetryRejection(err: unknown): boolean {
  return err instanceof SvcError && OWN_ERRORS.has(err);
}

function stateOf(ctx: CallContext): RetryState {
  let s = ctx.state.get(STATE) as RetryState | undefined;
  if (!s) {
    s = { rejections: [] };
    ctx.state.set(STATE, s);
  }
  return s;
}

/** The in-flight attempt of an upstream in the call's trace (the one being validated). */
function currentAttempt(ctx: CallContext, u: Upstream): AttemptRecord | undefined {
  const list = ctx.record.attempts;
  for (let i = list.length - 1; i >= 0; i--) {
    const a = list[i] as AttemptRecord;
    if (a.upstreamId === u.id && a.outcome === 'pending') return a;
  }
  return undefined;
}

/**
 * Why an answer should be retried elsewhere, or undefined when it is usable as it is.
 * @param ctx the call (directives, method, params)
 * @param r the upstream's answer
 * @param chain where the network's highest known latest block is read, only for an empty answer
 */
export function retryReasonOf(ctx: CallContext, r: RpcResult, chain: (network: Network) => NetworkChainState): RetryReason | undefined {
  const d = ctx.directives;
  const method = ctx.request.method;
  if (RETRY_PENDING.get(d) && PENDING_RETRY_METHODS.has(method) && isPendingTransaction(r.result)) {
    // A lookup in the `pending` block is pending by definition: retrying cannot change it.
    const ref = blockRefOf(method, ctx.request.params);
    if (!(ref?.kind === 'tag' && ref.tag === 'pending')) return 'pending_tx';
  }
  if (RETRY_EMPTY.get(d) && EMPTY_RETRY_METHODS.has(method) && r.isEmpty()) {
    if (!isTruthfulEmptyFor(method, ctx.request.params, chain(ctx.network), ctx.network)) return 'empty_result';
  }
  return undefined;
}

/** Makes a kept answer the call's answer and fixes the trace (`:won`, winning upstream). */
function serveKept(ctx: CallContext, kept: KeptAnswer): RpcResult {
  for (const a of ctx.record.attempts) a.won = false;
  if (kept.attempt) {
    kept.attempt.won = true;
    kept.attempt.outcome = 'success';
    delete kept.attempt.error;
  }
  ctx.record.upstream = kept.upstream.id;
  kept.result.upstreamId ??= kept.upstream.id;
  return kept.result;
}

/**
 * Creates the evm-retries plugin (`retry-empty` and `retry-pending`, spec §2.8 #1 #2).
 *
 * Rules, per call:
 * - With directive `retryEmpty` true, a null/empty answer (`RpcResult.isEmpty()`) of a method in
 *   {@link EMPTY_RETRY_METHODS} is rejected with a retryable `ErrEndpointMissingData`, so the
 *   sweep tries the next upstream. Not for a concrete block more than
 *   `evm.maxRetryableBlockDistance` (default 128) beyond the network's highest known block: that
 *   empty answer is truthful. With `evm.emptyResultConfidence: finalizedBlock`, an empty answer
 *   for a concrete block above the highest finalized block is truthful too.
 * - With directive `retryPending` true, a pending transaction (null `blockNumber`) from a method
 *   in {@link PENDING_RETRY_METHODS} is rejected the same way (not for the `pending` block tag).
 * - The cap is shared by both rules: `failsafe[].retry.emptyResultMaxAttempts` (default 2) tries
 *   including the first, so at most N-1 rejections; the N-th such answer is accepted.
 * - When the call then fails with a retryable error (every upstream empty, or the others
 *   failing) the last rejected answer is served instead (a pending answer is preferred over an
 *   empty one), and its trace segment is marked `success` and `:won`. When the call ends with
 *   an empty answer but a pending one was rejected earlier, the pending one is served.
 * - Every rejection followed by another upstream attempt counts once in
 *   `svc_upstream_request_retries_total{reason="empty_result"|"pending_tx"}`.
 * @returns a plugin declaring `retry-empty` and `retry-pending` (and their `directiveDefaults`
 *   keys), owning `networks[].evm.emptyResultConfidence`, tapping `validate` and `call`
 */
export function evmRetriesPlugin(): Plugin {
  return definePlugin({
    name: 'evm-retries',
    // Reads the matched failsafe entry's `retry.emptyResultMaxAttempts` (its per-call slot).
    dependsOn: ['failsafe'],
    schema: { directiveDefaults: directiveDefaultsSchema(RETRY_EMPTY, RETRY_PENDING), networkEvm: { emptyResultConfidence: emptyResultConfidenceSchema } },
    apply(host: PluginHost) {
      declareDirectives(host, 'evm-retries', RETRY_EMPTY, RETRY_PENDING);
      const counter = upstreamRetriesCounter(host);

      const chainOf = (n: Network): NetworkChainState => networkChainState(host, n);
      host.hooks.validate.tap({ name: 'evm-retries', stage: RETRY_VALIDATE_STAGE }, (ctx: CallContext, r: RpcResult, u: Upstream) => {
        if (!RETRY_EMPTY.get(ctx.directives) && !RETRY_PENDING.get(ctx.directives)) return undefined;
        const reason = retryReasonOf(ctx, r, chainOf);
        if (!reason) return undefined;
        const st = stateOf(ctx);
        // Keep the answer as the fallback; a pending transaction says more than a null.
        if (reason === 'pending_tx' || st.kept?.reason !== 'pending_tx') st.kept = { result: r, upstream: u, attempt: currentAttempt(ctx, u), reason };
        if (st.rejections.length >= emptyResultMaxAttemptsOf(ctx) - 1) return undefined;
        st.rejections.push({ reason, attemptsSeen: ctx.record.attempts.length, counted: false });
        const what = reason === 'empty_result' ? 'an empty result' : 'a pending transaction';
        const err = new ErrEndpointMissingData(
          `upstream ${u.id} answered ${what} for ${ctx.request.method}; retrying on another upstream (${reason === 'empty_result' ? 'retry-empty' : 'retry-pending'})`,
          {
            details: { upstream: u.id, reason },
          },
        );
        OWN_ERRORS.add(err);
        return err;
      });

      const count = (ctx: CallContext, st: RetryState | undefined): void => {
        if (!st) return;
        for (const rej of st.rejections) {
          if (rej.counted || ctx.record.attempts.length <= rej.attemptsSeen) continue;
          rej.counted = true;
          counter.inc({ project: ctx.project.id, network: ctx.network.id, category: host.methodLabel.value(ctx.request.method), reason: rej.reason });
        }
      };

      host.hooks.call.tap({ name: 'evm-retries', stage: RETRY_KEEP_STAGE }, (inner: CallHandler): CallHandler => {
        const guarded = async (ctx: CallContext): Promise<RpcResult> => {
          try {
            const r = await inner(ctx);
            const kept = (ctx.state.get(STATE) as RetryState | undefined)?.kept;
            if (kept?.reason === 'pending_tx' && kept.result !== r && r.isEmpty()) return serveKept(ctx, kept);
            return r;
          } catch (e) {
            const kept = (ctx.state.get(STATE) as RetryState | undefined)?.kept;
            if (kept && e instanceof SvcError && e.retryable && !ctx.signal.aborted) return serveKept(ctx, kept);
            throw e;
          } finally {
            count(ctx, ctx.state.get(STATE) as RetryState | undefined);
          }
        };
        // Calls without either directive pay one property check, no extra promise.
        return (ctx) => (RETRY_EMPTY.get(ctx.directives) || RETRY_PENDING.get(ctx.directives) ? guarded(ctx) : inner(ctx));
      });
    },
  });
}
