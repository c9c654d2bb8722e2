/**
 * websocket plugin: the WebSocket endpoint on the proxy port, `ws://host/<project>/evm/<chainId>`
 * (the same paths, aliases and directives as HTTP).
 *
 * - Upgrade (upgrade.ts): routed with `host.resolveRoute`, refused with 503 unless svc is serving,
 *   authenticated with the project's strategies (credentials in headers or the query); a refusal
 *   is an HTTP response with a JSON-RPC error body, so the socket never opens. A path that names
 *   no project is answered 404, or left to another `upgrade` listener when there is one.
 * - Messages (messages.ts, connection.ts): every call or batch is served whole by
 *   `host.serveJsonRpc`, the pipeline of an HTTP POST (cache, multiplexing, failsafe, consensus,
 *   integrity, rate-limit budgets); `eth_subscribe` / `eth_unsubscribe` by the subscription hub
 *   (subscriptions/), which feeds notifications from svc's own head tracking across upstreams.
 *   Each `eth_subscribe` is charged to the caller's rate-limit budgets like a call; the
 *   per-connection subscription cap bounds them too.
 * - Caps (`server.websocket`): `maxConnections` open at once (over it: HTTP 503) and
 *   `maxConnectionsPerClient` per user id, or per client address when anonymous (HTTP 429);
 *   each `eth_subscribe` is charged to the caller's rate-limit budgets (`RATE_LIMIT_SERVICE`);
 *   `maxConnectionLifetime` closes old sockets with 1001, `authRecheckInterval` re-checks the
 *   credential of open ones (a refusal: 1008).
 * - Limits: `maxPayload` = `server.maxBodySize` (a larger message closes the socket with 1009),
 *   `MAX_IN_FLIGHT` messages served at once per connection, a subscription cap, a send-buffer
 *   cap (a slow client is closed with 1008), ping/pong liveness (`server.websocket`, schema.ts).
 * - Metrics: `svc_ws_connections{project}`, `svc_ws_subscriptions{type}`,
 *   `svc_ws_messages_total{project,direction}` (`in`/`out`, one per frame; notifications are `out`).
 * - Hooks: the `WEBSOCKET_SERVICE` of `svc-proxy/plugin` (open, message, subscribe, close; observation only).
 * - Shutdown: when `close()` begins (the `closing` hook) every connection is closed with 1001
 *   "server shutting down" (cut after a short grace), so the listener stops at once; then the hub stops.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Counter, Gauge } from 'prom-client';
import { WebSocketServer } from 'ws';
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { SvcError } from 'svc-proxy/plugin/errors';
import { RATE_LIMIT_SERVICE } from 'svc-proxy/plugins/rate-limit';
import { sleep } from 'svc-proxy/util';
import { WEBSOCKET_SERVICE, type WsUpgrade } from './api.ts';
import { AsyncSeriesHook } from 'tapable';
import { WsConnection } from './connection.ts';
import { createWebSocketHooks } from './hooks.ts';
import { websocketSchema, websocketSettingsOf, type WebSocketSettings } from './schema.ts';
import { createSubscriptionHub } from './subscriptions/hub.ts';
import type { SubscriptionHub } from './subscriptions/types.ts';
import { admitUpgrade, ErrOriginNotAllowed, refuseUpgrade } from './upgrade.ts';

export { ErrSubscriptionLimitExceeded, MAX_IN_FLIGHT, SLOW_CLOSE_GRACE_MS } from './connection.ts';
export { ErrOriginNotAllowed } from './upgrade.ts';
export {
  DEFAULT_AUTH_RECHECK_INTERVAL_MS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
  DEFAULT_MAX_BUFFERED_BYTES,
  DEFAULT_MAX_SUBSCRIPTIONS,
  DEFAULT_NEW_HEADS_POLL_INTERVAL_MS,
  DEFAULT_PING_INTERVAL_MS,
  websocketSchema,
  websocketSettingsOf,
  type WebSocketSettings,
} from './schema.ts';

/** svc holds `server.websocket.maxConnections` connections: one more is refused. HTTP 503, -32005. */
export class ErrTooManyConnections extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 503;
}

/** A client holds `server.websocket.maxConnectionsPerClient` connections: one more is refused. HTTP 429, -32005. */
export class ErrClientConnectionLimit extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 429;
}

/** How long shutdown waits for closing handshakes before cutting the remaining sockets, ms. */
const SHUTDOWN_GRACE_MS = 500;

/** The key a client's connections are counted under: its user id, else its address. */
function clientKeyOf(c: { identity?: { userId: string }; http: { clientAddress: string } }): string {
  return c.identity ? `user:${c.identity.userId}` : `addr:${c.http.clientAddress}`;
}

/**
 * Creates the websocket plugin (name `websocket`).
 * @returns a plugin owning `server.websocket`, providing `WEBSOCKET_SERVICE`, tapping `configured`,
 *   `listening` (the `upgrade` listener), `closing` and `shutdown`
 */
export function websocketPlugin(): Plugin {
  return definePlugin({
    name: 'websocket',
    provides: [WEBSOCKET_SERVICE],
    schema: websocketSchema,
    apply(host: PluginHost) {
      const hooks = createWebSocketHooks(host);
      const connections = new Set<WsConnection>();
      let settings: WebSocketSettings | undefined;
      let hub: SubscriptionHub | undefined;
      let wss: WebSocketServer | undefined;
      let pinger: NodeJS.Timeout | undefined;
      const upgrade = new AsyncSeriesHook<[WsUpgrade]>(['upgrade']);
      host.services.provide(WEBSOCKET_SERVICE, { hooks, connections: () => connections.size, upgrade });

      const open = new Gauge({ name: 'svc_ws_connections', help: 'WebSocket connections open now', labelNames: ['project'], registers: [host.metrics] });
      const refused = new Counter({
        name: 'svc_ws_upgrades_refused_total',
        help: 'WebSocket upgrades refused by a cap or the CORS origins',
        labelNames: ['reason'],
        registers: [host.metrics],
      });
      const closedBySvc = new Counter({
        name: 'svc_ws_closed_by_svc_total',
        help: 'WebSocket connections svc closed: lifetime reached, credential no longer valid',
        labelNames: ['reason'],
        registers: [host.metrics],
      });
      /** Open connections (and upgrades being completed) per client key. */
      const perClient = new Map<string, number>();
      let reserved = 0;
      const messages = new Counter({
        name: 'svc_ws_messages_total',
        help: 'WebSocket messages (frames) received (in) and sent (out: answers and notifications)',
        labelNames: ['project', 'direction'],
        registers: [host.metrics],
      });
      new Gauge({
        name: 'svc_ws_subscriptions',
        help: 'Live eth_subscribe subscriptions by type',
        labelNames: ['type'],
        registers: [host.metrics],
        collect() {
          this.reset();
          if (hub) for (const [type, n] of Object.entries(hub.counts())) this.set({ type }, n);
        },
      });

      host.hooks.configured.tap('websocket', (c) => {
        settings = websocketSettingsOf(c.server);
      });

      // A config reload replaced a network: its subscriptions follow the new one.
      host.hooks.networkRetired.tap('websocket', (old) => hub?.networkReplaced(old));
      // An upstream removed (reload) or out of service: its upstream WebSocket feeds move on.
      host.hooks.upstreamLeft.tap('websocket', (u) => hub?.upstreamLeft(u));

      host.hooks.listening.tapPromise('websocket', async () => {
        const s = settings;
        const server = host.httpServer;
        if (!s?.enabled || !server) return;
        const h = (hub = createSubscriptionHub(host, { pollIntervalMs: s.newHeadsPollIntervalMs, maxPerConnection: s.maxSubscriptionsPerConnection }));
        const ws = (wss = new WebSocketServer({ noServer: true, maxPayload: host.config.server.maxBodySize, perMessageDeflate: false, clientTracking: false }));
        const deps = {
          host,
          hub: h,
          hooks,
          settings: s,
          messages,
          rateLimit: host.services.get(RATE_LIMIT_SERVICE),
          closedBySvc: (reason: 'lifetime' | 'auth') => closedBySvc.inc({ reason }),
          closed: (conn: WsConnection) => {
            connections.delete(conn);
            open.dec({ project: conn.info.project.id });
            release(clientKeyOf(conn.info));
          },
        };
        const release = (key: string): void => {
          reserved--;
          const n = (perClient.get(key) ?? 1) - 1;
          if (n <= 0) perClient.delete(key);
          else perClient.set(key, n);
        };
        const version = host.version;
        const details = host.config.server.includeErrorDetails;
        const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
          // Until ws owns the socket, a reset must not become an uncaught error.
          const swallow = () => undefined;
          socket.on('error', swallow);
          admitUpgrade(host, req, server.listenerCount('upgrade') > 1, upgrade).then(
            (accepted) => {
              if (accepted === 'not-ours') {
                socket.off('error', swallow);
                return;
              }
              if (socket.destroyed || host.isClosed) {
                socket.destroy();
                return;
              }
              const key = clientKeyOf({ identity: accepted.identity, http: accepted.info });
              if (reserved >= s.maxConnections) {
                refused.inc({ reason: 'max_connections' });
                host.logger.warn({ open: reserved }, 'websocket: upgrade refused: server.websocket.maxConnections reached');
                refuseUpgrade(
                  socket,
                  new ErrTooManyConnections(`too many WebSocket connections (${s.maxConnections}): retry later or on another replica`),
                  version,
                  details,
                );
                return;
              }
              if ((perClient.get(key) ?? 0) >= s.maxConnectionsPerClient) {
                refused.inc({ reason: 'max_connections_per_client' });
                refuseUpgrade(
                  socket,
                  new ErrClientConnectionLimit(
                    `limit exceeded: this client holds ${s.maxConnectionsPerClient} WebSocket connections (server.websocket.maxConnectionsPerClient)`,
                  ),
                  version,
                  details,
                );
                return;
              }
              // Counted before the handshake ends, so concurrent upgrades cannot pass the caps together.
              reserved++;
              perClient.set(key, (perClient.get(key) ?? 0) + 1);
              socket.once('close', () => {
                if (!opened) release(key);
              });
              let opened = false;
              ws.handleUpgrade(req, socket, head, (client) => {
                opened = true;
                socket.off('error', swallow);
                const conn = new WsConnection(client, accepted, deps);
                connections.add(conn);
                open.inc({ project: accepted.target.project.id });
                hooks.open.call(conn.info);
              });
            },
            (e: unknown) => {
              if (e instanceof ErrOriginNotAllowed) refused.inc({ reason: 'origin' });
              refuseUpgrade(socket, e, version, details);
            },
          );
        };
        server.on('upgrade', onUpgrade);
        if (s.pingIntervalMs > 0) {
          pinger = setInterval(() => {
            for (const c of connections) c.heartbeat();
          }, s.pingIntervalMs);
          pinger.unref();
        }
      });

      // The listener is about to stop: upgraded sockets are not its connections, so they get their
      // 1001 now (and are cut after a short grace), letting the listener close at once.
      let closingSockets: Promise<void> | undefined;
      host.hooks.closing.tap('websocket', () => {
        clearInterval(pinger);
        if (connections.size === 0) return;
        for (const c of [...connections]) c.shutdown();
        closingSockets = (async () => {
          const deadline = Date.now() + SHUTDOWN_GRACE_MS;
          while (connections.size > 0 && Date.now() < deadline) await sleep(20);
          for (const c of [...connections]) c.terminate();
        })();
      });

      host.hooks.shutdown.tapPromise('websocket', async () => {
        clearInterval(pinger);
        await closingSockets;
        for (const c of [...connections]) c.terminate();
        wss?.close();
        await hub?.close();
      });
    },
  });
}
