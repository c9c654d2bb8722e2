/**
 * Whether this replica is connected to the shared-state Redis (pure, no Redis): the state
 * machine behind the gauge `svc_shared_state_connected` and its log lines, and the PING watch
 * that notices a frozen Redis (a stopped process keeps its sockets open, so node-redis stays
 * "ready" while nothing answers).
 */

/** Default interval of the liveness PING, ms. */
export const DEFAULT_PING_INTERVAL_MS = 1000;
/** Default longest wait for a PONG before Redis counts as unreachable, ms. */
export const DEFAULT_PING_TIMEOUT_MS = 1000;

/**
 * Connected or not, with one report per transition. Before the first verdict the state is
 * unknown: the connections come up one after the other, so a partial "up" is not a failure;
 * the first failure (a connection error) or the first full "up" settles it.
 */
export class LinkState {
  private state: boolean | undefined;

  /**
   * @param onChange called on each transition: `up`, and `atStart` for the first verdict (the
   *   caller logs a failure at start, and nothing for a first success)
   */
  constructor(private readonly onChange: (up: boolean, atStart: boolean) => void) {}

  /** Connected now (false while unknown). */
  get connected(): boolean {
    return this.state === true;
  }

  /**
   * Records what the connections look like now.
   * @param up every connection ready and Redis answering
   * @param failure this update comes from an error (a connection attempt that failed, a PING
   *   without answer), not from one connection becoming ready while another is still connecting
   */
  update(up: boolean, failure: boolean): void {
    if (this.state === undefined) {
      if (!up && !failure) return;
      this.state = up;
      this.onChange(up, true);
      return;
    }
    if (this.state === up) return;
    this.state = up;
    this.onChange(up, false);
  }
}

/** What {@link PingWatch} needs. */
export interface PingWatchOptions {
  /** Sends one PING; resolves on the answer. */
  ping: () => Promise<unknown>;
  /** Longest wait for the answer, ms. */
  timeoutMs: number;
  /** Called once when a PING went unanswered for `timeoutMs`. */
  onFrozen: () => void;
  /** Called once when an answer arrives after {@link PingWatchOptions.onFrozen}. */
  onThawed: () => void;
}

/**
 * One PING at a time (a frozen Redis never accumulates them): {@link PingWatch.tick} sends one
 * unless one is outstanding; an answer later than `timeoutMs` marks Redis frozen until an answer
 * arrives.
 */
export class PingWatch {
  private outstanding = false;
  private frozenNow = false;
  /** Bumped by {@link reset}: answers to PINGs of an earlier connection are ignored. */
  private generation = 0;

  constructor(private readonly opts: PingWatchOptions) {}

  /** Whether the last PING went unanswered past the timeout (and none answered since). */
  get frozen(): boolean {
    return this.frozenNow;
  }

  /** Sends a PING unless one is outstanding (call it every interval while connected). */
  tick(): void {
    if (this.outstanding) return;
    this.outstanding = true;
    const generation = this.generation;
    const timer = setTimeout(() => {
      if (generation !== this.generation || this.frozenNow) return;
      this.frozenNow = true;
      this.opts.onFrozen();
    }, this.opts.timeoutMs);
    timer.unref?.();
    this.opts.ping().then(
      () => {
        clearTimeout(timer);
        if (generation !== this.generation) return;
        this.outstanding = false;
        if (this.frozenNow) {
          this.frozenNow = false;
          this.opts.onThawed();
        }
      },
      () => {
        // No answer but an error (the connection closed, the command refused): node-redis
        // reports the connection itself; the next tick tries again.
        clearTimeout(timer);
        if (generation === this.generation) this.outstanding = false;
      },
    );
  }

  /** A connection was (re)established: forget an outstanding PING and the frozen verdict. */
  reset(): void {
    this.generation++;
    this.outstanding = false;
    this.frozenNow = false;
  }
}
