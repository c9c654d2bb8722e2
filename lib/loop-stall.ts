/**
 * Stalls of svc's own event loop, so a timeout svc caused is not charged to an upstream.
 *
 * When the process is overloaded (a flood of calls, a long synchronous task, a machine short of
 * CPU), an upstream's answer can sit unread in its socket while svc's loop is busy; the attempt's
 * deadline timer then fires first and the attempt ends as a timeout although the upstream
 * answered in time. Charging that timeout to the upstream would let whoever overloads svc degrade
 * every upstream's health for everybody. A timer ticking every {@link TICK_MS} measures how late
 * it runs: a tick later than {@link STALL_THRESHOLD_MS} records the stall, and
 * {@link stalledDuring} tells whether an attempt's span lost a real share of its time to stalls.
 */

/** Interval of the watch timer, ms. */
export const TICK_MS = 50;
/** Lateness of a tick that counts as a stall, ms. */
export const STALL_THRESHOLD_MS = 100;
/** Stall intervals kept (the most recent ones; older ones are older than any attempt). */
const MAX_STALLS = 64;
/** Share of an attempt's span lost to stalls from which its timeout is svc's doing. */
const STALL_SHARE = 0.1;

/** Recent stalls: [start, end] in `performance.now()` ms, oldest first. */
const stalls: Array<[number, number]> = [];
let lastTick = 0;
let timer: NodeJS.Timeout | undefined;
/**
 * The real clock and timers, taken when the module loads: a test that installs fake timers while a
 * proxy starts must not leave the watch on a fake clock that never ticks again (every later span
 * would then look stalled).
 */
const clock = performance.now.bind(performance);
const every = setInterval;
const stop = clearInterval;

/** Starts the watch (idempotent; unref'd, so it never keeps the process alive). */
export function watchLoopStalls(): void {
  if (timer) return;
  lastTick = clock();
  timer = every(() => {
    const now = clock();
    const late = now - lastTick - TICK_MS;
    if (late > STALL_THRESHOLD_MS) noteStall(now - late, now);
    lastTick = now;
  }, TICK_MS);
  timer.unref();
}

/** Records a stall (the watch does; tests too). */
export function noteStall(start: number, end: number): void {
  stalls.push([start, end]);
  if (stalls.length > MAX_STALLS) stalls.shift();
}

/**
 * Whether svc's loop stalled for a real share of a span (at least a tenth of it), counting a
 * stall still going on now (the watch's tick is overdue: the span's own timer may have run first).
 * @param start span start, `performance.now()` ms (an attempt's `startedAt`)
 * @param end span end, same clock (default now)
 */
export function stalledDuring(start: number, end = clock()): boolean {
  const span = end - start;
  if (span <= 0) return false;
  let lost = 0;
  for (const [s, e] of stalls) {
    const overlap = Math.min(e, end) - Math.max(s, start);
    if (overlap > 0) lost += overlap;
  }
  if (timer) {
    // A stall in progress: the watch has not run since it began.
    const now = clock();
    const overdue = now - lastTick - TICK_MS;
    if (overdue > STALL_THRESHOLD_MS) lost += Math.max(0, Math.min(end, now) - Math.max(start, now - overdue));
  }
  return lost >= span * STALL_SHARE;
}

/**
 * Forgets every recorded stall and stops the watch (tests: a stall of an earlier test, or one still
 * being measured, must not leak into the next; the next proxy to start restarts the watch).
 */
export function resetLoopStalls(): void {
  stalls.length = 0;
  if (timer) stop(timer);
  timer = undefined;
}
