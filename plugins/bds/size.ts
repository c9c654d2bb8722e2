/**
 * How large a BDS answer's JSON will at least be, read from its protobuf bytes before they are decoded: ./transport.ts refuses an
 * answer whose estimate passes the call's cap, so svc never builds the objects of an answer it would refuse after converting it.
 * Two lower bounds, the larger one counts:
 *
 * - The bytes × {@link MIN_EXPANSION}. Most of an answer is byte strings (hashes, addresses, log data, blooms), which become twice
 *   as many hex characters; numbers and decimal amounts come out about as long as they went in, and every field gains its name.
 * - Each nested message × the JSON of its empty form ({@link emptyJsonBytes}). An empty message is 2 bytes on the wire, an empty
 *   log or receipt hundreds of characters as JSON (a node writes every field), so an answer of many tiny messages (a server bug,
 *   or a hostile one) is caught by its count where its bytes alone would let it through to be decoded into millions of objects.
 *
 * The walk reads tags and lengths with protobufjs's Reader and steps into declared message fields only (unknown fields, scalars and
 * byte strings are skipped): no object per field, and a depth bounded by the schema (no message holds itself), never by the bytes.
 */
import protobuf from 'protobufjs';
import { blockToJson, logToJson, receiptToJson, transactionToJson, withdrawalToJson } from './to-json.ts';

/**
 * Least JSON characters per protobuf byte assumed of a whole answer: below the 2 of byte strings, since numbers and amounts come
 * out about as long as they went in (logs, mostly hashes and addresses, come out at about 2.7).
 */
export const MIN_EXPANSION = 1.5;

/** The converted empty form of each message ./to-json.ts writes fields for even when absent. */
const EMPTY_FORMS: Readonly<Record<string, () => unknown>> = {
  'bds.evm.Log': () => logToJson({}),
  'bds.evm.Receipt': () => receiptToJson({}),
  'bds.evm.Transaction': () => transactionToJson({}),
  'bds.evm.Withdrawal': () => withdrawalToJson({}),
  'bds.evm.BlockHeader': () => blockToJson({ block: {} }, false),
};

const emptySizes = new Map<string, number>();

/**
 * Least JSON characters one message of a type becomes, with the comma that separates it from the next: its empty form's JSON for
 * the models ./to-json.ts converts, `{}` otherwise.
 * @param fullName the message type's full name (`bds.evm.Log`)
 */
export function emptyJsonBytes(fullName: string): number {
  let n = emptySizes.get(fullName);
  if (n === undefined) {
    const form = EMPTY_FORMS[fullName];
    n = (form ? JSON.stringify(form()).length : 2) + 1;
    emptySizes.set(fullName, n);
  }
  return n;
}

const byType = new WeakMap<protobuf.Type, number>();

/** {@link emptyJsonBytes} of a type (protobufjs writes full names with a leading dot). */
function emptyOf(type: protobuf.Type): number {
  let n = byType.get(type);
  if (n === undefined) {
    n = emptyJsonBytes(type.fullName.replace(/^\./, ''));
    byType.set(type, n);
  }
  return n;
}

/** Adds up the empty-form sizes of the messages nested in `[r.pos, end)` of a message of `type`. */
function walk(type: protobuf.Type, r: protobuf.Reader, end: number): number {
  let total = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    const wire = tag & 7;
    const sub = type.fieldsById[tag >>> 3]?.resolvedType;
    if (wire === 2 && sub instanceof protobuf.Type) {
      const stop = r.uint32() + r.pos;
      if (stop > end) throw new RangeError('a nested message runs past its parent');
      total += emptyOf(sub) + walk(sub, r, stop);
      r.pos = stop;
    } else r.skipType(wire);
  }
  return total;
}

/**
 * The least size the JSON of an answer will have (see the module comment).
 * @param type the response message's type
 * @param bytes the response message, as received
 * @returns characters (the JSON is ASCII: bytes); bytes that are no message of `type` get the bytes-only bound (decoding them fails)
 */
export function minJsonSize(type: protobuf.Type, bytes: Uint8Array): number {
  const byBytes = Math.ceil(bytes.length * MIN_EXPANSION);
  let byMessages = 0;
  try {
    byMessages = walk(type, protobuf.Reader.create(bytes), bytes.length);
  } catch {
    // Not a message of this type: the decoder names what is wrong with it.
  }
  return Math.max(byBytes, byMessages);
}
