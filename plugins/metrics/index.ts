/**
 * metrics plugin (spec §6).
 * Taps: `attemptDone` (upstream request counters and latency; errors only when charged to the
 * upstream, core/pipeline/blame.ts `isCharged`), `callDone` (requests received),
 * `listening`/`shutdown` (serves prom-client's registry at `/metrics` on `metrics.port`; the
 * listener closes after every other shutdown tap). Lifecycle gauges: ./lifecycle.ts.
 * Every label taken from client input is bounded: at most 200 methods, 50 agent names and 1000
 * users per process, then `other`, each value cut to 64 characters, so a client cannot blow up
 * `/metrics`.
 * Keys under `metrics` (./options.ts, eRPC's): `errorLabelMode`, `histogramBuckets` (the two
 * latency histograms' buckets, set when they are created), `histogramDropLabels` and
 * `histogramLabelOverrides` (applied to every histogram where `/metrics` is written,
 * ./histogram-filter.ts).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Registry } from 'prom-client';
import { type AttemptRecord, type CallContext, FINALITY, definePlugin, type Plugin, type PluginHost, serviceKey, ShutdownStage } from 'svc-proxy/plugin';
import { isCharged } from 'svc-proxy/plugin/contracts';
import { agentName, BoundedLabel, DeferredCounter, DeferredHistogram, svcWorker, createMetricsServer } from 'svc-proxy/util';
export { agentName, BoundedLabel, MAX_LABEL_LENGTH } from 'svc-proxy/util';
import { registerLifecycleMetrics } from './lifecycle.ts';
import { FilteredRegistry, unknownFilterNames } from './histogram-filter.ts';
import { type MetricsOptions, metricsOptionsOf, metricsSchema, VerboseErrorLabels } from './options.ts';
export { DEFAULT_LATENCY_BUCKETS, metricsOptionsOf, parseBuckets, verboseErrorLabel, type ErrorLabelMode, type MetricsOptions } from './options.ts';
export { droppedLabels, FilteredRegistry, mergeSamples } from './histogram-filter.ts';

/** Options of the metrics plugin. */
export interface MetricsPluginOptions {
  /** Distinct method labels per process (default 200). */
  maxMethods?: number;
  /** Distinct agent names per process (default 50). */
  maxAgents?: number;
  /** Distinct user labels per process (default 1000). */
  maxUsers?: number;
}

/** Handle to read the metrics listener address (tests bind port 0). */
/** Key of the metrics listener (read by {@link metricsAddress}). */
export const METRICS_SERVER_SERVICE = serviceKey<Server>('metrics.server');

/** The address the metrics listener of a proxy is bound to, once listening. */
export function metricsAddress(host: PluginHost): AddressInfo | undefined {
  return host.services.get(METRICS_SERVER_SERVICE)?.address() as AddressInfo | undefined;
}

/**
 * Creates the metrics plugin.
 * @param opts label bounds
 */
export function metricsPlugin(opts: MetricsPluginOptions = {}): Plugin {
  return definePlugin({
    name: 'metrics',
    // No `provides`: METRICS_SERVER_SERVICE is published from `listening`, once the listener is bound
    // (and only when svc serves /metrics itself); a declaration promises a service once apply returns.
    schema: metricsSchema,
    apply(host: PluginHost) {
      const reg = host.metrics;
      // Set from the config on `configured` (config hooks may still change it during apply).
      let options!: MetricsOptions;
      let verbose: VerboseErrorLabels | undefined;
      let exposition!: FilteredRegistry;
      let upstreamDuration!: DeferredHistogram;
      let callDuration!: DeferredHistogram;
      const methods = opts.maxMethods !== undefined ? new BoundedLabel(opts.maxMethods) : host.methodLabel;
      const agents = new BoundedLabel(opts.maxAgents ?? 50);
      const users = new BoundedLabel(opts.maxUsers ?? 1000);
      const upstreamTotal = new DeferredCounter(reg, {
        name: 'svc_upstream_request_total',
        help: 'Upstream requests sent, by upstream and method (category)',
        labelNames: ['project', 'vendor', 'network', 'upstream', 'category', 'finality'],
      });
      const upstreamErrors = new Counter({
        name: 'svc_upstream_request_errors_total',
        help: "Upstream requests that failed through the upstream's fault (charged to it), by named error; facts about the request are not counted",
        labelNames: ['project', 'vendor', 'network', 'upstream', 'category', 'error'],
        registers: [reg],
      });
      host.hooks.configured.tap('metrics', (config) => {
        options = metricsOptionsOf(config.metrics.settings ?? {});
        verbose = options.errorLabelMode === 'verbose' ? new VerboseErrorLabels() : undefined;
        exposition = new FilteredRegistry(reg, options);
        // The latency histograms, with `metrics.histogramBuckets` (eRPC applies them to these).
        upstreamDuration = new DeferredHistogram(reg, {
          name: 'svc_upstream_request_duration_seconds',
          help: 'Upstream request duration in seconds',
          labelNames: ['project', 'vendor', 'network', 'upstream', 'category'],
          buckets: options.buckets,
        });
        callDuration = new DeferredHistogram(reg, {
          name: 'svc_network_request_duration_seconds',
          help: 'Time from a call being routed to its answer, seconds, per network, method and finality',
          labelNames: ['project', 'network', 'category', 'finality'],
          buckets: options.buckets,
        });
      });
      // Process metrics (CPU, RSS, heap, event-loop lag, GC): prom-client's defaults, read on scrape.
      // Registered once svc listens: they start an event-loop monitor and a GC observer that are
      // never stopped, which a proxy built only to validate a config (reload) must not leave behind.
      host.hooks.listening.tapPromise('metrics:process', async () => {
        collectDefaultMetrics({ register: reg });
      });
      // Lifecycle (drain state, drain start, in-flight requests): read from the drain on scrape.
      registerLifecycleMetrics(reg, host.lifecycleStatus);
      const received = new DeferredCounter(reg, {
        name: 'svc_network_request_received_total',
        help: 'Calls received per network',
        labelNames: ['project', 'network', 'category', 'finality', 'user', 'agent_name'],
      });

      // Label values of the current observation: one reused array per metric, nothing allocated
      // per call (the trees copy them into a cell's labels only when a label set is new).
      const upValues = ['', '', '', '', '', ''];
      const durValues = ['', '', '', '', ''];
      const callValues = ['', '', '', ''];

      host.hooks.attemptDone.tap('metrics', (a: AttemptRecord) => {
        if (!a.dialled) return;
        const category = methods.value(a.method);
        upValues[0] = a.projectId;
        upValues[1] = a.vendor;
        upValues[2] = a.networkId;
        upValues[3] = a.upstreamId;
        upValues[4] = category;
        upValues[5] = a.finality;
        upstreamTotal.inc(upValues);
        // The histogram's labels are the counter's without finality.
        for (let i = 0; i < 5; i++) durValues[i] = upValues[i] as string;
        upstreamDuration.observe(upstreamDuration.child(durValues), a.durationMs / 1000);
        // Only what is charged to the upstream: not svc's own failures, not facts about the
        // request (reverts, bad params, over-size requests, an error a second upstream confirmed).
        if (a.error && a.outcome !== 'success' && isCharged(a)) {
          const error = verbose ? verbose.value(a.error.name, a.error.message) : a.error.name;
          upstreamErrors.inc({ project: a.projectId, vendor: a.vendor, network: a.networkId, upstream: a.upstreamId, category, error });
        }
      });

      host.hooks.callDone.tap('metrics', (ctx: CallContext) => {
        if (ctx.internal) return;
        const ua = ctx.http.query['user-agent'] ?? (ctx.http.headers['user-agent'] as string | undefined);
        const category = methods.value(ctx.request.method);
        const finality = FINALITY.get(ctx);
        callValues[0] = ctx.project.id;
        callValues[1] = ctx.network.id;
        callValues[2] = category;
        callValues[3] = finality;
        callDuration.observe(callDuration.child(callValues), ctx.record.durationMs / 1000);
        received.inc([ctx.project.id, ctx.network.id, category, finality, users.value(ctx.identity?.userId ?? 'anonymous'), agents.value(agentName(ua))]);
      });

      host.hooks.listening.tapPromise('metrics', async () => {
        const mcfg = host.config.metrics;
        // Every plugin has registered its histograms by now: name what the filter cannot find.
        if (exposition.active || options.keepLabels.size > 0) for (const w of await unknownFilterNames(reg, options)) host.logger.warn(w);
        if (!mcfg.enabled) return;
        if (svcWorker()) {
          // One of several workers: the primary serves /metrics, summed over the workers
          // (prom-client's AggregatorRegistry asks each worker for its metrics over IPC).
          serveToPrimary(exposition);
          return;
        }
        const server = createMetricsServer({ metrics: () => exposition.metrics(), contentType: reg.contentType });
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(host.overrides.metricsPort ?? mcfg.port, mcfg.host, () => resolve());
        });
        host.services.provide(METRICS_SERVER_SERVICE, server);
        host.logger.info({ listen: `http://${mcfg.host}:${(server.address() as AddressInfo).port}`, path: '/metrics' }, 'metrics listening');
      });
      // Last of the shutdown taps: /metrics answers through draining, closing and stopped, until
      // the stores and pollers are closed, so a drain stuck anywhere stays visible to the alert.
      host.hooks.shutdown.tapPromise({ name: 'metrics', stage: ShutdownStage.METRICS_LISTENER }, async () => {
        const s = host.services.get(METRICS_SERVER_SERVICE);
        if (s) await new Promise<void>((r) => s.close(() => r()));
      });
    },
  });
}

/**
 * Answers the primary's metrics requests in a worker (`server.workers` > 1) with this proxy's
 * metrics, the histogram label filter applied: prom-client's cluster support reads the
 * registries given to `AggregatorRegistry.setRegistries`, so a registry whose JSON is the
 * filtered view stands in for the proxy's own.
 */
function serveToPrimary(exposition: FilteredRegistry): void {
  class WorkerView extends Registry {
    override getMetricsAsJSON(): ReturnType<Registry['getMetricsAsJSON']> {
      return exposition.view().getMetricsAsJSON();
    }
  }
  // Constructing an AggregatorRegistry installs the worker's IPC responder (idempotent).
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([new WorkerView()]);
}
