/**
 * The `consensus` block of a network `failsafe[]` entry (as eRPC does). The
 * failsafe plugin owns `failsafe[]` and declares its entries as the extension point
 * {@link FAILSAFE_ENTRY_POINT}; this plugin adds `consensus` to it ({@link consensusSchemaFragment}),
 * so the one assembled schema validates it (`svc validate` paths such as
 * `projects[0].networks[0].failsafe[0].consensus.agreementThreshold`), fills its defaults and
 * documents it, and neither plugin imports the other.
 */
import { Duration, type SchemaFragment, Size, Strict, Type } from 'svc-proxy/plugin';
import { normalizeRequiredParticipants } from './quota-config.ts';
import type { RequiredParticipant } from './quota.ts';

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
  preferHighestValueFor: Type.Optional(
    Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { minItems: 1, maxItems: 8 }), {
      maxProperties: 256,
      description:
        "per method, the result fields whose numeric value decides the round (eRPC's preferHighestValueFor): `result` is the result itself (eth_gasPrice, eth_getTransactionCount), another name a field of the result object; later fields break ties. Answers are grouped by those values (hex, decimal strings and numbers alike), and the highest value that agreementThreshold answers share wins, else ErrConsensusDispute; every slot is awaited. An answer lacking a field takes no part",
    }),
  ),
  fireAndForget: Type.Optional(
    Type.Boolean({
      default: false,
      description:
        "once the round is decided, slots still running are not cancelled and run to their end in the background (eRPC's fireAndForget), bounded by the call's deadline and each upstream's timeouts; a client that disconnects does not stop them (an eth_sendRawTransaction keeps reaching every slot)",
    }),
  ),
  disputeLogLevel: Type.Optional(
    Type.Union([Type.Literal('trace'), Type.Literal('debug'), Type.Literal('info'), Type.Literal('warn'), Type.Literal('error')], {
      default: 'warn',
      description: 'log level of a round with a dispute or with upstreams outvoted (misbehaving), naming them',
    }),
  ),
  misbehaviorsDestination: Type.Optional(
    Strict(
      {
        type: Type.Optional(Type.Literal('file', { default: 'file', description: "`file` (eRPC's `s3` is not in svc)" })),
        path: Type.String({
          minLength: 2,
          maxLength: 1024,
          pattern: '^/',
          description: 'absolute directory the JSONL files are written to (created when missing, mode 0750)',
        }),
        filePattern: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 256,
            default: '{timestampMs}-{method}-{networkId}',
            description:
              'file name: `{dateByHour}` (UTC 2006-01-02-15), `{dateByDay}`, `{method}`, `{networkId}`, `{instanceId}`, `{timestampMs}`; `.jsonl` is appended unless the name ends in .jsonl/.json/.log',
          }),
        ),
        maxRecordSize: Type.Optional(
          Size({
            default: '256KiB',
            description: "bytes of one record at most: participants' responses are cut (`responseTruncated: true`) to keep it under",
          }),
        ),
        maxTotalSize: Type.Optional(
          Size({
            default: '256MiB',
            description: 'bytes this process writes to the directory at most; later records are dropped and counted (svc_consensus_misbehaviors_dropped_total)',
          }),
        ),
      },
      {
        description:
          "eRPC's misbehaviorsDestination: every round in which some upstream was outvoted (or a dispute) is appended as one JSON line (eRPC's record: ts, projectId, networkId, method, finality, policy, request, winner, analysis, participants) to a file of this directory",
      },
    ),
  ),
  requiredParticipants: Type.Optional(
    Type.Array(
      Strict({
        tag: Type.String({ minLength: 1, maxLength: 256, description: 'glob matched against each upstream tag (`*`, `?`)' }),
        minParticipants: Type.Integer({
          minimum: 1,
          maximum: 32,
          description: 'matching upstreams promoted into the participant set (best effort; at most maxParticipants)',
        }),
        minAgreement: Type.Optional(
          Type.Integer({
            minimum: 0,
            description:
              'matching upstreams the winning answer must have (at most minParticipants); fewer makes the round a dispute whatever disputeBehavior says. 0: no such quota',
          }),
        ),
      }),
      {
        maxItems: 16,
        description:
          "eRPC's requiredParticipants: tag quotas on a round. Matching upstreams are drawn first without changing maxParticipants (too few healthy ones: the round runs with what there is); minAgreement is hard-enforced on the winner (eth_sendRawTransaction exempt)",
      },
    ),
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
  /** Per method, the fields whose numeric values decide the round (highest wins). */
  preferHighestValueFor?: Record<string, string[]>;
  /** Slots still running when the round is decided keep running in the background. */
  fireAndForget?: boolean;
  /** Level of the dispute/misbehaviour log line (default `warn`). */
  disputeLogLevel?: DisputeLogLevel;
  /** Where misbehaving rounds are exported (sizes in bytes). */
  misbehaviorsDestination?: MisbehaviorsDestination;
  /** Tag quotas on the participants and the winner. */
  requiredParticipants?: RequiredParticipant[];
}

/** Levels of `disputeLogLevel`. */
export type DisputeLogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** A resolved `misbehaviorsDestination` (sizes in bytes). */
export interface MisbehaviorsDestination {
  type?: 'file';
  /** Absolute directory. */
  path: string;
  filePattern?: string;
  maxRecordSize?: number;
  maxTotalSize?: number;
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
  return { extend: { [FAILSAFE_ENTRY_POINT]: { consensus: ConsensusSchema } }, normalize: normalizeRequiredParticipants };
}
