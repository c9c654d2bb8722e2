/**
 * The hostile suite's two forms and its per-class summary.
 *
 * - Short form (default; runs inside `npm test`): few iterations, short stalls.
 * - Full form (`npm run chaos`, which sets `CHAOS=full`): {@link FULL_FACTOR} times the attack
 *   calls, longer storage stalls, and one line per attack class printed at the end of the run
 *   (before the reporter's last line `N passed, N failed, N skipped`, which stays last).
 *
 * Each test file calls {@link chaosClass} inside its `describe`, and counts its hostile calls
 * with {@link ChaosClass.attack}, so the summary says how hard each rule was pushed.
 */

/** True when the suite runs in its full form (`CHAOS=full`, set by `npm run chaos`). */
export const FULL = process.env.CHAOS === 'full';

/** How many times more attack calls the full form sends than the short one. */
export const FULL_FACTOR = 10;

/**
 * Scales an iteration count to the form the suite runs in.
 * @param short the count of the short form (inside `npm test`)
 * @returns `short` in the short form, `short * FULL_FACTOR` in the full form
 */
export function scale(short: number): number {
  return FULL ? short * FULL_FACTOR : short;
}

/**
 * One value per form.
 * @param short the value of the short form
 * @param full the value of the full form
 */
export function pick<T>(short: T, full: T): T {
  return FULL ? full : short;
}

/** What the summary line of one attack class reports. */
interface ClassStats {
  /** The class number of the hostile review (1-9). */
  n: number;
  title: string;
  passed: number;
  failed: number;
  /** Hostile calls sent (requests, or direct node operations an attack consists of). */
  attacks: number;
  /** Free-form facts worth a reviewer's eye (latencies measured...). */
  notes: string[];
}

const classes = new Map<number, ClassStats>();

/** Handle of one attack class, returned by {@link chaosClass}. */
export interface ChaosClass {
  /**
   * Counts hostile calls sent.
   * @param k how many (default 1)
   */
  attack(k?: number): void;
  /**
   * Adds a fact to the class's summary line (latest value per key wins).
   * @param text e.g. `p99 12.3 ms stalled vs 8.1 ms healthy`
   */
  note(text: string): void;
}

/**
 * Registers the current `describe` as attack class `n`: an `afterEach` records each test's
 * outcome for the summary. Call it once, inside the class's top-level `describe` callback.
 * @param n class number (1-9, the order of the hostile review)
 * @param title short name of what is attacked
 */
export function chaosClass(n: number, title: string): ChaosClass {
  const stats: ClassStats = classes.get(n) ?? { n, title, passed: 0, failed: 0, attacks: 0, notes: [] };
  classes.set(n, stats);
  afterEach(function () {
    const state = this.currentTest?.state;
    if (state === 'passed') stats.passed++;
    else if (state === 'failed') stats.failed++;
  });
  return {
    attack: (k = 1) => {
      stats.attacks += k;
    },
    note: (text) => {
      stats.notes.push(text);
    },
  };
}

/** The summary lines, one per class in class order. */
export function summaryLines(): string[] {
  return [...classes.values()]
    .sort((a, b) => a.n - b.n)
    .map((c) => {
      const verdict = c.failed === 0 && c.passed > 0 ? 'HELD' : c.failed > 0 ? 'BROKEN' : 'NOT RUN';
      const notes = c.notes.length ? `; ${c.notes.join('; ')}` : '';
      return `chaos [${c.n}] ${c.title}: ${verdict} (${c.passed} passed, ${c.failed} failed, ${c.attacks} attack calls${notes})`;
    });
}

// A root hook (this module is first imported while mocha loads the spec files, at the root
// suite): in the full form, the summary is printed once every suite has ended, so it comes just
// before the reporter's epilogue.
after(function chaosSummary() {
  if (!FULL || classes.size === 0) return;
  // eslint-disable-next-line no-console
  console.log(
    `\n  hostile suite (CHAOS=full, ${FULL_FACTOR}x):\n${summaryLines()
      .map((l) => `    ${l}`)
      .join('\n')}`,
  );
});
