/**
 * Network scope of the failsafe plugin: the first `networks[].failsafe` entry
 * matching a call applies to the whole network execution.
 * Taps: `directives` at FAILSAFE_DEFAULTS (match the call's entry once and add its
 * `directiveDefaults`, below the network's own, spec §2.8); `attempt` at AttemptStage.HEDGE,
 * RETRY and TIMEOUT, composing outside in timeout( retry( hedge( sweep ))). A timeout or hedge
 * delay may be adaptive (adaptive.ts); a round that failed only because the data is not there
 * yet waits one block time, else `retry.emptyResultDelay`, before the next (eRPC's
 * data-unavailable delay). Publishes `svc_network_request_retries_total`,
 * `svc_network_hedges_total` and, with {@link FailsafeMetrics}, the timeout metrics.
 */
import {
  type AttemptHandler,
  AttemptStage,
  type CallContext,
  type Directives,
  DirectiveStage,
  FINALITY,
  type Leg,
  type Network,
  type PluginHost,
  type RpcResult,
  UpstreamCursor,
} from 'svc-proxy/plugin';
import { ErrFailsafeTimeoutExceeded } from 'svc-proxy/plugin/errors';
import { sleep } from 'svc-proxy/util';
import { FAILSAFE_ENTRY, NETWORK_HEDGES, NETWORK_RETRIES } from './api.ts';
import { Counter } from 'prom-client';
import { hedgeSpecOf, type LatencyQuantiles, timeoutSpecOf } from './adaptive.ts';
import { runHedged } from './hedge.ts';
import type { FailsafeMetrics } from './metrics.ts';
import { dataUnavailableDelay, isRetryable, retryDelay, withTimeout } from './policies.ts';
import { compile, DEFAULT_NETWORK_FAILSAFE, matchCompiled, matchEntry, WRITE_METHODS, type CompiledEntry, type FailsafeEntry } from './schema.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

/**
 * The per-call slot holding the matched network entry (`FAILSAFE_ENTRY`, slot `failsafe.entry`,
 * shared through svc-proxy/plugin): set (possibly to undefined, "no entry matched") once per call, to
 * this plugin's resolved {@link FailsafeEntry}; consensus, integrity and evm-retries read it.
 */
const ENTRY = FAILSAFE_ENTRY.key;

/**
 * The network failsafe entry that applies to a call, once the failsafe plugin matched it
 * (EVM plugins read `retry.emptyResultMaxAttempts` from it). Undefined when none matched.
 */
export function failsafeEntryOf(ctx: CallContext): FailsafeEntry | undefined {
  return FAILSAFE_ENTRY.get(ctx) as FailsafeEntry | undefined;
}

/**
 * Registers the network-scope counters and taps the `directives` and `attempt` hooks (in that
 * order: directives, then hedge, retry, timeout).
 * @param host the plugin host the failsafe plugin is applied to
 * @param latency the method latency quantiles adaptive delays are computed from
 * @param metrics the timeout and data-unavailable metrics shared with the upstream scope
 */
export function tapNetworkFailsafe(host: PluginHost, latency: LatencyQuantiles, metrics: FailsafeMetrics): void {
  const hooks = host.hooks;
  const netEntries = new WeakMap<Network, CompiledEntry[]>();
  const retries = new Counter({
    name: 'svc_network_request_retries_total',
    help: 'Network-scope retry rounds started',
    labelNames: ['project', 'network', 'category'],
    registers: [host.metrics],
  });
  const hedges = new Counter({
    name: 'svc_network_hedges_total',
    help: 'Hedge legs started',
    labelNames: ['project', 'network', 'category'],
    registers: [host.metrics],
  });
  const entriesOf = (n: Network): CompiledEntry[] => {
    let e = netEntries.get(n);
    if (!e) {
      e = compile(n.config.settings.failsafe ?? DEFAULT_NETWORK_FAILSAFE);
      netEntries.set(n, e);
    }
    return e;
  };
  const entryFor = (ctx: CallContext): FailsafeEntry | undefined => {
    if (ctx.state.has(ENTRY)) return ctx.state.get(ENTRY) as FailsafeEntry | undefined;
    const e = matchEntry(entriesOf(ctx.network), ctx.request.method, FINALITY.get(ctx));
    ctx.state.set(ENTRY, e);
    return e;
  };

  // An entry's directiveDefaults sit below the network's own and the request's (§2.8).
  // The match made here is the call's entry (finality is classified before this stage and
  // nothing changes it or the method later), so the network wrappers do not match again.
  hooks.directives.tap({ name: 'failsafe', stage: DirectiveStage.FAILSAFE_DEFAULTS }, (d: Directives, ctx: CallContext) => {
    const entries = entriesOf(ctx.network);
    if (entries.length === 0) return d;
    const c = matchCompiled(entries, ctx.request.method, FINALITY.get(ctx));
    ctx.state.set(ENTRY, c?.entry);
    if (!c?.directiveDefaults) return d;
    const out: Directives = { ...d };
    for (const k in c.directiveDefaults) {
      const key = k as keyof Directives;
      if (out[key] === undefined) (out as Record<string, unknown>)[key] = c.directiveDefaults[key];
    }
    return out;
  });

  // Composed once per network: a policy no entry of the network configures adds no wrapper
  // (and no promise layer) to its calls.
  const configures = (n: Network, policy: 'hedge' | 'retry' | 'timeout'): boolean => entriesOf(n).some((c) => c.entry[policy] !== undefined);

  hooks.attempt.tap({ name: 'failsafe:hedge', stage: AttemptStage.HEDGE }, (inner: AttemptHandler, network: Network): AttemptHandler => {
    if (!configures(network, 'hedge')) return inner;
    const hedged = async (ctx: CallContext, leg: Leg, h: NonNullable<FailsafeEntry['hedge']>): Promise<RpcResult> => {
      const delay = latency.resolve(ctx, hedgeSpecOf(h));
      return runHedged(ctx, leg, inner, delay, h.maxCount, () => {
        NETWORK_HEDGES.set(ctx.record, NETWORK_HEDGES.get(ctx.record) + 1);
        hedges.inc({ project: ctx.project.id, network: ctx.network.id, category: host.methodLabel.value(ctx.request.method) });
      });
    };
    return (ctx, leg) => {
      const h = entryFor(ctx)?.hedge;
      if (!h || WRITE_METHODS.has(ctx.request.method) || leg.cursor.remaining < 2) return inner(ctx, leg);
      return hedged(ctx, leg, h);
    };
  });

  hooks.attempt.tap({ name: 'failsafe:retry', stage: AttemptStage.RETRY }, (inner: AttemptHandler, network: Network): AttemptHandler => {
    if (!configures(network, 'retry')) return inner;
    const retried = async (ctx: CallContext, leg: Leg, r: NonNullable<FailsafeEntry['retry']>): Promise<RpcResult> => {
      for (let n = 1; ; n++) {
        const round: Leg =
          n === 1
            ? leg
            : { cursor: new UpstreamCursor(leg.cursor.upstreams), reason: leg.reason === 'consensus_slot' ? 'consensus_slot' : 'retry', signal: leg.signal };
        try {
          return await inner(ctx, round);
        } catch (e) {
          if (n >= r.maxAttempts || !isRetryable(e) || leg.signal.aborted) throw e;
          NETWORK_RETRIES.set(ctx.record, NETWORK_RETRIES.get(ctx.record) + 1);
          ctx.record.networkAttempts++;
          const category = host.methodLabel.value(ctx.request.method);
          retries.inc({ project: ctx.project.id, network: ctx.network.id, category });
          // Data not there yet: wait about one block for it (eRPC's data-unavailable delay), else back off.
          const waitMs = dataUnavailableDelay(e, r, networkChainState(host, ctx.network).blockTimeMs);
          if (waitMs !== undefined && waitMs > 0)
            metrics.dataUnavailableWait.observe({ project: ctx.project.id, network: ctx.network.id, category }, waitMs / 1000);
          await sleep(waitMs ?? retryDelay(r, n), leg.signal).catch(() => {
            throw e;
          });
        }
      }
    };
    return (ctx, leg) => {
      const r = entryFor(ctx)?.retry;
      if (!r || r.maxAttempts <= 1) return inner(ctx, leg);
      return retried(ctx, leg, r);
    };
  });

  hooks.attempt.tap({ name: 'failsafe:timeout', stage: AttemptStage.TIMEOUT }, (inner: AttemptHandler, network: Network): AttemptHandler => {
    if (!configures(network, 'timeout')) return inner;
    return (ctx, leg) => {
      const t = entryFor(ctx)?.timeout;
      const spec = t ? timeoutSpecOf(t) : undefined;
      if (!spec) return inner(ctx, leg);
      const ms = latency.resolve(ctx, spec);
      // A zero deadline is none (eRPC fails open rather than failing every call).
      if (!(ms > 0)) return inner(ctx, leg);
      if (spec.quantile > 0) metrics.observeTimeout(ctx, 'network', ms);
      return withTimeout(
        ms,
        leg.signal,
        `${ctx.request.method} on ${ctx.network.id}`,
        ErrFailsafeTimeoutExceeded,
        (signal) => inner(ctx, { ...leg, signal }),
        metrics.timeoutFired,
        ctx,
        'network',
      );
    };
  });
}
