/**
 * The merge rules of shared state (pure, no Redis): what a replica publishes and what it applies
 * of what other replicas publish. Heads only move forward per upstream across the fleet, and a
 * replica ignores its own messages, so nothing it applies is published back (no echo loops).
 */

/** One upstream's heads as shared: `<project>/<upstream>` → latest and finalized block numbers. */
export interface SharedHead {
  /** Project id. */
  project: string;
  /** Upstream id inside the project. */
  upstream: string;
  /** Latest block (0 = unknown). */
  latest: number;
  /** Finalized block (0 = unknown). */
  finalized: number;
}

/** A message on `<clusterKey>:state`. */
export interface StateMessage {
  /** Id of the replica that published it. */
  replica: string;
  /** Heads that moved on that replica. */
  heads: SharedHead[];
}

/** Most heads one message may carry (a message over it is cut, the snapshot covers the rest). */
export const MAX_HEADS_PER_MESSAGE = 10_000;

/** The snapshot hash field of an upstream: `<project>/<upstream>`. */
export function headField(project: string, upstream: string): string {
  return `${project}/${upstream}`;
}

/** A non-negative safe integer, else 0. */
function blockOf(v: unknown): number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : 0;
}

/**
 * Parses a message from the channel; anything malformed is dropped (another deployment or
 * version may share the Redis).
 * @param text the message as published
 * @returns the message, or undefined when it is not one
 */
export function parseMessage(text: string): StateMessage | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null) return undefined;
  const { replica, heads } = doc as { replica?: unknown; heads?: unknown };
  if (typeof replica !== 'string' || !Array.isArray(heads)) return undefined;
  const out: SharedHead[] = [];
  for (const h of heads.slice(0, MAX_HEADS_PER_MESSAGE) as unknown[]) {
    if (typeof h !== 'object' || h === null) continue;
    const { project, upstream, latest, finalized } = h as Record<string, unknown>;
    if (typeof project !== 'string' || typeof upstream !== 'string') continue;
    out.push({ project, upstream, latest: blockOf(latest), finalized: blockOf(finalized) });
  }
  return { replica, heads: out };
}

/**
 * Parses a snapshot hash value `latest,finalized`.
 * @returns the two numbers (0 for a missing or malformed one)
 */
export function parseSnapshotValue(value: string): { latest: number; finalized: number } {
  const [a, b] = value.split(',');
  return { latest: blockOf(Number(a)), finalized: blockOf(Number(b)) };
}

/**
 * Tracks what this replica last published per upstream, so only heads that moved are sent.
 */
export class HeadLedger {
  private readonly sent = new Map<string, { latest: number; finalized: number }>();

  /**
   * The heads among `current` that moved past what was last published (or applied from
   * another replica), recording them as published.
   * @param current this replica's view now
   * @returns the heads to publish
   */
  changed(current: Iterable<SharedHead>): SharedHead[] {
    const out: SharedHead[] = [];
    for (const h of current) {
      const key = headField(h.project, h.upstream);
      const prev = this.sent.get(key);
      if (prev && h.latest <= prev.latest && h.finalized <= prev.finalized) continue;
      const next = { latest: Math.max(h.latest, prev?.latest ?? 0), finalized: Math.max(h.finalized, prev?.finalized ?? 0) };
      this.sent.set(key, next);
      out.push({ ...h, ...next });
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
}

/**
 * Which heads of a message this replica should apply: none of its own, and per upstream only a
 * number above what it knows (heads never move back).
 * @param msg the message
 * @param self this replica's id
 * @param known what this replica knows of an upstream (undefined when it has no such upstream)
 * @returns the heads to apply, with 0 for a number that would not move forward
 */
export function headsToApply(msg: StateMessage, self: string, known: (h: SharedHead) => { latest: number; finalized: number } | undefined): SharedHead[] {
  if (msg.replica === self) return [];
  const out: SharedHead[] = [];
  for (const h of msg.heads) {
    const k = known(h);
    if (!k) continue;
    const latest = h.latest > k.latest ? h.latest : 0;
    const finalized = h.finalized > k.finalized ? h.finalized : 0;
    if (latest || finalized) out.push({ ...h, latest, finalized });
  }
  return out;
}
