/**
 * Config of the websocket plugin: the `server.websocket` block (the endpoint's limits) and, from
 * the subscription hub (subscriptions/schema.ts), the keys it adds to upstream entries. Every key has a default, so a
 * config without the block serves WebSockets with the limits below.
 */
import { Duration, type Resolved, type SchemaFragment, settingsOf, Size, Strict, type TProperties, Type, type ResolvedServer } from 'svc-proxy/plugin';
import { hubUpstreamSchema } from './subscriptions/schema.ts';

/** Default most subscriptions one connection may hold. */
export const DEFAULT_MAX_SUBSCRIPTIONS = 100;
/** Default send-buffer cap of one connection, bytes (8 MiB). */
export const DEFAULT_MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
/** Default ping interval, ms. */
export const DEFAULT_PING_INTERVAL_MS = 30_000;
/** Default most connections open at once on one svc process. */
export const DEFAULT_MAX_CONNECTIONS = 10_000;
/** Default most connections one client (credential, or address when anonymous) may hold open. */
export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 100;
/** Default interval at which an open connection's credential is checked again, ms. */
export const DEFAULT_AUTH_RECHECK_INTERVAL_MS = 60_000;
/** Default head poll interval of `newHeads`/`logs` feeds, ms. */
export const DEFAULT_NEW_HEADS_POLL_INTERVAL_MS = 1_000;

/** The `server.websocket` block. */
export const WebSocketSchema = Strict(
  {
    enabled: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'serve WebSocket upgrades on the proxy port (`ws://host/<project>/evm/<chainId>`, the same paths as HTTP); false: upgrade requests are answered as plain HTTP',
      }),
    ),
    maxSubscriptionsPerConnection: Type.Optional(
      Type.Integer({
        minimum: 1,
        default: DEFAULT_MAX_SUBSCRIPTIONS,
        description: 'most `eth_subscribe` subscriptions one connection may hold at once; one more is refused with -32005 (the connection stays open)',
      }),
    ),
    maxBufferedBytes: Type.Optional(
      Size({
        default: '8MiB',
        description:
          'most bytes of answers and notifications waiting to be written to one client; over it (checked before each send) the connection is closed with code 1008 and its subscriptions dropped, so a client that does not read is never buffered without bound',
      }),
    ),
    pingInterval: Type.Optional(
      Duration({
        default: '30s',
        description:
          'how often svc pings each connection; a peer that has not answered the previous ping with a pong by the next one is cut (close code 1006 on its side); 0: no pings',
      }),
    ),
    newHeadsPollInterval: Type.Optional(
      Duration({
        default: '1s',
        description: "how often a network's head is polled while it has `newHeads` or `logs` subscribers (svc's own head tracking, across every upstream)",
      }),
    ),
    maxConnections: Type.Optional(
      Type.Integer({
        minimum: 1,
        default: DEFAULT_MAX_CONNECTIONS,
        description: 'most WebSocket connections open at once on this process (each worker counts its own); one more upgrade is refused with HTTP 503',
      }),
    ),
    maxConnectionsPerClient: Type.Optional(
      Type.Integer({
        minimum: 1,
        default: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        description:
          'most WebSocket connections one client may hold open on this process: per authenticated user id, or per client address when the project has no auth; one more upgrade is refused with HTTP 429',
      }),
    ),
    maxConnectionLifetime: Type.Optional(
      Duration({
        default: '0s',
        description:
          'longest a connection stays open; past it svc closes it with 1001 "connection lifetime reached" and the client reconnects (credentials and budgets are then checked afresh); 0: no limit',
      }),
    ),
    authRecheckInterval: Type.Optional(
      Duration({
        default: '1m',
        description:
          "how often an open connection's credential is checked again with the project's auth strategies (a revoked, disabled or expired key or token); a refusal closes it with 1008; 0: checked at the upgrade only",
      }),
    ),
  },
  { description: 'the WebSocket endpoint: limits per connection, keep-alive and subscription polling' },
);

/** The plugin's schema fragment: `server.websocket`, and the hub's keys on upstream entries (`upstreams[].wsEndpoint`). */
export const websocketSchema = {
  server: { websocket: Type.Optional(WebSocketSchema) },
  upstream: { ...hubUpstreamSchema },
} satisfies SchemaFragment;

/** The resolved `server.websocket` settings, every default filled (durations in ms, sizes in bytes). */
export interface WebSocketSettings {
  /** Whether upgrades are served. */
  enabled: boolean;
  /** Most subscriptions per connection. */
  maxSubscriptionsPerConnection: number;
  /** Send-buffer cap of one connection, bytes. */
  maxBufferedBytes: number;
  /** Ping interval, ms. */
  pingIntervalMs: number;
  /** Head poll interval of the subscription feeds, ms. */
  newHeadsPollIntervalMs: number;
  /** Most connections open at once on this process. */
  maxConnections: number;
  /** Most connections open at once per client (user id, else client address). */
  maxConnectionsPerClient: number;
  /** Longest life of a connection, ms; 0: none. */
  maxConnectionLifetimeMs: number;
  /** Interval of the credential re-check of an open connection, ms; 0: none. */
  authRecheckIntervalMs: number;
}

/**
 * The `server.websocket` settings of a resolved server block, defaults filled.
 * @param server `config.server`
 */
export function websocketSettingsOf(server: ResolvedServer): WebSocketSettings {
  const raw: Partial<Resolved<typeof WebSocketSchema>> =
    settingsOf(server, websocketSchema.server as TProperties & typeof websocketSchema.server).websocket ?? {};
  return {
    enabled: raw.enabled ?? true,
    maxSubscriptionsPerConnection: raw.maxSubscriptionsPerConnection ?? DEFAULT_MAX_SUBSCRIPTIONS,
    maxBufferedBytes: raw.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES,
    pingIntervalMs: raw.pingInterval ?? DEFAULT_PING_INTERVAL_MS,
    newHeadsPollIntervalMs: raw.newHeadsPollInterval ?? DEFAULT_NEW_HEADS_POLL_INTERVAL_MS,
    maxConnections: raw.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    maxConnectionsPerClient: raw.maxConnectionsPerClient ?? DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    maxConnectionLifetimeMs: raw.maxConnectionLifetime ?? 0,
    authRecheckIntervalMs: raw.authRecheckInterval ?? DEFAULT_AUTH_RECHECK_INTERVAL_MS,
  };
}
