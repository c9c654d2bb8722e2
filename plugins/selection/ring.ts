/** The bounded list of recent selection decisions kept per network (no hooks here). */

/** A fixed-size ring of the most recent items, oldest dropped first. */
export class Ring<T> {
  private readonly items: T[] = [];
  private start = 0;

  /** @param capacity items kept (at least 1) */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`ring capacity must be a positive integer, got ${capacity}`);
  }

  /** Adds an item, dropping the oldest when full. */
  push(item: T): void {
    if (this.items.length < this.capacity) {
      this.items.push(item);
      return;
    }
    this.items[this.start] = item;
    this.start = (this.start + 1) % this.capacity;
  }

  /** Items kept, oldest first (a copy). */
  toArray(): T[] {
    return [...this.items.slice(this.start), ...this.items.slice(0, this.start)];
  }

  /** Number of items kept. */
  get size(): number {
    return this.items.length;
  }
}
