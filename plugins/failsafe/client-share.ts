/**
 * The failsafe breaker's bound on one client (README "Failsafe policies", `circuitBreaker.
 * maxClientShare`): a client that causes more than `maxClientShare` of an upstream's recent
 * failures while the upstream keeps answering other clients cannot move its breaker. Its further
 * failures are not counted toward opening it (nor toward reopening it while half-open), so one
 * client sending calls that fail (misclassified request errors, poison queries) cannot cut an
 * upstream off for everyone. An upstream failing every client (an outage) or serving a single
 * client is unaffected: with no other client answered in the window, every failure counts.
 *
 * Memory is bounded per breaker: failure counts for at most {@link MAX_TRACKED_CLIENTS} client
 * keys per half window (two halves: a sliding window of `clientShareWindow`), and the two most
 * recent successes by distinct clients. A success costs one clock read and two assignments.
 */

/** Distinct client keys whose failures are counted per half window; later ones are not tracked (a crowd, not one client). */
export const MAX_TRACKED_CLIENTS = 32;

/** Failure shares per client over a sliding window (two halves), for one breaker. */
export class ClientShare {
  private cur = new Map<string, number>();
  private prev = new Map<string, number>();
  private curTotal = 0;
  private prevTotal = 0;
  private curStart: number;
  private readonly halfMs: number;
  /** Most recent success and its client. */
  private lastKey: string | undefined;
  private lastAt = Number.NEGATIVE_INFINITY;
  /** Most recent success by a client other than {@link lastKey}. */
  private otherKey: string | undefined;
  private otherAt = Number.NEGATIVE_INFINITY;

  /**
   * @param maxShare largest share (0..1) of the window's failures one client may cause and still be counted
   * @param windowMs the window, ms (failures older than it are forgotten; counted in halves)
   * @param now clock, ms
   */
  constructor(
    readonly maxShare: number,
    readonly windowMs: number,
    private readonly now: () => number,
  ) {
    this.halfMs = Math.max(1, windowMs / 2);
    this.curStart = now();
  }

  /** A success for a client: evidence the upstream works for that client. */
  success(key: string): void {
    const t = this.now();
    if (key !== this.lastKey) {
      this.otherKey = this.lastKey;
      this.otherAt = this.lastAt;
      this.lastKey = key;
    }
    this.lastAt = t;
  }

  /**
   * A failure for a client, remembered in the window either way.
   * @returns whether it may count toward opening the breaker: false when the client causes more
   *   than `maxShare` of the window's failures while another client succeeded within the window
   */
  failure(key: string): boolean {
    const t = this.now();
    this.roll(t);
    const mine = (this.cur.get(key) ?? 0) + (this.prev.get(key) ?? 0) + 1;
    const total = this.curTotal + this.prevTotal + 1;
    const n = this.cur.get(key);
    if (n !== undefined) this.cur.set(key, n + 1);
    else if (this.cur.size < MAX_TRACKED_CLIENTS) this.cur.set(key, 1);
    this.curTotal++;
    if (mine <= this.maxShare * total) return true;
    const otherSuccessAt = key !== this.lastKey ? this.lastAt : this.otherAt;
    return otherSuccessAt < t - this.windowMs;
  }

  /** Client keys with failures in the window (tests, bounded-memory checks). */
  get trackedClients(): number {
    return new Set([...this.cur.keys(), ...this.prev.keys()]).size;
  }

  private roll(t: number): void {
    const elapsed = t - this.curStart;
    if (elapsed < this.halfMs) return;
    const swap = this.prev;
    swap.clear();
    if (elapsed >= 2 * this.halfMs) {
      // Idle for a whole window: both halves are stale.
      this.cur.clear();
      this.curTotal = 0;
    }
    this.prev = this.cur;
    this.prevTotal = this.curTotal;
    this.cur = swap;
    this.curTotal = 0;
    this.curStart = elapsed >= 2 * this.halfMs ? t : this.curStart + this.halfMs;
  }
}
