/**
 * health plugin (issue #3 item 1, issue #9 item 5): feeds every finished upstream attempt into
 * its project's health tracker (core/registry/health.ts: rolling error and throttle rates,
 * latency quantiles, cordons). Taps `attemptDone` at `AttemptDoneStage.HEALTH`, before any
 * observer reads scores. A preset without it (the minimal one) pays nothing for health
 * tracking; plugins that read scores (selection, the failsafe hedge's quantile delay) declare it
 * in `dependsOn`.
 */
import type { AttemptRecord } from '../../core/context.ts';
import type { Plugin, PluginHost } from '../../core/host.ts';
import { AttemptDoneStage } from '../../core/stages.ts';

/**
 * Creates the health plugin (name `health`).
 * @returns a plugin tapping `attemptDone`; no config keys (the window is `projects[].scoreMetricsWindowSize`)
 */
export function healthPlugin(): Plugin {
  return {
    name: 'health',
    apply(host: PluginHost) {
      host.hooks.attemptDone.tap({ name: 'health', stage: AttemptDoneStage.HEALTH }, (a: AttemptRecord) => host.projects.get(a.projectId)?.health.record(a));
    },
  };
}
