/**
 * `networks[].evm.emptyResultConfidence` (eRPC's key) of the evm-retries plugin: when an empty
 * answer to a concrete block is truthful (served as it is) rather than "not there yet" (retried
 * under `retry-empty`).
 */
import { Type } from '@sinclair/typebox';
import type { Network } from 'svc-proxy/plugin';
import type { NetworkChainState } from 'svc-proxy/plugins/evm-state';
import { blockRefOf } from 'svc-proxy/util';

/**
 * Blocks beyond the network head within which an empty answer is still retried, when the
 * network does not set `evm.maxRetryableBlockDistance` (a key owned by the evm-state plugin).
 */
export const DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE = 128;

/**
 * Whether an empty answer is truthful rather than "not there yet": the call names a concrete
 * block more than `maxDistance` blocks beyond the network head. With an unknown head
 * (`highestLatest` 0) nothing is truthful and the empty answer is retried as usual.
 * @param method JSON-RPC method
 * @param params request params (after interpolation)
 * @param highestLatest the network's highest known latest block, 0 when unknown
 * @param maxDistance `evm.maxRetryableBlockDistance`, in blocks
 */
export function isTruthfulEmpty(method: string, params: unknown, highestLatest: number, maxDistance: number): boolean {
  if (!(highestLatest > 0)) return false;
  const ref = blockRefOf(method, params);
  return ref?.kind === 'number' && ref.number > highestLatest + maxDistance;
}

/** `evm.maxRetryableBlockDistance` of a network (owned by the evm-state plugin), in blocks. */
export function maxRetryableBlockDistanceOf(network: Network): number {
  const evm = network.config.settings.evm as { maxRetryableBlockDistance?: unknown } | undefined;
  const v = evm?.maxRetryableBlockDistance;
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE;
}

/**
 * `networks[].evm.emptyResultConfidence` (eRPC's key): how confirmed a concrete block must be for
 * its empty answer to be retried as "this node does not have it yet". `blockHead` (the default):
 * up to the network's highest latest block (plus `evm.maxRetryableBlockDistance`); `finalizedBlock`:
 * up to its highest finalized block only, so an empty answer for a block above it (not final yet,
 * e.g. an archive workload that must not read unfinalized data) is served as it is.
 */
export type EmptyResultConfidence = 'blockHead' | 'finalizedBlock';

/** Schema of `networks[].evm.emptyResultConfidence` (also under `networkDefaults.evm`). */
export const emptyResultConfidenceSchema = Type.Union([Type.Literal('blockHead'), Type.Literal('finalizedBlock')], {
  default: 'blockHead',
  description:
    "how confirmed a concrete block must be for an empty answer to it to be retried under retry-empty: blockHead = at or below the highest latest block (plus maxRetryableBlockDistance), finalizedBlock = at or below the highest finalized block only; an empty answer beyond it is served as it is (eRPC's evm.emptyResultConfidence)",
});

/** `evm.emptyResultConfidence` of a network (default `blockHead`). */
export function emptyResultConfidenceOf(network: Network): EmptyResultConfidence {
  const evm = network.config.settings.evm as { emptyResultConfidence?: unknown } | undefined;
  return evm?.emptyResultConfidence === 'finalizedBlock' ? 'finalizedBlock' : 'blockHead';
}

/**
 * Whether an empty answer is truthful under the network's {@link EmptyResultConfidence}: for
 * `finalizedBlock`, the call names a concrete block above the highest finalized block (with an
 * unknown finalized block, 0, nothing is truthful: fail open, as eRPC); for `blockHead`, as
 * {@link isTruthfulEmpty}.
 * @param method JSON-RPC method
 * @param params request params (after interpolation)
 * @param chain the network's chain state (highest latest and finalized blocks)
 * @param network the network (its `evm` settings)
 */
export function isTruthfulEmptyFor(
  method: string,
  params: unknown,
  chain: Pick<NetworkChainState, 'highestLatest' | 'highestFinalized'>,
  network: Network,
): boolean {
  if (emptyResultConfidenceOf(network) === 'finalizedBlock') {
    if (!(chain.highestFinalized > 0)) return false;
    const ref = blockRefOf(method, params);
    return ref?.kind === 'number' && ref.number > chain.highestFinalized;
  }
  return isTruthfulEmpty(method, params, chain.highestLatest, maxRetryableBlockDistanceOf(network));
}
