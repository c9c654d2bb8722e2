/**
 * consensus plugin (as eRPC does): for the calls a `failsafe[].consensus`
 * entry matches, several upstreams answer and only what enough of them agree on is returned.
 *
 * Taps: `attempt` at AttemptStage.CONSENSUS (inside the network timeout, outside retry and hedge:
 * `timeout( consensus( retry( hedge( sweep ))))`), where each slot runs the inner chain on its own
 * upstream; `upstreamLeft` (an upstream out of service leaves the misbehaviour record);
 * `shutdown` (pending punishment releases). It adds `consensus` to the failsafe
 * plugin's network entries (`schema.ts`, the `projects[].networks[].failsafe[]` extension point),
 * reads the call's matched entry from the `failsafe.entry` slot the failsafe plugin fills (hence
 * `dependsOn: ['failsafe']`), and writes the `consensus.*` record slots the headers plugin turns
 * into `X-SVC-Consensus-*` (§4.5).
 * Metrics: `svc_network_consensus_rounds_total` (§6; not counted under `skip-consensus`) and
 * `svc_network_consensus_outcome_total{project,network,outcome}`.
 *
 * Metric `svc_consensus_misbehaviors_dropped_total{reason}` counts export records not written.
 * Provides `CONSENSUS_MISBEHAVIOR_SERVICE` (each upstream's misbehaviours over the health window,
 * per method, the selection policy's `misbehaviorRate`).
 *
 * Files: `decide.ts` (grouping and the decision rules), `round.ts` (running the slots),
 * `punish.ts` (the misbehaviour cordon), `misbehavior-rate.ts` (misbehaviours per upstream and method), `export.ts` (the `misbehaviorsDestination` file
 * writer), `quota.ts` / `quota-config.ts` (`requiredParticipants`); this file wires them.
 */
import { Counter } from 'prom-client';
import {
  type AttemptHandler,
  AttemptStage,
  type CallContext,
  type Directives,
  DirectiveStage,
  type Leg,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  type RpcResult,
  type Upstream,
} from 'svc-proxy/plugin';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import { markProvenance } from 'svc-proxy/plugins/multiplex';
import { compileIgnorePaths, DEFAULT_IGNORE_FIELDS, DeferredCounter, type IgnorePaths, WRITE_METHODS } from 'svc-proxy/util';
import {
  CONSENSUS_DISPUTES as DISPUTES,
  CONSENSUS_LOW_PARTICIPANTS as LOW_PARTICIPANTS,
  CONSENSUS_MISBEHAVIOR_SERVICE,
  CONSENSUS_SLOTS as SLOTS,
} from './api.ts';
import { MisbehaviorRecord } from './misbehavior-rate.ts';
import { FAILSAFE_ENTRY } from 'svc-proxy/plugins/failsafe';
import { decide, punishable, summarize, type Decision, type Vote } from './decide.ts';
import { MisbehaviorExporter } from './export.ts';
import { Punisher, REAL_CLOCK, type PunishClock } from './punish.ts';
import { broadcast, runSlots } from './round.ts';
import { compileQuotas, missedAgreement, promoteForQuotas, type Quota } from './quota.ts';
import { type ConsensusConfig, consensusSchemaFragment, type MisbehaviorsDestination } from './schema.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

export { decide, fieldValues, groupVotes, isSettled, numericValue, summarize, type Decision, type Group, type RoundOutcome, type Vote } from './decide.ts';
export {
  DEFAULT_FILE_PATTERN,
  DEFAULT_MAX_RECORD_SIZE,
  DEFAULT_MAX_TOTAL_SIZE,
  fileNameOf,
  MAX_PENDING_RECORDS,
  MisbehaviorExporter,
  recordOf,
  type DropReason,
} from './export.ts';
export { runSlots, type RoundOptions } from './round.ts';
export { compileQuotas, matchesQuota, missedAgreement, promoteForQuotas, type Quota, type RequiredParticipant } from './quota.ts';
export { MISBEHAVING_REASON, Punisher, type PunishClock } from './punish.ts';
export { consensusGroup, MAX_RECORDED_METHODS, MisbehaviorRecord, type RecordedDecision } from './misbehavior-rate.ts';
export {
  CONSENSUS_BEHAVIORS,
  ConsensusSchema,
  consensusSchemaFragment,
  DEFAULT_CONSENSUS,
  FAILSAFE_ENTRY_POINT,
  type ConsensusBehavior,
  type ConsensusConfig,
  type DisputeLogLevel,
  type MisbehaviorsDestination,
} from './schema.ts';

/** Directive `skip-consensus` (spec §2.8 #6): answer from one upstream, without a round. */
export const SKIP_CONSENSUS = new Directive<boolean>({
  field: 'skipConsensus',
  query: 'skip-consensus',
  header: 'X-SVC-Skip-Consensus',
  type: 'bool',
  fallback: false,
  spec: '#6',
  description: 'bypass consensus (default false)',
});

/** Distinct methods whose ignore paths are remembered per consensus entry (method names come from clients). */
const IGNORE_MEMO_LIMIT = 256;

/** Options of the consensus plugin (tests). */
export interface ConsensusPluginOptions {
  /** Clock and timers of the punishment cordon (and the clock of the misbehaviour record). */
  clock?: PunishClock;
}

/**
 * Creates the consensus plugin. It does nothing for a network whose failsafe entries configure
 * no `consensus` (the attempt chain is composed without it).
 * @param opts test hooks
 */
export function consensusPlugin(opts: ConsensusPluginOptions = {}): Plugin {
  return definePlugin({
    name: 'consensus',
    dependsOn: ['failsafe'],
    provides: [CONSENSUS_MISBEHAVIOR_SERVICE],
    schema: { ...consensusSchemaFragment(), directiveDefaults: directiveDefaultsSchema(SKIP_CONSENSUS) },
    apply(host: PluginHost) {
      declareDirectives(host, 'consensus', SKIP_CONSENSUS);
      // A call that skips the network's consensus is answered off the network's rules: the cache
      // and multiplexing keep it apart (spec §2.8).
      host.hooks.directives.tap({ name: 'consensus', stage: DirectiveStage.PROVENANCE }, (d: Directives, ctx: CallContext) => {
        if (SKIP_CONSENSUS.get(d) && !SKIP_CONSENSUS.get(ctx.network.config.directiveDefaults)) markProvenance(ctx, 'skip-consensus');
        return d;
      });
      const clock = opts.clock ?? REAL_CLOCK;
      const punisher = new Punisher(clock);
      // Misbehaviours per upstream and method over the health window: the selection plugin's misbehaviorRate.
      const misbehavior = new MisbehaviorRecord(() => clock.now());
      host.services.provide(CONSENSUS_MISBEHAVIOR_SERVICE, misbehavior);
      // Out of service for good (a reload removed or changed it, its chain id failed it): a
      // successor under the same id starts with a fresh health window, so with no record either.
      host.hooks.upstreamLeft.tap('consensus', (u: Upstream, network: Network) => {
        if (u.state === 'failed' || network.project.upstreams.get(u.id) !== u) misbehavior.forget(u);
      });
      const rounds = new Counter({
        name: 'svc_network_consensus_rounds_total',
        help: 'Consensus rounds run (not counted when skip-consensus bypassed consensus)',
        registers: [host.metrics],
      });
      const outcomes = new DeferredCounter(host.metrics, {
        name: 'svc_network_consensus_outcome_total',
        help: 'Consensus rounds by outcome: agreement, dispute, low_participants',
        labelNames: ['project', 'network', 'outcome'],
      });
      const ignoreMemo = new WeakMap<ConsensusConfig, Map<string, IgnorePaths>>();
      const ignoreOf = (cfg: ConsensusConfig, method: string): IgnorePaths => {
        let m = ignoreMemo.get(cfg);
        if (!m) ignoreMemo.set(cfg, (m = new Map()));
        let paths = m.get(method);
        if (!paths) {
          paths = compileIgnorePaths(cfg.ignoreFields?.[method] ?? DEFAULT_IGNORE_FIELDS[method]);
          if (m.size < IGNORE_MEMO_LIMIT) m.set(method, paths);
        }
        return paths;
      };

      /** The slot with the highest latest block, by the state poller's view. */
      const leaderOf = (network: Network, upstreams: readonly Upstream[]): string | undefined => {
        const state = networkChainState(host, network);
        let best: Upstream | undefined;
        let bestHead = 0;
        for (const u of upstreams) {
          const head = state.peek(u)?.latest ?? 0;
          if (head > bestHead) (best = u), (bestHead = head);
        }
        return best?.id;
      };

      const quotaMemo = new WeakMap<ConsensusConfig, Quota[]>();
      const quotasOf = (cfg: ConsensusConfig): Quota[] => {
        let q = quotaMemo.get(cfg);
        if (!q) quotaMemo.set(cfg, (q = compileQuotas(cfg.requiredParticipants ?? [])));
        return q;
      };
      /** The round's participants: the first maxParticipants untried upstreams, tag quotas promoted to the front. */
      const participantsOf = (ctx: CallContext, leg: Leg, cfg: ConsensusConfig, quotas: readonly Quota[]): Upstream[] => {
        const all = leg.cursor.upstreams;
        const untried = all.slice(all.length - leg.cursor.remaining);
        const health = ctx.project.health;
        const method = ctx.request.method;
        const ordered = quotas.length ? promoteForQuotas(untried, quotas, (u) => u.serving && !health.isCordoned(u.id, method)) : untried;
        const upstreams = ordered.slice(0, cfg.maxParticipants);
        for (let i = 0; i < upstreams.length; i++) leg.cursor.next();
        return upstreams;
      };

      const round = async (ctx: CallContext, leg: Leg, cfg: ConsensusConfig, inner: AttemptHandler): Promise<RpcResult> => {
        const quotas = quotasOf(cfg);
        const upstreams = participantsOf(ctx, leg, cfg, quotas);
        rounds.inc();
        SLOTS.set(ctx.record, SLOTS.get(ctx.record) + upstreams.length);
        if (ctx.request.method === 'eth_sendRawTransaction') {
          const r = await broadcast(ctx, leg, upstreams, inner, cfg.fireAndForget === true);
          outcomes.inc([ctx.project.id, ctx.network.id, 'agreement']);
          return r;
        }
        const firstAttempt = ctx.record.attempts.length;
        const method = ctx.request.method;
        const waitAll = cfg.preferHighestValueFor?.[method] !== undefined;
        const byId = new Map(upstreams.map((u) => [u.id, u.tags]));
        const agreementShortfall = quotas.some((q) => q.minAgreement > 0)
          ? (winners: readonly string[]) => {
              const m = missedAgreement(winners, quotas, (id) => byId.get(id));
              return m && `has ${m.had} upstreams tagged ${m.quota.tag}, below its minAgreement of ${m.quota.minAgreement}`;
            }
          : undefined;
        const input = { cfg, participants: upstreams.length, leaderId: leaderOf(ctx.network, upstreams), method, agreementShortfall };
        // A winner short of its quota is not final while a running slot could still complete it.
        const final = agreementShortfall && ((v: readonly Vote[]) => decide({ ...input, votes: v, infraErrors: [] }).outcome === 'agreement');
        const { votes, infraErrors } = await runSlots(ctx, leg, upstreams, inner, cfg, ignoreOf(cfg, method), {
          waitAll,
          fireAndForget: cfg.fireAndForget,
          final,
        });
        const decision = decide({ ...input, votes, infraErrors });
        reportMisbehavior(ctx, cfg, decision, votes, infraErrors.length);
        misbehavior.record(ctx.project, decision, votes, method, upstreams);
        outcomes.inc([ctx.project.id, ctx.network.id, decision.outcome]);
        if (decision.outcome === 'dispute') DISPUTES.set(ctx.record, DISPUTES.get(ctx.record) + 1);
        if (decision.outcome === 'low_participants') LOW_PARTICIPANTS.set(ctx.record, LOW_PARTICIPANTS.get(ctx.record) + 1);
        markWinners(ctx, firstAttempt, decision);
        if (cfg.punishMisbehavior && decision.winningGroup) punishLosers(ctx, decision, cfg.punishMisbehavior);
        if (decision.error) throw decision.error;
        const winner = decision.winner as NonNullable<Decision['winner']>;
        if (winner.error) throw winner.error;
        const r = winner.result as RpcResult;
        r.upstreamId = winner.upstreamId;
        ctx.record.upstream = winner.upstreamId;
        return r;
      };

      const dropped = new DeferredCounter(host.metrics, {
        name: 'svc_consensus_misbehaviors_dropped_total',
        help: 'Consensus misbehaviour records not written to misbehaviorsDestination, by reason: total_size (maxTotalSize or maxRecordSize reached), queue_full, write_error',
        labelNames: ['reason'],
      });
      // One writer per directory, so its size bound holds for every entry that names it.
      const exporters = new Map<string, MisbehaviorExporter>();
      const exporterOf = (dest: MisbehaviorsDestination): MisbehaviorExporter => {
        let e = exporters.get(dest.path);
        if (!e) {
          e = new MisbehaviorExporter(
            dest,
            (reason) => dropped.inc([reason]),
            (msg) => host.logger.warn(msg),
          );
          exporters.set(dest.path, e);
        }
        return e;
      };

      /**
       * A round with a dispute, or with upstreams outvoted (eRPC's misbehaviour): logged at
       * `disputeLogLevel` naming them, and exported to `misbehaviorsDestination` when set.
       */
      const reportMisbehavior = (ctx: CallContext, cfg: ConsensusConfig, d: Decision, votes: readonly Vote[], infra: number) => {
        const winners = new Set(d.winningGroup?.votes.map((v) => v.upstreamId) ?? []);
        const misbehaving = d.winningGroup ? votes.filter((v) => !winners.has(v.upstreamId)).map((v) => v.upstreamId) : [];
        if (misbehaving.length === 0 && d.outcome !== 'dispute') return;
        const level = cfg.disputeLogLevel ?? 'warn';
        if (host.logger.isLevelEnabled(level)) {
          host.logger[level](
            { project: ctx.project.id, network: ctx.network.id, method: ctx.request.method, outcome: d.outcome, misbehaving, groups: summarize(d.groups) },
            d.outcome === 'dispute'
              ? `consensus dispute on ${ctx.request.method}: ${d.groups.length} different answers`
              : `consensus on ${ctx.request.method}: upstreams ${misbehaving.join(', ')} were outvoted`,
          );
        }
        if (cfg.misbehaviorsDestination) exporterOf(cfg.misbehaviorsDestination).offer(ctx, cfg, d, votes, infra);
      };

      const punishLosers = (ctx: CallContext, d: Decision, p: NonNullable<ConsensusConfig['punishMisbehavior']>) => {
        for (const upstreamId of punishable(d)) {
          if (punisher.lost(ctx.project.health, upstreamId, p.disputeThreshold, p.disputeWindow, p.sitOutPenalty)) {
            host.logger.warn(
              { project: ctx.project.id, network: ctx.network.id, upstream: upstreamId, sitOutMs: p.sitOutPenalty },
              `consensus: upstream ${upstreamId} cordoned (misbehaving in consensus)`,
            );
          }
        }
      };

      host.hooks.attempt.tap({ name: 'consensus', stage: AttemptStage.CONSENSUS }, (inner: AttemptHandler, network: Network): AttemptHandler => {
        const entries = network.config.settings.failsafe;
        const list = Array.isArray(entries) ? entries : entries ? [entries] : [];
        // Composed once per network: without a consensus entry the chain has no consensus layer.
        if (!list.some((e) => (e as { consensus?: unknown }).consensus !== undefined)) return inner;
        return (ctx, leg) => {
          // The matched failsafe entry's `consensus`, the key this plugin adds to the entry (its type).
          const cfg = FAILSAFE_ENTRY.get(ctx)?.consensus as ConsensusConfig | undefined;
          if (!cfg || ctx.internal || SKIP_CONSENSUS.get(ctx.directives)) return inner(ctx, leg);
          // Writes are never voted on; `eth_sendRawTransaction` is broadcast through every slot instead.
          if (WRITE_METHODS.has(ctx.request.method) && ctx.request.method !== 'eth_sendRawTransaction') return inner(ctx, leg);
          return round(ctx, leg, cfg, inner);
        };
      });
      host.hooks.shutdown.tapPromise('consensus', async () => {
        punisher.close();
        await Promise.all([...exporters.values()].map((e) => e.flush()));
      });
    },
  });
}

/**
 * `:won` (spec §4.5) only for the attempts of the upstreams whose answer was returned: slots that
 * answered something else, or were cut short, contributed nothing.
 */
function markWinners(ctx: CallContext, from: number, d: Decision): void {
  const winners = new Set(d.winningGroup?.votes.map((v) => v.upstreamId) ?? []);
  const attempts = ctx.record.attempts;
  for (let i = from; i < attempts.length; i++) {
    const a = attempts[i];
    if (a && a.won && !winners.has(a.upstreamId)) a.won = false;
  }
}
