/**
 * How one cache operation runs under its `failsafeForGets` / `failsafeForSets` entry, as eRPC's
 * connector failsafe does (its data/cache_executor.go): retry ⊃ hedge ⊃ entry circuit breaker ⊃
 * per-try timeout, each try also going through the connector's own {@link StorageBreaker}.
 *
 * - Only connection-level failures ({@link isConnectionError}: refused, reset, broken pipe, host
 *   unreachable, a closed client...) are retried, keep a hedge race going, or count against an
 *   entry's circuit breaker. A try that missed its deadline, a breaker that refused, or any other
 *   error ends the operation at once (eRPC: "application-level errors are not retriable"); the
 *   caller takes it as a miss (reads) or a dropped write.
 * - A miss is an answer: never retried; it does not move an entry's breaker (eRPC ignores
 *   RecordNotFound); any other answer counts as a success.
 */
import { type BreakerState, CountBreaker, hedge, sleep, type StorageBreaker } from 'svc-proxy/util';

/** Resolved eRPC circuit breaker of one failsafe entry (durations in ms). */
export interface EntryBreakerSettings {
  /** Failures among the last `failureThresholdCapacity` counted outcomes that open it. */
  failureThresholdCount: number;
  /** Size of the window of counted outcomes; the breaker opens only once the window is full. */
  failureThresholdCapacity: number;
  /** How long it stays open before trial operations are let through, ms. */
  halfOpenAfter: number;
  /** Successes among the trials that close it again. */
  successThresholdCount: number;
  /** Trials let through while half-open (and judged together). */
  successThresholdCapacity: number;
}

/** eRPC's defaults of a `circuitBreaker` block (common/defaults.go). */
export const ENTRY_BREAKER_DEFAULTS: Readonly<EntryBreakerSettings> = Object.freeze({
  failureThresholdCount: 20,
  failureThresholdCapacity: 80,
  halfOpenAfter: 5 * 60_000,
  successThresholdCount: 8,
  successThresholdCapacity: 10,
});

/** An operation refused by an entry's open circuit breaker. */
export class EntryBreakerOpenError extends Error {
  override readonly name = 'EntryBreakerOpenError';
}

/**
 * eRPC's failsafe circuit breaker (failsafe/breaker.go) as svc's one breaker state machine
 * ({@link CountBreaker}): a ring of the last `failureThresholdCapacity` counted outcomes; once
 * full with at least `failureThresholdCount` failures it opens; after `halfOpenAfter` up to
 * `successThresholdCapacity` trials run, and once that many are judged it closes with
 * `successThresholdCount` successes among them, else reopens; a failed trial reopens it at once.
 */
export class EntryBreaker {
  /** The error of a refused operation (one instance). */
  readonly openError = new EntryBreakerOpenError('cache connector failsafe entry: circuit breaker open');
  private readonly machine: CountBreaker;

  /**
   * @param cfg thresholds ({@link ENTRY_BREAKER_DEFAULTS} for what is unset)
   * @param now clock, ms
   */
  constructor(
    readonly cfg: EntryBreakerSettings,
    now: () => number = Date.now,
  ) {
    this.machine = new CountBreaker({ ...cfg, fullWindow: true, halfOpen: 'judge-at-capacity', maxTrials: cfg.successThresholdCapacity }, now);
  }

  /** Current state. */
  get state(): BreakerState {
    return this.machine.state;
  }

  /** Whether an operation may run now (open → half-open once `halfOpenAfter` passed). */
  permit(): boolean {
    return this.machine.permit();
  }

  /** Records a counted outcome (`true` = a connection-level failure). */
  record(failure: boolean): void {
    this.machine.record(failure);
  }

  /** Frees a half-open trial slot without judging it (a try that ended in a timeout or another non-connection error). */
  release(): void {
    this.machine.release();
  }
}

/** Node.js error codes of a connection that failed or broke. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENOTCONN',
  'ERR_SOCKET_CLOSED',
  'ERR_STREAM_DESTROYED',
]);

/** Message fragments of a connection-level failure when the driver gives no code (eRPC's list, plus node-redis and ioredis wording). */
const CONNECTION_TEXT =
  /connection refused|connection reset|broken pipe|no such host|network is unreachable|tls handshake|i\/o timeout|operation timed out|use of closed network connection|client is closed|unexpectedly closed|closed unexpectedly|connection is closed|socket closed|goaway|clusterdown|masterdown|tryagain|loading redis is loading|redis is loading|stream isn't writeable/i;

/**
 * Whether an error is the store's connection failing (eRPC's `isTransportError`): the only errors
 * a cache failsafe entry retries, hedges past or counts in its breaker. Looks at `code`, the
 * `cause` chain and an `AggregateError`'s members, then the message. A deadline svc enforced
 * ({@link StorageUnavailableError}) or an open breaker is not one.
 */
export function isConnectionError(e: unknown, depth = 0): boolean {
  if (!(e instanceof Error) || depth > 4) return false;
  if (e.name === 'StorageUnavailableError' || e instanceof EntryBreakerOpenError) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  if (e instanceof AggregateError && e.errors.some((x) => isConnectionError(x, depth + 1))) return true;
  if (e.cause !== undefined && isConnectionError(e.cause, depth + 1)) return true;
  return CONNECTION_TEXT.test(e.message);
}

/** How one operation runs (see the module comment). */
export interface OpPlan {
  /** Deadline of each try, ms (eRPC's `timeout.duration`, applied per try as eRPC does). */
  timeoutMs: number;
  /** Tries in all (retries only after a connection-level failure). */
  attempts: number;
  /** Wait before try n+1 (n from 1), ms. */
  delayMs(n: number): number;
  /** Fixed-delay hedge: `maxCount` extra tries, each `delayMs` after the previous one. */
  hedge?: { delayMs: number; maxCount: number };
  /** The entry's own circuit breaker. */
  breaker?: EntryBreaker;
}

/**
 * Runs one operation by its plan (see the module comment).
 * @param plan the matching entry's plan
 * @param storage the connector's breaker: every try goes through it, with the plan's deadline
 * @param op starts one try
 * @param isMiss whether an answer is a miss (not counted by an entry's breaker)
 * @returns the answer; rejects with the last try's error. The plain plan (one try, no hedge, no
 *   entry breaker) throws the storage breaker's `openError` synchronously while it is open, so
 *   a read falls back without a promise.
 */
export function runPlan<T>(plan: OpPlan, storage: StorageBreaker, op: () => Promise<T>, isMiss: (v: T) => boolean = () => false): Promise<T> {
  if (plan.attempts <= 1 && !plan.hedge && !plan.breaker) {
    const p = storage.tryRun(op, plan.timeoutMs);
    if (!p) throw storage.openError;
    return p;
  }
  const breaker = plan.breaker;
  const once = (): Promise<T> => {
    if (breaker && !breaker.permit()) return Promise.reject(breaker.openError);
    const p = storage.tryRun(op, plan.timeoutMs) ?? Promise.reject(storage.openError);
    if (!breaker) return p;
    return p.then(
      (v) => {
        if (!isMiss(v)) breaker.record(false);
        else breaker.release();
        return v;
      },
      (e: unknown) => {
        if (isConnectionError(e)) breaker.record(true);
        // eRPC records nothing for timeouts and other errors; a half-open trial slot is freed.
        else breaker.release();
        throw e;
      },
    );
  };
  const h = plan.hedge;
  // eRPC's fixed-delay hedge (failsafe/hedge.go): a try now, another every `delayMs` while none
  // answered; connection failures keep the race going, any other error ends it; when every try
  // failed, the last failure. The tries are not cancellable: a loser's answer is dropped.
  const hedged = h ? () => hedge(() => once(), { maxCount: h.maxCount, delayMs: () => h.delayMs, unref: true, isFinal: (e) => !isConnectionError(e) }) : once;
  return (async () => {
    for (let n = 1; ; n++) {
      try {
        return await hedged();
      } catch (e) {
        if (n >= plan.attempts || !isConnectionError(e)) throw e;
        const wait = plan.delayMs(n);
        if (wait > 0) await sleep(wait, undefined, true);
      }
    }
  })();
}
