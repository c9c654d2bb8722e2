/**
 * Canonical answers: what "the same answer" means when consensus groups upstream
 * answers and a shadow upstream's answer is compared with the served one. Two answers are the
 * same when their canonical forms hash the same: object key order, JSON number formatting and
 * the letter case of hex strings do not matter, hex quantities lose their leading zeros, and
 * the fields a method's `ignoreFields` names (timestamps some nodes add) are dropped. The raw
 * bytes are never compared: two honest nodes differ in spacing and key order.
 */
import { createHash } from 'node:crypto';
import stringify from 'safe-stable-stringify';

/**
 * Fields dropped before hashing, per method (eRPC's defaults): paths of
 * dot-separated segments, `*` for any array element or object key.
 */
export const DEFAULT_IGNORE_FIELDS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  eth_getLogs: ['*.blockTimestamp'],
  eth_getTransactionReceipt: ['blockTimestamp', 'logs.*.blockTimestamp'],
  eth_getBlockReceipts: ['*.blockTimestamp', '*.logs.*.blockTimestamp'],
});

/** Compiled ignore paths: segment lists. */
export type IgnorePaths = readonly (readonly string[])[];

/** Splits `ignoreFields` paths once (`a.*.b` → `['a','*','b']`); empty segments are dropped. */
export function compileIgnorePaths(paths: readonly string[] | undefined): IgnorePaths {
  return (paths ?? []).map((p) => p.split('.').filter((s) => s !== '')).filter((p) => p.length > 0);
}

const HEX = /^0x[0-9a-fA-F]*$/;

/**
 * One hex string in canonical form: lower case; a quantity (any length other than an address's
 * 40 or a hash's 64 digits, at most 64 digits) without leading zeros, so `0x01` and `0x1` agree.
 */
function canonicalHex(s: string): string {
  const lower = s.toLowerCase();
  const digits = lower.length - 2;
  if (digits === 40 || digits === 64 || digits > 64 || digits < 2) return lower;
  let i = 2;
  while (i < lower.length - 1 && lower.charCodeAt(i) === 48) i++;
  return i === 2 ? lower : `0x${lower.slice(i)}`;
}

/** The sub-paths that apply below key `k` (a `*` segment matches every key and index). */
function below(paths: IgnorePaths, k: string): { drop: boolean; rest: IgnorePaths } {
  let drop = false;
  let rest: (readonly string[])[] | undefined;
  for (const p of paths) {
    if (p[0] !== k && p[0] !== '*') continue;
    if (p.length === 1) drop = true;
    else (rest ??= []).push(p.slice(1));
  }
  return { drop, rest: rest ?? [] };
}

/**
 * The canonical form of a JSON value (see the module comment).
 * @param value a parsed JSON value (an upstream result)
 * @param ignore compiled ignore paths for the method
 */
export function canonicalize(value: unknown, ignore: IgnorePaths = []): unknown {
  if (typeof value === 'string') return HEX.test(value) ? canonicalHex(value) : value;
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    if (ignore.length === 0) return value.map((v) => canonicalize(v));
    return value.map((v, i) => canonicalize(v, below(ignore, String(i)).rest));
  }
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value)) {
    const sub = ignore.length === 0 ? undefined : below(ignore, k);
    if (sub?.drop) continue;
    out[k] = canonicalize((value as Record<string, unknown>)[k], sub?.rest);
  }
  return out;
}

/**
 * SHA-256 (hex) of a value's canonical form, with object keys sorted.
 * @param value a parsed JSON result
 * @param ignore compiled ignore paths for the method
 */
export function canonicalHash(value: unknown, ignore: IgnorePaths = []): string {
  return createHash('sha256')
    .update(stringify(canonicalize(value, ignore)) ?? 'null')
    .digest('hex');
}

/** True for an answer that carries nothing: null, `[]`, `{}`, `""` or `"0x"` (eRPC's "empty"). */
export function isEmptyResult(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value === 'string') return value === '' || value === '0x';
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

/** Deepest path `firstDifference` walks; a deeper difference is reported at this depth. */
const MAX_DIFF_DEPTH = 32;

/**
 * The path of the first field where two canonical forms differ (`$` for the root, `$.logs[3].data`),
 * or undefined when they agree: the shadow plugin's debug log names it.
 * @param a a canonical form ({@link canonicalize})
 * @param b another canonical form
 */
export function firstDifference(a: unknown, b: unknown, path = '$', depth = 0): string | undefined {
  if (a === b) return undefined;
  if (depth >= MAX_DIFF_DEPTH || a === null || b === null || typeof a !== 'object' || typeof b !== 'object' || Array.isArray(a) !== Array.isArray(b)) {
    return stringify(a) === stringify(b) ? undefined : path;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (i >= a.length || i >= b.length) return `${path}[${i}]`;
      const d = firstDifference(a[i], b[i], `${path}[${i}]`, depth + 1);
      if (d) return d;
    }
    return undefined;
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  for (const k of new Set([...Object.keys(ra), ...Object.keys(rb)].sort())) {
    if (!(k in ra) || !(k in rb)) return `${path}.${k}`;
    const d = firstDifference(ra[k], rb[k], `${path}.${k}`, depth + 1);
    if (d) return d;
  }
  return undefined;
}
