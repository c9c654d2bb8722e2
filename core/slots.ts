/**
 * Typed extension slots (issue #9 item 5): a plugin keeps a field of its own on a call context
 * or an upstream without core types carrying it. A slot is named; its key is a registry symbol
 * (`Symbol.for('svc.slot.<name>')`), so plugins agree on a slot by name, even across installed
 * copies of svc, without importing each other's modules.
 */

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

/** One typed slot: read with {@link get} (the fallback when unset), write with {@link set}. */
export class Slot<T> {
  /** The registry symbol this slot lives under. */
  readonly key: symbol;

  /**
   * @param name a dotted name unique to its owner (convention `<plugin-or-area>.<field>`)
   * @param fallback what {@link get} returns while the slot is unset
   */
  constructor(
    readonly name: string,
    readonly fallback: T,
  ) {
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
