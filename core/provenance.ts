/**
 * Where an answer came from, as one rule shared by every plugin that reuses answers across
 * calls (the cache tiers, multiplexing): spec §2.8, "the shared cache holds only answers
 * obtained under the network's own rules".
 *
 * A call whose directives change where or how its answer is obtained (`use-upstream` pinning a
 * possibly lagging or lying upstream, `skip-consensus`, an integrity level other than the
 * network's, or anything a plugin marks with {@link markProvenance}) has a non-empty
 * {@link provenanceKey}. Such a call neither reads nor writes a shared cache, and shares an
 * in-flight execution only with calls of the same key: its answer is never served to a client
 * that relies on the network's rules, and it never takes an answer those rules produced when it
 * asked for others.
 */
import type { CallContext } from './context.ts';
import { Slot } from './slots.ts';

/** Marks set by plugins (slot `call.provenance`): `\0`-separated `name=value` pairs; '' when none. */
const MARKS = new Slot<string>('call.provenance', '');

/** Longest mark kept, characters (marks may carry client input such as a directive value). */
export const MAX_PROVENANCE_MARK = 256;

/**
 * Records that this call's answer is obtained off the network's own rules (spec §2.8). Call it
 * from a `directives` tap, before the call chain runs.
 * @param ctx the call
 * @param name what changed, e.g. `integrity` (a plugin's own name or directive)
 * @param value the value that changed it (bounded to {@link MAX_PROVENANCE_MARK} characters)
 */
export function markProvenance(ctx: CallContext, name: string, value: string): void {
  const v = value.length > MAX_PROVENANCE_MARK ? value.slice(0, MAX_PROVENANCE_MARK) : value;
  MARKS.set(ctx, `${MARKS.get(ctx)}\0${name}=${v}`);
}

/**
 * The call's provenance: '' when its answer is obtained under the network's own rules (the
 * common case, computed without allocating), else a stable text naming every directive and mark
 * that changed it. Two calls may share an answer only when their keys are equal; a call with a
 * non-empty key must not read or write a shared cache.
 * - `use-upstream` set to something other than the network's default;
 * - `skip-consensus: true` where the network's default is not;
 * - every {@link markProvenance} mark (the integrity plugin marks a level other than the network's).
 * @param ctx the call, after its directives were resolved
 */
export function provenanceKey(ctx: CallContext): string {
  const d = ctx.directives;
  const defaults = ctx.network.config.directiveDefaults;
  let key = MARKS.get(ctx);
  const pin = d.useUpstream;
  if (pin !== undefined && pin !== '' && pin !== defaults.useUpstream) key += `\0use-upstream=${pin.length > MAX_PROVENANCE_MARK ? pin.slice(0, MAX_PROVENANCE_MARK) : pin}`;
  if (d.skipConsensus === true && defaults.skipConsensus !== true) key += '\0skip-consensus';
  return key;
}
