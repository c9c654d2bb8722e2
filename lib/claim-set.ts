/**
 * Ids claimed once until they expire, in one process's memory: the memory driver of used SIWE
 * messages (plugins/auth/siwe-nonces.ts), in a single-process svc, and the same store in the
 * primary for every worker of `server.workers` (lib/cluster.ts `claimInPrimary`), so a message
 * is accepted once per replica, not once per worker.
 */
import { LRUCache } from 'lru-cache';

/** What {@link ClaimSet.claim} found. */
export type ClaimOutcome = 'claimed' | 'taken' | 'full';

/**
 * A bounded TTL set. Full of unexpired ids, it refuses new ones (`full`: callers fail closed)
 * rather than evicting one whose use could then be repeated.
 */
export class ClaimSet {
  /** Most unexpired ids held; past it, new ids are refused. */
  readonly maxItems: number;
  private readonly used: LRUCache<string, true>;

  /**
   * @param maxItems most unexpired ids held
   * @param now clock, ms (tests drive it)
   */
  constructor(maxItems: number, now: () => number = () => performance.now()) {
    this.maxItems = maxItems;
    this.used = new LRUCache<string, true>({ max: maxItems, ttl: 1, ttlAutopurge: false, ttlResolution: 0, perf: { now } });
  }

  /**
   * Records `id` for `ttlMs` unless it is recorded and unexpired already.
   * @param ttlMs how long it is remembered, ms (at least 1)
   * @returns `claimed` on first use, `taken` when recorded, `full` when the set holds `maxItems` unexpired ids
   */
  claim(id: string, ttlMs: number): ClaimOutcome {
    if (this.used.has(id)) return 'taken';
    if (this.used.size >= this.maxItems) {
      this.used.purgeStale();
      if (this.used.size >= this.maxItems) return 'full';
    }
    this.used.set(id, true, { ttl: Math.max(1, ttlMs) });
    return 'claimed';
  }
}
