/**
 * A filter's cursor and how one `eth_getFilterChanges` moves it, by the head follower's rules
 * (docs/websocket.md, plugins/websocket/subscriptions/follower.ts): every read goes through the
 * network's pipeline (any healthy upstream answers), every block from the cursor on is read by
 * number and must link to the block delivered before it (`parentHash`), so what a poll delivers
 * is one chain whichever upstream answered each read.
 *
 * - New blocks: from the cursor's block + 1 up to the latest block, at most `maxBlocks` per poll
 *   (the rest at the next poll). A log filter reads each block's logs with `eth_getLogs` by block
 *   hash and its own address and topics (only for blocks within its `fromBlock`/`toBlock`); a
 *   block filter delivers the block hashes.
 * - A reorg (a block that does not link, or the latest block at the cursor's height with another
 *   hash): the new branch is walked back by parent hash (`eth_getBlockByHash`) to a block of the
 *   window (the common ancestor); the logs delivered for the abandoned blocks are delivered again
 *   with `removed: true` (newest block first, each block's logs in reverse, as geth does), then
 *   the new branch's logs (or hashes).
 * - A latest block below the cursor (an upstream behind the others) delivers nothing.
 * - A read that fails ends the poll: what was read before it is delivered and kept, the next poll
 *   resumes from there; with nothing read, the read's error is thrown (the cursor did not move).
 * - A gap of more than {@link MAX_GAP} blocks is not replayed: the cursor jumps to the latest block.
 *
 * The state is plain JSON (it may live in Redis and be read by another replica), bounded: a
 * window of {@link WINDOW_BLOCKS} blocks and at most {@link MAX_KEPT_LOG_BYTES} of delivered logs.
 */

/** Blocks kept to recognise a reorg and re-deliver its logs as removed (the deepest reorg handled). */
export const WINDOW_BLOCKS = 64;
/** Most bytes (JSON) of delivered logs a filter keeps for a reorg; beyond, the oldest blocks' logs are forgotten. */
export const MAX_KEPT_LOG_BYTES = 64 * 1024;
/** Longest gap filled block by block; beyond it the cursor jumps to the latest block. */
export const MAX_GAP = 1024;

/** Reads one JSON-RPC result through the network's pipeline; throws on any failure. */
export type ChainRead = (method: string, params: unknown[]) => Promise<unknown>;

/** A delivered block in the window: number, hash and the logs delivered for it (log filters). */
export interface WindowBlock {
  /** Block number. */
  n: number;
  /** Block hash, lower-case. */
  h: string;
  /** The logs delivered for it, as delivered; absent when none, or forgotten for the size bound. */
  logs?: Record<string, unknown>[];
}

/** What a log filter reads each block with: the node's own address and topic filter. */
export interface LogSelector {
  address?: string[];
  topics?: Array<string[] | null>;
  /** Lowest block whose logs are delivered (a number `fromBlock`). */
  from?: number;
  /** Highest block whose logs are delivered (a number `toBlock`). */
  to?: number;
}

/** A block as read: number and hashes, lower-case. */
export interface BlockHead {
  number: number;
  hash: string;
  parentHash: string;
}

/**
 * A block header from an `eth_getBlockBy*` answer, or undefined when it is not one (null: not
 * known yet on the upstream that answered).
 */
export function asHead(v: unknown): BlockHead | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const n = typeof o.number === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(o.number) ? Number.parseInt(o.number, 16) : undefined;
  if (n === undefined || typeof o.hash !== 'string' || typeof o.parentHash !== 'string') return undefined;
  return { number: n, hash: o.hash.toLowerCase(), parentHash: o.parentHash.toLowerCase() };
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
}

/** Where one poll stops reading (see {@link pollChanges}). */
export interface PollLimits {
  /** Wall time by which reading stops, ms since the epoch: what was read by then is delivered. */
  until?: number;
  /** The client's signal: aborted, reading stops (the caller then keeps the cursor where it was). */
  signal?: AbortSignal;
}

/** See the module comment. */
class Poll {
  readonly changes: unknown[] = [];
  moved = false;
  private readonly window: WindowBlock[];

  constructor(
    private readonly read: ChainRead,
    window: readonly WindowBlock[],
    private readonly logs: LogSelector | undefined,
    private readonly limits: PollLimits = {},
  ) {
    this.window = window.map((b) => ({ ...b }));
  }

  /** Whether the poll's budget is spent or its client left: no more reads. */
  get spent(): boolean {
    return this.limits.signal?.aborted === true || (this.limits.until !== undefined && Date.now() >= this.limits.until);
  }

  get last(): WindowBlock | undefined {
    return this.window[this.window.length - 1];
  }

  result(): PollResult {
    return { changes: this.changes, window: this.window, moved: this.moved };
  }

  async head(ref: string, byHash = false): Promise<BlockHead | undefined> {
    return asHead(await this.read(byHash ? 'eth_getBlockByHash' : 'eth_getBlockByNumber', [ref, false]));
  }

  async run(maxBlocks: number): Promise<void> {
    const latest = await this.head('latest');
    const last = this.last;
    if (!latest || !last || latest.number < last.n) return;
    if (latest.number === last.n) {
      if (latest.hash !== last.h) await this.reorg(latest);
      return;
    }
    if (latest.number - last.n > MAX_GAP) {
      this.window.length = 0;
      this.window.push({ n: latest.number, h: latest.hash });
      this.moved = true;
      return;
    }
    const to = Math.min(latest.number, last.n + maxBlocks);
    for (let n = last.n + 1; n <= to; n++) {
      if (this.spent) return;
      const b = n === latest.number ? latest : await this.head(`0x${n.toString(16)}`);
      if (!b) return;
      if (b.number !== n) throw new Error(`eth_getBlockByNumber(${n}) answered block ${b.number}`);
      if (b.parentHash !== this.last?.h) {
        await this.reorg(b);
        return;
      }
      await this.deliver(b);
    }
  }

  /** `tip` does not link to the window: walk its branch back to the window, remove, deliver the branch. */
  private async reorg(tip: BlockHead): Promise<void> {
    const branch: BlockHead[] = [tip];
    for (;;) {
      const first = branch[0] as BlockHead;
      const known = this.window.find((b) => b.n === first.number - 1);
      if (known?.h === first.parentHash || !known || branch.length >= WINDOW_BLOCKS) break;
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
    for (const b of branch) await this.deliver(b);
  }

  /** Reads one block's logs (log filters) and delivers them, or its hash (block filters). */
  private async deliver(b: BlockHead): Promise<void> {
    const entry: WindowBlock = { n: b.number, h: b.hash };
    if (!this.logs) this.changes.push(b.hash);
    else if ((this.logs.from === undefined || b.number >= this.logs.from) && (this.logs.to === undefined || b.number <= this.logs.to)) {
      const q: Record<string, unknown> = { blockHash: b.hash };
      if (this.logs.address) q.address = this.logs.address;
      if (this.logs.topics) q.topics = this.logs.topics;
      const got = await this.read('eth_getLogs', [q]);
      if (!Array.isArray(got)) throw new Error(`eth_getLogs of block ${b.number} answered ${got === null ? 'null' : typeof got}`);
      for (const l of got as unknown[]) {
        const bh = l !== null && typeof l === 'object' ? (l as { blockHash?: unknown }).blockHash : undefined;
        if (typeof bh !== 'string' || bh.toLowerCase() !== b.hash) throw new Error(`eth_getLogs of block ${b.number} answered a log of another block`);
      }
      if (got.length > 0) entry.logs = got as Record<string, unknown>[];
      this.changes.push(...(got as unknown[]));
    }
    this.window.push(entry);
    this.moved = true;
    while (this.window.length > WINDOW_BLOCKS) this.window.shift();
    boundLogs(this.window);
  }
}

/** Forgets the oldest blocks' logs until the window's logs fit {@link MAX_KEPT_LOG_BYTES}. */
function boundLogs(window: WindowBlock[]): void {
  let bytes = 0;
  for (let i = window.length - 1; i >= 0; i--) {
    const b = window[i] as WindowBlock;
    if (!b.logs) continue;
    bytes += JSON.stringify(b.logs).length;
    if (bytes > MAX_KEPT_LOG_BYTES) b.logs = undefined;
  }
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
