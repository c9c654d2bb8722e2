/**
 * Block checks (intrinsic level, spec §2.8 #10): the block hash recomputed from the header
 * fields, the transactions root recomputed from full transactions (Merkle-Patricia trie keyed by
 * RLP(index), @ethereumjs/mpt), the withdrawals root likewise, the uncles hash of a block without
 * uncles, each transaction's hash and its blockHash/blockNumber/transactionIndex, and the block
 * asked for by number or hash.
 */
import type { Anchors } from '../anchors.ts';
import {
  CheckFailure,
  isHex,
  isObject,
  needData,
  needQuantity,
  quantityBytes,
  quantityOf,
  sameHex,
  short,
  type Hex,
  type JsonObject,
  NO_SKIP,
  type SkipChecks,
} from '../hex.ts';
import type { IntegrityLibs, Viem } from '../libs.ts';
import { checkTxHash } from './transactions.ts';

/** keccak256 of RLP([]): the `sha3Uncles` of a block without uncles. */
export const EMPTY_UNCLES_HASH = '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347';
const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

/** A system transaction: sent by the zero address or carrying no signature (r and s zero), never part of a user's block. */
function isPhantom(tx: JsonObject): boolean {
  const zero = (v: unknown) => typeof v === 'string' && /^0x0*$/.test(v);
  return (typeof tx.from === 'string' && tx.from.toLowerCase() === ZERO_ADDRESS) || (zero(tx.r) && zero(tx.s));
}

/** Root of the empty Merkle-Patricia trie, keccak256(rlp('')): the transactionsRoot of a block without transactions. */
export const EMPTY_TRIE_ROOT = '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421';

/** How a header field is encoded in the RLP header. */
type FieldKind = 'data' | 'quantity';

/** The header fields every block has, in canonical order (pre-London headers end here). */
const BASE_FIELDS: ReadonlyArray<readonly [string, FieldKind]> = [
  ['parentHash', 'data'],
  ['sha3Uncles', 'data'],
  ['miner', 'data'],
  ['stateRoot', 'data'],
  ['transactionsRoot', 'data'],
  ['receiptsRoot', 'data'],
  ['logsBloom', 'data'],
  ['difficulty', 'quantity'],
  ['number', 'quantity'],
  ['gasLimit', 'quantity'],
  ['gasUsed', 'quantity'],
  ['timestamp', 'quantity'],
  ['extraData', 'data'],
  ['mixHash', 'data'],
  ['nonce', 'data'],
];

/**
 * Fields added by later forks, in order: London, Shanghai, Cancun (three), Prague. Each is in the
 * header only when every earlier one is.
 */
const FORK_FIELDS: ReadonlyArray<readonly [string, FieldKind]> = [
  ['baseFeePerGas', 'quantity'],
  ['withdrawalsRoot', 'data'],
  ['blobGasUsed', 'quantity'],
  ['excessBlobGas', 'quantity'],
  ['parentBeaconBlockRoot', 'data'],
  ['requestsHash', 'data'],
];

function encodeField(block: JsonObject, field: string, kind: FieldKind): Hex {
  return kind === 'data' ? needData(block, field, 'block.header') : quantityBytes(needQuantity(block, field, 'block.header'));
}

/**
 * Recomputes a block's hash from its header fields: keccak256 of the RLP list of the fields in
 * canonical order, quantities as minimal big-endian bytes (zero as the empty string), then each
 * fork field that is present, in fork order. On a well-formed header the present fork fields are
 * a prefix of the list (each only with every earlier one); encoding whichever are present, as
 * alloy does, also reproduces anvil's genesis blocks of older forks, which carry the Cancun blob
 * fields without the London and Shanghai ones. Every field present is therefore committed to.
 * @param viem viem's namespace
 * @param block a block object as JSON-RPC returns it
 * @returns the recomputed hash
 * @throws CheckFailure (`block.header`) when a field is missing or malformed
 */
export function headerHash(viem: Viem, block: JsonObject): Hex {
  const list: Hex[] = BASE_FIELDS.map(([f, k]) => encodeField(block, f, k));
  for (const [f, k] of FORK_FIELDS) {
    if (block[f] !== undefined && block[f] !== null) list.push(encodeField(block, f, k));
  }
  return viem.keccak256(viem.toRlp(list));
}

/**
 * The root of a trie of `values` keyed by RLP(index), as the transactions, receipts and
 * withdrawals roots are built.
 * @param libs viem and @ethereumjs/mpt
 * @param values the encoded items, in order
 */
export async function indexedTrieRoot(libs: IntegrityLibs, values: readonly Hex[]): Promise<Hex> {
  const { viem, mpt } = libs;
  const trie = await mpt.createMPT();
  for (let i = 0; i < values.length; i++) {
    await trie.put(viem.hexToBytes(viem.toRlp(quantityBytes(BigInt(i)))), viem.hexToBytes(values[i] as Hex));
  }
  return viem.bytesToHex(trie.root());
}

/** RLP of one withdrawal: [index, validatorIndex, address, amount]. */
function encodeWithdrawal(viem: Viem, w: unknown): Hex {
  if (!isObject(w)) throw new CheckFailure('block.withdrawals', 'a withdrawal is not an object');
  const c = 'block.withdrawals';
  return viem.toRlp([
    quantityBytes(needQuantity(w, 'index', c)),
    quantityBytes(needQuantity(w, 'validatorIndex', c)),
    needData(w, 'address', c),
    quantityBytes(needQuantity(w, 'amount', c)),
  ]);
}

/** What a block answer was asked for. */
export interface BlockRequest {
  /** Asked by number (`eth_getBlockByNumber` with a hex number). */
  number?: bigint;
  /** Asked by hash (`eth_getBlockByHash`). */
  hash?: Hex;
  /** Checks turned off (`block.hash`, `block.request`, `block.tx`, `block.transactionCount`, `block.transactionsRoot`). */
  skip?: SkipChecks;
}

/**
 * Checks a block answer (intrinsic) and records it in `anchors`.
 * @param libs viem and @ethereumjs/mpt
 * @param block the answer (non-null)
 * @param req the number or hash asked for (tags are not checked)
 * @param anchors where the block is recorded
 * @throws CheckFailure on the first check that does not hold: `block.hash`, `block.request`,
 *   `block.transactionsRoot`, `block.withdrawalsRoot`, `block.uncles`, `block.tx`, `tx.hash`
 */
export async function checkBlockAnswer(libs: IntegrityLibs, block: unknown, req: BlockRequest, anchors: Anchors): Promise<void> {
  const { viem } = libs;
  const skip = req.skip ?? NO_SKIP;
  if (!isObject(block)) throw new CheckFailure('block.shape', 'the answer is not a block object');
  const hash = needData(block, 'hash', 'block.hash');
  const number = needQuantity(block, 'number', 'block.header');
  const computed = skip.has('block.hash') ? hash : headerHash(viem, block);
  if (!sameHex(computed, hash)) throw new CheckFailure('block.hash', `block ${number} hash ${hash} does not match its header (recomputed ${computed})`);
  if (!skip.has('block.request') && req.number !== undefined && req.number !== number)
    throw new CheckFailure('block.request', `asked for block ${req.number}, got block ${number}`);
  if (!skip.has('block.request') && req.hash !== undefined && !sameHex(req.hash, hash))
    throw new CheckFailure('block.request', `asked for block ${req.hash}, got ${hash}`);
  if (Array.isArray(block.uncles) && block.uncles.length === 0 && !sameHex(block.sha3Uncles, EMPTY_UNCLES_HASH)) {
    throw new CheckFailure('block.uncles', `block ${number} lists no uncles but sha3Uncles is ${short(block.sha3Uncles)}`);
  }
  if (Array.isArray(block.withdrawals) && isHex(block.withdrawalsRoot)) {
    const root = await indexedTrieRoot(
      libs,
      block.withdrawals.map((w) => encodeWithdrawal(viem, w)),
    );
    if (!sameHex(root, block.withdrawalsRoot))
      throw new CheckFailure('block.withdrawalsRoot', `block ${number} withdrawals do not match withdrawalsRoot ${block.withdrawalsRoot} (recomputed ${root})`);
  }
  const txs = block.transactions;
  // The root against the count: signed transactions under the empty trie's root. Phantom transactions are left out both ways (eRPC's
  // "phantom-tx-aware" consistency): a system transaction a chain lists but keeps out of its root (no signature, or sent by the zero
  // address, as Polygon's state sync), and system transactions a root covers but the list omits (left to the recompute below).
  // A list of hashes cannot tell them apart, so only full transactions are counted.
  if (Array.isArray(txs) && !skip.has('block.transactionCount') && sameHex(block.transactionsRoot, EMPTY_TRIE_ROOT)) {
    const signed = txs.filter((tx) => isObject(tx) && !isPhantom(tx as JsonObject)).length;
    if (signed > 0) throw new CheckFailure('block.transactionCount', `block ${number} lists ${signed} signed transactions under the empty transactionsRoot`);
  }
  if (Array.isArray(txs) && txs.length > 0 && txs.every(isObject)) {
    const encoded: Hex[] = [];
    let unknownType = false;
    for (let i = 0; i < txs.length; i++) {
      const tx = txs[i] as JsonObject;
      const info = !skip.has('block.tx');
      if (info && !sameHex(tx.blockHash, hash))
        throw new CheckFailure('block.tx', `transaction ${i} of block ${number} names blockHash ${short(tx.blockHash)}`);
      if (info && quantityOf(tx.blockNumber) !== number)
        throw new CheckFailure('block.tx', `transaction ${i} of block ${number} names blockNumber ${short(tx.blockNumber)}`);
      if (info && quantityOf(tx.transactionIndex) !== BigInt(i))
        throw new CheckFailure('block.tx', `transaction ${i} of block ${number} has transactionIndex ${short(tx.transactionIndex)}`);
      const raw = checkTxHash(viem, tx);
      if (raw === undefined) unknownType = true;
      else encoded.push(raw);
    }
    // A transaction type viem cannot encode (an L2's deposit type) leaves the root unverifiable.
    if (!unknownType && !skip.has('block.transactionsRoot')) {
      const root = await indexedTrieRoot(libs, encoded);
      if (!sameHex(root, block.transactionsRoot))
        throw new CheckFailure(
          'block.transactionsRoot',
          `block ${number} transactions do not match transactionsRoot ${short(block.transactionsRoot)} (recomputed ${root})`,
        );
    }
  } else if (Array.isArray(txs) && txs.length === 0 && !skip.has('block.transactionsRoot')) {
    const root = await indexedTrieRoot(libs, []);
    if (!sameHex(root, block.transactionsRoot))
      throw new CheckFailure('block.transactionsRoot', `block ${number} has no transactions but transactionsRoot ${short(block.transactionsRoot)}`);
  }
  anchors.add(number, hash, 'block.hash', [], true);
}
