/**
 * metrics plugin (spec §6, issue #2 item 6).
 * Taps: `attemptDone` (upstream request counters and latency), `callDone` (requests received),
 * `listening`/`shutdown` (serves prom-client's registry at `/metrics` on `metrics.port`).
 * Every label taken from client input is bounded: at most 200 methods, 50 agent names and 1000
 * users per process, then `other`, each value cut to 64 characters, so a client cannot blow up
 * `/metrics` (issue #8 item 4).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Histogram, type Registry } from 'prom-client';
import { FINALITY, type AttemptRecord, type CallContext } from '../../core/context.ts';
import type { Plugin, Proxy } from '../../core/proxy.ts';
import type { PluginHost } from '../../core/host.ts';
import { agentName, BoundedLabel } from '../../core/labels.ts';

export { agentName, BoundedLabel, MAX_LABEL_LENGTH } from '../../core/labels.ts';


/** One label set of a {@link DeferredCounter}: its labels and the count not yet handed to prom-client. */
interface CounterCell {
  labels: Record<string, string>;
  pending: number;
}

/** A level of a {@link DeferredCounter}'s tree: label value to the next level, or to the cell at the last label. */
type CellLevel = Map<string, CellLevel | CounterCell>;

/**
 * A prom-client counter counted as plain numbers on the request path and handed to prom-client
 * when the registry is read (the counter's `collect`). A call then pays a few map lookups on
 * label values (strings whose hash V8 caches) instead of prom-client's per-`inc` label
 * validation and key hashing; the exposition is the same, since every read of the registry
 * flushes first (pino: work that can wait runs later). Label sets are bounded by the callers'
 * {@link BoundedLabel}s.
 */
export class DeferredCounter {
  private readonly root: CellLevel = new Map();
  private readonly cells: CounterCell[] = [];
  private readonly counter: Counter<string>;

  /**
   * @param registry the registry the counter is registered in
   * @param config name, help and label names of the counter
   */
  constructor(
    registry: Registry,
    private readonly config: { name: string; help: string; labelNames: readonly string[] },
  ) {
    this.counter = new Counter({ name: config.name, help: config.help, labelNames: config.labelNames, registers: [registry], collect: () => this.flush() });
  }

  /**
   * Adds 1 to a label set.
   * @param values the label values, in `labelNames` order
   */
  inc(values: readonly string[]): void {
    let level = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      const v = values[i] as string;
      let next = level.get(v) as CellLevel | undefined;
      if (!next) {
        next = new Map();
        level.set(v, next);
      }
      level = next;
    }
    const v = values[last] as string;
    let cell = level.get(v) as CounterCell | undefined;
    if (!cell) {
      const labels: Record<string, string> = {};
      this.config.labelNames.forEach((name, i) => (labels[name] = values[i] as string));
      cell = { labels, pending: 0 };
      level.set(v, cell);
      this.cells.push(cell);
    }
    cell.pending++;
  }

  /** Hands the pending counts to prom-client (the counter's `collect`, run on every registry read). */
  flush(): void {
    for (const cell of this.cells) {
      if (cell.pending === 0) continue;
      this.counter.inc(cell.labels, cell.pending);
      cell.pending = 0;
    }
  }
}

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
/** Service name of the metrics listener (read by {@link metricsAddress}). */
export const METRICS_SERVER_SERVICE = 'metrics.server';

/** The address the metrics listener of a proxy is bound to, once listening. */
export function metricsAddress(host: PluginHost): AddressInfo | undefined {
  return host.services.get<Server>(METRICS_SERVER_SERVICE)?.address() as AddressInfo | undefined;
}

/**
 * Creates the metrics plugin.
 * @param opts label bounds
 */
export function metricsPlugin(opts: MetricsPluginOptions = {}): Plugin {
  return {
    name: 'metrics',
    apply(proxy: Proxy) {
      const reg = proxy.metrics;
      const methods = opts.maxMethods !== undefined ? new BoundedLabel(opts.maxMethods) : proxy.methodLabel;
      const agents = new BoundedLabel(opts.maxAgents ?? 50);
      const users = new BoundedLabel(opts.maxUsers ?? 1000);
      const upstreamTotal = new DeferredCounter(reg, {
        name: 'svc_upstream_request_total',
        help: 'Upstream requests sent, by upstream and method (category)',
        labelNames: ['project', 'vendor', 'network', 'upstream', 'category', 'finality'],
      });
      const upstreamErrors = new Counter({
        name: 'svc_upstream_request_errors_total',
        help: 'Upstream requests that failed, by named error',
        labelNames: ['project', 'vendor', 'network', 'upstream', 'category', 'error'],
        registers: [reg],
      });
      const upstreamDuration = new Histogram({
        name: 'svc_upstream_request_duration_seconds',
        help: 'Upstream request duration in seconds',
        labelNames: ['project', 'vendor', 'network', 'upstream', 'category'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        registers: [reg],
      });
      const callDuration = new Histogram({
        name: 'svc_network_request_duration_seconds',
        help: 'Time from a call being routed to its answer, seconds, per network, method and finality (issue #12 item 6)',
        labelNames: ['project', 'network', 'category', 'finality'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        registers: [reg],
      });
      // Process metrics (CPU, RSS, heap, event-loop lag, GC): prom-client's defaults, read on scrape.
      collectDefaultMetrics({ register: reg });
      const received = new DeferredCounter(reg, {
        name: 'svc_network_request_received_total',
        help: 'Calls received per network',
        labelNames: ['project', 'network', 'category', 'finality', 'user', 'agent_name'],
      });

      // Children bound once per label set: prom-client otherwise sorts and hashes the label object
      // on every observe (issue #11). Label values are bounded (upstreams, methodLabel), so is the map.
      const durations = new Map<string, Histogram.Internal<string>>();
      const durationOf = (a: AttemptRecord, category: string): Histogram.Internal<string> => {
        const key = `${a.projectId}\0${a.vendor}\0${a.networkId}\0${a.upstreamId}\0${category}`;
        let h = durations.get(key);
        if (!h) {
          h = upstreamDuration.labels({ project: a.projectId, vendor: a.vendor, network: a.networkId, upstream: a.upstreamId, category });
          durations.set(key, h);
        }
        return h;
      };

      proxy.hooks.attemptDone.tap('metrics', (a: AttemptRecord) => {
        if (!a.dialled) return;
        const category = methods.value(a.method);
        upstreamTotal.inc([a.projectId, a.vendor, a.networkId, a.upstreamId, category, a.finality]);
        durationOf(a, category).observe(a.durationMs / 1000);
        // svc's own failures are not the upstream's errors (issue #8 item 1).
        if (a.error && a.outcome !== 'success' && a.error.name !== 'ErrInternal') {
          upstreamErrors.inc({ project: a.projectId, vendor: a.vendor, network: a.networkId, upstream: a.upstreamId, category, error: a.error.name });
        }
      });

      const callDurations = new Map<string, Histogram.Internal<string>>();
      const callDurationOf = (project: string, network: string, category: string, finality: string): Histogram.Internal<string> => {
        const key = `${project}\0${network}\0${category}\0${finality}`;
        let h = callDurations.get(key);
        if (!h) {
          h = callDuration.labels({ project, network, category, finality });
          callDurations.set(key, h);
        }
        return h;
      };

      proxy.hooks.callDone.tap('metrics', (ctx: CallContext) => {
        if (ctx.internal) return;
        const ua = ctx.http.query['user-agent'] ?? (ctx.http.headers['user-agent'] as string | undefined);
        const category = methods.value(ctx.request.method);
        const finality = FINALITY.get(ctx);
        callDurationOf(ctx.project.id, ctx.network.id, category, finality).observe(ctx.record.durationMs / 1000);
        received.inc([
          ctx.project.id,
          ctx.network.id,
          category,
          finality,
          users.value(ctx.identity?.userId ?? 'anonymous'),
          agents.value(agentName(ua)),
        ]);
      });

      proxy.hooks.listening.tapPromise('metrics', async () => {
        const mcfg = proxy.config.metrics;
        if (!mcfg.enabled) return;
        const server = createServer((req, res) => {
          if (req.method === 'GET' && (req.url ?? '').split('?')[0] === '/metrics') {
            reg.metrics().then(
              (text) => {
                res.writeHead(200, { 'content-type': reg.contentType });
                res.end(text);
              },
              (e: Error) => {
                res.writeHead(500, { 'content-type': 'text/plain' });
                res.end(e.message);
              },
            );
            return;
          }
          res.writeHead(404, { 'content-type': 'text/plain' });
          res.end('not found: metrics are served at /metrics\n');
        });
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(proxy.overrides.metricsPort ?? mcfg.port, mcfg.host, () => resolve());
        });
        proxy.services.provide(METRICS_SERVER_SERVICE, server);
        proxy.logger.info({ listen: `http://${mcfg.host}:${(server.address() as AddressInfo).port}/metrics` }, 'metrics listening');
      });
      proxy.hooks.shutdown.tapPromise('metrics', async () => {
        const s = proxy.services.get<Server>(METRICS_SERVER_SERVICE);
        if (s) await new Promise<void>((r) => s.close(() => r()));
      });
    },
  };
}
