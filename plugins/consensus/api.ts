/**
 * `svc-proxy/plugins/consensus`: the record slots the consensus plugin writes for each call
 * (`X-SVC-Consensus-Slots`, `-Disputes`, `-Low-Participants`), read by the headers plugin, and
 * its misbehaviour record ({@link ConsensusMisbehaviorApi}), read by the selection plugin.
 */
import { type Project, serviceKey, type ServiceKey, Slot, type Upstream } from 'svc-proxy/plugin';

/** Record slot `consensus.slots`: upstreams that took part in the call's consensus rounds (`X-SVC-Consensus-Slots`). */
export const CONSENSUS_SLOTS = new Slot<number>('consensus.slots', 0);
/** Record slot `consensus.disputes`: rounds whose answers disagreed (`X-SVC-Consensus-Disputes`). */
export const CONSENSUS_DISPUTES = new Slot<number>('consensus.disputes', 0);
/** Record slot `consensus.lowParticipants`: rounds with fewer participants than asked (`X-SVC-Consensus-Low-Participants`). */
export const CONSENSUS_LOW_PARTICIPANTS = new Slot<number>('consensus.lowParticipants', 0);

/** One upstream's consensus record over the project's health window, for one method or `*`. */
export interface MisbehaviorCounts {
  /** Consensus rounds in which it gave a valid answer (an answer or an error that votes). */
  readonly rounds: number;
  /**
   * Rounds whose consensus answer was data and differed from its own data answer (eRPC's
   * misbehaviour): the winning group's, or in a round without a winner the largest group's (none
   * on a tie). An error vote is never one, and a round an error won, or whose winner a
   * `minAgreement` quota refused, blames nobody.
   */
  readonly misbehaviors: number;
  /** Its requests in the same health cell over the window (every attempt, consensus or not). */
  readonly requests: number;
  /**
   * `misbehaviors / requests`, 0..1 (capped at 1); 0 without requests: eRPC's `misbehaviorRate`,
   * which divides by the same cell's requests.
   */
  readonly rate: number;
}

/**
 * What the consensus plugin tells other plugins about misbehaviour (service
 * {@link CONSENSUS_MISBEHAVIOR_SERVICE}): per upstream and method, the consensus rounds it took
 * part in and its misbehaviours within its project's health window (`scoreMetricsWindowSize`),
 * over its requests in that window. The selection plugin reads it as eRPC's `misbehaviorRate`.
 * svc counts consensus losses only; eRPC also counts a wrong empty answer, a deterministic
 * integrity reject and a head rollback as misbehaviour. Without the consensus plugin, or on a
 * network without a consensus entry, every rate is 0.
 */
export interface ConsensusMisbehaviorApi {
  /**
   * The upstream's counts over the window ending now. An upstream a reload replaced starts
   * clean (its record is the Upstream object's, as its health window is).
   * @param project the upstream's project (its health window sets the length and gives the requests)
   * @param upstream the upstream
   * @param method a method, or `*` (the default) for every method
   */
  counts(project: Project, upstream: Upstream, method?: string): MisbehaviorCounts;
}

/** Key of the consensus plugin's {@link ConsensusMisbehaviorApi}: `host.services.get(CONSENSUS_MISBEHAVIOR_SERVICE)` (undefined without it). */
export const CONSENSUS_MISBEHAVIOR_SERVICE: ServiceKey<ConsensusMisbehaviorApi> = serviceKey<ConsensusMisbehaviorApi>('consensus.misbehavior');
