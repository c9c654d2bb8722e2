/**
 * What a call's cache entry is keyed by and rests on: the partition
 * (`<network>:<block reference>`), the range key (`<method>:<params hash>`, never the JSON-RPC
 * id), which methods are never cached, what counts as empty, and the block an answer names
 * (to re-classify a hash lookup, and to remember the hash an unfinalized entry rests on).
 */
import {
  BLOCK_PARAM,
  type BlockRef,
  blockRefOf,
  FINALIZED_METHODS,
  highestNumberOf,
  parseBlockNumber,
  REALTIME_METHODS,
  STATEFUL_METHODS,
} from 'svc-proxy/util';

/** Methods that write, sign, or hold node-side state: never cached, whatever the policy. */
const NEVER_CACHED: ReadonlySet<string> = new Set([
  'eth_sendRawTransaction',
  'eth_sendTransaction',
  'eth_sendUserOperation',
  'eth_sendBundle',
  'eth_sendPrivateTransaction',
  'eth_cancelPrivateTransaction',
  'eth_sign',
  'eth_signTransaction',
  'eth_signTypedData',
  'eth_signTypedData_v3',
  'eth_signTypedData_v4',
  'eth_accounts',
  'eth_coinbase',
  'eth_subscribe',
  'eth_unsubscribe',
]);

/** Method namespaces that administer or mutate a node: never cached. */
const NEVER_CACHED_PREFIXES = ['eth_send', 'personal_', 'admin_', 'miner_', 'txpool_', 'anvil_', 'hardhat_', 'evm_', 'engine_', 'clique_', 'debug_set'];

/** True when no policy may cache this method (writes, signing, filters, node administration). */
export function neverCached(method: string): boolean {
  // The stateful filter methods: a filter lives on one node and changes on every poll.
  if (NEVER_CACHED.has(method) || STATEFUL_METHODS.has(method)) return true;
  for (const p of NEVER_CACHED_PREFIXES) if (method.startsWith(p)) return true;
  return false;
}

/**
 * An empty result: `null`, `""`, `"0x"`, `"0x0"`, `[]` or `{}`. Tested on the
 * JSON text, so a cache write never parses a large answer to find out.
 * @param json the result's exact JSON text
 */
export function isEmptyJson(json: string): boolean {
  if (json.length > 8) return false;
  switch (json.replace(/\s+/g, '')) {
    case 'null':
    case '""':
    case '"0x"':
    case '"0x0"':
    case '[]':
    case '{}':
      return true;
    default:
      return false;
  }
}

/** Where a call's entry lives. */
export interface CallKey {
  /**
   * `<project>/<network>`: what the entry belongs to. The project is part of it because two
   * projects may serve different chains under one chain id (a fork and mainnet, both `evm:1`).
   */
  scope: string;
  /** `<scope>:<ref>`; `<scope>:*` for a lookup by transaction or block hash (reverse index). */
  partition: string;
  /** `<method>:<params hash>`. */
  range: string;
  /** True when the entry is found through the reverse index (the block is known only from the answer). */
  reverse: boolean;
  /** The call's block tag, when it reads one (its answer is realtime, never finalized). */
  tag?: string;
  /** The highest concrete block the call reads, when its params name one. */
  blockNumber?: number;
  /** True when the params name exactly one concrete block (a number or a hash), not a range. */
  single: boolean;
}

function refText(r: BlockRef): string {
  switch (r.kind) {
    case 'tag':
      return r.tag;
    case 'number':
      return String(r.number);
    case 'hash':
      return r.hash.toLowerCase();
    case 'range':
      return `${refText(r.from)}-${refText(r.to)}`;
  }
}

function tagOf(r: BlockRef): string | undefined {
  if (r.kind === 'tag') return r.tag;
  if (r.kind === 'range') return tagOf(r.to) ?? tagOf(r.from);
  return undefined;
}

/**
 * The key of a call, or undefined when the call must not be cached: it reads the `pending` block,
 * whose answer (a nonce, a balance) changes with every transaction sent, not with the head.
 * @param scope `<project>/<network>`, e.g. `main/evm:1`
 * @param method JSON-RPC method
 * @param params params as sent (before interpolation)
 * @param hash the params' canonical hash
 */
export function callKey(scope: string, method: string, params: unknown, hash: string): CallKey | undefined {
  const range = `${method}:${hash}`;
  if (BLOCK_PARAM[method] !== undefined) {
    const ref = blockRefOf(method, params);
    // A block param that is neither a tag, a number nor a hash: keyed by the whole params, read directly.
    if (!ref) return { scope, partition: `${scope}:?`, range, reverse: false, single: false };
    const tag = tagOf(ref);
    if (tag === 'pending' || (ref.kind === 'range' && tagOf(ref.from) === 'pending')) return undefined;
    return {
      scope,
      partition: `${scope}:${refText(ref)}`,
      range,
      reverse: false,
      tag,
      blockNumber: highestNumberOf(ref),
      single: ref.kind === 'number' || ref.kind === 'hash',
    };
  }
  if (REALTIME_METHODS.has(method)) return { scope, partition: `${scope}:latest`, range, reverse: false, tag: 'latest', single: false };
  if (FINALIZED_METHODS.has(method)) return { scope, partition: `${scope}:_`, range, reverse: false, single: false };
  return { scope, partition: `${scope}:*`, range, reverse: true, single: false };
}

/** The block an answer names: its number and hash, when it names exactly one block. */
export interface AnsweredBlock {
  number?: number;
  hash?: string;
}

const HASH = /^0x[0-9a-fA-F]{64}$/;

function blockOfObject(o: Record<string, unknown>, method: string): AnsweredBlock {
  // A block names itself by `number`/`hash`; a transaction, receipt or log by `blockNumber`/`blockHash`.
  const isBlock = method.includes('Block') && !method.includes('Transaction') && !method.includes('Receipts') && o.number !== undefined;
  const n = parseBlockNumber(isBlock ? o.number : o.blockNumber);
  const h = isBlock ? o.hash : o.blockHash;
  return { number: n, hash: typeof h === 'string' && HASH.test(h) ? h.toLowerCase() : undefined };
}

/**
 * The block an answer names (a block, a transaction, a receipt, or a list of them all in one
 * block). Reads only the top-level fields of a parsed value.
 * @param method the call's method
 * @param value the parsed result
 */
export function answeredBlock(method: string, value: unknown): AnsweredBlock {
  if (value === null || typeof value !== 'object') return {};
  if (!Array.isArray(value)) return blockOfObject(value as Record<string, unknown>, method);
  if (value.length === 0) return {};
  const first = value[0] as unknown;
  const last = value[value.length - 1] as unknown;
  if (first === null || typeof first !== 'object' || last === null || typeof last !== 'object') return {};
  const a = blockOfObject(first as Record<string, unknown>, method);
  const b = blockOfObject(last as Record<string, unknown>, method);
  // Several blocks (a log range): the highest block; no single hash to rest on.
  if (a.number !== b.number || a.hash !== b.hash) return { number: b.number ?? a.number };
  return a;
}
