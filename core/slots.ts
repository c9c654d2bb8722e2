/**
 * Typed extension slots (issue #9 item 5): a plugin keeps a field of its own on a call context
 * or an upstream without core types carrying it. A slot is named; its key is a registry symbol
 * (`Symbol.for('svc.slot.<name>')`), so plugins agree on a slot by name, even across installed
 * copies of svc, without importing each other's modules.
 */

/** Something that holds slots: a call context (its `state` map) or an upstream (its `slots` map). */
export type SlotHolder = { readonly slots: Map<symbol, unknown> } | { readonly state: Map<symbol, unknown> };

function storeOf(holder: SlotHolder): Map<symbol, unknown> {
  return 'slots' in holder ? holder.slots : holder.state;
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
    const v = storeOf(holder).get(this.key);
    return v === undefined ? this.fallback : (v as T);
  }

  /** Sets the slot's value on a holder. */
  set(holder: SlotHolder, value: T): void {
    storeOf(holder).set(this.key, value);
  }
}
