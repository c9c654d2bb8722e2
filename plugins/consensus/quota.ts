/**
 * eRPC's `consensus.requiredParticipants`: tag quotas on a round.
 *
 * - `minParticipants` (pool quota, best effort): the participants are drawn so that at least
 *   that many upstreams with a tag matching `tag` (a glob) are among the first
 *   `maxParticipants`: matching upstreams are promoted to the front in selection order, the rest
 *   keep their order behind them, and `maxParticipants` is unchanged. Too few matching upstreams
 *   (or quotas that cannot all fit) run with what there is; the low-participants rules apply as
 *   to any round. An upstream matching several entries counts for each.
 * - `minAgreement` (winner quota, hard): at least that many distinct matching upstreams must be
 *   in the winning group, whatever rule chose it (threshold, disputeBehavior or
 *   lowParticipantsBehavior); otherwise the round is a dispute (eRPC's composition dispute,
 *   which disputeBehavior cannot bypass). `eth_sendRawTransaction` is exempt, as in eRPC.
 */
import type { Upstream } from 'svc-proxy/plugin';
import { compileGlobs, type GlobTest } from 'svc-proxy/util';

/** One `requiredParticipants` entry as configured. */
export interface RequiredParticipant {
  /** Glob over upstream tags. */
  tag: string;
  /** Matching upstreams the participant set should hold (≥ 1). */
  minParticipants: number;
  /** Matching upstreams the winning group must hold (0 = no winner quota). */
  minAgreement?: number;
}

/** A compiled entry. */
export interface Quota {
  readonly tag: string;
  readonly matches: GlobTest;
  readonly minParticipants: number;
  readonly minAgreement: number;
}

/** Compiles the entries (patterns are compiled once per config object by the caller's memo). */
export function compileQuotas(reqs: readonly RequiredParticipant[]): Quota[] {
  return reqs.map((r) => ({ tag: r.tag, matches: compileGlobs(r.tag), minParticipants: r.minParticipants, minAgreement: r.minAgreement ?? 0 }));
}

/** Whether any of an upstream's tags matches a quota's pattern. */
export function matchesQuota(tags: ReadonlySet<string>, q: Quota): boolean {
  for (const t of tags) if (q.matches(t)) return true;
  return false;
}

/**
 * The candidates reordered for the pool quotas: for each entry in turn, matching candidates
 * (in their order, `eligible` ones only) are promoted until the entry counts `minParticipants`
 * among the promoted; then the rest in their order.
 * @param candidates the untried upstreams in selection order
 * @param eligible whether a candidate may be promoted (healthy for the call's method)
 */
export function promoteForQuotas<U extends Pick<Upstream, 'id' | 'tags'>>(
  candidates: readonly U[],
  quotas: readonly Quota[],
  eligible: (u: U) => boolean = () => true,
): U[] {
  const promoted: U[] = [];
  const taken = new Set<U>();
  for (const q of quotas) {
    let have = promoted.filter((u) => matchesQuota(u.tags, q)).length;
    for (const u of candidates) {
      if (have >= q.minParticipants) break;
      if (taken.has(u) || !eligible(u) || !matchesQuota(u.tags, q)) continue;
      promoted.push(u);
      taken.add(u);
      have++;
    }
  }
  if (promoted.length === 0) return [...candidates];
  return [...promoted, ...candidates.filter((u) => !taken.has(u))];
}

/**
 * The first winner quota a set of winning upstreams misses (distinct upstreams counted), or
 * undefined when every `minAgreement` holds.
 * @param winners upstream ids of the winning group
 * @param tagsOf an upstream's tags by id
 */
export function missedAgreement(
  winners: readonly string[],
  quotas: readonly Quota[],
  tagsOf: (id: string) => ReadonlySet<string> | undefined,
): { quota: Quota; had: number } | undefined {
  const ids = [...new Set(winners)];
  for (const q of quotas) {
    if (q.minAgreement <= 0) continue;
    let had = 0;
    for (const id of ids) {
      const tags = tagsOf(id);
      if (tags && matchesQuota(tags, q)) had++;
    }
    if (had < q.minAgreement) return { quota: q, had };
  }
  return undefined;
}
