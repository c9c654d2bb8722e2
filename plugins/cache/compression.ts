/**
 * `database.evmJsonRpcCache.compression` (eRPC's block: `enabled`, `algorithm: zstd`,
 * `zstdLevel`, `threshold`): values of the shared tiers (redis, postgresql, keyv) at least
 * `threshold` bytes long are stored zstd-compressed when that makes them smaller. The memory tier
 * keeps its values as they are (a hit there must cost no decompression).
 *
 * A shared tier stores strings, so a compressed value is {@link COMPRESSED_PREFIX} followed by the
 * base64 of one zstd frame (RFC 8878); an uncompressed value starts with `{` (types.ts
 * `encodeEntry`), so both read back whatever the writer's setting was. A compressed value read
 * from a shared store is untrusted: it is decompressed only when its size is within bounds and its
 * frame header declares a content size of at most `maxDecompressedSize`, into a buffer of exactly
 * that size, so no value can make svc inflate more. Anything else is a miss.
 *
 * zstd runs as WebAssembly (`@bokuweb/zstd-wasm`: Node 20's zlib has no zstd), loaded only when a
 * config turns compression on.
 */
import { Size, Strict, Type } from 'svc-proxy/plugin';

/** Prefix of a compressed shared-tier value (never the first characters of an uncompressed one). */
export const COMPRESSED_PREFIX = 'zstd:';

/** eRPC's `zstdLevel` names and the zstd levels they stand for (its encoder's speed presets). */
export const ZSTD_LEVELS: Readonly<Record<'fastest' | 'default' | 'better' | 'best', number>> = Object.freeze({
  fastest: 1,
  default: 3,
  better: 7,
  best: 11,
});

/** eRPC's default `threshold`, bytes. */
export const DEFAULT_COMPRESSION_THRESHOLD = 1024;
/** Default `maxDecompressedSize`, bytes. */
export const DEFAULT_MAX_DECOMPRESSED_SIZE = 32 * 1024 * 1024;

/** Schema of `database.evmJsonRpcCache.compression`. */
export const compressionSchema = Strict(
  {
    enabled: Type.Optional(Type.Boolean({ default: true, description: 'compress shared-tier values (true once the block is present, as in eRPC)' })),
    algorithm: Type.Optional(Type.Literal('zstd', { default: 'zstd', description: 'zstd (the only algorithm, as in eRPC)' })),
    zstdLevel: Type.Optional(
      Type.Union([Type.Literal('fastest'), Type.Literal('default'), Type.Literal('better'), Type.Literal('best')], {
        default: 'fastest',
        description: 'zstd effort: fastest (level 1), default (3), better (7), best (11)',
      }),
    ),
    threshold: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 1024 * 1024 * 1024,
        default: DEFAULT_COMPRESSION_THRESHOLD,
        description: 'bytes: values at least this long are compressed (when that makes them smaller); shorter ones are stored as they are',
      }),
    ),
    maxDecompressedSize: Type.Optional(
      Size({
        default: '32MiB',
        description:
          "svc's bound on a compressed value read back from a shared tier: a value whose zstd frame declares a larger (or no) content size is a miss, never inflated",
      }),
    ),
  },
  {
    description:
      "eRPC's cache compression: shared-tier values (redis, postgresql, keyv) are stored zstd-compressed above `threshold`; the memory tier stores them as they are. Unset: no compression (eRPC compresses by default; add `compression: {}` for its behaviour)",
  },
);

/** Resolved compression settings (sizes in bytes). */
export interface CompressionSettings {
  /** zstd level. */
  level: number;
  /** Values at least this long, bytes, are compressed. */
  threshold: number;
  /** Largest content size a frame read back may declare, bytes. */
  maxDecompressedSize: number;
}

/**
 * The compression settings of a resolved `compression` block, undefined when off.
 * @param raw the validated block (undefined when absent)
 */
export function compressionSettingsOf(raw: unknown): CompressionSettings | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  const c = raw as { enabled?: unknown; algorithm?: unknown; zstdLevel?: unknown; threshold?: unknown; maxDecompressedSize?: unknown };
  // zstd is the one algorithm (the schema allows no other): anything else compresses nothing.
  if (c.enabled === false || (c.algorithm !== undefined && c.algorithm !== 'zstd')) return undefined;
  const level = ZSTD_LEVELS[(typeof c.zstdLevel === 'string' ? c.zstdLevel : 'fastest') as keyof typeof ZSTD_LEVELS] ?? ZSTD_LEVELS.fastest;
  return {
    level,
    threshold: typeof c.threshold === 'number' && c.threshold >= 0 ? c.threshold : DEFAULT_COMPRESSION_THRESHOLD,
    maxDecompressedSize: typeof c.maxDecompressedSize === 'number' && c.maxDecompressedSize > 0 ? c.maxDecompressedSize : DEFAULT_MAX_DECOMPRESSED_SIZE,
  };
}

const MAGIC = [0x28, 0xb5, 0x2f, 0xfd] as const;

/**
 * The content size a zstd frame header declares (RFC 8878 §3.1.1.1), or undefined when the bytes
 * do not start with a frame or the frame does not declare its size.
 * @param b the frame's first bytes (at least 18 are read when present)
 */
export function frameContentSize(b: Uint8Array): number | undefined {
  if (b.length < 6 || MAGIC.some((m, i) => b[i] !== m)) return undefined;
  const fhd = b[4] as number;
  const fcsFlag = fhd >> 6;
  const singleSegment = (fhd >> 5) & 1;
  if ((fhd >> 3) & 1) return undefined; // reserved bit: not a valid frame
  const didSize = [0, 1, 2, 4][fhd & 3] as number;
  const fcsSize = fcsFlag === 0 ? (singleSegment ? 1 : 0) : ([0, 2, 4, 8][fcsFlag] as number);
  if (fcsSize === 0) return undefined;
  const at = 5 + (singleSegment ? 0 : 1) + didSize;
  if (b.length < at + fcsSize) return undefined;
  let n = 0;
  for (let i = fcsSize - 1; i >= 0; i--) n = n * 256 + (b[at + i] as number);
  return fcsSize === 2 ? n + 256 : n;
}

/** The zstd functions used (the WebAssembly module's). */
interface Zstd {
  compress(buf: Uint8Array, level?: number): Uint8Array;
  decompress(buf: Uint8Array): Uint8Array;
}

let loading: Promise<Zstd> | undefined;

/** Loads and initialises the WebAssembly zstd once per process. */
function loadZstd(): Promise<Zstd> {
  loading ??= import('@bokuweb/zstd-wasm').then(async (m) => {
    await m.init();
    return m as Zstd;
  });
  return loading;
}

/** Encodes and decodes shared-tier values under one compression setting. */
export class ValueCodec {
  /** Longest stored text decoded, characters: the base64 of the largest frame a bounded value compresses to. */
  private readonly maxStored: number;

  private constructor(
    readonly settings: CompressionSettings,
    private readonly zstd: Zstd,
  ) {
    // zstd's worst case for n bytes is n + n/256 + a small constant.
    const maxFrame = settings.maxDecompressedSize + (settings.maxDecompressedSize >> 8) + 1024;
    this.maxStored = COMPRESSED_PREFIX.length + Math.ceil(maxFrame / 3) * 4;
  }

  /**
   * A codec with zstd loaded.
   * @throws Error when the WebAssembly module cannot be loaded
   */
  static async create(settings: CompressionSettings): Promise<ValueCodec> {
    return new ValueCodec(settings, await loadZstd());
  }

  /**
   * The stored form of a value: compressed when at least `threshold` bytes long and smaller so.
   * @param text the uncompressed value
   */
  encode(text: string): string {
    const raw = Buffer.from(text, 'utf8');
    if (raw.length < this.settings.threshold || raw.length > this.settings.maxDecompressedSize) return text;
    const frame = this.zstd.compress(raw, this.settings.level);
    const stored = COMPRESSED_PREFIX + Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('base64');
    return stored.length < text.length ? stored : text;
  }

  /**
   * The value a stored form stands for.
   * @param stored what the tier returned
   * @returns the uncompressed value, or undefined when a compressed form is out of bounds or corrupt
   */
  decode(stored: string): string | undefined {
    if (!stored.startsWith(COMPRESSED_PREFIX)) return stored;
    if (stored.length > this.maxStored) return undefined;
    const frame = Buffer.from(stored.slice(COMPRESSED_PREFIX.length), 'base64');
    const size = frameContentSize(frame);
    if (size === undefined || size > this.settings.maxDecompressedSize) return undefined;
    try {
      const out = this.zstd.decompress(frame);
      return Buffer.from(out.buffer, out.byteOffset, out.byteLength).toString('utf8');
    } catch {
      return undefined;
    }
  }
}
