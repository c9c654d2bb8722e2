/**
 * eRPC's `failsafeForGets` / `failsafeForSets` on a cache connector: a list of failsafe entries,
 * the first whose `matchMethod` glob and `matchFinality` list match the call decides how the
 * connector's reads (gets) or writes (sets) run:
 * - `timeout.duration`: the operation's deadline, retries included (replaces the tier's
 *   `readTimeout` / `writeTimeout` for matching calls; still at most the 1 s / 5 s outer bounds);
 * - `retry`: `maxAttempts` tries in all (1 = no retry), `delay` before the second, multiplied by
 *   `backoffFactor` (capped at `backoffMaxDelay`) each time, with up to `jitter` added at random.
 *   A miss is an answer, never retried; an error or a timed-out try is. No try starts after the
 *   deadline, and none while the connector's breaker is open.
 *
 * What eRPC's entries also allow is refused by name: `circuitBreaker` (svc has one breaker per
 * connector, its `breaker` block), `hedge` (tiers are already read in parallel; a lower
 * `timeout` bounds a slow one) and `consensus` (eRPC refuses it too).
 */
import { compileGlobs, Duration, type Finality, type GlobTest, Strict, Type } from 'svc/plugin';

/** One eRPC failsafe entry, as the schema accepts it. */
export const FailsafeEntrySchema = Strict(
  {
    matchMethod: Type.Optional(Type.String({ default: '*', description: 'glob on the call method (`eth_getLogs|eth_call`); `*` = every method' })),
    matchFinality: Type.Optional(
      Type.Array(Type.Union([Type.Literal('finalized'), Type.Literal('unfinalized'), Type.Literal('realtime'), Type.Literal('unknown')]), {
        description: 'finality classes this entry applies to (empty or unset = any)',
      }),
    ),
    timeout: Type.Optional(Strict({ duration: Duration({ description: 'deadline of the operation, retries included' }) })),
    retry: Type.Optional(
      Strict({
        maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, default: 1, description: 'tries in all (1 = no retry)' })),
        delay: Type.Optional(Duration({ default: '0', description: 'wait before the second try' })),
        backoffFactor: Type.Optional(Type.Number({ minimum: 1, maximum: 10, default: 1, description: 'multiplier of the wait after each try' })),
        backoffMaxDelay: Type.Optional(Duration({ description: 'cap of the wait between tries' })),
        jitter: Type.Optional(Duration({ default: '0', description: 'random extra wait, up to this much' })),
      }),
    ),
    circuitBreaker: Type.Optional(Type.Unknown({ description: 'refused: use the connector breaker block' })),
    hedge: Type.Optional(Type.Unknown({ description: 'refused: tiers are read in parallel; use timeout' })),
    consensus: Type.Optional(Type.Unknown({ description: 'refused (eRPC refuses it too)' })),
  },
  { description: "eRPC's connector failsafe entry: how this connector's reads or writes run for matching calls" },
);

/** A resolved failsafe entry (durations in ms). */
export interface FailsafeEntry {
  matchMethod: string;
  matchFinality?: Finality[];
  timeout?: { duration: number };
  retry?: { maxAttempts: number; delay: number; backoffFactor: number; backoffMaxDelay?: number; jitter: number };
}

/** A raw entry after schema validation (durations already in ms; refused keys may be present). */
export type RawFailsafeEntry = Partial<FailsafeEntry> & { retry?: Partial<NonNullable<FailsafeEntry['retry']>>; circuitBreaker?: unknown; hedge?: unknown; consensus?: unknown };

/**
 * Checks and fills in a `failsafeForGets` / `failsafeForSets` list.
 * @param raw the validated list (or undefined)
 * @param path config path of the list, for messages
 * @param problems where refusals are pushed (`circuitBreaker`, `hedge`, `consensus`, a timeout
 *   above `maxTimeoutMs`)
 * @param maxTimeoutMs the outer bound of the operation (1 s reads, 5 s writes)
 */
export function resolveFailsafe(raw: readonly RawFailsafeEntry[] | undefined, path: string, problems: Array<{ path: string; message: string }>, maxTimeoutMs: number): FailsafeEntry[] | undefined {
  if (!raw || raw.length === 0) return undefined;
  return raw.map((e, i) => {
    const at = `${path}[${i}]`;
    if (e.circuitBreaker !== undefined) problems.push({ path: `${at}.circuitBreaker`, message: "eRPC's per-entry circuit breaker is not in svc: each connector has one breaker, set it in the driver block's `breaker` (failureThreshold, backoff, maxBackoff)" });
    if (e.hedge !== undefined) problems.push({ path: `${at}.hedge`, message: "eRPC's cache hedge is not in svc: every matching tier is read in parallel and the first hit wins; bound a slow tier with `timeout`" });
    if (e.consensus !== undefined) problems.push({ path: `${at}.consensus`, message: 'consensus does not apply to a cache connector (eRPC refuses it too)' });
    if (e.timeout && e.timeout.duration > maxTimeoutMs) problems.push({ path: `${at}.timeout.duration`, message: `at most ${maxTimeoutMs} ms` });
    const out: FailsafeEntry = { matchMethod: e.matchMethod ?? '*' };
    if (e.matchFinality && e.matchFinality.length > 0) out.matchFinality = e.matchFinality;
    if (e.timeout) out.timeout = { duration: e.timeout.duration };
    if (e.retry) out.retry = { maxAttempts: e.retry.maxAttempts ?? 1, delay: e.retry.delay ?? 0, backoffFactor: e.retry.backoffFactor ?? 1, jitter: e.retry.jitter ?? 0, ...(e.retry.backoffMaxDelay !== undefined ? { backoffMaxDelay: e.retry.backoffMaxDelay } : {}) };
    return out;
  });
}

/** How one operation runs: its deadline and its retry schedule. */
export interface OpPlan {
  /** Deadline of the whole operation, ms. */
  timeoutMs: number;
  /** Tries in all. */
  attempts: number;
  /** Wait before try n+1 (n from 1), ms. */
  delayMs(n: number): number;
}

/** The default plan: one try under the tier's own deadline. */
function single(timeoutMs: number): OpPlan {
  return { timeoutMs, attempts: 1, delayMs: () => 0 };
}

/**
 * The failsafe entries of one connector's reads or writes, compiled: {@link plan} picks the
 * first entry matching a call's method and finality. Plans are memoised per method and finality
 * (bounded), so the hot path allocates nothing once warm.
 */
export class FailsafePlans {
  private readonly compiled: Array<{ test: GlobTest; entry: FailsafeEntry; plan: OpPlan }>;
  private readonly fallback: OpPlan;
  private readonly memo = new Map<string, OpPlan>();

  /**
   * @param entries resolved entries (none: every operation is one try under `defaultTimeoutMs`)
   * @param defaultTimeoutMs the tier's own deadline (`readTimeout` or `writeTimeout`)
   */
  constructor(entries: readonly FailsafeEntry[] | undefined, defaultTimeoutMs: number) {
    this.fallback = single(defaultTimeoutMs);
    this.compiled = (entries ?? []).map((entry) => {
      const r = entry.retry;
      const plan: OpPlan = {
        timeoutMs: entry.timeout?.duration ?? defaultTimeoutMs,
        attempts: r?.maxAttempts ?? 1,
        delayMs: (n) => {
          if (!r) return 0;
          let d = r.delay * r.backoffFactor ** (n - 1);
          if (r.backoffMaxDelay !== undefined) d = Math.min(d, r.backoffMaxDelay);
          return d + (r.jitter > 0 ? Math.random() * r.jitter : 0);
        },
      };
      return { test: compileGlobs(entry.matchMethod.split('|')), entry, plan };
    });
  }

  /** Whether any entry was configured. */
  get configured(): boolean {
    return this.compiled.length > 0;
  }

  /**
   * The plan of an operation for a call.
   * @param method the call's method (`''` when unknown: only `*` entries match)
   * @param finality the call's finality class, when known (entries with `matchFinality` need it)
   */
  plan(method: string, finality: Finality | undefined): OpPlan {
    if (this.compiled.length === 0) return this.fallback;
    const key = `${finality ?? ''}|${method}`;
    let p = this.memo.get(key);
    if (p) return p;
    p = this.fallback;
    for (const c of this.compiled) {
      const fin = c.entry.matchFinality;
      if (fin && (finality === undefined || !fin.includes(finality))) continue;
      if (c.test(method)) {
        p = c.plan;
        break;
      }
    }
    if (this.memo.size < 1024) this.memo.set(key, p);
    return p;
  }
}

/** The method of a cache range key (`<method>:<params hash>`). */
export function methodOfRange(range: string): string {
  const i = range.indexOf(':');
  return i < 0 ? range : range.slice(0, i);
}
