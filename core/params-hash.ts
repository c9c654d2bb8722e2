/**
 * The canonical hash of a call's params (spec §4.6 #2): SHA-256 of the
 * key-sorted JSON text, base64url. Multiplexing and the cache key calls by it, never by the
 * JSON-RPC id; it is computed once per call and kept in a slot, so the two plugins share it
 * without importing each other.
 */
import * as crypto from 'node:crypto';
import stringify from 'safe-stable-stringify';
import type { CallContext } from './context.ts';
import { Slot } from './slots.ts';

/** `crypto.hash` (Node 20.12+), when this Node has it. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string }).hash;

/** Memo of {@link callParamsHash} on a call (slot `call.paramsHash`); `null` = params cannot be hashed. */
const PARAMS_HASH = new Slot<string | null | undefined>('call.paramsHash', undefined);

/**
 * Hash of params as sent (key order does not matter).
 * @param params any JSON value (`undefined` hashes like `null`)
 * @returns the hash, or undefined when the params cannot be serialised (a cycle, a BigInt)
 */
export function paramsHash(params: unknown): string | undefined {
  let canonical: string | undefined;
  try {
    canonical = stringify(params ?? null, null, undefined) as string | undefined;
  } catch {
    return undefined;
  }
  if (canonical === undefined) return undefined;
  // One-shot digest where Node has it (20.12+): no Hash object per call, half the cost.
  return oneShot ? oneShot('sha256', canonical, 'base64url') : crypto.createHash('sha256').update(canonical).digest('base64url');
}

/**
 * {@link paramsHash} of a call's current params, computed once per call. Taps that rewrite
 * params (interpolation) run inside multiplexing and the cache, so the memo is the client's params.
 * @param ctx the call
 * @returns the hash, or undefined when the params cannot be hashed
 */
export function callParamsHash(ctx: CallContext): string | undefined {
  const memo = PARAMS_HASH.get(ctx);
  if (memo !== undefined) return memo ?? undefined;
  const h = paramsHash(ctx.request.params);
  PARAMS_HASH.set(ctx, h ?? null);
  return h;
}
