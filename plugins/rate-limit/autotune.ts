/**
 * The rate-limit auto-tuner (eRPC's `RateLimitAutoTuner`, upstream/ratelimiter_autotuner.go):
 * one per upstream with a `rateLimitBudget` and `rateLimitAutoTune` enabled. It watches that
 * upstream's answers per method and, once per `adjustmentPeriod`, moves the `maxCount` of the
 * budget's rules that count the method:
 * - a window with fewer than {@link MIN_SAMPLES} answers changes nothing;
 * - more than `errorRateThreshold` of them rate-limited (HTTP 429 or a rate-limit message,
 *   `ErrEndpointCapacityExceeded`): `maxCount × decreaseFactor`, rounded down;
 * - none rate-limited: `maxCount × increaseFactor`, rounded up;
 * - in between: no change;
 * then clamped to [`minBudget`, `maxBudget`] (0 = no bound) and never below 1. Other failures
 * count in neither direction (eRPC's `RecordError` is only called for remote rate limits).
 *
 * Windows are per method and lazy, as in eRPC: the first answer of a method opens its window
 * (and is not counted), and the first answer after `adjustmentPeriod` closes it, counted, and
 * opens the next. No timer runs. A budget shared by several upstreams is tuned by each of them.
 *
 * Differs from eRPC in rounding: eRPC rounds every change up, so a rule under 20 never goes down
 * with the default factor 0.95 (and never reaches 0); svc rounds a decrease down and keeps it at
 * 1 or more.
 */
import type { Rule } from './budgets.ts';
import type { AutoTuneConfig } from './schema.ts';

/** Fewest answers in a window for it to move the budget (eRPC's). */
export const MIN_SAMPLES = 10;
/** Methods tracked per tuner: method names come from clients; later ones are not tuned. */
const MAX_METHODS = 1024;

/** One adjustment, for the log and the gauge. */
export interface Adjustment {
  rule: Rule;
  /** The method whose window triggered it. */
  method: string;
  from: number;
  to: number;
  direction: 'decrease' | 'increase';
  /** Rate-limited answers / answers in the window. */
  errorRate: number;
  samples: number;
}

interface Window {
  startedAt: number;
  total: number;
  errors: number;
}

/** The next `maxCount` of a rule, or the same one when nothing changes. */
export function tunedCount(
  prev: number,
  direction: 'decrease' | 'increase',
  cfg: Pick<AutoTuneConfig, 'increaseFactor' | 'decreaseFactor' | 'minBudget' | 'maxBudget'>,
): number {
  let next = direction === 'decrease' ? Math.floor(prev * cfg.decreaseFactor) : Math.ceil(prev * cfg.increaseFactor);
  if (cfg.minBudget > 0 && next < cfg.minBudget) next = cfg.minBudget;
  if (cfg.maxBudget > 0 && next > cfg.maxBudget) next = cfg.maxBudget;
  if (!Number.isSafeInteger(next)) next = Number.MAX_SAFE_INTEGER;
  return Math.max(1, next);
}

/** The auto-tuner of one upstream. */
export class AutoTuner {
  private readonly windows = new Map<string, Window>();

  /**
   * @param rulesFor the rules of the upstream's budget that count a method
   * @param cfg the upstream's `rateLimitAutoTune`
   * @param onAdjust called for each rule changed (log, gauge)
   * @param now clock, ms (tests inject one; by default `Date.now` as it is at each call)
   */
  constructor(
    private readonly rulesFor: (method: string) => readonly Rule[],
    private readonly cfg: AutoTuneConfig,
    private readonly onAdjust: (a: Adjustment) => void,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Counts an answer that was not a rate limit. */
  recordSuccess(method: string): void {
    this.record(method, false);
  }

  /** Counts a rate-limited answer (HTTP 429 or a rate-limit message). */
  recordError(method: string): void {
    this.record(method, true);
  }

  private record(method: string, error: boolean): void {
    const t = this.now();
    const w = this.windows.get(method);
    if (!w) {
      // The first answer opens the window and is not counted (eRPC resets its counters then).
      if (this.windows.size < MAX_METHODS) this.windows.set(method, { startedAt: t, total: 0, errors: 0 });
      return;
    }
    w.total++;
    if (error) w.errors++;
    if (t - w.startedAt < this.cfg.adjustmentPeriod) return;
    const { total, errors } = w;
    w.startedAt = t;
    w.total = 0;
    w.errors = 0;
    if (total < MIN_SAMPLES) return;
    const errorRate = errors / total;
    const direction = errorRate > this.cfg.errorRateThreshold ? 'decrease' : errorRate === 0 ? 'increase' : undefined;
    if (!direction) return;
    for (const rule of this.rulesFor(method)) {
      const from = rule.maxCount;
      if (from === 0) continue; // `maxCount: 0` always rejects by config
      const to = tunedCount(from, direction, this.cfg);
      if (rule.setMaxCount(to)) this.onAdjust({ rule, method, from, to, direction, errorRate, samples: total });
    }
  }
}
