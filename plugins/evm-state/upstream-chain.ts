/**
 * One upstream's view of the chain (its latest and finalized blocks, syncing state, head
 * plausibility marks), kept per upstream by the network's chain state in ./chain.ts, which
 * re-exports it.
 */
import type { UpstreamChainState as UpstreamChainStateView } from './api.ts';

/** One upstream's view of the chain. */
export class UpstreamChainState implements UpstreamChainStateView {
  /**
   * Highest accepted latest block of this upstream: answers only move it forward, a state poll sets
   * it (down too: a resynced node's poll is its truth). An implausible report never lands here.
   */
  latest = 0;
  /** Accepted finalized block of this upstream (answers move it forward, a poll sets it). */
  finalized = 0;
  /**
   * The upstream reported a finalized block, 0 included: a young chain (a fresh dev node) has
   * finalized its genesis and nothing else, which is known, not unknown.
   */
  finalizedKnown = false;
  /**
   * The last latest block this upstream reported, whatever its verdict (-1 = none yet; 0 is a
   * genesis head): a witness for another upstream's report of the same height (head plausibility,
   * docs/evm.md), never for its own.
   */
  reported = -1;
  /**
   * A state poll of this upstream finished without a latest block (down, refusing, failing): it was
   * asked and stayed silent, so it cannot corroborate another's head (head plausibility: who counts
   * as the network's only source).
   */
  silent = false;
  /**
   * Its head was judged against a vouched network head, confirmed by a witness, or it is the only
   * source (head plausibility, docs/evm.md). A head accepted at start-up, with nothing to judge it
   * against, is not vouched: while any upstream is, the network's heads count vouched ones only,
   * so a lie told first at start-up stops counting as soon as an honest upstream reports.
   */
  vouched = false;
  /**
   * Highest block of this upstream proven to link by parent hash to a block the network recorded
   * as canonical (head plausibility, plugins/evm-state/link.ts); 0 when none. Its reports up to it are confirmed.
   */
  linked = 0;
  /** Heads of this upstream currently judged implausible, by kind (one log line per episode). */
  readonly implausible = { latest: false, finalized: false };
  /** Last `eth_syncing` answer said syncing. */
  syncing = false;
  /** Consecutive polls that said "not syncing". */
  notSyncingStreak = 0;
  /** Time of the last successful poll, ms. */
  lastPollAt = 0;

  /** Advances the latest block; returns true when it moved. */
  advanceLatest(n: number): boolean {
    if (!(n > this.latest)) return false;
    this.latest = n;
    return true;
  }

  /** Sets the latest block from a state poll (may move back: the poll is the upstream's truth). */
  setLatest(n: number): void {
    this.latest = n;
  }

  /** Advances the finalized block; returns true when it moved. */
  advanceFinalized(n: number): boolean {
    if (n >= 0) this.finalizedKnown = true;
    if (!(n > this.finalized)) return false;
    this.finalized = n;
    return true;
  }
}
