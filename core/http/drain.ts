/**
 * Graceful drain on SIGTERM (spec §3.2), owned by the core because it owns the listener:
 *   serving ──SIGTERM──▶ draining ──waitBeforeShutdown──▶ closing ──in-flight done or waitAfterShutdown──▶ stopped
 * draining: only the healthcheck turns 503, so load balancers take the replica out of rotation before it refuses work; closing: new
 * requests get 503 with `Connection: close`, so a keep-alive client's retry lands on another replica, while in-flight ones finish.
 */
import { sleep } from '../../lib/abort.ts';
import type { Server } from 'node:http';

/** Lifecycle state of a proxy (spec §3.2). */
export type LifecycleState = 'serving' | 'draining' | 'closing' | 'stopped';

/** Timings of a drain, ms. */
export interface DrainTimings {
  /** `server.waitBeforeShutdown`: time between SIGTERM and refusing new requests, ms. */
  waitBeforeMs: number;
  /** `server.waitAfterShutdown`: longest wait for in-flight requests once refusing, ms. */
  waitAfterMs: number;
}

/**
 * What a plugin may read of the drain (`PluginHost.lifecycleStatus`); the metrics plugin exports it on scrape (spec §6), so a drain that
 * outlives its window is visible. Getters only: reading costs nothing on the request path.
 */
export interface LifecycleStatus {
  /** The current state (spec §3.2). */
  readonly state: LifecycleState;
  /** HTTP requests on the proxy listener whose response has not closed yet. */
  readonly requestsInFlight: number;
  /** Unix time of the drain's start (first SIGTERM/SIGINT), ms; 0 while serving or after a direct close. */
  readonly drainStartedAtMs: number;
}

/** Counts the HTTP requests in flight on a server and walks the drain states; {@link Drain.run} is idempotent (one promise). */
export class Drain implements LifecycleStatus {
  private current: LifecycleState = 'serving';
  private inFlight = 0;
  private startedAt = 0;
  private idle?: () => void;
  private running?: Promise<void>;

  /** The current state. */
  get state(): LifecycleState {
    return this.current;
  }

  /** Requests whose answer is not finished yet. */
  get requestsInFlight(): number {
    return this.inFlight;
  }

  /** Unix time the first {@link Drain.run} began, ms; 0 before (a later signal does not move it). */
  get drainStartedAtMs(): number {
    return this.startedAt;
  }

  /** Counts a server's requests from now on: +1 at `request`, −1 when its response closes. */
  track(server: Server): void {
    // One bound listener for every response ('close' fires once): no closure per request.
    server.on('request', (_req, res) => {
      this.inFlight++;
      res.on('close', this.ended);
    });
  }

  private readonly ended = (): void => {
    this.inFlight--;
    if (this.inFlight === 0) this.idle?.();
  };

  /**
   * Runs the drain: draining for `waitBeforeMs`, closing until nothing is in flight or `waitAfterMs` passed, then `stop()`.
   * @param stop closes listeners, stores and pools; called once, in state `stopped` (its rejection is the returned promise's)
   */
  run(timings: DrainTimings, stop: () => Promise<void>): Promise<void> {
    this.running ??= (async () => {
      this.startedAt = Date.now();
      if (this.current === 'serving') this.current = 'draining';
      if (timings.waitBeforeMs > 0) await sleep(timings.waitBeforeMs);
      this.current = 'closing';
      if (this.inFlight > 0) {
        // Ends at waitAfter, or as soon as the last in-flight request ends (idle aborts the wait).
        const idle = new AbortController();
        this.idle = () => idle.abort();
        await sleep(timings.waitAfterMs, idle.signal).catch(() => undefined);
        this.idle = undefined;
      }
      this.current = 'stopped';
      await stop();
    })();
    return this.running;
  }

  /** Marks the proxy stopped without a drain (a direct `close()`). */
  stopped(): void {
    this.current = 'stopped';
  }
}
