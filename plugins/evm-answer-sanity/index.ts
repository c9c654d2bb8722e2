/**
 * evm-answer-sanity plugin (spec §7, answers that cannot be right are upstream faults).
 * Taps `validate` (stage {@link ANSWER_SANITY_STAGE}) to turn away two answers no healthy node
 * gives, so the sweep moves the call to another upstream:
 * - `null` from a state read ({@link NEVER_NULL_METHODS}) at a block the network has: a node
 *   answers `0x0`/`0x` for an account that does not exist and an error for a block it lacks,
 *   never `null`. Charged to the upstream (`ErrEndpointContentValidation`, spec §7).
 * - an empty `eth_getLogs` by `blockHash` from an upstream whose head is below that block (or,
 *   when the block's number is unknown, an upstream lagging the network head): the node cannot
 *   know the block yet. Not charged (`ErrEndpointMissingData`, like any lagging node).
 * Unlike `retry-empty` these run for every call: no client directive is needed to be protected
 * from one upstream's impossible answer. When every upstream answers so, the call fails with the
 * sweep's exhausted error naming these causes rather than serving an answer known to be wrong.
 */
import { type CallContext, definePlugin, type Plugin, type PluginHost, type RpcResult, type Upstream, ValidateStage } from 'svc-proxy/plugin';
import { ErrEndpointContentValidation, ErrEndpointMissingData } from 'svc-proxy/plugin/errors';
import type { NetworkChainState } from 'svc-proxy/plugins/evm-state';
import { blockRefOf } from 'svc-proxy/util';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

/**
 * State reads that never answer `null` at a block the network has (spec §7): a missing account
 * reads as `0x0` balance and nonce, `0x` code and a zero storage word.
 */
export const NEVER_NULL_METHODS: ReadonlySet<string> = new Set(['eth_getBalance', 'eth_getTransactionCount', 'eth_getCode', 'eth_getStorageAt']);

/** Stage of the `validate` tap: after a null tagged block (0), before `retry-empty` (100) and the tip check (1000). */
export const ANSWER_SANITY_STAGE = ValidateStage.ANSWER_SANITY;

/**
 * How many recent heights below the network head are searched for a block hash (the chain
 * state keeps hashes of recent heights only). Bounds the search to a fixed cost, paid only on a
 * null or empty answer, never on a normal one.
 */
export const HASH_LOOKBACK_BLOCKS = 256;

/**
 * The number of a block the network knows by hash, from the chain state's recent hashes.
 * @param chain the network's chain state
 * @param hash block hash, any case
 * @returns the block number, or undefined when the hash is not among the last {@link HASH_LOOKBACK_BLOCKS} heights
 */
export function numberOfKnownHash(chain: NetworkChainState, hash: string): number | undefined {
  const h = hash.toLowerCase();
  const top = chain.highestLatest;
  for (let n = top; n >= 0 && n > top - HASH_LOOKBACK_BLOCKS; n--) {
    if (chain.hashAt(n)?.toLowerCase() === h) return n;
  }
  return undefined;
}

/**
 * Whether the network has the block a call names: a tag (other than `pending`, whose state a
 * node may legitimately lack), a number at or below the network head, or a hash among the
 * recent hashes. With an unknown head only tags are known.
 * @param method JSON-RPC method
 * @param params request params (after interpolation)
 * @param chain the network's chain state
 */
export function isKnownBlock(method: string, params: unknown, chain: NetworkChainState): boolean {
  const ref = blockRefOf(method, params);
  if (!ref) return false;
  if (ref.kind === 'tag') return ref.tag !== 'pending';
  if (ref.kind === 'number') return chain.highestLatest > 0 && ref.number <= chain.highestLatest;
  if (ref.kind === 'hash') return numberOfKnownHash(chain, ref.hash) !== undefined;
  return false;
}

/**
 * Whether an empty `eth_getLogs` by block hash came from an upstream that cannot know that block:
 * its head is below the block's number (known from the recent hashes), or, with the number
 * unknown, below the network head. An upstream whose head is unknown is given the benefit of the
 * doubt (nothing to judge it by).
 * @param params request params
 * @param chain the network's chain state
 * @param u the upstream that answered
 */
export function isBlindLogsAnswer(params: unknown, chain: NetworkChainState, u: Upstream): boolean {
  const f = Array.isArray(params) ? (params[0] as { blockHash?: unknown } | undefined) : undefined;
  if (!f || typeof f !== 'object' || typeof f.blockHash !== 'string') return false;
  const head = chain.peek(u)?.latest ?? 0;
  if (!(head > 0)) return false;
  const n = numberOfKnownHash(chain, f.blockHash);
  return n !== undefined ? head < n : head < chain.highestLatest;
}

/**
 * Whether a state read names a block by a hash the chain state does not hold while the upstream
 * that answered is behind the network head (it may not have that block yet).
 * @param method JSON-RPC method
 * @param params request params
 * @param chain the network's chain state
 * @param u the upstream that answered
 */
export function isLaggingOnUnknownHash(method: string, params: unknown, chain: NetworkChainState, u: Upstream): boolean {
  const ref = blockRefOf(method, params);
  if (ref?.kind !== 'hash') return false;
  const head = chain.peek(u)?.latest ?? 0;
  return head > 0 && head < chain.highestLatest;
}

/**
 * Why an answer cannot be right, as the error that moves the call on, or undefined when it may be.
 * @param ctx the call
 * @param r the upstream's answer
 * @param u the upstream that answered
 * @param chain the network's chain state
 */
export function impossibleAnswerError(
  ctx: CallContext,
  r: RpcResult,
  u: Upstream,
  chain: NetworkChainState,
): ErrEndpointContentValidation | ErrEndpointMissingData | undefined {
  const method = ctx.request.method;
  if (NEVER_NULL_METHODS.has(method)) {
    if (r.result !== null) return undefined;
    if (!isKnownBlock(method, ctx.request.params, chain)) {
      // A hash svc has not recorded (its polls skip blocks): a null from an upstream behind the
      // network head says only that it lags, as an empty eth_getLogs by hash does.
      if (!isLaggingOnUnknownHash(method, ctx.request.params, chain, u)) return undefined;
      return new ErrEndpointMissingData(`upstream ${u.id} answered null for ${method} at a block hash it may not have reached; trying another upstream`, {
        details: { upstream: u.id, reason: 'null_beyond_head' },
      });
    }
    return new ErrEndpointContentValidation(`upstream ${u.id} answered null for ${method} at a block the network has; trying another upstream`, {
      details: { upstream: u.id, reason: 'null_state' },
    });
  }
  if (method === 'eth_getLogs') {
    const v = r.result;
    if (!Array.isArray(v) || v.length > 0 || !isBlindLogsAnswer(ctx.request.params, chain, u)) return undefined;
    return new ErrEndpointMissingData(`upstream ${u.id} answered no logs for a block beyond its head; trying another upstream`, {
      details: { upstream: u.id, reason: 'logs_beyond_head' },
    });
  }
  return undefined;
}

/**
 * Creates the evm-answer-sanity plugin: impossible `null` state reads and blind empty
 * `eth_getLogs` by block hash move the call to another upstream (see the module comment).
 * Cost on a normal answer: one set lookup and one method compare.
 * @returns a plugin tapping `validate`
 */
export function evmAnswerSanityPlugin(): Plugin {
  return definePlugin({
    name: 'evm-answer-sanity',
    apply(host: PluginHost) {
      host.hooks.validate.tap({ name: 'evm-answer-sanity', stage: ANSWER_SANITY_STAGE }, (ctx: CallContext, r: RpcResult, u: Upstream) => {
        const m = ctx.request.method;
        if (m !== 'eth_getLogs' && !NEVER_NULL_METHODS.has(m)) return undefined;
        return impossibleAnswerError(ctx, r, u, networkChainState(host, ctx.network));
      });
    },
  });
}
