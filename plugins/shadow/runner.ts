/**
 * The off-request-path runner of shadow copies: a fixed number of copies in
 * flight per process, a copy beyond that dropped (never queued: a queue would grow without bound
 * under pressure and send stale copies late), jobs started only after the current I/O callbacks
 * (`setImmediate`), so nothing of a copy runs before the client's answer is on its way.
 */
import { sleep } from 'svc-proxy/util';

/** Copies in flight per process by default. */
export const DEFAULT_MAX_IN_FLIGHT = 32;

/** A bounded fire-and-forget runner. */
export class ShadowRunner {
  private running = 0;
  private stopped = false;
  private readonly idleWaiters = new Set<() => void>();

  /**
   * @param maxInFlight copies started or scheduled at once, at least 1
   * @param onError called with anything a job throws (a job should not throw; this keeps a bug
   *   from becoming an unhandled rejection)
   */
  constructor(
    readonly maxInFlight: number = DEFAULT_MAX_IN_FLIGHT,
    private readonly onError: (e: unknown) => void = () => undefined,
  ) {
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new RangeError(`maxInFlight must be a positive integer, got ${maxInFlight}`);
  }

  /** Copies scheduled or running now. */
  get inFlight(): number {
    return this.running;
  }

  /** True once {@link close} was called: every later offer is refused. */
  get closed(): boolean {
    return this.stopped;
  }

  /**
   * Schedules one job after the current I/O callbacks, if a slot is free. The slot is taken at
   * once (so a burst cannot overshoot the bound) and freed when the job settles.
   * @param job the copy: sends it and records the comparison
   * @returns false when the job was refused: every slot busy, or the runner closed
   */
  offer(job: () => Promise<void>): boolean {
    if (this.stopped || this.running >= this.maxInFlight) return false;
    this.running++;
    void new Promise<void>((resolve) => setImmediate(resolve))
      // A job scheduled before close() but not started yet is skipped: shutdown stops sending.
      .then(() => (this.stopped ? undefined : job()))
      .catch((e: unknown) => this.onError(e))
      .finally(() => {
        this.running--;
        if (this.running === 0) for (const w of this.idleWaiters) w();
      });
    return true;
  }

  /** Resolves when nothing is in flight (at once when idle). For tests and shutdown. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.idleWaiters.delete(done);
        resolve();
      };
      this.idleWaiters.add(done);
    });
  }

  /**
   * Stops accepting copies and waits for the running ones, at most `graceMs`; a copy still
   * running after that is left to its own timeout (the host closes the upstream pools next).
   * Idempotent; never rejects.
   * @param graceMs longest wait, ms
   */
  async close(graceMs: number): Promise<void> {
    this.stopped = true;
    if (this.running === 0) return;
    // The wait is cancelled once the race is over (its rejection is the race's, already settled).
    const waited = new AbortController();
    await Promise.race([this.idle(), sleep(graceMs, waited.signal)]);
    waited.abort();
  }
}
