/**
 * Metric label values taken from client input: method names, user agents,
 * user ids. Bounded so no client can multiply series or grow one.
 */

/** Longest label value taken from client input, characters. */
export const MAX_LABEL_LENGTH = 64;

/**
 * A label whose values come from clients: bounded in count (the first `max` distinct values
 * pass, later new values become `other`) and in length (cut to {@link MAX_LABEL_LENGTH}), so a
 * client can neither multiply series nor grow one.
 */
export class BoundedLabel {
  private readonly seen = new Set<string>();
  /** @param max distinct values kept */
  constructor(readonly max: number) {}
  /** The value to use as a label. */
  value(raw: string): string {
    const v = raw.length > MAX_LABEL_LENGTH ? raw.slice(0, MAX_LABEL_LENGTH) : raw;
    if (this.seen.has(v)) return v;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(v);
    return v;
  }
}

/**
 * Client family from a User-Agent: the first product token, lower-cased (`ethers/6.13` →
 * `ethers`, `viem/2.21` → `viem`, `Mozilla/5.0 ...` → `browser`). `unknown` when empty.
 */
export function agentName(ua: string | undefined): string {
  if (!ua) return 'unknown';
  const t = ua.trim();
  if (t.startsWith('Mozilla/')) return 'browser';
  const m = /^([A-Za-z0-9._@-]{1,40})/.exec(t);
  return m ? (m[1] as string).toLowerCase() : 'unknown';
}
