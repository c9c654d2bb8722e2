/**
 * Metrics of the failsafe plugin's timeouts and data-unavailable waits (eRPC's
 * `erpc_network_timeout_fired_total`, `erpc_network_timeout_duration_seconds` and
 * `erpc_network_data_unavailable_wait_seconds`, under svc's prefix), shared by both scopes.
 * No hooks here.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import { type CallContext, FINALITY, type PluginHost } from 'svc-proxy/plugin';

/** Which policy a timeout belongs to. */
export type TimeoutScope = 'network' | 'upstream';

/** The failsafe plugin's timeout and wait metrics of one proxy. */
export class FailsafeMetrics {
  /** `svc_network_timeout_fired_total{project,network,category,finality,scope}`: calls (network) or attempts (upstream) a timeout policy cut. */
  readonly fired: Counter<'project' | 'network' | 'category' | 'finality' | 'scope'>;
  /** `svc_network_timeout_duration_seconds{project,network,category,scope}`: each adaptive (quantile) deadline computed. */
  readonly duration: Histogram<'project' | 'network' | 'category' | 'scope'>;
  /** `svc_network_data_unavailable_wait_seconds{project,network,category}`: waits before a network round when the data was not there yet. */
  readonly dataUnavailableWait: Histogram<'project' | 'network' | 'category'>;

  /** Counts one fired timeout (the `onFire` callback of `withTimeout`; a method, so no closure per call). */
  readonly timeoutFired = (ctx: CallContext, scope: TimeoutScope): void => {
    this.fired.inc({
      project: ctx.project.id,
      network: ctx.network.id,
      category: this.host.methodLabel.value(ctx.request.method),
      finality: FINALITY.get(ctx),
      scope,
    });
  };

  /** @param host the proxy whose registry gets the metrics */
  constructor(private readonly host: PluginHost) {
    const registers: Registry[] = [host.metrics];
    this.fired = new Counter({
      name: 'svc_network_timeout_fired_total',
      help: 'Calls (scope network) or upstream attempts (scope upstream) cut by a failsafe timeout policy, static or adaptive',
      labelNames: ['project', 'network', 'category', 'finality', 'scope'],
      registers,
    });
    this.duration = new Histogram({
      name: 'svc_network_timeout_duration_seconds',
      help: 'Adaptive (quantile) failsafe timeouts computed for calls, seconds',
      labelNames: ['project', 'network', 'category', 'scope'],
      buckets: [0.05, 0.1, 0.3, 0.5, 1, 3, 5, 10, 30],
      registers,
    });
    this.dataUnavailableWait = new Histogram({
      name: 'svc_network_data_unavailable_wait_seconds',
      help: 'Waits before a network retry round when the last one failed because the data was not there yet (one block time, else retry.emptyResultDelay), seconds',
      labelNames: ['project', 'network', 'category'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers,
    });
  }

  /** Records an adaptive deadline computed for a call. */
  observeTimeout(ctx: CallContext, scope: TimeoutScope, ms: number): void {
    this.duration.observe({ project: ctx.project.id, network: ctx.network.id, category: this.host.methodLabel.value(ctx.request.method), scope }, ms / 1000);
  }
}
