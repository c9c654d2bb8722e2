/**
 * `svc-proxy/plugins/consensus`: the record slots the consensus plugin writes for each call
 * (`X-SVC-Consensus-Slots`, `-Disputes`, `-Low-Participants`), read by the headers plugin, and
 * its misbehaviour record ({@link ConsensusMisbehaviorApi}), read by the selection plugin.
 */
import { type Project, serviceKey, type ServiceKey, Slot } from 'svc-proxy/plugin';

/** Record slot `consensus.slots`: upstreams that took part in the call's consensus rounds (`X-SVC-Consensus-Slots`). */
export const CONSENSUS_SLOTS = new Slot<number>('consensus.slots', 0);
/** Record slot `consensus.disputes`: rounds whose answers disagreed (`X-SVC-Consensus-Disputes`). */
export const CONSENSUS_DISPUTES = new Slot<number>('consensus.disputes', 0);
/** Record slot `consensus.lowParticipants`: rounds with fewer participants than asked (`X-SVC-Consensus-Low-Participants`). */
export const CONSENSUS_LOW_PARTICIPANTS = new Slot<number>('consensus.lowParticipants', 0);

/** One upstream's consensus record over the project's health window. */
export interface MisbehaviorCounts {
  /** Rounds in which it gave a valid answer (an answer or an error that votes). */
  readonly rounds: number;
  /** Rounds whose winning answer differed from its own data answer (eRPC's misbehaviour; a differing error is not one). */
  readonly lost: number;
  /** `lost / rounds`, 0..1; 0 without rounds (no consensus policy ran for it). */
  readonly rate: number;
}

/**
 * What the consensus plugin tells other plugins about misbehaviour (service
 * {@link CONSENSUS_MISBEHAVIOR_SERVICE}): per upstream, the consensus rounds it took part in and
 * lost within its project's health window (`scoreMetricsWindowSize`). The selection plugin reads
 * it as eRPC's `misbehaviorRate`. Without the consensus plugin, or on a network without a
 * consensus entry, every rate is 0.
 */
export interface ConsensusMisbehaviorApi {
  /**
   * The upstream's counts over the window ending now.
   * @param project the upstream's project (its health window sets the length)
   * @param upstreamId the upstream id
   */
  counts(project: Project, upstreamId: string): MisbehaviorCounts;
}

/** Key of the consensus plugin's {@link ConsensusMisbehaviorApi}: `host.services.get(CONSENSUS_MISBEHAVIOR_SERVICE)` (undefined without it). */
export const CONSENSUS_MISBEHAVIOR_SERVICE: ServiceKey<ConsensusMisbehaviorApi> = serviceKey<ConsensusMisbehaviorApi>('consensus.misbehavior');
