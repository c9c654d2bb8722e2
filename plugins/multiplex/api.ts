/**
 * `svc-proxy/plugins/multiplex`: what a call's answer may be shared by, as one rule for every plugin
 * that reuses answers across calls (multiplexing, the cache tiers): the canonical hash of its
 * params and its provenance.
 *
 * Params hash (spec §4.6 #2): SHA-256 of the key-sorted JSON text, base64url. Multiplexing and the
 * cache key calls by it, never by the JSON-RPC id; computed once per call and kept in a slot.
 *
 * Provenance (spec §2.8, "the shared cache holds only answers obtained under the network's own
 * rules"): a call whose directives change where or how its answer is obtained is marked by the
 * plugin that honours them, with {@link markProvenance} at `DirectiveStage.PROVENANCE` (select marks
 * `use-upstream`, consensus `skip-consensus`, integrity a level other than the network's); such a
 * call has a non-empty {@link provenanceKey}, neither reads nor writes a shared cache, and shares
 * an in-flight execution only with calls of the same key.
 */
import * as crypto from 'node:crypto';
import stringify from 'safe-stable-stringify';
import { Slot, type CallContext } from 'svc-proxy/plugin';

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

/**
 * The state of a call a plugin makes from a client's call with another method or params (the
 * filters plugin answers `eth_getFilterLogs` with an `eth_getLogs`): a copy keeping every slot, so
 * the derived call keeps the client's provenance marks and finality (it is shared and cached under
 * the client's own rules, never with calls of other rules), without the params-hash memo, which
 * belongs to the old params.
 * @param ctx the client's call
 * @returns a new state map for the derived call (writing it leaves `ctx` unchanged)
 */
export function derivedState(ctx: CallContext): Map<symbol, unknown> {
  const state = new Map(ctx.state);
  state.delete(PARAMS_HASH.key);
  return state;
}

/** Marks set by plugins (slot `call.provenance`): `\0`-separated `name=value` pairs; '' when none. */
const MARKS = new Slot<string>('call.provenance', '');

/** Longest mark kept, characters (marks may carry client input such as a directive value). */
export const MAX_PROVENANCE_MARK = 256;

/**
 * Records that this call's answer is obtained off the network's own rules (spec §2.8). Call it
 * from a `directives` tap (at `DirectiveStage.PROVENANCE`, once every directive is final), before
 * the call chain runs; only for a call that differs from the network's defaults, so a call under
 * the network's rules allocates nothing.
 * @param ctx the call
 * @param name what changed, e.g. `integrity` or `use-upstream` (a plugin's own name or directive)
 * @param value the value that changed it (bounded to {@link MAX_PROVENANCE_MARK} characters);
 *   none for an on/off directive such as `skip-consensus`
 */
export function markProvenance(ctx: CallContext, name: string, value?: string): void {
  if (value === undefined) {
    MARKS.set(ctx, `${MARKS.get(ctx)}\0${name}`);
    return;
  }
  const v = value.length > MAX_PROVENANCE_MARK ? value.slice(0, MAX_PROVENANCE_MARK) : value;
  MARKS.set(ctx, `${MARKS.get(ctx)}\0${name}=${v}`);
}

/**
 * The call's provenance: '' when its answer is obtained under the network's own rules (the
 * common case: a slot read), else a stable text naming every {@link markProvenance} mark, in the
 * order the plugins made them. Two calls may share an answer only when their keys are equal; a
 * call with a non-empty key must not read or write a shared cache.
 * @param ctx the call, after its directives were resolved
 */
export function provenanceKey(ctx: CallContext): string {
  return MARKS.get(ctx);
}
