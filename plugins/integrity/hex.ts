/**
 * Small JSON-RPC value helpers shared by the integrity checks: hex quantities, hex data, the
 * minimal big-endian bytes RLP expects for a quantity, and the check failure type.
 */

/** A `0x`-prefixed hex string. */
export type Hex = `0x${string}`;

/** A plain JSON object as decoded from an answer. */
export type JsonObject = Record<string, unknown>;

/**
 * An integrity check that did not hold. The plugin turns it into `ErrEndpointContentValidation`
 * (spec §7) naming {@link check}.
 */
export class CheckFailure extends Error {
  /**
   * @param check short name of the failed check (`block.hash`, `receipt.bloom`, `logs.range`...)
   * @param message what did not hold, with the values involved
   */
  constructor(
    readonly check: string,
    message: string,
  ) {
    super(message);
    this.name = 'CheckFailure';
  }
}

const HEX = /^0x[0-9a-fA-F]*$/;

/** Whether a value is a `0x`-prefixed hex string. */
export function isHex(v: unknown): v is Hex {
  return typeof v === 'string' && HEX.test(v);
}

/** Whether a value is a non-null, non-array object. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A hex quantity as a bigint, or undefined when the value is not one.
 * @param v a JSON-RPC quantity such as `0x1a` (a non-negative integer number is accepted too)
 */
export function quantityOf(v: unknown): bigint | undefined {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (!isHex(v) || v.length < 3 || v.length > 66) return undefined;
  return BigInt(v);
}

/**
 * A field that must be a hex quantity.
 * @throws CheckFailure (`<check>`) naming the field when it is missing or malformed
 */
export function needQuantity(o: JsonObject, field: string, check: string): bigint {
  const q = quantityOf(o[field]);
  if (q === undefined) throw new CheckFailure(check, `field ${field} is not a hex quantity (${short(o[field])})`);
  return q;
}

/**
 * A field that must be hex data.
 * @throws CheckFailure (`<check>`) naming the field when it is missing or malformed
 */
export function needData(o: JsonObject, field: string, check: string): Hex {
  const v = o[field];
  if (!isHex(v) || v.length % 2 !== 0) throw new CheckFailure(check, `field ${field} is not hex data (${short(v)})`);
  return v;
}

/**
 * The minimal big-endian bytes of a quantity, as RLP encodes integers: zero is the empty string,
 * no leading zero bytes.
 * @param q the quantity
 */
export function quantityBytes(q: bigint): Hex {
  if (q === 0n) return '0x';
  const h = q.toString(16);
  return `0x${h.length % 2 === 0 ? h : `0${h}`}`;
}

/** Case-insensitive equality of two hex strings (addresses and hashes come in either case). */
export function sameHex(a: unknown, b: unknown): boolean {
  return typeof a === 'string' && typeof b === 'string' && a.toLowerCase() === b.toLowerCase();
}

/** A value shortened for an error message (hashes stay whole, long data is cut). */
export function short(v: unknown): string {
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** `0x`-hex of a block number, as `eth_getBlockByNumber` takes it. */
export function toQuantity(n: bigint): Hex {
  return `0x${n.toString(16)}`;
}

/**
 * Names of the checks a network turned off (`integrity.skipChecks`, from eRPC's
 * `checks.<id>.enabled: false`): only comparisons whose skipping leaves the other checks sound.
 */
export type SkipChecks = ReadonlySet<string>;

/** No check skipped. */
export const NO_SKIP: SkipChecks = new Set();
