/**
 * How a consensus round turns votes into an answer (as eRPC does): votes
 * grouped by canonical hash, the threshold, `preferNonEmpty`, `preferLargerResponses`,
 * `preferHighestValueFor`, and the dispute and low-participants behaviours. Pure functions over the votes, so every rule has a
 * unit test without a network.
 */
import type { RpcResult } from 'svc-proxy/plugin';
import { ErrConsensusDispute, ErrConsensusLowParticipants, type SvcError } from 'svc-proxy/plugin/errors';
import type { ConsensusBehavior, ConsensusConfig } from './schema.ts';

/** One upstream's contribution to a round: an answer, or an error that is a fact about the chain. */
export interface Vote {
  /** The upstream that answered. */
  upstreamId: string;
  /** Canonical hash of the answer (`jsonrpc:<code>` for an error that votes). */
  hash: string;
  /** The answer (absent for an error vote). */
  result?: RpcResult;
  /** The error that voted (a revert, invalid params, unsupported method, missing data). */
  error?: SvcError;
  /** True for null, `[]`, `{}`, `0x`: an empty answer (error votes count as empty for `preferNonEmpty`). */
  empty: boolean;
  /** Size of the answer's JSON, bytes (0 for an error). */
  size: number;
}

/** Votes that gave the same canonical answer. */
export interface Group {
  hash: string;
  votes: Vote[];
  /** Every member is empty (or an error). */
  empty: boolean;
  /** The member answers are errors. */
  isError: boolean;
  /** The largest member's size, bytes. */
  size: number;
}

/** How the round ended (the `outcome` label of `svc_network_consensus_outcome_total`). */
export type RoundOutcome = 'agreement' | 'dispute' | 'low_participants';

/** The result of {@link decide}: the vote whose answer is returned, or the error to throw. */
export interface Decision {
  outcome: RoundOutcome;
  groups: Group[];
  /** The answer to return (its group's largest member); absent when `error` is set. */
  winner?: Vote;
  /** The winning group (its members are the attempts marked `:won`). */
  winningGroup?: Group;
  /** What the client gets when nothing can be returned. */
  error?: SvcError;
  /** The winner was refused for a `requiredParticipants` `minAgreement` quota (a composition dispute: its majority is the untrusted side). */
  composition?: true;
}

/** Groups votes by hash, in order of first arrival. */
export function groupVotes(votes: readonly Vote[]): Group[] {
  const byHash = new Map<string, Group>();
  for (const v of votes) {
    let g = byHash.get(v.hash);
    if (!g) byHash.set(v.hash, (g = { hash: v.hash, votes: [], empty: true, isError: v.error !== undefined, size: 0 }));
    g.votes.push(v);
    if (!v.empty) g.empty = false;
    if (v.size > g.size) g.size = v.size;
  }
  return [...byHash.values()];
}

/** Ranking of groups: non-empty first (with `preferNonEmpty`), then votes, then size (with `preferLargerResponses`), then arrival. */
function compare(cfg: ConsensusConfig): (a: Group, b: Group) => number {
  return (a, b) => {
    if (cfg.preferNonEmpty && a.empty !== b.empty) return a.empty ? 1 : -1;
    if (a.votes.length !== b.votes.length) return b.votes.length - a.votes.length;
    if (cfg.preferLargerResponses && a.size !== b.size) return b.size - a.size;
    return 0;
  };
}

/** The group's largest member (the answer returned). */
function largest(g: Group): Vote {
  let best = g.votes[0] as Vote;
  for (const v of g.votes) if (v.size > best.size) best = v;
  return best;
}

/** The most common valid group, `preferNonEmpty` first (Array.prototype.sort is stable: arrival breaks ties). */
function mostCommon(groups: readonly Group[], cfg: ConsensusConfig): Group | undefined {
  return [...groups].sort(compare(cfg))[0];
}

/** `error.data.groups` of a consensus error: hash prefix, upstream ids, count. */
export function summarize(groups: readonly Group[]): { hash: string; upstreams: string[]; count: number }[] {
  return groups.map((g) => ({
    hash: g.hash.startsWith('jsonrpc:') ? g.hash : g.hash.slice(0, 16),
    upstreams: g.votes.map((v) => v.upstreamId),
    count: g.votes.length,
  }));
}

/** Inputs of {@link decide} besides the votes. */
export interface DecideInput {
  votes: readonly Vote[];
  /** Errors of slots that did not vote (timeouts, 5xx, rate limits, exhausted). */
  infraErrors: readonly SvcError[];
  cfg: ConsensusConfig;
  /** Upstream ids of the round's slots with the highest latest block first (the block head leader is `[0]`), or empty when unknown. */
  leaderId?: string;
  /** Slots the round ran. */
  participants: number;
  /** The call's method (selects `preferHighestValueFor` fields). */
  method?: string;
  /**
   * `requiredParticipants[].minAgreement`: given the winning group's upstream ids, why it falls
   * short of a winner quota (undefined when every quota holds). A winner that falls short is a dispute.
   */
  agreementShortfall?: (winners: readonly string[]) => string | undefined;
}

/**
 * A numeric value of an answer field as a bigint: a hex quantity (`0x1b`), a decimal string, or a
 * JSON number (truncated); undefined for anything else.
 */
export function numericValue(v: unknown): bigint | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? BigInt(Math.trunc(v)) : undefined;
  if (typeof v !== 'string') return undefined;
  const t = v.trim();
  // Bounded: a value past 256 bits is no quantity an EVM method answers.
  if (/^0x[0-9a-fA-F]{1,64}$/.test(t)) return BigInt(t);
  if (/^-?\d{1,78}$/.test(t)) return BigInt(t);
  return undefined;
}

/**
 * The values of `fields` in an answer (`result` is the answer itself, another name a field of the
 * answer object), or undefined when one is missing or not numeric (the answer then takes no part).
 */
export function fieldValues(result: unknown, fields: readonly string[]): bigint[] | undefined {
  const out: bigint[] = [];
  for (const f of fields) {
    const raw =
      f === 'result' ? result : result !== null && typeof result === 'object' && !Array.isArray(result) ? (result as Record<string, unknown>)[f] : undefined;
    const n = numericValue(raw);
    if (n === undefined) return undefined;
    out.push(n);
  }
  return out;
}

function compareValues(a: readonly bigint[], b: readonly bigint[]): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as bigint;
    const y = b[i] as bigint;
    if (x !== y) return x > y ? 1 : -1;
  }
  return 0;
}

/**
 * eRPC's `preferHighestValueFor` rule, ahead of every other: answers (error votes take no part)
 * grouped by the numeric values of the method's fields; the highest values shared by at least
 * `agreementThreshold` answers win (their largest answer is returned), else a dispute. Undefined
 * when no answer has the fields (the other rules decide then).
 */
function highestValue(input: DecideInput, fields: readonly string[], groups: Group[]): Decision | undefined {
  const byValue = new Map<string, { values: bigint[]; votes: Vote[] }>();
  for (const v of input.votes) {
    if (!v.result) continue;
    const values = fieldValues(v.result.result, fields);
    if (!values) continue;
    const key = values.join(',');
    const g = byValue.get(key);
    if (g) g.votes.push(v);
    else byValue.set(key, { values, votes: [v] });
  }
  if (byValue.size === 0) return undefined;
  const threshold = Math.max(1, input.cfg.agreementThreshold);
  let best: { values: bigint[]; votes: Vote[] } | undefined;
  for (const g of byValue.values()) if (g.votes.length >= threshold && (!best || compareValues(g.values, best.values) > 0)) best = g;
  if (!best) {
    return {
      outcome: 'dispute',
      groups,
      error: new ErrConsensusDispute(
        `consensus dispute: no value of ${fields.join(', ')} was shared by ${threshold} upstreams (preferHighestValueFor)`,
        summarize(groups),
        [],
        { participants: input.participants, valid: input.votes.length, threshold },
      ),
    };
  }
  // The winning group: the votes whose values won (the hash groups they came from may differ in format only).
  const winners = best.votes;
  const winningGroup: Group = { hash: winners[0]?.hash ?? '', votes: winners, empty: false, isError: false, size: Math.max(...winners.map((v) => v.size)) };
  let winner = winners[0] as Vote;
  for (const v of winners) if (v.size > winner.size) winner = v;
  return { outcome: 'agreement', groups, winningGroup, winner };
}

/**
 * Decides a finished (or short-circuited) round.
 * @returns the winner, or the error to throw (ErrConsensusDispute, ErrConsensusLowParticipants)
 */
export function decide(input: DecideInput): Decision {
  const d = decideByCount(input);
  // The winner quotas hold whichever rule chose the group: disputeBehavior cannot bypass them (as in eRPC).
  const short = d.winningGroup && input.agreementShortfall?.(d.winningGroup.votes.map((v) => v.upstreamId));
  if (!short) return d;
  const details = { participants: input.participants, valid: input.votes.length, threshold: input.cfg.agreementThreshold };
  const causes = [...input.votes.flatMap((v) => (v.error ? [v.error] : [])), ...input.infraErrors];
  return {
    outcome: 'dispute',
    groups: d.groups,
    composition: true,
    error: new ErrConsensusDispute(`consensus dispute: the winning answer ${short} (requiredParticipants minAgreement)`, summarize(d.groups), causes, details),
  };
}

function decideByCount(input: DecideInput): Decision {
  const { votes, cfg } = input;
  const groups = groupVotes(votes);
  const fields = input.method === undefined ? undefined : cfg.preferHighestValueFor?.[input.method];
  if (fields && fields.length > 0) {
    const d = highestValue(input, fields, groups);
    if (d) return d;
  }
  const ranked = [...groups].sort(compare(cfg));
  const atThreshold = ranked.filter((g) => g.votes.length >= cfg.agreementThreshold);
  const agreed = atThreshold[0];
  if (agreed) return { outcome: 'agreement', groups, winningGroup: agreed, winner: largest(agreed) };
  const outcome: RoundOutcome = votes.length < cfg.agreementThreshold ? 'low_participants' : 'dispute';
  const behavior = outcome === 'dispute' ? cfg.disputeBehavior : cfg.lowParticipantsBehavior;
  const chosen = applyBehavior(behavior, groups, cfg, input.leaderId);
  if (chosen) return { outcome, groups, winningGroup: chosen, winner: largest(chosen) };
  return { outcome, groups, error: roundError(outcome, groups, input) };
}

/** The group a behaviour accepts, or undefined for "return the error". */
function applyBehavior(behavior: ConsensusBehavior, groups: readonly Group[], cfg: ConsensusConfig, leaderId: string | undefined): Group | undefined {
  const leaderGroup = leaderId === undefined ? undefined : groups.find((g) => g.votes.some((v) => v.upstreamId === leaderId));
  switch (behavior) {
    case 'returnError':
      return undefined;
    case 'acceptMostCommonValidResult':
      return mostCommon(groups, cfg);
    case 'preferBlockHeadLeader':
      return leaderGroup ?? mostCommon(groups, cfg);
    case 'onlyBlockHeadLeader':
      return leaderGroup;
  }
}

function roundError(outcome: RoundOutcome, groups: readonly Group[], input: DecideInput): SvcError {
  const causes = [...input.votes.flatMap((v) => (v.error ? [v.error] : [])), ...input.infraErrors];
  const summary = summarize(groups);
  const details = { participants: input.participants, valid: input.votes.length, threshold: input.cfg.agreementThreshold };
  if (outcome === 'dispute') {
    return new ErrConsensusDispute(
      `consensus dispute: ${input.votes.length} of ${input.participants} upstreams answered in ${groups.length} different ways, none reached the agreement threshold of ${input.cfg.agreementThreshold}`,
      summary,
      causes,
      details,
    );
  }
  return new ErrConsensusLowParticipants(
    `consensus low participants: ${input.votes.length} valid answers of ${input.participants} upstreams, below the agreement threshold of ${input.cfg.agreementThreshold}`,
    summary,
    causes,
    details,
  );
}

/**
 * Whether a round may stop before its running slots end: some group reached the threshold and
 * no group (an existing one, or a new one) could still overtake it with every running slot's vote.
 * With `preferNonEmpty`, an empty leader is final only when no non-empty answer could still reach
 * the threshold.
 * @param running slots still running
 */
export function isSettled(votes: readonly Vote[], running: number, cfg: ConsensusConfig): boolean {
  if (running === 0) return true;
  const groups = groupVotes(votes).sort(compare(cfg));
  const lead = groups[0];
  if (!lead || lead.votes.length < cfg.agreementThreshold) return false;
  for (const g of groups) if (g !== lead && g.votes.length + running >= lead.votes.length) return false;
  // A group nobody voted for yet.
  if (running >= lead.votes.length) return false;
  if (cfg.preferNonEmpty && lead.empty) {
    if (running >= cfg.agreementThreshold) return false;
    for (const g of groups) if (!g.empty && g.votes.length + running >= cfg.agreementThreshold) return false;
  }
  return true;
}

/**
 * The upstreams a round counts against for `punishMisbehavior`: as in eRPC, only a data answer that disagrees with a data winner
 * holding more than half of the votes. Nobody in a round an error won (a revert majority), with no winner or with a winner short
 * of that majority, and never an upstream that answered an error.
 */
export function punishable(d: Decision): string[] {
  const won = d.winningGroup;
  if (!won || won.isError) return [];
  // Only a clear majority of the answers that voted (infrastructure failures do not) speaks for the truth.
  const voted = d.groups.reduce((n, g) => n + g.votes.length, 0);
  if (won.votes.length * 2 <= voted) return [];
  const winners = new Set(won.votes.map((v) => v.upstreamId));
  const out: string[] = [];
  for (const g of d.groups) {
    if (g.isError) continue;
    for (const v of g.votes) if (!winners.has(v.upstreamId)) out.push(v.upstreamId);
  }
  return out;
}
