/**
 * The selection plugin's metrics, shared by every network of a host: `svc_selection_score`,
 * `svc_selection_excluded_seconds` and `svc_selection_shadow_exclusions_total`. Written by the
 * network scope of each network (`state.ts`); narrower `evalScope` scopes publish none.
 */
import type { PluginHost } from 'svc-proxy/plugin';
import { DeferredCounter } from 'svc-proxy/util';
import { Gauge } from 'prom-client';

/** Metrics shared by every network of a host. */
export interface SelectionMetrics {
  score: Gauge<'project' | 'network' | 'method' | 'upstream'>;
  excluded: Gauge<'upstream'>;
  /** `svc_selection_shadow_exclusions_total{project,network,upstream}`: evaluations whose `shadowExcludeIf` would have excluded it. */
  shadowExclusions: DeferredCounter;
}

/**
 * Registers the selection gauges of a proxy (shared by every network).
 * @param host the plugin host whose registry receives them
 */
export function createSelectionMetrics(host: PluginHost): SelectionMetrics {
  return {
    score: new Gauge({
      name: 'svc_selection_score',
      help: 'Selection score of an upstream, lower is better (method "*": the whole upstream)',
      labelNames: ['project', 'network', 'method', 'upstream'],
      registers: [host.metrics],
    }),
    excluded: new Gauge({
      name: 'svc_selection_excluded_seconds',
      help: 'Seconds an upstream has been continuously excluded by the selection policy (0 while selectable)',
      labelNames: ['upstream'],
      registers: [host.metrics],
    }),
    shadowExclusions: new DeferredCounter(host.metrics, {
      name: 'svc_selection_shadow_exclusions_total',
      help: "Evaluations in which a YAML policy's shadowExcludeIf would have excluded the upstream (recorded, not applied)",
      labelNames: ['project', 'network', 'upstream'],
    }),
  };
}
