/**
 * The merge rules of shared state (pure, no Redis): what a replica publishes, what it accepts of
 * what it reads (head plausibility, docs/evm.md) and what it applies. Everything read from Redis is
 * outside input (another deployment, version or a hostile writer may share it): it is bounded,
 * dated and judged before it moves anything, and what fails is dropped with a reason.
 *
 * A channel message and a snapshot entry have one shape, `{replica, at, heads}`: the publishing
 * replica's id, when it was written (ms since the epoch) and the heads it observed itself. An
 * entry older than the TTL ({@link entryTtlMs}) is stale and ignored; heads only move forward per
 * upstream; a replica never applies its own entries, and never publishes what it learned from
 * others (no echo loops, and a head lives in the fleet only while a replica that saw it says so).
 */
import type { HeadVerdict } from 'svc-proxy/plugins/evm-state';

/** One upstream's heads as shared: `<project>/<upstream>` → latest and finalized block numbers. */
export interface SharedHead {
  /** Project id. */
  project: string;
  /** Upstream id inside the project. */
  upstream: string;
  /** Latest block (0 = not said). */
  latest: number;
  /** Finalized block (0 = not said). */
  finalized: number;
}

/** A message on `<clusterKey>:state`, or one replica's entry of the snapshot hash. */
export interface StateMessage {
  /** Id of the replica that published it. */
  replica: string;
  /** When it was written, ms since the epoch (the writer's clock). */
  at: number;
  /** Heads that replica observed itself. */
  heads: SharedHead[];
}

/**
 * Why an entry (or one head of it) was dropped: the label values of
 * `svc_shared_state_dropped_total{reason}`, a fixed set.
 * - `malformed`: not JSON, or wrong types or fields;
 * - `oversized`: text, id or head list over its bound, or too many snapshot entries;
 * - `out_of_range`: a block number that is not a safe non-negative integer, or a timestamp in the future;
 * - `stale`: older than the TTL (its writer is gone or stopped confirming it);
 * - `unknown`: a project or upstream this replica does not have;
 * - `implausible`: a head the chain state's plausibility rule rejects.
 */
export type DropReason = 'malformed' | 'oversized' | 'out_of_range' | 'stale' | 'unknown' | 'implausible';

/** Every {@link DropReason}, in a fixed order (the counter's series are created up front). */
export const DROP_REASONS: readonly DropReason[] = Object.freeze(['malformed', 'oversized', 'out_of_range', 'stale', 'unknown', 'implausible']);

/** Called once per dropped entry or head. */
export type Drop = (reason: DropReason) => void;

/** Most heads one message or snapshot entry may carry (a replica publishing more splits them). */
export const MAX_HEADS_PER_MESSAGE = 4096;
/** Longest message or snapshot entry accepted, bytes (UTF-16 units checked before parsing). */
export const MAX_ENTRY_BYTES = 1024 * 1024;
/** Longest replica, project or upstream id accepted, characters. */
export const MAX_ID_LENGTH = 256;
/** Most snapshot entries (replicas) read in one pass; a larger hash is not read at all. */
export const MAX_SNAPSHOT_ENTRIES = 1024;
/** Shortest entry TTL, ms (a short snapshot interval still leaves room for clock skew). */
export const MIN_ENTRY_TTL_MS = 3000;
/** Longest entry TTL, ms (a head survives its last confirming replica at most this long). */
export const MAX_ENTRY_TTL_MS = 10 * 60_000;
/** TTL in snapshot intervals: a live replica rewrites its entry every interval, so two may be missed. */
export const TTL_INTERVALS = 3;

/**
 * How long a shared entry lives: {@link TTL_INTERVALS} snapshot intervals, at least
 * {@link MIN_ENTRY_TTL_MS} and at most {@link MAX_ENTRY_TTL_MS}. A live replica rewrites its
 * snapshot entry every interval, so only a gone (or frozen) writer's entry gets this old. The
 * same bound tolerates clock skew between replicas: an entry dated further in the future is out
 * of range.
 * @param snapshotIntervalMs `sharedState.snapshotInterval`, ms
 * @returns the TTL, ms
 */
export function entryTtlMs(snapshotIntervalMs: number): number {
  return Math.min(MAX_ENTRY_TTL_MS, Math.max(MIN_ENTRY_TTL_MS, TTL_INTERVALS * snapshotIntervalMs));
}

/** The snapshot hash field of an upstream's ledger key: `<project>/<upstream>`. */
export function headField(project: string, upstream: string): string {
  return `${project}/${upstream}`;
}

/** A block number as shared: a safe integer ≥ 0, else undefined. */
function blockOf(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}

const idOk = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_ID_LENGTH;

/**
 * Parses a channel message or a snapshot entry and checks its bounds and age. A bad entry as a
 * whole (not JSON, no replica or timestamp, over a bound, stale, dated in the future) is dropped
 * with one reason; within a good one, each bad head is dropped with its own.
 * @param text the message or entry as read
 * @param now the reader's clock, ms since the epoch
 * @param ttlMs {@link entryTtlMs}
 * @param drop called for each drop
 * @returns the message with its good heads, or undefined when it is dropped whole
 */
export function parseMessage(text: string, now: number, ttlMs: number, drop: Drop): StateMessage | undefined {
  if (text.length > MAX_ENTRY_BYTES) return void drop('oversized');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return void drop('malformed');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return void drop('malformed');
  const { replica, at, heads } = doc as { replica?: unknown; at?: unknown; heads?: unknown };
  if (typeof replica !== 'string' || typeof at !== 'number' || !Array.isArray(heads)) return void drop('malformed');
  if (!idOk(replica) || heads.length > MAX_HEADS_PER_MESSAGE) return void drop('oversized');
  if (!Number.isSafeInteger(at) || at <= 0 || at > now + ttlMs) return void drop('out_of_range');
  if (now - at > ttlMs) return void drop('stale');
  const out: SharedHead[] = [];
  for (const h of heads as unknown[]) {
    if (typeof h !== 'object' || h === null) {
      drop('malformed');
      continue;
    }
    const { project, upstream, latest, finalized } = h as Record<string, unknown>;
    if (typeof project !== 'string' || typeof upstream !== 'string' || typeof latest !== 'number' || typeof finalized !== 'number') {
      drop('malformed');
      continue;
    }
    if (!idOk(project) || !idOk(upstream)) {
      drop('oversized');
      continue;
    }
    const l = blockOf(latest);
    const f = blockOf(finalized);
    if (l === undefined || f === undefined) {
      drop('out_of_range');
      continue;
    }
    if (l > 0 || f > 0) out.push({ project, upstream, latest: l, finalized: f });
  }
  return { replica, at, heads: out };
}

/** What a replica knows of an upstream named in a shared head, and how its chain state judges a number. */
export interface HeadContext {
  /**
   * This replica's heads of the upstream.
   * @returns undefined when it has no such project or upstream
   */
  known(h: SharedHead): { latest: number; finalized: number } | undefined;
  /** The chain state's plausibility verdict on `n` as the upstream's `kind` head (docs/evm.md). */
  judge(h: SharedHead, n: number, kind: 'latest' | 'finalized'): HeadVerdict;
}

/**
 * Which heads of a message this replica should apply: none of its own; per upstream only a number
 * above what it knows (heads never move back) that its chain state does not judge implausible.
 * @param msg the message (parsed by {@link parseMessage})
 * @param self this replica's id
 * @param ctx what this replica knows and how it judges
 * @param drop called for an unknown upstream or an implausible number
 * @returns the heads to apply, with 0 for a number that is not applied
 */
export function headsToApply(msg: StateMessage, self: string, ctx: HeadContext, drop: Drop): SharedHead[] {
  if (msg.replica === self) return [];
  const out: SharedHead[] = [];
  for (const h of msg.heads) {
    const k = ctx.known(h);
    if (!k) {
      drop('unknown');
      continue;
    }
    const pick = (n: number, have: number, kind: 'latest' | 'finalized'): number => {
      if (n <= have) return 0;
      if (ctx.judge(h, n, kind) === 'implausible') {
        drop('implausible');
        return 0;
      }
      return n;
    };
    const latest = pick(h.latest, k.latest, 'latest');
    const finalized = pick(h.finalized, k.finalized, 'finalized');
    if (latest || finalized) out.push({ ...h, latest, finalized });
  }
  return out;
}

/** Latest and finalized of one upstream. */
interface Pair {
  latest: number;
  finalized: number;
}

/**
 * Tracks what this replica published per upstream (only heads that moved are sent) and which
 * heads it observed itself: those, never what it learned from another replica, are what it
 * publishes and writes to its snapshot entry.
 */
export class HeadLedger {
  /** Highest published or learned per upstream: what the fleet already has. */
  private readonly sent = new Map<string, Pair>();
  /** Highest this replica observed itself per upstream (its own polls and answers). */
  private readonly own = new Map<string, Pair>();

  /**
   * The heads among `current` that moved past what the fleet has, recording them as this
   * replica's own and as published. A number that did not move is sent as 0 (not said).
   * @param current this replica's view now
   * @returns the heads to publish
   */
  changed(current: Iterable<SharedHead>): SharedHead[] {
    const out: SharedHead[] = [];
    for (const h of current) {
      const key = headField(h.project, h.upstream);
      const prev = this.sent.get(key) ?? { latest: 0, finalized: 0 };
      const latest = h.latest > prev.latest ? h.latest : 0;
      const finalized = h.finalized > prev.finalized ? h.finalized : 0;
      if (!latest && !finalized) continue;
      this.sent.set(key, { latest: Math.max(latest, prev.latest), finalized: Math.max(finalized, prev.finalized) });
      const mine = this.own.get(key) ?? { latest: 0, finalized: 0 };
      this.own.set(key, { latest: Math.max(latest, mine.latest), finalized: Math.max(finalized, mine.finalized) });
      out.push({ project: h.project, upstream: h.upstream, latest, finalized });
    }
    return out;
  }

  /**
   * Records heads that came from another replica as known, so a replica never re-publishes
   * what it applied (no echo loops).
   */
  learned(h: SharedHead): void {
    const key = headField(h.project, h.upstream);
    const prev = this.sent.get(key);
    this.sent.set(key, { latest: Math.max(h.latest, prev?.latest ?? 0), finalized: Math.max(h.finalized, prev?.finalized ?? 0) });
  }

  /**
   * This replica's snapshot entry: per upstream, the heads it observed itself, never above its
   * view now (a head its chain state no longer holds is no longer confirmed), at most
   * {@link MAX_HEADS_PER_MESSAGE}.
   * @param current this replica's view now
   */
  ownHeads(current: Iterable<SharedHead>): SharedHead[] {
    const out: SharedHead[] = [];
    for (const h of current) {
      const mine = this.own.get(headField(h.project, h.upstream));
      if (!mine) continue;
      const latest = Math.min(mine.latest, h.latest);
      const finalized = Math.min(mine.finalized, h.finalized);
      if (latest || finalized) out.push({ project: h.project, upstream: h.upstream, latest, finalized });
      if (out.length >= MAX_HEADS_PER_MESSAGE) break;
    }
    return out;
  }
}

/**
 * The messages to publish for `heads`, each within {@link MAX_HEADS_PER_MESSAGE}.
 * @param replica this replica's id
 * @param heads the heads that moved
 * @param at the publish time, ms since the epoch
 */
export function messagesOf(replica: string, heads: SharedHead[], at: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < heads.length; i += MAX_HEADS_PER_MESSAGE)
    out.push(JSON.stringify({ replica, at, heads: heads.slice(i, i + MAX_HEADS_PER_MESSAGE) } satisfies StateMessage));
  return out;
}
