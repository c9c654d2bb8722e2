/**
 * The consensus plugin's misbehaviour record (its {@link ConsensusMisbehaviorApi}): per upstream
 * and per method (and `*`), the rounds it gave a valid answer in and its misbehaviours, in
 * rolling buckets as long as its project's health window. The rate divides the misbehaviours by
 * the upstream's requests in the same health cell, as eRPC's `misbehaviorRate` does, so a
 * threshold carried over from eRPC means the same. Keyed by the Upstream object: one a reload
 * replaced (same id, fresh health window) starts clean, and one taken out of service is dropped
 * (`upstreamLeft`, {@link MisbehaviorRecord.forget}). Memory is bounded: a fixed number of
 * buckets per upstream and method, at most {@link MAX_RECORDED_METHODS} methods per upstream.
 */
import type { Project, Upstream } from 'svc-proxy/plugin';
import type { ConsensusMisbehaviorApi, MisbehaviorCounts } from './api.ts';
import type { Decision, Group, Vote } from './decide.ts';

/** Most methods recorded per upstream (as the health tracker's cells): later ones count in `*` only. */
export const MAX_RECORDED_METHODS = 200;

interface Bucket {
  epoch: number;
  rounds: number;
  misbehaviors: number;
}

/** What {@link MisbehaviorRecord.record} reads of a decision. */
export type RecordedDecision = Pick<Decision, 'winningGroup' | 'groups' | 'composition'>;

/**
 * The group a round's answers are judged against (eRPC's consensus group): the winning group,
 * or, when the round has none (a dispute, too few participants), the one group larger than every
 * other. A tie has none: which side lied is not known (eRPC picks one of them at random).
 */
export function consensusGroup(d: RecordedDecision): Group | undefined {
  if (d.winningGroup) return d.winningGroup;
  let best: Group | undefined;
  let tie = false;
  for (const g of d.groups) {
    if (best && g.votes.length === best.votes.length) tie = true;
    else if (!best || g.votes.length > best.votes.length) (best = g), (tie = false);
  }
  return tie ? undefined : best;
}

/** Rolling per-upstream, per-method round and misbehaviour counts, per project health window. */
export class MisbehaviorRecord implements ConsensusMisbehaviorApi {
  private readonly byUpstream = new WeakMap<Upstream, Map<string, Bucket[]>>();

  /** @param now clock, epoch ms (tests inject one) */
  constructor(private readonly now: () => number = Date.now) {}

  private epochOf(project: Project): number {
    const h = project.health;
    return Math.floor(this.now() / Math.max(1, Math.floor(h.windowMs / h.buckets)));
  }

  /**
   * Records one decided round, as eRPC counts misbehaviour: every voting upstream took part in a
   * round; a data answer outside the consensus group ({@link consensusGroup}) is a misbehaviour
   * when that group is data too. An error vote is never one, a round an error group won blames
   * nobody, nor does a winner refused for its `minAgreement` composition (its majority is the
   * untrusted side).
   * @param project the round's project (its health window sets the buckets)
   * @param decision the round's decision
   * @param votes the round's valid answers
   * @param method the call's method
   * @param upstreams the round's participants (the votes name them by id)
   */
  record(project: Project, decision: RecordedDecision, votes: readonly Vote[], method: string, upstreams: readonly Upstream[]): void {
    const consensus = decision.composition ? undefined : consensusGroup(decision);
    const agreeing = consensus && !consensus.isError ? new Set(consensus.votes.map((v) => v.upstreamId)) : undefined;
    // An upstream appears once per round whatever its slots answered.
    const seen = new Map<string, boolean>();
    for (const v of votes) {
      const lost = agreeing !== undefined && !agreeing.has(v.upstreamId) && v.error === undefined;
      seen.set(v.upstreamId, (seen.get(v.upstreamId) ?? false) || lost);
    }
    const epoch = this.epochOf(project);
    for (const [id, lost] of seen) {
      const u = upstreams.find((x) => x.id === id);
      if (!u) continue;
      let cells = this.byUpstream.get(u);
      if (!cells) this.byUpstream.set(u, (cells = new Map()));
      for (const m of method === '*' ? ['*'] : [method, '*']) {
        let buckets = cells.get(m);
        if (!buckets) {
          if (m !== '*' && cells.size > MAX_RECORDED_METHODS) continue;
          cells.set(m, (buckets = Array.from({ length: project.health.buckets }, () => ({ epoch: -1, rounds: 0, misbehaviors: 0 }))));
        }
        const b = buckets[epoch % buckets.length] as Bucket;
        if (b.epoch !== epoch) {
          b.epoch = epoch;
          b.rounds = 0;
          b.misbehaviors = 0;
        }
        b.rounds++;
        if (lost) b.misbehaviors++;
      }
    }
  }

  /** The upstream's counts over the window ending now (see {@link ConsensusMisbehaviorApi.counts}). */
  counts(project: Project, upstream: Upstream, method = '*'): MisbehaviorCounts {
    const buckets = this.byUpstream.get(upstream)?.get(method);
    let rounds = 0;
    let misbehaviors = 0;
    if (buckets) {
      const epoch = this.epochOf(project);
      for (const b of buckets) {
        if (b.epoch < 0 || epoch - b.epoch >= buckets.length) continue;
        rounds += b.rounds;
        misbehaviors += b.misbehaviors;
      }
    }
    const requests = project.health.requestCounts(upstream.id, method).requests;
    // Window edges can leave a misbehaviour whose request aged out first: a rate stays a share.
    return { rounds, misbehaviors, requests, rate: requests > 0 ? Math.min(1, misbehaviors / requests) : 0 };
  }

  /** Drops what is recorded of an upstream taken out of service (a reload removed or replaced it). */
  forget(upstream: Upstream): void {
    this.byUpstream.delete(upstream);
  }
}
