/**
 * svc's own lifecycle metrics (spec §3.2 drain, §6 metrics): where the process is in its drain,
 * when the drain began and how many HTTP requests are in flight. With them the "drain stuck"
 * alert (deploy/prometheus/svc-alerts.yml `SvcDrainStuck`) needs nothing but svc's `/metrics`,
 * no orchestrator metrics (kube-state-metrics).
 *
 * Every value is read from the drain's live view when the registry is collected (on scrape):
 * nothing is counted or allocated on the request path.
 */
import { Gauge, type Registry } from 'prom-client';
import type { LifecycleState, LifecycleStatus } from 'svc-proxy/plugin';

/** Every lifecycle state, in the order a drain walks them (the `state` label's values). */
export const LIFECYCLE_STATES: readonly LifecycleState[] = ['serving', 'draining', 'closing', 'stopped'];

/**
 * Registers the three lifecycle gauges in `registry`, each collected from `status` on scrape:
 *
 * - `svc_server_lifecycle_state{state}`: 1 for the current state, 0 for the three others (all
 *   four series always exist, so `== 1` and `== 0` both select something);
 * - `svc_server_drain_started_timestamp_seconds`: unix time of the first SIGTERM/SIGINT, seconds;
 *   0 while serving (and after a direct close without a drain), so an alert tests `> 0` first;
 * - `svc_server_inflight_requests`: HTTP requests on the proxy listener not answered yet (the
 *   metrics listener's own scrapes are not counted: they go to another server).
 *
 * @param registry the proxy's registry (`PluginHost.metrics`)
 * @param status the drain's live view (`PluginHost.lifecycleStatus`)
 * @throws Error when the registry already holds one of these names (prom-client's own check)
 */
export function registerLifecycleMetrics(registry: Registry, status: LifecycleStatus): void {
  new Gauge({
    name: 'svc_server_lifecycle_state',
    help: 'Lifecycle state of the proxy: 1 for the current state (serving, draining, closing, stopped), 0 for the others',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const current = status.state;
      for (const state of LIFECYCLE_STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
  new Gauge({
    name: 'svc_server_drain_started_timestamp_seconds',
    help: 'Unix time the drain began (first SIGTERM/SIGINT), seconds; 0 while serving',
    registers: [registry],
    collect() {
      this.set(status.drainStartedAtMs / 1000);
    },
  });
  new Gauge({
    name: 'svc_server_inflight_requests',
    help: 'HTTP requests received on the proxy listener whose answer is not finished yet',
    registers: [registry],
    collect() {
      this.set(status.requestsInFlight);
    },
  });
}
