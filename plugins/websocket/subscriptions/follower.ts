/**
 * A network's head follower: svc's own head tracking behind `newHeads` and `logs` subscriptions.
 *
 * Every poll interval, and at once when {@link HeadFollower.wake} says an upstream's WebSocket
 * feed saw a block, it reads the network's latest block THROUGH THE NETWORK'S PIPELINE (any
 * healthy upstream answers; failover is the pipeline's). It keeps the last emitted head and a
 * window of the recent canonical blocks it emitted, and goes forward from the last emitted block:
 * - each block last+1..latest is read by number (at most {@link MAX_BLOCKS_PER_TICK} per tick;
 *   the next tick follows at once while behind) and must link to the block emitted before it
 *   (`parentHash`); its logs are read per `logs` feed (`eth_getLogs` by block hash) BEFORE its
 *   head goes out, so a failed read stops the tick at that block and the next tick resumes from
 *   it: every block and every log goes out once, in order, never backwards, whichever upstream
 *   answers and however long an outage lasted (a gap is filled block by block);
 * - a block that does not link (or a latest block at the emitted height with another hash) is a
 *   reorg: the new branch is walked back by `parentHash` (`eth_getBlockByHash`) to a block of the
 *   window (the common ancestor); the logs each feed emitted for the abandoned blocks go out again
 *   with `removed: true` (newest first, each block's logs in reverse, as geth does), then the new
 *   branch is emitted from the ancestor's child on (clients see new hashes at heights they saw);
 * - a latest block below the emitted head is ignored (an upstream behind the others), unless
 *   {@link RESYNC_READS} reads in a row say so: then the emitted chain was the wrong one (a bogus
 *   head got through) and the follower re-syncs to the real head (head plausibility, docs/evm.md).
 * Each block's logs are read once (`eth_getLogs` by block hash, no address or topic filter) and
 * filtered here per `logs` feed with the node's matching rules, so N feeds cost one read a block.
 * The first poll only learns the head (as geth, a subscription sees blocks after it). Ticks never
 * overlap; a gap of more than {@link MAX_GAP} blocks (a long total outage) is not replayed: the
 * follower jumps to the latest block and logs a warning, but never on one read: the far block
 * must not be `implausible` to the network's chain state (`judgeHead`), and unless `confirmed`,
 * the next read (made at once) must reach at least as high. One upstream answering one block from
 * the future therefore neither freezes nor moves the heads every subscriber sees.
 */
import type { Logger } from 'svc-proxy/plugin';
import { sleep } from 'svc-proxy/util';
import type { HeadVerdict } from 'svc-proxy/plugins/evm-state';
import { type LogFilter, matchLog } from './filter.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';
import { asBlock, type BlockInfo, headerJson, removedJson } from './blocks.ts';

export { asBlock, type BlockInfo, headerJson } from './blocks.ts';

/** Reads one JSON-RPC result through the network's pipeline; throws on any failure. */
export type NetworkFetch = (method: string, params: unknown[]) => Promise<unknown>;

/** Most blocks one tick emits; a longer gap continues at the next tick, started at once. */
export const MAX_BLOCKS_PER_TICK = 128;
/** Recent emitted blocks kept to recognise a reorg and re-emit its logs (the deepest reorg handled). */
export const WINDOW_BLOCKS = 128;
/** Longest gap filled block by block; beyond it the follower jumps to the latest block. */
export const MAX_GAP = 1024;
/**
 * Reads in a row whose latest block is below the emitted head after which the follower re-syncs
 * to the real head (the emitted chain was a bogus one; a lagging upstream answers a few at most).
 */
export const RESYNC_READS = 5;
/** Shortest pause between two ticks, ms (a flood of upstream wake-ups cannot spin the follower). */
export const MIN_TICK_GAP_MS = 20;

/** A `logs` feed as the follower sees it: its filter and where its logs go. */
export interface LogsTarget {
  /** The canonical filter. */
  readonly filter: LogFilter;
  /** Sends one log's JSON (the `result` of a notification) to every subscriber of the feed. */
  publish(json: string): void;
}

/** Where a follower's output goes; read on every block, so feeds may come and go between blocks. */
export interface FollowerTargets {
  /** The network's `newHeads` feed, if it has subscribers. */
  heads(): { publish(json: string): void } | undefined;
  /** The network's live `logs` feeds. */
  logs(): Iterable<LogsTarget>;
}

/** An emitted block kept in the window, with the logs each feed emitted for it (JSON). */
interface Emitted {
  number: number;
  hash: string;
  logs: Map<LogsTarget, string[]>;
}

/** Options of a {@link HeadFollower}. */
export interface FollowerOptions {
  /** Poll interval, ms. */
  pollIntervalMs: number;
  /** Warnings (failed polls, deep reorgs, jumps); no per-block lines. */
  logger?: Logger;
  /** Names the network in log lines. */
  label?: string;
  /**
   * The network's head plausibility rule (head plausibility, docs/evm.md: `networkChainState(host, network).judgeHead(n,
   * 'latest')`); asked before a jump beyond {@link MAX_GAP}. Absent: every head is `plausible`.
   */
  judge?: (n: number) => HeadVerdict;
  /**
   * Told each block before its head and logs are sent (the network's chain state records its hash,
   * so a cache entry of a replaced block stops serving before a subscriber asks for the new one).
   */
  onBlock?: (n: number, hash: string, parentHash: string) => void;
}

/** See the module comment. */
export class HeadFollower {
  /** Emitted blocks by number, contiguous, the last emitted head last. */
  private readonly window = new Map<number, Emitted>();
  private last?: Emitted;
  private active = false;
  private ticking = false;
  private again = false;
  private behind = false;
  private failing = false;
  private lastTickEnd = 0;
  private timer?: NodeJS.Timeout;
  /** A far block seen once and not confirmed: a jump waits for a second read reaching it. */
  private farSeen?: number;
  /** Reads in a row whose latest block was below the emitted head. */
  private belowReads = 0;
  /** Settles once the first tick ended (the head is known, unless that tick failed). */
  private first?: Promise<void>;

  /**
   * @param fetch reads through the network's pipeline
   * @param targets where heads and logs go
   * @param opts poll interval, logger
   */
  constructor(
    private readonly fetch: NetworkFetch,
    private readonly targets: FollowerTargets,
    private readonly opts: FollowerOptions,
  ) {}

  /** Starts following (the first tick runs at once). Idempotent. */
  start(): void {
    if (this.active) return;
    this.active = true;
    // A restarted follower starts over from the head it learns (no replay of the time it was stopped).
    this.window.clear();
    this.last = undefined;
    this.farSeen = undefined;
    this.belowReads = 0;
    this.first = this.tick();
  }

  /**
   * Settles once the first tick ended, or after `maxWaitMs`: a subscription answered after it
   * sees every block after the head known then.
   * @param maxWaitMs longest wait, ms
   */
  ready(maxWaitMs: number): Promise<void> {
    if (!this.first) return Promise.resolve();
    // The wait is cancelled once the race is over (its rejection is the race's, already settled).
    const waited = new AbortController();
    return Promise.race([this.first, sleep(maxWaitMs, waited.signal, true)]).finally(() => waited.abort());
  }

  /** Stops following: no tick is scheduled, a tick in flight emits nothing more. */
  stop(): void {
    this.active = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Ticks as soon as allowed (an upstream feed saw a new block); during a tick, once more after it. */
  wake(): void {
    if (!this.active) return;
    if (this.ticking) this.again = true;
    else this.schedule(0);
  }

  /** The last emitted (or, before any, the first known) head's number. */
  get headNumber(): number | undefined {
    return this.last?.number;
  }

  /** Remembers a forgotten feed's logs no longer (its last subscriber left). */
  forget(target: LogsTarget): void {
    for (const e of this.window.values()) e.logs.delete(target);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    const wait = Math.max(delayMs, this.lastTickEnd + MIN_TICK_GAP_MS - Date.now(), 0);
    this.timer = setTimeout(() => void this.tick(), wait);
    this.timer.unref();
  }

  /** One tick; never overlaps another, never rejects; schedules the next. */
  private async tick(): Promise<void> {
    if (this.ticking || !this.active) return;
    this.ticking = true;
    this.behind = false;
    try {
      await this.follow();
      if (this.failing)
        this.opts.logger?.info({ network: this.opts.label }, 'websocket subscriptions: head polls answer again; resumed from the last emitted block');
      this.failing = false;
    } catch (e) {
      if (!this.failing)
        this.opts.logger?.warn(
          { network: this.opts.label, err: e instanceof Error ? e.message : String(e) },
          'websocket subscriptions: a head poll failed; the next poll resumes from the last emitted block',
        );
      this.failing = true;
    } finally {
      this.ticking = false;
      this.lastTickEnd = Date.now();
      if (this.active) {
        const soon = this.again || this.behind;
        this.again = false;
        this.schedule(soon ? 0 : this.opts.pollIntervalMs);
      }
    }
  }

  private async block(method: 'eth_getBlockByNumber' | 'eth_getBlockByHash', ref: string): Promise<BlockInfo | undefined> {
    return asBlock(await this.fetch(method, [ref, false]));
  }

  /** Reads the latest block and emits what is new (see the module comment). */
  private async follow(): Promise<void> {
    const latest = await this.block('eth_getBlockByNumber', 'latest');
    if (!latest || !this.active) return;
    const last = this.last;
    if (!last) {
      this.remember(latest, new Map());
      return;
    }
    if (latest.number < last.number) {
      if (++this.belowReads >= RESYNC_READS) await this.resync(latest);
      return;
    }
    this.belowReads = 0;
    if (latest.number === last.number) {
      if (latest.hash !== last.hash) await this.reorg(latest);
      return;
    }
    if (latest.number - last.number > MAX_GAP) {
      if (!this.verifiedFar(latest.number)) return;
      this.opts.logger?.warn(
        { network: this.opts.label, from: last.number, to: latest.number },
        `websocket subscriptions: ${latest.number - last.number} blocks behind (more than ${MAX_GAP}); jumping to the latest block, the blocks between are not emitted`,
      );
      this.window.clear();
      this.last = undefined;
      await this.emit(latest);
      return;
    }
    this.farSeen = undefined;
    const to = Math.min(latest.number, last.number + MAX_BLOCKS_PER_TICK);
    for (let n = last.number + 1; n <= to; n++) {
      const b = n === latest.number ? latest : await this.block('eth_getBlockByNumber', `0x${n.toString(16)}`);
      // Not there yet on the upstream that answered: the next tick tries again.
      if (!b || !this.active) return;
      if (b.number !== n) throw new Error(`eth_getBlockByNumber(${n}) answered block ${b.number}`);
      if (b.parentHash !== this.last?.hash) {
        await this.reorg(b);
        this.behind = true;
        return;
      }
      if (!(await this.emit(b))) return;
    }
    this.behind = to < latest.number;
  }

  /**
   * Whether a far block (beyond {@link MAX_GAP}) may be jumped to: never when the chain state
   * judges it implausible; at once when confirmed; otherwise once a second read reaches it.
   * @param n the far block's number
   */
  private verifiedFar(n: number): boolean {
    const verdict = this.opts.judge?.(n) ?? 'plausible';
    if (verdict === 'implausible') {
      this.farSeen = undefined;
      this.opts.logger?.warn(
        { network: this.opts.label, head: this.last?.number, reported: n },
        'websocket subscriptions: an implausible latest block was read; not emitted',
      );
      return false;
    }
    if (verdict === 'confirmed' || (this.farSeen !== undefined && n >= this.farSeen)) {
      this.farSeen = undefined;
      return true;
    }
    // Seen once: read again at once (the pipeline may well ask another upstream).
    this.farSeen = n;
    this.behind = true;
    return false;
  }

  /**
   * Re-syncs to `latest` after {@link RESYNC_READS} reads below the emitted head: the blocks above
   * it are abandoned (their logs go out again with `removed: true`, newest first) and, unless the
   * window holds `latest` itself, it is emitted as the new head.
   */
  private async resync(latest: BlockInfo): Promise<void> {
    this.belowReads = 0;
    this.opts.logger?.warn(
      { network: this.opts.label, from: this.last?.number, to: latest.number },
      `websocket subscriptions: the chain stayed below the emitted head for ${RESYNC_READS} reads; re-syncing to block ${latest.number}`,
    );
    const abandoned = [...this.window.values()].filter((e) => e.number > latest.number).sort((a, b) => b.number - a.number);
    for (const e of abandoned) {
      this.window.delete(e.number);
      for (const [target, logs] of e.logs) for (let i = logs.length - 1; i >= 0; i--) target.publish(removedJson(logs[i] as string));
    }
    const known = this.window.get(latest.number);
    if (known?.hash === latest.hash) {
      this.last = known;
      return;
    }
    this.window.clear();
    this.last = undefined;
    await this.emit(latest);
  }

  /**
   * A reorg: `tip` does not link to the emitted chain. Walks its branch back by parent hash to a
   * block of the window, re-emits the abandoned blocks' logs as removed, then emits the branch.
   * @throws when a block of the branch cannot be read (the next tick starts over)
   */
  private async reorg(tip: BlockInfo): Promise<void> {
    const branch: BlockInfo[] = [tip];
    for (;;) {
      const first = branch[0] as BlockInfo;
      const known = this.window.get(first.number - 1);
      if (known?.hash === first.parentHash) break;
      if (!known || branch.length >= WINDOW_BLOCKS) {
        this.opts.logger?.warn(
          { network: this.opts.label, at: first.number },
          `websocket subscriptions: reorg deeper than the ${this.window.size} blocks remembered; emitting the new branch from block ${first.number}`,
        );
        break;
      }
      const parent = await this.block('eth_getBlockByHash', first.parentHash);
      if (!this.active) return;
      if (!parent || parent.hash !== first.parentHash || parent.number !== first.number - 1)
        throw new Error(`reorg: block ${first.parentHash} (parent of ${first.number}) not found`);
      branch.unshift(parent);
    }
    const from = (branch[0] as BlockInfo).number;
    const abandoned = [...this.window.values()].filter((e) => e.number >= from).sort((a, b) => b.number - a.number);
    for (const e of abandoned) {
      this.window.delete(e.number);
      for (const [target, logs] of e.logs) for (let i = logs.length - 1; i >= 0; i--) target.publish(removedJson(logs[i] as string));
    }
    this.last = this.window.get(from - 1);
    for (const b of branch) if (!(await this.emit(b))) return;
  }

  /**
   * Emits one block: reads its logs for every feed, then sends its head and the logs.
   * @returns false when the follower stopped meanwhile (nothing emitted)
   * @throws when a logs read fails (nothing emitted for the block)
   */
  private async emit(b: BlockInfo): Promise<boolean> {
    const targets = [...this.targets.logs()];
    const all = targets.length > 0 ? await this.logsOf(b) : [];
    if (!this.active) return false;
    const logs = targets.map((t) => all.filter((l) => matchLog(t.filter, l.log)).map((l) => l.json));
    this.opts.onBlock?.(b.number, b.hash, b.parentHash);
    const heads = this.targets.heads();
    if (heads) heads.publish(headerJson(b.raw));
    const kept = new Map<LogsTarget, string[]>();
    targets.forEach((t, i) => {
      const list = logs[i] as string[];
      for (const l of list) t.publish(l);
      kept.set(t, list);
    });
    this.remember(b, kept);
    return true;
  }

  /**
   * One block's logs, all of them (one read for every feed), each with its JSON, in log order.
   * @throws when the read fails or answers a log of another block
   */
  private async logsOf(b: BlockInfo): Promise<Array<{ log: Record<string, unknown>; json: string }>> {
    const got = await this.fetch('eth_getLogs', [{ blockHash: b.hash }]);
    if (!Array.isArray(got)) throw new Error(`eth_getLogs of block ${b.number} answered ${got === null ? 'null' : typeof got}`);
    return got.map((l: unknown) => {
      const bh = l !== null && typeof l === 'object' ? (l as { blockHash?: unknown }).blockHash : undefined;
      if (typeof bh !== 'string' || bh.toLowerCase() !== b.hash) throw new Error(`eth_getLogs of block ${b.number} answered a log of another block`);
      return { log: l as Record<string, unknown>, json: JSON.stringify(l) };
    });
  }

  private remember(b: BlockInfo, logs: Map<LogsTarget, string[]>): void {
    const e: Emitted = { number: b.number, hash: b.hash, logs };
    this.window.set(b.number, e);
    this.last = e;
    this.window.delete(b.number - WINDOW_BLOCKS);
  }
}
