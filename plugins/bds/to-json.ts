/**
 * BDS protobuf models → the JSON-RPC objects an HTTP node answers (Ethereum execution API shapes): numbers as hex quantities without
 * leading zeros, byte strings as `0x` hex data, absent optional fields left out, `to`/`contractAddress` null when empty, and the
 * fields a node always writes (`uncles`, `transactions`, `accessList` on typed transactions, `removed` on logs) always written.
 * Decoded messages come from ./proto.ts (`longs: String`, `bytes: Buffer`, defaults on): a 64-bit number is a decimal string, an
 * unset proto3 `optional` field is undefined.
 *
 * Everything here reads what an upstream sent: a value that cannot be what the model says (a decimal amount that is not a number)
 * throws {@link MalformedModel}, which the transport turns into `ErrUpstreamMalformedResponse`; nothing here trusts a length.
 */

/** A model field that cannot hold what the protocol says it holds (the answer is malformed). */
export class MalformedModel extends Error {
  override readonly name = 'MalformedModel';
}

/** Largest decimal amount accepted: 2^256 - 1 has 78 digits (a longer string is no EVM amount, and BigInt of it would cost time). */
const MAX_DECIMAL_DIGITS = 78;

type Bytes = Uint8Array | undefined;
type Obj = Record<string, unknown>;

/** `0x`-prefixed hex of a byte string (DATA); an absent field is empty data, `0x`. */
export function data(b: Bytes): string {
  return `0x${b ? Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex') : ''}`;
}

/** A QUANTITY from a 64-bit number given as a decimal string (or a JS number for 32-bit fields). */
export function qty(n: string | number | undefined): string {
  if (n === undefined || n === '') return '0x0';
  if (typeof n === 'number') return `0x${n.toString(16)}`;
  if (!/^\d{1,20}$/.test(n)) throw new MalformedModel(`not a 64-bit number: ${n.slice(0, 40)}`);
  return `0x${BigInt(n).toString(16)}`;
}

/** A QUANTITY from a decimal amount string (wei values, fees: up to 256 bits). */
export function amount(s: string, field: string): string {
  if (s.length > MAX_DECIMAL_DIGITS || !/^\d+$/.test(s)) throw new MalformedModel(`${field} is not a decimal amount: ${s.slice(0, 40)}`);
  return `0x${BigInt(s).toString(16)}`;
}

/** A QUANTITY from a big-endian byte string (a signature's `v`, `r`, `s`): leading zeros dropped, as nodes write them. */
export function bytesQty(b: Bytes): string {
  if (!b || b.length === 0) return '0x0';
  const hex = Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex').replace(/^0+/, '');
  return `0x${hex || '0'}`;
}

/** Sets `key` on `o` from an optional field, converted; an absent field writes nothing. */
function opt<T>(o: Obj, key: string, v: T | undefined | null, f: (v: T) => unknown): void {
  if (v !== undefined && v !== null) o[key] = f(v);
}

const amt = (field: string) => (s: string) => amount(s, field);

/** The JSON-RPC log object (`eth_getLogs`, receipt `logs`). */
export function logToJson(l: Obj): Obj {
  const o: Obj = {
    address: data(l.address as Bytes),
    topics: ((l.topics as Bytes[] | undefined) ?? []).map(data),
    data: data(l.data as Bytes),
    blockHash: data(l.blockHash as Bytes),
    blockNumber: qty(l.blockNumber as string),
  };
  opt(o, 'blockTimestamp', l.blockTimestamp as string | undefined, qty);
  o.transactionHash = data(l.transactionHash as Bytes);
  o.transactionIndex = qty(l.transactionIndex as number);
  o.logIndex = qty(l.logIndex as number);
  // A BDS store holds canonical logs only.
  o.removed = false;
  return o;
}

/** The JSON-RPC transaction object (`eth_getTransactionByHash`, a block's full transactions). */
export function transactionToJson(t: Obj): Obj {
  const type = (t.type as number | undefined) ?? 0;
  const o: Obj = { type: qty(type) };
  opt(o, 'chainId', t.chainId as string | undefined, qty);
  o.nonce = qty(t.nonce as string);
  opt(o, 'gasPrice', t.gasPrice as string | undefined, amt('gasPrice'));
  opt(o, 'maxFeePerGas', t.maxFeePerGas as string | undefined, amt('maxFeePerGas'));
  opt(o, 'maxPriorityFeePerGas', t.maxPriorityFeePerGas as string | undefined, amt('maxPriorityFeePerGas'));
  opt(o, 'maxFeePerBlobGas', t.maxFeePerBlobGas as string | undefined, amt('maxFeePerBlobGas'));
  o.gas = qty(t.gasLimit as string);
  const to = t.to as Bytes;
  o.to = to && to.length > 0 ? data(to) : null;
  o.value = amount((t.value as string | undefined) || '0', 'value');
  o.input = data(t.input as Bytes);
  // Typed transactions (EIP-2718) carry an access list, empty or not; legacy ones have none.
  const access = (t.accessList as Obj[] | undefined) ?? [];
  if (type !== 0 || access.length > 0) {
    o.accessList = access.map((a) => ({ address: data(a.address as Bytes), storageKeys: ((a.storageKeys as Bytes[] | undefined) ?? []).map(data) }));
  }
  const blobs = (t.blobVersionedHashes as Bytes[] | undefined) ?? [];
  if (blobs.length > 0) o.blobVersionedHashes = blobs.map(data);
  const auth = (t.authorizationList as Obj[] | undefined) ?? [];
  if (auth.length > 0) {
    o.authorizationList = auth.map((a) => {
      const item: Obj = {
        chainId: qty(a.chainId as string),
        address: data(a.address as Bytes),
        nonce: qty(a.nonce as string),
        yParity: qty(a.yParity as number),
        r: bytesQty(a.r as Bytes),
        s: bytesQty(a.s as Bytes),
      };
      const authority = a.authority as Bytes;
      if (authority && authority.length > 0) item.authority = data(authority);
      return item;
    });
  }
  o.r = bytesQty(t.r as Bytes);
  o.s = bytesQty(t.s as Bytes);
  opt(o, 'yParity', t.yParity as number | undefined, qty);
  opt(o, 'v', t.v as Bytes, bytesQty);
  o.hash = data(t.hash as Bytes);
  opt(o, 'blockHash', t.blockHash as Bytes, data);
  opt(o, 'blockNumber', t.blockNumber as string | undefined, qty);
  opt(o, 'transactionIndex', t.transactionIndex as number | undefined, qty);
  o.from = data(t.from as Bytes);
  opt(o, 'blockTimestamp', t.blockTimestamp as string | undefined, qty);
  opt(o, 'isSystemTx', t.isSystemTx as boolean | undefined, Boolean);
  opt(o, 'depositReceiptVersion', t.depositReceiptVersion as string | undefined, amt('depositReceiptVersion'));
  return o;
}

/** The JSON-RPC receipt object (`eth_getTransactionReceipt`, `eth_getBlockReceipts`). */
export function receiptToJson(r: Obj): Obj {
  const o: Obj = { type: qty((r.type as number | undefined) ?? 0) };
  opt(o, 'root', r.root as Bytes, data);
  opt(o, 'status', r.status as number | undefined, qty);
  o.cumulativeGasUsed = qty(r.cumulativeGasUsed as string);
  o.logs = ((r.logs as Obj[] | undefined) ?? []).map(logToJson);
  o.logsBloom = data(r.logsBloom as Bytes);
  o.transactionHash = data(r.transactionHash as Bytes);
  o.transactionIndex = qty(r.transactionIndex as number);
  o.blockHash = data(r.blockHash as Bytes);
  o.blockNumber = qty(r.blockNumber as string);
  o.gasUsed = qty(r.gasUsed as string);
  o.effectiveGasPrice = amount((r.effectiveGasPrice as string | undefined) || '0', 'effectiveGasPrice');
  opt(o, 'blobGasUsed', r.blobGasUsed as string | undefined, qty);
  opt(o, 'blobGasPrice', r.blobGasPrice as string | undefined, amt('blobGasPrice'));
  o.from = data(r.from as Bytes);
  const to = r.to as Bytes;
  o.to = to && to.length > 0 ? data(to) : null;
  const created = r.contractAddress as Bytes;
  o.contractAddress = created && created.length > 0 ? data(created) : null;
  opt(o, 'blockTimestamp', r.blockTimestamp as string | undefined, qty);
  // Rollup fields, written only by the chains that have them.
  opt(o, 'l1Fee', r.l1Fee as string | undefined, amt('l1Fee'));
  opt(o, 'l1GasUsed', r.l1GasUsed as string | undefined, amt('l1GasUsed'));
  opt(o, 'l1GasPrice', r.l1GasPrice as string | undefined, amt('l1GasPrice'));
  opt(o, 'l1FeeScalar', r.l1FeeScalar as number | undefined, (v) => (Number.isFinite(v) ? String(v) : '0'));
  opt(o, 'l1BaseFeeScalar', r.l1BaseFeeScalar as string | undefined, qty);
  opt(o, 'l1BlobBaseFee', r.l1BlobBaseFee as string | undefined, amt('l1BlobBaseFee'));
  opt(o, 'l1BlobBaseFeeScalar', r.l1BlobBaseFeeScalar as string | undefined, qty);
  opt(o, 'gasUsedForL1', r.gasUsedForL1 as string | undefined, qty);
  opt(o, 'l1BlockNumber', r.l1BlockNumber as string | undefined, qty);
  opt(o, 'depositNonce', r.depositNonce as string | undefined, amt('depositNonce'));
  opt(o, 'depositReceiptVersion', r.depositReceiptVersion as string | undefined, amt('depositReceiptVersion'));
  opt(o, 'timeboosted', r.timeboosted as boolean | undefined, Boolean);
  return o;
}

/** The JSON-RPC withdrawal object of a block. */
export function withdrawalToJson(w: Obj): Obj {
  return { index: qty(w.index as string), validatorIndex: qty(w.validatorIndex as string), address: data(w.address as Bytes), amount: qty(w.amount as string) };
}

/**
 * The JSON-RPC block object from a `GetBlockResponse`; null without a block (not found).
 * @param res the decoded response: `block` (header), `transactions` (hashes), `fullTransactions`, `withdrawals`
 * @param full whether transactions were asked for in full (a block without transactions writes `[]` either way)
 */
export function blockToJson(res: Obj, full: boolean): Obj | null {
  const h = res.block as Obj | undefined;
  if (!h) return null;
  const o: Obj = {
    hash: data(h.hash as Bytes),
    parentHash: data(h.parentHash as Bytes),
    sha3Uncles: data(h.sha3Uncles as Bytes),
    miner: data(h.miner as Bytes),
    stateRoot: data(h.stateRoot as Bytes),
    transactionsRoot: data(h.transactionsRoot as Bytes),
    receiptsRoot: data(h.receiptsRoot as Bytes),
    logsBloom: data(h.logsBloom as Bytes),
  };
  opt(o, 'difficulty', h.difficulty as string | undefined, amt('difficulty'));
  o.number = qty(h.number as string);
  o.gasLimit = qty(h.gasLimit as string);
  o.gasUsed = qty(h.gasUsed as string);
  o.timestamp = qty(h.timestamp as string);
  o.extraData = data(h.extraData as Bytes);
  opt(o, 'mixHash', h.mixHash as Bytes, data);
  // The block nonce is 8 bytes of DATA, written zero-padded.
  opt(o, 'nonce', h.nonce as string | undefined, (n) => `0x${BigInt(qty(n)).toString(16).padStart(16, '0')}`);
  opt(o, 'baseFeePerGas', h.baseFeePerGas as string | undefined, amt('baseFeePerGas'));
  opt(o, 'withdrawalsRoot', h.withdrawalsRoot as Bytes, data);
  opt(o, 'blobGasUsed', h.blobGasUsed as string | undefined, qty);
  opt(o, 'excessBlobGas', h.excessBlobGas as string | undefined, qty);
  opt(o, 'parentBeaconBlockRoot', h.parentBeaconBlockRoot as Bytes, data);
  opt(o, 'requestsHash', h.requestsHash as Bytes, data);
  opt(o, 'totalDifficulty', h.totalDifficulty as string | undefined, amt('totalDifficulty'));
  opt(o, 'l1BlockNumber', h.l1BlockNumber as string | undefined, qty);
  opt(o, 'sendCount', h.sendCount as string | undefined, qty);
  opt(o, 'sendRoot', h.sendRoot as Bytes, data);
  o.size = qty(h.size as string);
  o.uncles = ((h.uncles as Bytes[] | undefined) ?? []).map(data);
  const fullTxs = (res.fullTransactions as Obj[] | undefined) ?? [];
  const hashes = (res.transactions as Bytes[] | undefined) ?? [];
  o.transactions = full ? fullTxs.map(transactionToJson) : hashes.map(data);
  // Post-Shanghai blocks (a withdrawals root) list their withdrawals, empty or not.
  if (h.withdrawalsRoot !== undefined) o.withdrawals = ((res.withdrawals as Obj[] | undefined) ?? []).map(withdrawalToJson);
  return o;
}
