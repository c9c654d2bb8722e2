/**
 * Transaction checks (intrinsic level, spec §2.8 #10): a transaction's hash recomputed from its
 * fields and signature with viem's canonical typed serialisation, and the lookups
 * `eth_getTransactionByHash`, `eth_getTransactionByBlockNumberAndIndex` and
 * `eth_getTransactionByBlockHashAndIndex` answering what was asked.
 */
import type { Anchors } from '../anchors.ts';
import {
  CheckFailure,
  isHex,
  isObject,
  needData,
  needQuantity,
  quantityOf,
  sameHex,
  short,
  type Hex,
  type JsonObject,
  NO_SKIP,
  type SkipChecks,
} from '../hex.ts';
import type { Viem } from '../libs.ts';

/** Transaction types viem serialises canonically (legacy, EIP-2930, EIP-1559, EIP-4844, EIP-7702). */
export const KNOWN_TX_TYPES: ReadonlySet<string> = new Set(['0x0', '0x1', '0x2', '0x3', '0x4']);

/**
 * The canonical signed encoding of a transaction (the bytes its hash and the transactions trie
 * are built from): RLP for legacy, `type || RLP` for typed ones.
 * @param viem viem's namespace
 * @param tx a transaction object as JSON-RPC returns it
 * @returns the encoding, or undefined for a type viem does not know (L2 deposit types...): such a
 *   transaction cannot be checked and is skipped
 * @throws CheckFailure (`tx.fields`) when a field is malformed
 */
export function serializeSignedTx(viem: Viem, tx: JsonObject): Hex | undefined {
  const type = tx.type === undefined ? '0x0' : typeof tx.type === 'string' ? `0x${BigInt(isHex(tx.type) ? tx.type : '0x0').toString(16)}` : undefined;
  if (type === undefined || !KNOWN_TX_TYPES.has(type)) return undefined;
  let f: ReturnType<Viem['formatTransaction']>;
  try {
    f = viem.formatTransaction(tx as Parameters<Viem['formatTransaction']>[0]);
  } catch (e) {
    throw new CheckFailure('tx.fields', `transaction ${short(tx.hash)} has malformed fields: ${(e as Error).message.split('\n')[0]}`);
  }
  if (!isHex(f.r) || !isHex(f.s)) throw new CheckFailure('tx.fields', `transaction ${short(tx.hash)} has no signature`);
  // viem's serialisable shape names the payload `data`; JSON-RPC names it `input`.
  const serializable: Record<string, unknown> = { ...f, data: f.input };
  // A pre-EIP-155 legacy signature (v 27/28) carries no chain id: serialising one in would change the hash.
  if (type === '0x0' && f.v !== undefined && f.v < 35n) delete serializable.chainId;
  try {
    return viem.serializeTransaction(
      serializable as Parameters<Viem['serializeTransaction']>[0],
      { r: f.r, s: f.s, v: f.v, yParity: f.yParity } as Parameters<Viem['serializeTransaction']>[1],
    );
  } catch (e) {
    throw new CheckFailure('tx.fields', `transaction ${short(tx.hash)} cannot be serialised: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * Recomputes a transaction's hash and compares it with its `hash` field.
 * @param viem viem's namespace
 * @param tx the transaction object
 * @returns the canonical encoding, or undefined for an unknown type (not checked)
 * @throws CheckFailure (`tx.hash`) when the recomputed hash differs
 */
export function checkTxHash(viem: Viem, tx: JsonObject): Hex | undefined {
  const hash = needData(tx, 'hash', 'tx.hash');
  const raw = serializeSignedTx(viem, tx);
  if (raw === undefined) return undefined;
  const computed = viem.keccak256(raw);
  if (!sameHex(computed, hash)) throw new CheckFailure('tx.hash', `transaction hash ${hash} does not match its fields (recomputed ${computed})`);
  return raw;
}

/**
 * Checks a transaction lookup answer (intrinsic): the hash recomputed, the requested hash, block
 * or index honoured; adds the block it was mined in to `anchors` (a pending one adds none).
 * @param viem viem's namespace
 * @param method one of the three transaction lookups
 * @param params the request params
 * @param tx the answer (non-null)
 * @param anchors where the answer's block is recorded
 * @throws CheckFailure on the first check that does not hold
 */
export function checkTransactionAnswer(viem: Viem, method: string, params: unknown, tx: unknown, anchors: Anchors, skip: SkipChecks = NO_SKIP): void {
  if (!isObject(tx)) throw new CheckFailure('tx.shape', 'the answer is not a transaction object');
  // txByHashIdentity off: the answer is not held to the hash, block or index asked for.
  const p = skip.has('tx.request') ? [] : Array.isArray(params) ? params : [];
  checkTxHash(viem, tx);
  if (method === 'eth_getTransactionByHash' && isHex(p[0]) && !sameHex(p[0], tx.hash)) {
    throw new CheckFailure('tx.request', `asked for transaction ${p[0]}, got ${short(tx.hash)}`);
  }
  if (method === 'eth_getTransactionByBlockHashAndIndex' || method === 'eth_getTransactionByBlockNumberAndIndex') {
    const idx = quantityOf(p[1]);
    if (idx !== undefined && quantityOf(tx.transactionIndex) !== idx)
      throw new CheckFailure('tx.request', `asked for index ${idx}, got transactionIndex ${short(tx.transactionIndex)}`);
    if (method === 'eth_getTransactionByBlockHashAndIndex' && isHex(p[0]) && !sameHex(p[0], tx.blockHash)) {
      throw new CheckFailure('tx.request', `asked for block ${p[0]}, got blockHash ${short(tx.blockHash)}`);
    }
    const n = quantityOf(p[0]);
    if (method === 'eth_getTransactionByBlockNumberAndIndex' && n !== undefined && quantityOf(tx.blockNumber) !== n) {
      throw new CheckFailure('tx.request', `asked for block ${n}, got blockNumber ${short(tx.blockNumber)}`);
    }
  }
  // A pending transaction rests on no block.
  if (tx.blockHash === null || tx.blockHash === undefined) return;
  anchors.add(needQuantity(tx, 'blockNumber', 'tx.block'), needData(tx, 'blockHash', 'tx.block'), 'tx.block');
}
