/**
 * failsafe plugin: timeout, retry, hedge and circuit breaker.
 * Taps: `attempt` (network scope, outside in: timeout( retry( hedge( sweep )))) at the
 * AttemptStage numbers; `upstream` (per-upstream scope: retry( breaker( timeout( transport ))), the
 * timeout bounding one attempt) at
 * the UpstreamStage numbers; `directives` (an entry's `directiveDefaults`, below the network's).
 * The first `failsafe[]` entry whose `matchMethod` glob and `matchFinality` match the call applies;
 * it is resolved once per call and cached in the call's state.
 *
 * Written in-house rather than on cockatiel: the hedge must share one pass over the selected
 * upstreams between legs, let a non-empty pending answer beat an empty one, and never hedge
 * writes; retries must start a new sweep; and the breaker must ignore rate limits, timeouts and
 * cancelled hedge legs. cockatiel's policies wrap opaque functions and cannot express those.
 * The mechanisms are svc's shared primitives (svc-proxy/util `CountBreaker`, `hedge`, `backoffDelay`,
 * `sleep`); the files here hold the rules.
 *
 * Files: `schema.ts` (config, defaults, entry matching), `checks.ts` (start-up checks),
 * `adaptive.ts` (quantile-based timeouts and hedge delays), `policies.ts` (retry delays,
 * retryable errors, timeouts), `breaker.ts` (circuit breaker), `hedge.ts` (hedge race),
 * `metrics.ts` (timeout metrics), `network.ts` (`directives` and `attempt` taps), `upstream.ts`
 * (`upstream` taps); this file wires them.
 */
import { definePlugin, type Plugin, type PluginHost, type Upstream } from 'svc-proxy/plugin';
import { BREAKERS_SERVICE } from './api.ts';
import { LatencyQuantiles } from './adaptive.ts';
import type { CircuitBreaker } from './breaker.ts';
import { checkFailsafe } from './checks.ts';
import { FailsafeMetrics } from './metrics.ts';
import { tapNetworkFailsafe } from './network.ts';
import { failsafeSchemaFragment } from './schema.ts';
import { tapUpstreamFailsafe } from './upstream.ts';

export { flattenAdaptiveForms } from './adaptive-forms.ts';
export { hedgeSpec, LatencyQuantiles, QUANTILE_MEMO_MS, resolveAdaptive, timeoutSpec, type AdaptiveSpec } from './adaptive.ts';
export { breakerOutcome, CircuitBreaker } from './breaker.ts';
export { checkFailsafe } from './checks.ts';
export { failsafeEntryOf } from './network.ts';
export { dataUnavailableDelay, isDataUnavailable, isRetryable, retryDelay } from './policies.ts';
export { DEFAULT_NETWORK_FAILSAFE, DEFAULT_UPSTREAM_FAILSAFE, matchEntry, WRITE_METHODS } from './schema.ts';
export type { FailsafeEntry } from './schema.ts';

/** The circuit breakers of an upstream (one per failsafe entry with a `circuitBreaker`), as this plugin published them. */
export function upstreamBreakers(host: PluginHost, u: Upstream): readonly CircuitBreaker[] {
  return (host.services.get(BREAKERS_SERVICE)?.get(u) ?? []) as readonly CircuitBreaker[];
}

/** Options of the failsafe plugin. */
export interface FailsafePluginOptions {
  /** Clock for breakers (tests), ms. */
  now?: () => number;
}

/**
 * Creates the failsafe plugin.
 * @param opts test hooks
 */
export function failsafePlugin(opts: FailsafePluginOptions = {}): Plugin {
  return definePlugin({
    name: 'failsafe',
    provides: [BREAKERS_SERVICE],
    schema: failsafeSchemaFragment(),
    apply(host: PluginHost) {
      const now = opts.now ?? Date.now;
      // Adaptive timeouts need a duration or a ceiling, floors below ceilings...: refused at start-up with their paths.
      host.hooks.configured.tap('failsafe', checkFailsafe);
      const latency = new LatencyQuantiles();
      const metrics = new FailsafeMetrics(host);
      // Network scope first (its counters, then the directives and attempt taps), then upstream scope.
      tapNetworkFailsafe(host, latency, metrics);
      const proxyBreakers = new Map<Upstream, CircuitBreaker[]>();
      host.services.provide(BREAKERS_SERVICE, proxyBreakers);
      // An upstream removed by a config reload (or out of service) keeps no breakers.
      host.hooks.upstreamLeft.tap('failsafe', (u: Upstream) => {
        if (u.state === 'failed') proxyBreakers.delete(u);
      });
      tapUpstreamFailsafe(host, now, proxyBreakers, latency, metrics);
    },
  });
}
