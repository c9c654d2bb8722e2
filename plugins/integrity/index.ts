/**
 * integrity plugin (spec §2.8 #10, §6, §7): answers that carry block data are
 * checked against the chain's own commitments before they reach a client.
 *
 * Taps:
 * - `directives` at `DirectiveStage.INTEGRITY`: resolves the call's level from the `integrity`
 *   directive, `networks[].integrity.headerMode` and `profiles` ({@link resolveLevel}); keeps it in
 *   the call slot {@link LEVEL} and the record slot {@link RECORD_LEVEL}; a call with a level other
 *   than `off` skips cache reads (`skip-cache-read: true`: a cache entry's provenance is unknown;
 *   a checked answer is still written back).
 * - `upstream` at `UpstreamStage.INTEGRITY` (outermost per upstream): runs the checks on the
 *   upstream's answer. A call at `off`, an internal call, or a method outside
 *   {@link CHECKED_METHODS} goes straight through (no promise added). A failed check throws
 *   `ErrEndpointContentValidation` (retryable: the sweep moves to the next upstream, and the attempt
 *   counts against the upstream that returned bad data) and counts
 *   `svc_upstream_request_retries_total{reason="integrity_validation"}`. When no upstream passes,
 *   the client gets the error, never the unchecked answer. `networks[].integrity.invalidBehavior`
 *   (eRPC's per-finality verdict) may soft-flag (serve and count) or skip the comparisons with
 *   other upstreams ({@link isReorgSensitive}, {@link peerVerdictOf}); `observeOnly` serves every
 *   failed answer and counts it (`svc_integrity_flagged_total`).
 * - Config: eRPC's `integrity` block is rewritten into these settings at load time (erpc.ts).
 * - `responseHeaders`: `X-SVC-Integrity` with the applied level (a batch: the distinct levels in
 *   sub-call order, comma-separated), whenever a call's request or config named a level (so `off`
 *   shows a denied or unknown request); not written with `server.executionHeaders: off`.
 *
 * Levels (all checks of the weaker levels included):
 * - `intrinsic`: the answer against itself (checks/): block hash from the header, transactions and
 *   withdrawals roots, transaction hashes, receipts' and logs' block and indexes, logs in the
 *   requested range and filter, logs in their receipt's bloom.
 * - `corroborated`: each block the answer rests on confirmed by a second upstream (corroborate.ts).
 * - `authoritative`: a vote of up to `maxParticipants - 1` other upstreams over each block's hash,
 *   with the call's matched failsafe entry's `consensus` (a key the consensus plugin adds to the
 *   failsafe entries), else the consensus defaults, 5 and 2 ({@link AUTHORITATIVE_DEFAULTS}).
 *
 * viem and @ethereumjs/mpt are loaded on the first checked answer only.
 */
import { Counter } from 'prom-client';
import {
  type CallContext,
  type Directives,
  DirectiveStage,
  type ExecutionRecord,
  type HeaderSink,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  type RpcResult,
  Slot,
  type Upstream,
  type UpstreamCall,
  type UpstreamSender,
  UpstreamStage,
} from 'svc-proxy/plugin';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import { ErrEndpointContentValidation } from 'svc-proxy/plugin/errors';
import { markProvenance } from 'svc-proxy/plugins/multiplex';
import { FAILSAFE_ENTRY } from 'svc-proxy/plugins/failsafe';
import { checkIntrinsic, CHECKED_METHODS, isEmptyAnswer } from './checks/index.ts';
import { authoritative, corroborate, type AuthoritativeSettings, type Peer } from './corroborate.ts';
import { CheckFailure } from './hex.ts';
import type { Anchors } from './anchors.ts';
import { normalizeErpcIntegrity } from './erpc.ts';
import {
  compileIntegrity,
  IntegritySchema,
  type InvalidBehavior,
  levelOf,
  refuseUnknownLevel,
  resolveLevel,
  type IntegrityLevel,
  type NetworkIntegrity,
} from './levels.ts';
import { loadLibs } from './libs.ts';
import type { FetchBudget } from './budget.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

export { CHECKED_METHODS, checkIntrinsic, isEmptyAnswer } from './checks/index.ts';
export { authoritative, corroborate, MAX_ANCHORS, MAX_IN_FLIGHT, type AuthoritativeSettings, type Peer } from './corroborate.ts';
export { Anchors, type Anchor } from './anchors.ts';
export { CheckFailure, NO_SKIP, type SkipChecks } from './hex.ts';
export {
  compileIntegrity,
  IntegritySchema,
  levelOf,
  LEVELS,
  resolveLevel,
  SKIPPABLE_CHECKS,
  type IntegrityInput,
  type IntegrityLevel,
  type InvalidBehavior,
  type NetworkIntegrity,
  type ResolvedLevel,
} from './levels.ts';
export { ERPC_CHECKS, ERPC_SKIPPABLE, normalizeErpcIntegrity, type ErpcCheck } from './erpc.ts';
export { loadLibs, type IntegrityLibs } from './libs.ts';
export { budgetOf, budgetSchema, FetchBudget, MAX_BUDGET_VALUE } from './budget.ts';

/** The call's resolved level (slot `integrity.level` on the call context); unset until resolved. */
export const LEVEL = new Slot<IntegrityLevel | undefined>('integrity.level', undefined);

/** The level reported in `X-SVC-Integrity` (slot `integrity.applied` on the execution record); unset when nothing asked for one. */
export const RECORD_LEVEL = new Slot<IntegrityLevel | undefined>('integrity.applied', undefined);

/**
 * `authoritative`'s settings when the call's failsafe entry has no `consensus` (or the consensus
 * plugin, which adds that key, is not applied): the consensus defaults, 5 participants, 2 votes.
 */
export const AUTHORITATIVE_DEFAULTS: Readonly<AuthoritativeSettings> = Object.freeze({ maxParticipants: 5, agreementThreshold: 2 });

/** Response header naming the applied level(s). */
export const INTEGRITY_HEADER = 'X-SVC-Integrity';

/** Name of the shared retry counter (spec §6), registered by evm-retries when it is applied. */
export const UPSTREAM_RETRIES_METRIC = 'svc_upstream_request_retries_total';

/** Counter of check failures served anyway (`soft_flag`, `would_reject`) and of answers served unvoted (`budget_skipped`). */
export const FLAGGED_METRIC = 'svc_integrity_flagged_total';

/**
 * Whether a failed check compares the answer with other upstreams' view of the chain (a fork, an
 * unconfirmed block, a lost vote), which near the tip may be a reorg rather than bad data: the
 * checks `invalidBehavior` governs (eRPC's reorg-sensitive checks).
 */
export function isReorgSensitive(check: string): boolean {
  return check.endsWith('.fork') || check.endsWith('.unconfirmed') || check.endsWith('.consensus');
}

/**
 * The verdict of the peer comparisons for an answer (eRPC's invalidBehavior): the `finalized`
 * one when every block the answer rests on is at or below the network's finalized block, else
 * the `unfinalized` one.
 * @param s the network's settings
 * @param anchors the blocks of the answer
 * @param finalized the network's highest finalized block (0 = unknown: unfinalized)
 */
export function peerVerdictOf(s: NetworkIntegrity, anchors: Anchors, finalized: number): InvalidBehavior {
  let top = -1n;
  for (const a of anchors.list()) if (a.number > top) top = a.number;
  return finalized > 0 && top >= 0n && top <= BigInt(finalized) ? s.invalidBehavior.finalized : s.invalidBehavior.unfinalized;
}

/** Longest a confirming request to another upstream may take, ms (also bounded by the call's deadline). */
export const PEER_TIMEOUT_MS = 5_000;

/** The method confirming upstreams are asked. */
const CONFIRM_METHOD = 'eth_getBlockByNumber';

type RetriesLabel = 'project' | 'network' | 'category' | 'reason';

/** Directive `integrity` (spec §2.8 #10): the level, or a profile name, a call's answers are checked at. */
export const INTEGRITY = new Directive<string | undefined>({
  field: 'integrity',
  query: 'integrity',
  header: 'X-SVC-Integrity',
  type: 'string',
  fallback: undefined,
  spec: '#10',
  description: 'integrity level or profile name',
});

/** Directive `skip-cache-read` (spec §2.8 #3), declared as the cache plugin declares it: a checked call sets it to `true`. */
const SKIP_CACHE_READ = new Directive<string | undefined>({
  field: 'skipCacheRead',
  query: 'skip-cache-read',
  header: 'X-SVC-Skip-Cache-Read',
  type: 'string',
  fallback: undefined,
  spec: '#3',
});

/**
 * The configured integrity default of a call: the network's `directiveDefaults.integrity`, else the
 * matched failsafe entry's (what `headerMode: deny` applies).
 * @param ctx the call
 */
export function configuredLevelValue(ctx: CallContext): string | undefined {
  const own = INTEGRITY.get(ctx.network.config.directiveDefaults);
  if (typeof own === 'string' && own.trim() !== '') return own;
  const fromEntry = FAILSAFE_ENTRY.get(ctx)?.directiveDefaults?.integrity;
  return typeof fromEntry === 'string' ? fromEntry : undefined;
}

/**
 * The consensus settings of a call's `authoritative` level: its matched failsafe entry's
 * `consensus` (defaults applied by the schema), else {@link AUTHORITATIVE_DEFAULTS}.
 * @param ctx the call
 */
export function authoritativeSettingsOf(ctx: CallContext): AuthoritativeSettings {
  // The consensus plugin's key on the entry (resolved with its defaults), when that plugin is applied.
  const c = FAILSAFE_ENTRY.get(ctx)?.consensus as AuthoritativeSettings | undefined;
  return c ? { maxParticipants: c.maxParticipants, agreementThreshold: c.agreementThreshold } : AUTHORITATIVE_DEFAULTS;
}

/**
 * Creates the integrity plugin (name `integrity`).
 * @returns a plugin owning `networks[].integrity`, tapping `directives`, `upstream` and `responseHeaders`
 */
export function integrityPlugin(): Plugin {
  return definePlugin({
    name: 'integrity',
    version: '0.1.0',
    schema: { network: { integrity: IntegritySchema }, directiveDefaults: directiveDefaultsSchema(INTEGRITY), normalize: normalizeErpcIntegrity },
    apply(host: PluginHost) {
      declareDirectives(host, 'integrity', INTEGRITY, SKIP_CACHE_READ);
      const settings = new WeakMap<Network, NetworkIntegrity>();
      let counter: Counter<RetriesLabel> | undefined;
      let flagged: Counter<'project' | 'network' | 'upstream' | 'check' | 'outcome'> | undefined;
      let headersOff = false;

      const settingsOf = (n: Network): NetworkIntegrity => {
        let s = settings.get(n);
        if (!s) {
          s = compileIntegrity(n.config.settings.integrity, `network ${n.id} integrity`);
          settings.set(n, s);
        }
        return s;
      };

      host.hooks.configured.tap('integrity', (config) => {
        headersOff = config.server.executionHeaders === 'off';
        // Bad profiles fail at start (and in `svc validate`), not on the first call.
        for (const p of config.projects) {
          for (const n of p.networks) compileIntegrity(n.settings.integrity, `projects.${p.id}.networks.${n.id}.integrity`);
          compileIntegrity((p.networkDefaults as { integrity?: unknown }).integrity, `projects.${p.id}.networkDefaults.integrity`);
        }
        flagged ??= new Counter({
          name: FLAGGED_METRIC,
          help: 'integrity check failures served anyway: outcome soft_flag (invalidBehavior soft-flag on a peer comparison), would_reject (observeOnly) or budget_skipped (integrity.budget spent: no authoritative vote), by check',
          labelNames: ['project', 'network', 'upstream', 'check', 'outcome'],
          registers: [host.metrics],
        });
        // evm-retries registers the shared counter in its `apply`; without it, this plugin does.
        counter =
          (host.metrics.getSingleMetric(UPSTREAM_RETRIES_METRIC) as Counter<RetriesLabel> | undefined) ??
          new Counter({
            name: UPSTREAM_RETRIES_METRIC,
            help: 'Calls retried on another upstream because an answer was not usable yet, by reason (empty_result, pending_tx, integrity_validation)',
            labelNames: ['project', 'network', 'category', 'reason'],
            registers: [host.metrics],
          });
      });

      /** Resolves (once per call context) the call's level. Split getLogs parts get a fresh state map and resolve again from the same directives. */
      const levelFor = (ctx: CallContext): IntegrityLevel => {
        const memo = LEVEL.get(ctx);
        if (memo !== undefined) return memo;
        const d = ctx.directives;
        const configured = configuredLevelValue(ctx);
        const requested = INTEGRITY.get(d);
        if (requested === undefined && configured === undefined) return 'off';
        const r = resolveLevel(requested, configured, settingsOf(ctx.network), ctx.request.method);
        LEVEL.set(ctx, r.level);
        return r.level;
      };

      host.hooks.directives.tap({ name: 'integrity', stage: DirectiveStage.INTEGRITY }, (d: Directives, ctx: CallContext) => {
        const configured = configuredLevelValue(ctx);
        const requested = INTEGRITY.get(d);
        if (requested === undefined && configured === undefined) return d;
        // A value equal to config's (the network's default, or its matched failsafe entry's) is not the request's to refuse.
        if (requested !== configured && requested !== INTEGRITY.get(ctx.network.config.directiveDefaults))
          refuseUnknownLevel(requested, settingsOf(ctx.network), ctx.network.id);
        const r = resolveLevel(requested, configured, settingsOf(ctx.network), ctx.request.method);
        LEVEL.set(ctx, r.level);
        if (r.shown) RECORD_LEVEL.set(ctx.record, r.level);
        // A level other than the network's changes how the answer is obtained: the cache and
        // multiplexing keep it apart from answers checked by the network's rules (spec §2.8).
        if (r.level !== (levelOf(configured, settingsOf(ctx.network), ctx.request.method) ?? 'off')) markProvenance(ctx, 'integrity', r.level);
        // Start loading viem while the upstream is asked, so the first checked answer does not wait for it.
        if (r.level !== 'off') loadLibs().catch(() => undefined);
        // A cache entry's provenance is unknown: a checked call always asks an upstream ('true' skips every tier, spec §2.8 #3).
        if (r.level !== 'off' && SKIP_CACHE_READ.get(d) !== 'true') return { ...d, [SKIP_CACHE_READ.field]: 'true' };
        return d;
      });

      /** Other usable upstreams of the network, in config order: serving, not cordoned for the confirming method, supporting it. */
      const peersOf = (ctx: CallContext, self: Upstream, budget?: FetchBudget): Peer[] => {
        const out: Peer[] = [];
        for (const u of ctx.network.upstreams) {
          if (u === self || !u.serving || !u.supportsMethod(CONFIRM_METHOD) || ctx.project.health.isCordoned(u.id, CONFIRM_METHOD)) continue;
          out.push({
            id: u.id,
            getBlock: async (n) => {
              const timeout = Math.max(1, Math.min(PEER_TIMEOUT_MS, ctx.deadline - Date.now()));
              const fetch = async () => (await host.upstreamCall(ctx.network, u, CONFIRM_METHOD, [n, false], timeout)).result;
              return budget ? budget.run(timeout, fetch) : fetch();
            },
          });
        }
        return out;
      };

      /** Counts (and logs) a failure that is served anyway: `soft_flag` (invalidBehavior) or `would_reject` (observeOnly). */
      const flag = (ctx: CallContext, u: Upstream, e: CheckFailure, outcome: 'soft_flag' | 'would_reject' | 'budget_skipped', level: IntegrityLevel) => {
        flagged?.inc({ project: ctx.project.id, network: ctx.network.id, upstream: u.id, check: e.check, outcome });
        host.logger.warn(
          { project: ctx.project.id, network: ctx.network.id, upstream: u.id, check: e.check, level, outcome },
          `integrity ${level}: ${e.message} (served: ${outcome})`,
        );
      };

      const checked = async (inner: UpstreamSender, call: UpstreamCall, u: Upstream, level: IntegrityLevel): Promise<RpcResult> => {
        const r = await inner(call);
        const result = r.result;
        if (isEmptyAnswer(result)) return r;
        const libs = await loadLibs();
        const ctx = call.ctx;
        const s = settingsOf(ctx.network);
        try {
          const anchors = await checkIntrinsic(libs, call.method, call.params, result, s.skip);
          if (level === 'corroborated' || level === 'authoritative') {
            const verdict = peerVerdictOf(s, anchors, networkChainState(host, ctx.network).highestFinalized);
            if (verdict !== 'off') {
              try {
                if (level === 'corroborated') await corroborate(libs.viem, anchors, peersOf(ctx, u));
                else {
                  const peers = peersOf(ctx, u, s.budget);
                  const auth = authoritativeSettingsOf(ctx);
                  // The whole vote is paid for up front: a spent budget serves the answer unvoted rather than half-voted.
                  const fetches = anchors.size * Math.min(peers.length, Math.max(0, auth.maxParticipants - 1));
                  if (s.budget && !s.budget.reserve(fetches))
                    flag(
                      ctx,
                      u,
                      new CheckFailure('authoritative.budget', `integrity budget spent: ${fetches} block fetches not sent, the answer is served unvoted`),
                      'budget_skipped',
                      level,
                    );
                  else await authoritative(libs.viem, anchors, peers, auth);
                }
              } catch (e) {
                if (!(e instanceof CheckFailure) || verdict !== 'soft-flag' || !isReorgSensitive(e.check) || s.observeOnly) throw e;
                flag(ctx, u, e, 'soft_flag', level);
              }
            }
          }
        } catch (e) {
          if (!(e instanceof CheckFailure)) throw e;
          if (s.observeOnly) {
            flag(ctx, u, e, 'would_reject', level);
            return r;
          }
          counter?.inc({ project: ctx.project.id, network: ctx.network.id, category: host.methodLabel.value(call.method), reason: 'integrity_validation' });
          throw new ErrEndpointContentValidation(`integrity ${level}: check ${e.check} failed on upstream ${u.id}: ${e.message}`, {
            details: { upstream: u.id, level, check: e.check },
          });
        }
        return r;
      };

      host.hooks.upstream.tap({ name: 'integrity', stage: UpstreamStage.INTEGRITY }, (inner: UpstreamSender, u: Upstream): UpstreamSender => {
        return (call: UpstreamCall) => {
          const ctx = call.ctx;
          // Internal calls (state polls, this plugin's own confirmations) are never checked.
          if (ctx.internal || !CHECKED_METHODS.has(call.method)) return inner(call);
          const level = levelFor(ctx);
          if (level === 'off') return inner(call);
          return checked(inner, call, u, level);
        };
      });

      host.hooks.responseHeaders.tap('integrity', (sink: HeaderSink, records: readonly ExecutionRecord[]) => {
        if (headersOff) return;
        let levels: IntegrityLevel[] | undefined;
        for (const r of records) {
          if (!r.slots) continue;
          const l = RECORD_LEVEL.get(r);
          if (l !== undefined && !levels?.includes(l)) (levels ??= []).push(l);
        }
        if (levels) sink.set(INTEGRITY_HEADER, levels.join(','));
      });
    },
  });
}
