/**
 * Budgets on rate-limiter-flexible: one limiter per rule (fixed window of
 * `maxCount` points per `period`), keyed by budget, rule and the rule's `perIP` / `perUser` /
 * `perNetwork` parts. With the Redis store every replica shares the counters; when Redis fails or
 * takes longer than the store's `timeout` (default {@link DEFAULT_STORE_TIMEOUT_MS}) the rule
 * falls back to its per-process limiter, and the fallback is logged (at most every 30 s) and
 * counted. The store's {@link StorageBreaker} (kind `rate-limit`) makes a store that keeps failing
 * cost nothing: while it is open, checks go to the per-process limiter at once. A rule's
 * `maxCount` can change at run time ({@link Rule.setMaxCount}, the auto-tuner).
 */
import { RateLimiterCluster, RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Logger } from 'svc-proxy/plugin';
import { compileGlobs, type GlobTest, type StorageBreaker, svcWorker } from 'svc-proxy/util';
import { PERIOD_SECONDS, type RuleConfig } from './schema.ts';

/** Default longest wait for the shared store before the per-process limiter decides, ms. */
export const DEFAULT_STORE_TIMEOUT_MS = 50;
/** Minimum time between two fallback logs, ms. */
const LOG_EVERY_MS = 30_000;
/** Longest key part taken from client input, characters. */
const MAX_PART = 128;
/** Deadline of one check against the primary's counters over IPC, ms (several workers only). */
const CLUSTER_TIMEOUT_MS = 1000;

/** What a rule's key may be split by. */
export interface Subject {
  method: string;
  clientAddress: string;
  userId: string | undefined;
  networkId: string;
}

/** A shared store for limiters (a node-redis client), or undefined for per-process counters. */
export interface SharedStore {
  client: unknown;
  keyPrefix: string;
  /** Deadline of one check against the store, ms. */
  timeoutMs: number;
  /** The store's breaker: it counts the store's failures and timeouts and refuses while open. */
  breaker: StorageBreaker;
  /** Called on each fallback to the per-process limiter. */
  onFallback(e: unknown): void;
}

/**
 * One rule of a budget: its limiters and its current `maxCount`, which the auto-tuner may change
 * ({@link Rule.setMaxCount}). The limiters count; the rule decides against its current
 * `maxCount` from the count they report, so a change applies at once in every store (the
 * primary's counters of several workers and Redis included) without a new window.
 */
export class Rule {
  private readonly matches: GlobTest;
  private readonly local: RateLimiterAbstract | undefined;
  private readonly shared: RateLimiterAbstract | undefined;
  private current: number;

  constructor(
    private readonly cfg: RuleConfig,
    private readonly keyBase: string,
    private readonly store: SharedStore | undefined,
  ) {
    this.matches = compileGlobs(cfg.method ?? '*');
    this.current = cfg.maxCount;
    if (cfg.maxCount === 0) return;
    const opts = { points: cfg.maxCount, duration: PERIOD_SECONDS[cfg.period], keyPrefix: keyBase };
    // Several workers (server.workers): the per-process counters live in the primary
    // (rate-limiter-flexible's cluster master), so a budget is the service's, not each worker's.
    this.local = svcWorker() ? new RateLimiterCluster({ ...opts, timeoutMs: CLUSTER_TIMEOUT_MS }) : new RateLimiterMemory(opts);
    if (store)
      this.shared = new RateLimiterRedis({
        ...opts,
        keyPrefix: `${store.keyPrefix}${keyBase}`,
        storeClient: store.client,
        useRedisPackage: true,
        rejectIfRedisNotReady: true,
      });
  }

  /** The rule's method glob, as configured. */
  get method(): string {
    return this.cfg.method ?? '*';
  }

  /** The rule's window, as configured. */
  get period(): RuleConfig['period'] {
    return this.cfg.period;
  }

  /** What the rule's counters are split by, eRPC's scope label (`user,network,ip`; empty = one counter). */
  get scope(): string {
    const c = this.cfg;
    return [c.perUser ? 'user' : '', c.perNetwork ? 'network' : '', c.perIP ? 'ip' : ''].filter(Boolean).join(',');
  }

  /** Requests allowed per period now (the configured `maxCount` until the auto-tuner changes it). */
  get maxCount(): number {
    return this.current;
  }

  /**
   * Changes the requests allowed per period, the current window included. A rule configured with
   * `maxCount: 0` always rejects and is never changed.
   * @param n the new count, a positive integer
   * @returns whether the rule changed
   */
  setMaxCount(n: number): boolean {
    if (!this.local || n === this.current || !Number.isInteger(n) || n < 1) return false;
    this.current = n;
    return true;
  }

  /** Whether the rule counts this method. */
  applies(method: string): boolean {
    return this.matches(method);
  }

  /** Takes one point; false when the window is full. */
  async take(s: Subject): Promise<boolean> {
    return (await this.tryTake(s)) === undefined;
  }

  /**
   * Takes one point.
   * @returns undefined when admitted, else the ms until the window frees a point (the whole
   *   period for a `maxCount: 0` rule, which never admits)
   */
  async tryTake(s: Subject): Promise<number | undefined> {
    if (!this.local) return PERIOD_SECONDS[this.cfg.period] * 1000; // maxCount 0 always rejects
    const c = this.cfg;
    const key = `${c.perIP ? s.clientAddress.slice(0, MAX_PART) : ''}|${c.perUser ? (s.userId ?? 'anonymous').slice(0, MAX_PART) : ''}|${c.perNetwork ? s.networkId : ''}`;
    const store = this.store;
    const shared = this.shared;
    // A limiter rejects past the configured maxCount; the current one (tuned) decides.
    try {
      if (!store || !shared) return this.within(await this.local.consume(key, 1));
      // Refused by the open breaker: straight to the per-process limiter, paying nothing.
      const p = store.breaker.tryRun(() => shared.consume(key, 1), store.timeoutMs);
      if (!p) throw store.breaker.openError;
      return this.within(await p);
    } catch (e) {
      if (e instanceof RateLimiterRes) return this.within(e);
      // The shared store failed, was slow or is skipped: this process decides alone for now.
      store?.onFallback(e);
      try {
        return this.within(await this.local.consume(key, 1));
      } catch (e2) {
        if (e2 instanceof RateLimiterRes) return this.within(e2);
        throw e2;
      }
    }
  }

  /** Undefined when a count the limiter reported is within the current maxCount, else the ms until its window frees a point. */
  private within(res: RateLimiterRes): number | undefined {
    return res.consumedPoints <= this.current ? undefined : Math.max(0, res.msBeforeNext);
  }
}

/** Why a budget refused: the rule whose window is full and when it frees a point. */
export interface Refusal {
  /** The full rule. */
  rule: Rule;
  /** ms until its window admits again. */
  waitMs: number;
}

/** `error.data.details` of a client-side refusal: which budget and rule refused, and when to come back. */
export interface RefusalData {
  /** The budget's id. */
  budget: string;
  /** The full rule's method glob. */
  method: string;
  /** Calls the rule allows per window now. */
  maxCount: number;
  /** The rule's window (`second`, `minute`, `hour`, `day`). */
  period: string;
  /** What the rule counts per (`user`, `network`, `ip`, combined with commas; empty = one counter for all). */
  per: string;
  /** Whole seconds until the window admits again (also the `Retry-After` header). */
  retryAfterSeconds: number;
}

/**
 * The `error.data.details` of a refusal (docs/access.md).
 * @param budget the budget's id
 */
export function refusalData(budget: string, r: Refusal): RefusalData {
  const rule = r.rule;
  return { budget, method: rule.method, maxCount: rule.maxCount, period: rule.period, per: rule.scope, retryAfterSeconds: retryAfterSeconds(r) };
}

/** Whole seconds until a refused call may pass (at least 1: a Retry-After of 0 invites a hot loop). */
export function retryAfterSeconds(r: Refusal): number {
  return Math.max(1, Math.ceil(r.waitMs / 1000));
}

/** One `rateLimiters.budgets[]` entry. */
export class Budget {
  /** The rules, in config order. */
  readonly rules: readonly Rule[];

  constructor(
    readonly id: string,
    rules: readonly RuleConfig[],
    store: SharedStore | undefined,
  ) {
    this.rules = rules.map((r, i) => new Rule(r, `${id}:${i}:`, store));
  }

  /**
   * Takes one point from every rule matching the method.
   * @returns false when any matching rule is full (points already taken from earlier rules stay taken)
   */
  async admit(s: Subject): Promise<boolean> {
    return (await this.refusal(s)) === undefined;
  }

  /**
   * Takes one point from every rule matching the method.
   * @returns undefined when admitted, else the first full rule and the ms until its window frees a point
   */
  async refusal(s: Subject): Promise<Refusal | undefined> {
    for (const r of this.rules) {
      if (!r.applies(s.method)) continue;
      const waitMs = await r.tryTake(s);
      if (waitMs !== undefined) return { rule: r, waitMs };
    }
    return undefined;
  }

  /** The rules that count a method (the ones the auto-tuner adjusts for it). */
  rulesFor(method: string): Rule[] {
    return this.rules.filter((r) => r.applies(method));
  }
}

/**
 * A fallback reporter: a warning at most every 30 s, never naming the store's URI.
 * @param count called on every fallback (the metric)
 */
export function fallbackReporter(logger: Logger, count: () => void): (e: unknown) => void {
  let last = 0;
  return (e) => {
    count();
    const now = Date.now();
    if (now - last < LOG_EVERY_MS) return;
    last = now;
    // The code or class only: driver messages can hold the store's host and port.
    const code = (e as { code?: unknown }).code;
    logger.warn(
      { err: typeof code === 'string' ? code : e instanceof Error ? e.name : 'unknown' },
      'rate-limit store (redis) failed or was slow: counting per process until it answers again',
    );
  };
}
