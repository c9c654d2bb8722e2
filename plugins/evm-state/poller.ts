/**
 * The EVM state poller: one per upstream. At bootstrap and every
 * `upstreams[].evm.statePollerInterval` it reads the latest and finalized blocks
 * (`eth_getBlockByNumber`) and `eth_syncing` concurrently, through that upstream's own
 * `upstream` chain only (its timeout, retry and circuit breaker; never swept or hedged; counted
 * in metrics through `attemptDone`), and writes what it learns into the network's chain state
 * (its state.ts). A poll failure never throws out of the timer.
 */
import { FINALITY, type Network, type PluginHost, type RpcResult, type Upstream } from 'svc-proxy/plugin';
import { tryUpstream } from 'svc-proxy/plugin/contracts';
import type { HeadVerdict } from './api.ts';
import { SYNCING } from './api.ts';
import { classifyFinality, excerptOf, toHex } from 'svc-proxy/util';
import { chainStateOf } from './chain.ts';
import { knownFinalized } from './finality.ts';
import { LINK_COOLDOWN_MS, LINK_HEADER_TIMEOUT_MS, type LinkHeader, linksToKnown } from './link.ts';
import { blockNumberOfBlock, syncingOf } from './tip.ts';

/** Consecutive "not syncing" polls needed before a syncing upstream is selectable again. */
export const NOT_SYNCING_POLLS = 4;
/** Failures in a row (with the upstream otherwise answering, and never a success) after which a poll method is dropped for good. */
export const MAX_METHOD_FAILURES = 10;
/**
 * Largest poll answer read, bytes: polls ask for block headers only (`false`
 * for full transactions), so a hostile upstream cannot make an idle svc hold a huge answer.
 */
export const MAX_POLL_RESPONSE_BYTES = 1024 * 1024;

/** Resolved settings of one upstream's poller. */
export interface PollerSettings {
  /** `upstreams[].evm.statePollerInterval`, ms; 0 = no timer (the plugin then runs no poller at all; {@link UpstreamPoller.poll} still works). */
  intervalMs: number;
  /** Deadline of each poll request, ms: min(interval, 10 s), or 10 s when the interval is 0. */
  timeoutMs: number;
  /** `networks[].evm.fallbackFinalityDepth`, blocks: finalized = latest − depth without a `finalized` tag. */
  fallbackFinalityDepth: number;
}

/** What the poller reports to its owner (the plugin). */
export interface PollerSink {
  /**
   * A latest block read from the upstream: the plugin judges it (head plausibility, docs/evm.md),
   * records it unless implausible and decides whether it counts for the network head.
   */
  latest(u: Upstream, n: number): HeadVerdict;
  /** A finalized block read from (or derived for) the upstream: judged, recorded unless implausible. */
  finalized(u: Upstream, n: number): HeadVerdict;
  /**
   * The upstream's `eth_chainId` answer of this poll (spec §1.2, re-checked every poll).
   * @returns true when it differs from the verified chain: the upstream left the network and the poll stops
   */
  chainId(u: Upstream, answer: unknown): boolean;
  /** The syncing flag of the upstream changed (after the {@link NOT_SYNCING_POLLS} rule). */
  syncingChanged(u: Upstream, syncing: boolean): void;
  /** One poll finished (successfully or not). */
  polled(u: Upstream): void;
}

/** What one poll learnt (also kept as {@link UpstreamPoller.last} for the admin and tests). */
export interface PollReport {
  /** Time the poll finished, epoch ms. */
  at: number;
  /** Latest block read, when the call succeeded. */
  latest?: number;
  /** Finalized block used (read, or derived from latest), when known. */
  finalized?: number;
  /** True when `finalized` is latest − fallbackFinalityDepth (no usable `finalized` tag). */
  finalizedFromFallback: boolean;
  /** The `eth_syncing` answer read (true = syncing), when the call succeeded. */
  syncing?: boolean;
  /** Error messages by poll method (`latest`, `finalized`, `syncing`). */
  errors: Partial<Record<'latest' | 'finalized' | 'syncing', string>>;
}

/** Tracks whether a poll method works on an upstream; dropped after {@link MAX_METHOD_FAILURES} failures with no success ever. */
class MethodHealth {
  private failures = 0;
  private everOk = false;
  ok(): void {
    this.everOk = true;
    this.failures = 0;
  }
  fail(): void {
    this.failures++;
  }
  get dropped(): boolean {
    return !this.everOk && this.failures >= MAX_METHOD_FAILURES;
  }
}

/** The poller of one upstream on its network. */
export class UpstreamPoller {
  /** The last poll's report, undefined before the first poll finished. */
  last?: PollReport;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  private readonly finalizedTag = new MethodHealth();
  private readonly syncingCall = new MethodHealth();
  private failing = false;
  /** A parent-hash walk is in flight, and when the last one started (ms). */
  private linking = false;
  private linkedAt = -Infinity;

  /**
   * @param host the plugin host (hooks, logger, internal contexts)
   * @param network the network the upstream serves
   * @param upstream the polled upstream
   * @param settings interval, timeout and finality depth
   * @param sink receives what the polls learn
   */
  constructor(
    private readonly host: PluginHost,
    readonly network: Network,
    readonly upstream: Upstream,
    readonly settings: PollerSettings,
    private readonly sink: PollerSink,
  ) {}

  /** True once stopped (shutdown, or the upstream left the network). */
  get isStopped(): boolean {
    return this.stopped;
  }

  /** Polls once now, then every `intervalMs` on an unref'd timer. */
  start(): void {
    if (this.stopped || this.timer) return;
    void this.poll();
    if (this.settings.intervalMs > 0) {
      this.timer = setInterval(() => void this.poll(), this.settings.intervalMs);
      this.timer.unref();
    }
  }

  /** Stops the timer; a poll in flight finishes but its answers are ignored. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Runs one poll (or joins the one in flight: polls never overlap). Never rejects.
   * @returns resolves when the poll finished
   */
  poll(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.running ??= this.pollOnce()
      .catch((e: unknown) => {
        this.host.logger.warn(
          { project: this.network.project.id, network: this.network.id, upstream: this.upstream.id, err: (e as Error).message },
          `state poll of ${this.upstream.id} failed unexpectedly`,
        );
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async pollOnce(): Promise<void> {
    const u = this.upstream;
    const network = this.network;
    // An upstream taken out of the network (wrong chain id) is no longer polled.
    if (!network.upstreams.includes(u) || u.state === 'failed') {
      this.stop();
      return;
    }
    const askFinalized = !this.finalizedTag.dropped;
    const askSyncing = !this.syncingCall.dropped;
    const skip = Promise.resolve(undefined);
    const [cr, lr, fr, sr] = await Promise.allSettled([
      // Straight to the node, like the registration probe: no plugin may answer it for the upstream.
      u.transport('eth_chainId', [], AbortSignal.timeout(this.settings.timeoutMs)),
      this.call('eth_getBlockByNumber', ['latest', false]),
      askFinalized ? this.call('eth_getBlockByNumber', ['finalized', false]) : skip,
      askSyncing ? this.call('eth_syncing', []) : skip,
    ]);
    if (this.stopped) return;
    // Another chain now: out of service before anything this poll read is recorded.
    if (cr.status === 'fulfilled' && this.sink.chainId(u, cr.value.result)) {
      this.stop();
      return;
    }
    const report: PollReport = { at: Date.now(), finalizedFromFallback: false, errors: {} };
    const state = chainStateOf(network);
    const mine = state.of(u);
    let gapCheck: number | undefined;

    // Latest block: judged first (head plausibility, docs/evm.md); an implausible one is recorded
    // nowhere, and nothing is derived from it.
    if (lr.status === 'fulfilled') {
      const n = blockNumberOfBlock(lr.value.result);
      if (n === undefined) report.errors.latest = `eth_getBlockByNumber(latest) answered ${this.excerpt(lr.value.result)}`;
      else if (this.sink.latest(u, n) === 'implausible') {
        report.errors.latest = `implausible latest block ${n}`;
        this.tryLink(n, lr.value.result);
      } else {
        report.latest = n;
        mine.lastPollAt = report.at;
        // Canonical hashes feed reorg detection (reorg-aware caching).
        // Only counted upstreams: a lagging node on a minority fork must not flip the record.
        const b = lr.value.result as { hash?: unknown; parentHash?: unknown };
        if (typeof b.hash === 'string' && [...state.countedUpstreams()].includes(u)) {
          state.observeBlockHash(n, b.hash, typeof b.parentHash === 'string' ? b.parentHash : undefined);
          gapCheck = state.unverifiedBelow(n);
        }
      }
    } else {
      report.errors.latest = errorText(lr.reason);
    }

    // Finalized block: the tag when it works, else latest − fallbackFinalityDepth (floored at 0).
    let finalized: number | undefined;
    if (askFinalized) {
      if (fr.status === 'fulfilled') {
        const v = fr.value?.result;
        finalized = blockNumberOfBlock(v);
        if (finalized === undefined) report.errors.finalized = `eth_getBlockByNumber(finalized) answered ${this.excerpt(v)}`;
      } else {
        report.errors.finalized = errorText(fr.reason);
      }
      // Only count failures while the upstream otherwise answers (a down upstream proves nothing).
      if (report.latest !== undefined) {
        if (finalized !== undefined) this.finalizedTag.ok();
        else this.finalizedTag.fail();
      }
    }
    if (finalized === undefined && report.latest !== undefined) {
      finalized = Math.max(0, report.latest - this.settings.fallbackFinalityDepth);
      report.finalizedFromFallback = true;
    }
    if (finalized !== undefined) {
      if (this.sink.finalized(u, finalized) === 'implausible') report.errors.finalized = `implausible finalized block ${finalized}`;
      else report.finalized = finalized;
    }

    // Syncing: excluded at once, selectable again after NOT_SYNCING_POLLS "not syncing" polls in a row.
    if (askSyncing) {
      const syncing = sr.status === 'fulfilled' ? syncingOf(sr.value?.result) : undefined;
      if (sr.status === 'rejected') report.errors.syncing = errorText(sr.reason);
      else if (syncing === undefined) report.errors.syncing = `eth_syncing answered ${this.excerpt(sr.value?.result)}`;
      if (report.latest !== undefined || syncing !== undefined) {
        if (syncing !== undefined) this.syncingCall.ok();
        else this.syncingCall.fail();
      }
      if (syncing !== undefined) {
        report.syncing = syncing;
        this.applySyncing(syncing);
      }
    }

    this.last = report;
    this.logOutcome(report);
    this.sink.polled(u);

    // Polls skipped blocks: fetch the last recorded unfinalized block again, so a reorg under it
    // is seen (its hash changed) rather than missed for want of a parent link.
    if (gapCheck !== undefined && !this.stopped) {
      try {
        const again = (await this.call('eth_getBlockByNumber', [toHex(gapCheck), false])).result as { hash?: unknown } | null;
        if (again && typeof again.hash === 'string') state.observeBlockHash(gapCheck, again.hash);
      } catch {
        /* the next poll tries again */
      }
    }
  }

  /**
   * Starts a parent-hash walk (head plausibility, docs/evm.md; link.ts) for an implausible latest block, unless one ran
   * for this upstream within {@link LINK_COOLDOWN_MS} or is in flight: when the reporter's blocks
   * chain down to a recorded canonical block, its head is confirmed and judged again. Off the poll.
   */
  private tryLink(n: number, block: unknown): void {
    const b = block as { hash?: unknown; parentHash?: unknown };
    const now = Date.now();
    if (this.linking || now - this.linkedAt < LINK_COOLDOWN_MS || typeof b.hash !== 'string' || typeof b.parentHash !== 'string') return;
    this.linking = true;
    this.linkedAt = now;
    const state = chainStateOf(this.network);
    const header = async (k: number): Promise<LinkHeader | undefined> => {
      if (this.stopped) return undefined;
      try {
        const h = (await this.call('eth_getBlockByNumber', [toHex(k), false], Math.max(this.settings.timeoutMs, LINK_HEADER_TIMEOUT_MS))).result as {
          hash?: unknown;
          parentHash?: unknown;
        } | null;
        return h && typeof h.hash === 'string' && typeof h.parentHash === 'string' ? { hash: h.hash, parentHash: h.parentHash } : undefined;
      } catch {
        return undefined;
      }
    };
    void linksToKnown(n, { hash: b.hash, parentHash: b.parentHash }, { header, hashAt: (k) => state.hashAt(k), recordedBelow: (k) => state.recordedBelow(k) })
      .then((linked) => {
        if (!linked || this.stopped) return;
        const mine = state.of(this.upstream);
        mine.linked = Math.max(mine.linked, n);
        this.host.logger.info(
          { project: this.network.project.id, network: this.network.id, upstream: this.upstream.id, block: n },
          `upstream ${this.upstream.id}'s block ${n} links by parent hash to a recorded block: believed`,
        );
        this.sink.latest(this.upstream, n);
      })
      .finally(() => {
        this.linking = false;
      });
  }

  private applySyncing(syncing: boolean): void {
    const mine = chainStateOf(this.network).of(this.upstream);
    const u = this.upstream;
    if (syncing) {
      mine.notSyncingStreak = 0;
      mine.syncing = true;
    } else {
      mine.notSyncingStreak++;
      if (mine.syncing && mine.notSyncingStreak >= NOT_SYNCING_POLLS) mine.syncing = false;
    }
    if (SYNCING.get(u) !== mine.syncing) {
      SYNCING.set(u, mine.syncing);
      this.sink.syncingChanged(u, mine.syncing);
    }
  }

  private logOutcome(r: PollReport): void {
    const log = this.host.logger;
    const fields = { project: this.network.project.id, network: this.network.id, upstream: this.upstream.id };
    chainStateOf(this.network).of(this.upstream).silent = r.latest === undefined;
    if (r.latest === undefined) {
      if (!this.failing) log.warn({ ...fields, errors: r.errors }, `state poll of ${this.upstream.id} failed: ${r.errors.latest ?? 'no latest block'}`);
      else log.debug({ ...fields, errors: r.errors }, `state poll of ${this.upstream.id} failed again`);
      this.failing = true;
      return;
    }
    if (this.failing) log.info(fields, `state poll of ${this.upstream.id} works again`);
    this.failing = false;
    log.debug(
      { ...fields, latest: r.latest, finalized: r.finalized, fallback: r.finalizedFromFallback, syncing: r.syncing },
      `state poll of ${this.upstream.id}`,
    );
  }

  /** An upstream answer quoted in a log line: redacted of the upstream's secrets, then cut. */
  private excerpt(v: unknown): string {
    return excerptOf(this.upstream.redactor, JSON.stringify(v) ?? 'undefined', 100);
  }

  /**
   * One request through this upstream's own chain, with a realtime finality for failsafe matching.
   * @param timeoutMs its deadline, ms (default: the poll's)
   */
  private async call(method: string, params: unknown[], timeoutMs = this.settings.timeoutMs): Promise<RpcResult> {
    const { ctx, done } = this.host.internalContext(this.network, method, params, timeoutMs);
    FINALITY.set(ctx, classifyFinality(method, params, knownFinalized(chainStateOf(this.network))));
    try {
      return await tryUpstream(this.host.hooks, ctx, this.upstream, 'primary', ctx.signal, MAX_POLL_RESPONSE_BYTES);
    } finally {
      done();
    }
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
