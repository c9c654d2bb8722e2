/**
 * `svc-proxy/plugins/websocket`: what the websocket plugin offers other plugins: its connection
 * lifecycle hooks and the open connection count.
 */
import { serviceKey, type HttpRequestInfo, type Identity, type Network, type Project, type ServiceKey } from 'svc-proxy/plugin';
import type { SyncHook } from 'tapable';

/** The subscription types of the geth pub-sub API (`eth_subscribe`) svc serves. */
export type SubscriptionType = 'newHeads' | 'logs' | 'newPendingTransactions';

/** One WebSocket connection as the lifecycle hooks see it (read-only: observe, never change). */
export interface WsConnectionInfo {
  /** Connection id, unique in the process (`ws-<n>`). */
  readonly id: string;
  /** The project the upgrade path routed to. */
  readonly project: Project;
  /** The network the path names; undefined when each call names it with the body field `networkId`. */
  readonly network?: Network;
  /** The upgrade request's headers, query and client address (what auth and directives read). */
  readonly http: HttpRequestInfo;
  /** Who the upgrade was authenticated as, when the project has auth strategies. */
  readonly identity?: Identity;
}

/**
 * The WebSocket endpoint's lifecycle hooks (tapable `SyncHook`s, observation only): a throwing tap
 * is logged and counted in `svc_plugin_errors_total{plugin,hook}` and never breaks the
 * connection. Taps run on the connection's hot path: keep them cheap.
 */
export interface WebSocketHooks {
  /** A connection opened (after routing, auth and the upgrade). */
  readonly open: SyncHook<[WsConnectionInfo]>;
  /** A message arrived (its UTF-8 text, a call or a batch, at most `server.maxBodySize` bytes), before it is served. */
  readonly message: SyncHook<[WsConnectionInfo, string]>;
  /** A subscription was accepted: its type and its filter (`eth_subscribe` params[1], e.g. the `logs` filter; undefined when none). */
  readonly subscribe: SyncHook<[WsConnectionInfo, SubscriptionType, unknown]>;
  /** A connection closed: the close code (1000 normal, 1001 shutdown, 1008 too slow or policy, 1009 too big, 1006 cut) and reason. */
  readonly close: SyncHook<[WsConnectionInfo, number, string]>;
}

/**
 * What the websocket plugin offers other plugins: its lifecycle hooks and the open connection
 * count. Tap from your plugin's `apply` when it is applied after `websocket` (declare
 * `dependsOn: ['websocket']`), else from `configured`.
 */
export interface WebSocketService {
  /** The lifecycle hooks. */
  readonly hooks: WebSocketHooks;
  /** Connections open now (upgraded and not yet closed). */
  connections(): number;
}

/** Key of the websocket plugin's {@link WebSocketService}. */
export const WEBSOCKET_SERVICE: ServiceKey<WebSocketService> = serviceKey<WebSocketService>('websocket');
