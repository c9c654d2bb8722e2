/**
 * Head plausibility (docs/evm.md "Head plausibility"): the one rule deciding whether a
 * block number one source reports as its latest or finalized head may move the network's view.
 * Pure: the chain state gathers the facts ({@link HeadFacts}) and every entry point of heads (state
 * polls, answers, shared state, the WebSocket follower through `judgeHead`) asks this function.
 */
import type { Upstream } from 'svc-proxy/plugin';
import type { HeadVerdict } from './api.ts';

/**
 * Blocks a latest head may run ahead of the network's accepted head beyond what the block time
 * explains: block production jitters, and svc sees heads only when it polls or an answer shows one.
 */
export const HEAD_MARGIN_BLOCKS = 128;
/**
 * Blocks a latest head may run ahead while the block time is not estimated yet (a fresh process,
 * a devnet that mines on demand): large enough for a test chain mined in bursts, far too small for
 * a number from the future (`0x7fffffff`) to pass.
 */
export const UNKNOWN_BLOCK_TIME_ALLOWANCE = 1024;
/**
 * How many times the block time's rate the allowance grows with elapsed time: a chain may catch up
 * a few slow blocks at once, and the estimate is measured on when svc saw heads, not when blocks came.
 */
const RATE_SLACK = 2;

/** What a verdict is judged on (gathered by the network's chain state). */
export interface HeadFacts {
  /** The reported block number. */
  n: number;
  /** Which head the report is. */
  kind: 'latest' | 'finalized';
  /** The network's accepted latest head; 0 when nothing is known yet (bootstrap). */
  acceptedLatest: number;
  /** When the accepted head was last reported, ms; 0 when unknown. */
  acceptedAt: number;
  /** Now, ms. */
  now: number;
  /** Estimated block time, ms; undefined while unknown. */
  blockTimeMs: number | undefined;
  /**
   * Highest latest head any other source reported (a witness), whatever its verdict; -1 when no
   * other source has reported (0 is a head: a fresh devnet's genesis).
   */
  witnessLatest: number;
  /**
   * The report is no upstream's own: another replica's word (shared state). At start-up, before
   * any upstream of this replica has reported, there is nothing to judge it against, so it is not
   * believed (one entry written to Redis must not set a fresh replica's head).
   */
  hearsay?: boolean;
  /** The reporter is the only source the network has, so nothing could corroborate it. */
  soleSource: boolean;
  /** The reporter's own accepted latest head; 0 when unknown (only for `finalized`). */
  reporterLatest: number;
  /**
   * Highest block of the reporter proven to link by parent hash to a block the network recorded
   * (plugins/evm-state/link.ts); 0 or absent when none. A latest head up to it is confirmed.
   */
  reporterLinked?: number;
}

/**
 * Blocks a latest head may be ahead of the accepted head after `elapsedMs` (never negative):
 * {@link HEAD_MARGIN_BLOCKS} plus twice the blocks the block time allows, or
 * {@link UNKNOWN_BLOCK_TIME_ALLOWANCE} while the block time is unknown.
 */
export function headAllowance(elapsedMs: number, blockTimeMs: number | undefined): number {
  if (blockTimeMs === undefined || !(blockTimeMs > 0)) return UNKNOWN_BLOCK_TIME_ALLOWANCE;
  return HEAD_MARGIN_BLOCKS + Math.ceil((RATE_SLACK * Math.max(0, elapsedMs)) / blockTimeMs);
}

/**
 * The head plausibility rule (docs/evm.md):
 * - latest: `confirmed` at or below the accepted head, at or below a witness's head, or from the
 *   network's only source; `plausible` while nothing is accepted yet or within
 *   {@link headAllowance} of the accepted head; else `implausible`.
 * - finalized: `implausible` above the accepted latest head or above the reporter's own accepted
 *   latest head (a block cannot be final before it exists); else `confirmed` when a head is
 *   accepted, `plausible` at bootstrap.
 * - hearsay (another replica's word): never a sole source; at start-up `implausible` until an
 *   upstream of this replica has reported, and a finalized block above every such report too.
 * A latest head up to the reporter's linked block (its blocks chain by parent hash down to a
 * block the network recorded: the state poller walks them, plugins/evm-state/link.ts) is confirmed.
 * @returns the verdict; never throws (a non-finite or negative `n` is implausible)
 */
export function judgeHeadFacts(f: HeadFacts): HeadVerdict {
  const n = f.n;
  if (!Number.isSafeInteger(n) || n < 0) return 'implausible';
  const witnessed = f.witnessLatest >= 0;
  if (f.kind === 'finalized') {
    if (f.acceptedLatest > 0 && n > f.acceptedLatest) return 'implausible';
    // Another replica's word at start-up: final only below a head an upstream here reported.
    if (f.hearsay === true && f.acceptedLatest <= 0 && (!witnessed || n > f.witnessLatest)) return 'implausible';
    if (f.reporterLatest > 0 && n > f.reporterLatest) return 'implausible';
    return f.acceptedLatest > 0 ? 'confirmed' : 'plausible';
  }
  const confirmedAlone = (f.soleSource && f.hearsay !== true) || (f.reporterLinked !== undefined && f.reporterLinked > 0 && n <= f.reporterLinked);
  if (f.acceptedLatest <= 0) {
    if (confirmedAlone || (witnessed && n <= f.witnessLatest)) return 'confirmed';
    // Another replica's word with no own report to judge it against: not believed yet (its
    // entries come again every snapshot interval, and apply once an upstream here has reported).
    if (f.hearsay === true && !witnessed) return 'implausible';
    // Nothing vouched yet, but another upstream has reported: far above every other report is
    // as implausible at start-up as later (a liar answering first must not set the head).
    if (witnessed && n - f.witnessLatest > headAllowance(0, f.blockTimeMs)) return 'implausible';
    return 'plausible';
  }
  if (n <= f.acceptedLatest || (witnessed && n <= f.witnessLatest) || confirmedAlone) return 'confirmed';
  const elapsed = f.acceptedAt > 0 ? f.now - f.acceptedAt : 0;
  return n - f.acceptedLatest <= headAllowance(elapsed, f.blockTimeMs) ? 'plausible' : 'implausible';
}

/**
 * How long a network is watched before an upstream that alone has reported a head counts as its
 * only source, ms, provided every other upstream's state poll finished without a head (down,
 * refusing, failing): nothing can corroborate, so the reporter is trusted, as the network's only
 * configured upstream is. Shorter would let a liar that answers
 * first at start-up vouch for itself; longer keeps a network whose other upstreams are down at
 * the start-up allowance (any report plausible) for longer.
 */
export const SOLE_REPORTER_GRACE_MS = 3000;

/**
 * What a network's other sources say about a report: the highest latest block another (non-shadow)
 * upstream last reported, whatever its verdict (-1 when none has), whether the reporter is the
 * network's only one, and whether it is the only one that has reported anything.
 * @param upstreams the network's upstreams
 * @param source the reporter, when known (its own reports are no witness)
 * @param reportedOf an upstream's last reported latest block (-1 = none; 0 is genesis)
 * @param isShadow whether an upstream is a shadow (never serves, so never a source)
 */
export function witnessesOf(
  upstreams: Iterable<Upstream>,
  source: Upstream | undefined,
  reportedOf: (u: Upstream) => number,
  isShadow: (u: Upstream) => boolean,
): { witness: number; sole: boolean; soleReporter: boolean } {
  let witness = -1;
  let sources = 0;
  let sourceIn = false;
  let otherReporters = 0;
  for (const u of upstreams) {
    if (isShadow(u)) continue;
    sources++;
    if (u === source) sourceIn = true;
    else {
      const r = reportedOf(u);
      if (r >= 0) otherReporters++;
      witness = Math.max(witness, r);
    }
  }
  return { witness, sole: source !== undefined && sourceIn && sources === 1, soleReporter: source !== undefined && sourceIn && otherReporters === 0 };
}
