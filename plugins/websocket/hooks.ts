/**
 * The WebSocket endpoint's public lifecycle hooks (`WEBSOCKET_SERVICE` of `svc-proxy/plugin`):
 * observation only, so every tap runs inside a guard. A throwing tap is logged at most once a
 * minute per tap and counted in `svc_plugin_errors_total{plugin,hook}` (the counter the core
 * registers for its own observation hooks); the connection is unaffected.
 */
import { SyncHook } from 'tapable';
import { guardObservationHook, type PluginHost } from 'svc-proxy/plugin';
import type { SubscriptionType, WebSocketHooks, WsConnectionInfo } from './api.ts';

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
  for (const [name, hook] of Object.entries(hooks) as Array<[string, SyncHook<never[]>]>)
    guardObservationHook(hook, `ws.${name}`, host, 'the connection is unaffected');
  return hooks;
}
