import { setMaxListeners } from 'node:events';
import { acquireController, releaseController } from '../../lib/abort.ts';
import { DeadlineReason } from '../registry/upstream.ts';

/** Deadline timer of a request (module-level, so no closure is allocated per request). */
function abortAtDeadline(controller: AbortController, maxTimeoutMs: number): void {
  controller.abort(new DeadlineReason(`call exceeded server.maxTimeout (${maxTimeoutMs} ms)`));
}

/**
 * The deadline (`server.maxTimeout` from each call's start) and cancellation of one HTTP request's calls. Calls that start at once
 * (one call, a batch within `batchConcurrency`) share one AbortController and timer instead of one each; the calls of a larger
 * batch get their own when they start. The client leaving cancels them all.
 */
export class RequestScope {
  private shared?: { controller: AbortController; deadline: number; timer: NodeJS.Timeout };
  /** Calls with their own signal (a batch over `batchConcurrency`), created with the first: a single call allocates none. */
  private own?: Set<{ controller: AbortController; timer: NodeJS.Timeout }>;
  /** Why the client left, once it has: a call starting after that starts cancelled. */
  private cancelled?: Error;

  /**
   * @param maxTimeoutMs `server.maxTimeout`, ms
   * @param together whether every call starts at once (then one signal serves them all)
   * @param many whether many calls will listen on one signal (lifts the listener warning)
   */
  constructor(
    private readonly maxTimeoutMs: number,
    private readonly together: boolean,
    private readonly many: boolean,
  ) {}

  /** The signal and deadline of a call starting now; `release` clears its own timer once answered (a no-op for the shared one). */
  start(): { signal: AbortSignal; deadline: number; release: () => void } {
    const ms = this.maxTimeoutMs;
    // The client left before this call started (waiting for a slot, or closed before routing): no fresh signal of its own.
    if (this.cancelled) return { signal: AbortSignal.abort(this.cancelled), deadline: Date.now(), release: noop };
    if (this.together) {
      if (!this.shared) {
        const controller = acquireController();
        // Every call of a batch (and its plugins) may listen: that is not a leak.
        if (this.many) setMaxListeners(0, controller.signal);
        this.shared = { controller, deadline: Date.now() + ms, timer: setTimeout(abortAtDeadline, ms, controller, ms) };
      }
      return { signal: this.shared.controller.signal, deadline: this.shared.deadline, release: noop };
    }
    const controller = acquireController();
    const mine = { controller, timer: setTimeout(abortAtDeadline, ms, controller, ms) };
    const own = (this.own ??= new Set());
    own.add(mine);
    return {
      signal: controller.signal,
      deadline: Date.now() + ms,
      release: () => {
        clearTimeout(mine.timer);
        if (own.delete(mine)) releaseController(controller);
      },
    };
  }

  /** Cancels every call still running, and every call that starts from now on (the client left). */
  cancel(reason: Error): void {
    this.cancelled ??= reason;
    this.shared?.controller.abort(reason);
    if (this.own) for (const o of this.own) o.controller.abort(reason);
  }

  /** Clears the shared timer and recycles its controller (lib/abort.ts: only if unaborted and unheard). Call once, after every call settled. */
  dispose(): void {
    if (!this.shared) return;
    clearTimeout(this.shared.timer);
    releaseController(this.shared.controller);
    this.shared = undefined;
  }
}

function noop(): void {}
