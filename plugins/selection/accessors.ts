/**
 * Accessors of the selection plugin (spec §1.3, §3.1): its published hooks
 * ({@link selectionHooks}) and the per-network state, decisions and on-demand evaluation that the
 * admin `svc_project` method, other plugins (evm-state) and tests read. Published through the
 * host's service registry (services `selection.hooks` and `selection`), never module-level state,
 * so several proxies in one process, and a plugin built against another installed copy of svc,
 * all meet the same selection (issue #9 item 3). No hooks tapped here.
 */
import { SyncWaterfallHook } from 'tapable';
import type { Network, PluginHost } from 'svc/plugin';
import type { EvalFunc } from './policy.ts';
import type { NetworkSelection, SelectionDecision, SelectionState } from './state.ts';

/** Hooks the selection plugin publishes for other plugins (see {@link selectionHooks}). */
export interface SelectionHooks {
  /**
   * Chooses a network's policy when the network is created: receives the configured one
   * (`selectionPolicy.evalFunc`, else the plugin option, else {@link defaultPolicy}) and
   * returns the one to use. Lets a plugin install a policy (spec §1.3 "or from a plugin").
   */
  readonly policy: SyncWaterfallHook<[EvalFunc, Network]>;
}

/** Service names this plugin publishes. */
export const SELECTION_HOOKS_SERVICE = 'selection.hooks';
export const SELECTION_SERVICE = 'selection';
/** The service other plugins read the selection through ({@link SelectionApi}). */
export const SELECTION_API_SERVICE = 'selection.api';

/** What other plugins read of the selection (service {@link SELECTION_API_SERVICE}). */
export interface SelectionApi {
  /** The current order, scores and exclusions of a network (undefined when unknown). */
  state(projectId: string, networkId: string): SelectionState | undefined;
  /** Evaluates a network's policy now; false for an unknown network. */
  evaluate(projectId: string, networkId: string): Promise<boolean>;
}

/**
 * The selection plugin's hooks of a proxy (created on first use, so a plugin may tap them
 * whether it is applied before or after the selection plugin, as long as it is before start).
 */
export function selectionHooks(host: PluginHost): SelectionHooks {
  let h = host.services.get<SelectionHooks>(SELECTION_HOOKS_SERVICE);
  if (!h) {
    h = Object.freeze({ policy: new SyncWaterfallHook<[EvalFunc, Network]>(['policy', 'network']) });
    host.services.provide(SELECTION_HOOKS_SERVICE, h);
  }
  return h;
}

/**
 * Records the per-network selections of a proxy for the accessors below (the plugin's `apply`).
 * @param nets filled by the plugin as networks are created
 */
export function registerSelections(host: PluginHost, nets: Map<Network, NetworkSelection>): void {
  host.services.provide(SELECTION_SERVICE, nets);
}

function findSelection(host: PluginHost, projectId: string, networkId: string): NetworkSelection | undefined {
  const project = host.projects.get(projectId);
  const network = project?.networks.get(networkId) ?? project?.aliases.get(networkId);
  return network ? host.services.get<Map<Network, NetworkSelection>>(SELECTION_SERVICE)?.get(network) : undefined;
}

/**
 * The last selection decisions of a network (at most 100), oldest first. A decision is
 * recorded when it changes: an upstream newly excluded by a step (or by a different step), an
 * upstream included again (step `include`), a new order (step `order`, upstream `*`), and
 * every failed custom evaluation (step `evalFunc`, upstream `*`).
 * @param networkId `evm:<chainId>` or the network's alias
 * @returns an empty array for an unknown project/network or without the selection plugin
 */
export function selectionDecisions(host: PluginHost, projectId: string, networkId: string): SelectionDecision[] {
  return findSelection(host, projectId, networkId)?.decisions() ?? [];
}

/**
 * The current ordered list, last scores and exclusions of a network.
 * @param networkId `evm:<chainId>` or the network's alias
 * @returns undefined for an unknown project/network or without the selection plugin
 */
export function selectionState(host: PluginHost, projectId: string, networkId: string): SelectionState | undefined {
  return findSelection(host, projectId, networkId)?.state();
}

/**
 * Evaluates a network's policy now, outside the timer (admin, tests). Never rejects: a failed
 * custom policy keeps the previous order, as on a tick.
 * @returns resolves once the evaluation (and any evaluation it had to wait for) committed; false for an unknown network
 */
export async function evaluateSelection(host: PluginHost, projectId: string, networkId: string): Promise<boolean> {
  const sel = findSelection(host, projectId, networkId);
  if (!sel) return false;
  await sel.evaluate();
  return true;
}

/** Static accessors in the DESIGN's `XPlugin.getHooks(proxy)` style. */
export const SelectionPlugin = Object.freeze({
  getHooks: selectionHooks,
  getDecisions: selectionDecisions,
  getState: selectionState,
  evaluate: evaluateSelection,
});
