/**
 * Graceful drain (spec §3.2): the process-lifecycle state machine the CLI runs
 * on SIGTERM. The core owns it because it owns the listener; plugins read the state through
 * `PluginHost.lifecycle` (the healthcheck answers 503 from the first moment of a drain).
 *
 *   serving ──SIGTERM──▶ draining ──waitBeforeShutdown──▶ closing ──in-flight done or waitAfterShutdown──▶ stopped
 *
 * - draining: everything is still served; only the healthcheck turns 503 so load balancers and
 *   readiness probes take the replica out of rotation before it stops accepting work.
 * - closing: new requests get HTTP 503 `ErrServiceShuttingDown` with `Connection: close`, so a
 *   client's keep-alive connection ends and its retry lands on another replica; requests already
 *   in flight run to their answer.
 * - stopped: the listener closes, then the `shutdown` taps (stores, pollers) and the pools.
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
 * What a plugin may read of the drain (`PluginHost.lifecycleStatus`): the metrics plugin exports
 * it on scrape as `svc_server_lifecycle_state`, `svc_server_drain_started_timestamp_seconds` and
 * `svc_server_inflight_requests` (spec §6), so a drain that outlives its window is visible
 * without an orchestrator's metrics. Getters only: reading costs nothing on the request path.
 */
export interface LifecycleStatus {
  /** The current state (spec §3.2). */
  readonly state: LifecycleState;
  /** HTTP requests on the proxy listener whose response has not closed yet. */
  readonly requestsInFlight: number;
  /** Unix time of the drain's start (first SIGTERM/SIGINT), ms; 0 while serving or after a direct close. */
  readonly drainStartedAtMs: number;
}

/**
 * Counts the HTTP requests in flight on a server and walks the drain states. One instance per
 * proxy; {@link Drain.run} is idempotent (a second call returns the first one's promise).
 */
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
   * Runs the drain: draining for `waitBeforeMs`, then closing until nothing is in flight or
   * `waitAfterMs` passed, then `stop()` (close listeners, stores, pools). Never rejects: a failing
   * `stop` is the caller's to log through its own promise.
   * @param stop closes everything; called once, in state `stopped`
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
