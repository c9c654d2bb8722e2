/**
 * The one circuit-breaker state machine of svc. The failsafe plugin's upstream breaker, the
 * cache connectors' failsafe entries and the storage breaker of every store connector are each
 * this machine with their own settings, so that "open", "half-open" and "closed" mean the same
 * thing everywhere and a fix lands once.
 *
 * Closed: the last `failureThresholdCapacity` counted outcomes are kept in a ring; it opens when
 * they hold `failureThresholdCount` failures (with `fullWindow`, only once the ring is full:
 * `n` failures in a ring of `n` is "n in a row"). Open: refused until `halfOpenAfter` has passed
 * since it opened. Half-open: at most `maxTrials` trials in flight; a failed trial reopens it
 * (the wait growing by `backoffFactor` up to `maxHalfOpenAfter`); it closes on
 * `successThresholdCount` successes (`close-early`), or judges once `successThresholdCapacity`
 * trials are in (`judge-at-capacity`, eRPC's rule). Time is read only through `now`, only while
 * open; no timer runs.
 */

/** A breaker's state. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Settings of a {@link CountBreaker} (durations in ms). */
export interface CountBreakerSettings {
  /** Failures among the last `failureThresholdCapacity` counted outcomes that open it. */
  failureThresholdCount: number;
  /** Size of the ring of counted outcomes. */
  failureThresholdCapacity: number;
  /** Open only once the ring is full (default false: as soon as the failures are there). */
  fullWindow?: boolean;
  /** How long it stays open before trials are let through, ms. */
  halfOpenAfter: number;
  /** Successes among the trials that close it. */
  successThresholdCount: number;
  /** Trials judged together while half-open. */
  successThresholdCapacity: number;
  /** When a half-open breaker decides: at the `successThresholdCount`-th success (default), or once `successThresholdCapacity` trials are in. */
  halfOpen?: 'close-early' | 'judge-at-capacity';
  /** Trials in flight at once while half-open (default unlimited). */
  maxTrials?: number;
  /** Factor applied to the open wait after a failed trial (default 1: the wait never grows). */
  backoffFactor?: number;
  /** Longest open wait, ms (default `halfOpenAfter`). */
  maxHalfOpenAfter?: number;
}

/** See the module comment. */
export class CountBreaker {
  /** Current state. */
  state: BreakerState = 'closed';
  private readonly ring: boolean[] = [];
  private failures = 0;
  private openedAt = 0;
  private wait: number;
  private inflight = 0;
  private ok = 0;
  private bad = 0;

  /**
   * @param cfg thresholds and waits (ms)
   * @param now clock, ms
   * @param onChange called on every edge with the state entered (logs, metrics)
   */
  constructor(
    readonly cfg: CountBreakerSettings,
    private readonly now: () => number = Date.now,
    private readonly onChange?: (to: BreakerState, from: BreakerState) => void,
  ) {
    this.wait = cfg.halfOpenAfter;
  }

  /** The current open wait, ms (grows after failed trials when `backoffFactor` > 1). */
  get openWait(): number {
    return this.wait;
  }

  /**
   * Whether an operation may run now: always when closed; when open, once the wait has passed
   * (it turns half-open and this caller is the first trial); when half-open, while fewer than
   * `maxTrials` trials are in flight.
   */
  permit(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (this.now() - this.openedAt < this.wait) return false;
      this.ok = this.bad = 0;
      this.inflight = 1;
      this.enter('half-open');
      return true;
    }
    if (this.inflight >= (this.cfg.maxTrials ?? Number.POSITIVE_INFINITY)) return false;
    this.inflight++;
    return true;
  }

  /** Records a counted outcome (`true` = failure); ignored while open. */
  record(failure: boolean): void {
    const c = this.cfg;
    if (this.state === 'closed') {
      this.ring.push(failure);
      if (failure) this.failures++;
      if (this.ring.length > c.failureThresholdCapacity && this.ring.shift()) this.failures--;
      if (this.failures >= c.failureThresholdCount && (!c.fullWindow || this.ring.length >= c.failureThresholdCapacity)) this.open(false);
      return;
    }
    if (this.state === 'open') return;
    if (this.inflight > 0) this.inflight--;
    if (failure) this.bad++;
    else this.ok++;
    if (c.halfOpen === 'judge-at-capacity') {
      if (this.ok + this.bad >= c.successThresholdCapacity) {
        if (this.ok >= c.successThresholdCount) this.close();
        else this.open(true);
      } else if (failure) this.open(true);
      return;
    }
    if (failure) {
      this.open(true);
      return;
    }
    if (this.ok >= c.successThresholdCount) this.close();
    else if (this.ok + this.bad >= c.successThresholdCapacity) this.open(true);
  }

  /** Frees a half-open trial slot without judging it (the trial ended in something that proves nothing). */
  release(): void {
    if (this.state === 'half-open' && this.inflight > 0) this.inflight--;
  }

  private open(afterTrial: boolean): void {
    if (afterTrial) this.wait = Math.min(this.wait * (this.cfg.backoffFactor ?? 1), this.cfg.maxHalfOpenAfter ?? this.cfg.halfOpenAfter);
    this.openedAt = this.now();
    this.ring.length = 0;
    this.failures = 0;
    this.inflight = 0;
    this.enter('open');
  }

  private close(): void {
    this.wait = this.cfg.halfOpenAfter;
    this.ring.length = 0;
    this.failures = 0;
    this.enter('closed');
  }

  private enter(to: BreakerState): void {
    const from = this.state;
    this.state = to;
    this.onChange?.(to, from);
  }
}
