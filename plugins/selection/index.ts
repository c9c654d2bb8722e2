/**
 * selection plugin (spec §1.3, §3.1, §6): the per-network selection policy.
 * Taps: `network` (evaluate the policy at once, then every `selectionPolicy.evalInterval` on an
 * unref'd timer), `upstreamJoined` and `project` (re-evaluate when an upstream joins, or turns
 * down or back up in its health tracker), `select` at stage POLICY (hand out the cached
 * order without recomputing it, honouring new cordons at once when the policy calls
 * `removeCordoned()`), `call` at stage SHADOW (only on a network whose YAML policy names
 * `probeExcluded`: answered reads are copied to excluded upstreams), `shutdown` (stop the timers).
 * Publishes `svc_selection_score`, `svc_selection_excluded_seconds`, `svc_selection_probes_total`
 * and `svc_selection_shadow_exclusions_total`, and keeps the last 100 decisions per network for the admin.
 *
 * It implements the selection-policy contract of `svc-proxy/plugin` (`EvalFunc`, `UpstreamsView`,
 * `selectionHooks`, `SelectionApi`), which a third-party plugin uses to install its own order.
 *
 * Under a narrower `selectionPolicy.evalScope` each method and/or finality of the calls gets its
 * own evaluation and order (bounded, `scopes.ts`).
 *
 * Files: `schema.ts` (config and defaults), `view.ts` (policy inputs and the helpers a policy
 * composes), `inputs.ts` (the numbers gathered for an evaluation), `policy.ts` (default policy
 * and evaluation), `state.ts` (per-scope state, evaluation loop), `scopes.ts` (a network's
 * scopes), `gauges.ts` (metrics), `ring.ts` (decisions ring), `sandbox*.ts` (YAML policies in node:vm),
 * `memory.ts` (what a YAML policy remembers across evaluations), `prober.ts` (probeExcluded's
 * mirror prober), `accessors.ts` (hooks and state readers); this file wires them.
 */
import {
  type CallContext,
  type CallHandler,
  CallStage,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  SelectStage,
  type Upstream,
} from 'svc-proxy/plugin';
import type { Reachability } from 'svc-proxy/plugin/contracts';
import {
  evaluateSelection,
  registerSelections,
  selectionDecisions,
  SELECTION_API_SERVICE,
  SELECTION_HOOKS_SERVICE,
  SELECTION_SERVICE,
  selectionHooks,
  selectionState,
} from './accessors.ts';
import { defaultPolicy, type EvalFunc } from './policy.ts';
import { readSelectionSettings, selectionSchemaFragment, settingsPath, validateConfig, type SelectionSettings } from './schema.ts';
import { createSelectionMetrics, MAX_DECISIONS } from './state.ts';
import { ScopedSelection } from './scopes.ts';
import { asksForProbes, createProbeCounter, ExcludedProber } from './prober.ts';

export {
  evaluateSelection,
  selectionDecisions,
  selectionHooks,
  SelectionPlugin,
  selectionState,
  SELECTION_API_SERVICE,
  SELECTION_HOOKS_SERVICE,
} from './accessors.ts';
export type { SelectionApi, SelectionHooks } from './accessors.ts';
export { DEFAULT_THRESHOLDS, defaultPolicy, evaluatePolicy, PolicyError } from './policy.ts';
export type { EvalFunc, EvaluateOptions, PolicyContext, PolicyErrorKind, PolicyResult } from './policy.ts';
export { EVAL_SCOPES, normalizeEvalScope, readSelectionSettings, selectionPolicySchema, selectionSchemaFragment } from './schema.ts';
export { MAX_SCOPES, SCOPE_IDLE_MS, scopeOf, ScopedSelection } from './scopes.ts';
export { MethodLatencies, NETWORK_SCOPE, policyInputs } from './inputs.ts';
export type { InputOptions, ScopeKey } from './inputs.ts';
export type { EvalScope, MethodLatency, PolicyMetricsExtra, ScopeState } from './api.ts';
export type { SelectionSettings } from './schema.ts';
export { MAX_DECISIONS, rankedScores } from './state.ts';
export { Ring } from './ring.ts';
export type { SelectionDecision, SelectionState } from './state.ts';
export { DEFAULT_SCORE_WEIGHTS, FALLBACK_TAG, policyUpstream, scoreOf, upstreamScore, UpstreamsView } from './view.ts';
export type { DecisionDraft, PolicyMetrics, PolicyUpstream, PolicyUpstreamInput, ScoreMultipliers, ScoreWeights } from './view.ts';
export { FINALITIES, resolveScoreMultipliers, routingSchema, scoreMultiplierSchema } from './multipliers.ts';
export type { ScoreMultiplierEntry } from './multipliers.ts';

/** Options of {@link selectionPlugin}. */
export interface SelectionPluginOptions {
  /** Policy of networks that configure no `evalFunc` (default {@link defaultPolicy}). */
  evalFunc?: EvalFunc;
  /** Decisions kept per network (default {@link MAX_DECISIONS}). */
  maxDecisions?: number;
}

/**
 * Creates the selection plugin (name `selection`).
 * @param opts default policy for networks without `evalFunc`, decisions kept per network
 * @returns a plugin owning `networks[].selectionPolicy` and `upstreams[].routing`, tapping `network`, `upstreamJoined`, `select` (stage POLICY), `call` (stage SHADOW, probing networks only) and `shutdown`
 * @throws ConfigError from the `configured` hook when a `selectionPolicy` is invalid (e.g. `projects[0].networks[0].selectionPolicy.evalFunc` is not a function)
 */
export function selectionPlugin(opts: SelectionPluginOptions = {}): Plugin {
  const maxDecisions = opts.maxDecisions ?? MAX_DECISIONS;
  if (!Number.isInteger(maxDecisions) || maxDecisions < 1)
    throw new RangeError(`selectionPlugin: maxDecisions must be a positive integer, got ${maxDecisions}`);
  if (opts.evalFunc !== undefined && typeof opts.evalFunc !== 'function')
    throw new TypeError('selectionPlugin: evalFunc must be a function (upstreams, ctx) => upstreams');
  return definePlugin({
    name: 'selection',
    // Scores and cordons come from the health tracker, which the health plugin feeds.
    dependsOn: ['health'],
    provides: [SELECTION_SERVICE, SELECTION_API_SERVICE, SELECTION_HOOKS_SERVICE],
    schema: selectionSchemaFragment,
    apply(host: PluginHost) {
      // Checked once the config is final; `svc validate` reports it too.
      host.hooks.configured.tap('selection', () => validateConfig(host));
      const hooks = selectionHooks(host);
      const nets = new Map<Network, ScopedSelection>();
      registerSelections(host, nets);
      // What other plugins (evm-state, admin) read of the selection, by its svc-proxy/plugin key.
      host.services.provide(SELECTION_API_SERVICE, {
        state: (projectId: string, networkId: string) => selectionState(host, projectId, networkId),
        evaluate: (projectId: string, networkId: string) => evaluateSelection(host, projectId, networkId),
        decisions: (projectId: string, networkId: string) => selectionDecisions(host, projectId, networkId),
      });
      const metrics = createSelectionMetrics(host);
      const probes = createProbeCounter(host);
      /** Mirror probers of the networks whose YAML policy names probeExcluded. */
      const probers = new Map<Network, ExcludedProber>();

      // Composed when the network is created, before its `network` hook: only a policy naming
      // probeExcluded gets a wrapper, so other networks' calls pay nothing.
      host.hooks.call.tap({ name: 'selection', stage: CallStage.SHADOW }, (inner: CallHandler, network: Network): CallHandler => {
        if (!asksForProbes(network)) return inner;
        const prober = new ExcludedProber(host, network, probes);
        probers.set(network, prober);
        return prober.wrap(inner);
      });

      host.hooks.network.tap('selection', (network: Network) => {
        let settings: SelectionSettings;
        try {
          settings = readSelectionSettings(network.config.settings.selectionPolicy, settingsPath(host, network));
        } catch (e) {
          host.logger.error(
            { project: network.project.id, network: network.id, err: (e as Error).message },
            `invalid selectionPolicy of ${network.id}: using the default policy`,
          );
          settings = readSelectionSettings(undefined, '');
        }
        const policy = hooks.policy.call(settings.evalFunc ?? opts.evalFunc ?? defaultPolicy, network);
        const sel = new ScopedSelection(host, network, settings, policy, metrics, maxDecisions, probers.get(network));
        nets.set(network, sel);
        sel.start();
      });

      // A network replaced by a config reload: its policy evaluation stops (the new one has its own).
      host.hooks.networkRetired.tap('selection', (network: Network) => {
        nets.get(network)?.retire();
        nets.delete(network);
        probers.get(network)?.stop();
        probers.delete(network);
      });

      host.hooks.upstreamJoined.tap('selection', (_u: Upstream, network: Network) => {
        void nets.get(network)?.evaluate();
      });

      // An upstream no connection reaches (refused, no route), or one reached again, re-orders its
      // networks at once rather than at the next evalInterval (the default policy's demoteDown).
      // Other turns (a timeout, an HTTP 5xx) wait for the tick, as the error-rate rules do.
      host.hooks.project.tapPromise('selection', async (project) => {
        const unreachable = new Set<string>();
        project.health.reachabilityListeners.push((upstream: string, r: Reachability) => {
          const was = unreachable.has(upstream);
          if (r.unreachable) unreachable.add(upstream);
          else unreachable.delete(upstream);
          if (was === (r.unreachable === true)) return;
          for (const [network, sel] of nets) if (network.project === project && network.upstreams.some((u) => u.id === upstream)) void sel.evaluate();
        });
        await Promise.resolve();
      });

      host.hooks.select.tap({ name: 'selection', stage: SelectStage.POLICY }, (ups: Upstream[], ctx: CallContext) => {
        const sel = nets.get(ctx.network);
        return sel ? sel.select(ups, ctx) : ups;
      });

      host.hooks.shutdown.tapPromise('selection', async () => {
        for (const sel of nets.values()) sel.stop();
      });
    },
  });
}
