/**
 * eRPC's `failsafeForGets` / `failsafeForSets` on a cache connector (its data/failsafe.go): a
 * list of failsafe entries; the most specific entry matching a call decides how the connector's
 * reads (gets) or writes (sets and deletes) run: an entry naming a method (not `*`) and a
 * finality list first, then one naming a method only, then a finality list only, then `*`
 * alone; within a tier, the first in the list. Keys, as in eRPC:
 * - `timeout.duration`: deadline of each try (replaces the tier's `readTimeout` /
 *   `writeTimeout` for matching calls; at most the 1 s / 5 s outer bounds, which still cap the
 *   whole operation);
 * - `retry`: `maxAttempts` tries in all, `delay` before the second, times `backoffFactor` per
 *   try (capped at `backoffMaxDelay`), plus up to `jitter` at random. Only connection-level
 *   failures are retried (never a try that timed out, an open breaker or a miss);
 * - `hedge`: `maxCount` extra tries, one every `delay` while none has answered (a fixed delay:
 *   eRPC refuses `quantile` here too);
 * - `circuitBreaker`: eRPC's count-in-window breaker for the entry (failureThresholdCount of the
 *   last failureThresholdCapacity, halfOpenAfter, successThresholdCount of
 *   successThresholdCapacity trials), counting connection-level failures only. The connector's
 *   own `breaker` (consecutive failures or timeouts) still guards every try.
 * `consensus` is refused, as eRPC refuses it.
 * Run-time behaviour: `failsafe-run.ts`.
 */
import { Duration, type Finality, Strict, Type } from 'svc-proxy/plugin';
import { backoffDelay, compileGlobs, type GlobTest } from 'svc-proxy/util';
import { ENTRY_BREAKER_DEFAULTS, EntryBreaker, type EntryBreakerSettings, type OpPlan } from './failsafe-run.ts';

export type { OpPlan } from './failsafe-run.ts';

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
        backoffFactor: Type.Optional(
          Type.Number({
            exclusiveMinimum: 0,
            maximum: 10,
            default: 1,
            description: 'multiplier of the wait after each try (below 1 the waits shrink, as in eRPC)',
          }),
        ),
        backoffMaxDelay: Type.Optional(Duration({ description: 'cap of the wait between tries' })),
        jitter: Type.Optional(Duration({ default: '0', description: 'random extra wait, up to this much' })),
      }),
    ),
    circuitBreaker: Type.Optional(
      Strict(
        {
          failureThresholdCount: Type.Optional(
            Type.Integer({
              minimum: 1,
              default: 20,
              description: 'connection failures among the last failureThresholdCapacity outcomes that open the breaker',
            }),
          ),
          failureThresholdCapacity: Type.Optional(
            Type.Integer({ minimum: 1, default: 80, description: 'outcomes in the window (it opens only once the window is full)' }),
          ),
          halfOpenAfter: Type.Optional(Duration({ default: '5m', description: 'how long it stays open before trials are let through' })),
          successThresholdCount: Type.Optional(Type.Integer({ minimum: 1, default: 8, description: 'successful trials that close it' })),
          successThresholdCapacity: Type.Optional(Type.Integer({ minimum: 1, default: 10, description: 'trials let through while half-open' })),
        },
        { description: "eRPC's circuit breaker of this entry: while open, matching operations are skipped (a read misses, a write is dropped)" },
      ),
    ),
    hedge: Type.Optional(
      Strict(
        {
          delay: Type.Optional(Duration({ default: '0', description: 'wait before each extra try while none has answered' })),
          maxCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 5, default: 1, description: 'extra tries at most' })),
          quantile: Type.Optional(Type.Unknown({ description: 'refused: a cache connector has no latency quantile (eRPC refuses it too)' })),
        },
        { description: "eRPC's fixed-delay hedge: another try after `delay` while none has answered; connection failures keep the race going" },
      ),
    ),
    consensus: Type.Optional(Type.Unknown({ description: 'refused (eRPC refuses it too)' })),
  },
  { description: "eRPC's connector failsafe entry: how this connector's reads or writes run for matching calls" },
);

/** A resolved failsafe entry (durations in ms). */
export interface CacheFailsafeEntry {
  matchMethod: string;
  matchFinality?: Finality[];
  timeout?: { duration: number };
  retry?: { maxAttempts: number; delay: number; backoffFactor: number; backoffMaxDelay?: number; jitter: number };
  /** Fixed-delay hedge (ms). */
  hedge?: { delay: number; maxCount: number };
  /** eRPC's circuit breaker of the entry (ms). */
  circuitBreaker?: EntryBreakerSettings;
}

/** A raw entry after schema validation (durations already in ms; refused keys may be present). */
export type RawFailsafeEntry = Omit<Partial<CacheFailsafeEntry>, 'retry' | 'hedge' | 'circuitBreaker'> & {
  retry?: Partial<NonNullable<CacheFailsafeEntry['retry']>>;
  hedge?: Partial<NonNullable<CacheFailsafeEntry['hedge']>> & { quantile?: unknown };
  circuitBreaker?: Partial<EntryBreakerSettings>;
  consensus?: unknown;
};

/**
 * Checks and fills in a `failsafeForGets` / `failsafeForSets` list.
 * @param raw the validated list (or undefined)
 * @param path config path of the list, for messages
 * @param problems where refusals are pushed (`consensus`, a hedge `quantile`, a timeout above
 *   `maxTimeoutMs`)
 * @param maxTimeoutMs the outer bound of the operation (1 s reads, 5 s writes)
 */
export function resolveFailsafe(
  raw: readonly RawFailsafeEntry[] | undefined,
  path: string,
  problems: Array<{ path: string; message: string }>,
  maxTimeoutMs: number,
): CacheFailsafeEntry[] | undefined {
  if (!raw || raw.length === 0) return undefined;
  return raw.map((e, i) => {
    const at = `${path}[${i}]`;
    if (e.hedge?.quantile !== undefined)
      problems.push({
        path: `${at}.hedge.quantile`,
        message: 'a quantile hedge needs latency samples a cache connector does not keep (eRPC refuses it here too): give a fixed `delay`',
      });
    if (e.consensus !== undefined)
      problems.push({
        path: `${at}.consensus`,
        message: 'consensus does not apply to a cache connector (eRPC refuses it too): list the connector once, or read several tiers through several policies',
      });
    if (e.timeout && e.timeout.duration > maxTimeoutMs) problems.push({ path: `${at}.timeout.duration`, message: `at most ${maxTimeoutMs} ms` });
    const out: CacheFailsafeEntry = { matchMethod: e.matchMethod ?? '*' };
    if (e.matchFinality && e.matchFinality.length > 0) out.matchFinality = e.matchFinality;
    if (e.timeout) out.timeout = { duration: e.timeout.duration };
    if (e.hedge) out.hedge = { delay: e.hedge.delay ?? 0, maxCount: e.hedge.maxCount ?? 1 };
    if (e.circuitBreaker) out.circuitBreaker = { ...ENTRY_BREAKER_DEFAULTS, ...stripUndefined(e.circuitBreaker) };
    if (e.retry)
      out.retry = {
        maxAttempts: e.retry.maxAttempts ?? 1,
        delay: e.retry.delay ?? 0,
        backoffFactor: e.retry.backoffFactor ?? 1,
        jitter: e.retry.jitter ?? 0,
        ...(e.retry.backoffMaxDelay !== undefined ? { backoffMaxDelay: e.retry.backoffMaxDelay } : {}),
      };
    return out;
  });
}

/** The set fields of an object (a spread must not overwrite a default with `undefined`). */
function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The default plan: one try under the tier's own deadline. */
function single(timeoutMs: number): OpPlan {
  return { timeoutMs, attempts: 1, delayMs: () => 0 };
}

/**
 * The failsafe entries of one connector's reads or writes, compiled: {@link plan} picks the most
 * specific entry matching a call (see the module comment). Plans are memoised per method and
 * finality (bounded), so the hot path allocates nothing once warm. Each entry with a
 * `circuitBreaker` has one breaker, shared by every call it matches (as in eRPC).
 */
export class FailsafePlans {
  /** Entries by eRPC's matching tier: method+finality, method, finality, `*` (config order within each). */
  private readonly tiers: Array<Array<{ test?: GlobTest; finality?: readonly Finality[]; plan: OpPlan }>> = [[], [], [], []];
  private readonly fallback: OpPlan;
  private readonly memo = new Map<string, OpPlan>();
  private readonly count: number;

  /**
   * @param entries resolved entries (none: every operation is one try under `defaultTimeoutMs`)
   * @param defaultTimeoutMs the tier's own deadline (`readTimeout` or `writeTimeout`)
   * @param now clock of the entries' breakers, ms
   */
  constructor(entries: readonly CacheFailsafeEntry[] | undefined, defaultTimeoutMs: number, now: () => number = Date.now) {
    this.fallback = single(defaultTimeoutMs);
    this.count = entries?.length ?? 0;
    for (const entry of entries ?? []) {
      const r = entry.retry;
      const plan: OpPlan = {
        timeoutMs: entry.timeout?.duration ?? defaultTimeoutMs,
        attempts: r?.maxAttempts ?? 1,
        delayMs: (n) => {
          if (!r || r.delay <= 0) return 0;
          // An unset or zero backoffMaxDelay is no cap here.
          const maxMs = r.backoffMaxDelay !== undefined && r.backoffMaxDelay > 0 ? r.backoffMaxDelay : undefined;
          return backoffDelay({ initialMs: r.delay, factor: r.backoffFactor, maxMs, jitterMs: r.jitter }, n);
        },
      };
      if (entry.hedge) plan.hedge = { delayMs: entry.hedge.delay, maxCount: entry.hedge.maxCount };
      if (entry.circuitBreaker) plan.breaker = new EntryBreaker(entry.circuitBreaker, now);
      const anyMethod = entry.matchMethod === '*' || entry.matchMethod === '';
      const finality = entry.matchFinality && entry.matchFinality.length > 0 ? entry.matchFinality : undefined;
      const tier = anyMethod ? (finality ? 2 : 3) : finality ? 0 : 1;
      (this.tiers[tier] as Array<{ test?: GlobTest; finality?: readonly Finality[]; plan: OpPlan }>).push({
        test: anyMethod ? undefined : compileGlobs(entry.matchMethod.split('|')),
        finality,
        plan,
      });
    }
  }

  /** Whether any entry was configured. */
  get configured(): boolean {
    return this.count > 0;
  }

  /**
   * The plan of an operation for a call.
   * @param method the call's method (`''` when unknown: only `*` entries match)
   * @param finality the call's finality class, when known (entries with `matchFinality` need it)
   */
  plan(method: string, finality: Finality | undefined): OpPlan {
    if (this.count === 0) return this.fallback;
    const key = `${finality ?? ''}|${method}`;
    let p = this.memo.get(key);
    if (p) return p;
    p = this.fallback;
    search: for (const tier of this.tiers) {
      for (const c of tier) {
        if (c.finality && (finality === undefined || !c.finality.includes(finality))) continue;
        if (c.test && (method === '' || !c.test(method))) continue;
        p = c.plan;
        break search;
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
