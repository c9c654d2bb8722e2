/**
 * The logs bloom of a block or receipt (yellow paper §4.3.1, "M3:2048"): 2048 bits; an address
 * or topic sets three bits, each the low 11 bits of a byte pair (0-1, 2-3, 4-5) of keccak256 of
 * its bytes. A log whose address or topics lack a bit cannot belong to that bloom's block or
 * receipt. The hash is viem's; only the bit arithmetic is here.
 */
import { CheckFailure, isHex, type Hex } from './hex.ts';
import type { Viem } from './libs.ts';

/** Bytes of a logs bloom. */
export const BLOOM_BYTES = 256;

/** A decoded bloom with a membership test. */
export interface Bloom {
  /**
   * Whether every bit an item sets is set (false means "certainly not in the bloom").
   * @param item hex bytes of an address (20 bytes) or a topic (32 bytes)
   */
  has(item: Hex): boolean;
}

/**
 * Decodes a `logsBloom` field.
 * @param viem viem's namespace (keccak256, hexToBytes)
 * @param hex the 256-byte bloom as hex
 * @param check check name for the failure
 * @throws CheckFailure when the value is not 256 bytes of hex
 */
export function parseBloom(viem: Viem, hex: unknown, check: string): Bloom {
  if (!isHex(hex) || hex.length !== 2 + BLOOM_BYTES * 2) throw new CheckFailure(check, 'logsBloom is not 256 bytes of hex');
  const bits = viem.hexToBytes(hex);
  return {
    has(item: Hex): boolean {
      const h = viem.keccak256(item, 'bytes');
      for (let i = 0; i < 6; i += 2) {
        const bit = (((h[i] as number) << 8) | (h[i + 1] as number)) & 0x7ff;
        // Bit 0 is the lowest bit of the last byte (big-endian 2048-bit number).
        const byte = bits[BLOOM_BYTES - 1 - (bit >> 3)] as number;
        if ((byte & (1 << (bit & 7))) === 0) return false;
      }
      return true;
    },
  };
}

/**
 * Checks that a log's address and every topic are in a bloom.
 * @param bloom the block's or receipt's bloom
 * @param log a log object (`address`, `topics`)
 * @param check check name for the failure
 * @param where what the bloom belongs to, for the message (`receipt 0x..`, `block 12`)
 * @throws CheckFailure naming the missing item
 */
export function checkLogInBloom(bloom: Bloom, log: { address?: unknown; topics?: unknown }, check: string, where: string): void {
  if (!isHex(log.address)) throw new CheckFailure(check, `a log has no address`);
  if (!bloom.has(log.address)) throw new CheckFailure(check, `log address ${log.address} is not in the logsBloom of ${where}`);
  if (!Array.isArray(log.topics)) throw new CheckFailure(check, `a log of ${log.address} has no topics array`);
  for (const t of log.topics) {
    if (!isHex(t)) throw new CheckFailure(check, `a log topic is not hex`);
    if (!bloom.has(t)) throw new CheckFailure(check, `log topic ${t} of ${log.address} is not in the logsBloom of ${where}`);
  }
}
