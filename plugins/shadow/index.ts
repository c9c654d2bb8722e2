/**
 * shadow plugin (spec §3.1): trial a provider on production traffic before
 * trusting it. An upstream with `shadow` set never serves a client; after a client call is
 * answered, a sampled copy goes to each shadow upstream of the network, off the request path, and
 * the shadow's result is compared with the served one by canonical hash (the same as consensus):
 * `svc_shadow_comparison_total{project,network,upstream,method,outcome}` with `match`,
 * `mismatch` or `error`, and a debug log naming the first differing field. `shadow.ignoreFields`
 * (per method, dot paths with `*`) drops fields from both answers first. Written against the
 * public plugin API only (`svc-proxy/plugin`).
 *
 * - `select` (at `SelectStage.POLICY`, placed before the `selection` tap): drops shadow upstreams
 *   from every client call's candidates, so neither the selection policy, `use-upstream`, the
 *   sweep, hedges nor consensus ever see them. Internal calls (state polls) keep them: spec §3.1.
 * - `call` at `CallStage.SHADOW` (inside interpolation: the copy names the same block as the
 *   served call; inside the cache: a cache hit reached no upstream and is not copied). A network
 *   none of whose possible upstreams is a shadow gets the inner handler back unchanged.
 * - Copies go through `host.upstreamCall` (the shadow's own chain: timeout, breaker, rate limit),
 *   so cordons do not stop them (spec §3.1), at most `maxInFlight` per process; one more is
 *   dropped and counted in `svc_shadow_dropped_total{project,network,upstream}`.
 * - Never copied: failed calls (only answers are compared), internal calls, writes, signatures,
 *   subscriptions, filters and node administration (`mirrorable`).
 * - `shutdown`: stops sending; copies in flight get a short grace, then the pools close.
 */
import {
  type CallContext,
  type CallHandler,
  CallStage,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  type RpcResult,
  SelectStage,
  type Upstream,
} from 'svc-proxy/plugin';
import { SHADOW_UPSTREAM } from './api.ts';
import { DeferredCounter } from 'svc-proxy/util';
import { compareResults, type ShadowOutcome } from './compare.ts';
import { DEFAULT_MAX_IN_FLIGHT, ShadowRunner } from './runner.ts';
import { mirrorable, shadowSchema, shadowSettingsOf, type ShadowSettings } from './schema.ts';

export { compareResults, ignoreOf, type Comparison, type ShadowOutcome } from './compare.ts';
export { DEFAULT_MAX_IN_FLIGHT, ShadowRunner } from './runner.ts';
export {
  MAX_IGNORE_METHODS,
  MAX_IGNORE_PATH_LENGTH,
  MAX_IGNORE_PATHS,
  MAX_SHADOW_METHODS_LENGTH,
  mirrorable,
  shadowSchema,
  shadowSettingsOf,
  type ShadowSettings,
} from './schema.ts';

/** Longest time one copy may take, ms, unless `server.maxTimeout` is shorter. */
export const DEFAULT_SHADOW_TIMEOUT_MS = 10_000;
/** Longest wait at shutdown for copies in flight, ms. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 2_000;

/** Options of {@link shadowPlugin}; every field is optional and meant for tests and embedding. */
export interface ShadowPluginOptions {
  /** Sample source, uniform in [0, 1) (default `Math.random`): a copy is sent when `random() < sampleRate`. */
  random?: () => number;
  /** Copies in flight per process, at least 1 (default {@link DEFAULT_MAX_IN_FLIGHT}). */
  maxInFlight?: number;
  /** Deadline of one copy, ms (default the smaller of `server.maxTimeout` and {@link DEFAULT_SHADOW_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Longest wait at shutdown for copies in flight, ms (default {@link DEFAULT_SHUTDOWN_GRACE_MS}). */
  shutdownGraceMs?: number;
}

/** One shadow upstream of one network. */
interface Target {
  upstream: Upstream;
  settings: ShadowSettings;
  /** Per-method glob results, bounded (method names come from clients). */
  memo: Map<string, boolean>;
}

/** Distinct methods whose `methods` match is remembered per shadow upstream. */
const MEMO_LIMIT = 1024;

/**
 * Creates the shadow plugin (name `shadow`).
 * @param opts sample source, concurrency bound, copy deadline, shutdown grace (tests)
 * @returns a plugin owning `upstreams[].shadow`, tapping `configured`, `upstreamJoined`,
 *   `select`, `call` and `shutdown`
 * @throws RangeError when `opts.maxInFlight` is not a positive integer
 */
export function shadowPlugin(opts: ShadowPluginOptions = {}): Plugin {
  const random = opts.random ?? Math.random;
  const graceMs = opts.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  return definePlugin({
    name: 'shadow',
    schema: shadowSchema,
    apply(host: PluginHost) {
      let timeoutMs = opts.timeoutMs ?? DEFAULT_SHADOW_TIMEOUT_MS;
      const runner = new ShadowRunner(opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, (e) =>
        host.logger.error({ plugin: 'shadow', err: e instanceof Error ? e.stack : String(e) }, 'shadow: a copy failed unexpectedly'),
      );
      /** Every shadow upstream that joined a network: the `select` tap's filter. */
      const shadows = new Set<Upstream>();
      /** Shadow targets per network, filled as upstreams join (after the `call` chain was composed). */
      const targets = new Map<Network, Target[]>();
      const targetsOf = (network: Network): Target[] => {
        let t = targets.get(network);
        if (!t) targets.set(network, (t = []));
        return t;
      };
      const metrics = shadowMetrics(host);

      host.hooks.configured.tap('shadow', (config) => {
        if (opts.timeoutMs === undefined) timeoutMs = Math.min(config.server.maxTimeoutMs, DEFAULT_SHADOW_TIMEOUT_MS);
      });

      // Every way into `network.upstreams` (configured chain id, probe, providers) fires this.
      host.hooks.upstreamJoined.tap('shadow', (u: Upstream, network: Network) => {
        const settings = shadowSettingsOf(u.config.settings.shadow);
        if (!settings) return;
        shadows.add(u);
        SHADOW_UPSTREAM.set(u, true);
        const list = targetsOf(network);
        if (!list.some((t) => t.upstream === u)) list.push({ upstream: u, settings, memo: new Map() });
      });

      // A config reload removed the upstream or replaced the network: no more copies to it there.
      host.hooks.upstreamLeft.tap('shadow', (u: Upstream, network: Network) => {
        const list = targets.get(network);
        const i = list ? list.findIndex((t) => t.upstream === u) : -1;
        if (list && i >= 0) list.splice(i, 1);
        if (u.state === 'failed') shadows.delete(u);
      });
      host.hooks.networkRetired.tap('shadow', (network: Network) => {
        targets.delete(network);
      });

      // Before the selection policy, so nothing downstream (policy, use-upstream, sweep) sees a shadow.
      host.hooks.select.tap({ name: 'shadow', stage: SelectStage.POLICY, before: 'selection' }, (ups: Upstream[], ctx: CallContext) => {
        if (shadows.size === 0 || ctx.internal) return ups;
        for (const u of ups) if (shadows.has(u)) return ups.filter((x) => !shadows.has(x));
        return ups;
      });

      host.hooks.call.tap({ name: 'shadow', stage: CallStage.SHADOW }, (inner: CallHandler, network: Network): CallHandler => {
        // Composed before any upstream joined: decided from config, so unconfigured networks pay nothing.
        if (!mayHaveShadows(network)) return inner;
        const list = targetsOf(network);
        return (ctx: CallContext) => {
          if (ctx.internal || list.length === 0) return inner(ctx);
          // Captured now: what the served call asked (after interpolation, outside this wrapper).
          const method = ctx.request.method;
          const params = ctx.request.params;
          return inner(ctx).then((r) => {
            try {
              offer(network, list, ctx.project.id, method, params, r);
            } catch (e) {
              // Never let the copy's bookkeeping change the client's answer.
              host.logger.error({ plugin: 'shadow', err: e instanceof Error ? e.stack : String(e) }, 'shadow: scheduling a copy failed');
            }
            return r;
          });
        };
      });

      host.hooks.shutdown.tapPromise('shadow', () => runner.close(graceMs));

      /** Schedules one copy per matching shadow of the network (never awaited). */
      function offer(network: Network, list: readonly Target[], project: string, method: string, params: unknown, served: RpcResult): void {
        if (runner.closed || host.isClosed || !mirrorable(method)) return;
        for (const t of list) {
          if (!wants(t, method)) continue;
          // A shadow taken out of the network (wrong chain id) gets nothing.
          if (!network.upstreams.includes(t.upstream)) continue;
          if (!runner.offer(() => mirror(network, t.upstream, project, method, params, served, t.settings.ignore))) {
            if (!runner.closed) metrics.dropped.inc([project, network.id, t.upstream.id]);
          }
        }
      }

      /** Whether a call of `method` is copied to `t` this time: its `methods` glob, then a sample. */
      function wants(t: Target, method: string): boolean {
        const rate = t.settings.sampleRate;
        if (rate <= 0) return false;
        let m = t.memo.get(method);
        if (m === undefined) {
          m = t.settings.matches(method);
          if (t.memo.size < MEMO_LIMIT) t.memo.set(method, m);
        }
        return m && (rate >= 1 || random() < rate);
      }

      /** Sends one copy and records how its answer compares with the served one. */
      async function mirror(
        network: Network,
        u: Upstream,
        project: string,
        method: string,
        params: unknown,
        served: RpcResult,
        ignore: ShadowSettings['ignore'],
      ): Promise<void> {
        const label = host.methodLabel.value(method);
        let shadowValue: unknown;
        try {
          shadowValue = (await host.upstreamCall(network, u, method, params, timeoutMs)).result;
        } catch (e) {
          metrics.count(project, network.id, u.id, label, 'error');
          host.logger.debug(
            { project, network: network.id, upstream: u.id, method, err: e instanceof Error ? e.message : String(e) },
            `shadow upstream ${u.id} failed on ${method}`,
          );
          return;
        }
        // Read only here, long after the answer left: the served result is never touched on the request path.
        const servedValue = served.result;
        const debug = host.logger.isLevelEnabled('debug');
        const cmp = compareResults(method, servedValue, shadowValue, debug, ignore);
        metrics.count(project, network.id, u.id, label, cmp.outcome);
        if (cmp.outcome === 'mismatch' && debug) {
          host.logger.debug(
            { project, network: network.id, upstream: u.id, method, field: cmp.field },
            `shadow upstream ${u.id} disagrees on ${method} at ${cmp.field ?? '$'}`,
          );
        }
      }
    },
  });
}

/**
 * True when an upstream of the network's project may be a shadow of it: a configured upstream
 * with `shadow` set whose chain id is unset or the network's, or `upstreamDefaults.shadow`
 * (upstreams added at run time inherit it).
 */
function mayHaveShadows(network: Network): boolean {
  const pc = network.project.config;
  if (shadowSettingsOf(pc.upstreamDefaults.shadow)) return true;
  return pc.upstreams.some((u) => (u.chainId === undefined || u.chainId === network.chainId) && shadowSettingsOf(u.settings.shadow) !== undefined);
}

/** The plugin's metrics, counted as plain numbers and published on each registry read. */
function shadowMetrics(host: PluginHost): {
  count(project: string, network: string, upstream: string, method: string, outcome: ShadowOutcome): void;
  dropped: DeferredCounter;
} {
  const comparisons = new DeferredCounter(host.metrics, {
    name: 'svc_shadow_comparison_total',
    help: 'Answered client calls copied to a shadow upstream (spec §3.1), by how its answer compared with the served one: match, mismatch (canonical hash), error (no answer)',
    labelNames: ['project', 'network', 'upstream', 'method', 'outcome'],
  });
  const dropped = new DeferredCounter(host.metrics, {
    name: 'svc_shadow_dropped_total',
    help: 'Copies to a shadow upstream not sent because the per-process bound of copies in flight was reached',
    labelNames: ['project', 'network', 'upstream'],
  });
  return { count: (project, network, upstream, method, outcome) => comparisons.inc([project, network, upstream, method, outcome]), dropped };
}
