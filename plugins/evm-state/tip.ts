/**
 * Pure parts of the evm-state plugin's request-path checks (issue #4 items 4 and 5, spec §2.8
 * #7 and #9): the errors that re-route a call, the block-number readers, the tip comparison and
 * the block-availability filter. No hooks here; `index.ts` taps them in.
 */
import { ErrEndpointMissingData } from '../../core/errors.ts';
import { parseBlockNumber, refOf } from '../../core/evm/blocks.ts';
import type { NetworkChainState, UpstreamChainState } from '../../core/evm/state.ts';
import type { Upstream } from '../../core/registry/upstream.ts';

/**
 * An upstream answered `eth_blockNumber` or a `latest`/`finalized` `eth_getBlockByNumber` with a
 * block lower than the network's highest known one (spec §2.8 #7). Retryable (JSON-RPC -32014,
 * like {@link ErrEndpointMissingData}, which it extends): the sweep moves on to the next upstream.
 * Clients never see it: it is only raised for an otherwise-valid answer, and when no upstream
 * reaches the head the highest answer seen is returned instead of an error.
 */
export class ErrUpstreamBlockBehind extends ErrEndpointMissingData {}

/**
 * An upstream answered `null` to a tag-based `eth_getBlockByNumber` (spec §2.8 #9). Retryable
 * (-32014, extends {@link ErrEndpointMissingData}): the sweep moves on to the next upstream.
 * Turned off per call by the `enforce-non-null-tagged-blocks: false` directive.
 */
export class ErrUpstreamNullTaggedBlock extends ErrEndpointMissingData {}

/**
 * The block tag of an `eth_getBlockByNumber` call's first param (`latest`, `finalized`,
 * `safe`, `pending`, `earliest`), or undefined for a concrete number, a hash or a malformed call.
 */
export function blockTagOf(params: unknown): string | undefined {
  const p0: unknown = Array.isArray(params) ? params[0] : undefined;
  const ref = refOf(p0);
  return ref?.kind === 'tag' ? ref.tag : undefined;
}

/**
 * The concrete block number of an `eth_getBlockByNumber` call's first param (hex quantity), or
 * undefined for a tag, a hash or a malformed call.
 */
export function blockNumberParamOf(params: unknown): number | undefined {
  const p0: unknown = Array.isArray(params) ? params[0] : undefined;
  const ref = refOf(p0);
  return ref?.kind === 'number' ? ref.number : undefined;
}

/** The `number` field of a block object (`eth_getBlockByNumber` result), or undefined. */
export function blockNumberOfBlock(block: unknown): number | undefined {
  if (block === null || typeof block !== 'object') return undefined;
  return parseBlockNumber((block as { number?: unknown }).number);
}

/**
 * How far an answer is behind the network's known head (spec §2.8 #7).
 * @param answer block number the upstream answered
 * @param highest the network's highest known latest (or finalized) block; 0 = unknown
 * @returns the shortfall in blocks (> 0) when the answer is behind, else undefined
 */
export function behindBy(answer: number, highest: number): number | undefined {
  return highest > 0 && answer < highest ? highest - answer : undefined;
}

/**
 * An upstream's known latest block, or undefined when it was never observed (a node genuinely
 * at genesis counts as known once a poll read its latest block).
 */
export function knownLatestOf(s: UpstreamChainState | undefined): number | undefined {
  if (!s) return undefined;
  return s.latest > 0 || s.lastPollAt > 0 ? s.latest : undefined;
}

/**
 * Block availability (issue #4 item 5): drops the candidates whose known latest block is below
 * `block`, but only while at least one candidate is known to cover it. Upstreams never observed
 * ({@link knownLatestOf}) are kept: they may well have it. Never returns an empty list for a non-empty input:
 * when no candidate is known to cover the block, the input is returned unchanged (the poller may
 * simply not have seen the new head yet).
 * @param candidates the ordered candidates of the call
 * @param block the highest concrete block the call reads
 * @param state the network's chain state
 */
export function filterByAvailability(candidates: Upstream[], block: number, state: NetworkChainState): Upstream[] {
  let covered = false;
  let skip = 0;
  for (const u of candidates) {
    const latest = knownLatestOf(state.peek(u));
    if (latest === undefined) continue;
    if (latest >= block) covered = true;
    else skip++;
  }
  if (!covered || skip === 0) return candidates;
  return candidates.filter((u) => {
    const latest = knownLatestOf(state.peek(u));
    return latest === undefined || latest >= block;
  });
}

/**
 * Reads an `eth_syncing` answer: `false` means synced; `true` or a progress object means
 * syncing; the `{Ok: <bool>}` wrapper some clients send is unwrapped.
 * @returns true while syncing, false when synced, undefined for an answer it cannot read
 */
export function syncingOf(result: unknown): boolean | undefined {
  if (typeof result === 'boolean') return result;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return undefined;
  const o = result as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1 && (keys[0] === 'Ok' || keys[0] === 'ok') && typeof o[keys[0]] === 'boolean') return o[keys[0]] as boolean;
  // A progress object (startingBlock/currentBlock/highestBlock...) means syncing.
  return keys.length > 0 ? true : undefined;
}
