/**
 * The intrinsic level (spec §2.8 #10): one entry point that checks an answer of a block-data
 * method against itself and returns the blocks it rests on.
 */
import { Anchors } from '../anchors.ts';
import { isHex, NO_SKIP, quantityOf, type SkipChecks } from '../hex.ts';
import type { IntegrityLibs } from '../libs.ts';
import { checkBlockAnswer } from './block.ts';
import { checkLogsAnswer } from './logs.ts';
import { checkBlockReceiptsAnswer, checkReceiptAnswer } from './receipts.ts';
import { checkTransactionAnswer } from './transactions.ts';

export { checkBlockAnswer, EMPTY_UNCLES_HASH, headerHash, indexedTrieRoot, type BlockRequest } from './block.ts';
export { checkLogsAnswer, compileLogFilter } from './logs.ts';
export { blockReceiptsRequest, checkBlockReceiptsAnswer, checkReceipt, checkReceiptAnswer } from './receipts.ts';
export { checkTransactionAnswer, checkTxHash, KNOWN_TX_TYPES, serializeSignedTx } from './transactions.ts';

/**
 * Methods whose answers carry block data and are checked. Every other method passes unchecked
 * at every level (its answer has no commitment to check it against).
 */
export const CHECKED_METHODS: ReadonlySet<string> = new Set([
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getTransactionReceipt',
  'eth_getBlockReceipts',
  'eth_getLogs',
  'eth_getTransactionByHash',
  'eth_getTransactionByBlockNumberAndIndex',
  'eth_getTransactionByBlockHashAndIndex',
]);

/**
 * Whether an answer is null or empty (`null`, `[]`, `{}`): nothing to check, it passes.
 * @param result the parsed result
 */
export function isEmptyAnswer(result: unknown): boolean {
  if (result === null || result === undefined) return true;
  if (Array.isArray(result)) return result.length === 0;
  return typeof result === 'object' && Object.keys(result).length === 0;
}

/**
 * Checks one answer against itself (the `intrinsic` level).
 * @param libs viem and @ethereumjs/mpt ({@link loadLibs})
 * @param method the JSON-RPC method (a method outside {@link CHECKED_METHODS} passes)
 * @param params the params sent to the upstream
 * @param result the parsed result
 * @param skip checks the network turned off (`integrity.skipChecks`)
 * @returns the blocks the answer rests on (none for a null/empty answer or an unchecked method)
 * @throws CheckFailure naming the first check that did not hold
 */
export async function checkIntrinsic(libs: IntegrityLibs, method: string, params: unknown, result: unknown, skip: SkipChecks = NO_SKIP): Promise<Anchors> {
  const anchors = new Anchors();
  if (!CHECKED_METHODS.has(method) || isEmptyAnswer(result)) return anchors;
  const p = Array.isArray(params) ? params : [];
  switch (method) {
    case 'eth_getBlockByNumber': {
      const n = quantityOf(p[0]);
      await checkBlockAnswer(libs, result, n === undefined ? { skip } : { number: n, skip }, anchors);
      break;
    }
    case 'eth_getBlockByHash':
      await checkBlockAnswer(libs, result, isHex(p[0]) ? { hash: p[0], skip } : { skip }, anchors);
      break;
    case 'eth_getTransactionReceipt':
      checkReceiptAnswer(libs.viem, params, result, anchors, skip);
      break;
    case 'eth_getBlockReceipts':
      checkBlockReceiptsAnswer(libs.viem, params, result, anchors, skip);
      break;
    case 'eth_getLogs':
      checkLogsAnswer(params, result, anchors, skip);
      break;
    default:
      checkTransactionAnswer(libs.viem, method, params, result, anchors, skip);
  }
  return anchors;
}
