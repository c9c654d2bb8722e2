/**
 * Receipt checks (intrinsic level, spec §2.8 #10) for `eth_getTransactionReceipt` and
 * `eth_getBlockReceipts`: one block hash and number across the receipts and all their logs,
 * sequential transaction indexes and increasing log indexes within a block, the requested
 * transaction or block honoured, and every log's address and topics present in its receipt's
 * logsBloom.
 */
import type { Anchors } from '../anchors.ts';
import { checkLogInBloom, parseBloom } from '../bloom.ts';
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

/** Where one receipt must sit, when the caller knows it. */
interface ReceiptExpect {
  blockHash?: Hex;
  blockNumber?: bigint;
  transactionIndex?: bigint;
  transactionHash?: Hex;
  /** Checks turned off (`receipt.block`, `receipt.index`, `receipt.request`). */
  skip?: SkipChecks;
}

/** Facts of one checked receipt. */
interface CheckedReceipt {
  blockHash: Hex;
  blockNumber: bigint;
  /** Log indexes in order (already checked to increase). */
  logIndexes: bigint[];
  logs: JsonObject[];
}

/**
 * Checks one receipt against itself and what is expected of it.
 * @param viem viem's namespace
 * @param r the receipt object
 * @param expect block, index and hash it must name
 * @throws CheckFailure (`receipt.block`, `receipt.request`, `receipt.log`, `receipt.bloom`)
 */
export function checkReceipt(viem: Viem, r: unknown, expect: ReceiptExpect = {}): CheckedReceipt {
  if (!isObject(r)) throw new CheckFailure('receipt.shape', 'a receipt is not an object');
  const blockHash = needData(r, 'blockHash', 'receipt.block');
  const blockNumber = needQuantity(r, 'blockNumber', 'receipt.block');
  const txHash = needData(r, 'transactionHash', 'receipt.shape');
  const txIndex = needQuantity(r, 'transactionIndex', 'receipt.shape');
  const who = `receipt ${txHash}`;
  const skip = expect.skip ?? NO_SKIP;
  if (!skip.has('receipt.block') && expect.blockHash !== undefined && !sameHex(expect.blockHash, blockHash))
    throw new CheckFailure('receipt.block', `${who} names block ${blockHash}, expected ${expect.blockHash}`);
  if (!skip.has('receipt.block') && expect.blockNumber !== undefined && expect.blockNumber !== blockNumber)
    throw new CheckFailure('receipt.block', `${who} names block number ${blockNumber}, expected ${expect.blockNumber}`);
  if (!skip.has('receipt.index') && expect.transactionIndex !== undefined && expect.transactionIndex !== txIndex)
    throw new CheckFailure('receipt.index', `${who} has transactionIndex ${txIndex}, expected ${expect.transactionIndex}`);
  if (!skip.has('receipt.request') && expect.transactionHash !== undefined && !sameHex(expect.transactionHash, txHash))
    throw new CheckFailure('receipt.request', `asked for the receipt of ${expect.transactionHash}, got ${who}`);
  const logs = r.logs;
  if (!Array.isArray(logs)) throw new CheckFailure('receipt.shape', `${who} has no logs array`);
  const bloom = logs.length > 0 ? parseBloom(viem, r.logsBloom, 'receipt.bloom') : undefined;
  const logIndexes: bigint[] = [];
  for (const l of logs) {
    if (!isObject(l)) throw new CheckFailure('receipt.log', `${who} has a log that is not an object`);
    if (!sameHex(l.blockHash, blockHash) || quantityOf(l.blockNumber) !== blockNumber) {
      throw new CheckFailure(
        'receipt.log',
        `a log of ${who} names block ${short(l.blockNumber)} ${short(l.blockHash)}, the receipt block ${blockNumber} ${blockHash}`,
      );
    }
    if (!sameHex(l.transactionHash, txHash) || quantityOf(l.transactionIndex) !== txIndex)
      throw new CheckFailure('receipt.log', `a log of ${who} names another transaction (${short(l.transactionHash)})`);
    const li = needQuantity(l, 'logIndex', 'receipt.log');
    const prev = logIndexes[logIndexes.length - 1];
    if (prev !== undefined && li <= prev) throw new CheckFailure('receipt.log', `log indexes of ${who} do not increase (${prev} then ${li})`);
    logIndexes.push(li);
    checkLogInBloom(bloom as NonNullable<typeof bloom>, l, 'receipt.bloom', who);
  }
  return { blockHash, blockNumber, logIndexes, logs: logs as JsonObject[] };
}

/**
 * The block an `eth_getBlockReceipts` param names, when it names one concretely: a hex number,
 * a 32-byte hash, or an EIP-1898 object `{blockHash}` / `{blockNumber}`. Tags give `{}`.
 */
export function blockReceiptsRequest(param: unknown): { number?: bigint; hash?: Hex } {
  if (isObject(param)) {
    if (isHex(param.blockHash)) return { hash: param.blockHash };
    const n = quantityOf(param.blockNumber);
    return n === undefined ? {} : { number: n };
  }
  if (isHex(param) && param.length === 66) return { hash: param };
  const n = quantityOf(param);
  return n === undefined ? {} : { number: n };
}

/**
 * Checks an `eth_getTransactionReceipt` answer and records its block in `anchors`.
 * @param viem viem's namespace
 * @param params the request params (`[txHash]`)
 * @param receipt the answer (non-null)
 * @param anchors where its block and logs are recorded
 * @throws CheckFailure on the first check that does not hold
 */
export function checkReceiptAnswer(viem: Viem, params: unknown, receipt: unknown, anchors: Anchors, skip: SkipChecks = NO_SKIP): void {
  const p = Array.isArray(params) ? params : [];
  const c = checkReceipt(viem, receipt, isHex(p[0]) ? { transactionHash: p[0], skip } : { skip });
  anchors.add(c.blockNumber, c.blockHash, 'receipt.block', c.logs);
}

/**
 * Checks an `eth_getBlockReceipts` answer and records its block in `anchors`: every receipt in
 * the requested block, transaction indexes 0..n-1 in order, log indexes increasing across the
 * block, cumulative gas never decreasing.
 * @param viem viem's namespace
 * @param params the request params (`[block]`)
 * @param receipts the answer (a non-empty array)
 * @param anchors where its block and logs are recorded
 * @throws CheckFailure on the first check that does not hold
 */
export function checkBlockReceiptsAnswer(viem: Viem, params: unknown, receipts: unknown, anchors: Anchors, skip: SkipChecks = NO_SKIP): void {
  if (!Array.isArray(receipts)) throw new CheckFailure('receipt.shape', 'the answer is not an array of receipts');
  const p = Array.isArray(params) ? params : [];
  const req = blockReceiptsRequest(p[0]);
  let first: CheckedReceipt | undefined;
  let lastLog: bigint | undefined;
  let lastGas = -1n;
  const logs: JsonObject[] = [];
  for (let i = 0; i < receipts.length; i++) {
    const expect: ReceiptExpect = {
      transactionIndex: BigInt(i),
      blockHash: first?.blockHash ?? req.hash,
      blockNumber: first?.blockNumber ?? req.number,
      skip,
    };
    const c = checkReceipt(viem, receipts[i], expect);
    first ??= c;
    for (const li of c.logIndexes) {
      if (lastLog !== undefined && li <= lastLog)
        throw new CheckFailure('receipt.log', `log indexes of block ${c.blockNumber} do not increase across receipts (${lastLog} then ${li})`);
      lastLog = li;
    }
    const gas = quantityOf((receipts[i] as JsonObject).cumulativeGasUsed);
    if (gas !== undefined) {
      if (gas < lastGas) throw new CheckFailure('receipt.gas', `cumulativeGasUsed decreases at transaction ${i} of block ${c.blockNumber}`);
      lastGas = gas;
    }
    logs.push(...c.logs);
  }
  if (first) anchors.add(first.blockNumber, first.blockHash, 'receipt.block', logs);
}
