/**
 * One poll at a time per filter on this replica (so no change is delivered twice), waiting
 * within the caller's own deadline: a call whose client left, or whose deadline passed, while an
 * earlier poll of its filter ran stops waiting at once.
 */
import { ErrCancelled, ErrEndpointRequestTimeout } from 'svc-proxy/plugin/errors';

/** The error a caller ends with when its signal aborted: its deadline passed, else its client left. */
export function abortError(deadline: number, what: string): Error {
  return Date.now() >= deadline ? new ErrEndpointRequestTimeout(`${what}: the call's deadline passed`) : new ErrCancelled(`${what}: the client went away`);
}

/** Resolves with `p`, or rejects as soon as `signal` aborts (its listener removed either way). */
function untilAborted(p: Promise<void>, signal: AbortSignal, deadline: number): Promise<void> {
  if (signal.aborted) return Promise.reject(abortError(deadline, 'waiting for an earlier poll of the filter'));
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortError(deadline, 'waiting for an earlier poll of the filter'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([p, aborted]).finally(() => signal.removeEventListener('abort', onAbort as () => void));
}

/** Runs work one at a time per key, in arrival order. */
export class Serial {
  private readonly busy = new Map<string, Promise<void>>();

  /**
   * Runs `fn` once every earlier call of `key` ended.
   * @param signal the caller's signal: aborted while waiting, `fn` is not run
   * @param deadline the caller's deadline, `Date.now()` ms (which error an abort is)
   * @throws ErrCancelled / ErrEndpointRequestTimeout when the caller's signal aborts while it waits; else what `fn` throws
   */
  async run<T>(key: string, signal: AbortSignal, deadline: number, fn: () => Promise<T>): Promise<T> {
    const prev = this.busy.get(key) ?? Promise.resolve();
    let release!: () => void;
    const turn = new Promise<void>((r) => (release = r));
    // A caller that stops waiting still holds its place until the earlier ones end: the next never overtakes them.
    const mine = prev.then(() => turn);
    this.busy.set(key, mine);
    try {
      await untilAborted(prev, signal, deadline);
      return await fn();
    } finally {
      release();
      void mine.then(() => {
        if (this.busy.get(key) === mine) this.busy.delete(key);
      });
    }
  }

  /** Keys with work running or waiting. */
  get size(): number {
    return this.busy.size;
  }
}
