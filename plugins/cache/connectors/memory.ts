/**
 * The memory tier: an LRU bounded both in entries (`maxItems`) and in bytes
 * (`maxTotalSize`, keys and values), with per-entry TTLs (lru-cache). Answers synchronously, so a
 * hit costs no promise hop inside the tier. Entries are packed into one string each (see
 * {@link PACKED_MAX_CHARS}): what a full tier costs every major GC is its number of objects.
 */
import { LRUCache } from 'lru-cache';
import type { Finality } from 'svc-proxy/plugin';
import { reverseKey, wireSize, type CacheEntry, type Connector } from './types.ts';

/**
 * Heap charged per entry on top of its key and its text: the LRU's map slot and index arrays and
 * the two string headers. Measured, not guessed: the bench's write-back section fills the tier with
 * 100,000 `eth_getBalance` answers and compares the heap they hold after a full GC with what the
 * tier accounted, so `maxTotalSize` bounds the real heap.
 */
export const ENTRY_OVERHEAD_BYTES = 80;

/**
 * Answers up to this many characters are held as one string (header and result), so the 100,000
 * entries of a full tier are 100,000 leaf strings a major GC marks without scanning, instead of an
 * object with pointers each; larger answers (few, by the byte bound) stay objects.
 */
const PACKED_MAX_CHARS = 64 * 1024;

/** One-character finality codes of a packed entry. */
const FINALITY_CODE: Record<Finality, string> = { finalized: 'F', unfinalized: 'U', realtime: 'R', unknown: 'K' };
const CODE_FINALITY: Readonly<Record<string, Finality>> = { F: 'finalized', U: 'unfinalized', R: 'realtime', K: 'unknown' };

/**
 * A packed entry: `<finality code><writtenAt>,<blockNumber>,<blockHash>\n<result>`, the optional
 * fields empty when absent. A reverse-index pointer is the partition text with a `>` in front.
 */
function pack(e: CacheEntry): string {
  return flat(`${FINALITY_CODE[e.finality]}${e.writtenAt},${e.blockNumber ?? ''},${e.blockHash ?? ''}\n${e.wire as string}`);
}

/**
 * V8 keeps a concatenated string as a tree of its parts (and a sliced one as a view of its parent:
 * the upstream's whole answer text) until something reads its characters; reading one makes it
 * one flat string, so an entry holds its own bytes only (about 225 bytes fewer per entry).
 */
function flat(s: string): string {
  s.charCodeAt(s.length - 1);
  return s;
}

function unpack(v: string): CacheEntry | undefined {
  const finality = CODE_FINALITY[v.charAt(0)];
  const c1 = v.indexOf(',');
  const c2 = v.indexOf(',', c1 + 1);
  const nl = v.indexOf('\n', c2 + 1);
  if (finality === undefined || c1 < 0 || c2 < 0 || nl < 0) return undefined;
  const e: CacheEntry = { wire: v.slice(nl + 1), finality, writtenAt: Number(v.slice(1, c1)) };
  if (c2 > c1 + 1) e.blockNumber = Number(v.slice(c1 + 1, c2));
  if (nl > c2 + 1) e.blockHash = v.slice(c2 + 1, nl);
  return e;
}

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
      sizeCalculation: (v, k) => k.length + ENTRY_OVERHEAD_BYTES + (typeof v === 'string' ? v.length : wireSize(v.wire) + OBJECT_ENTRY_BYTES),
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
    return this.read(`${partition}#${range}`);
  }

  getReverse(network: string, range: string): CacheEntry | undefined {
    const pk = this.lru.get(reverseKey(network, range));
    return typeof pk === 'string' && pk.charCodeAt(0) === POINTER ? this.get(pk.slice(1), range) : undefined;
  }

  set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): void {
    const opts = ttlMs > 0 ? { ttl: ttlMs } : undefined;
    const packed = typeof entry.wire === 'string' && entry.wire.length <= PACKED_MAX_CHARS && !entry.blockHash?.includes('\n');
    this.lru.set(flat(`${partition}#${range}`), packed ? pack(entry) : entry, opts);
    if (reverseNetwork !== undefined) this.lru.set(flat(reverseKey(reverseNetwork, range)), flat(`>${partition}`), opts);
  }

  delete(partition: string, range: string): void {
    this.lru.delete(`${partition}#${range}`);
  }

  private read(key: string): CacheEntry | undefined {
    const v = this.lru.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') return v;
    return v.charCodeAt(0) === POINTER ? undefined : unpack(v);
  }
}

/** First character of a reverse-index pointer (`>`): never a finality code. */
const POINTER = 0x3e;

/** What an entry held as an object (a large answer) costs on top of a packed one: the object and its fields. */
const OBJECT_ENTRY_BYTES = 240;
