/**
 * Abort helpers. On Node 20 `AbortSignal.any` has leaked, so child signals are linked by hand
 * with one listener that is removed when the child is done.
 */

/** A child AbortController that aborts when its parent does. Call `dispose()` when done. */
export interface LinkedController {
  controller: AbortController;
  signal: AbortSignal;
  dispose(): void;
}

/**
 * Creates a child controller linked to a parent signal.
 * @param parent the signal whose abort (and reason) propagates to the child
 */
export function linkedController(parent: AbortSignal): LinkedController {
  const controller = new AbortController();
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { controller, signal: controller.signal, dispose: () => undefined };
  }
  const onAbort = () => controller.abort(parent.reason);
  parent.addEventListener('abort', onAbort, { once: true });
  return { controller, signal: controller.signal, dispose: () => parent.removeEventListener('abort', onAbort) };
}

/**
 * Waits `ms` milliseconds, or rejects with the signal's reason when it aborts first.
 * @param ms delay in milliseconds (<= 0 resolves on the next tick)
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
