/**
 * svc's one hedge: a try now, another each `delayMs(n)` while none has answered, up to
 * `maxCount` extra; the first answer wins and the tries still running are aborted through their
 * signal. Used by the failsafe plugin's network hedge (quantile-based delays, a shared cursor over
 * the upstreams) and by the cache connectors' fixed-delay hedge (eRPC's failsafe/hedge.go).
 *
 * What differs between them is passed in: which failures end the race at once (`isFinal`), which
 * answers only win when nothing else is running (`isFallback`), whether another try may start
 * (`canStart`), whether a race whose every try failed starts the next one at once
 * (`startWhenIdle`), and the error of a race every try lost (`allFailed`).
 */
import { acquireController, linkedController, type LinkedController, releaseController } from './abort.ts';

/** How a {@link hedge} race runs. */
export interface HedgeOptions<T> {
  /** Extra tries at most (0: the first try alone). */
  maxCount: number;
  /**
   * Wait before extra try `n` (1-based), ms, asked when its timer is armed (after each start):
   * a fixed delay or one computed per try (e.g. from a latency quantile).
   */
  delayMs: (n: number) => number;
  /** Parent signal: each try gets a child of it. Without one, each try gets its own controller's signal. */
  signal?: AbortSignal;
  /** The delay timers do not keep the process alive (background work). Default false. */
  unref?: boolean;
  /** Whether an extra try may start now (e.g. upstreams left to try); asked before each one. Default: always. */
  canStart?: () => boolean;
  /**
   * When every running try failed before the next timer, start the next try at once instead of
   * waiting (unless `signal` aborted). Default false: the timer keeps its schedule.
   */
  startWhenIdle?: boolean;
  /** Turns a try's rejection into the error the race keeps (default: as it is). */
  asError?: (e: unknown) => unknown;
  /** A failure that settles the race at once with that error (e.g. a revert). Default: none does. */
  isFinal?: (error: unknown) => boolean;
  /** An answer that wins only when no other try is running (e.g. an empty result); the first such is kept meanwhile. */
  isFallback?: (value: T) => boolean;
  /** Called as each extra try starts (counters), with its number (1-based). */
  onHedge?: (n: number) => void;
  /** Called with the winning answer after the others were aborted, before the race resolves. */
  onWin?: (value: T) => void;
  /** The error of a race every try failed, from their errors in the order they came (default: the last). */
  allFailed?: (errors: readonly unknown[]) => unknown;
  /** The abort reason given to tries still running when the race settles, built only when one is. */
  lostReason?: () => unknown;
}

type Link = LinkedController & { done?: boolean };

/** A child of `parent`, or a standalone (pooled) controller without one. */
function childOf(parent: AbortSignal | undefined): Link {
  if (parent) return linkedController(parent);
  const controller = acquireController();
  return { controller, signal: controller.signal, dispose: () => releaseController(controller) };
}

/**
 * Runs `tryOnce` as a hedged race (see the module comment and {@link HedgeOptions}).
 * @param tryOnce starts one try; `n` is 0 for the first, then the extra try's number
 * @param opts delays, limits and the race's rules
 * @returns the winning answer; rejects with a final error, or `allFailed` of every try's error
 *   once all failed and no other may start
 */
export function hedge<T>(tryOnce: (signal: AbortSignal, n: number) => Promise<T>, opts: HedgeOptions<T>): Promise<T> {
  const { maxCount, canStart } = opts;
  return new Promise<T>((resolve, reject) => {
    const links: Link[] = [];
    const errors: unknown[] = [];
    let pending = 0;
    let extras = 0;
    let settled = false;
    let fallback: { value: T } | undefined;
    let timer: NodeJS.Timeout | undefined;

    const finish = (outcome: { value: T } | { error: () => unknown }): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      // Only tries still running lost: their reason (often a stack capture) is built only when one is.
      let lost: unknown;
      let built = false;
      for (const l of links) {
        if (!l.done && !l.signal.aborted) {
          if (!built) {
            lost = opts.lostReason ? opts.lostReason() : new Error('hedged try lost the race');
            built = true;
          }
          l.controller.abort(lost);
        }
        l.dispose();
      }
      if ('value' in outcome) {
        opts.onWin?.(outcome.value);
        resolve(outcome.value);
      } else reject(outcome.error());
    };

    const mayExtend = (): boolean => extras < maxCount && (canStart?.() ?? true);

    /** Nothing running: start the next try early, or settle. */
    const idle = (): void => {
      if (pending > 0 || settled) return;
      if (opts.startWhenIdle && mayExtend() && !opts.signal?.aborted) {
        start(true);
        return;
      }
      // Without an early start the timer still has its turn while another try may come.
      if (!opts.startWhenIdle && timer && mayExtend()) return;
      if (fallback) finish(fallback);
      else finish({ error: () => (opts.allFailed ? opts.allFailed(errors) : errors[errors.length - 1]) });
    };

    const onTimer = (): void => {
      timer = undefined;
      if (settled) return;
      if (mayExtend()) start(true);
      else idle();
    };

    const arm = (): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(onTimer, opts.delayMs(extras + 1));
      if (opts.unref) timer.unref();
    };

    const start = (extra: boolean): void => {
      const n = extra ? ++extras : 0;
      if (extra) opts.onHedge?.(n);
      const link = childOf(opts.signal);
      links.push(link);
      pending++;
      tryOnce(link.signal, n).then(
        (v) => {
          link.done = true;
          pending--;
          if (settled) return;
          if (pending > 0 && opts.isFallback?.(v)) {
            fallback ??= { value: v };
            return;
          }
          finish({ value: v });
        },
        (e: unknown) => {
          link.done = true;
          pending--;
          if (settled) return;
          const err = opts.asError ? opts.asError(e) : e;
          if (opts.isFinal?.(err)) {
            finish({ error: () => err });
            return;
          }
          errors.push(err);
          idle();
        },
      );
      if (extras < maxCount) arm();
    };

    start(false);
  });
}
