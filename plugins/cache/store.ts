/**
 * Reading and writing one call's cache entry across the matching tiers:
 * the parallel read where the first acceptable hit wins, the checks that turn a stored entry
 * into a miss (a realtime entry behind the head, an unfinalized entry on a reorged block), and
 * the write after the answer, with finality re-classified from the answer.
 */
import { type CallContext, FINALITY, type Finality, type RpcResult } from 'svc-proxy/plugin';
import type { NetworkChainState } from 'svc-proxy/plugins/evm-state';
import { parseBlockNumber } from 'svc-proxy/util';
import type { CacheEntry, Connector } from './connectors/types.ts';
import { answeredBlock, isEmptyJson, type CallKey } from './keys.ts';
import type { Policy } from './policy.ts';
import { READ_TIMEOUT_MS, WRITE_TIMEOUT_MS } from './schema.ts';

/** One tier to read: the connector and the first policy that selected it (metric label). */
export interface Reader {
  connector: Connector;
  policy: Policy;
}

/** A read's outcome per tier, for metrics. */
export type ReadEvent = 'hit' | 'miss' | 'error';

/**
 * Why a call's answer was stored in no tier (`svc_cache_skipped_total{reason}`, docs/caching.md):
 * - `finality_unknown`: no finalized block is known yet (or the call names no block) and no policy
 *   takes `unknown` answers;
 * - `head_unknown`: a block-tag call while svc knows no head to rest the entry on;
 * - `beyond_head`: an empty answer for a block past the known head ("not there yet");
 * - `non_canonical`: the answer names a block hash other than the canonical one at its height;
 * - `no_matching_policy`: policies exist for the call but none takes this finality, size or emptiness;
 * - `not_shared`: a pinned, consensus-skipping or differently checked call (spec §2.8);
 * - `params_uncacheable`: params too large or too deep to key.
 */
export type SkipReason = 'finality_unknown' | 'head_unknown' | 'beyond_head' | 'non_canonical' | 'no_matching_policy' | 'not_shared' | 'params_uncacheable';

/** What the store reports to the plugin (metrics). */
export interface StoreSink {
  read(ctx: CallContext, r: Reader, event: ReadEvent): void;
  wrote(ctx: CallContext, connector: Connector, policy: Policy, ok: boolean, err?: unknown): void;
  /** A cacheable method's answer was stored nowhere, and why. */
  skipped(ctx: CallContext, reason: SkipReason): void;
}

/** The hit that won. */
export interface Hit {
  entry: CacheEntry;
  reader: Reader;
}

/** Rejects after `ms` (timer unref'd so a stuck tier never holds the process open). */
function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** A verdict of {@link acceptable}. */
export interface Verdict {
  /** The entry may answer. */
  ok: boolean;
  /** The entry can never answer again (a block below the head, a reorged block): delete it. */
  drop: boolean;
}

const SERVE: Verdict = Object.freeze({ ok: true, drop: false });
const PASS: Verdict = Object.freeze({ ok: false, drop: false });
const DEAD: Verdict = Object.freeze({ ok: false, drop: true });

/**
 * Share of the block time a realtime entry written after the next block was due still serves:
 * while a block is late, the same head is asked at most about ten times per block time.
 */
export const LATE_BLOCK_REUSE = 0.1;

/**
 * How long a realtime entry serves while svc has no block-time estimate yet (the first few head
 * moves of a network), ms: without one it cannot tell when the next block is due.
 */
export const UNKNOWN_BLOCK_TIME_REUSE_MS = 1000;

/**
 * Whether a stored entry may answer now (spec §2.8 #3, "fresh means fresh" and reorg-aware
 * caching). Judged against this process's view of the chain, whoever wrote the entry.
 * - Realtime (a block tag, `eth_blockNumber`): it must rest on a known head; an entry for a block
 *   below the highest head svc knows (from a poll or any answer) is dead at once, in every tier.
 *   Once the next block is due (`nextBlockDueAt`: one estimated block time after the previous
 *   head was last reported), an entry serves for at most {@link LATE_BLOCK_REUSE} of a block time
 *   after it was written, so a new block is picked up at the next read instead of after the TTL;
 *   without a block-time estimate yet, for at most {@link UNKNOWN_BLOCK_TIME_REUSE_MS}.
 * - Realtime and unfinalized entries rest on a block hash: when svc knows the canonical hash at
 *   their height and it differs, the entry is from an abandoned fork and is dropped.
 * - Without a known hash at its height, an unfinalized entry serves only when this process was
 *   watching the chain when it was written and has seen no reorg reaching its height since
 *   (an entry another replica wrote before this one could see a reorg is a miss, never a guess).
 * @param entry the stored entry
 * @param chain the network's chain state (undefined for non-EVM networks: no rule applies)
 * @param now the clock, ms
 */
export function acceptable(entry: CacheEntry, chain: NetworkChainState | undefined, now = Date.now()): Verdict {
  if (!chain) return SERVE;
  const n = entry.blockNumber;
  const fin = entry.finality;
  if (fin !== 'realtime' && fin !== 'unfinalized') return SERVE;
  if (n === undefined) return fin === 'realtime' ? PASS : SERVE;
  const seen = chain.hashAt(n);
  if (entry.blockHash !== undefined && seen !== undefined && seen !== entry.blockHash) return DEAD;
  if (fin === 'realtime') {
    const head = chain.highestLatest;
    if (head > 0 && n < head) return DEAD;
    if (chain.reorgedSince(entry.writtenAt, n)) return DEAD;
    const due = chain.nextBlockDueAt;
    if (due === undefined) return now >= entry.writtenAt + UNKNOWN_BLOCK_TIME_REUSE_MS ? PASS : SERVE;
    if (n >= head && now >= due && now >= entry.writtenAt + (chain.blockTimeMs as number) * LATE_BLOCK_REUSE) return PASS;
    return SERVE;
  }
  if (entry.blockHash !== undefined && seen === entry.blockHash) return SERVE;
  if (chain.reorgedSince(entry.writtenAt, n)) return DEAD;
  const since = chain.watchingSince;
  return since > 0 && entry.writtenAt >= since ? SERVE : PASS;
}

/**
 * Reads the call's entry from every reader; the first acceptable hit wins. Synchronous tiers
 * (memory) are asked first and, on a hit, the others are not asked at all. A tier that fails or
 * takes longer than {@link READ_TIMEOUT_MS} is a miss, counted as an error.
 * @returns the hit, undefined on a miss; a promise only when a remote tier had to be asked
 */
export function readEntry(
  ctx: CallContext,
  key: CallKey,
  readers: readonly Reader[],
  chain: NetworkChainState | undefined,
  sink: StoreSink,
): Hit | undefined | Promise<Hit | undefined> {
  const finality = FINALITY.get(ctx);
  const pending: Array<{ reader: Reader; p: Promise<CacheEntry | undefined> }> = [];
  for (const reader of readers) {
    const c = reader.connector;
    let got: CacheEntry | undefined | Promise<CacheEntry | undefined>;
    try {
      got = key.reverse ? c.getReverse(key.scope, key.range, finality) : c.get(key.partition, key.range, finality);
    } catch {
      sink.read(ctx, reader, 'error');
      continue;
    }
    if (got instanceof Promise) {
      pending.push({ reader, p: got });
      continue;
    }
    const hit = judge(ctx, key, reader, got, chain, sink);
    if (hit) {
      // Remote reads already started lose: their answers are dropped unobserved.
      for (const q of pending) q.p.catch(() => undefined);
      return hit;
    }
  }
  if (pending.length === 0) return undefined;
  return new Promise<Hit | undefined>((resolve) => {
    let left = pending.length;
    let done = false;
    for (const { reader, p } of pending) {
      withTimeout(p, READ_TIMEOUT_MS, `cache read from ${reader.connector.id}`).then(
        (entry) => {
          if (done) return;
          const hit = judge(ctx, key, reader, entry, chain, sink);
          if (hit) {
            done = true;
            resolve(hit);
          } else if (--left === 0) resolve(undefined);
        },
        () => {
          if (!done) sink.read(ctx, reader, 'error');
          if (!done && --left === 0) resolve(undefined);
        },
      );
    }
  });
}

function judge(
  ctx: CallContext,
  key: CallKey,
  reader: Reader,
  entry: CacheEntry | undefined,
  chain: NetworkChainState | undefined,
  sink: StoreSink,
): Hit | undefined {
  if (entry) {
    const verdict = acceptable(entry, chain);
    if (verdict.ok) {
      sink.read(ctx, reader, 'hit');
      return { entry, reader };
    }
    if (verdict.drop && !key.reverse) {
      const d = reader.connector.delete(key.partition, key.range);
      if (d instanceof Promise) d.catch(() => undefined);
    }
  }
  sink.read(ctx, reader, 'miss');
  return undefined;
}

/** What a write needs to know about the answer. */
export interface Answer {
  /** The result's exact JSON. */
  wire: string | Buffer;
  /** The parsed result (read only for block facts). */
  value: () => unknown;
}

/**
 * Writes an answer to every policy that takes it. A call that was `unknown`
 * before forwarding (a lookup by hash) is re-classified from the block its answer names; a
 * block tag is never written as finalized; an empty answer for a block beyond the known head is
 * never written. Tier failures are counted and logged, never thrown.
 * @param policies the call's candidate policies (network and method matched), in config order
 * @param connectors tiers by id
 * @param params the params as the client sent them (read matched these; interpolation may have
 *   rewritten `ctx.request` since)
 */
export function writeEntry(
  ctx: CallContext,
  key: CallKey,
  callFinality: Finality,
  answer: Answer,
  policies: readonly Policy[],
  connectors: ReadonlyMap<string, Connector>,
  chain: NetworkChainState | undefined,
  sink: StoreSink,
  params: unknown = ctx.request.params,
): void {
  const method = ctx.request.method;
  const size = answer.wire.length;
  const empty = typeof answer.wire === 'string' && isEmptyJson(answer.wire);
  const head = chain?.highestLatest ?? 0;
  let finality = callFinality;
  // The block an entry rests on is what its params name (a range: its end), never a block its
  // answer happens to mention (the last log of a range is not the range). Only a lookup by hash,
  // whose params name no block, takes the block from its answer.
  let blockNumber = key.blockNumber;
  let blockHash: string | undefined;
  if (!empty && (key.reverse || key.single)) {
    const b = answeredBlock(method, answer.value());
    if (key.reverse) blockNumber = b.number;
    blockHash = b.number === blockNumber || key.reverse ? b.hash : undefined;
  }
  if (key.tag !== undefined) {
    // A tag's answer changes with the head: never finalized (eRPC #223). It rests on the head it
    // was read at: the number `eth_blockNumber` answered or the latest block returned, else the
    // known head (a gas price is not a block number).
    finality = 'realtime';
    blockNumber = undefined;
    blockHash = undefined;
    if (!empty && method === 'eth_blockNumber') blockNumber = parseBlockNumber(answer.value());
    else if (!empty && key.tag === 'latest' && method === 'eth_getBlockByNumber')
      ({ number: blockNumber, hash: blockHash } = answeredBlock(method, answer.value()));
    if (blockNumber === undefined && head > 0) blockNumber = head;
    // Nothing to judge its freshness by: svc knows no head yet.
    if (blockNumber === undefined) {
      sink.skipped(ctx, 'head_unknown');
      return;
    }
  } else if (finality === 'unknown' && blockNumber !== undefined) {
    // Re-classified now that the block is known (a receipt by hash) or the finalized head is.
    if (chain?.finalizedKnown) finality = blockNumber <= chain.highestFinalized ? 'finalized' : 'unfinalized';
  }
  // "Not there (yet)" for a block beyond the known head is not a fact worth keeping.
  if (empty && key.blockNumber !== undefined && key.blockNumber > head) {
    sink.skipped(ctx, 'beyond_head');
    return;
  }
  if ((finality === 'unfinalized' || finality === 'realtime') && blockNumber !== undefined && chain) {
    // The entry rests on the canonical hash at its height (reorg-aware caching): the hash the
    // answer names, else the one svc knows. An answer naming another hash than svc's canonical
    // one comes from an abandoned or minority fork and is not kept.
    const canonical = chain.hashAt(blockNumber);
    if (blockHash !== undefined && canonical !== undefined && blockHash !== canonical) {
      sink.skipped(ctx, 'non_canonical');
      return;
    }
    blockHash ??= canonical;
  }
  const partition = key.reverse && blockNumber !== undefined ? `${key.scope}:${blockNumber}` : key.partition;
  const entry: CacheEntry = { wire: answer.wire, finality, writtenAt: Date.now() };
  if (blockNumber !== undefined) entry.blockNumber = blockNumber;
  if (blockHash !== undefined) entry.blockHash = blockHash;
  // Tiers already written (an array: one or two policies per finality in practice).
  const done: string[] = [];
  for (const p of policies) {
    if (done.includes(p.connector) || !p.writable(finality, empty, size) || !p.coversParams(params)) continue;
    const c = connectors.get(p.connector);
    if (!c) continue;
    done.push(p.connector);
    try {
      const w = c.set(partition, key.range, entry, p.config.ttl, key.reverse ? key.scope : undefined);
      if (w instanceof Promise) {
        withTimeout(w, WRITE_TIMEOUT_MS, `cache write to ${c.id}`).then(
          () => sink.wrote(ctx, c, p, true),
          (e: unknown) => sink.wrote(ctx, c, p, false, e),
        );
      } else sink.wrote(ctx, c, p, true);
    } catch (e) {
      sink.wrote(ctx, c, p, false, e);
    }
  }
  if (done.length === 0) sink.skipped(ctx, finality === 'unknown' ? 'finality_unknown' : 'no_matching_policy');
}

/** A write-back waiting for the end of the loop turn its answer was sent in. */
export interface PendingWrite {
  ctx: CallContext;
  key: CallKey;
  /** The call's finality before forwarding. */
  finality: Finality;
  result: RpcResult;
  /** The call's candidate policies. */
  policies: readonly Policy[];
  chain: NetworkChainState | undefined;
  /** The params as the client sent them. */
  params: unknown;
}

/**
 * Write-backs of one loop turn, run together once the turn's answers are written (one
 * `setImmediate` per turn rather than one timer and closure per miss). A write never runs on the
 * call's path: the call has already answered when its entry is stored.
 */
export class WriteQueue {
  private pending: PendingWrite[] = [];
  private scheduled = false;

  /** @param write stores one entry; it never throws (tier failures are counted by the sink) */
  constructor(private readonly write: (w: PendingWrite) => void) {}

  /** Queues a write for the end of this loop turn. */
  push(w: PendingWrite): void {
    this.pending.push(w);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const list = this.pending;
    this.pending = [];
    for (const w of list) {
      try {
        this.write(w);
      } catch {
        // writeEntry counts its own failures; one bad write never stops the others
      }
    }
  };
}
