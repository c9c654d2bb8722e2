/**
 * `svc-proxy/plugins/websocket`: what the websocket plugin offers other plugins: its connection
 * lifecycle hooks and the open connection count.
 */
import { serviceKey, type HttpRequestInfo, type Identity, type Network, type Project, type ServiceKey } from 'svc-proxy/plugin';
import type { AsyncSeriesHook, SyncHook } from 'tapable';

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
 * An upgrade routed and authenticated, before the socket opens (the `upgrade` hook of {@link WebSocketService}): a prepaid connection's
 * payment is checked here (spec §5 item 1, pay per request).
 */
export interface WsUpgrade {
  /** The project the upgrade path routed to. */
  readonly project: Project;
  /** The network the path names, if any. */
  readonly network?: Network;
  /** The upgrade request's headers, query and client address. */
  readonly http: HttpRequestInfo;
  /** Who the connection runs as; a tap may replace it (a payer's address). */
  identity?: Identity;
  /** The connection-to-be: the `session` every message of it carries to the core `admit` hook, so state kept by it is per connection. */
  readonly session: object;
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
  /**
   * Runs after an upgrade is routed and authenticated, before it is upgraded: a tap refuses it by throwing a `SvcError` (the refusal's
   * `answer`, when it has one, is the HTTP response: a payment challenge), and may replace the identity. Skipped while nothing taps it.
   */
  readonly upgrade: AsyncSeriesHook<[WsUpgrade]>;
}

/** Key of the websocket plugin's {@link WebSocketService}. */
export const WEBSOCKET_SERVICE: ServiceKey<WebSocketService> = serviceKey<WebSocketService>('websocket');
