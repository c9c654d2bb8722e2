/**
 * Abort helpers. On Node 20 `AbortSignal.any` has leaked, so child signals are linked by hand
 * with one listener that is removed when the child is done.
 *
 * Controllers are recycled: building an AbortSignal is one of the largest fixed costs
 * of a call on Node 20 (an EventTarget with its own listener map, about 2 µs), and a call needs
 * one for its deadline and one per attempt timeout. A controller that was never aborted and that
 * nobody listens to any more when its owner is done is indistinguishable from a new one, so it
 * goes back to a small free list instead of to the GC. One still aborted or listened to is never
 * reused.
 */
import { getEventListeners } from 'node:events';

/**
 * Most idle controllers kept for reuse (a burst beyond it allocates; the list never grows past it). Batches in flight hold one per
 * call attempt, so a few dozen busy connections sending batches of ten need several hundred; 1,024 idle ones hold well under 1 MiB.
 */
const MAX_SPARE = 1024;
const spare: AbortController[] = [];

/** A controller that is not aborted and has no listeners: a recycled one when available. */
export function acquireController(): AbortController {
  return spare.pop() ?? new AbortController();
}

/**
 * Hands a controller back once its owner is done with it. Kept only when it was never aborted and
 * no listener is left on its signal; call it at most once per acquisition, and never touch the
 * controller or its signal afterwards.
 */
export function releaseController(c: AbortController): void {
  if (spare.length < MAX_SPARE && !c.signal.aborted && getEventListeners(c.signal, 'abort').length === 0) spare.push(c);
}

/** A child AbortController that aborts when its parent does. Call `dispose()` when done. */
export interface LinkedController {
  controller: AbortController;
  signal: AbortSignal;
  /** Unlinks from the parent and recycles the child (see the module comment); idempotent. */
  dispose(): void;
}

class Link implements LinkedController {
  readonly controller = acquireController();
  readonly signal = this.controller.signal;
  private linked = false;
  private disposed = false;

  constructor(private readonly parent: AbortSignal) {
    if (parent.aborted) this.controller.abort(parent.reason);
    else {
      parent.addEventListener('abort', this.onAbort, { once: true });
      this.linked = true;
    }
  }

  private readonly onAbort = (): void => {
    this.controller.abort(this.parent.reason);
  };

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.linked) this.parent.removeEventListener('abort', this.onAbort);
    releaseController(this.controller);
  }
}

/**
 * Creates a child controller linked to a parent signal.
 * @param parent the signal whose abort (and reason) propagates to the child
 */
export function linkedController(parent: AbortSignal): LinkedController {
  return new Link(parent);
}

/**
 * Waits `ms` milliseconds, or rejects with the signal's reason when it aborts first. svc's one
 * sleep (retries, backoffs, drain waits).
 * @param ms delay in milliseconds (<= 0 resolves on the next tick)
 * @param signal aborts the wait
 * @param unref the timer does not keep the process alive (background work: a retry loop that
 *   must not delay exit)
 */
export function sleep(ms: number, signal?: AbortSignal, unref = false): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const t = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    if (unref) t.unref();
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
