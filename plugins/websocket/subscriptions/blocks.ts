/**
 * Block and log objects as the head follower (./follower.ts) reads them from a node and sends
 * them to subscribers: a block answer's number and hashes, the `newHeads` header of a block, and
 * a log of an abandoned block marked `removed`. ./follower.ts re-exports what it exported before.
 */

/** Fields of a block object that are not part of a `newHeads` header (geth sends none of them). */
const NOT_HEADER = new Set(['transactions', 'uncles', 'withdrawals', 'size', 'totalDifficulty']);

/** A block as read: number, hashes (lower-case) and the node's object. */
export interface BlockInfo {
  number: number;
  hash: string;
  parentHash: string;
  raw: Record<string, unknown>;
}

/**
 * A block object from a node answer, or undefined when it is not one (null: not known yet).
 * @param v an `eth_getBlockBy*` result
 */
export function asBlock(v: unknown): BlockInfo | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const n = typeof o.number === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(o.number) ? Number.parseInt(o.number, 16) : undefined;
  if (n === undefined || typeof o.hash !== 'string' || typeof o.parentHash !== 'string') return undefined;
  return { number: n, hash: o.hash.toLowerCase(), parentHash: o.parentHash.toLowerCase(), raw: o };
}

/**
 * The `newHeads` notification result of a block: its header, as geth sends it (the block's fields
 * but `transactions`, `uncles`, `withdrawals`, `size`, `totalDifficulty`), JSON.
 * @param raw the node's block object
 */
export function headerJson(raw: Record<string, unknown>): string {
  const h: Record<string, unknown> = {};
  for (const k of Object.keys(raw)) if (!NOT_HEADER.has(k)) h[k] = raw[k];
  return JSON.stringify(h);
}

/** A log's JSON with `removed: true` (a log of an abandoned block). */
export function removedJson(json: string): string {
  const o = JSON.parse(json) as Record<string, unknown>;
  o.removed = true;
  return JSON.stringify(o);
}
