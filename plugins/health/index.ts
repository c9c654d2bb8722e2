/**
 * health plugin: the spec §6 cordon metrics
 * (`svc_upstream_cordoned`, `svc_upstream_cordon_event_total`, `svc_upstream_cordon_duration_seconds`)
 * and `svc_upstream_up` (whether each upstream answered its last attempt)
 * from the tracker's cordon edges; and it feeds every finished upstream attempt into
 * its project's health tracker (lib/health-window.ts: rolling error and throttle rates,
 * latency quantiles, cordons). Taps `attemptDone` at `AttemptDoneStage.HEALTH`, before any
 * observer reads scores. Only errors that are the upstream's fault count as errors
 * (`healthOutcome`, core/pipeline/blame.ts); an attempt whose charge waited for another upstream's answer
 * (core/pipeline/charge.ts) arrives here once its verdict is known, at the latest when its call ends. A preset without it (the minimal one) pays nothing for health
 * tracking; plugins that read scores (selection, the failsafe hedge's quantile delay) declare it
 * in `dependsOn`.
 */
import { AttemptDoneStage, type AttemptRecord, definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import type { CordonChange } from 'svc-proxy/plugin/contracts';
import { Counter, Gauge, Histogram } from 'prom-client';

/** Longest cordon reason kept as a label, characters (reasons come from operators, still bounded). */
const MAX_REASON_LABEL = 64;

/**
 * Creates the health plugin (name `health`).
 * @returns a plugin tapping `attemptDone`; no config keys (the window is `projects[].scoreMetricsWindowSize`)
 */
export function healthPlugin(): Plugin {
  return definePlugin({
    name: 'health',
    apply(host: PluginHost) {
      host.hooks.attemptDone.tap({ name: 'health', stage: AttemptDoneStage.HEALTH }, (a: AttemptRecord) => {
        const project = host.projects.get(a.projectId);
        if (!project) return;
        const u = project.upstreams.get(a.upstreamId);
        // An attempt that outlived its upstream (removed or replaced by a config reload while in
        // flight) counts in no window: not a successor's under the same id.
        if (!u || a.startedAt < u.createdAt) return;
        project.health.record(a);
      });

      // Spec §6 cordon metrics, fed by the tracker's real edges only.
      const cordoned = new Gauge({
        name: 'svc_upstream_cordoned',
        help: '1 while an (upstream, method) is cordoned, else 0',
        labelNames: ['project', 'upstream', 'method', 'reason'],
        registers: [host.metrics],
      });
      const events = new Counter({
        name: 'svc_upstream_cordon_event_total',
        help: 'Real cordon edges, off-to-on (cordon) and on-to-off (uncordon)',
        labelNames: ['project', 'network', 'upstream', 'action'],
        registers: [host.metrics],
      });
      const durations = new Histogram({
        name: 'svc_upstream_cordon_duration_seconds',
        help: 'How long a cordon lasted, seconds, observed on uncordon',
        labelNames: ['project', 'network', 'upstream'],
        buckets: [1, 10, 60, 300, 900, 3600, 14_400, 86_400],
        registers: [host.metrics],
      });
      // Whether each upstream answers at all (lib/reachability.ts): its last attempt, client call
      // or state poll, got an answer (1) or none (0: refused, reset, timed out, HTTP 5xx).
      const up = new Gauge({
        name: 'svc_upstream_up',
        help: '1 when the upstream answered its last attempt (a call or a state poll), 0 when that attempt got no answer (refused, reset, timed out, HTTP 5xx)',
        labelNames: ['project', 'network', 'upstream'],
        registers: [host.metrics],
      });
      host.hooks.project.tapPromise('health', async (project) => {
        project.health.reachabilityListeners.push((upstream, r) => {
          const chain = project.upstreams.get(upstream)?.chainId;
          up.set({ project: project.id, network: chain !== undefined ? `evm:${chain}` : 'unknown', upstream }, r.up ? 1 : 0);
        });
        project.health.cordonListeners.push((c: CordonChange) => {
          const chain = project.upstreams.get(c.upstream)?.chainId;
          const network = chain !== undefined ? `evm:${chain}` : 'unknown';
          const method = host.methodLabel.value(c.method);
          if (c.action === 'reason') {
            // A reason overwrite is no edge: the old reason's series goes, the new one is 1 (spec §3.1).
            cordoned.remove({ project: project.id, upstream: c.upstream, method, reason: (c.previousReason ?? '').slice(0, MAX_REASON_LABEL) });
            cordoned.set({ project: project.id, upstream: c.upstream, method, reason: c.reason.slice(0, MAX_REASON_LABEL) }, 1);
            return;
          }
          cordoned.set({ project: project.id, upstream: c.upstream, method, reason: c.reason.slice(0, MAX_REASON_LABEL) }, c.action === 'cordon' ? 1 : 0);
          events.inc({ project: project.id, network, upstream: c.upstream, action: c.action });
          if (c.durationMs !== undefined) durations.observe({ project: project.id, network, upstream: c.upstream }, c.durationMs / 1000);
        });
        await Promise.resolve();
      });
    },
  });
}
