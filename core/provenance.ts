/**
 * Where an answer came from, as one rule shared by every plugin that reuses answers across
 * calls (the cache tiers, multiplexing): spec §2.8, "the shared cache holds only answers
 * obtained under the network's own rules".
 *
 * A call whose directives change where or how its answer is obtained is marked by the plugin that
 * honours them, with {@link markProvenance} at `DirectiveStage.PROVENANCE` (the select plugin marks
 * `use-upstream` pinning a possibly lagging or lying upstream, the consensus plugin
 * `skip-consensus`, the integrity plugin a level other than the network's); such a call has a
 * non-empty {@link provenanceKey}. Such a call neither reads nor writes a shared cache, and shares an
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
 * from a `directives` tap (at `DirectiveStage.PROVENANCE`, once every directive is final), before
 * the call chain runs; only for a call that differs from the network's defaults, so a call under
 * the network's rules allocates nothing.
 * @param ctx the call
 * @param name what changed, e.g. `integrity` or `use-upstream` (a plugin's own name or directive)
 * @param value the value that changed it (bounded to {@link MAX_PROVENANCE_MARK} characters);
 *   none for an on/off directive such as `skip-consensus`
 */
export function markProvenance(ctx: CallContext, name: string, value?: string): void {
  if (value === undefined) return MARKS.set(ctx, `${MARKS.get(ctx)}\0${name}`);
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
