/**
 * The pick behind eRPC's served tip, per axis: the plain majority pick over the eligible
 * upstreams (eRPC with `trajectoryWindow: 0`: svc has no trajectory referee), then eRPC's
 * regression guard (`maxRegressionBlocks`), then eRPC's guaranteed-method floor
 * (`guaranteedMethods`), in that order, as eRPC composes them.
 *
 * - Regression guard: a pick more than `maxRegressionBlocks` below the reference (the
 *   second-highest head of the evaluation, or the last corroborated pick when that is higher) is
 *   taken for a poisoned ballot: the last corroborated pick is served instead (never above the
 *   highest head, and only when that raises the tip), for at most {@link REGRESSION_HOLD_MS}
 *   after it was last corroborated; then the guard fails open, serves the pick as computed and
 *   forgets its memory. A pick enters the memory only when two heads have it (at or below the
 *   second-highest) and it is within the tolerance above the last value trusted (eRPC's
 *   continuity rule, so a far-future majority is never remembered).
 * - Guaranteed-method floor: for each pattern, the majority pick over the eligible upstreams
 *   that support the pattern (`supportsMethod` of the pattern itself, as eRPC's
 *   `ShouldHandleMethod(pattern)`); the served tip is lowered to the lowest of them, so every
 *   client sees a `latest` the upstreams of those methods can serve. A pattern no eligible
 *   upstream supports sets no floor.
 */
import type { Upstream } from 'svc-proxy/plugin';
import type { UpstreamChainState } from './upstream-chain.ts';

/** eRPC's servedTipRegressionTTL: longest hold of the regression guard, ms. */
export const REGRESSION_HOLD_MS = 60_000;
/** eRPC's DefaultToleratedBlockHeadRollback: what `maxRegressionBlocks: 0` (unset) means, blocks. */
export const DEFAULT_MAX_REGRESSION_BLOCKS = 1024;
/** Most `guaranteedMethods` patterns a network takes (each costs a pick per evaluation). */
export const MAX_GUARANTEED_METHODS = 32;

/** One evaluation's heads: the majority pick and the references the guard measures against (block numbers, 0 = none). */
export interface Ballot {
  /** The floor(N/2)-th highest head: the freshest block a strict majority have. */
  readonly pick: number;
  /** The second-highest head (the only one when there is one): a block two upstreams corroborate. */
  readonly corroborated: number;
  /** The highest head. */
  readonly max: number;
}

/**
 * The ballot of some heads.
 * @param heads block numbers (0 or less = unknown, left out)
 */
export function ballotOf(heads: readonly number[]): Ballot {
  const known = heads.filter((v) => v > 0).sort((a, b) => b - a);
  const n = known.length;
  if (n === 0) return { pick: 0, corroborated: 0, max: 0 };
  return { pick: known[Math.floor(n / 2)] as number, corroborated: known[Math.min(1, n - 1)] as number, max: known[0] as number };
}

/** What the guard is doing (its transitions are logged once each). */
export type GuardState = 'healthy' | 'holding' | 'failed-open';

/** eRPC's served-tip regression guard of one axis (see the file comment). */
export class RegressionGuard {
  private lastGood = 0;
  /** When {@link lastGood} was last corroborated, ms. */
  private lastGoodAt = 0;
  private lastServed = 0;
  /** The guard's current state. */
  state: GuardState = 'healthy';

  /**
   * @param tolerance `maxRegressionBlocks` resolved: blocks a pick may fall below the reference; negative disables the guard
   * @param now clock, ms
   * @param onChange called once per state change (the served value, the pick, the reference)
   */
  constructor(
    readonly tolerance: number,
    private readonly now: () => number = Date.now,
    private readonly onChange?: (state: GuardState, served: number, pick: number, reference: number) => void,
  ) {}

  /** The tip to serve for a ballot (its pick, or the held value). */
  apply(b: Ballot): number {
    const pick = b.pick;
    if (this.tolerance < 0 || pick <= 0) return pick;
    const t = this.now();
    const armed = this.lastGood > 0;
    const reference = armed ? Math.max(b.corroborated, this.lastGood) : b.corroborated;
    if (reference <= 0) return pick;
    if (pick >= reference - this.tolerance) {
      this.remember(b, t);
      this.note('healthy', pick, pick, reference);
      return pick;
    }
    if (!armed) return pick;
    if (t - this.lastGoodAt >= REGRESSION_HOLD_MS) {
      // A memory older than the window is no evidence any more: fail open and re-arm from the live heads.
      this.note('failed-open', pick, pick, reference);
      this.lastGood = 0;
      this.lastGoodAt = 0;
      return pick;
    }
    const served = b.max > 0 ? Math.min(this.lastGood, b.max) : this.lastGood;
    // A hold may only raise the tip.
    if (served <= pick) return pick;
    this.note('holding', served, pick, reference);
    return served;
  }

  /** Records the tip finally served (after the guaranteed-method floor): the continuity rule's fallback. */
  served(tip: number): void {
    if (tip > 0) this.lastServed = tip;
  }

  private remember(b: Ballot, t: number): void {
    if (b.max <= 0 || b.pick > b.corroborated) return;
    const trusted = this.lastGood > 0 && t - this.lastGoodAt < REGRESSION_HOLD_MS ? this.lastGood : this.lastServed;
    if (trusted > 0 && b.pick > trusted + this.tolerance) return;
    this.lastGood = b.pick;
    this.lastGoodAt = t;
  }

  private note(state: GuardState, served: number, pick: number, reference: number): void {
    if (this.state === state) return;
    this.state = state;
    this.onChange?.(state, served, pick, reference);
  }
}

/** What a served-tip axis reads of one upstream. */
interface Eligible {
  readonly u: Upstream;
  readonly s: UpstreamChainState;
}

/**
 * The upstreams whose heads make a served-tip ballot: counted, not syncing, with a head; once any
 * is vouched (head plausibility), the vouched ones only, as the max mode counts.
 */
export function eligibleOf(peek: (u: Upstream) => UpstreamChainState | undefined, counted: Iterable<Upstream>): Eligible[] {
  const all: Eligible[] = [];
  let anyVouched = false;
  for (const u of counted) {
    const s = peek(u);
    if (!s || s.syncing || !(s.latest > 0)) continue;
    all.push({ u, s });
    if (s.vouched) anyVouched = true;
  }
  return anyVouched ? all.filter((e) => e.s.vouched) : all;
}

/** The served-tip settings of a network, resolved. */
export interface ServedTipSettings {
  /** `latest` is the majority pick. */
  readonly latest: boolean;
  /** `finalized` (and `safe`) is the majority pick. */
  readonly finalized: boolean;
  /** `guaranteedMethods` patterns (at most {@link MAX_GUARANTEED_METHODS}). */
  readonly guaranteedMethods: readonly string[];
  /** `maxRegressionBlocks` as configured: 0 = {@link DEFAULT_MAX_REGRESSION_BLOCKS}, -1 = no guard. */
  readonly maxRegressionBlocks: number;
}

/** A network's served tip: the axes it is on for, and each axis' pick with its own guard. */
export class ServedTip {
  readonly latest: boolean;
  readonly finalized: boolean;
  private readonly patterns: readonly string[];
  private readonly guards: Readonly<Record<'latest' | 'finalized', RegressionGuard>>;

  /**
   * @param cfg the network's settings
   * @param now clock, ms
   * @param onGuard called when an axis' guard changes state
   */
  constructor(
    cfg: ServedTipSettings,
    now: () => number = Date.now,
    onGuard?: (axis: 'latest' | 'finalized', state: GuardState, served: number, pick: number, reference: number) => void,
  ) {
    this.latest = cfg.latest;
    this.finalized = cfg.finalized;
    this.patterns = cfg.guaranteedMethods.slice(0, MAX_GUARANTEED_METHODS);
    const tolerance = cfg.maxRegressionBlocks === 0 ? DEFAULT_MAX_REGRESSION_BLOCKS : cfg.maxRegressionBlocks;
    const guard = (axis: 'latest' | 'finalized') => new RegressionGuard(tolerance, now, onGuard && ((st, s, p, r) => onGuard(axis, st, s, p, r)));
    this.guards = { latest: guard('latest'), finalized: guard('finalized') };
  }

  /** The state of an axis' regression guard. */
  guardState(kind: 'latest' | 'finalized'): GuardState {
    return this.guards[kind].state;
  }

  /**
   * The served block of one axis.
   * @param peek an upstream's chain state
   * @param counted the upstreams that make up the network's head
   * @param kind `latest` or `finalized`
   */
  head(peek: (u: Upstream) => UpstreamChainState | undefined, counted: Iterable<Upstream>, kind: 'latest' | 'finalized'): number {
    const eligible = eligibleOf(peek, counted);
    const value = (e: Eligible) => (kind === 'latest' ? e.s.latest : e.s.finalized);
    const guard = this.guards[kind];
    let tip = guard.apply(ballotOf(eligible.map(value)));
    if (tip > 0) {
      for (const p of this.patterns) {
        const floor = ballotOf(eligible.filter((e) => e.u.supportsMethod(p)).map(value)).pick;
        if (floor > 0 && floor < tip) tip = floor;
      }
    }
    guard.served(tip);
    return tip;
  }
}
