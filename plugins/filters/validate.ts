/**
 * What a filter read from a shared store must be before it is served: an entry of the fleet's
 * Redis (or the primary's values) may be corrupt, old or written by something else, and one entry
 * must never decide what is read or delivered beyond its own bounds. Every field is checked as a
 * client's params are: the criteria by {@link parseNewFilter}'s rules, hashes as 32-byte hex, the
 * window at most {@link WINDOW_BLOCKS} blocks in ascending order, each kept log an object of its
 * own block, a pending filter's node id at most {@link MAX_ID_LENGTH} characters.
 */
import { WINDOW_BLOCKS } from './cursor.ts';
import { MAX_ID_LENGTH, parseNewFilter } from './params.ts';
import type { FilterState } from './store.ts';

/** Longest owner, network or upstream id accepted from a store, characters. */
const MAX_NAME_LENGTH = 256;
const HASH = /^0x[0-9a-f]{64}$/;

const isName = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_NAME_LENGTH;
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** Whether criteria are what {@link parseNewFilter} makes: valid, bounded and canonical. */
function isCriteria(c: unknown): boolean {
  if (c === undefined) return true;
  try {
    return JSON.stringify(parseNewFilter([c])) === JSON.stringify(c);
  } catch {
    return false;
  }
}

/** Whether a window is 1..{@link WINDOW_BLOCKS} blocks, ascending, each with its own logs only. */
function isWindow(w: unknown): boolean {
  if (!Array.isArray(w) || w.length === 0 || w.length > WINDOW_BLOCKS) return false;
  let prev = -1;
  for (const b of w as unknown[]) {
    if (typeof b !== 'object' || b === null || Array.isArray(b)) return false;
    const { n, h, logs, b: bytes } = b as Record<string, unknown>;
    if (!isCount(n) || n <= prev || typeof h !== 'string' || !HASH.test(h)) return false;
    prev = n;
    if (bytes !== undefined && !isCount(bytes)) return false;
    if (logs === undefined) continue;
    if (!Array.isArray(logs)) return false;
    for (const l of logs as unknown[]) {
      if (typeof l !== 'object' || l === null || Array.isArray(l)) return false;
      const bh = (l as { blockHash?: unknown }).blockHash;
      if (typeof bh !== 'string' || bh.toLowerCase() !== h) return false;
    }
  }
  return true;
}

/**
 * Whether a value read from a shared store is a filter svc could have written (anything else is
 * not served: the filter reads as unknown).
 * @param s the parsed JSON value
 */
export function isFilterState(s: unknown): s is FilterState {
  if (typeof s !== 'object' || s === null || Array.isArray(s)) return false;
  const f = s as Partial<FilterState>;
  if (f.v !== 1 || !isCount(f.seq) || !isName(f.owner) || !isName(f.net)) return false;
  if (f.kind === 'pending') {
    const u = f.upstream as { id?: unknown; filter?: unknown } | undefined;
    return typeof u === 'object' && u !== null && isName(u.id) && typeof u.filter === 'string' && u.filter.length > 0 && u.filter.length <= MAX_ID_LENGTH;
  }
  if (f.kind !== 'logs' && f.kind !== 'blocks') return false;
  if (f.kind === 'blocks' && f.criteria !== undefined) return false;
  return isCriteria(f.criteria) && isWindow(f.window);
}
