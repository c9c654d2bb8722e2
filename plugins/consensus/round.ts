/**
 * One consensus round: a slot per upstream, each running the inner attempt
 * chain (retry and hedge) on its own upstream only; votes collected as slots end; the round
 * stops once the outcome cannot change ({@link isSettled}), after a bounded wait for larger
 * answers with `preferLargerResponses`, or when every slot ended.
 */
import { type AttemptHandler, type CallContext, type Leg, type RpcResult, type Upstream, UpstreamCursor } from 'svc-proxy/plugin';
import { ErrUpstreamsExhausted, isPassThrough, type SvcError } from 'svc-proxy/plugin/errors';
import { canonicalHash, type IgnorePaths, isEmptyResult } from 'svc-proxy/util';
import { isSettled, type Vote } from './decide.ts';
import type { ConsensusConfig } from './schema.ts';

/** Shortest and longest wait for running slots once a group won (`preferLargerResponses`), ms. */
const LARGER_WAIT_MIN_MS = 5;
const LARGER_WAIT_MAX_MS = 1000;

/** What a round collected. */
export interface RoundVotes {
  votes: Vote[];
  /** Errors of slots that did not vote. */
  infraErrors: SvcError[];
}

/**
 * The error a slot ended with, unwrapped to what voted: one upstream per slot, so an exhausted
 * slot has that upstream's own errors as causes (the last one is its final answer).
 */
function slotError(e: unknown): SvcError {
  let err = e as SvcError;
  for (let i = 0; i < 8 && err instanceof ErrUpstreamsExhausted && err.causes.length > 0; i++) err = err.causes[err.causes.length - 1] as SvcError;
  return err;
}

/** Size of an answer's JSON, bytes. */
function sizeOf(r: RpcResult): number {
  const w = r.wire();
  return typeof w === 'string' ? Buffer.byteLength(w) : w.length;
}

/**
 * A vote for an answer, or for an error that is a fact about the chain (reverts, invalid
 * params, unsupported method, missing data hash as `jsonrpc:<code>`); undefined for an
 * infrastructure failure, which does not vote.
 */
export function voteOf(upstreamId: string, outcome: { result?: RpcResult; error?: unknown }, ignore: IgnorePaths): Vote | undefined {
  if (outcome.result) {
    const value = outcome.result.result;
    return { upstreamId, hash: canonicalHash(value, ignore), result: outcome.result, empty: isEmptyResult(value), size: sizeOf(outcome.result) };
  }
  const err = slotError(outcome.error);
  if (!isPassThrough(err)) return undefined;
  return { upstreamId, hash: `jsonrpc:${err.code}`, error: err, empty: true, size: 0 };
}

/** How a round runs besides its config. */
export interface RoundOptions {
  /** Await every slot (no early settling): `preferHighestValueFor` for the call's method. */
  waitAll?: boolean;
  /** Slots still running when the round is decided are left running (`fireAndForget`). */
  fireAndForget?: boolean;
  /**
   * Whether the votes so far may end the round early (`requiredParticipants` winner quotas: a
   * winner short of them may still be completed by a running slot); default yes.
   */
  final?: (votes: readonly Vote[]) => boolean;
}

/**
 * The signal of a slot left running after its round (`fireAndForget`): detached from the
 * client's leg, ended only by the call's deadline.
 */
function detachedSignal(ctx: CallContext): AbortSignal {
  return AbortSignal.timeout(Math.max(1, ctx.deadline - Date.now()));
}

/**
 * Runs the slots of one round and collects their votes.
 * @param upstreams one slot each, in selection order
 * @param inner the chain inside consensus (retry( hedge( sweep )))
 * @param opts `waitAll` (every slot is awaited), `fireAndForget` (running slots are not aborted)
 * @returns the votes and infrastructure errors; slots still running when the round settles are
 *   aborted, unless `fireAndForget`
 */
export function runSlots(
  ctx: CallContext,
  leg: Leg,
  upstreams: readonly Upstream[],
  inner: AttemptHandler,
  cfg: ConsensusConfig,
  ignore: IgnorePaths,
  opts: RoundOptions = {},
): Promise<RoundVotes> {
  const votes: Vote[] = [];
  const infraErrors: SvcError[] = [];
  const controllers = upstreams.map(() => new AbortController());
  const detached = opts.fireAndForget ? detachedSignal(ctx) : undefined;
  // Fire-and-forget slots outlive the client: only the call's deadline ends them. The round itself
  // still ends with the client's leg (resolving with the votes so far).
  let finishEarly: (() => void) | undefined;
  const onAbort = () => (detached ? finishEarly?.() : controllers.forEach((c) => c.abort(leg.signal.reason)));
  if (detached) detached.addEventListener('abort', () => controllers.forEach((c) => c.abort(detached.reason)), { once: true });
  leg.signal.addEventListener('abort', onAbort, { once: true });
  const started = performance.now();
  let running = upstreams.length;
  return new Promise<RoundVotes>((resolve) => {
    let done = false;
    let waitTimer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done) return;
      done = true;
      if (waitTimer) clearTimeout(waitTimer);
      leg.signal.removeEventListener('abort', onAbort);
      // Slots still running lose: their attempts end as cancelled (unless fire-and-forget).
      if (!detached) for (const c of controllers) if (!c.signal.aborted) c.abort();
      resolve({ votes: [...votes], infraErrors: [...infraErrors] });
    };
    finishEarly = finish;
    const settle = (u: Upstream, outcome: { result?: RpcResult; error?: unknown }) => {
      running--;
      if (done) return;
      const v = voteOf(u.id, outcome, ignore);
      if (v) votes.push(v);
      else infraErrors.push(slotError(outcome.error));
      if (running === 0) return finish();
      if (opts.waitAll || !isSettled(votes, running, cfg) || (opts.final && !opts.final(votes))) return;
      if (!cfg.preferLargerResponses) return finish();
      // A larger identical answer may still come: wait about as long as the round took so far.
      if (!waitTimer) {
        const wait = Math.min(LARGER_WAIT_MAX_MS, Math.max(LARGER_WAIT_MIN_MS, performance.now() - started));
        waitTimer = setTimeout(finish, wait);
      }
    };
    upstreams.forEach((u, i) => {
      const slot: Leg = { cursor: new UpstreamCursor([u]), reason: 'consensus_slot', signal: (controllers[i] as AbortController).signal };
      inner(ctx, slot).then(
        (result) => settle(u, { result }),
        (error: unknown) => settle(u, { error }),
      );
    });
  });
}

/**
 * `eth_sendRawTransaction` under consensus: sent through every slot, the first non-empty answer
 * wins at once (no threshold, as in eRPC). When none succeeds the slots' errors are thrown
 * together, so the evm-methods idempotent-broadcast wrapper outside finds an "already known"
 * among them and answers the transaction's hash (the EVM issue's idempotency rule).
 */
export function broadcast(ctx: CallContext, leg: Leg, upstreams: readonly Upstream[], inner: AttemptHandler, fireAndForget = false): Promise<RpcResult> {
  // Fire-and-forget: every send runs to its end even when the client is gone (until the deadline).
  const signal = fireAndForget ? detachedSignal(ctx) : leg.signal;
  return new Promise<RpcResult>((resolve, reject) => {
    let pending = upstreams.length;
    let won = false;
    let emptyAnswer: RpcResult | undefined;
    const errors: SvcError[] = [];
    const ended = () => {
      if (won || --pending > 0) return;
      if (emptyAnswer) resolve(emptyAnswer);
      else reject(new ErrUpstreamsExhausted(errors));
    };
    for (const u of upstreams) {
      const slot: Leg = { cursor: new UpstreamCursor([u]), reason: 'consensus_slot', signal };
      inner(ctx, slot).then(
        (r) => {
          if (!won && !isEmptyResult(r.result)) {
            won = true;
            return resolve(r);
          }
          emptyAnswer ??= r;
          ended();
        },
        (e: unknown) => {
          errors.push(slotError(e));
          ended();
        },
      );
    }
  });
}
