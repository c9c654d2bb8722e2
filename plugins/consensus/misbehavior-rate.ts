/**
 * The consensus plugin's misbehaviour record (its {@link ConsensusMisbehaviorApi}): per upstream,
 * the rounds it gave a valid answer in and the rounds whose winner differed from its data answer,
 * in rolling buckets as long as its project's health window, so the rate the selection plugin
 * reads ages out with the other health numbers (eRPC's `misbehaviorRate` is a rolling count over
 * the same window). Memory is bounded: a fixed number of buckets per upstream the project has.
 */
import type { Project } from 'svc-proxy/plugin';
import type { HealthTracker } from 'svc-proxy/plugin/contracts';
import type { ConsensusMisbehaviorApi, MisbehaviorCounts } from './api.ts';
import type { Decision, Vote } from './decide.ts';

interface Bucket {
  epoch: number;
  rounds: number;
  lost: number;
}

const NONE: MisbehaviorCounts = Object.freeze({ rounds: 0, lost: 0, rate: 0 });

/** Rolling per-upstream round and loss counts, per project health window. */
export class MisbehaviorRecord implements ConsensusMisbehaviorApi {
  private readonly byTracker = new WeakMap<HealthTracker, Map<string, Bucket[]>>();

  /** @param now clock, epoch ms (tests inject one) */
  constructor(private readonly now: () => number = Date.now) {}

  private bucketMs(h: HealthTracker): number {
    return Math.max(1, Math.floor(h.windowMs / h.buckets));
  }

  /**
   * Records one decided round: every vote is a round taken part in; a data answer outside the
   * winning group is a loss. A round without a winner (a dispute) blames nobody, and an error
   * that differs from the winner is not misbehaviour (as in eRPC).
   * @param project the round's project
   * @param decision the round's decision
   * @param votes the round's valid answers
   */
  record(project: Project, decision: Pick<Decision, 'winningGroup'>, votes: readonly Vote[]): void {
    const h = project.health;
    let m = this.byTracker.get(h);
    if (!m) this.byTracker.set(h, (m = new Map()));
    const epoch = Math.floor(this.now() / this.bucketMs(h));
    const winners = decision.winningGroup ? new Set(decision.winningGroup.votes.map((v) => v.upstreamId)) : undefined;
    // An upstream appears once per round whatever its slots answered.
    const seen = new Map<string, boolean>();
    for (const v of votes) {
      const lost = winners !== undefined && !winners.has(v.upstreamId) && v.error === undefined;
      seen.set(v.upstreamId, (seen.get(v.upstreamId) ?? false) || lost);
    }
    for (const [id, lost] of seen) {
      let buckets = m.get(id);
      if (!buckets) m.set(id, (buckets = Array.from({ length: h.buckets }, () => ({ epoch: -1, rounds: 0, lost: 0 }))));
      const b = buckets[epoch % buckets.length] as Bucket;
      if (b.epoch !== epoch) {
        b.epoch = epoch;
        b.rounds = 0;
        b.lost = 0;
      }
      b.rounds++;
      if (lost) b.lost++;
    }
  }

  /** The upstream's counts over the window ending now (see {@link ConsensusMisbehaviorApi.counts}). */
  counts(project: Project, upstreamId: string): MisbehaviorCounts {
    const h = project.health;
    const buckets = this.byTracker.get(h)?.get(upstreamId);
    if (!buckets) return NONE;
    const epoch = Math.floor(this.now() / this.bucketMs(h));
    let rounds = 0;
    let lost = 0;
    for (const b of buckets) {
      if (b.epoch < 0 || epoch - b.epoch >= buckets.length) continue;
      rounds += b.rounds;
      lost += b.lost;
    }
    return rounds === 0 ? NONE : { rounds, lost, rate: lost / rounds };
  }
}
