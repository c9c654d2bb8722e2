/**
 * eRPC's cache `compression` in svc: the zstd frame header read before any value is inflated,
 * the stored form (prefix + base64 of one frame) above the threshold and only when smaller, the
 * bounds on what a shared store may hand back, and the config block.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { SchemaFragment } from 'svc-proxy/plugin';
import {
  COMPRESSED_PREFIX,
  compressionSettingsOf,
  DEFAULT_MAX_DECOMPRESSED_SIZE,
  frameContentSize,
  ValueCodec,
  ZSTD_LEVELS,
} from '../../../../plugins/cache/compression.ts';
import { loadConfigObject } from '../../../../config/load.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { cacheConfigOf } from '../../../../plugins/cache/schema.ts';
import { problemsOf } from '../../../helpers/config-problems.ts';

const block = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ i, hash: `0x${'ab'.repeat(32)}`, data: '0x' })));

describe("cache: eRPC's compression", () => {
  it('reads the content size a zstd frame header declares (RFC 8878), undefined without one', async () => {
    const codec = await ValueCodec.create({ level: 1, threshold: 0, maxDecompressedSize: 1 << 20 });
    for (const n of [1, 40, 2000]) {
      const text = block(n);
      const stored = codec.encode(text);
      expect(stored.startsWith(COMPRESSED_PREFIX), `${n}`).to.equal(true);
      expect(frameContentSize(Buffer.from(stored.slice(COMPRESSED_PREFIX.length), 'base64'))).to.equal(Buffer.byteLength(text));
    }
    expect(frameContentSize(Buffer.from('{"f":"finalized"}'))).to.equal(undefined);
    // A frame header without Frame_Content_Size (streaming writers): magic, descriptor 0x00, window.
    expect(frameContentSize(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50, 0, 0]))).to.equal(undefined);
    // 8-byte size field: declares 2^40 bytes.
    expect(frameContentSize(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0]))).to.equal(2 ** 40);
  });

  it('compresses at or above the threshold and only when smaller; reads both forms back', async () => {
    const codec = await ValueCodec.create({ level: ZSTD_LEVELS.fastest, threshold: 1024, maxDecompressedSize: 1 << 20 });
    const small = block(2);
    expect(codec.encode(small)).to.equal(small);
    const big = block(200);
    const stored = codec.encode(big);
    expect(stored.startsWith(COMPRESSED_PREFIX)).to.equal(true);
    expect(stored.length).to.be.lessThan(big.length / 5);
    expect(codec.decode(stored)).to.equal(big);
    expect(codec.decode(small)).to.equal(small);
    // Incompressible text above the threshold stays as it is.
    const noise = randomBytes(3000).toString('base64');
    expect(codec.encode(noise)).to.equal(noise);
  });

  it('a value from the shared store is never inflated past maxDecompressedSize, and garbage is a miss', async () => {
    const writer = await ValueCodec.create({ level: 1, threshold: 0, maxDecompressedSize: 1 << 24 });
    const reader = await ValueCodec.create({ level: 1, threshold: 0, maxDecompressedSize: 4096 });
    // A "zip bomb": 4 MiB of zeros is a few hundred bytes compressed.
    const bomb = writer.encode('0'.repeat(4 * 1024 * 1024));
    expect(bomb.length).to.be.lessThan(2000);
    expect(reader.decode(bomb)).to.equal(undefined);
    // A frame with no declared size is refused before decompression.
    expect(reader.decode(COMPRESSED_PREFIX + Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50, 1, 2, 3]).toString('base64'))).to.equal(undefined);
    expect(reader.decode(`${COMPRESSED_PREFIX}not base64 at all`)).to.equal(undefined);
    // A frame that lies about its size (declares less than it holds) fails inside the bounded buffer.
    const honest = Buffer.from(writer.encode(block(100)).slice(COMPRESSED_PREFIX.length), 'base64');
    const lying = Buffer.from(honest);
    lying[5] = 0x10; // the low byte of the 2-byte size field
    lying[6] = 0x00;
    expect(writer.decode(COMPRESSED_PREFIX + lying.toString('base64'))).to.equal(undefined);
    // Longer stored text than any bounded value compresses to is not even decoded.
    expect(reader.decode(COMPRESSED_PREFIX + 'A'.repeat(100_000))).to.equal(undefined);
  });

  it("the block: eRPC's keys with its defaults once present, svc's bound; absent or enabled false = off", () => {
    expect(compressionSettingsOf(undefined)).to.equal(undefined);
    expect(compressionSettingsOf({ enabled: false })).to.equal(undefined);
    expect(compressionSettingsOf({})).to.deep.equal({ level: 1, threshold: 1024, maxDecompressedSize: DEFAULT_MAX_DECOMPRESSED_SIZE });
    expect(compressionSettingsOf({ zstdLevel: 'best', threshold: 0 })).to.deep.include({ level: 11, threshold: 0 });
    const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
    const load = (compression: unknown) =>
      loadConfigObject(
        {
          database: {
            evmJsonRpcCache: {
              connectors: [{ id: 'r', driver: 'redis', redis: { uri: 'redis://127.0.0.1:1' } }],
              policies: [{ connector: 'r', finality: 'finalized' }],
              compression,
            },
          },
        },
        { fragments },
      );
    const c = cacheConfigOf(load({ enabled: true, algorithm: 'zstd', zstdLevel: 'better', threshold: 512, maxDecompressedSize: '1MiB' }).config);
    expect(c.compression).to.deep.equal({ level: 7, threshold: 512, maxDecompressedSize: 1024 * 1024 });
    expect(cacheConfigOf(load(undefined).config).compression).to.equal(undefined);
    for (const [bad, key] of [
      [{ algorithm: 'gzip' }, 'algorithm'],
      [{ zstdLevel: 'max' }, 'zstdLevel'],
      [{ threshold: -1 }, 'threshold'],
      [{ level: 3 }, 'level'],
    ] as const)
      expect(
        problemsOf(() => load(bad))
          .map((p) => p.path)
          .join(' '),
        key,
      ).to.include(`database.evmJsonRpcCache.compression`);
  });
});
