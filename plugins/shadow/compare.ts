/**
 * How a shadow's answer is compared with the served one: by the canonical hash
 * consensus uses (`canonicalHash`), with the method's ignore fields (the upstream's
 * `shadow.ignoreFields`, else the built-in defaults), never by raw bytes
 * (two honest nodes differ in key order, spacing and hex letter case).
 */
import { canonicalHash, canonicalize, compileIgnorePaths, DEFAULT_IGNORE_FIELDS, firstDifference, type IgnorePaths } from 'svc-proxy/util';

/** Outcome label of `svc_shadow_comparison_total`. */
export type ShadowOutcome = 'match' | 'mismatch' | 'error';

/** What one comparison found. */
export interface Comparison {
  /** `match` or `mismatch` (`error` is decided by the caller: the shadow did not answer). */
  outcome: 'match' | 'mismatch';
  /** On a mismatch, when asked for: the path of the first differing field (`$.logs[3].data`, `$` for the root). */
  field?: string;
}

/** Ignore paths per method, compiled once (the defaults are constant). */
const IGNORE: ReadonlyMap<string, IgnorePaths> = new Map(Object.entries(DEFAULT_IGNORE_FIELDS).map(([m, paths]) => [m, compileIgnorePaths(paths)]));
const NONE: IgnorePaths = [];

/**
 * The compiled ignore paths of a method (`DEFAULT_IGNORE_FIELDS`: the `blockTimestamp` fields some
 * nodes add to logs and receipts).
 * @param method the JSON-RPC method name
 */
export function ignoreOf(method: string): IgnorePaths {
  return IGNORE.get(method) ?? NONE;
}

/**
 * Compares a shadow's result with the served one.
 * @param method the JSON-RPC method (selects the ignore fields)
 * @param served the served result value
 * @param shadow the shadow's result value
 * @param withField also find the first differing field on a mismatch (costs a second canonical
 *   walk of both values, so only when a debug log will print it)
 * @param configured the shadow upstream's compiled `ignoreFields`: a method it names uses exactly
 *   those paths instead of the built-in ones
 */
export function compareResults(
  method: string,
  served: unknown,
  shadow: unknown,
  withField: boolean,
  configured?: ReadonlyMap<string, IgnorePaths>,
): Comparison {
  const ignore = configured?.get(method) ?? ignoreOf(method);
  if (canonicalHash(served, ignore) === canonicalHash(shadow, ignore)) return { outcome: 'match' };
  if (!withField) return { outcome: 'mismatch' };
  return { outcome: 'mismatch', field: firstDifference(canonicalize(served, ignore), canonicalize(shadow, ignore)) ?? '$' };
}
