/**
 * The `consensus` block of a network `failsafe[]` entry (as eRPC does). The
 * failsafe plugin owns `failsafe[]` and declares its entries as the extension point
 * {@link FAILSAFE_ENTRY_POINT}; this plugin adds `consensus` to it ({@link consensusSchemaFragment}),
 * so the one assembled schema validates it (`svc validate` paths such as
 * `projects[0].networks[0].failsafe[0].consensus.agreementThreshold`), fills its defaults and
 * documents it, and neither plugin imports the other.
 */
import { Duration, type SchemaFragment, Strict, Type } from 'svc-proxy/plugin';

/** The failsafe plugin's network entry (by its extension point name; see `SchemaFragment.extend`). */
export const FAILSAFE_ENTRY_POINT = 'projects[].networks[].failsafe[]';

/** What a round does when no answer reached the threshold (dispute) or too few answered (low participants). */
export const CONSENSUS_BEHAVIORS = ['returnError', 'acceptMostCommonValidResult', 'preferBlockHeadLeader', 'onlyBlockHeadLeader'] as const;

/** One of {@link CONSENSUS_BEHAVIORS}. */
export type ConsensusBehavior = (typeof CONSENSUS_BEHAVIORS)[number];

const behavior = (def: ConsensusBehavior, description: string) =>
  Type.Optional(
    Type.Union(
      CONSENSUS_BEHAVIORS.map((b) => Type.Literal(b)),
      { default: def, description },
    ),
  );

/** Schema of `failsafe[].consensus` (network scope only). */
export const ConsensusSchema = Strict({
  maxParticipants: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 32, default: 5, description: 'upstreams asked at once (one slot each), taken from the selection order' }),
  ),
  agreementThreshold: Type.Optional(Type.Integer({ minimum: 1, default: 2, description: 'identical answers needed to win' })),
  disputeBehavior: behavior('returnError', 'enough answers, none at the threshold'),
  lowParticipantsBehavior: behavior('acceptMostCommonValidResult', 'fewer valid answers than the threshold'),
  ignoreFields: Type.Optional(
    Type.Record(Type.String({ maxLength: 256 }), Type.Array(Type.String({ maxLength: 256 }), { maxItems: 64 }), {
      description: 'per method, dot paths (`*` for any element) dropped before answers are compared; replaces the default list of that method',
    }),
  ),
  preferNonEmpty: Type.Optional(Type.Boolean({ default: true, description: 'a non-empty group at the threshold wins over an empty one' })),
  preferLargerResponses: Type.Optional(
    Type.Boolean({ default: true, description: 'wait (bounded) for running slots once a group won, and break ties by size' }),
  ),
  punishMisbehavior: Type.Optional(
    Strict({
      disputeThreshold: Type.Optional(
        Type.Integer({ minimum: 1, default: 3, description: 'rounds lost within disputeWindow before the upstream is cordoned' }),
      ),
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

/** The settings used when a call's entry configures none (the consensus service hands them to integrity's `authoritative` level). */
export const DEFAULT_CONSENSUS: Readonly<ConsensusConfig> = Object.freeze({
  maxParticipants: 5,
  agreementThreshold: 2,
  disputeBehavior: 'returnError',
  lowParticipantsBehavior: 'acceptMostCommonValidResult',
  preferNonEmpty: true,
  preferLargerResponses: true,
});

/** The config keys the consensus plugin adds: `consensus` on the failsafe plugin's network entries. */
export function consensusSchemaFragment(): SchemaFragment {
  return { extend: { [FAILSAFE_ENTRY_POINT]: { consensus: ConsensusSchema } } };
}
