/**
 * Typed extension slots: a plugin keeps a field of its own on a call context or an upstream without core types carrying it. Declared
 * once per name, so two plugins cannot read one slot with two types; stored under `Symbol.for('svc.slot.<name>')`, so a plugin built
 * against another installed copy of svc reaches the same field.
 */
import { PluginContractError } from './services.ts';

/** A call context (its `state` map), an upstream or an execution record (a `slots` map, created on first write: unannotated calls allocate none). */
export type SlotHolder = { slots?: Map<symbol, unknown> } | { readonly state: Map<symbol, unknown> };

function storeOf(holder: SlotHolder, create: boolean): Map<symbol, unknown> | undefined {
  // A call context keeps slots in its `state` map; an upstream's `state` is its lifecycle, not a map.
  const st = (holder as { state?: unknown }).state;
  if (st instanceof Map) return st as Map<symbol, unknown>;
  const h = holder as { slots?: Map<symbol, unknown> };
  if (!h.slots && create) h.slots = new Map();
  return h.slots;
}

const declared = new Set<string>();

/** One typed slot, declared once at module level and imported where used; slots plugins share live in the writer's `svc-proxy/plugins/<name>`. */
export class Slot<T> {
  /** The registry symbol this slot lives under. */
  readonly key: symbol;

  /**
   * @param name a dotted name unique in the process (convention `<plugin-or-area>.<field>`)
   * @param fallback what {@link get} returns while the slot is unset
   * @throws PluginContractError when a slot of that name is declared already (a second declaration could give it another type)
   */
  constructor(
    readonly name: string,
    readonly fallback: T,
  ) {
    if (declared.has(name))
      throw new PluginContractError(
        `slot "${name}" is declared twice (declare a slot once and import it; slots shared by plugins are exported from svc-proxy/plugin)`,
      );
    declared.add(name);
    this.key = Symbol.for(`svc.slot.${name}`);
  }

  /** The slot's value on a holder, or the fallback. */
  get(holder: SlotHolder): T {
    const v = storeOf(holder, false)?.get(this.key);
    return v === undefined ? this.fallback : (v as T);
  }

  /** Sets the slot's value on a holder. */
  set(holder: SlotHolder, value: T): void {
    (storeOf(holder, true) as Map<symbol, unknown>).set(this.key, value);
  }
}
