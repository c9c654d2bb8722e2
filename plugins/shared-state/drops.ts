/**
 * Dropped shared-state entries: counted by reason (`svc_shared_state_dropped_total{reason}`, a
 * fixed label set) and logged at most once per reason per interval, so a flood of bad entries
 * written into Redis costs a counter increment each, never a log line each.
 */
import { DROP_REASONS, type DropReason } from './merge.ts';

/** What {@link DropTally} reports to. */
export interface DropSinks {
  /** Adds one to the reason's counter. */
  count(reason: DropReason): void;
  /** Writes one log line: the reason and how many were dropped since its last line. */
  log(reason: DropReason, dropped: number): void;
}

/** Counts every drop and logs each reason at most once per `intervalMs`. */
export class DropTally {
  private readonly lastLog = new Map<DropReason, number>();
  private readonly since = new Map<DropReason, number>();

  /**
   * @param sinks the counter and the logger
   * @param intervalMs least time between two log lines of one reason, ms
   * @param now the clock, ms (tests pass a fake one)
   */
  constructor(
    private readonly sinks: DropSinks,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records one drop (bound, so it can be passed as a {@link Drop}). */
  readonly drop = (reason: DropReason): void => {
    this.sinks.count(reason);
    const n = (this.since.get(reason) ?? 0) + 1;
    const t = this.now();
    const last = this.lastLog.get(reason);
    if (last !== undefined && t - last < this.intervalMs) {
      this.since.set(reason, n);
      return;
    }
    this.lastLog.set(reason, t);
    this.since.set(reason, 0);
    this.sinks.log(reason, n);
  };

  /** The fixed reasons, for creating every series up front. */
  static readonly reasons = DROP_REASONS;
}
