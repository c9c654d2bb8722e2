/**
 * svc's one retry backoff: a wait that starts at `initialMs`, grows by `factor` per retry, stops
 * growing at `maxMs`, plus up to `jitterMs` at random. The failsafe plugin's retries, the cache
 * connectors' failsafe retries, the providers' bootstrap retries (spec §8), the websocket
 * upstream feed's reconnects and the Redis clients' reconnects all compute their waits here;
 * each keeps its own constants and, where it has one, its own bound on the exponent.
 */

/** The shape of a backoff (durations in ms). */
export interface Backoff {
  /** Wait before the first retry, ms. */
  initialMs: number;
  /** Growth per retry (2: doubling; below 1 the waits shrink, as eRPC allows). */
  factor: number;
  /** Largest wait before jitter, ms (default: none). */
  maxMs?: number;
  /** Random extra wait, 0..jitterMs, ms (default 0: none, and `random` is not called). */
  jitterMs?: number;
}

/**
 * The wait before retry `n`: `min(maxMs, initialMs × factor^(n-1)) + random() × jitterMs`.
 * @param b the backoff's shape
 * @param n the retry's number, 1-based (below 1 counts as 1)
 * @param random source of the jitter, 0..1 (tests inject one)
 * @returns the wait, ms
 */
export function backoffDelay(b: Readonly<Backoff>, n: number, random: () => number = Math.random): number {
  // A zero start stays zero however far the exponent goes (0 × Infinity would be NaN).
  const grown = b.initialMs === 0 ? 0 : b.initialMs * b.factor ** Math.max(0, n - 1);
  const base = b.maxMs === undefined ? grown : Math.min(b.maxMs, grown);
  const jitter = b.jitterMs ?? 0;
  return base + (jitter > 0 ? random() * jitter : 0);
}
