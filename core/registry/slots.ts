/**
 * Typed extension slots: a plugin keeps a field of its own on a call context
 * or an upstream without core types carrying it. A {@link Slot} is the typed key: it is declared
 * once per name (a second declaration of the name throws, so two plugins cannot read one slot
 * with two types), and whoever reads or writes it imports that one object. Slots several plugins
 * share are declared by the plugin that writes them, in its contract `svc/plugins/<name>`.
 *
 * The value lives under a registry symbol (`Symbol.for('svc.slot.<name>')`), so a plugin built
 * against another installed copy of svc (whose own `Slot` object has the same name) still reads
 * and writes the same field.
 */
import { PluginContractError } from './services.ts';

/**
 * Something that holds slots: a call context (its `state` map), an upstream (its `slots` map),
 * or an execution record (a `slots` map created on first write, so a call that no plugin
 * annotates allocates none).
 */
export type SlotHolder = { slots?: Map<symbol, unknown> } | { readonly state: Map<symbol, unknown> };

function storeOf(holder: SlotHolder, create: boolean): Map<symbol, unknown> | undefined {
  // A call context keeps slots in its `state` map; an upstream's `state` is its lifecycle, not a map.
  const st = (holder as { state?: unknown }).state;
  if (st instanceof Map) return st as Map<symbol, unknown>;
  const h = holder as { slots?: Map<symbol, unknown> };
  if (!h.slots && create) h.slots = new Map();
  return h.slots;
}

/** Names of the slots declared in this copy of svc (each once). */
const declared = new Set<string>();

/**
 * One typed slot: read with {@link get} (the fallback when unset), write with {@link set}.
 * Declare it once, at module level, and import it where it is used.
 */
export class Slot<T> {
  /** The registry symbol this slot lives under. */
  readonly key: symbol;

  /**
   * @param name a dotted name unique in the process (convention `<plugin-or-area>.<field>`)
   * @param fallback what {@link get} returns while the slot is unset
   * @throws PluginContractError when a slot of that name is declared already in this copy of svc
   *   (import that one instead: a second declaration could give the slot another type)
   */
  constructor(
    readonly name: string,
    readonly fallback: T,
  ) {
    if (declared.has(name))
      throw new PluginContractError(
        `slot "${name}" is declared twice (declare a slot once and import it; slots shared by plugins are exported from svc/plugin)`,
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
