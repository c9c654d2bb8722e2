/**
 * A filter's cursor and how one `eth_getFilterChanges` moves it, by the head follower's rules
 * (docs/websocket.md, plugins/websocket/subscriptions/follower.ts): every read goes through the
 * network's pipeline (any healthy upstream answers), every block from the cursor on is read by
 * number and must link to the block delivered before it (`parentHash`), so what a poll delivers
 * is one chain whichever upstream answered each read.
 *
 * - New blocks: from the cursor's block + 1 up to the latest block, at most `maxBlocks` per poll
 *   (the rest at the next poll), their headers read {@link READ_CONCURRENCY} at a time and then
 *   checked link by link. A log filter reads each block's logs with `eth_getLogs` by block hash and
 *   its own address and topics (only for blocks within its `fromBlock`/`toBlock`), unless the
 *   header's `logsBloom` says no log of the block can match (Yellow Paper §4.3.1, checked with
 *   `ethereum-bloom-filters`); a block filter delivers the block hashes.
 * - An empty `eth_getLogs` answer for a block whose bloom says it may match is read again with
 *   `retryEmpty` (another upstream, through the pipeline); still empty for a block within
 *   {@link EMPTY_CONFIRM_DEPTH} of the latest, the poll stops before it (an upstream lagging
 *   behind the header it served; the next poll asks again); deeper, the bloom was a false
 *   positive and the block has no matching log.
 * - One poll's answer holds at most {@link MAX_POLL_BYTES} of logs (JSON; at least one block):
 *   past it the poll stops and the next goes on.
 * - A reorg (a block that does not link, or the latest block at the cursor's height with another
 *   hash): the new branch is walked back by parent hash (`eth_getBlockByHash`) to a block of the
 *   window (the common ancestor); the logs delivered for the abandoned blocks are delivered again
 *   with `removed: true` (newest block first, each block's logs in reverse, as geth does), then
 *   the new branch's logs (or hashes).
 * - A latest block below the cursor (an upstream behind the others) delivers nothing.
 * - A read that fails ends the poll: what was read before it is delivered and kept, the next poll
 *   resumes from there; with nothing read, the read's error is thrown (the cursor did not move).
 * - A gap of more than {@link MAX_GAP} blocks is not replayed: the cursor jumps to the latest block
 *   ({@link PollResult.jumped} says by how much, for the caller's warning and metric).
 *
 * The state is plain JSON (it may live in Redis and be read by another replica), bounded: a
 * window of {@link WINDOW_BLOCKS} blocks and at most {@link MAX_KEPT_LOG_BYTES} of delivered logs
 * (each kept block's size recorded at delivery, never measured again).
 */
import { isContractAddressInBloom, isTopicInBloom } from 'ethereum-bloom-filters';

/** Blocks kept to recognise a reorg and re-deliver its logs as removed (the deepest reorg handled). */
export const WINDOW_BLOCKS = 64;
/**
 * Most bytes (JSON) of delivered logs one filter keeps for a reorg; beyond, the oldest blocks'
 * logs are forgotten. With the criteria (at most ~31 KB) and the window's hashes the state stays
 * under the shared stores' 1 MiB per value.
 */
export const MAX_KEPT_LOG_BYTES = 768 * 1024;
/** Most bytes (JSON) of logs one poll delivers (at least one block's); the rest come with the next poll. */
export const MAX_POLL_BYTES = 4 * 1024 * 1024;
/** Longest gap filled block by block; beyond it the cursor jumps to the latest block. */
export const MAX_GAP = 1024;
/** Block headers (and then their logs) read at once by one poll. */
export const READ_CONCURRENCY = 8;
/** How far below the latest block an empty answer against a matching bloom is believed (a false positive), blocks. */
export const EMPTY_CONFIRM_DEPTH = 2;

/** What a read may ask of the pipeline beyond the method and params. */
export interface ReadOptions {
  /** Retry a null or empty answer on another upstream (the `retryEmpty` directive). */
  retryEmpty?: boolean;
}

/** Reads one JSON-RPC result through the network's pipeline; throws on any failure. */
export type ChainRead = (method: string, params: unknown[], options?: ReadOptions) => Promise<unknown>;

/** A delivered block in the window: number, hash and the logs delivered for it (log filters). */
export interface WindowBlock {
  /** Block number. */
  n: number;
  /** Block hash, lower-case. */
  h: string;
  /** The logs delivered for it, as delivered; absent when none, or forgotten for the size bound. */
  logs?: Record<string, unknown>[];
  /** Size of `logs` as JSON, characters (recorded at delivery). */
  b?: number;
}

/** What a log filter reads each block with: the node's own address and topic filter. */
export interface LogSelector {
  /** Contract addresses (any of them), lower-case; absent: every contract. */
  address?: string[];
  /** Topics by position: alternatives (any of them) or null (any topic); absent: any. */
  topics?: Array<string[] | null>;
  /** Lowest block whose logs are delivered (a number `fromBlock`). */
  from?: number;
  /** Highest block whose logs are delivered (a number `toBlock`). */
  to?: number;
}

/** A block as read: number and hashes, lower-case, and its logs bloom when the header has one. */
export interface BlockHead {
  /** Block number. */
  number: number;
  /** Block hash. */
  hash: string;
  /** Parent block hash. */
  parentHash: string;
  /** `logsBloom`, `0x` and 512 hex digits; absent when the header has none (then any filter may match). */
  bloom?: string;
}

const BLOOM = /^0x[0-9a-fA-F]{512}$/;

/**
 * A block header from an `eth_getBlockBy*` answer, or undefined when it is not one (null: not
 * known yet on the upstream that answered).
 */
export function asHead(v: unknown): BlockHead | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const n = typeof o.number === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(o.number) ? Number.parseInt(o.number, 16) : undefined;
  if (n === undefined || typeof o.hash !== 'string' || typeof o.parentHash !== 'string') return undefined;
  const head: BlockHead = { number: n, hash: o.hash.toLowerCase(), parentHash: o.parentHash.toLowerCase() };
  if (typeof o.logsBloom === 'string' && BLOOM.test(o.logsBloom)) head.bloom = o.logsBloom.toLowerCase();
  return head;
}

/**
 * Whether a block whose header has `bloom` may hold a log the selector matches (false: certainly
 * none). Every position of the selector must be in the bloom: one of its addresses, and one
 * alternative of each topic position.
 * @param bloom the header's `logsBloom`; undefined: unknown, so it may
 */
export function mayMatch(bloom: string | undefined, sel: LogSelector): boolean {
  if (bloom === undefined) return true;
  if (/^0x0*$/.test(bloom)) return false;
  if (sel.address && !sel.address.some((a) => isContractAddressInBloom(bloom, a))) return false;
  for (const alternatives of sel.topics ?? []) if (alternatives && !alternatives.some((t) => isTopicInBloom(bloom, t))) return false;
  return true;
}

/**
 * Reads the latest block: where a new filter's cursor starts (it sees blocks after it, as a
 * node's filter does).
 * @returns a window holding that block
 * @throws Error when the read fails or answers no block
 */
export async function startWindow(read: ChainRead): Promise<WindowBlock[]> {
  const latest = asHead(await read('eth_getBlockByNumber', ['latest', false]));
  if (!latest) throw new Error('eth_getBlockByNumber(latest) answered no block');
  return [{ n: latest.number, h: latest.hash }];
}

/** What one poll delivered and the window after it. */
export interface PollResult {
  /** Logs (log filters) or block hashes (block filters), in delivery order. */
  changes: unknown[];
  /** The window to keep (the caller stores it only when it changed). */
  window: WindowBlock[];
  /** Whether the window moved (something was read past the cursor, or a reorg). */
  moved: boolean;
  /** Blocks the cursor jumped over without delivering them (a gap over {@link MAX_GAP}); absent when none. */
  jumped?: number;
}

/** Where one poll stops reading (see {@link pollChanges}). */
export interface PollLimits {
  /** Wall time by which reading stops, ms since the epoch: what was read by then is delivered. */
  until?: number;
  /** The client's signal: aborted, reading stops (the caller then keeps the cursor where it was). */
  signal?: AbortSignal;
}

/** The logs read for one block: none to read (block filter, out of range), the logs, or `hold` (stop before it). */
type BlockLogs = { logs?: Record<string, unknown>[]; bytes?: number } | 'hold';

/** See the module comment. */
class Poll {
  readonly changes: unknown[] = [];
  moved = false;
  jumped: number | undefined;
  private bytes = 0;
  private latest = 0;
  private readonly window: WindowBlock[];

  constructor(
    private readonly read: ChainRead,
    window: readonly WindowBlock[],
    private readonly logs: LogSelector | undefined,
    private readonly limits: PollLimits = {},
  ) {
    this.window = window.map((b) => ({ ...b }));
  }

  get last(): WindowBlock | undefined {
    return this.window[this.window.length - 1];
  }

  /** Whether the poll's budget is spent or its client left: no more reads. */
  get spent(): boolean {
    return this.limits.signal?.aborted === true || (this.limits.until !== undefined && Date.now() >= this.limits.until);
  }

  result(): PollResult {
    return { changes: this.changes, window: this.window, moved: this.moved, ...(this.jumped !== undefined ? { jumped: this.jumped } : {}) };
  }

  async head(ref: string, byHash = false): Promise<BlockHead | undefined> {
    return asHead(await this.read(byHash ? 'eth_getBlockByHash' : 'eth_getBlockByNumber', [ref, false]));
  }

  async run(maxBlocks: number): Promise<void> {
    const last = this.last;
    if (!last) return;
    const latest = await this.head('latest');
    if (!latest || latest.number < last.n) return;
    this.latest = latest.number;
    if (latest.number === last.n) {
      if (latest.hash !== last.h) await this.reorg(latest);
      return;
    }
    if (latest.number - last.n > MAX_GAP) {
      this.jumped = latest.number - last.n - 1;
      this.window.length = 0;
      this.window.push({ n: latest.number, h: latest.hash });
      this.moved = true;
      return;
    }
    const to = Math.min(latest.number, last.n + maxBlocks);
    for (let from = last.n + 1; from <= to; from += READ_CONCURRENCY) {
      if (this.spent) return;
      const numbers = Array.from({ length: Math.min(READ_CONCURRENCY, to - from + 1) }, (_, i) => from + i);
      const heads = await Promise.allSettled(numbers.map((n) => (n === latest.number ? latest : this.head(`0x${n.toString(16)}`))));
      // The linked prefix: each block's parent is the one before it (the first's, the cursor).
      const linked: BlockHead[] = [];
      let end: { reorg: BlockHead } | { error: unknown } | 'unknown' | undefined;
      let parent = (this.last as WindowBlock).h;
      for (const [i, r] of heads.entries()) {
        const b = r.status === 'fulfilled' ? r.value : undefined;
        if (r.status === 'rejected') end = { error: r.reason };
        else if (!b) end = 'unknown';
        else if (b.number !== numbers[i]) end = { error: new Error(`eth_getBlockByNumber(${numbers[i]}) answered block ${b.number}`) };
        else if (b.parentHash !== parent) end = { reorg: b };
        if (end || !b) break;
        linked.push(b);
        parent = b.hash;
      }
      const logs = await Promise.allSettled(linked.map((b) => this.logsOf(b)));
      for (const [i, b] of linked.entries()) {
        const got = logs[i] as PromiseSettledResult<BlockLogs>;
        if (got.status === 'rejected') throw got.reason;
        if (!this.deliver(b, got.value)) return;
      }
      if (end === 'unknown') return;
      if (end && 'error' in end) throw end.error;
      if (end) {
        await this.reorg(end.reorg);
        return;
      }
    }
  }

  /** `tip` does not link to the window: walk its branch back to the window, remove, deliver the branch. */
  private async reorg(tip: BlockHead): Promise<void> {
    const branch: BlockHead[] = [tip];
    for (;;) {
      const first = branch[0] as BlockHead;
      const known = this.window.find((b) => b.n === first.number - 1);
      if (known?.h === first.parentHash || !known || branch.length >= WINDOW_BLOCKS) break;
      if (this.spent) return;
      const parent = await this.head(first.parentHash, true);
      if (!parent || parent.hash !== first.parentHash || parent.number !== first.number - 1)
        throw new Error(`reorg: block ${first.parentHash} (parent of ${first.number}) not found`);
      branch.unshift(parent);
    }
    const from = (branch[0] as BlockHead).number;
    const abandoned = this.window.filter((b) => b.n >= from).sort((a, b) => b.n - a.n);
    for (const b of abandoned) {
      const logs = b.logs ?? [];
      for (let i = logs.length - 1; i >= 0; i--) this.changes.push({ ...logs[i], removed: true });
    }
    const kept = this.window.filter((b) => b.n < from);
    this.window.length = 0;
    this.window.push(...kept);
    this.moved = true;
    for (const b of branch) if (!this.deliver(b, await this.logsOf(b))) return;
  }

  /** Reads one block's logs (log filters within their range whose bloom may match). */
  private async logsOf(b: BlockHead): Promise<BlockLogs> {
    const sel = this.logs;
    if (!sel || (sel.from !== undefined && b.number < sel.from) || (sel.to !== undefined && b.number > sel.to)) return {};
    if (!mayMatch(b.bloom, sel)) return { logs: [], bytes: 0 };
    const q: Record<string, unknown> = { blockHash: b.hash };
    if (sel.address) q.address = sel.address;
    if (sel.topics) q.topics = sel.topics;
    let got = this.checked(b, await this.read('eth_getLogs', [q]));
    if (got.length === 0 && b.bloom !== undefined) {
      // The bloom says a log may match: an empty answer may come from an upstream behind the header.
      got = this.checked(b, await this.read('eth_getLogs', [q], { retryEmpty: true }));
      if (got.length === 0 && this.latest - b.number < EMPTY_CONFIRM_DEPTH) return 'hold';
    }
    return { logs: got, bytes: got.length > 0 ? JSON.stringify(got).length : 0 };
  }

  /** An `eth_getLogs` answer for block `b`: a list of that block's logs, else an error. */
  private checked(b: BlockHead, got: unknown): Record<string, unknown>[] {
    if (!Array.isArray(got)) throw new Error(`eth_getLogs of block ${b.number} answered ${got === null ? 'null' : typeof got}`);
    for (const l of got as unknown[]) {
      const bh = l !== null && typeof l === 'object' ? (l as { blockHash?: unknown }).blockHash : undefined;
      if (typeof bh !== 'string' || bh.toLowerCase() !== b.hash) throw new Error(`eth_getLogs of block ${b.number} answered a log of another block`);
    }
    return got as Record<string, unknown>[];
  }

  /**
   * Delivers one block: its logs (log filters) or its hash (block filters).
   * @returns false when the poll stops before it (its logs not trusted yet, or over the poll's bytes)
   */
  private deliver(b: BlockHead, got: BlockLogs): boolean {
    if (got === 'hold') return false;
    const bytes = got.bytes ?? 0;
    if (this.changes.length > 0 && this.bytes + bytes > MAX_POLL_BYTES) return false;
    this.bytes += bytes;
    const entry: WindowBlock = { n: b.number, h: b.hash };
    if (!this.logs) this.changes.push(b.hash);
    else if (got.logs && got.logs.length > 0) {
      entry.logs = got.logs;
      entry.b = bytes;
      this.changes.push(...got.logs);
    }
    this.window.push(entry);
    this.moved = true;
    while (this.window.length > WINDOW_BLOCKS) this.window.shift();
    trimKeptLogs(this.window, MAX_KEPT_LOG_BYTES);
    return true;
  }
}

/**
 * Forgets the oldest blocks' logs until the window's kept logs fit `limit` (their sizes as
 * recorded at delivery).
 * @param limit bytes (JSON characters)
 * @returns the bytes still kept
 */
export function trimKeptLogs(window: WindowBlock[], limit: number): number {
  let bytes = 0;
  for (let i = window.length - 1; i >= 0; i--) {
    const b = window[i] as WindowBlock;
    if (!b.logs) continue;
    const size = b.b ?? JSON.stringify(b.logs).length;
    if (bytes + size > limit) {
      b.logs = undefined;
      b.b = undefined;
    } else bytes += size;
  }
  return bytes;
}

/**
 * One `eth_getFilterChanges` of a log or block filter (see the module comment).
 * @param read reads through the network's pipeline
 * @param window the filter's window (the cursor is its last block); not modified
 * @param logs a log filter's selector; undefined for a block filter
 * @param maxBlocks most new blocks read
 * @param limits when reading stops: a wall-time budget and the client's signal (what was read
 *   until then is delivered; the rest comes with the next poll)
 * @returns what to deliver and the window after it
 * @throws the first read's error when nothing could be read
 */
export async function pollChanges(
  read: ChainRead,
  window: readonly WindowBlock[],
  logs: LogSelector | undefined,
  maxBlocks: number,
  limits: PollLimits = {},
): Promise<PollResult> {
  const poll = new Poll(read, window, logs, limits);
  try {
    await poll.run(maxBlocks);
  } catch (e) {
    if (!poll.moved) throw e;
  }
  return poll.result();
}
