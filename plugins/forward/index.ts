/**
 * forward plugin: the innermost network handler.
 * Taps: `attempt` at the lowest stage — installs the sweep that walks a leg's upstreams in
 * the selected order until one answers (core/pipeline/sweep.ts). Without it the proxy routes nothing.
 */
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { createSweep } from 'svc-proxy/plugin/contracts';

/** Stage of the forward tap: below every failsafe wrapper, so it ends up innermost. */
export const FORWARD_STAGE = -1000;

/**
 * Creates the forward plugin.
 * @returns a plugin tapping `attempt`
 */
export function forwardPlugin(): Plugin {
  return definePlugin({
    name: 'forward',
    apply(host: PluginHost) {
      const sweep = createSweep(host.hooks);
      host.hooks.attempt.tap({ name: 'forward', stage: FORWARD_STAGE }, () => sweep);
    },
  });
}
