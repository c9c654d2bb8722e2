/**
 * `svc-proxy/plugins/consensus`: the record slots the consensus plugin writes for each call
 * (`X-SVC-Consensus-Slots`, `-Disputes`, `-Low-Participants`), read by the headers plugin.
 */
import { Slot } from 'svc-proxy/plugin';

/** Record slot `consensus.slots`: upstreams that took part in the call's consensus rounds (`X-SVC-Consensus-Slots`). */
export const CONSENSUS_SLOTS = new Slot<number>('consensus.slots', 0);
/** Record slot `consensus.disputes`: rounds whose answers disagreed (`X-SVC-Consensus-Disputes`). */
export const CONSENSUS_DISPUTES = new Slot<number>('consensus.disputes', 0);
/** Record slot `consensus.lowParticipants`: rounds with fewer participants than asked (`X-SVC-Consensus-Low-Participants`). */
export const CONSENSUS_LOW_PARTICIPANTS = new Slot<number>('consensus.lowParticipants', 0);
