/**
 * Accessors of the selection plugin (spec §1.3, §3.1): the per-network state, decisions and
 * on-demand evaluation that the admin `svc_project` method, other plugins (evm-state) and tests
 * read; its published hooks are `selectionHooks` of `svc-proxy/plugin`. Published through the host's
 * service registry (services `selection.hooks`, `selection.api` and `selection`), never module-level state,
 * so several proxies in one process, and a plugin built against another installed copy of svc,
 * all meet the same selection. No hooks tapped here.
 */
import { serviceKey, type Network, type PluginHost } from 'svc-proxy/plugin';
import { selectionHooks, type SelectionDecision, type SelectionState } from './api.ts';
import type { ScopedSelection as NetworkSelection } from './scopes.ts';

// The hooks, the read-side contract and their service names are this plugin's contract (api.ts).
export { SELECTION_API_SERVICE, SELECTION_HOOKS_SERVICE, selectionHooks } from './api.ts';
export type { SelectionApi, SelectionHooks } from './api.ts';

/** Key of this plugin's per-network selections (internal: read by the accessors below, listed in the plugin's `provides`). */
export const SELECTION_SERVICE = serviceKey<Map<Network, NetworkSelection>>('selection');

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
  return network ? host.services.get(SELECTION_SERVICE)?.get(network) : undefined;
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

/** Static accessors in the `XPlugin.getHooks(host)` style (a contract reached through the plugin that owns it). */
export const SelectionPlugin = Object.freeze({
  getHooks: selectionHooks,
  getDecisions: selectionDecisions,
  getState: selectionState,
  evaluate: evaluateSelection,
});
