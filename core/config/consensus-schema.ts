/**
 * The `consensus` field of a network `failsafe[]` entry (issue #14 item 1, erpc-notes §2.6).
 * The failsafe plugin owns `failsafe[]` and embeds this schema; the consensus plugin reads the
 * matched entry's `consensus` through the `failsafe.entry` slot. Shared here so neither plugin
 * imports the other.
 */
import { Type } from '@sinclair/typebox';
import { Duration, Strict } from './schema.ts';

/** What a round does when no answer reached the threshold (dispute) or too few answered (low participants). */
export const CONSENSUS_BEHAVIORS = ['returnError', 'acceptMostCommonValidResult', 'preferBlockHeadLeader', 'onlyBlockHeadLeader'] as const;

/** One of {@link CONSENSUS_BEHAVIORS}. */
export type ConsensusBehavior = (typeof CONSENSUS_BEHAVIORS)[number];

const behavior = (def: ConsensusBehavior, description: string) =>
  Type.Optional(Type.Union(CONSENSUS_BEHAVIORS.map((b) => Type.Literal(b)), { default: def, description }));

/** Schema of `failsafe[].consensus` (network scope only). */
export const ConsensusSchema = Strict({
  maxParticipants: Type.Optional(Type.Integer({ minimum: 1, maximum: 32, default: 5, description: 'upstreams asked at once (one slot each), taken from the selection order' })),
  agreementThreshold: Type.Optional(Type.Integer({ minimum: 1, default: 2, description: 'identical answers needed to win' })),
  disputeBehavior: behavior('returnError', 'enough answers, none at the threshold'),
  lowParticipantsBehavior: behavior('acceptMostCommonValidResult', 'fewer valid answers than the threshold'),
  ignoreFields: Type.Optional(
    Type.Record(Type.String({ maxLength: 256 }), Type.Array(Type.String({ maxLength: 256 }), { maxItems: 64 }), {
      description: 'per method, dot paths (`*` for any element) dropped before answers are compared; replaces the default list of that method',
    }),
  ),
  preferNonEmpty: Type.Optional(Type.Boolean({ default: true, description: 'a non-empty group at the threshold wins over an empty one' })),
  preferLargerResponses: Type.Optional(Type.Boolean({ default: true, description: 'wait (bounded) for running slots once a group won, and break ties by size' })),
  punishMisbehavior: Type.Optional(
    Strict({
      disputeThreshold: Type.Optional(Type.Integer({ minimum: 1, default: 3, description: 'rounds lost within disputeWindow before the upstream is cordoned' })),
      disputeWindow: Type.Optional(Duration({ default: '10m', description: 'window the lost rounds are counted in' })),
      sitOutPenalty: Type.Optional(Duration({ default: '5m', description: 'how long the cordon lasts' })),
    }),
  ),
});

/** A resolved `consensus` entry (durations in ms, defaults applied). */
export interface ConsensusConfig {
  maxParticipants: number;
  agreementThreshold: number;
  disputeBehavior: ConsensusBehavior;
  lowParticipantsBehavior: ConsensusBehavior;
  ignoreFields?: Record<string, string[]>;
  preferNonEmpty: boolean;
  preferLargerResponses: boolean;
  punishMisbehavior?: { disputeThreshold: number; disputeWindow: number; sitOutPenalty: number };
}

/** The settings used when a network configures none (integrity's `authoritative` level). */
export const DEFAULT_CONSENSUS: Readonly<ConsensusConfig> = Object.freeze({
  maxParticipants: 5,
  agreementThreshold: 2,
  disputeBehavior: 'returnError',
  lowParticipantsBehavior: 'acceptMostCommonValidResult',
  preferNonEmpty: true,
  preferLargerResponses: true,
});
