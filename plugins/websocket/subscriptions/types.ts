/**
 * The contract between the WebSocket endpoint (plugins/websocket/index.ts: sockets, messages,
 * limits) and the subscription hub (plugins/websocket/subscriptions/: `eth_subscribe` feeds from
 * svc's own head tracking). The endpoint owns the sockets; the hub owns the feeds and never
 * touches a socket, only a {@link SubscriptionSink}.
 */
import type { Network, Upstream } from 'svc-proxy/plugin';
import type { SvcError } from 'svc-proxy/plugin/errors';

/** The subscription types of the geth pub-sub API svc serves (spec: `eth_subscribe`). */
export type SubscriptionType = 'newHeads' | 'logs' | 'newPendingTransactions';

/** Where a subscription's notifications go: one client connection. */
export interface SubscriptionSink {
  /** Connection id, unique per process (logs, limits). */
  readonly id: string;
  /**
   * Sends one notification text frame (`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x…","result":…}}`).
   * The endpoint applies its send-buffer cap: a slow client is closed with 1008, after which
   * the endpoint calls {@link SubscriptionHub.dropSink}.
   */
  send(text: string): void;
}

/** Options of the hub, from the plugin's config. */
export interface HubOptions {
  /** How often a network's head is polled while it has `newHeads`/`logs` subscribers, ms (no upstream WebSocket feed needed). */
  pollIntervalMs: number;
  /** Most subscriptions one connection may hold (the endpoint enforces it; the hub refuses past it too). */
  maxPerConnection: number;
}

/** The subscription hub the endpoint drives. */
export interface SubscriptionHub {
  /**
   * Handles `eth_subscribe` params for a connection on a network.
   * @param params the call's params: `["newHeads"]`, `["logs", {address?, topics?}]`, `["newPendingTransactions"]`
   * @returns the subscription id (`0x`-hex, 16 bytes), unique per process
   * @throws SvcError: ErrInvalidParams for an unknown type or a bad filter (-32602),
   *   ErrEndpointUnsupported when no upstream can feed `newPendingTransactions`, a limit error
   *   past `maxPerConnection`
   */
  subscribe(network: Network, sink: SubscriptionSink, params: unknown): Promise<string>;
  /** Handles `eth_unsubscribe`: true when the id was the connection's own live subscription. */
  unsubscribe(sink: SubscriptionSink, id: string): boolean;
  /** Drops every subscription of a connection (it closed). */
  dropSink(sink: SubscriptionSink): void;
  /**
   * A config reload replaced a network (its config changed): its feeds move to the successor the
   * project now holds under the same id, so subscriptions follow the chain the new config builds.
   */
  networkReplaced(old: Network): void;
  /** An upstream left its network: upstream WebSocket feeds it held move to another upstream. */
  upstreamLeft(u: Upstream): void;
  /** Live subscriptions by type (the `svc_ws_subscriptions{type}` gauge). */
  counts(): Record<SubscriptionType, number>;
  /** Stops every feed (shutdown). */
  close(): Promise<void>;
}

/** Builds the error a refused subscribe answers with (re-exported for the endpoint's batch splitting). */
export type SubscribeError = SvcError;
