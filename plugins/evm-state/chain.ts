/**
 * What svc knows about a network's chain: each upstream's latest and
 * finalized blocks (forward-only counters), its syncing state, and the network's highest
 * latest/finalized block over its currently serving upstreams, plus a block-time estimate.
 * Written by this plugin's state pollers and by responses that reveal a newer head; read, through
 * the chain state service this plugin provides (`networkChainState(host, network)`, typed by the
 * read-only `NetworkChainState` of svc-proxy/plugin), by interpolation, tip enforcement, block
 * availability, finality classification, the cache, consensus, select and the healthcheck.
 */
import type { Network, Upstream } from 'svc-proxy/plugin';
import type { HeadVerdict, NetworkChainState as NetworkChainStateView } from './api.ts';
import { SHADOW_UPSTREAM } from 'svc-proxy/plugins/shadow';
import { judgeHeadFacts, SOLE_REPORTER_GRACE_MS, witnessesOf } from './plausibility.ts';
import { networkChainState } from './api.ts';
import type { ServedTip } from './served-tip-pick.ts';
import { CanonicalHashes, HASH_HEIGHTS, MAX_REORGS } from './hashes.ts';
import { UpstreamChainState } from './upstream-chain.ts';

export { HASH_HEIGHTS, MAX_REORGS } from './hashes.ts';
export { UpstreamChainState } from './upstream-chain.ts';

/**
 * Share of the estimated block time after which the next block counts as due: the estimate is
 * measured on when svc saw heads, so it jitters by the gaps between observations; erring early
 * costs an upstream read, erring late serves an old head.
 */
export const NEXT_BLOCK_MARGIN = 0.8;

/** Smoothing of the block-time EMA (a new sample weighs 10%). */
const EMA_ALPHA = 0.1;
/** Samples needed before the block-time estimate is published. */
const EMA_MIN_SAMPLES = 3;

/** A network's view of its chain. */
export class NetworkChainState implements NetworkChainStateView {
  private readonly states = new Map<Upstream, UpstreamChainState>();
  private emaMs = 0;
  private samples = 0;
  private headAt = 0;
  /** Head moves seen; the first stamp is when svc first looked, not a block boundary. */
  private headMoves = 0;
  private head = 0;
  /** When a poll or an answer last reported the tracked head (or a higher one), ms; 0 when never. */
  private confirmedAt = 0;
  /**
   * When the head before the current one was last reported, ms (0 when unknown): the current
   * head was produced after it, so its successor is due no later than this plus a block time.
   */
  private prevConfirmedAt = 0;
  /**
   * The shortest state-poller interval of the network's upstreams, ms (0 = no poller); set by the
   * evm-state plugin. Freshness lasts about two intervals, so a quiet chain whose head every
   * poll confirms stays fresh.
   */
  pollIntervalMs = 0;
  /** Canonical block hashes by height, as polled (bounded to {@link HASH_HEIGHTS}), and the reorgs they revealed. */
  private readonly canonical: CanonicalHashes;
  /**
   * When this process first recorded a canonical block hash, ms; 0 while it never has. A reorg
   * before that moment could not have been seen here, so an unfinalized cache entry written
   * earlier (by another replica, or before a restart) cannot be vouched for by the absence of a
   * recorded reorg.
   */
  watchingSince = 0;

  /**
   * @param network the network whose upstreams are tracked
   * @param now clock in ms (tests inject one)
   */
  /** When this state was created (svc started watching the network), ms. */
  private readonly createdAt: number;

  constructor(
    readonly network: Network,
    private readonly now: () => number = Date.now,
  ) {
    this.createdAt = now();
    this.canonical = new CanonicalHashes(now);
  }

  /** The state of one upstream (created on first use). */
  of(u: Upstream): UpstreamChainState {
    let s = this.states.get(u);
    if (!s) {
      s = new UpstreamChainState();
      this.states.set(u, s);
    }
    return s;
  }

  /** State of an upstream if it was ever observed. */
  peek(u: Upstream): UpstreamChainState | undefined {
    return this.states.get(u);
  }

  /**
   * The upstreams whose counters make up {@link highestLatest} and {@link highestFinalized}.
   * Default: every upstream currently in `network.upstreams`. The evm-state plugin narrows it
   * to the currently selected, chain-verified upstreams, so one broken or
   * wrong-chain upstream cannot poison the network's head for good.
   */
  countedUpstreams: () => Iterable<Upstream> = () => this.network.upstreams;
  // (The evm-state plugin's list is reused from call to call: iterate it at once, never keep it.)

  /**
   * eRPC's served tip of this network (`evm.servedTip`, ./served-tip.ts): the axes whose head is
   * the majority pick (guarded, floored by guaranteed methods) instead of the max; undefined (max mode) unless configured.
   */
  servedTip: ServedTip | undefined = undefined;
  private readonly peekState = (u: Upstream) => this.states.get(u);

  /**
   * The block the network serves as `latest`: {@link maxLatest}, or with the served tip on for
   * `latest`, the freshest block a strict majority of the counted non-syncing upstreams have.
   */
  get highestLatest(): number {
    return this.servedTip?.latest ? this.servedTip.head(this.peekState, this.countedUpstreams(), 'latest') : this.maxLatest;
  }

  /**
   * Highest latest block over the network's counted upstreams ({@link countedUpstreams}: by
   * default those currently in `network.upstreams`; a failed or wrong-chain upstream is removed
   * from it, so it cannot poison the value for good). 0 when unknown.
   */
  get maxLatest(): number {
    let m = 0;
    let v = 0;
    for (const u of this.countedUpstreams()) {
      const s = this.states.get(u);
      if (!s) continue;
      if (s.latest > m) m = s.latest;
      if (s.vouched && s.latest > v) v = s.latest;
    }
    // Vouched upstreams only, once any is (see UpstreamChainState.vouched).
    return v > 0 ? v : m;
  }

  /** Whether some counted upstream's head is vouched for (false at start-up); unlike {@link vouchedLatest}, true on a chain at block 0. */
  get anyVouched(): boolean {
    for (const u of this.countedUpstreams()) if (this.states.get(u)?.vouched) return true;
    return false;
  }

  /** The highest latest block of a vouched counted upstream; 0 while none is vouched (start-up). */
  get vouchedLatest(): number {
    let v = 0;
    for (const u of this.countedUpstreams()) {
      const s = this.states.get(u);
      if (s && s.vouched && s.latest > v) v = s.latest;
    }
    return v;
  }

  /**
   * Some counted upstream reported its finalized block (0 on a young chain counts): until then
   * {@link highestFinalized} 0 means unknown, after it block 0 is finalized.
   */
  get finalizedKnown(): boolean {
    for (const u of this.countedUpstreams()) if (this.states.get(u)?.finalizedKnown) return true;
    return false;
  }

  /** The block the network serves as `finalized`: {@link maxFinalized}, or the majority pick with the served tip on for `finalized`. */
  get highestFinalized(): number {
    return this.servedTip?.finalized ? this.servedTip.head(this.peekState, this.countedUpstreams(), 'finalized') : this.maxFinalized;
  }

  /** Highest finalized block over the counted upstreams ({@link countedUpstreams}), vouched ones once any is; 0 when unknown. */
  get maxFinalized(): number {
    let m = 0;
    let v = 0;
    let anyVouched = false;
    for (const u of this.countedUpstreams()) {
      const s = this.states.get(u);
      if (!s) continue;
      if (s.finalized > m) m = s.finalized;
      if (s.vouched && s.latest > 0) {
        anyVouched = true;
        if (s.finalized > v) v = s.finalized;
      }
    }
    return anyVouched ? v : m;
  }

  /**
   * Records a latest block seen from an upstream (poll or response). When the network head
   * moves, feeds the block-time estimate and stamps the time the new head was first seen.
   */
  observeLatest(u: Upstream, n: number): void {
    this.of(u).advanceLatest(n);
    if (n > this.head) {
      const t = this.now();
      // The first head was stamped when svc first looked, not when the block arrived.
      if (this.head > 0 && this.headAt > 0 && this.headMoves > 0) {
        const perBlock = (t - this.headAt) / (n - this.head);
        // Reject nonsense (clock jumps, a node far behind catching up).
        if (perBlock >= 10 && perBlock <= 120_000) {
          this.emaMs = this.samples === 0 ? perBlock : this.emaMs + EMA_ALPHA * (perBlock - this.emaMs);
          this.samples++;
        }
      }
      if (this.head > 0) this.headMoves++;
      this.prevConfirmedAt = this.head > 0 ? this.confirmedAt : 0;
      this.head = n;
      this.headAt = t;
      this.confirmedAt = t;
    }
  }

  /**
   * A poll or an answer of a counted upstream reported `n` as its latest block: when that is the
   * tracked head, the head is confirmed now (a higher one is recorded by {@link observeLatest}), even though it did not move (a devnet
   * with automine, an idle L2, a stalled testnet).
   */
  confirmHead(n: number): void {
    // A higher head is recorded by observeLatest, which keeps when the previous one was last
    // confirmed (the successor's due time, {@link nextBlockDueAt}): stamping it here would lose that.
    if (n > 0 && n === this.head) this.confirmedAt = this.now();
  }

  /**
   * Re-aligns the head tracked by the block-time estimate with {@link highestLatest} when that
   * is lower (an upstream that reported a higher head no longer counts: wrong chain, excluded),
   * so the estimate and {@link isHeadFresh} do not stall behind a head nobody serves. The head's
   * time is cleared: the next new head is stamped without feeding the estimate a made-up sample,
   * and the head is not fresh until then. Called by the evm-state plugin after each poll.
   * @returns true when the tracked head moved back
   */
  resyncHead(): boolean {
    const h = this.highestLatest;
    if (h <= 0 || h >= this.head) return false;
    this.head = h;
    this.headAt = 0;
    this.confirmedAt = 0;
    this.prevConfirmedAt = 0;
    return true;
  }

  /**
   * Records the hash of a canonical block as a state poll saw it (reorg-aware
   * caching). A hash that differs from the one recorded for that height is a reorg. When the new
   * block's parent hash matches the block recorded below it, the fork is exactly at `n`; when it
   * does not, or nothing is recorded below, the depth is unknown and every block above the
   * finalized head is suspect ({@link reorgedSince}).
   * @param n block number
   * @param hash the block's hash (0x-prefixed, 32 bytes)
   * @param parentHash the block's parent hash, when known
   */
  observeBlockHash(n: number, hash: string, parentHash?: string): void {
    if (this.watchingSince === 0) this.watchingSince = this.now();
    this.canonical.observe(n, hash.toLowerCase(), parentHash?.toLowerCase(), this.highestFinalized);
  }

  /** The hash of block `n` on the chain as last polled, if recorded (the last {@link HASH_HEIGHTS} heights). */
  hashAt(n: number): string | undefined {
    return this.canonical.hashAt(n);
  }

  /**
   * The highest recorded height below `n - 1` and above the finalized head when nothing is
   * recorded at `n - 1`: polls skipped blocks, so a reorg under that height would go unseen
   * unless the block is fetched again and compared (the evm-state poller does).
   */
  unverifiedBelow(n: number): number | undefined {
    return this.canonical.unverifiedBelow(n, this.highestFinalized);
  }

  /** The highest height below `n` whose canonical hash is recorded, if any (where a parent-hash walk ends). */
  recordedBelow(n: number): number | undefined {
    return this.canonical.recordedBelow(n);
  }

  /** The last reorg seen: when (ms) and the lowest height it may have replaced; undefined when none. */
  get lastReorg(): { at: number; from: number } | undefined {
    return this.canonical.lastReorg;
  }

  /**
   * Whether a reorg seen at or after `writtenAt` (ms) may have replaced block `n` (the last
   * {@link MAX_REORGS} reorgs are remembered).
   */
  reorgedSince(writtenAt: number, n: number): boolean {
    return this.canonical.reorgedSince(writtenAt, n);
  }

  /** Records a finalized block seen from an upstream. */
  observeFinalized(u: Upstream, n: number): void {
    this.of(u).advanceFinalized(n);
  }

  /**
   * Judges a reported head against what the network accepted (head plausibility, docs/evm.md; the
   * rule is {@link judgeHeadFacts}), without recording it. Runs on head reports only (a poll, an
   * answer carrying a head, a shared-state entry), never per call.
   * @param n the reported block number
   * @param kind `latest` or `finalized`
   * @param source the reporting upstream, when one did: its own reports are no witness
   * @param hearsay another replica's word (shared state), see {@link HeadFacts.hearsay}
   */
  judgeHead(n: number, kind: 'latest' | 'finalized', source?: Upstream, hearsay = false): HeadVerdict {
    // Judged against vouched heads only: a head accepted at start-up vouches for nothing.
    const accepted = this.vouchedLatest;
    // The common case (a head svc already has), without gathering witnesses.
    if (kind === 'latest' && accepted > 0 && Number.isSafeInteger(n) && n >= 0 && n <= accepted) return 'confirmed';
    const { witness, sole, soleReporter } = witnessesOf(
      this.network.upstreams,
      source,
      (u) => this.states.get(u)?.reported ?? -1,
      (u) => SHADOW_UPSTREAM.get(u),
    );
    return judgeHeadFacts({
      n,
      kind,
      acceptedLatest: accepted,
      acceptedAt: this.confirmedAt > 0 ? this.confirmedAt : this.headAt,
      now: this.now(),
      blockTimeMs: this.blockTimeMs,
      witnessLatest: witness,
      // The only upstream that has reported, once the others were asked and stayed silent: nothing can corroborate it.
      soleSource: sole || (soleReporter && this.now() - this.createdAt >= SOLE_REPORTER_GRACE_MS && this.othersSilent(source)),
      reporterLatest: source ? (this.states.get(source)?.latest ?? 0) : 0,
      reporterLinked: source ? (this.states.get(source)?.linked ?? 0) : 0,
      hearsay,
    });
  }

  /**
   * Whether every other serving upstream of the network had a state poll finish without a head. Wall time alone is not enough: on a
   * machine short of CPU the others' polls can take longer than the grace, and the liar that answered first would vouch for itself.
   */
  private othersSilent(source: Upstream | undefined): boolean {
    for (const u of this.network.upstreams) {
      if (u === source || SHADOW_UPSTREAM.get(u)) continue;
      const st = this.states.get(u);
      if (!st?.silent && (st?.reported ?? -1) < 0) return false;
    }
    return true;
  }

  /** Estimated block time in ms, or undefined while observations accumulate. */
  get blockTimeMs(): number | undefined {
    return this.samples >= EMA_MIN_SAMPLES ? this.emaMs : undefined;
  }

  /**
   * When the block after the current head is due at the latest, ms, or undefined while the block
   * time is not estimated yet (spec §2.8 #3, "fresh means fresh"). The current head was produced
   * after the previous head was last reported (or, when that is unknown, when it was first seen),
   * so its successor is due one block time after that (taken as {@link NEXT_BLOCK_MARGIN} of the estimate).
   */
  get nextBlockDueAt(): number | undefined {
    const bt = this.blockTimeMs;
    if (bt === undefined || this.headAt === 0) return undefined;
    return (this.prevConfirmedAt > 0 ? this.prevConfirmedAt : this.headAt) + bt * NEXT_BLOCK_MARGIN;
  }

  /** Time (ms) the current highest head was first seen; 0 when never. */
  get headSeenAt(): number {
    return this.headAt;
  }

  /**
   * Whether the known head is fresh enough to interpolate `latest` with: a poll
   * or an answer confirmed it within about two poll intervals or two block times, whichever is
   * larger. With neither known yet, within `fallbackMs`. A head that does not move but is
   * confirmed every poll stays fresh.
   * @param fallbackMs freshness window when neither a poll interval nor a block time is known, ms
   */
  isHeadFresh(fallbackMs = 2000): boolean {
    if (this.confirmedAt === 0) return false;
    const bt = this.blockTimeMs;
    let window = bt !== undefined ? Math.max(2 * bt, 50) : 0;
    if (this.pollIntervalMs > 0) window = Math.max(window, 2 * this.pollIntervalMs);
    if (window === 0) window = fallbackMs;
    return this.now() - this.confirmedAt <= window;
  }
}

/**
 * Where a network's chain state lives: on the network itself, under a registry symbol, so two
 * evm-state plugins of two installed copies of svc would find the same state
 * (no module-level map keyed by one copy's classes).
 */
const STATE_KEY = Symbol.for('svc.evm.chainState');

/** The chain state of a network (created on first use). */
export function chainStateOf(network: Network, now?: () => number): NetworkChainState {
  const holder = network as unknown as Record<symbol, NetworkChainState | undefined>;
  let s = holder[STATE_KEY];
  if (!s) {
    s = new NetworkChainState(network, now);
    holder[STATE_KEY] = s;
  }
  return s;
}
