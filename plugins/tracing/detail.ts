/**
 * The parts of eRPC's tracing that decide per call: `tracing.forceTraceMatchers` (a call whose
 * network and method match an entry is traced whatever the sampling) and the high-cardinality
 * attribute of `tracing.detailed` (the request's params). Pure; the plugin (./index.ts) taps them.
 */
import { MatcherCache } from 'svc-proxy/util';
import type { ForceTraceMatcher } from './schema.ts';

/** Characters of a call's params kept in the `svc.params` attribute (`detailed`). */
export const MAX_PARAMS_ATTRIBUTE = 1024;

/** Span attribute holding a call's params as JSON (`detailed` only). */
export const PARAMS_ATTRIBUTE = 'svc.params';

/**
 * Compiles `forceTraceMatchers` (eRPC's semantics: `network` and `method` patterns, `*`
 * wildcards, `|` for OR; both set: both must match; one set: that one; none: never matches).
 * @param matchers the configured entries
 * @returns a test of (network id `evm:<chainId>`, method), or undefined when there is no entry (nothing to test per call)
 */
export function compileForceTrace(matchers: readonly ForceTraceMatcher[]): ((network: string, method: string) => boolean) | undefined {
  const cache = new MatcherCache(256);
  const compiled = matchers
    .filter((m) => !!m.network || !!m.method)
    .map((m) => ({ network: m.network ? cache.get(m.network) : undefined, method: m.method ? cache.get(m.method) : undefined }));
  if (compiled.length === 0) return undefined;
  return (network, method) => compiled.some((m) => (!m.network || m.network.test(network)) && (!m.method || m.method.test(method)));
}

/**
 * A call's params as a bounded span attribute: JSON, cut at {@link MAX_PARAMS_ATTRIBUTE}
 * characters (with `…` when cut).
 * @param params the JSON-RPC params (any JSON value, or undefined)
 */
export function paramsAttribute(params: unknown): string {
  let json: string;
  try {
    json = JSON.stringify(params ?? null) ?? 'null';
  } catch {
    // A value JSON cannot write (a BigInt) is no reason to fail a call.
    json = '"(unserialisable)"';
  }
  return json.length > MAX_PARAMS_ATTRIBUTE ? `${json.slice(0, MAX_PARAMS_ATTRIBUTE)}…` : json;
}
