/**
 * The memory tier: an LRU bounded both in entries (`maxItems`) and in bytes
 * (`maxTotalSize`, keys and values), with per-entry TTLs (lru-cache). Answers synchronously, so a
 * hit costs no promise hop inside the tier.
 */
import { LRUCache } from 'lru-cache';
import { reverseKey, wireSize, type CacheEntry, type Connector } from './types.ts';

/**
 * Heap charged per entry on top of its key and result characters: the entry object and its
 * numbers, the string headers, the LRU's map slot and index arrays. Measured, not guessed: the
 * bench's write-back section fills the tier with 100,000 `eth_getBalance` answers and compares
 * the heap they hold after a full GC with what the tier accounted (about 455 bytes per entry for
 * an 81-character key and a 9-character result), so `maxTotalSize` bounds the real heap.
 */
export const ENTRY_OVERHEAD_BYTES = 360;

type Value = CacheEntry | string;

/** See the module comment. */
export class MemoryConnector implements Connector {
  readonly driver = 'memory' as const;
  private readonly lru: LRUCache<string, Value>;

  /**
   * @param id connector id
   * @param opts `maxItems` entries, `maxTotalSize` bytes
   */
  constructor(
    readonly id: string,
    opts: { maxItems: number; maxTotalSize: number },
  ) {
    this.lru = new LRUCache<string, Value>({
      max: opts.maxItems,
      maxSize: opts.maxTotalSize,
      sizeCalculation: (v, k) => k.length + ENTRY_OVERHEAD_BYTES + (typeof v === 'string' ? v.length : wireSize(v.wire)),
    });
  }

  /** Entries held (reverse-index pointers included). */
  get size(): number {
    return this.lru.size;
  }

  /** Bytes held, as charged against `maxTotalSize`. */
  get totalSize(): number {
    return this.lru.calculatedSize;
  }

  open(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.lru.clear();
    return Promise.resolve();
  }

  get(partition: string, range: string): CacheEntry | undefined {
    const v = this.lru.get(`${partition}#${range}`);
    return typeof v === 'object' ? v : undefined;
  }

  getReverse(network: string, range: string): CacheEntry | undefined {
    const pk = this.lru.get(reverseKey(network, range));
    return typeof pk === 'string' ? this.get(pk, range) : undefined;
  }

  set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): void {
    const opts = ttlMs > 0 ? { ttl: ttlMs } : undefined;
    this.lru.set(`${partition}#${range}`, entry, opts);
    if (reverseNetwork !== undefined) this.lru.set(reverseKey(reverseNetwork, range), partition, opts);
  }

  delete(partition: string, range: string): void {
    this.lru.delete(`${partition}#${range}`);
  }
}
