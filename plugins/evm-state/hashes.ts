/**
 * The canonical block hashes a network's state polls saw, by height, and the reorgs they reveal
 * (reorg-aware caching): a bounded record kept by the network's chain state in ./chain.ts, which
 * answers the reorg questions of the cache and the poller through it.
 */

/** Recent heights whose canonical hash is remembered for reorg checks. */
export const HASH_HEIGHTS = 256;
/** Recent reorgs remembered for {@link CanonicalHashes.reorgedSince}. */
export const MAX_REORGS = 32;

/** Canonical block hashes by height (the last {@link HASH_HEIGHTS}) and the last {@link MAX_REORGS} reorgs. */
export class CanonicalHashes {
  private readonly hashes = new Map<number, string>();
  private readonly reorgs: Array<{ at: number; from: number }> = [];

  /** @param now clock in ms (the chain state's) */
  constructor(private readonly now: () => number) {}

  /**
   * Records the hash of a canonical block. A hash that differs from the one recorded for that
   * height is a reorg. When the new block's parent hash matches the block recorded below it, the
   * fork is exactly at `n`; when it does not, or nothing is recorded below, the depth is unknown
   * and every block above the finalized head is suspect.
   * @param n block number
   * @param hash the block's hash, lower case
   * @param parentHash the block's parent hash, lower case, when known
   * @param finalized the network's highest finalized block
   */
  observe(n: number, hash: string, parentHash: string | undefined, finalized: number): void {
    const before = this.hashes.get(n);
    const conservative = finalized + 1;
    let forkFrom: number | undefined;
    const p = parentHash;
    const below = n > 0 ? this.hashes.get(n - 1) : undefined;
    if (p !== undefined && below !== undefined && below !== p) forkFrom = Math.min(conservative, n - 1);
    else if (before !== undefined && before !== hash) forkFrom = p !== undefined && below === p ? n : Math.min(conservative, n);
    if (p !== undefined && n > 0) this.remember(n - 1, p);
    this.remember(n, hash);
    if (forkFrom === undefined) return;
    // Heights between the fork and the parent are no longer known to be canonical.
    for (const k of this.hashes.keys()) if (k >= forkFrom && k < n - 1) this.hashes.delete(k);
    this.reorgs.push({ at: this.now(), from: forkFrom });
    if (this.reorgs.length > MAX_REORGS) this.reorgs.shift();
  }

  /** The hash of block `n`, if recorded. */
  hashAt(n: number): string | undefined {
    return this.hashes.get(n);
  }

  /**
   * The highest recorded height below `n - 1` and above `finalized` when nothing is recorded at
   * `n - 1` (see NetworkChainState.unverifiedBelow).
   * @param n block number
   * @param finalized the network's highest finalized block
   */
  unverifiedBelow(n: number, finalized: number): number | undefined {
    if (this.hashes.has(n - 1)) return undefined;
    let m: number | undefined;
    for (const k of this.hashes.keys()) if (k < n - 1 && (m === undefined || k > m)) m = k;
    return m !== undefined && m > finalized ? m : undefined;
  }

  /** The highest height below `n` whose hash is recorded, if any. */
  recordedBelow(n: number): number | undefined {
    let m: number | undefined;
    for (const k of this.hashes.keys()) if (k < n && (m === undefined || k > m)) m = k;
    return m;
  }

  /** The last reorg seen: when (ms) and the lowest height it may have replaced; undefined when none. */
  get lastReorg(): { at: number; from: number } | undefined {
    return this.reorgs[this.reorgs.length - 1];
  }

  /** Whether a reorg seen at or after `writtenAt` (ms) may have replaced block `n`. */
  reorgedSince(writtenAt: number, n: number): boolean {
    for (const r of this.reorgs) if (r.at >= writtenAt && n >= r.from) return true;
    return false;
  }

  private remember(n: number, hash: string): void {
    this.hashes.delete(n);
    this.hashes.set(n, hash);
    if (this.hashes.size > HASH_HEIGHTS) {
      // Forget the lowest recorded height (a Map keeps insertion order, not height order).
      let low = Infinity;
      for (const k of this.hashes.keys()) if (k < low) low = k;
      this.hashes.delete(low);
    }
  }
}
