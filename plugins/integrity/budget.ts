/**
 * `networks[].integrity.budget` (eRPC's key): the cost cap of the authoritative level, whose vote
 * asks other upstreams for each block an answer rests on. Per network:
 *
 * - `maxPerSecond`: a token bucket over those block fetches (capacity and refill both
 *   `maxPerSecond`). An answer whose vote needs more fetches than the bucket holds is not voted
 *   on: it is served as the intrinsic checks passed it, and counted
 *   (`svc_integrity_flagged_total{check="authoritative.budget",outcome="budget_skipped"}`), so a
 *   spent budget never turns into rejections and retries that would cost more calls still.
 * - `maxConcurrent`: fetches in flight at once; one more waits for a slot, within its own
 *   deadline (a peer that cannot be asked in time casts no vote, as a slow peer).
 *
 * 0 (or unset) leaves that side unbounded.
 */
import { Strict, Type } from 'svc-proxy/plugin';

/** Largest `maxPerSecond` / `maxConcurrent` accepted. */
export const MAX_BUDGET_VALUE = 100_000;

/** Schema of `networks[].integrity.budget`. */
export const budgetSchema = Strict(
  {
    maxPerSecond: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_BUDGET_VALUE,
        default: 0,
        description:
          'block fetches per second the authoritative level may send to other upstreams on this network (token bucket); an answer whose vote would exceed it is served unvoted and counted as budget_skipped; 0 = no cap',
      }),
    ),
    maxConcurrent: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_BUDGET_VALUE,
        default: 0,
        description:
          'authoritative block fetches in flight at once on this network; one more waits for a slot within its deadline (no slot in time: that peer casts no vote); 0 = no cap',
      }),
    ),
  },
  { description: "eRPC's integrity budget: the cost cap of the authoritative level's fetches from other upstreams" },
);

/** One network's authoritative fetch budget. */
export class FetchBudget {
  private tokens: number;
  private last: number;
  private inFlight = 0;
  private readonly waiters: Array<() => void> = [];

  /**
   * @param maxPerSecond fetches per second (0: unbounded)
   * @param maxConcurrent fetches in flight (0: unbounded)
   * @param now clock, ms (tests pass a fake one)
   */
  constructor(
    readonly maxPerSecond: number,
    readonly maxConcurrent: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = maxPerSecond;
    this.last = now();
  }

  /**
   * Takes `n` fetches from the bucket, all or none.
   * @param n fetches one vote needs
   * @returns false when the bucket holds fewer (nothing is taken then)
   */
  reserve(n: number): boolean {
    if (this.maxPerSecond === 0) return true;
    const t = this.now();
    this.tokens = Math.min(this.maxPerSecond, this.tokens + ((t - this.last) / 1000) * this.maxPerSecond);
    this.last = t;
    if (n > this.tokens) return false;
    this.tokens -= n;
    return true;
  }

  /**
   * Runs one fetch within the concurrency cap.
   * @param waitMs longest wait for a slot, ms
   * @param fn the fetch
   * @throws Error when no slot freed within `waitMs` (the fetch is not made)
   */
  async run<T>(waitMs: number, fn: () => Promise<T>): Promise<T> {
    if (this.maxConcurrent === 0) return fn();
    // A freed slot is handed to the first waiter as it is, so no newcomer can take it in between.
    if (this.inFlight >= this.maxConcurrent) await this.slot(waitMs);
    else this.inFlight++;
    try {
      return await fn();
    } finally {
      const next = this.waiters.shift();
      if (next) next();
      else this.inFlight--;
    }
  }

  /** Fetches in flight (tests, debugging). */
  get running(): number {
    return this.inFlight;
  }

  private slot(waitMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(
        () => {
          const i = this.waiters.indexOf(wake);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(new Error('integrity budget: no fetch slot in time'));
        },
        Math.max(0, waitMs),
      );
      this.waiters.push(wake);
    });
  }
}

/**
 * The budget of a network's `integrity.budget`, or undefined when it caps nothing.
 * @param input the validated `budget` value
 */
export function budgetOf(input: unknown): FetchBudget | undefined {
  if (input === null || typeof input !== 'object') return undefined;
  const b = input as { maxPerSecond?: unknown; maxConcurrent?: unknown };
  const rate = typeof b.maxPerSecond === 'number' && b.maxPerSecond > 0 ? Math.floor(b.maxPerSecond) : 0;
  const conc = typeof b.maxConcurrent === 'number' && b.maxConcurrent > 0 ? Math.floor(b.maxConcurrent) : 0;
  return rate === 0 && conc === 0 ? undefined : new FetchBudget(rate, conc);
}
