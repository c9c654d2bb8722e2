/**
 * JSON-RPC calls → BDS unary calls, as eRPC maps them (clients/grpc_bds_client.go): which RPC serves which method, the request
 * built from the params, and how the answer becomes the JSON-RPC result. eth_chainId, eth_getBlockByNumber, eth_getBlockByHash,
 * eth_getTransactionByHash, eth_getTransactionReceipt, eth_getBlockReceipts and eth_getLogs; BDS has no RPC for any other method
 * (eth_blockNumber included), and {@link planCall} refuses them with {@link Unservable} (`method`).
 *
 * Params BDS cannot carry (block tags in `eth_getLogs`, eRPC refuses them too; a malformed hash) are {@link Unservable} as well,
 * marked `params`, not a client error: the call goes to another upstream, whose node answers the JSON-RPC error a client expects,
 * and the method stays served here for the calls whose params BDS can carry. Params no node accepts either (`eth_getLogs` with
 * both `blockHash` and a range) are {@link InvalidParams}: the client's error, answered as a node answers it.
 */
import { blockToJson, logToJson, qty, receiptToJson, transactionToJson } from './to-json.ts';

/** What BDS cannot carry: the whole `method` (no RPC for it) or only these `params`. */
export type UnservableKind = 'method' | 'params';

/** A call BDS cannot carry: the upstream refuses it before sending anything and the call goes to another upstream. */
export class Unservable extends Error {
  override readonly name = 'Unservable';
  /**
   * @param message why, without the params' values
   * @param kind `method` when BDS has no RPC for the method, `params` when only these params cannot be carried
   */
  constructor(
    message: string,
    readonly kind: UnservableKind = 'params',
  ) {
    super(message);
  }
}

/** Params every node refuses (JSON-RPC -32602), so no upstream is asked: the message is the one geth answers. */
export class InvalidParams extends Error {
  override readonly name = 'InvalidParams';
}

/** How a BDS answer becomes the JSON-RPC result. */
export type BdsAnswer =
  /** At once, from the decoded response (a block, a transaction, a receipt, the chain id: bounded by the model). */
  | { one: (response: Record<string, unknown>) => unknown }
  /**
   * Entry by entry, from the response's repeated field `many` (logs, block receipts: as many as the server sends), each decoded and
   * converted on its own, so ./transport.ts can yield to the event loop between slices of them.
   */
  | { many: string; each: (entry: Record<string, unknown>) => unknown };

/** The RPCs of `bds.evm.RPCQueryService` svc calls. */
export type BdsRpc = 'ChainId' | 'GetBlockByNumber' | 'GetBlockByHash' | 'GetLogs' | 'GetTransactionByHash' | 'GetTransactionReceipt' | 'GetBlockReceipts';

/** One JSON-RPC call as a BDS call. */
export interface BdsPlan {
  /** The RPC to call. */
  rpc: BdsRpc;
  /** Its request message, as a plain object (bytes as Buffers, 64-bit numbers as decimal strings). */
  request: Record<string, unknown>;
  /** How its answer becomes the JSON-RPC result (the conversions throw MalformedModel on a value the model cannot hold). */
  answer: BdsAnswer;
}

/** Every method BDS serves. */
export const BDS_METHODS: readonly string[] = [
  'eth_chainId',
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getTransactionByHash',
  'eth_getTransactionReceipt',
  'eth_getBlockReceipts',
  'eth_getLogs',
];

const TAGS = new Set(['latest', 'earliest', 'pending', 'safe', 'finalized']);
const HEX32 = /^0x[0-9a-fA-F]{64}$/;
const HEX20 = /^0x[0-9a-fA-F]{40}$/;
const NUMBER = /^0x[0-9a-fA-F]{1,16}$/;

/** A 32-byte hash param as bytes. */
function hash32(v: unknown, what: string): Buffer {
  if (typeof v !== 'string' || !HEX32.test(v)) throw new Unservable(`${what} is not a 32-byte hex hash`);
  return Buffer.from(v.slice(2), 'hex');
}

/** A block number param in canonical hex (`0x1a`), or undefined when it is not one. */
function blockNumberHex(v: unknown): string | undefined {
  if (typeof v !== 'string' || !NUMBER.test(v)) return undefined;
  return `0x${BigInt(v).toString(16)}`;
}

/** A block parameter (number, tag, hash, or EIP-1898 object) as the number-or-tag string or the hash BDS takes. */
function blockRef(v: unknown): { number: string } | { hash: Buffer } {
  if (typeof v === 'string') {
    if (TAGS.has(v)) return { number: v };
    const n = blockNumberHex(v);
    if (n !== undefined) return { number: n };
    if (HEX32.test(v)) return { hash: hash32(v, 'block hash') };
  } else if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    // EIP-1898: `requireCanonical` is moot for a store of canonical blocks.
    if ('blockHash' in o) return { hash: hash32(o.blockHash, 'blockHash') };
    if ('blockNumber' in o) return blockRef(o.blockNumber);
  }
  throw new Unservable('block parameter is not a block number, tag or hash');
}

function paramList(params: unknown): unknown[] {
  if (params === undefined || params === null) return [];
  if (!Array.isArray(params)) throw new Unservable('params are not a list');
  return params;
}

function includeTxs(v: unknown): boolean {
  if (typeof v !== 'boolean') throw new Unservable('the second param (include transactions) is not a boolean');
  return v;
}

/** An address or list of addresses (`eth_getLogs`). */
function addresses(v: unknown): Buffer[] {
  if (v === undefined || v === null) return [];
  const list = Array.isArray(v) ? v : [v];
  return list.map((a) => {
    if (typeof a !== 'string' || !HEX20.test(a)) throw new Unservable('address is not a 20-byte hex address');
    return Buffer.from(a.slice(2), 'hex');
  });
}

/** The topics filter: a null position stays an empty filter, so later positions keep their place. */
function topics(v: unknown): Array<{ values: Buffer[] }> {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Unservable('topics is not a list');
  return v.map((t) => {
    if (t === null) return { values: [] };
    const list = Array.isArray(t) ? t : [t];
    return { values: list.filter((x) => x !== null).map((x) => hash32(x, 'topic')) };
  });
}

/** A `fromBlock`/`toBlock` as a decimal uint64; a tag BDS cannot resolve is unservable (eRPC refuses tags here too). */
function logBound(v: unknown, which: string): string | undefined {
  if (v === undefined) return undefined;
  const n = blockNumberHex(v);
  if (n === undefined)
    throw new Unservable(`${which} ${typeof v === 'string' && TAGS.has(v) ? `"${v}" (a block tag)` : ''} is not a block number BDS can take`);
  return BigInt(n).toString(10);
}

/**
 * The BDS call of one JSON-RPC call.
 * @param method the JSON-RPC method
 * @param params its params (after interpolation)
 * @param chainId the chain svc expects of this upstream (asserted on every request that has the field), when configured
 * @throws Unservable for a method BDS has no RPC for (`method`), or params it cannot carry (`params`)
 * @throws InvalidParams for params no node accepts
 */
export function planCall(method: string, params: unknown, chainId: number | undefined): BdsPlan {
  const chain = chainId === undefined ? {} : { chainId: String(chainId) };
  switch (method) {
    case 'eth_chainId':
      return { rpc: 'ChainId', request: {}, answer: { one: (r) => qty(r.chainId as string) } };
    case 'eth_getBlockByNumber':
    case 'eth_getBlockByHash': {
      const p = paramList(params);
      const full = includeTxs(p[1]);
      const ref = method === 'eth_getBlockByHash' ? { hash: hash32(p[0], 'block hash') } : blockRef(p[0]);
      const answer: BdsAnswer = { one: (r) => blockToJson(r, full) };
      if ('hash' in ref) return { rpc: 'GetBlockByHash', request: { blockHash: ref.hash, includeTransactions: full, ...chain }, answer };
      return { rpc: 'GetBlockByNumber', request: { blockNumber: ref.number, includeTransactions: full, ...chain }, answer };
    }
    case 'eth_getTransactionByHash':
      return {
        rpc: 'GetTransactionByHash',
        request: { transactionHash: hash32(paramList(params)[0], 'transaction hash'), ...chain },
        answer: { one: (r) => (r.transaction ? transactionToJson(r.transaction as Record<string, unknown>) : null) },
      };
    case 'eth_getTransactionReceipt':
      return {
        rpc: 'GetTransactionReceipt',
        request: { transactionHash: hash32(paramList(params)[0], 'transaction hash'), ...chain },
        answer: { one: (r) => (r.receipt ? receiptToJson(r.receipt as Record<string, unknown>) : null) },
      };
    case 'eth_getBlockReceipts': {
      const ref = blockRef(paramList(params)[0]);
      return {
        rpc: 'GetBlockReceipts',
        request: { ...('hash' in ref ? { blockHash: ref.hash } : { blockNumber: ref.number }), ...chain },
        answer: { many: 'receipts', each: receiptToJson },
      };
    }
    case 'eth_getLogs': {
      const f = paramList(params)[0];
      if (f === null || typeof f !== 'object' || Array.isArray(f)) throw new Unservable('the filter is not an object');
      const o = f as Record<string, unknown>;
      const request: Record<string, unknown> = { addresses: addresses(o.address), topics: topics(o.topics), ...chain };
      // geth's refusal, word for word: a range and a block hash contradict each other whichever upstream is asked.
      if (o.blockHash != null && (o.fromBlock != null || o.toBlock != null))
        throw new InvalidParams('cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other');
      if (o.blockHash !== undefined) request.blockHash = hash32(o.blockHash, 'blockHash');
      else {
        // A node's default range is latest..latest, which BDS cannot resolve: both bounds must be numbers.
        const from = logBound(o.fromBlock ?? 'latest', 'fromBlock');
        const to = logBound(o.toBlock ?? 'latest', 'toBlock');
        request.fromBlock = from;
        request.toBlock = to;
      }
      return { rpc: 'GetLogs', request, answer: { many: 'logs', each: logToJson } };
    }
    default:
      throw new Unservable(`BDS has no RPC for ${method.slice(0, 64)}`, 'method');
  }
}
