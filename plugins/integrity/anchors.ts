/**
 * What an answer rests on: the distinct blocks (number, hash) it names, with the logs it claims
 * for each. The intrinsic checks collect them; the corroborated and authoritative levels confirm
 * them with other upstreams (spec §2.8 #10).
 */
import { CheckFailure, type Hex, type JsonObject } from './hex.ts';

/** One block an answer rests on. */
export interface Anchor {
  /** Block number. */
  number: bigint;
  /** Block hash, lower-case. */
  hash: Hex;
  /** Logs of the answer in that block (checked against the confirmed block's logsBloom). */
  logs: JsonObject[];
  /** True when the answer is this block itself (its bloom is then already the answer's own). */
  isBlock?: boolean;
}

/** The blocks of one answer, by lower-case hash. */
export class Anchors {
  private readonly byHash = new Map<string, Anchor>();
  private readonly byNumber = new Map<bigint, string>();

  /** Number of distinct blocks. */
  get size(): number {
    return this.byHash.size;
  }

  /** The blocks in insertion order. */
  list(): Anchor[] {
    return [...this.byHash.values()];
  }

  /**
   * Adds a block the answer names (or the logs it claims in it).
   * @param check check name used when the answer contradicts itself
   * @throws CheckFailure when one hash comes with two numbers, or one number with two hashes
   */
  add(number: bigint, hash: Hex, check: string, logs: readonly JsonObject[] = [], isBlock = false): Anchor {
    const h = hash.toLowerCase() as Hex;
    let a = this.byHash.get(h);
    if (a) {
      if (a.number !== number) throw new CheckFailure(check, `block hash ${h} appears with two numbers (${a.number} and ${number})`);
    } else {
      const other = this.byNumber.get(number);
      if (other !== undefined) throw new CheckFailure(check, `block ${number} appears with two hashes (${other} and ${h})`);
      a = { number, hash: h, logs: [] };
      this.byHash.set(h, a);
      this.byNumber.set(number, h);
    }
    if (isBlock) a.isBlock = true;
    for (const l of logs) a.logs.push(l);
    return a;
  }
}
