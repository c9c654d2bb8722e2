/**
 * A circuit breaker for one storage connector on the request path (cache tiers, API-key stores,
 * the rate-limit store, SIWE nonce stores): every operation gets a deadline of its own, and a
 * connector that times out or fails `failureThreshold` times in a row is skipped for a back-off
 * window, so a store that stalls (a Redis stopped with its socket up answers nothing, and
 * node-redis's own command timeout does not cover a command already written) costs calls
 * nothing while it is down: the caller falls back at once (a cache miss, the per-process rate
 * limiter, an auth refusal).
 *
 * States: `closed` (operations run) → `open` (refused at once, for the back-off) → `half-open`
 * (one probe operation runs; the rest are still refused) → `closed` on the probe's success, or
 * `open` again with the back-off doubled (capped at `maxBackoff`) on its failure. Time is read
 * only while open (`Date.now()`, so fake timers drive it); no timer runs between operations.
 *
 * Observability, shared by every connector of a registry:
 * - `svc_storage_breaker_state{connector,kind}` gauge: 0 closed, 1 open, 2 half-open;
 * - `svc_storage_breaker_transitions_total{connector,kind,to}` counter, one per edge;
 * - `svc_storage_breaker_skipped_total{connector,kind}` counter: operations refused while open
 *   (cache reads answered as misses, cache writes dropped, rate-limit checks decided per process,
 *   API-key lookups refused);
 * - one log line per edge: `warn` on open, `info` on the half-open probe and on close. Errors are
 *   logged by code or class only: driver messages can carry the store's address.
 */
import { Type } from '@sinclair/typebox';
import { Counter, Gauge, type Registry } from 'prom-client';
import { Duration, Strict } from '../config/schema.ts';
import { type BreakerState, CountBreaker } from './breaker.ts';
import type { Logger } from './logger.ts';

/** A breaker's state. */
export type StorageBreakerState = BreakerState;

/** Value of `svc_storage_breaker_state` per state. */
export const BREAKER_STATE_VALUE: Readonly<Record<StorageBreakerState, number>> = { closed: 0, open: 1, 'half-open': 2 };

/** Resolved breaker settings (durations in ms). */
export interface StorageBreakerSettings {
  /** Consecutive failures (errors or timeouts) that open the breaker. */
  failureThreshold: number;
  /** First back-off after opening, ms. */
  backoff: number;
  /** Longest back-off, ms: each failed probe doubles the back-off up to this. */
  maxBackoff: number;
}

/** Defaults: 3 failures in a row open it; back-off 1 s, doubling to 30 s. */
export const DEFAULT_BREAKER_SETTINGS: Readonly<StorageBreakerSettings> = Object.freeze({ failureThreshold: 3, backoff: 1000, maxBackoff: 30_000 });

/**
 * The `breaker` block every storage connector's config may carry (durations resolved to ms by
 * config resolution). Absent fields take {@link DEFAULT_BREAKER_SETTINGS}.
 */
export const StorageBreakerSchema = Strict(
  {
    failureThreshold: Type.Optional(
      Type.Integer({
        minimum: 1,
        default: DEFAULT_BREAKER_SETTINGS.failureThreshold,
        description: 'failures or timeouts in a row that open the breaker (the connector is then skipped)',
      }),
    ),
    backoff: Type.Optional(Duration({ default: '1s', description: 'how long an open breaker skips the connector before one probe operation is let through' })),
    maxBackoff: Type.Optional(Duration({ default: '30s', description: 'cap of the back-off, which doubles after each failed probe' })),
  },
  { description: 'circuit breaker of this connector: while open, operations are skipped at once instead of waiting for a store that does not answer' },
);

/**
 * Settings from a config block, defaults filled in.
 * @param raw the validated `breaker` block (durations in ms), or undefined
 */
export function breakerSettings(raw: Partial<StorageBreakerSettings> | undefined): StorageBreakerSettings {
  const backoff = raw?.backoff ?? DEFAULT_BREAKER_SETTINGS.backoff;
  return {
    failureThreshold: raw?.failureThreshold ?? DEFAULT_BREAKER_SETTINGS.failureThreshold,
    backoff,
    maxBackoff: Math.max(backoff, raw?.maxBackoff ?? DEFAULT_BREAKER_SETTINGS.maxBackoff),
  };
}

/**
 * Why a storage operation did not run or did not finish: the breaker is open (`reason: 'open'`,
 * nothing was sent) or the operation missed its deadline (`reason: 'timeout'`; a write may still
 * be applied later).
 */
export class StorageUnavailableError extends Error {
  override readonly name = 'StorageUnavailableError';

  /**
   * @param message what happened, naming the connector (never its address)
   * @param connector connector id
   * @param kind what the connector stores (`cache`, `api-keys`, `rate-limit`...)
   * @param reason `open` or `timeout`
   */
  constructor(
    message: string,
    readonly connector: string,
    readonly kind: string,
    readonly reason: 'open' | 'timeout',
  ) {
    super(message);
  }
}

/** Options of a {@link StorageBreaker}. */
export interface StorageBreakerOptions {
  /** Connector id: the `connector` label and log field (never a URI). */
  connector: string;
  /** What it stores: the `kind` label (`cache`, `api-keys`, `rate-limit`, `siwe-nonces`...). */
  kind: string;
  /** Where edges are logged. */
  logger: Logger;
  /** Registry of the breaker metrics; none = no metrics (tests). */
  metrics?: Registry;
  /** Thresholds and back-off; defaults {@link DEFAULT_BREAKER_SETTINGS}. */
  settings?: Partial<StorageBreakerSettings>;
  /**
   * Whether a rejection is the store failing (default: every rejection). A store that answered
   * "no" (a rate limit reached, a corrupt record) is not failing.
   */
  isFailure?: (e: unknown) => boolean;
}

interface BreakerMetrics {
  state: Gauge<'connector' | 'kind'>;
  transitions: Counter<'connector' | 'kind' | 'to'>;
  skipped: Counter<'connector' | 'kind'>;
}

/** The breaker metrics of a registry, registered once however many plugins and connectors use them. */
function metricsOf(registry: Registry): BreakerMetrics {
  const existing = (name: string) => registry.getSingleMetric(name);
  const state =
    (existing('svc_storage_breaker_state') as Gauge<'connector' | 'kind'> | undefined) ??
    new Gauge({
      name: 'svc_storage_breaker_state',
      help: 'Circuit breaker of a storage connector: 0 closed, 1 open (skipped), 2 half-open (probing)',
      labelNames: ['connector', 'kind'],
      registers: [registry],
    });
  const transitions =
    (existing('svc_storage_breaker_transitions_total') as Counter<'connector' | 'kind' | 'to'> | undefined) ??
    new Counter({
      name: 'svc_storage_breaker_transitions_total',
      help: 'Edges of a storage connector circuit breaker, by the state entered',
      labelNames: ['connector', 'kind', 'to'],
      registers: [registry],
    });
  const skipped =
    (existing('svc_storage_breaker_skipped_total') as Counter<'connector' | 'kind'> | undefined) ??
    new Counter({
      name: 'svc_storage_breaker_skipped_total',
      help: 'Storage operations skipped because the connector breaker was open (cache reads missed, writes dropped, checks decided without the store)',
      labelNames: ['connector', 'kind'],
      registers: [registry],
    });
  return { state, transitions, skipped };
}

/** An error's code or class, never its message (driver messages can hold addresses). */
function codeOf(e: unknown): string {
  if (e instanceof StorageUnavailableError) return e.reason;
  const code = (e as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code.slice(0, 64);
  return e instanceof Error ? e.name.slice(0, 64) : 'unknown';
}

/** See the module comment. */
export class StorageBreaker {
  /** The error of an operation refused while open (one instance: refusing allocates nothing). */
  readonly openError: StorageUnavailableError;
  private readonly settings: StorageBreakerSettings;
  private readonly labels: { connector: string; kind: string };
  private readonly metrics?: BreakerMetrics;
  private readonly skippedCounter?: { inc(): void };
  /** svc's one breaker state machine: n failures in a ring of n is "n in a row"; one probe; the wait doubles per failed probe. */
  private readonly machine: CountBreaker;
  /** The error behind the edge being entered, for its log line. */
  private cause: unknown;
  /** Bumped on every edge: a result from an operation started in an earlier state is ignored. */
  private generation = 0;

  /** @param opts see {@link StorageBreakerOptions} */
  constructor(private readonly opts: StorageBreakerOptions) {
    this.settings = breakerSettings(opts.settings);
    const n = this.settings.failureThreshold;
    this.machine = new CountBreaker(
      {
        failureThresholdCount: n,
        failureThresholdCapacity: n,
        fullWindow: true,
        halfOpenAfter: this.settings.backoff,
        successThresholdCount: 1,
        successThresholdCapacity: 1,
        maxTrials: 1,
        backoffFactor: 2,
        maxHalfOpenAfter: this.settings.maxBackoff,
      },
      Date.now,
      (to, from) => this.entered(to, from),
    );
    this.labels = { connector: opts.connector, kind: opts.kind };
    this.openError = new StorageUnavailableError(
      `${opts.kind} connector ${opts.connector} is unavailable (circuit breaker open: skipped until a probe succeeds)`,
      opts.connector,
      opts.kind,
      'open',
    );
    if (opts.metrics) {
      this.metrics = metricsOf(opts.metrics);
      this.metrics.state.set(this.labels, 0);
      this.skippedCounter = this.metrics.skipped.labels(this.labels);
    }
  }

  /** The current state (an open breaker whose back-off has passed still says `open` until the next operation probes). */
  get state(): StorageBreakerState {
    return this.machine.state;
  }

  /**
   * Runs one storage operation the caller can do without: refused at once while open (past the
   * back-off, the operation is started as the half-open probe, but the caller is still refused
   * and does not wait for it), else given `timeoutMs` to settle.
   * @param op starts the operation (not called when refused)
   * @param timeoutMs deadline, ms (the timer is unref'd)
   * @returns the operation's promise, or undefined when the breaker refused it (counted as
   *   skipped): the caller falls back synchronously, paying no promise
   * @throws nothing; the promise rejects with the operation's error, or a
   *   {@link StorageUnavailableError} `timeout` when it missed the deadline
   */
  tryRun<T>(op: () => Promise<T>, timeoutMs: number): Promise<T> | undefined {
    if (this.machine.state === 'closed') return this.guard(op, timeoutMs);
    if (this.machine.permit()) {
      // The half-open probe runs off the caller's path: a caller that can do without the store
      // (a cache read, a rate-limit check) never waits out a probe's deadline; the probe's
      // outcome alone closes or reopens the breaker.
      this.guard(op, timeoutMs).catch(() => undefined);
    }
    this.skippedCounter?.inc();
    return undefined;
  }

  /**
   * Runs one operation whose answer the caller needs (an API-key lookup, a nonce claim): refused
   * with {@link openError} while open; past the back-off, this caller's operation is the probe.
   * @returns the operation's promise; rejects with {@link openError} when refused
   */
  run<T>(op: () => Promise<T>, timeoutMs: number): Promise<T> {
    if (!this.machine.permit()) {
      this.skippedCounter?.inc();
      return Promise.reject(this.openError);
    }
    return this.guard(op, timeoutMs);
  }

  private guard<T>(op: () => Promise<T>, timeoutMs: number): Promise<T> {
    const gen = this.generation;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        const e = new StorageUnavailableError(
          `${this.opts.kind} connector ${this.opts.connector} did not answer within ${timeoutMs} ms`,
          this.opts.connector,
          this.opts.kind,
          'timeout',
        );
        this.failed(gen, e);
        reject(e);
      }, timeoutMs);
      timer.unref();
      let p: Promise<T>;
      try {
        p = op();
      } catch (e) {
        p = Promise.reject(e);
      }
      p.then(
        (v) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.succeeded(gen);
          resolve(v);
        },
        (e: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (this.opts.isFailure && !this.opts.isFailure(e)) this.succeeded(gen);
          else this.failed(gen, e);
          reject(e);
        },
      );
    });
  }

  private succeeded(gen: number): void {
    if (gen === this.generation) this.machine.record(false);
  }

  private failed(gen: number, e: unknown): void {
    if (gen !== this.generation) return;
    this.cause = e;
    this.machine.record(true);
  }

  /** An edge of the machine: a new generation, one log line, the metrics. */
  private entered(to: StorageBreakerState, from: StorageBreakerState): void {
    this.generation++;
    const cause = this.cause;
    this.cause = undefined;
    const { connector, kind } = this.labels;
    const log = this.opts.logger;
    const backoffMs = this.machine.openWait;
    if (to === 'open') {
      log.warn(
        { connector, kind, err: codeOf(cause), backoffMs },
        from === 'half-open'
          ? `${kind} connector ${connector}: probe failed (${codeOf(cause)}); circuit breaker open again, skipped for ${backoffMs} ms`
          : `${kind} connector ${connector}: ${this.settings.failureThreshold} failures in a row (last: ${codeOf(cause)}); circuit breaker open, skipped for ${backoffMs} ms`,
      );
    } else if (to === 'half-open') {
      log.info({ connector, kind }, `${kind} connector ${connector}: circuit breaker half-open, probing with one operation`);
    } else {
      log.info({ connector, kind }, `${kind} connector ${connector}: probe succeeded; circuit breaker closed`);
    }
    this.metrics?.state.set(this.labels, BREAKER_STATE_VALUE[to]);
    this.metrics?.transitions.inc({ connector, kind, to });
  }
}
