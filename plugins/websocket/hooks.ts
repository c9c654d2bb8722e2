/**
 * The WebSocket endpoint's public lifecycle hooks (`WEBSOCKET_SERVICE` of `svc/plugin`):
 * observation only, so every tap runs inside a guard. A throwing tap is logged at most once a
 * minute per tap and counted in `svc_plugin_errors_total{plugin,hook}` (the counter the core
 * registers for its own observation hooks); the connection is unaffected.
 */
import type { Counter } from 'prom-client';
import { SyncHook } from 'tapable';
import type { Logger, PluginHost, SubscriptionType, WebSocketHooks, WsConnectionInfo } from 'svc/plugin';

/** How often one tap's failure is logged, ms. */
const TAP_ERROR_LOG_INTERVAL_MS = 60_000;

/** A registered tap as tapable's interceptors see it. */
interface FullTap {
  name: string;
  type: 'sync' | 'async' | 'promise';
  fn: Function;
}

/**
 * Creates the hooks, each guarded.
 * @param host where failures are logged and counted
 */
export function createWebSocketHooks(host: Pick<PluginHost, 'logger' | 'metrics'>): WebSocketHooks {
  const hooks: WebSocketHooks = Object.freeze({
    open: new SyncHook<[WsConnectionInfo]>(['connection']),
    message: new SyncHook<[WsConnectionInfo, string]>(['connection', 'text']),
    subscribe: new SyncHook<[WsConnectionInfo, SubscriptionType, unknown]>(['connection', 'type', 'filter']),
    close: new SyncHook<[WsConnectionInfo, number, string]>(['connection', 'code', 'reason']),
  });
  for (const [name, hook] of Object.entries(hooks) as Array<[string, SyncHook<never[]>]>) {
    hook.intercept({ register: <T extends FullTap>(tap: T): T => guard(tap, `ws.${name}`, host.logger, errorsCounter(host)) });
  }
  return hooks;
}

/** The core's `svc_plugin_errors_total`, when the registry has it (it does on a running proxy). */
function errorsCounter(host: Pick<PluginHost, 'metrics'>): Counter<'plugin' | 'hook'> | undefined {
  return host.metrics.getSingleMetric('svc_plugin_errors_total') as Counter<'plugin' | 'hook'> | undefined;
}

/** The tap wrapped so that an exception is logged (rate-limited) and counted, never thrown. */
function guard<T extends FullTap>(tap: T, hookName: string, logger: Logger, errors: Counter<'plugin' | 'hook'> | undefined): T {
  const plugin = tap.name.split(':')[0] ?? tap.name;
  const fn = tap.fn as (...args: unknown[]) => unknown;
  let lastLog = -Infinity;
  return {
    ...tap,
    fn: (...args: unknown[]) => {
      try {
        return fn(...args);
      } catch (e) {
        errors?.inc({ plugin, hook: hookName });
        const now = Date.now();
        if (now - lastLog >= TAP_ERROR_LOG_INTERVAL_MS) {
          lastLog = now;
          logger.error({ plugin, hook: hookName, tap: tap.name, err: e instanceof Error ? e.stack : String(e) }, `plugin ${plugin}: ${hookName} tap threw (logged at most once a minute; the connection is unaffected)`);
        }
        return undefined;
      }
    },
  };
}
