/**
 * EVM block references and finality, shared by the EVM plugins: which param
 * of which method holds a block reference, which methods are always realtime or always
 * finalized, and how a call is classified as `finalized`, `unfinalized`, `realtime` or `unknown`.
 */
import type { Finality } from '../../core/wire/records.ts';

/** Block tags (`latest`, `pending`, `safe`, `finalized`, `earliest`). */
export const BLOCK_TAGS: ReadonlySet<string> = new Set(['latest', 'pending', 'safe', 'finalized', 'earliest']);

/** Methods whose answer changes with every block: always `realtime`. */
export const REALTIME_METHODS: ReadonlySet<string> = new Set([
  'eth_blockNumber',
  'eth_gasPrice',
  'eth_maxPriorityFeePerGas',
  'eth_blobBaseFee',
  'eth_syncing',
  'eth_hashrate',
  'eth_mining',
  'net_peerCount',
  'erigon_blockNumber',
  'eth_newBlockFilter',
  'eth_newPendingTransactionFilter',
  'eth_getFilterChanges',
]);

/**
 * Filter methods whose state lives on one node (spec §2.8 #4): a filter id from one upstream
 * means nothing to another, so they need exactly one candidate upstream (evm-methods) and are
 * never cached (cache).
 */
export const STATEFUL_METHODS: ReadonlySet<string> = new Set([
  'eth_newFilter',
  'eth_newBlockFilter',
  'eth_newPendingTransactionFilter',
  'eth_getFilterChanges',
  'eth_getFilterLogs',
  'eth_uninstallFilter',
]);

/** Methods whose answer never changes: always `finalized`. */
export const FINALIZED_METHODS: ReadonlySet<string> = new Set(['eth_chainId', 'net_version', 'web3_clientVersion']);

/**
 * Position of the block parameter for methods that take one. `filter` means a getLogs-style
 * filter object with `fromBlock`/`toBlock` (or `blockHash`) at param 0.
 */
export const BLOCK_PARAM: Readonly<Record<string, number | 'filter'>> = {
  eth_getBalance: 1,
  eth_getCode: 1,
  eth_getTransactionCount: 1,
  eth_getStorageAt: 2,
  eth_call: 1,
  eth_estimateGas: 1,
  eth_getProof: 2,
  eth_feeHistory: 1,
  eth_createAccessList: 1,
  eth_getBlockByNumber: 0,
  eth_getBlockTransactionCountByNumber: 0,
  eth_getUncleCountByBlockNumber: 0,
  eth_getTransactionByBlockNumberAndIndex: 0,
  eth_getUncleByBlockNumberAndIndex: 0,
  eth_getBlockReceipts: 0,
  debug_traceBlockByNumber: 0,
  debug_traceCall: 1,
  trace_block: 0,
  trace_call: 2,
  trace_replayBlockTransactions: 0,
  eth_getLogs: 'filter',
  trace_filter: 'filter',
};

/** A block reference found in a call's params. */
export type BlockRef =
  | { kind: 'tag'; tag: string }
  | { kind: 'number'; number: number }
  | { kind: 'hash'; hash: string }
  | { kind: 'range'; from: BlockRef; to: BlockRef };

/** Parses a hex quantity (`0x1b4`) or a JS number into a block number; undefined otherwise. */
export function parseBlockNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? v : undefined;
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]+$/.test(v)) return undefined;
  const n = Number.parseInt(v, 16);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** A block number as a hex quantity. */
export function toHex(n: number): string {
  return `0x${n.toString(16)}`;
}

/** Classifies one block-reference value (tag, hex number, EIP-1898 object). */
export function refOf(v: unknown): BlockRef | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') {
    if (BLOCK_TAGS.has(v)) return { kind: 'tag', tag: v };
    if (/^0x[0-9a-fA-F]{64}$/.test(v)) return { kind: 'hash', hash: v };
    const n = parseBlockNumber(v);
    return n === undefined ? undefined : { kind: 'number', number: n };
  }
  if (typeof v === 'object') {
    const o = v as { blockHash?: unknown; blockNumber?: unknown };
    if (typeof o.blockHash === 'string') return { kind: 'hash', hash: o.blockHash };
    if (o.blockNumber !== undefined) return refOf(o.blockNumber);
  }
  return undefined;
}

/**
 * The block reference of a call, if its method takes one. A method whose block param is
 * omitted defaults to `latest` (the node's own default).
 */
export function blockRefOf(method: string, params: unknown): BlockRef | undefined {
  const pos = BLOCK_PARAM[method];
  if (pos === undefined) return undefined;
  const list = Array.isArray(params) ? params : [];
  if (pos === 'filter') {
    const f = list[0] as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown } | undefined;
    if (!f || typeof f !== 'object') return undefined;
    if (typeof f.blockHash === 'string') return { kind: 'hash', hash: f.blockHash };
    const from = refOf(f.fromBlock ?? 'latest');
    const to = refOf(f.toBlock ?? 'latest');
    if (!from || !to) return undefined;
    return { kind: 'range', from, to };
  }
  return refOf(list[pos] ?? 'latest');
}

/** Highest concrete block number of a reference, if any (for ranges, the `to` end). */
export function highestNumberOf(ref: BlockRef | undefined): number | undefined {
  if (!ref) return undefined;
  if (ref.kind === 'number') return ref.number;
  if (ref.kind === 'range') return highestNumberOf(ref.to);
  return undefined;
}

/** True when a reference is a block tag, or a range with a tag at either end. */
function hasTag(r: BlockRef): boolean {
  return r.kind === 'tag' ? true : r.kind === 'range' ? hasTag(r.from) || hasTag(r.to) : false;
}

/**
 * Finality class of a call. Always-finalized and always-realtime methods by
 * table; block tags are realtime (never finalized: a cached `finalized` tag would go stale); a
 * concrete block at or below the network's finalized block is `finalized`, above it
 * `unfinalized`; anything else (hash lookups, unknown finalized block) is `unknown`.
 * @param finalizedBlock the network's highest finalized block; undefined when unknown. 0 is a
 *   known finalized genesis (a young chain): block 0 is `finalized`, every later block `unfinalized`.
 */
export function classifyFinality(method: string, params: unknown, finalizedBlock: number | undefined): Finality {
  if (FINALIZED_METHODS.has(method)) return 'finalized';
  if (REALTIME_METHODS.has(method)) return 'realtime';
  const ref = blockRefOf(method, params);
  if (!ref) return 'unknown';
  if (hasTag(ref)) return 'realtime';
  const n = highestNumberOf(ref);
  if (n === undefined || finalizedBlock === undefined || finalizedBlock < 0) return 'unknown';
  return n <= finalizedBlock ? 'finalized' : 'unfinalized';
}

/**
 * Methods that change state (a duplicate broadcast is not free): never hedged (failsafe), never
 * voted on by consensus (which broadcasts `eth_sendRawTransaction` through every slot instead).
 */
export const WRITE_METHODS: ReadonlySet<string> = new Set([
  'eth_sendRawTransaction',
  'eth_sendTransaction',
  'eth_sendUserOperation',
  'eth_sendBundle',
  'eth_sendPrivateTransaction',
  'eth_sendRawTransactionConditional',
  'personal_sendTransaction',
]);
